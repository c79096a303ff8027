# A move does not start while a tiering run works on its slice (found by the seventh ZooKeeper
# soak: a move of t5/0 from node1 to node3 started in the middle of a tier wave of t5/0 on node1,
# froze the partition before the wave's swap, and the part records it handed to node3 named
# parts node3 never held). The tiering run holds the slice's lease while its jobs run; a move's
# run takes the same lease, and refuses while another flow holds it. Here a tier run is stopped
# (SIGSTOP, FERRY_TEST_STOP_AFTER=SWAP) right after its swap was chosen, holding acme/0's lease:
# a move of acme/0 is refused with a message saying why, the tier run goes on and finishes, and
# the move then resumed carries the tiered partitions to node2 with the same data, and the
# sweep finds no drift between the catalog's part records and the servers' pointer files.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 3 5000
want=$(mv_fp "$U1" acme 0)

FERRY_TEST_STOP_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme --json \
    >"$T/t1.out" 2>"$T/t1.err" &
TPID=$!
_H_PIDS+=("$TPID") # killed at exit if the test fails while it is stopped
stopped() { [ "$(awk '{print $3}' "/proc/$TPID/stat" 2>/dev/null)" = T ]; }
wait_for 120 stopped || fail "the tier run did not stop at SWAP: $(tail -5 "$T/t1.err")"
expect_exit 1 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200
assert_contains "$ERR" "is busy" "the move is refused while the tier run holds the slice"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "nothing reached node2"
kill -CONT "$TPID"
wait "$TPID" || fail "the tier run failed after it went on: $(tail -5 "$T/t1.err")"
assert_eq 0 "$(jq .jobs_failed "$T/t1.out")" "the tier run finished: $(cat "$T/t1.out")"
ok "a move of a slice is refused while a tiering run holds the slice's lease"

id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
[ -n "$id" ] || fail "the refused move left no unfinished move to resume"
expect_exit 0 "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme's data on node2 as it was on node1"
[ "$(chq "$U2" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" -gt 0 ] ||
    fail "no cold part on node2 after the move"
"$FERRY_BIN" sweep --config "$C" --json >"$T/sweep.json" 2>"$T/sweep.err" || fail "sweep: $(tail -3 "$T/sweep.err")"
assert_eq "0 0" "$(jq -r '"\(.drift | length) \(.dangling | length)"' "$T/sweep.json")" \
    "the catalog's part records match the servers' pointer files: $(jq -c '{drift, dangling}' "$T/sweep.json")"
ok "the move resumed after the tiering run: same data, no drift"
done_testing
