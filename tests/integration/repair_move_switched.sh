# A repair leaves a slice alone while a plain move of one of its replicas stands between its
# routing switch and its publish (the SQLite soak at 552323e, docs/reliability.md): there the
# target's table holds only the rows written since the switch, and the slice's earlier rows wait
# in the target's staging table for the move's MOVE PARTITION. 3-node lab, rf 2: acme/0 on A and
# B, 4,000 rows; the move of A's replica to T is killed right after its switch; 300 rows are
# then written to both replicas the route names (T and B, as the router would). `ferry repair`
# reports the slice busy and copies nothing to T; the resumed move publishes; every row is on T
# and B exactly once, and a repair then finds them in sync. (Before, the repair copied B's rows
# into T and emptied T's staging partition, the resumed move copied the source's rows again and
# published them beside the repair's copy: 4,000 rows twice on T.)
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
lab_up "$L" --nodes 3
mv_conf "$L"
mv_rf2_conf "$L"
C=$L/rf2.conf
declare -A U
for n in node1 node2 node3; do
    U[$n]=$(lab_url "$L" $n)
    chq "${U[$n]}" "$MV_DDL" >/dev/null
done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add"
ROUTE=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')
A=${ROUTE%%,*}; B=${ROUTE##*,}
for n in node1 node2 node3; do [ "$n" = "$A" ] || [ "$n" = "$B" ] || TGT=$n; done
[ -n "${TGT:-}" ] && [ "$A" != "$B" ] || fail "acme not on two of three shards: $ROUTE"
# the same rows on both replicas (4 days of 1,000)
for n in "$A" "$B"; do mv_ingest "${U[$n]}" acme 0 4 1000 5; done
rows() { chq "${U[$1]}" "SELECT count(), uniqExact(user, v, day) FROM events WHERE tenant = 'acme'"; }
assert_eq "4000	4000" "$(rows "$A")" "4,000 rows on $A"

expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWITCH:switched "$FERRY_BIN" move --config "$C" \
    --tenant acme --split 0 --from "$A" --to "$TGT" --grace 100
MID=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') = 'SWITCH'")
[ -n "$MID" ] || fail "no move stopped in SWITCH"
NOW=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | sort | join(",")')
assert_eq "$(printf '%s\n%s\n' "$B" "$TGT" | sort | paste -sd,)" "$NOW" "routed to $B and $TGT after the switch"
# writes after the switch reach both routed replicas (as the router sends them)
for n in "$B" "$TGT"; do
    chq "${U[$n]}" "INSERT INTO events SELECT 'acme', 20261101, 0, 900000 + number, number FROM numbers(300)" >/dev/null
done
assert_eq "300	300" "$(rows "$TGT")" "$TGT holds only the rows written since the switch"

expect_exit 1 "$FERRY_BIN" repair --config "$C" --tenant acme --json
assert_contains "$OUT" "switched the slice and has not published it yet" "the repair says why it skips"
assert_eq "300	300" "$(rows "$TGT")" "the repair copied nothing to $TGT"
ok "a repair skips a slice whose move stopped between its switch and its publish"

"$FERRY_BIN" move --config "$C" --resume "$MID" --grace 100 >"$T/resume.out" 2>"$T/resume.err" ||
    fail "resume: $(tail -3 "$T/resume.err")"
assert_eq "4300	4300" "$(rows "$TGT")" "$TGT: every row once after the publish"
assert_eq "4300	4300" "$(rows "$B")" "$B: every row once"
assert_eq "$(mv_fp "${U[$B]}" acme 0)" "$(mv_fp "${U[$TGT]}" acme 0)" "$B and $TGT equal"
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant acme --json
assert_eq 0 "$(jq -s '[.[] | select(.event == "summary")][0].failed' <<<"$OUT")" "the repair finds nothing to mend"
ok "the resumed move publishes; every row once on both replicas; a repair then finds them in sync"
done_testing
