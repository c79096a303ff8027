# A tier job cut after its swap and before its catalog records (CLEANUP), then its slice moved
# away, then the job resumed: the part records must name the shard that holds the slice's pointer
# files now, not the one the job ran on (found by the ZooKeeper chaos soak: the sweep reported
# the cold parts as catalog_only on the old shard and server_only on the new one). While the
# move is unfinished the job goes no further than its verification (it holds the table's merges
# until then; its CLEANUP waits, since the move hands over the part records that exist when it
# ends); once the move is done the resumed job reconciles its records with the pointer files of
# its own shard and of the route's.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 3 5000
want=$(mv_fp "$U1" acme 0)
cold() { chq "$1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$2''%' AND disk_name = 'cold'"; }
unfinished_tier() { sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'jobs' AND name LIKE 'tier.%' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }

# 1. the tiering run is killed right before CLEANUP: swapped and verified, no part record yet
expect_exit 137 env FERRY_TEST_CRASH_BEFORE=CLEANUP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme
[ "$(cold "$U1" acme)" -gt 0 ] || fail "acme's old days are not cold on node1 after the swap"
[ "$(unfinished_tier)" -gt 0 ] || fail "no unfinished tier job after the crash"
ok "a tier job stopped after its swap, before its records"

# 2. a move of the slice, stopped before VERIFY: the job is verified, its CLEANUP waits
FERRY_TEST_CRASH_BEFORE=VERIFY expect_exit 137 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200
id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
[ -n "$id" ] || fail "no unfinished move"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t1.json" 2>"$T/t1.err" || fail "tier during the move: $(tail -3 "$T/t1.err")"
assert_contains "$(cat "$T/t1.err")" "its CLEANUP waits for the move's end" "the wait is logged"
[ "$(unfinished_tier)" -gt 0 ] || fail "the tier job was resumed (finished) while its slice was moving: $(cat "$T/t1.json")"
assert_eq "" "$("$FERRY_BIN" catalog export --config "$C" | jq -r '.parts[]?.objects[].key' | head -1)" "no part record written while the slice moves"
ok "the tier job's CLEANUP waits while its slice is moving"

# 3. the move ends; the resumed job's records follow the slice to node2
"$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >/dev/null 2>"$T/r.err" || fail "resume: $(tail -3 "$T/r.err")"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme's data on node2 after the move"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t2.json" 2>"$T/t2.err" || fail "tier after the move: $(tail -3 "$T/t2.err")"
assert_eq 0 "$(unfinished_tier)" "every tier job finished after the move ($(cat "$T/t2.json"))"
assert_contains "$(cat "$T/t2.err")" "part records follow the slice's move" "the records were reconciled"
[ -n "$("$FERRY_BIN" catalog export --config "$C" | jq -r '.parts[]?.objects[].key' | head -1)" ] || fail "no part record after the job finished"
"$FERRY_BIN" sweep --config "$C" --json >"$T/sweep.json" 2>"$T/sweep.err" || fail "sweep: $(tail -3 "$T/sweep.err")"
assert_eq true "$(jq .complete "$T/sweep.json")" "the sweep is complete"
assert_eq 0 "$(jq '.drift | length' "$T/sweep.json")" "no drift between the part records and the pointer files ($(jq -c '.drift[:4]' "$T/sweep.json"))"
assert_eq 0 "$(jq '.dangling | length' "$T/sweep.json")" "no dangling pointer"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme's data on node2 unchanged"
ok "the resumed job's part records name node2, which holds the pointer files (no drift)"
done_testing
