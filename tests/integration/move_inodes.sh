# Inodes on the target of a move (docs/operations.md "Room on the disks"): a file system can run
# out of inodes with gigabytes free. The agent reports each local disk's free inodes (status and
# metrics, beside the free bytes), and the move's pre-flight keeps [cluster] min_free_inodes free
# besides the inodes the slice's parts take. A lab node's data directory is on the machine's
# file system (millions of inodes), so the threshold is set above the real count: `ferry move`
# refuses naming the target, the disk and its free inodes, before anything is journaled or
# written on the target. With the default threshold the same move goes through, rows identical.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 3 20000
want=$(mv_fp "$U1" acme 0)
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null # inventory: routes
tok=$(cat "$L/node2/agent.token")
curl -sf -H "Authorization: Bearer $tok" "$U2/agent/v1/status" >"$T/st.json" || fail "agent status"
inodes=$(jq '[.disks[] | select(.remote | not) | .free_inodes] | min' "$T/st.json")
total=$(jq '[.disks[] | select(.remote | not) | .total_inodes] | max' "$T/st.json")
[ "$inodes" -gt 0 ] && [ "$total" -ge "$inodes" ] || fail "the agent reports no free inodes: $(jq -c .disks "$T/st.json")"
curl -sf -H "Authorization: Bearer $tok" "$U2/agent/v1/metrics" >"$T/metrics.txt" || fail "agent metrics"
grep -q '^ferry_agent_disk_free_inodes{disk="default"} [1-9]' "$T/metrics.txt" || fail "no free inodes in the agent's metrics: $(grep disk_free "$T/metrics.txt")"
grep -q '^ferry_agent_disk_free_bytes{disk="default"} [1-9]' "$T/metrics.txt" || fail "no free bytes in the agent's metrics"
grep -q '^ferry_agent_disk_size_bytes{disk="default"} [1-9]' "$T/metrics.txt" || fail "no disk size in the agent's metrics"
ok "node2's agent reports $inodes free inodes of $total on its local disks (status and metrics)"

# ---- a threshold above the real count: refused before anything is written ----------------------
C2=$T/inodes.conf
sed "/^\[cluster\]/a min_free_inodes = $((inodes * 2))" "$C" >"$C2"
grep -q "^min_free_inodes = " "$C2" || fail "no [cluster] section in $C"
expect_exit 1 "$FERRY_BIN" move --config "$C2" --tenant acme --split 0 --to node2
assert_contains "$ERR" "target shard node2: disk 'default'" "names the target and the disk"
assert_contains "$ERR" "free inodes" "names inodes"
assert_contains "$ERR" "min_free_inodes = $((inodes * 2))" "names the threshold"
assert_contains "$ERR" "nothing was moved" "says nothing moved"
assert_eq "" "$OUT" "nothing on stdout"
assert_eq 0 "$(sqlite3 "$L/catalog.db" "SELECT count(*) FROM records WHERE parent = 'moves'")" "nothing journaled"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.parts WHERE database = 'default' AND (partition LIKE '%acme%' OR table LIKE '%staging%')")" "no part of the slice (real or staging) on node2"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.detached_parts WHERE database = 'default'")" "nothing detached on node2"
assert_eq "node1" "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "the route is unchanged"
assert_eq "$want" "$(mv_fp "$U1" acme 0)" "node1 still holds every row"
mv_no_residue "$L"
ok "min_free_inodes above node2's free inodes: the move is refused before anything is written: ${ERR%%$'\n'*}"

# ---- the default threshold: the move goes through ------------------------------------------------
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200 >"$T/m.out" 2>"$T/m.err" || fail "move: $(tail -5 "$T/m.err")"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "node2 holds the slice, rows identical"
assert_eq "node2" "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "routed to node2"
ok "with the default min_free_inodes the same move goes through"
done_testing
