# A repair sends a partition of cold parts live from the source's table, without a freeze
# (lib/flow/replica_sync.c, cold_snapshot), as a move's copy round does. A part that leaves the
# source's table between the round's listing and its send (merged, moved or detached; emulated
# with the test knob FERRY_AGENT_TEST_LIVE_GONE=1 in the lab's nodes: each agent answers its
# first live send 410) ends the round as "the source's parts changed during the round", with the
# target's staging emptied; the next round sends the parts and the replicas end equal. Nothing is
# frozen on the source for the cold days, so their pointer files are not left read-only.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
FERRY_AGENT_TEST_LIVE_GONE=1 mv_rf2_acme "$L"
mv_ingest "$U1" acme 0 2 4000 # node1: 2026-11-01..02, node2 nothing
for d in 1 2; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$U1" acme 0)
ok "lab: acme's two cold days on node1 only; each agent answers its first live send 410"

"$FERRY_BIN" repair --config "$C" --tenant acme --grace 0 --json >"$T/rep.json" 2>"$T/rep.err" ||
    fail "repair failed: $(tail -5 "$T/rep.err")"
assert_contains "$(cat "$L/node1/node.log")" "test knob FERRY_AGENT_TEST_LIVE_GONE" "node1's agent answered a live send as gone"
assert_contains "$(cat "$T/rep.err")" "a part left the source's table since the round listed it" "the round with the gone part ended, saying why"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "node2 equal to node1 after the repair"
assert_eq 2 "$(grep -c 'msg="replica sync" .* repaired=1 .*sent_live=[1-9]' "$T/rep.err")" "both days repaired by live sends"
assert_eq 0 "$(grep -c 'op=freeze status=200' "$L/node1/node.log")" "nothing frozen on node1"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.parts WHERE active AND rows > 0 AND table = 'events_ferry_staging'")" "node2's staging empty"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.detached_parts WHERE table LIKE 'events%'")" "nothing detached on node2"
ok "a part gone at its live send ends the round; the next one copies it: replicas equal, nothing frozen"
done_testing
