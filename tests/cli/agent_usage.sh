# `ferry agent` bad input: clear message, exit 2, nothing on stdout; no server needed.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

expect_exit 0 "$FERRY_BIN" help agent
assert_contains "$OUT" "usage: ferry agent --clickhouse URL" "help agent"
ok "help agent"

printf 'short\n' >"$T/short.token"
printf 'a-good-token-0123456789\n' >"$T/good.token"
printf '[cluster]\npointer_format = 9\n[object_store]\ntype = local\npath = %s/\n' "$T" >"$T/fmt.conf"
check_usage() { # check_usage NEEDLE ARGS...
    local needle=$1; shift
    expect_exit 2 "$FERRY_BIN" agent "$@"
    assert_eq "" "$OUT" "nothing on stdout for: $*"
    assert_contains "$ERR" "$needle" "message for: $*"
}
BASE=(--clickhouse http://127.0.0.1:1 --data-path "$T")
check_usage "are required" --clickhouse http://127.0.0.1:1
check_usage "--listen must be ADDR:PORT" "${BASE[@]}" --listen nowhere --token-file "$T/good.token"
check_usage "--listen must be ADDR:PORT" "${BASE[@]}" --listen 127.0.0.1:99999 --token-file "$T/good.token"
check_usage "must be an existing absolute directory" --clickhouse http://127.0.0.1:1 \
    --data-path relative --listen 127.0.0.1:0 --token-file "$T/good.token"
check_usage "token file" "${BASE[@]}" --listen 127.0.0.1:0 --token-file "$T/missing.token"
check_usage "16 to 1024 printable" "${BASE[@]}" --listen 127.0.0.1:0 --token-file "$T/short.token"
check_usage "pointer_format must be 1..5" "${BASE[@]}" --listen 127.0.0.1:0 \
    --token-file "$T/good.token" --config "$T/fmt.conf"
check_usage "unexpected argument" "${BASE[@]}" --listen 127.0.0.1:0 --token-file "$T/good.token" extra
grep -rq "a-good-token" <<<"$ERR" && fail "token printed"
ok "bad options, token files and configs refused with exit 2"

done_testing
