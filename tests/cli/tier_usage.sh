# `ferry tier`: help, bad options (exit 2, nothing on stdout), and the rule that the flows send
# SQL only through the guard: in lib/flow/ nothing but the guard itself (sqlguard.c) and the
# read-only fingerprints (verify.c, SELECTs only) calls the ClickHouse client directly, and the
# tiering code names no other way to reach a server's SQL.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

expect_exit 0 "$FERRY_BIN" help tier
assert_contains "$OUT" "usage: ferry tier [--config FILE] [--older-than DURATION]" "help tier"
ok "help tier"

printf '[cluster]\nname = x\ncatalog = sqlite:%s/c.db\n[shard "a"]\nreplicas = http://127.0.0.1:1\n' "$T" >"$T/x.conf"
check_usage() { # NEEDLE ARGS...
    local needle=$1; shift
    expect_exit 2 "$FERRY_BIN" tier "$@"
    assert_eq "" "$OUT" "nothing on stdout for: $*"
    assert_contains "$ERR" "$needle" "message for: $*"
}
check_usage "--older-than 'soon'" --config "$T/x.conf" --older-than soon
check_usage "--older-than '0'" --config "$T/x.conf" --older-than 0
check_usage "unexpected argument" --config "$T/x.conf" extra
check_usage "unknown option" --config "$T/x.conf" --frobnicate
FERRY_CONFIG= check_usage "needs --config" --older-than 3d
check_usage "has no cluster yet" --config "$T/x.conf"
ok "bad options and an uninitialised catalog: exit 2"

# ---- the SQL guard is the flows' only way to send SQL ------------------------------------------
F=$FERRY_SOURCE_DIR/lib/flow
direct=$(grep -nE '\bferry_ch_(exec|query_buf|query_rows)\s*\(|curl_easy_' "$F"/*.c | grep -vE '^[^:]*/(sqlguard|verify)\.c:' || true)
[ -z "$direct" ] || fail "lib/flow/ calls the ClickHouse client around the guard: $direct"
grep -q 'ferry_ch_query_buf' "$F/sqlguard.c" || fail "sqlguard.c no longer runs the query itself?"
# verify.c only ever sends SELECTs
bad=$(grep -oE '"(SELECT|ALTER|INSERT|CREATE|SYSTEM|DROP|TRUNCATE|DELETE|OPTIMIZE|RENAME|DETACH|ATTACH)[^"]*' "$F/verify.c" | grep -v '^"SELECT' || true)
[ -z "$bad" ] || fail "verify.c sends something other than SELECT: $bad"
# the tiering code reaches ClickHouse only through tier_sql, which is ferry_guarded_exec
calls=$(grep -hoE '\bferry_guarded_exec\s*\(' "$F"/tier*.c | wc -l)
assert_eq 1 "$calls" "one call of ferry_guarded_exec in the tiering code (tier_sql)"
grep -qE 'int tier_sql\(.*\)' "$F/tier.c" || fail "tier_sql is gone"
grep -A3 -E '^int tier_sql\(' "$F/tier.c" | grep -q 'ferry_guarded_exec' || fail "tier_sql does not go through the guard"
# the listings it shares with moves (move_env.c) go through mv_sql, which is the guard too
grep -A5 -E '^int mv_sql\(' "$F/move_env.c" | grep -q 'ferry_guarded_exec' || fail "mv_sql does not go through the guard"
if grep -nE '"[^"]*\b(DROP|TRUNCATE)\b' "$F"/tier*.c; then fail "the tiering code spells DROP or TRUNCATE"; fi
ok "lib/flow/ sends SQL only through ferry_guarded_exec (plus verify.c's SELECTs)"

done_testing
