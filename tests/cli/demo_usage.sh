# `ferry demo` from outside, without a lab: bad input (exit 2, a clear message, nothing on
# stdout, no directory made or touched), and the in-memory placement experiment
# (`--placement-only`), which keeps the blog's numbers.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

bad() { # bad WHAT-THE-MESSAGE-SAYS ARGS...
    local want=$1; shift
    expect_exit 2 "$FERRY_BIN" demo "$@"
    assert_eq "" "$OUT" "nothing on stdout: $*"
    assert_contains "$ERR" "$want" "message for: $*"
}
bad "unknown option" --frobnicate
bad "--keep needs --dir" --keep
bad "--tenants wants a number from 2 to 2000" --tenants 1
bad "--tenants wants a number" --tenants lots
bad "--days wants a number from 2 to 30" --days 1
bad "less than --days" --days 3 --cold-days 3
bad "--max-parallel wants a number from 1 to 16" --max-parallel 0
bad "--rows-per-day wants a number" --rows-per-day 10
bad "--object-store is local or s3" --object-store ftp
bad "needs --s3-endpoint" --object-store s3
bad "go with --object-store s3" --s3-bucket b
bad "unexpected argument" extra
bad "libchdb.so is missing" --libchdb "$T/nowhere/libchdb.so"
assert_contains "$ERR" "make deps" "how to get the library"
mkdir -p "$T/full" && echo x >"$T/full/file"
bad "is not empty" --dir "$T/full" --keep
assert_eq "x" "$(cat "$T/full/file")" "a non-empty --dir is left alone"
echo x >"$T/plainfile"
bad "is not a directory" --dir "$T/plainfile"
[ ! -e "$T/new" ] || fail "setup"
bad "unknown option" --dir "$T/new" --bogus
[ ! -e "$T/new" ] || fail "bad input made the --dir"
ok "bad input: exit 2, a message naming the fix, nothing on stdout, no directory touched"

expect_exit 0 "$FERRY_BIN" demo --placement-only --json
assert_eq 1000 "$(jq .tenants <<<"$OUT")" "experiment: 1,000 tenants"
assert_eq 1900 "$(jq .slices <<<"$OUT")" "experiment: 1,900 slices"
assert_eq 0 "$(jq .add_equal.moved_between_existing <<<"$OUT")" "nothing moves between old shards"
m=$(jq .add_equal.moved <<<"$OUT")
[ "$m" -gt 400 ] && [ "$m" -lt 550 ] || fail "about a quarter moves, not $m"
expect_exit 0 "$FERRY_BIN" demo --placement-only --hash sha256
assert_contains "$OUT" "moved between old shards" "experiment: text table"
bad "unknown hash" --placement-only --hash md5
ok "--placement-only: the in-memory experiment ($m of 1900 slices move to an equal 4th shard)"

expect_exit 0 "$FERRY_BIN" help demo
assert_contains "$OUT" "--rows-per-day" "help lists the scale options"
done_testing
