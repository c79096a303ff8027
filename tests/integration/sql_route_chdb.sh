# Read routing against real ClickHouse (libchdb 26.7): for a corpus of 58 queries (aggregations,
# GROUP BY / HAVING / ORDER BY ... LIMIT, joins to a small table, window functions, subqueries,
# UNION ALL, WITH, GLOBAL IN / JOIN, FORMAT and SETTINGS tails, strings and comments holding
# keywords), (1) the single-server rewrite with identity names gives the original's result, and
# (2) the plan over three simulated servers, whose tables hold copies of slices in a move, gives
# the original's result when its per-server queries are combined as the router will combine
# them. The checker is tests/lib/sql_route_check.py; a mutation (dropping the slice restriction)
# makes it fail, see docs/routing.md.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

LIBCHDB=$FERRY_CACHE/chdb-26.7.3-stable.1/libchdb.so
CHDB_EXEC=$FERRY_BUILD_DIR/tests/chdb_exec
[ -f "$LIBCHDB" ] || fail "libchdb not found at $LIBCHDB (run scripts/setup.sh)"
[ -x "$CHDB_EXEC" ] || fail "$CHDB_EXEC not built"

if python3 "$FERRY_SOURCE_DIR/tests/lib/sql_route_check.py" "$FERRY_BIN" "$CHDB_EXEC" "$LIBCHDB" \
    "$T" >"$T/check.log" 2>&1; then
    cat "$T/check.log"
    assert_contains "$(cat "$T/check.log")" "failures: 0" "every query agrees with ClickHouse"
    assert_contains "$(cat "$T/check.log")" '"gather"' "the corpus exercises gather plans"
    assert_contains "$(cat "$T/check.log")" '"aggregate"' "the corpus exercises -State/-Merge"
    assert_contains "$(cat "$T/check.log")" '"rows"' "the corpus exercises plain rows"
    ok "routed queries give the reference results"
else
    cat "$T/check.log"
    fail "routed queries differ from the reference (see above)"
fi
done_testing
