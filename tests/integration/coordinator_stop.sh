# SIGTERM to `ferry coordinator` while its autopilot moves a slice: the coordinator exits within a
# few seconds (before, it finished its running work first: 11 minutes under the chaos soak's
# load, docs/reliability.md), the move stays in its journal, and the next coordinator resumes
# and finishes it: the slice on the target once, the source empty. The receiving agent is slowed
# (test-only knob, a pause after each file) so the move is still copying when the signal comes.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

export FERRY_AGENT_TEST_SLOW_RECEIVE_MS=150 # inherited by the nodes `lab up` starts
L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 1 6 20000
want=$(mv_fp "$U1" acme 1)
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null || fail "the inventory"
cp "$C" "$T/coord.conf"
printf '\n[autopilot]\nrebalance_interval = 1s\nmax_moves = 1\n' >>"$T/coord.conf"
unfinished() { sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }
start_coord() { # NAME
    bg_start "$T/$1.log" "$FERRY_BIN" coordinator --config "$T/coord.conf" --listen 127.0.0.1:0 \
        --port-file "$T/$1.port"
    COORD_PID=$BG_PID
    wait_for 60 test -s "$T/$1.port" || fail "coordinator $1 did not start: $(tail -5 "$T/$1.log")"
}
start_coord coord1
"$FERRY_BIN" shard drain node1 --config "$C" >/dev/null || fail "shard drain node1"
in_clone() { [ -n "$(unfinished)" ] && grep -q 'autopilot move starts' "$T/coord1.log"; }
wait_for 90 in_clone || fail "no move started: $(grep -i autopilot "$T/coord1.log" | tail -3)"
id=$(unfinished)
t0=$(date +%s%N)
kill -TERM "$COORD_PID"
stopped() { ! kill -0 "$COORD_PID" 2>/dev/null; }
wait_for 30 stopped || fail "the coordinator did not exit within 30 s of SIGTERM"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "# the coordinator exited $ms ms after SIGTERM"
[ "$ms" -le 15000 ] || fail "the coordinator took $ms ms to stop (more than 15 s)"
state=$(sqlite3 "$L/catalog.db" "SELECT json_extract(doc, '\$.state') FROM records WHERE parent = 'moves' AND name = '$id'")
case "$state" in DONE) fail "the move finished before the coordinator stopped: slow the agent more" ;; esac
assert_contains "$(cat "$T/coord1.log")" "coordinator stopping" "the stop is logged"
ok "SIGTERM during move $id (left in $state): the coordinator exited in $ms ms"

# the next coordinator resumes the move and finishes it
start_coord coord2
moved() { [ -z "$(unfinished)" ] && [ "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" = 0 ]; }
wait_for 180 moved || fail "the move was not finished by the next coordinator: $(grep -i 'move' "$T/coord2.log" | tail -5)"
assert_eq DONE "$(sqlite3 "$L/catalog.db" "SELECT json_extract(doc, '\$.state') FROM records WHERE parent = 'moves' AND name = '$id'")" "move $id finished"
assert_eq "$want" "$(mv_fp "$U2" acme 1)" "the slice once on node2"
t0=$(date +%s%N)
kill -TERM "$COORD_PID"
wait_for 30 stopped || fail "the idle coordinator did not exit on SIGTERM"
mv_no_residue "$L"
ok "the next coordinator resumed move $id and finished it: the slice once on node2, node1 empty"

done_testing
