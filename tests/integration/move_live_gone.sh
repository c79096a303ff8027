# A cold part that leaves the source between the move's listing and its live send (ClickHouse
# merged, moved or detached it): the source's agent answers 410 (emulated with the test knob
# FERRY_AGENT_TEST_LIVE_GONE=1 in the lab's nodes: the first live send is answered so), the mover
# skips the part as it skips a frozen part merged away, VERIFY finds staging short of the source
# and leaves that partition to the exact rounds after the switch, and one of them sends the part
# (live again). The move finishes with every row (docs/moves.md, "A copy round").
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
FERRY_AGENT_TEST_LIVE_GONE=1 mv_setup "$L" 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
C=$L/mv.conf
mv_ingest "$U1" acme 0 3 20000
for d in 1 2 3; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$U1" acme 0)
np=$(chq "$U1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%acme%'")
[ "$np" -ge 3 ] || fail "test setup: $np parts of acme"
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null
ok "lab: acme over 3 cold days on node1; node1's agent answers its first live send 410"

FERRY_LOG_LEVEL=debug "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 0 --json \
    >"$T/move.json" 2>"$T/move.err" || fail "move failed: $(tail -5 "$T/move.err")"
R=$(jq -c 'select(.event == "move")' "$T/move.json")
assert_eq DONE "$(jq -r .state <<<"$R")" "move done"
grep -q 'msg="part not sent: no longer in the source' "$T/move.err" ||
    fail "no part was skipped as gone: $(grep -c . "$T/move.err") log lines, $(grep 'part' "$T/move.err" | head -5)"
# the snapshot counts every cold part once, the round after the switch the one it sent again
assert_eq "$np" "$(jq .parts_sent_live <<<"$R")" "every cold part sent live once (the skipped one after the switch)"
assert_eq $((np + 1)) "$(jq .cold_parts <<<"$R")" "cold parts counted: the snapshot's and the one sent after the switch"
assert_eq 0 "$(jq .freezes <<<"$R")" "nothing frozen"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme exact on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "nothing of acme left on node1"
mv_no_residue "$L"
ok "a cold part gone at its live send is skipped and sent by a round after the switch: rows exact, no residue"
