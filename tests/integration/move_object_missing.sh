# A cold part whose object is missing from the store (lost, or deleted by hand) stops a move
# before anything is placed: the source's agent sends the live pointer parts in one batch
# (agent API 5), the target's agent checks every object each part names before it places any
# part of the batch, answers 409 naming the part, the file and the object, and places none
# (lib/agent/receive.c). The move fails in CLONE and rolls back: routing unchanged, the source
# untouched, the target holding nothing of the move (no staged part, no detached or temporary
# folder). Once the object is back, a new move of the slice finishes with every row.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
C=$L/mv.conf
mv_ingest "$U1" acme 0 4 5000
for d in 1 2 3; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$U1" acme 0)
src_parts() { chq "$U1" "SELECT name, rows, hash_of_all_files FROM system.parts WHERE active AND table = 'events' ORDER BY name"; }
parts_before=$(src_parts)
# an object of the second cold day's part: the batch's first part passes its checks, this one not
part=$(chq "$U1" "SELECT name FROM system.parts WHERE active AND table = 'events' AND partition = '(''acme'',20261102,0)' ORDER BY name LIMIT 1")
[ -n "$part" ] || fail "test setup: no part of 2026-11-02"
obj=$(chq "$U1" "SELECT remote_path FROM system.remote_data_paths WHERE local_path LIKE '%/$part/%' AND local_path LIKE '%.bin' ORDER BY local_path LIMIT 1")
[ -n "$obj" ] || fail "test setup: no object listed for part $part: $(chq "$U1" "SELECT local_path, remote_path FROM system.remote_data_paths LIMIT 5")"
blob=$(cd "$L/blobs" && find . -type f -path "*${obj##*/}" | head -n 1)
[ -n "$blob" ] || fail "test setup: object $obj of part $part not found under $L/blobs"
mv "$L/blobs/$blob" "$T/aside"
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null
ok "lab: acme over 3 cold days and a hot one on node1; one object of part $part moved out of the store"

expect_exit 1 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 0 --json
assert_contains "$ERR" "part $part: pointer file" "the error names the part and its pointer file"
assert_contains "$ERR" "which is missing; the part was not placed" "the error says the object is missing"
assert_eq FAILED "$(jq -r 'select(.event == "move") | .state' <<<"$OUT")" "the move failed (rolled back)"
assert_eq "node1" "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "routing unchanged"
assert_eq "$parts_before" "$(src_parts)" "the source's parts untouched (its rows cannot be read: an object is missing)"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.parts WHERE active AND rows > 0 AND table LIKE 'events%'")" "nothing of the move active on node2"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.detached_parts WHERE table LIKE 'events%'")" "nothing detached on node2"
leftovers=$(find "$L/node2/data" -path '*/detached/*' -mindepth 1 -maxdepth 8 -type d 2>/dev/null | head -5)
assert_eq "" "$leftovers" "no folder left in a detached/ on node2 (temporary ones included)"
ok "the move stopped before placing anything and rolled back: routing, source and target as before"

mv "$T/aside" "$L/blobs/$blob"
assert_eq "$want" "$(mv_fp "$U1" acme 0)" "with the object back the source reads every row"
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 0 --json >"$T/mv2.json" 2>"$T/mv2.err" ||
    fail "the move after the object came back failed: $(tail -5 "$T/mv2.err")"
assert_eq DONE "$(jq -r 'select(.event == "move") | .state' "$T/mv2.json")" "the new move done"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme exact on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "nothing of acme left on node1"
mv_no_residue "$L"
ok "with the object back, a new move finishes: rows exact, no residue"
done_testing
