# ferry's ClickHouse client against a real clickhouse-server (Debian's package): queries,
# streaming, INSERT bodies, error decoding (HTTP errors and in-band errors after a 200), auth,
# keep-alive reuse, timeouts, a server killed mid-query, and the system-table helpers.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/chserver.sh"

PROBE="$FERRY_BUILD_DIR/tests/tools/ch_probe"
[ -x "$PROBE" ] || fail "ch_probe not built at $PROBE"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
file_bigger() { [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -gt "$2" ]; }

ch_start
Q=("$FERRY_BIN" query --url "$CH_URL")
ok "clickhouse-server up at $CH_URL"

# --- version ---------------------------------------------------------------------------------
want_version=$(ch_sql "SELECT version()")
expect_exit 0 "$PROBE" "$CH_URL" version
assert_eq "$want_version" "$(cut -f1 <<<"$OUT")" "server version text"
major=$(cut -f2 <<<"$OUT")
[ "$major" -ge 18 ] || fail "version major parsed as '$major'"
ok "server version $want_version"

# --- SELECT ----------------------------------------------------------------------------------
expect_exit 0 "${Q[@]}" "SELECT 1, 'a'"
assert_eq $'1\ta' "$OUT" "SELECT result"
expect_exit 0 "${Q[@]}" --json "SELECT number AS n, 'x\ty' AS s, NULL AS z FROM numbers(2)"
assert_eq '{"n":"0","s":"x\ty","z":null}
{"n":"1","s":"x\ty","z":null}' "$OUT" "--json rows"
expect_exit 0 "${Q[@]}" --format JSONEachRow --setting output_format_json_quote_64bit_integers=1 \
    "SELECT toUInt64(18446744073709551615) AS big"
assert_eq '{"big":"18446744073709551615"}' "$OUT" "JSONEachRow with a setting as URL parameter"
expect_exit 0 "${Q[@]}" --query-id "ferry-test-qid-$$" --stats "SELECT 1"
assert_contains "$ERR" "query_id=ferry-test-qid-$$" "query id sent and echoed"
ok "SELECT in TSV, --json, JSONEachRow, settings, query id"

# --- streaming a large result ------------------------------------------------------------------
t0=$(now_ms)
"${Q[@]}" "SELECT number FROM numbers(5000000)" > "$T/big.tsv"
t1=$(now_ms)
assert_eq 5000000 "$(wc -l < "$T/big.tsv")" "5M rows streamed"
assert_eq 12499997500000 "$(awk '{s += $1} END {printf "%.0f", s}' "$T/big.tsv")" "sum of 5M rows"
bytes=$(stat -c %s "$T/big.tsv")
echo "# streamed 5M rows ($bytes bytes) in $((t1 - t0)) ms"

native_bytes=$("${Q[@]}" --format Native "SELECT number FROM numbers(100000)" | wc -c)
[ "$native_bytes" -ge 800000 ] || fail "Native result only $native_bytes bytes"
ok "5M rows streamed and counted; Native passthrough ($native_bytes bytes)"

# --- INSERT from a file and from stdin ----------------------------------------------------------
ch_sql "CREATE TABLE ins (k UInt32, s String) ENGINE = MergeTree() ORDER BY k"
printf '1\tplain\n2\ttab\\there\n3\tnew\\nline\n4\tback\\\\slash\n' > "$T/ins.tsv"
expect_exit 0 "${Q[@]}" --input "$T/ins.tsv" "INSERT INTO ins FORMAT TabSeparated"
assert_eq "" "$OUT" "INSERT prints nothing"
seq 5 1004 | awk '{printf "%d\tgen%d\n", $1, $1}' | "${Q[@]}" --input - "INSERT INTO ins FORMAT TabSeparated"
assert_eq 1004 "$(ch_sql "SELECT count() FROM ins")" "rows after two INSERTs"
expect_exit 0 "$PROBE" "$CH_URL" rows "SELECT k, s FROM ins WHERE k <= 4 ORDER BY k"
assert_eq 'rows=4 cols=2
[1] [plain]
[2] [tab\x09here]
[3] [new\x0aline]
[4] [back\x5cslash]' "$OUT" "TSV escapes round-trip through INSERT and the row parser"
ok "INSERT from a file and from stdin; escapes survive"

