# What the target's agent asks its ClickHouse while it receives a move's pointer parts: the
# server's version (checked against the pinned pointer format) once per AGENT_CACHE_MS, not once
# a part, and the disks and the staging table's paths by one lookup while the first sends wait for
# it (lib/agent/env.c, agent_cache; docs/moves.md, "Batches"), and the parts arrive several to a
# receive (agent API 5). The nodes log their statements (FERRY_LOG_LEVEL=debug), which the test
# counts in node2's log; the move must be exact as well.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
FERRY_LOG_LEVEL=debug mv_setup "$L" 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
C=$L/mv.conf
chq "$U1" "SYSTEM STOP MERGES events" >/dev/null
for d in 1 2 3 4; do
    for k in 1 2 3 4 5 6; do
        chq "$U1" "INSERT INTO events SELECT 'acme', 2026110$d, 0, number, number * $k
            FROM numbers(500)" >/dev/null
    done
    chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null
done
np=$(chq "$U1" "SELECT count() FROM system.parts WHERE active AND table = 'events'
    AND disk_name = 'cold'")
assert_eq 24 "$np" "test setup: 24 cold parts of acme on node1"
want=$(mv_fp "$U1" acme 0)
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null
LOG=$L/node2/node.log
[ -f "$LOG" ] || fail "no node log at $LOG: $(ls "$L/node2")"
before=$(wc -l <"$LOG")
ok "lab: 24 cold parts of acme in 4 partitions on node1, node2 logging its statements"

"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 0 --json \
    >"$T/move.json" 2>"$T/move.err" || fail "move failed: $(tail -5 "$T/move.err")"
R=$(jq -c 'select(.event == "move")' "$T/move.json")
assert_eq DONE "$(jq -r .state <<<"$R")" "move done"
assert_eq 24 "$(jq .parts_sent_live <<<"$R")" "24 pointer parts sent"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme exact on node2"
mv_no_residue "$L"

tail -n +"$((before + 1))" "$LOG" >"$T/node2.move.log"
# the parts received, in receives of several parts each (agent API 5: a batch per request)
received=$(grep -o 'op=receive status=200 parts=[0-9]*' "$T/node2.move.log" | awk -F= '{n += $NF} END {print n + 0}')
receives=$(grep -c 'op=receive status=200' "$T/node2.move.log" || true)
[ "$received" -ge 24 ] ||
    fail "node2's log shows $received parts received, 24 expected (is the agent logging? $(head -3 "$T/node2.move.log"))"
[ "$receives" -lt 24 ] || fail "node2 received the 24 parts in $receives receives: no batch (agent API 5)"
versions=$(grep -c 'msg="clickhouse statement".*sql="SELECT version()"' "$T/node2.move.log" || true)
statements=$(grep -c 'msg="clickhouse statement"' "$T/node2.move.log" || true)
[ "$statements" -gt 0 ] || fail "node2 logged no statement at debug level: $(head -3 "$T/node2.move.log")"
# once per AGENT_CACHE_MS (2 s) and once for the status the mover asks first: a slow move may
# span a few windows, never one a part (24 before the cache)
[ "$versions" -le 6 ] ||
    fail "node2's agent asked SELECT version() $versions times for $received receives: $(grep -c 'op=receive' "$T/node2.move.log") receives, $statements statements"
# the status's disks and version, then the staging table's paths (four statements) and the
# version once a window: 7 on a quiet machine (39 when every receive looked them up)
[ "$statements" -le 16 ] ||
    fail "node2's agent made $statements statements for $received receives: $(grep -o 'sql="[^"]\{0,60\}' "$T/node2.move.log" | sort | uniq -c | sort -rn | head -5)"
ok "node2's agent: $received parts in $receives receives, $statements statements, SELECT version() $versions times"
