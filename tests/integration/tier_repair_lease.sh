# Tiering and repair keep off each other's slice (found by the chaos soak: a `ferry repair` of a
# partition of an rf 2 slice ran between a tier job's swap and its VERIFY, both working through
# the table's staging table, and the job found none of its frozen rows). Both take the slice's
# lease (catalog lease "slice.<tenant>.<split>"): held by another process (here `flock` on the
# SQLite catalog's lease file, as a running repair or tiering run holds it), `ferry tier` skips
# the slice's partitions (logged) and tiers the other slice, and `ferry repair` skips the slice
# (reported busy, exit 1). A tier job left unfinished (a crash after its swap was journaled) owns
# its partition: repair skips that partition until `ferry tier` resumed the job. Once free, both
# do their work and the replicas end equal.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_setup "$L"
C=$L/rf2.conf
for t in acme beta; do "$FERRY_BIN" tenant add "$t" --config "$C" >/dev/null || fail "tenant add $t"; done
for u in "$U1" "$U2"; do mv_ingest "$u" acme 0 3 4000; mv_ingest "$u" beta 0 3 4000 7; done
mv_ingest "$U1" acme 0 1 500 9 # rows node2 missed: acme's first day differs
[ "$(mv_fp "$U1" acme 0)" != "$(mv_fp "$U2" acme 0)" ] || fail "acme should differ"
cold() { chq "$1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$2''%' AND disk_name = 'cold'"; }
LEASE=$L/catalog.db-lease-slice.acme.0
[ -e "$L/catalog.db" ] || fail "no SQLite catalog at $L/catalog.db"

# ---- the slice's lease held by another process ------------------------------------------------
bg_start "$T/holder.log" flock -o -x "$LEASE" sleep 300
HOLDER=$BG_PID
wait_for 20 bash -c "! flock -n '$LEASE' true" || fail "the lease file was not locked"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t1.json" 2>"$T/t1.err" || fail "tier: $(tail -3 "$T/t1.err")"
assert_contains "$(cat "$T/t1.err")" "partition skipped: its slice is held by a repair or a move" "the skip is logged"
assert_eq 0 "$(cold "$U1" acme)" "acme (leased) not tiered on node1"
assert_eq 0 "$(cold "$U2" acme)" "acme (leased) not tiered on node2"
[ "$(cold "$U1" beta)" -gt 0 ] || fail "beta was not tiered: $(cat "$T/t1.json")"
ok "tiering skips a slice whose lease another process holds (and tiers the other one)"
expect_exit 1 "$FERRY_BIN" repair --config "$C" --tenant acme
assert_contains "$OUT" "busy" "repair reports the slice busy"
[ "$(mv_fp "$U1" acme 0)" != "$(mv_fp "$U2" acme 0)" ] || fail "repair changed a leased slice"
ok "repair skips a slice whose lease another process holds (busy, exit 1)"
kill -- -"$HOLDER"; wait "$HOLDER" 2>/dev/null || true

# ---- a tier job left unfinished owns its partition ---------------------------------------------
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme
open=$(sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'jobs' AND json_extract(doc, '\$.kind') = 'tier' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
[ "$open" -gt 0 ] || fail "no unfinished tier job after the crash"
expect_exit 1 "$FERRY_BIN" repair --config "$C" --tenant acme
assert_contains "$OUT" "is unfinished" "repair names the unfinished tier job"
ok "repair skips the partitions of an unfinished tier job"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t2.json" 2>"$T/t2.err" || fail "tier resume: $(tail -3 "$T/t2.err")"
assert_eq 0 "$(jq .jobs_failed "$T/t2.json")" "the resumed jobs finished ($(cat "$T/t2.json"))"
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant acme
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "acme equal on both replicas"
assert_eq "$(mv_fp "$U1" beta 0)" "$(mv_fp "$U2" beta 0)" "beta equal on both replicas"
[ "$(cold "$U1" acme)" -gt 0 ] && [ "$(cold "$U2" acme)" -gt 0 ] || fail "acme not tiered on both"
assert_eq 12500 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "acme's rows on node2 after the repair"
ok "once free: the tier job resumed, the repair made the replicas equal, nothing doubled"
done_testing