# --- server errors -----------------------------------------------------------------------------
expect_exit 1 "${Q[@]}" "SELEC 1"
assert_eq "" "$OUT" "nothing on stdout for a syntax error"
assert_contains "$ERR" "code 62" "syntax error code"
assert_contains "$ERR" "Syntax error" "syntax error message"
expect_exit 1 "${Q[@]}" "SELECT * FROM no_such_table"
assert_contains "$ERR" "code 60" "unknown table code"
assert_contains "$ERR" "no_such_table" "unknown table message"
expect_exit 1 "$PROBE" "$CH_URL" exec "SELECT * FROM no_such_table"
assert_contains "$ERR" "code=server error ch_code=60 in_band=0 attempts=1" "ch_code out-parameter"
expect_exit 1 "${Q[@]}" --setting no_such_setting=1 "SELECT 1"
assert_contains "$ERR" "code 115" "unknown setting"
ok "syntax error -> 62, unknown table -> 60, unknown setting -> 115"

# An exception after the 200 and 3M rows: an error, and no byte of it among the data.
set +e
"${Q[@]}" --setting max_block_size=1000 \
    "SELECT number, throwIf(number = 3000000) FROM numbers(5000000)" > "$T/inband.tsv" 2> "$T/inband.err"
rc=$?
set -e
assert_eq 1 "$rc" "in-band error exit status"
assert_contains "$(cat "$T/inband.err")" "code 395" "in-band error code"
assert_contains "$(cat "$T/inband.err")" "result is incomplete" "in-band error says incomplete"
assert_eq 3000000 "$(wc -l < "$T/inband.tsv")" "rows before the in-band error"
assert_eq $'2999999\t0' "$(tail -n 1 "$T/inband.tsv")" "last data row intact, no trailer"
if grep -q "Code:" "$T/inband.tsv"; then fail "exception text leaked into the data"; fi
expect_exit 1 "$PROBE" "$CH_URL" rows "SELECT number, throwIf(number = 300000) FROM numbers(500000) SETTINGS max_block_size = 1000"
assert_contains "$ERR" "ch_code=395 in_band=1" "in-band status in the library"
set +e
"${Q[@]}" --format Native --setting max_block_size=1000 \
    "SELECT number, throwIf(number = 300000) FROM numbers(500000)" > /dev/null 2> "$T/native.err"
rc=$?
set -e
assert_eq 1 "$rc" "in-band error in Native"
assert_contains "$(cat "$T/native.err")" "code 395" "in-band error code in Native"
ok "in-band exceptions after a 200 are errors (TSV and Native), never data"

# --- credentials -------------------------------------------------------------------------------
password=$(head -n1 "$CH_PASSWORD_FILE")
expect_exit 0 "${Q[@]}" --user "$CH_USER" --password-file "$CH_PASSWORD_FILE" "SELECT user FROM system.processes WHERE query LIKE '%whoami-marker%'"
assert_eq "$CH_USER" "$OUT" "right password"
echo "${password}-wrong" > "$T/badpw"
expect_exit 1 "${Q[@]}" --user "$CH_USER" --password-file "$T/badpw" "SELECT 1"
assert_contains "$ERR" "refused the credentials of user '$CH_USER'" "wrong password message"
case "$ERR" in *"$password"*) fail "the password appears in the error message" ;; esac
expect_exit 1 "${Q[@]}" --user nobody_here --password-file "$T/badpw" "SELECT 1"
assert_contains "$ERR" "refused the credentials" "unknown user"
expect_exit 2 "$FERRY_BIN" query --url "http://u:$password@127.0.0.1:$CH_PORT" "SELECT 1"
assert_contains "$ERR" "must not carry user:password@" "credentials in the URL refused"
case "$ERR" in *"$password"*) fail "the password from the URL appears in the error" ;; esac
ok "credentials: right, wrong (no echo), unknown user, none in URLs"

# --- keep-alive --------------------------------------------------------------------------------
expect_exit 0 "$PROBE" "$CH_URL" reuse
assert_contains "$OUT" "query 1 new_connections=1" "first query connects"
assert_contains "$OUT" "query 2 new_connections=0" "second query reuses the connection"
assert_contains "$OUT" "query 3 new_connections=0" "third query reuses the connection"
assert_contains "$OUT" "total queries=3 connects=1" "stats"
ok "keep-alive: one connection for three queries"

# --- system-table helpers on a MergeTree table with partitions ---------------------------------
ch_sql "CREATE TABLE pt (d Date, k UInt32, s String) ENGINE = MergeTree() PARTITION BY toYYYYMM(d) ORDER BY k"
for m in 1 2 3; do
    ch_sql "INSERT INTO pt SELECT toDate('2024-0$m-05'), number, toString(number) FROM numbers(1000)"
