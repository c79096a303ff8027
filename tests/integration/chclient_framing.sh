# ferry's ClickHouse client against a scripted HTTP server for what 18.16 cannot show: the
# 25.11+ tagged in-band exception framing split across chunks, and the retry policy when a
# server drops the connection before answering (SELECT retried; INSERT only with a
# deduplication token).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

port=$(free_port)
bg_start "$T/fake.log" python3 "$FERRY_SOURCE_DIR/tests/lib/fake_ch_http.py" "$port"
url="http://127.0.0.1:$port"
wait_for 20 curl -sSf --max-time 2 "$url/" --data-binary "SELECT ping" || fail "fake server did not start"
Q=("$FERRY_BIN" query --url "$url")

expect_exit 1 "${Q[@]}" "SELECT tagged_error"
assert_eq $'1\n2\n3' "$OUT" "data before the tagged exception, nothing of the block"
assert_contains "$ERR" "code 395" "tagged exception code"
assert_contains "$ERR" "(version 25.11.1.1)" "tagged exception message"
case "$ERR" in *k3j5a9x0qpz7mw2e*) fail "the tag leaked into the message" ;; esac
expect_exit 1 "${Q[@]}" --json "SELECT tagged_error"
assert_contains "$ERR" "code 395" "tagged exception with --json"
ok "tagged in-band exception split across chunks"

expect_exit 0 "${Q[@]}" "SELECT tagged_ok"
assert_eq $'1\nCode: 1. DB::Exception: not an error, data' "$OUT" "with a tag, Code: lines are data"
ok "tagged response without an exception is all data"

expect_exit 0 "${Q[@]}" --stats "SELECT dropfirst"
assert_eq "ok 2" "$OUT" "SELECT answered on the second attempt"
assert_contains "$ERR" "attempts=2" "SELECT retried once"
ok "SELECT retried after the connection dropped before any reply"

printf '1\n' > "$T/rows.tsv"
expect_exit 1 "${Q[@]}" --input "$T/rows.tsv" "INSERT INTO t FORMAT TSV /* dropfirst 1 */"
assert_contains "$ERR" "closed the connection before answering" "INSERT not retried"
assert_contains "$ERR" "may or may not have run" "INSERT outcome unknown"
expect_exit 0 "${Q[@]}" --stats --setting insert_deduplication_token=abc --input "$T/rows.tsv" \
    "INSERT INTO t FORMAT TSV /* dropfirst 2 */"
assert_contains "$ERR" "attempts=2" "INSERT with a deduplication token retried"
set +e
printf '1\n' | "${Q[@]}" --setting insert_deduplication_token=abc --input - \
    "INSERT INTO t FORMAT TSV /* dropfirst 4 */" 2> "$T/pipe.err"
rc=$?
set -e
assert_eq 1 "$rc" "INSERT from a pipe cannot be replayed"
assert_contains "$(cat "$T/pipe.err")" "may or may not have run" "piped INSERT not retried"
expect_exit 1 "${Q[@]}" "ALTER TABLE t DROP PARTITION 1 /* dropfirst 3 */"
assert_contains "$ERR" "may or may not have run" "ALTER not retried"
ok "INSERT retried only with a deduplication token; ALTER never"

done_testing
