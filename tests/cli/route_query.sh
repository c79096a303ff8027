# `ferry route-query` from outside: per-server queries for a routing table (text and JSON),
# copies during a move read once, FORMAT / SETTINGS returned apart, managed tables from a config,
# and bad input (exit 2 with the byte offset or FILE:LINE, nothing on stdout).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

printf 'acme\t0\tn1\nacme\t1\tn1,n2\nacme\t2\tn2\nbeta\t0\tn2\n' >"$T/routes.tsv"
TABLES=(--tables events:shared:tenant:split --tables 'logs:per_tenant:logs_{tenant}')

expect_exit 0 "$FERRY_BIN" route-query "${TABLES[@]}" --local events=events_local \
    --routes "$T/routes.tsv" "SELECT count() FROM events WHERE tenant = 'acme' FORMAT JSON"
assert_contains "$OUT" "plan: aggregate" "two servers serve acme: partial aggregation"
assert_contains "$OUT" "server n1:
  SELECT countState() AS __ferry_a0 FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (0, 1))" \
    "n1 reads acme 0 and 1 (it serves the slice being moved)"
assert_contains "$OUT" "server n2:
  SELECT countState() AS __ferry_a0 FROM events_local AS events WHERE (tenant = 'acme') AND (events.tenant = 'acme' AND events.split IN (2))" \
    "n2 reads acme 2 only, not its copy of acme 1"
assert_contains "$OUT" "initiator:
  SELECT countMerge(__ferry_a0) AS \`count()\` FROM {{ferry.partial}}" "initiator merges"
assert_contains "$OUT" "format: JSON" "FORMAT returned apart"
ok "text output"

expect_exit 0 "$FERRY_BIN" route-query "${TABLES[@]}" --routes "$T/routes.tsv" --json \
    "SELECT x FROM events WHERE tenant = 'beta' SETTINGS max_threads = 1, format = 'Null'"
assert_eq single "$(jq -r .kind <<<"$OUT")" "one server serves beta"
assert_eq n2 "$(jq -r '.queries[0].server' <<<"$OUT")" "it is n2"
assert_eq "SELECT x FROM events WHERE (tenant = 'beta') AND (events.tenant = 'beta' AND events.split IN (0))" \
    "$(jq -r '.queries[0].sql' <<<"$OUT")" "settings stripped from the server's query"
assert_eq "max_threads=1:false format='Null':true" \
    "$(jq -r '[.settings[] | "\(.name)=\(.value):\(.initiator_only)"] | join(" ")' <<<"$OUT")" \
    "settings parsed, initiator-only ones marked"
assert_eq "beta" "$(jq -r '.refs[0].tenants | join(",")' <<<"$OUT")" "tenant filter found"
ok "json output"

expect_exit 0 "$FERRY_BIN" route-query "${TABLES[@]}" --routes "$T/routes.tsv" --json \
    "SELECT e.x, d.n FROM events AS e JOIN dim AS d ON e.k = d.k"
assert_eq gather "$(jq -r .kind <<<"$OUT")" "a join gathers rows"
assert_eq "SELECT e.x, d.n FROM {{ferry.rows.0}} AS e JOIN dim AS d ON e.k = d.k" \
    "$(jq -r .initiator <<<"$OUT")" "initiator reads the gathered rows"
assert_eq 2 "$(jq '.queries | length' <<<"$OUT")" "one gather query per server"
ok "gather plan"

# analysis only (no routes), per-tenant table from a config file
cat >"$T/ferry.conf" <<'CONF'
[table "logs"]
layout = per_tenant
split_column = part
CONF
expect_exit 0 "$FERRY_BIN" route-query --config "$T/ferry.conf" "SELECT count() FROM logs_acme"
assert_contains "$OUT" "ref 0: logs_acme (table logs, level 0): tenant acme" "per-tenant table"
expect_exit 0 "$FERRY_BIN" route-query --config "$T/ferry.conf" --routes "$T/routes.tsv" \
    "SELECT count() FROM logs_acme"
assert_contains "$OUT" "WHERE logs_acme.part IN (0, 1)" "split column from the config"
ok "config tables"

# bad input: exit 2, a precise message, nothing on stdout
expect_exit 2 "$FERRY_BIN" route-query "${TABLES[@]}" "SELECT 'abc FROM events"
assert_contains "$ERR" "single quoted string is not closed (starts at byte 7)" "unterminated string"
assert_eq "" "$OUT" "nothing on stdout"
expect_exit 2 "$FERRY_BIN" route-query "${TABLES[@]}" "SELECT (1 FROM events"
assert_contains "$ERR" "at byte 7 is not closed" "unbalanced parenthesis"
expect_exit 2 "$FERRY_BIN" route-query "${TABLES[@]}" "SELECT 1 /* open"
assert_contains "$ERR" "multiline comment is not closed (starts at byte 9)" "open comment"
printf 'acme\tzero\tn1\n' >"$T/bad.tsv"
expect_exit 2 "$FERRY_BIN" route-query "${TABLES[@]}" --routes "$T/bad.tsv" "SELECT 1"
assert_contains "$ERR" "bad.tsv:1: expected tenant<TAB>split<TAB>shard" "bad routes line"
assert_eq "" "$OUT" "nothing on stdout"
printf 'acme\t0\tn1\nacme\t0\tn2\n' >"$T/dup.tsv"
expect_exit 2 "$FERRY_BIN" route-query "${TABLES[@]}" --routes "$T/dup.tsv" "SELECT 1"
assert_contains "$ERR" "dup.tsv:2: slice acme/0 listed twice" "duplicate slice"
expect_exit 2 "$FERRY_BIN" route-query --tables events:sharded "SELECT 1"
assert_contains "$ERR" "--tables 'events:sharded'" "bad layout"
expect_exit 2 "$FERRY_BIN" route-query --tables events:shared
assert_contains "$ERR" "expected exactly one SQL statement" "no SQL"
expect_exit 1 "$FERRY_BIN" route-query "${TABLES[@]}" "INSERT INTO events VALUES (1)"
assert_contains "$ERR" "not a SELECT statement (insert)" "not a SELECT"
assert_eq "" "$OUT" "nothing on stdout"
port=$(free_port)
expect_exit 1 "$FERRY_BIN" route-query --router "http://127.0.0.1:$port" "SELECT count() FROM events"
assert_contains "$ERR" "cannot reach the router at http://127.0.0.1:$port" "--router: nobody listening"
expect_exit 2 "$FERRY_BIN" route-query --router "http://127.0.0.1:$port" "INSERT INTO events VALUES (1)"
assert_contains "$ERR" "--router explains SELECT-like statements only" "--router: an INSERT is never sent"
expect_exit 2 "$FERRY_BIN" route-query --router "http://127.0.0.1:$port" "${TABLES[@]}" "SELECT 1"
assert_contains "$ERR" "give no --config, --tables" "--router with tables"
ok "bad input"

expect_exit 0 "$FERRY_BIN" help route-query
assert_contains "$OUT" "usage: ferry route-query" "help"
expect_exit 0 "$FERRY_BIN" help
assert_contains "$OUT" "route-query" "listed with a dash"
ok "help"
done_testing