done
ch_sql "INSERT INTO pt SELECT toDate('2024-01-07'), number, 'x' FROM numbers(10)"
expect_exit 0 "$PROBE" "$CH_URL" partitions default pt
assert_eq 3 "$(wc -l <<<"$OUT")" "three partitions"
assert_eq $'202401\t202401\tdefault\t2\t1010' "$(head -n1 <<<"$OUT" | cut -f1-5)" "partition 202401"
want=$(ch_sql "SELECT partition_id, sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'pt' GROUP BY partition_id ORDER BY partition_id")
assert_eq "$want" "$(cut -f1,6 <<<"$OUT")" "bytes per partition"
expect_exit 0 "$PROBE" "$CH_URL" parts default pt
assert_eq 4 "$(wc -l <<<"$OUT")" "four active parts"
assert_eq $'202401_1_1_0\t202401\tdefault\t1000' "$(head -n1 <<<"$OUT" | cut -f1-4)" "first part"
part_path=$(head -n1 <<<"$OUT" | cut -f6)
[ -f "$part_path/checksums.txt" ] || fail "part path $part_path has no checksums.txt"
expect_exit 0 "$PROBE" "$CH_URL" paths default pt
assert_eq $'default\t'"$CH_DIR/data/data/default/pt/" "$OUT" "table data path"
expect_exit 0 "$PROBE" "$CH_URL" table default pt
assert_eq $'1\tMergeTree' "$(cut -f1,2 <<<"$OUT")" "table info"
expect_exit 0 "$PROBE" "$CH_URL" table default no_such_table
assert_eq "0" "$(cut -f1 <<<"$OUT")" "missing table"
expect_exit 1 "$PROBE" "$CH_URL" paths default no_such_table
assert_contains "$ERR" "does not exist" "data paths of a missing table"
ch_sql "ALTER TABLE pt DETACH PARTITION 202402"
expect_exit 0 "$PROBE" "$CH_URL" partitions default pt
assert_eq "202401 202403" "$(cut -f1 <<<"$OUT" | tr '\n' ' ' | sed 's/ $//')" "detached partition gone"
[ -d "$CH_DIR/data/data/default/pt/detached/202402_2_2_0" ] || fail "partition not in detached/"
expect_exit 0 "$PROBE" "$CH_URL" detached default pt
if [ "$major" -lt 19 ]; then
    assert_contains "$OUT" "unsupported" "no system.detached_parts on $want_version"
    assert_contains "$OUT" "has no system.detached_parts" "clear message"
else
    assert_contains "$OUT" "202402_2_2_0" "detached part listed"
fi
ok "partitions, parts, data paths, table info, detached parts"

# --- timeouts, refused connections, a server killed mid-query ----------------------------------
t0=$(now_ms)
# a query of 30 s (one second per one-row block): the 1 s timeout must end it long before, even on
# a loaded machine (a 3 s query against a 2.9 s bound failed under a load average of 100)
expect_exit 1 "${Q[@]}" --timeout 1s --retries 0 "SELECT sleepEachRow(1) FROM numbers(30) SETTINGS max_block_size = 1"
t1=$(now_ms)
assert_contains "$ERR" "read timeout" "read timeout message"
[ $((t1 - t0)) -lt 20000 ] || fail "read timeout took $((t1 - t0)) ms (the query takes 30 s)"
ok "read timeout after $((t1 - t0)) ms"

"${Q[@]}" "SELECT number FROM system.numbers LIMIT 400000000" > "$T/killed.tsv" 2> "$T/killed.err" &
qpid=$!
wait_for 30 file_bigger "$T/killed.tsv" 1000000 ||
    fail "streaming query produced no data"
ch_kill
t0=$(now_ms)
for _ in $(seq 1 200); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$qpid" 2>/dev/null; then kill -KILL "$qpid"; fail "ferry query hung after the server died"; fi
set +e; wait "$qpid"; rc=$?; set -e
t1=$(now_ms)
assert_eq 1 "$rc" "exit status when the server dies mid-query"
assert_contains "$(cat "$T/killed.err")" "broke after" "connection lost message"
assert_contains "$(cat "$T/killed.err")" "incomplete" "says the result is incomplete"
ok "server killed mid-query: error after $((t1 - t0)) ms"

t0=$(now_ms)
expect_exit 1 "${Q[@]}" "SELECT 1"
t1=$(now_ms)
assert_contains "$ERR" "cannot connect to ClickHouse at $CH_URL" "refused message"
assert_contains "$ERR" "after 3 attempts" "SELECT retried on refused connection"
[ $((t1 - t0)) -lt 5000 ] || fail "refused connection took $((t1 - t0)) ms"
ok "connection refused: clear error after $((t1 - t0)) ms, retried"

done_testing
