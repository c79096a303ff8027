# The command table: help, unknown commands, version.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

expect_exit 0 "$FERRY_BIN" help
assert_contains "$OUT" "usage: ferry <command>" "help prints the overview"
ok "help"

expect_exit 0 "$FERRY_BIN" help version
assert_contains "$OUT" "usage: ferry version" "help version"
ok "help version"

expect_exit 2 "$FERRY_BIN" no-such-command
assert_eq "" "$OUT" "nothing on stdout for an unknown command"
assert_contains "$ERR" "unknown command 'no-such-command'" "unknown command message"
ok "unknown command"

expect_exit 2 "$FERRY_BIN"
ok "no command"

expect_exit 0 "$FERRY_BIN" version
assert_contains "$OUT" "ferry " "version"
ok "version"

done_testing
