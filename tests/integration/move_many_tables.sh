# A move of a slice that spans many tables: its journal data (jobs/move.ID: the freezes it
# made and a verified fingerprint per table, about 190 bytes each) passes 2 KB at a dozen
# tables. Job records kept their data in a fixed 2 KB field, and such a move stopped with
# "journal data too large" in SWITCH, its route already on the target, and could not go on; they
# now hold up to FERRY_JOB_DATA_MAX (128 KB). Twenty
# tables, a cold and a hot day each, moved node1 -> node2: every table's rows arrive, the job
# record's data is over 2 KB, and the move's records end DONE.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

N=20
L=$T/lab
lab_up "$L" --nodes 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
C=$L/mv.conf
cp "$L/ferry.conf" "$C"
for i in $(seq 1 $N); do
    # a long table name: the fingerprints' keys are the tables' names
    t=events_with_a_rather_long_name_$i
    ddl=${MV_DDL/TABLE IF NOT EXISTS events/TABLE IF NOT EXISTS $t}
    for u in "$U1" "$U2"; do chq "$u" "$ddl" >/dev/null; done
    printf '\n[table "%s"]\ndatabase = default\nlayout = shared\ntenant_column = tenant\nday_column = day\nsplit_column = split\n' "$t" >>"$C"
    chq "$U1" "INSERT INTO $t SELECT 'acme', 20261101 + intDiv(number, 500), 0, number, number * $i
        FROM numbers(1000)" >/dev/null
    chq "$U1" "ALTER TABLE $t MOVE PARTITION ('acme', 20261101, 0) TO DISK 'cold'" >/dev/null
done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
fp() { # URL: every table's rows of acme, one line each
    local i
    for i in $(seq 1 $N); do
        chq "$1" "SELECT '$i', count(), sum(cityHash64(*)) FROM events_with_a_rather_long_name_$i WHERE tenant = 'acme'"
    done
}
before=$(fp "$U1")
ok "lab: $N tables with a cold and a hot day of acme each on node1"

expect_exit 0 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 0
assert_eq "$before" "$(fp "$U2")" "every table's rows on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM merge('default', '^events_with') WHERE tenant = 'acme'")" "nothing of acme left on node1"
export_json=$("$FERRY_BIN" catalog export --config "$C")
size=$(jq -r '[.jobs[]? | select(.kind == "move") | .data | length] | max' <<<"$export_json")
[ "$size" -gt 2048 ] || fail "the move's journal data is only $size bytes: the test no longer crosses the old 2 KB limit"
assert_eq "$N" "$(jq -r '[.jobs[]? | select(.kind == "move") | .data | fromjson | .fp | length] | max' <<<"$export_json")" "a fingerprint per table in the journal"
assert_eq "DONE" "$(jq -r '[.jobs[]? | select(.kind == "move") | .state] | unique | join(",")' <<<"$export_json")" "the move's job record DONE"
assert_eq "DONE" "$(jq -r '[.moves[]?.state] | unique | join(",")' <<<"$export_json")" "the move DONE"
ok "a move of $N tables journaled $size bytes of data and finished"
done_testing
