# ferry's ClickHouse client against lab nodes (ClickHouse 26.7): a tiered MergeTree table on
# every node of a 3-node lab, 1M rows inserted through `ferry query`, read back with ferry's
# client and with curl, a partition moved to the cold disk and read back, the system-table
# helpers on 26.x (partitions, parts with hashes, detached parts, data paths per disk), errors
# before and after the first byte (the 25.11+ tagged in-band framing), and connection reuse.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
PROBE=$FERRY_BUILD_DIR/tests/tools/ch_probe

L=$T/lab
lab_up "$L" --nodes 3
export CH_USER=ferry CH_PASSWORD_FILE=$L/ferry.password
q() { "$FERRY_BIN" query --url "$1" --user ferry --password-file "$L/ferry.password" "${@:2}"; }

for n in node1 node2 node3; do
    u=$(lab_url "$L" $n)
    assert_eq "26.7.2.1" "$(q "$u" 'SELECT version()')" "version of $n through ferry query"
    assert_eq "26.7.2.1	26	7	2" "$("$PROBE" "$u" version)" "version helper on $n"
    q "$u" "CREATE TABLE events (tenant String, day UInt32, split UInt8, id UInt64, v String)
            ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY id
            SETTINGS storage_policy = 'tiered'" >/dev/null
done
ok "tiered table on every node, created through ferry's client"
U1=$(lab_url "$L" node1)

python3 -c '
import sys
w = sys.stdout.write
for i in range(1000000):
    w("t%d\t202611%02d\t0\t%d\tv\\t%d\n" % (i % 2, 1 + (i // 2) % 4, i, i))' >"$T/rows.tsv"
q "$U1" --input "$T/rows.tsv" "INSERT INTO events FORMAT TabSeparated"
assert_eq "1000000	499999500000	1000000" \
    "$(q "$U1" "SELECT count(), sum(id), uniqExact(v) FROM events")" "1M rows through ferry query"
assert_eq "1000000	499999500000" "$(chq "$U1" 'SELECT count(), sum(id) FROM events' -u "ferry:$(cat "$L/ferry.password")")" \
    "the same rows through curl"
assert_eq 'v\t7' "$(q "$U1" "SELECT v FROM events WHERE id = 7")" "escaped tab survives the round trip"
ok "1M rows in, read back with ferry's client and curl"

parts=$("$PROBE" "$U1" partitions default events)
assert_eq 8 "$(printf '%s\n' "$parts" | wc -l)" "8 partitions listed"
assert_contains "$parts" "('t0',20261101,0)	default" "partition literal and disk"
q "$U1" "ALTER TABLE events MOVE PARTITION ('t0', 20261101, 0) TO DISK 'cold'"
parts=$("$PROBE" "$U1" partitions default events)
line=$(printf '%s\n' "$parts" | grep "('t0',20261101,0)")
assert_eq cold "$(cut -f3 <<<"$line")" "moved partition is on disk cold"
assert_eq 125000 "$(cut -f5 <<<"$line")" "rows of the cold partition"
assert_eq "125000	$(python3 -c 'print(sum(range(0, 1000000, 8)))')" "$(q "$U1" "SELECT count(), sum(id) FROM events WHERE tenant = 't0' AND day = 20261101")" \
    "cold partition read back"
ok "partition moved to the cold disk and read back"

plist=$("$PROBE" "$U1" parts default events)
cold_part=$(printf '%s\n' "$plist" | awk -F'\t' '$3 == "cold"')
[ -n "$cold_part" ] || fail "no part on disk cold in: $plist"
[ -n "$(cut -f7 <<<"$cold_part")" ] || fail "hash_of_all_files missing on 26.x"
paths=$("$PROBE" "$U1" paths default events)
assert_eq 2 "$(printf '%s\n' "$paths" | wc -l)" "a data path on each disk"
assert_contains "$paths" "cold	" "cold disk data path"
pid_t1=$(printf '%s\n' "$parts" | grep "('t1',20261102,0)" | cut -f1)
q "$U1" "ALTER TABLE events DETACH PARTITION ('t1', 20261102, 0)"
det=$("$PROBE" "$U1" detached default events)
assert_eq 1 "$(printf '%s\n' "$det" | grep -c .)" "one detached part listed"
assert_eq "$pid_t1" "$(cut -f2 <<<"$det")" "detached part's partition id"
assert_eq default "$(cut -f4 <<<"$det")" "detached part's disk"
[ "$(cut -f5 <<<"$det")" -gt 0 ] || fail "detached part has no bytes: $det"
ok "system-table helpers on 26.7: parts with hashes, data paths, detached parts"

expect_exit 1 q "$U1" "SELEC 1"
assert_contains "$ERR" "62" "syntax error code"
expect_exit 1 q "$U1" "SELECT * FROM nowhere"
assert_contains "$ERR" "60" "unknown table code"
# An exception after the first block: the node writes ClickHouse's tagged in-band framing.
expect_exit 1 q "$U1" --setting max_block_size=1000 \
    "SELECT throwIf(number = 300000, 'boom') FROM numbers(1000000)"
assert_contains "$ERR" "395" "in-band exception code"
assert_contains "$ERR" "boom" "in-band exception message"
lines=$(printf '%s' "$OUT" | grep -c . || true)
[ "$lines" -lt 1000000 ] || fail "in-band error returned as complete data"
! grep -q "__exception__" <<<"$OUT" || fail "exception framing leaked into the data"
ok "errors before and after the first byte are errors (code, message, no framing in data)"

reuse=$("$PROBE" "$U1" reuse)
assert_contains "$reuse" "query 2 new_connections=0" "keep-alive reuse"
assert_contains "$reuse" "connects=1" "one connection for three queries"
ok "keep-alive connection reuse"

done_testing
