# Disk full on the target of a move. The target node's data directory is a small loop-mounted
# ext4 (we run as root here). 1) Pre-flight: with less room than the slice's hot bytes plus a
# margin, `ferry move` refuses before journaling anything, naming the target, the disk and both
# sizes. 2) A real ENOSPC mid-transfer: the disk is filled while a hot part is being received;
# the move fails with a message naming the target and "No space left on device", the target
# side is rolled back (no staged part, no half-received folder), the journal says FAILED, the
# source still serves every row and the route is unchanged. 3) After space is freed the same
# move succeeds with identical data. Without root (no loop mount) only the part that needs no
# small file system runs: the agent reports free space and the pre-flight passes; it says so.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

export FERRY_AGENT_TEST_SLOW_RECEIVE_MS=400 # inherited by the nodes: a part takes seconds to arrive
L=$T/lab
MNT=$L/node2/data
IMG=$T/node2.img
mode=unprivileged
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null; then
    mkdir -p "$MNT"
    truncate -s 160M "$IMG"
    mkfs.ext4 -q -m 0 "$IMG"
    if mount -o loop "$IMG" "$MNT" 2>"$T/mount.err"; then
        mode=loop
        _df_cleanup() {
            "$FERRY_BIN" lab down --dir "$L" >/dev/null 2>&1
            umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
            rm -f "$IMG"
        }
        at_exit _df_cleanup
    else
        echo "# loop mount failed: $(cat "$T/mount.err")"
    fi
fi
echo "# mode: $mode"
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 4 100000
for d in 1 2; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$U1" acme 0)
hot=$(chq "$U1" "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'default'")
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null # inventory: routes
tok=$(cat "$L/node2/agent.token")
free2=$(curl -sf -H "Authorization: Bearer $tok" "$U2/agent/v1/status" | jq '[.disks[] | select(.remote | not) | .free_bytes] | min')
[ "$free2" -gt 0 ] || fail "the agent reports no free space: $free2"
ok "agent status reports free space of node2's local disk ($free2 bytes); slice hot bytes $hot"

if [ "$mode" != loop ]; then
    echo "# not root or no loop device: the disk-full cases need a small file system; skipped"
    done_testing
    exit 0
fi
avail() { df -B1 --output=avail "$MNT" | tail -1 | tr -d ' '; }
# fill_to BYTES: fills the loop file system until about BYTES are left (it retries: the node keeps
# writing, so the free space can shrink between df and fallocate)
fill_to() {
    local i a
    for i in 1 2 3 4 5 6 7 8; do
        a=$(avail)
        [ "$a" -gt $(($1 + 8192)) ] || return 0
        fallocate -l $((a - $1)) "$MNT/filler.$i" 2>/dev/null || true
    done
    [ "$(avail)" -le $(($1 + 8192)) ] || fail "could not fill $MNT: $(avail) bytes still free"
}
jstate() { sqlite3 "$L/catalog.db" "SELECT json_extract(doc, '\$.state') FROM records WHERE parent = 'moves' AND name = '$1'"; }

# ---- 1. pre-flight refusal -----------------------------------------------------------------
fill_to $((hot / 2))
expect_exit 1 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2
assert_contains "$ERR" "target shard node2: disk 'default'" "names the target and the disk"
assert_contains "$ERR" "needs" "names the need"
assert_contains "$ERR" "nothing was moved" "says nothing moved"
assert_eq "" "$OUT" "nothing on stdout"
assert_eq 0 "$(sqlite3 "$L/catalog.db" "SELECT count(*) FROM records WHERE parent = 'moves'")" "nothing journaled"
rm -f "$MNT"/filler.*
ok "pre-flight: not enough room on node2 is refused before anything is journaled: ${ERR%%$'\n'*}"

# ---- 2. ENOSPC in the middle of the transfer ----------------------------------------------------
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200 >"$T/m.out" 2>"$T/m.err" &
MPID=$!
wait_for 120 sh -c "find '$MNT/store' -path '*/detached/tmp-ferry-*' 2>/dev/null | grep -q ." ||
    fail "no hot part was being received on node2: $(cat "$T/m.err")"
fill_to 16384 # leave 16 KiB: the part's next column file does not fit
rc=0; wait "$MPID" || rc=$?
assert_eq 1 "$rc" "mover exit status on a full target"
err=$(cat "$T/m.err")
assert_contains "$err" "target shard node2 ran out of disk space" "names the target"
assert_contains "$err" "No space left on device" "says the disk is full"
assert_contains "$err" "$MNT/" "names the path on the full disk"
assert_contains "$err" "FAILED and was rolled back" "rolled back"
id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves'")
assert_eq FAILED "$(jstate "$id")" "journal says FAILED"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM events_ferry_staging")" "nothing staged on node2"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "nothing of acme on node2"
[ -z "$(find "$MNT" -path '*/detached/*' -maxdepth 8 2>/dev/null)" ] || fail "detached leftovers on node2: $(find "$MNT" -path '*/detached/*' -maxdepth 8)"
mv_no_residue "$L"
assert_eq "$want" "$(mv_fp "$U1" acme 0)" "the source still holds every row"
assert_eq node1 "$("$FERRY_BIN" route --config "$C" --tenant acme --split 0 --json | jq -r '.slices[0].shards[0]')" "route unchanged"
chq "$U1" "INSERT INTO events VALUES ('other', 20261104, 0, 1, 1)" >/dev/null
assert_eq 1 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'other'")" "the source still takes writes"
ok "ENOSPC mid-transfer: FAILED, target side rolled back, source serving: $(grep -o 'target shard node2 ran out[^:]*' <<<"$err" | head -1)"

# ---- 3. after space is freed the move succeeds ------------------------------------------------
rm -f "$MNT"/filler.*
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200 >"$T/m2.out" 2>"$T/m2.err" ||
    fail "move after freeing space failed: $(cat "$T/m2.err")"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "data identical on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "node1 holds nothing of acme"
mv_no_residue "$L"
ok "after space was freed the move succeeded, data identical, no residue"
done_testing
