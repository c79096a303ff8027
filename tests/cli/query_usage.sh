# `ferry query` bad input: clear message, exit 2, nothing on stdout; no server needed.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

expect_exit 0 "$FERRY_BIN" help query
assert_contains "$OUT" "usage: ferry query --url URL" "help query"
ok "help query"

check_usage() { # check_usage NEEDLE ARGS...
    local needle=$1; shift
    expect_exit 2 "$FERRY_BIN" query "$@"
    assert_eq "" "$OUT" "nothing on stdout for: $*"
    assert_contains "$ERR" "$needle" "message for: $*"
}
check_usage "--url is required" "SELECT 1"
check_usage "exactly one SQL statement" --url http://127.0.0.1:1
check_usage "exactly one SQL statement" --url http://127.0.0.1:1 "SELECT 1" "SELECT 2"
check_usage "exclude each other" --url http://127.0.0.1:1 --json --format TSV "SELECT 1"
check_usage "--setting wants NAME=VALUE" --url http://127.0.0.1:1 --setting max_threads "SELECT 1"
check_usage "--timeout wants a duration" --url http://127.0.0.1:1 --timeout soon "SELECT 1"
check_usage "--retries wants a number" --url http://127.0.0.1:1 --retries -1 "SELECT 1"
check_usage "must start with http://" --url ftp://127.0.0.1:1 "SELECT 1"
check_usage "must not carry user:password@" --url http://me:hunter22@127.0.0.1:1 "SELECT 1"
case "$ERR" in *hunter22*) fail "password echoed" ;; esac
check_usage "password file $T/none" --url http://127.0.0.1:1 --password-file "$T/none" "SELECT 1"
check_usage "cannot open --input $T/none" --url http://127.0.0.1:1 --input "$T/none" "INSERT INTO t FORMAT TSV"
ok "usage errors exit 2 with a message and no output"

port=$(free_port)
expect_exit 1 "$FERRY_BIN" query --url "http://127.0.0.1:$port" --retries 0 "SELECT 1"
assert_contains "$ERR" "cannot connect to ClickHouse at http://127.0.0.1:$port" "refused"
ok "nothing listening: exit 1, clear message"

done_testing
