# Users and tenant isolation in `ferry router` (docs/security.md), against a real 3-node lab and
# a reference node:
#   - authentication as ClickHouse does it (HTTP Basic, X-ClickHouse-User/Key, user/password
#     parameters): 516 AUTHENTICATION_FAILED (HTTP 403) for no credential, an unknown user, a
#     wrong password, mixed schemes, a client outside the user's networks; the time of a failure
#     against a success, measured and printed; repeated failures from one address slowed down;
#     no password in any log;
#   - the read corpus (tests/data/router_read_queries.sql) as an admin (the reference with every
#     tenant) and as a user bound to acme (the reference's copy holding only acme's rows; a query
#     naming another tenant must get 497 and nothing else);
#   - more than 30 named attempts to reach another tenant's rows: each 497 ACCESS_DENIED alone;
#   - reads without a tenant filter (subqueries, joins, unions, GLOBAL IN) see only acme;
#   - inserts in every routed format with a foreign row: 497, nothing stored on any node (also a
#     request larger than flush_bytes, which an admin's would stream);
#   - the router's own endpoints (status, partials) and a move's fence with the cluster token;
#   - per-user limits: a queue, too many at once, requests per second, a read cancelled on every
#     shard after max_execution_time;
#   - a password change, a rebinding and a removal on the running router;
#   - the official ClickHouse JS client as a bound user; doctor's shard_grants in the lab;
#   - auth = none refused off loopback.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
CHECK="python3 $FERRY_SOURCE_DIR/tests/lib/router_read_check.py"
CORPUS=$FERRY_SOURCE_DIR/tests/data/router_read_queries.sql
CHJS=${FERRY_CHJS_DIR:-$FERRY_CACHE/clickhouse-js-1.23.1}
[ -f "$CHJS/node_modules/@clickhouse/client/package.json" ] ||
    fail "the ClickHouse JS client is not installed at $CHJS (run scripts/setup.sh)"

LAB=$T/lab
REFLAB=$T/ref
lab_up "$LAB" --nodes 3
lab_up "$REFLAB" --nodes 1
REF=$(lab_url "$REFLAB" node1)
N1=$(lab_url "$LAB" node1); N2=$(lab_url "$LAB" node2); N3=$(lab_url "$LAB" node3)
NODES=("$N1" "$N2" "$N3")
CONF=$LAB/ferry.conf
# secrets: the cluster's router token, the users' passwords (files, as ferry reads secrets)
head -c 24 /dev/urandom | base64 >"$T/router.token"
printf 'root-%s\n' "$RANDOM$RANDOM" >"$T/root.pw"
printf 'alice-%s\n' "$RANDOM$RANDOM" >"$T/alice.pw"
printf 'bob-%s\n' "$RANDOM$RANDOM" >"$T/bob.pw"
chmod 600 "$T"/*.pw "$T/router.token"
ROOTPW=$(head -1 "$T/root.pw"); ALICEPW=$(head -1 "$T/alice.pw"); BOBPW=$(head -1 "$T/bob.pw")
sed -i "s#^\[cluster\]\$#[cluster]\nrouter_token_file = $T/router.token#" "$CONF"
events_conf --users "$CONF" "passthrough = $N1" "shard_timeout = 20s" "flush_bytes = 1K" \
    "bound_insert_max_bytes = 1M" "login_free_failures = 100000"
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"

DDL="CREATE TABLE events (tenant String, day UInt32, split UInt32, uid UInt64, u String, x UInt64,
     ts DateTime, k UInt32, arr Array(UInt8)) ENGINE = MergeTree PARTITION BY (tenant, day, split)
     ORDER BY (tenant, ts) SETTINGS non_replicated_deduplication_window = 1000"
DIM="CREATE TABLE dim (k UInt32, name String) ENGINE = MergeTree ORDER BY k"
DIMROWS="INSERT INTO dim SELECT number, concat('k', toString(number)) FROM numbers(4)"
for u in "${NODES[@]}" "$REF"; do
    chq "$u" "$DDL" >/dev/null; chq "$u" "$DIM" >/dev/null; chq "$u" "$DIMROWS" >/dev/null
done
"$FERRY_BIN" tenant add acme beta gamma delta zeta --config "$CONF" >/dev/null || fail "tenant add"

# users: an admin, alice bound to acme (and dim), bob bound to beta
"$FERRY_BIN" user add root --admin --password-file "$T/root.pw" --config "$CONF" >/dev/null
"$FERRY_BIN" user add alice --tenants acme --tables default.dim --password-file "$T/alice.pw" \
    --config "$CONF" >/dev/null
"$FERRY_BIN" user add bob --tenants beta --password-sha256 "$(printf %s "$BOBPW" | sha256sum | cut -c1-64)" \
    --config "$CONF" >/dev/null
expect_exit 2 "$FERRY_BIN" user add carol --tenants nosuch --password-file "$T/alice.pw" --config "$CONF"
assert_contains "$ERR" "tenant 'nosuch' is not registered" "an unknown tenant is refused"
expect_exit 2 "$FERRY_BIN" user add carol --tenants acme --networks 10.1.0.0/8 --password-file "$T/alice.pw" --config "$CONF"
assert_contains "$ERR" "host bits" "a malformed network is refused"
expect_exit 0 "$FERRY_BIN" user list --json --config "$CONF"
assert_eq "alice bob root" "$(jq -r '[.users[].name] | join(" ")' <<<"$OUT")" "user list"
case "$OUT" in *salt*|*hash*|*"$ALICEPW"*) fail "user list shows secrets: $OUT" ;; esac
"$FERRY_BIN" catalog export --config "$CONF" >"$T/dump.json"
grep -q "$ALICEPW\|$ROOTPW" "$T/dump.json" && fail "the catalog dump holds a password"
[ "$(jq '.users | length' "$T/dump.json")" = 3 ] || fail "the dump has no users"
jq -e '.users[] | select(.name == "alice") | .salt and .hash' "$T/dump.json" >/dev/null ||
    fail "the dump lacks alice's salted hash"
ok "users in the catalog: admin, bound (password file), bound (SHA-256); list and dump hold no password"

start_router "$CONF" router
R=$R_URL; ROUTER_PID=$R_PID
sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $R#" "$CONF"

# rq USER PASSWORD SQL [CURL ARGS]: through the router with HTTP Basic (SQL as the body; "-":
# none, the query is in the CURL ARGS); sets CODE and BODY
rq() {
    local user=$1 pw=$2 sql=$3; shift 3
    local -a body=(--data-binary "$sql")
    [ "$sql" != - ] || body=()
    OUT=$(curl -sS -w '\n%{http_code}' -u "$user:$pw" "$R/" "${body[@]}" "$@") || fail "curl: $sql"
    CODE=${OUT##*$'\n'}; BODY=${OUT%$'\n'*}; BODY=${BODY%$'\n'}
}
root() { rq root "$ROOTPW" "$@"; [ "$CODE" = 200 ] || fail "as root: $1: $BODY"; printf '%s' "$BODY"; }

# ---- load (as root, through the router) ----
GEN="SELECT ['acme','beta','gamma','delta','zeta'][number % 5 + 1] AS tenant,
     20261101 + intDiv(number, 1000) AS day, cityHash64(number) % 50 AS uid,
     concat('u', toString(number % 7)) AS u, number AS x,
     toDateTime('2026-11-01 00:00:00') + number * 37 AS ts, number % 5 AS k,
     [number % 2, number % 3] AS arr FROM numbers(3000)"
chq "$REF" "INSERT INTO events SELECT tenant, day,
    if(x < 1500, 0, xxh3(toString(uid)) % multiIf(tenant = 'acme', 3, tenant = 'beta', 2, tenant = 'zeta', 4, 1)),
    uid, u, x, ts, k, arr FROM ($GEN)" >/dev/null
load() {
    chq "$REF" "SELECT tenant, day, uid, u, x, ts, k, arr FROM ($GEN) WHERE $1 FORMAT TSV" >"$T/rows.tsv"
    OUT=$(curl -sS -w '\n%{http_code}' -u "root:$ROOTPW" \
        "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, u, x, ts, k, arr) FORMAT TSV' '$q|@uri')" \
        --data-binary @"$T/rows.tsv")
    [ "${OUT##*$'\n'}" = 200 ] || fail "router insert: $OUT"
}
load "x < 1500"
"$FERRY_BIN" tenant set-splits acme 3 --config "$CONF" >/dev/null
"$FERRY_BIN" tenant set-splits beta 2 --config "$CONF" >/dev/null
"$FERRY_BIN" tenant set-splits zeta 4 --config "$CONF" >/dev/null
V=$("$FERRY_BIN" route --tenant zeta --json --config "$CONF" | jq -r .version)
wait_for 10 bash -c "[ \$(curl -s -H 'X-Ferry-Token: $(cat "$T/router.token")' $R/ferry/router | jq .routing_version) -ge $V ]"
load "x >= 1500"
# the reference's copy holding only acme's rows: what a user bound to acme must see
chq "$REF" "CREATE DATABASE acme_only" >/dev/null
chq "$REF" "CREATE TABLE acme_only.events AS default.events" >/dev/null
chq "$REF" "INSERT INTO acme_only.events SELECT * FROM default.events WHERE tenant = 'acme'" >/dev/null
chq "$REF" "CREATE TABLE acme_only.dim AS default.dim" >/dev/null
chq "$REF" "INSERT INTO acme_only.dim SELECT * FROM default.dim" >/dev/null
total=0
for u in "${NODES[@]}"; do total=$((total + $(chq "$u" "SELECT count() FROM events"))); done
assert_eq 3000 "$total" "3000 rows written by the admin"
ok "5 tenants loaded through the router by an admin (3 of them split after half the rows)"

# ---- authentication ----
expect_exit 0 curl -sS -w '\n%{http_code}' "$R/" --data-binary "SELECT 1"
assert_eq 403 "${OUT##*$'\n'}" "no credential: ClickHouse's status for AUTHENTICATION_FAILED"
assert_contains "$OUT" "Code: 516. DB::Exception: default: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)" "no credential"
rq alice wrong "SELECT 1"
assert_eq 403 "$CODE" "wrong password"; assert_contains "$BODY" "Code: 516" "wrong password code"
assert_contains "$BODY" "alice: Authentication failed" "wrong password message"
rq mallory "$ALICEPW" "SELECT 1"
assert_eq 403 "$CODE" "unknown user"; assert_contains "$BODY" "mallory: Authentication failed" "unknown user message"
Q="SELECT count() FROM events WHERE tenant = 'acme'"
ACME=$(chq "$REF" "$Q")
assert_eq "$ACME" "$(curl -sS -H "X-ClickHouse-User: alice" -H "X-ClickHouse-Key: $ALICEPW" "$R/" --data-binary "$Q")" "X-ClickHouse-User/Key headers"
assert_eq "$ACME" "$(curl -sS "$R/?user=alice&password=$(jq -rn --arg p "$ALICEPW" '$p|@uri')" --data-binary "$Q")" "user/password parameters"
assert_eq "$ACME" "$(curl -sS -u "alice:$ALICEPW" "$R/" --data-binary "$Q")" "HTTP Basic"
expect_exit 0 curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" "$R/?user=alice" --data-binary "$Q"
assert_contains "$OUT" "it is not allowed to use Authorization HTTP header and authentication via parameters simultaneously" "mixed schemes"
assert_eq 403 "${OUT##*$'\n'}" "mixed schemes status"
expect_exit 0 curl -sS -w '\n%{http_code}' -H "Authorization: Bearer x" "$R/" --data-binary "$Q"
assert_contains "$OUT" "'Bearer' HTTP Authorization scheme is not supported" "other schemes"
ok "516 AUTHENTICATION_FAILED (HTTP 403, ClickHouse's message) for no credential, a wrong password, an unknown user, mixed and other schemes; the three ClickHouse credential forms work"

# the time of a failure against a success: interleaved, the same work (a hash) either way
for i in $(seq 1 40); do
    curl -s -o /dev/null -w '%{time_total}\n' -u "alice:$ALICEPW" "$R/?query=SELECT+1" >>"$T/t_ok"
    curl -s -o /dev/null -w '%{time_total}\n' -u "alice:wrong$i" "$R/?query=SELECT+1" >>"$T/t_wrong"
    curl -s -o /dev/null -w '%{time_total}\n' -u "nobody$i:x" "$R/?query=SELECT+1" >>"$T/t_unknown"
    curl -s -o /dev/null -w '%{time_total}\n' "$R/?query=SELECT+1" >>"$T/t_none"
done
med() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)] * 1000}'; }
echo "# median time to answer (ms): right password $(med "$T/t_ok") (runs SELECT 1 on the passthrough), wrong password $(med "$T/t_wrong"), unknown user $(med "$T/t_unknown"), no credential $(med "$T/t_none")"
echo "# wrong password - unknown user: $(awk -v w="$(med "$T/t_wrong")" -v u="$(med "$T/t_unknown")" 'BEGIN { printf "%.2f", w - u }') ms; right password - wrong password: $(awk -v w="$(med "$T/t_wrong")" -v r="$(med "$T/t_ok")" 'BEGIN { printf "%.2f", r - w }') ms (the right one also runs its query)"
awk -v w="$(med "$T/t_wrong")" -v u="$(med "$T/t_unknown")" 'BEGIN { d = w - u; if (d < 0) d = -d; exit !(d < 50) }' ||
    fail "a wrong password and an unknown user answer in very different times"
ok "failures answer in about the same time whatever failed (printed above)"

# repeated failures from one address are slowed down (a second router: 3 free failures, 1 s decay)
CONF2=$T/throttle.conf
sed -e 's/^login_free_failures = .*/login_free_failures = 3\nlogin_max_delay = 2s\nlogin_failure_decay = 1s/' "$CONF" >"$CONF2"
start_router "$CONF2" router2
R2=$R_URL; R2PID=$R_PID
for i in 1 2 3 4 5 6 7; do
    t=$(curl -s -o /dev/null -w '%{time_total}' -u "alice:guess$i" "$R2/?query=SELECT+1")
    echo "# guess $i answered in ${t} s"
done
t=$(curl -s -o /dev/null -w '%{time_total}' -u "alice:guess8" "$R2/?query=SELECT+1")
awk -v t="$t" 'BEGIN { exit !(t >= 0.35) }' || fail "the 8th failure in a row was not slowed down (${t} s)"
t=$(curl -s -o /dev/null -w '%{time_total}' -u "alice:$ALICEPW" "$R2/?query=SELECT+1")
awk -v t="$t" 'BEGIN { exit !(t >= 0.35) }' || fail "a throttled address got a right password checked at once (${t} s)"
grep -q 'slowed_ms=[1-9]' "$T/router2.log" || fail "the router did not log the slow-down"
wait_for 30 bash -c "t=\$(curl -s -o /dev/null -w '%{time_total}' -u 'alice:$ALICEPW' '$R2/?query=SELECT+1'); \
    awk -v t=\"\$t\" 'BEGIN { exit !(t < 0.1) }'" || fail "the slow-down did not decay"
stop_router "$R2PID"
ok "8 failures in a row from one address: every attempt from it waits (the right password too), and the wait decays"

# client networks
"$FERRY_BIN" user add netuser --tenants acme --networks 10.0.0.0/8,fd00::/8 --password-file "$T/alice.pw" --config "$CONF" >/dev/null
"$FERRY_BIN" user add localuser --tenants acme --networks 127.0.0.0/8 --password-file "$T/alice.pw" --config "$CONF" >/dev/null
V=$(sqlite3 "$LAB/catalog.db" "SELECT value FROM meta WHERE key = 'routing_version'")
TOKEN=$(cat "$T/router.token")
status() { curl -s -H "X-Ferry-Token: $TOKEN" "$R/ferry/router"; }
wait_for 10 bash -c "[ \$(curl -s -H 'X-Ferry-Token: $TOKEN' $R/ferry/router | jq .routing_version) -ge $V ]"
rq netuser "$ALICEPW" "$Q"
assert_eq 403 "$CODE" "a client outside the user's networks"; assert_contains "$BODY" "netuser: Authentication failed" "networks: the same answer as a wrong password"
rq localuser "$ALICEPW" "$Q"
assert_eq "200 $ACME" "$CODE $BODY" "a client inside the user's networks"
ok "client networks: 127.0.0.1 is refused for 10.0.0.0/8 (516, like a wrong password) and accepted for 127.0.0.0/8"

# ---- reads: the corpus as an admin and as a user bound to acme ----
$CHECK --user root --password "$ROOTPW" "$R" "$REF" "$CORPUS" >"$T/check_root.log" 2>&1 ||
    { cat "$T/check_root.log"; fail "admin's answers differ from the reference"; }
summary=$(tail -1 "$T/check_root.log")
assert_contains "$summary" "failures: 0" "admin corpus"
ok "admin: the corpus ($summary)"
FOREIGN=beta,gamma,delta,zeta,nobody
$CHECK --user alice --password "$ALICEPW" --bound acme --foreign "$FOREIGN" --ref-database acme_only \
    "$R" "$REF" "$CORPUS" >"$T/check_alice.log" 2>&1 || { cat "$T/check_alice.log"; fail "alice's answers differ"; }
summary=$(tail -1 "$T/check_alice.log")
assert_contains "$summary" "failures: 0" "alice corpus"
refused=$(sed -n 's/.*refused: \([0-9]*\),.*/\1/p' <<<"$summary")
[ "$refused" -ge 15 ] || fail "only $refused corpus queries named another tenant"
answered=$(( $(sed -n 's/^queries: \([0-9]*\),.*/\1/p' <<<"$summary") - refused ))
[ "$answered" -ge 30 ] || fail "only $answered corpus queries were answered for alice"
for kind in aggregate rows gather; do
    assert_contains "$summary" "\"$kind\"" "alice's answers use $kind plans"
done
ok "bound to acme: $answered corpus queries equal a reference holding only acme's rows, $refused naming another tenant refused with 497 alone ($summary)"

# reads without a tenant filter, at every level, see only acme
for q in "SELECT count(), sum(x) FROM events" \
         "SELECT tenant, count() FROM events GROUP BY tenant ORDER BY tenant" \
         "SELECT count() FROM (SELECT * FROM events WHERE k < 3)" \
         "SELECT count() FROM events WHERE x IN (SELECT x FROM events WHERE k = 1)" \
         "SELECT count() FROM events AS a JOIN events AS b ON a.x = b.x" \
         "SELECT count() FROM events AS a LEFT JOIN events AS b ON a.x = b.x + 5 WHERE b.x > 0" \
         "SELECT count() FROM dim AS d RIGHT JOIN events AS e ON e.k = d.k" \
         "SELECT x FROM events WHERE k = 1 UNION ALL SELECT x FROM events WHERE k = 2 ORDER BY x" \
         "SELECT count() FROM events WHERE x GLOBAL IN (SELECT x FROM events WHERE k = 4)" \
         "SELECT count() FROM events GLOBAL JOIN (SELECT k, max(x) AS m FROM events GROUP BY k) AS r USING (k)" \
         "WITH s AS (SELECT tenant, x FROM events) SELECT tenant, count() FROM s GROUP BY tenant" \
         "SELECT count() FROM events WHERE tenant LIKE '%'" \
         "SELECT count() FROM events WHERE tenant = 'acme' OR k = 4" \
         "SELECT count() FROM events WHERE lower(tenant) != 'acme'"; do
    want=$(curl -sS "$REF/?database=acme_only" --data-binary "$q")
    rq alice "$ALICEPW" "$q"
    [ "$CODE" = 200 ] || fail "alice: $q: $BODY"
    assert_eq "$want" "$BODY" "alice sees only acme: $q"
done
ok "reads without a tenant filter (subqueries, LEFT/RIGHT joins, UNION, GLOBAL IN/JOIN, WITH, LIKE, OR, expressions) return exactly acme's rows"

# the explain shows the restriction
expect_exit 0 "$FERRY_BIN" route-query --router "$R" --user alice --password-file "$T/alice.pw" --json "SELECT count() FROM events"
assert_eq '["acme"]' "$(jq -c .restricted_to_tenants <<<"$OUT")" "explain names the tenants"
n=$(jq '[.queries[].sql | select(test("tenant = .acme. AND events.split IN"))] | length' <<<"$OUT")
assert_eq "$(jq '.queries | length' <<<"$OUT")" "$n" "every server query restricted to acme"
case "$OUT" in *beta*|*gamma*) fail "explain names another tenant: $OUT" ;; esac
expect_exit 0 "$FERRY_BIN" route-query --router "$R" --user alice --password-file "$T/alice.pw" "SELECT count() FROM events"
assert_contains "$OUT" "restricted to tenants: acme" "explain as text"
expect_exit 0 "$FERRY_BIN" route-query --router "$R" --user root --password-file "$T/root.pw" --json "SELECT count() FROM events"
[ "$(jq -r .restricted_to_tenants <<<"$OUT")" = null ] || fail "an admin's plan is restricted"
ok "ferry route-query --router --user alice shows every server query restricted to acme; root's is not"

# ---- attempts to reach another tenant's rows: 497, nothing else ----
ATTEMPTS=0
refuse() { # NAME SQL [CURL ARGS]: refused with ACCESS_DENIED (497, HTTP 403) and one line
    local name=$1 sql=$2; shift 2
    rq alice "$ALICEPW" "$sql" "$@"
    [ "$CODE" = 403 ] || fail "attempt '$name': HTTP $CODE: $BODY"
    case "$BODY" in "Code: 497. DB::Exception: "*"(ACCESS_DENIED)"*) ;; *) fail "attempt '$name': $BODY" ;; esac
    [ "$(printf '%s' "$BODY" | wc -l)" -le 1 ] || fail "attempt '$name' answered more than the error: $BODY"
    ATTEMPTS=$((ATTEMPTS + 1))
    echo "# refused: $name"
}
refuse "literal" "SELECT * FROM events WHERE tenant = 'beta'"
refuse "literal on the left" "SELECT * FROM events WHERE 'beta' = tenant"
refuse "== operator" "SELECT count() FROM events WHERE tenant == 'gamma'"
refuse "!= (names a tenant)" "SELECT count() FROM events WHERE tenant != 'beta'"
refuse "<> (names a tenant)" "SELECT count() FROM events WHERE tenant <> 'beta'"
refuse "IN list" "SELECT count() FROM events WHERE tenant IN ('acme', 'beta')"
refuse "NOT IN list" "SELECT count() FROM events WHERE tenant NOT IN ('zeta')"
refuse "OR" "SELECT count() FROM events WHERE tenant = 'acme' OR tenant = 'beta'"
refuse "OR inside parentheses" "SELECT count() FROM events WHERE tenant = 'acme' OR (k = 1 AND tenant = 'delta')"
refuse "qualified column" "SELECT count() FROM events AS e WHERE e.tenant = 'beta'"
refuse "quoted column" 'SELECT count() FROM events WHERE `tenant` = '"'"'beta'"'"''
refuse "subquery in FROM" "SELECT count() FROM (SELECT * FROM events WHERE tenant = 'beta')"
refuse "IN subquery" "SELECT count() FROM events WHERE x IN (SELECT x FROM events WHERE tenant = 'beta')"
refuse "scalar subquery" "SELECT (SELECT sum(x) FROM events WHERE tenant = 'beta')"
refuse "JOIN condition" "SELECT count() FROM events a JOIN events b ON a.x = b.x AND b.tenant = 'beta'"
refuse "UNION ALL part" "SELECT x FROM events WHERE tenant = 'acme' UNION ALL SELECT x FROM events WHERE tenant = 'beta'"
refuse "GLOBAL IN" "SELECT count() FROM events WHERE uid GLOBAL IN (SELECT uid FROM events WHERE tenant = 'zeta')"
refuse "GLOBAL JOIN" "SELECT count() FROM events GLOBAL JOIN (SELECT k FROM events WHERE tenant = 'beta') AS r USING (k)"
refuse "WITH subquery" "WITH s AS (SELECT * FROM events WHERE tenant = 'gamma') SELECT count() FROM s"
refuse "PREWHERE" "SELECT count() FROM events PREWHERE tenant = 'beta'"
refuse "HAVING" "SELECT tenant, count() FROM events GROUP BY tenant HAVING tenant = 'beta'"
refuse "equals()" "SELECT count() FROM events WHERE equals(tenant, 'beta')"
refuse "has()" "SELECT count() FROM events WHERE has(['acme', 'beta'], tenant)"
refuse "concat() expression" "SELECT count() FROM events WHERE tenant = concat('be', 'ta')"
refuse "|| expression" "SELECT count() FROM events WHERE tenant = 'be' || 'ta'"
refuse "heredoc string" 'SELECT count() FROM events WHERE tenant = $$beta$$'
refuse "query parameter" - -G --data-urlencode "query=SELECT count() FROM events WHERE tenant = {t:String}" --data-urlencode "param_t=beta"
refuse "WITH alias" "WITH 'beta' AS t SELECT count() FROM events WHERE tenant = t"
refuse "alias named like the tenant column" "SELECT 'beta' AS tenant, x FROM events"
refuse "tuple comparison" "SELECT count() FROM events WHERE (tenant, k) IN (('beta', 1))"
refuse "-- comment trick" "SELECT count() FROM events WHERE tenant = 'acme' -- '
OR tenant = 'beta'"
refuse "# comment trick" "SELECT count() FROM events WHERE tenant = 'acme' # '
OR tenant = 'beta'"
refuse "block comment trick" "SELECT count() FROM events WHERE tenant = /* 'acme' */ 'beta'"
refuse "escaped NUL byte in a value" "SELECT count() FROM events WHERE tenant = 'acme\\0'"
printf "SELECT count() FROM events WHERE tenant = 'ac\0me'" >"$T/nul.sql"
refuse "raw NUL byte in a value" "@$T/nul.sql"
refuse "table function url()" "SELECT * FROM url('$N1/?query=SELECT+*+FROM+events', 'TSV')"
refuse "table function remote()" "SELECT * FROM remote('${N1#http://}', default.events)"
refuse "table function cluster()" "SELECT * FROM cluster('default', default.events)"
refuse "table function s3()" "SELECT * FROM s3('http://127.0.0.1:1/b/k', 'TSV')"
refuse "table function file()" "SELECT * FROM file('/etc/passwd', 'LineAsString')"
refuse "table function numbers() joined" "SELECT count() FROM events JOIN numbers(10) AS n ON events.k = n.number"
refuse "system.parts" "SELECT partition, rows FROM system.parts"
refuse "system table in a subquery" "SELECT count() FROM events WHERE x IN (SELECT rows FROM system.parts)"
refuse "information_schema" "SELECT * FROM information_schema.tables"
refuse "IN a table" "SELECT count() FROM events WHERE k IN system.one"
refuse "a WITH name shadowing the table" "WITH events AS (SELECT * FROM events) SELECT count() FROM events"
refuse "dictGet()" "SELECT dictGet('d', 'v', toUInt64(1)) FROM events"
refuse "getClientHTTPHeader()" "SELECT getClientHTTPHeader('Authorization') FROM events SETTINGS allow_get_client_http_header = 1"
refuse "a URL setting" - -G --data-urlencode "allow_get_client_http_header=1" --data-urlencode "query=SELECT count() FROM events"
refuse "another database" - -G --data-urlencode "database=system" --data-urlencode "query=SELECT count() FROM parts"
refuse "EXPLAIN" "EXPLAIN SELECT * FROM events WHERE tenant = 'beta'"
refuse "SHOW" "SHOW TABLES"
refuse "DDL" "DROP TABLE events"
refuse "ALTER DELETE" "ALTER TABLE events DELETE WHERE tenant = 'beta'"
refuse "SYSTEM" "SYSTEM FLUSH LOGS"
refuse "INSERT SELECT into a managed table" "INSERT INTO events SELECT * FROM events"
refuse "INSERT into another table" "INSERT INTO dim VALUES (9, 'x')"
[ "$ATTEMPTS" -ge 30 ] || fail "only $ATTEMPTS attempts"
for u in "${NODES[@]}"; do assert_eq 4 "$(chq "$u" "SELECT count() FROM dim")" "dim untouched on $u"; done
assert_eq 3000 "$(( $(chq "$N1" "SELECT count() FROM events") + $(chq "$N2" "SELECT count() FROM events") + $(chq "$N3" "SELECT count() FROM events") ))" "events untouched"
# bob (bound to beta) gets beta's rows, and acme's are refused to him
rq bob "$BOBPW" "SELECT count() FROM events"
assert_eq "$(chq "$REF" "SELECT count() FROM events WHERE tenant = 'beta'")" "$BODY" "bob sees beta's rows"
rq bob "$BOBPW" "SELECT count() FROM events WHERE tenant = 'acme'"
assert_eq 403 "$CODE" "bob naming acme"
ok "$ATTEMPTS named attempts to reach another tenant's rows (literals, lists, OR, subqueries, joins, unions, GLOBAL, comments, NUL bytes, parameters, aliases, table functions, system tables, settings, other statements): each ACCESS_DENIED alone; bob sees beta"

# ---- inserts with a foreign row: 497, nothing stored ----
stored() { local n=0 u; for u in "${NODES[@]}"; do n=$((n + $(chq "$u" "SELECT count() FROM events WHERE x >= $1 AND x < $2"))); done; echo "$n"; }
COLS="tenant, day, uid, u, x, ts, k, arr"
base=800000
for fmt in JSONEachRow TabSeparated TabSeparatedWithNames CSV CSVWithNames RowBinary; do
    # the rows in the format, from ClickHouse itself (the lab's node writes a header per block,
    # so the WithNames formats get one header, written here)
    plain=${fmt%WithNames}
    case "$fmt" in
        TabSeparatedWithNames) printf 'tenant\tday\tuid\tu\tx\tts\tk\tarr\n' ;;
        CSVWithNames) printf '"tenant","day","uid","u","x","ts","k","arr"\n' ;;
    esac >"$T/rows.$fmt"
    # (curl to the file: RowBinary does not survive a shell variable)
    curl -sS --fail "$REF/" --data-binary "SELECT * FROM (SELECT 'acme' AS tenant, toUInt32(20261201) AS day,
        toUInt64(number) AS uid, 'ins' AS u, toUInt64($base + number) AS x,
        toDateTime('2026-12-01 00:00:00') AS ts, toUInt32(1) AS k, [toUInt8(1)] AS arr FROM numbers(5)
        UNION ALL SELECT 'beta', toUInt32(20261201), toUInt64(99), 'ins', toUInt64($base + 99),
        toDateTime('2026-12-01 00:00:00'), toUInt32(1), [toUInt8(2)]) ORDER BY x FORMAT $plain" >>"$T/rows.$fmt"
    [ -s "$T/rows.$fmt" ] || fail "no $fmt rows from the reference"
    OUT=$(curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" \
        "$R/?query=$(jq -rn --arg q "INSERT INTO events ($COLS) FORMAT $fmt" '$q|@uri')" --data-binary @"$T/rows.$fmt")
    assert_eq 403 "${OUT##*$'\n'}" "$fmt insert with a beta row: ${OUT%$'\n'*}"
    assert_contains "$OUT" "Code: 497" "$fmt: ACCESS_DENIED"
    assert_contains "$OUT" "tenant 'beta' is not one of user alice's tenants; nothing was written" "$fmt message"
    assert_eq 0 "$(stored $base $((base + 100)))" "$fmt: nothing stored on any node"
    base=$((base + 1000))
done
# a tenant that does not exist gets the same answer as one that does (no probing for tenants)
OUT=$(printf '{"tenant":"acme","uid":1,"x":%d}\n{"tenant":"no-such-tenant","uid":2,"x":%d}\n' $base $((base + 1)) |
    curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" "$R/?query=INSERT+INTO+events+FORMAT+JSONEachRow" --data-binary @-)
assert_eq 403 "${OUT##*$'\n'}" "a row of an unregistered tenant: ${OUT%$'\n'*}"
assert_contains "$OUT" "tenant 'no-such-tenant' is not one of user alice's tenants" "the same refusal"
# the statement at the start of the body, as clickhouse-client sends it
{ echo "INSERT INTO events ($COLS) FORMAT TSV"; cat "$T/rows.TabSeparated"; } >"$T/body.tsv"
OUT=$(curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" "$R/" --data-binary @"$T/body.tsv")
assert_eq 403 "${OUT##*$'\n'}" "statement in the body"
# larger than flush_bytes (an admin's would stream to the shards): held whole, then refused
chq "$REF" "SELECT 'acme', 20261202, number, 'big', 850000 + number, toDateTime('2026-12-02 00:00:00'), 1, [1]
    FROM numbers(3000) FORMAT TSV" >"$T/big.tsv"
cp "$T/big.tsv" "$T/big_bad.tsv"
printf 'beta\t20261202\t1\tbig\t853000\t2026-12-02 00:00:00\t1\t[1]\n' >>"$T/big_bad.tsv"
OUT=$(curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" \
    "$R/?query=$(jq -rn --arg q "INSERT INTO events ($COLS) FORMAT TSV" '$q|@uri')" --data-binary @"$T/big_bad.tsv")
assert_eq 403 "${OUT##*$'\n'}" "a large insert with a beta row at its end"
assert_contains "$OUT" "row 3001: tenant 'beta'" "the row is named"
assert_eq 0 "$(stored 850000 860000)" "the large refused insert stored nothing"
OUT=$(curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" \
    "$R/?query=$(jq -rn --arg q "INSERT INTO events ($COLS) FORMAT TSV" '$q|@uri')" --data-binary @"$T/big.tsv")
assert_eq 200 "${OUT##*$'\n'}" "the same large insert of acme alone"
assert_eq 3000 "$(stored 850000 860000)" "3000 rows of acme stored"
head -c 1200000 /dev/zero | tr '\0' 'x' >"$T/huge.tsv"
OUT=$(curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" \
    "$R/?query=$(jq -rn --arg q "INSERT INTO events ($COLS) FORMAT TSV" '$q|@uri')" --data-binary @"$T/huge.tsv")
assert_eq 413 "${OUT##*$'\n'}" "beyond bound_insert_max_bytes"
assert_contains "$OUT" "bound_insert_max_bytes" "the limit is named"
ok "inserts in JSONEachRow, TSV, TSVWithNames, CSV, CSVWithNames, RowBinary (and the statement in the body) with a beta row: 497, nothing stored on any node; 3000 rows (beyond flush_bytes) with one beta row at the end: nothing stored, without it all stored; beyond bound_insert_max_bytes: 413"
"$FERRY_BIN" user remove localuser --config "$CONF" >/dev/null
"$FERRY_BIN" user remove netuser --config "$CONF" >/dev/null

# ---- passthrough and the router's own endpoints ----
assert_eq 4 "$(root "SELECT count() FROM dim")" "an admin's statement on another table passes through"
rq alice "$ALICEPW" "SELECT count() FROM dim"
assert_eq "200 4" "$CODE $BODY" "a table alice's user lists passes through"
assert_eq default "$(root "SELECT currentUser()")" "passthrough runs as the router's identity, not root"
expect_exit 0 curl -sS -w '\n%{http_code}' "$R/ferry/router"
assert_eq 403 "${OUT##*$'\n'}" "status without credentials"; assert_contains "$OUT" "Code: 516" "status needs credentials"
expect_exit 0 curl -sS -w '\n%{http_code}' -u "alice:$ALICEPW" "$R/ferry/router"
assert_contains "$OUT" "Code: 497" "status refused to a bound user"
expect_exit 0 curl -sS -w '\n%{http_code}' -H "X-Ferry-Token: wrong" "$R/ferry/router"
assert_contains "$OUT" "Code: 516" "a wrong token"
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' -u "root:$ROOTPW" "$R/ferry/router")" "status for an admin"
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Ferry-Token: $TOKEN" "$R/ferry/router")" "status with the cluster token"
assert_eq 403 "$(curl -s -o /dev/null -w '%{http_code}' "$R/metrics")" "metrics without credentials"
assert_eq 403 "$(curl -s -o /dev/null -w '%{http_code}' -u "alice:$ALICEPW" "$R/metrics")" "metrics for a bound user"
# (into a file first: grep -q would stop reading and, under pipefail, fail curl with SIGPIPE)
curl -sSf -H "Authorization: Bearer $TOKEN" "$R/metrics" >"$T/metrics.prom" ||
    fail "metrics with the token as a bearer token (as Prometheus sends it)"
grep -q '^ferry_router_requests_total' "$T/metrics.prom" ||
    fail "metrics with the bearer token lack the request counts: $(head -5 "$T/metrics.prom")"
# the wrong passwords and the wrong token above were counted as refused
nauth=$(awk '$1 == "ferry_router_refused_total{reason=\"authentication\"}" {print $2}' "$T/metrics.prom")
[ "${nauth:-0}" -ge 3 ] 2>/dev/null || fail "authentication failures counted: '$nauth'"
expect_exit 0 curl -sS -w '\n%{http_code}' "$R/ferry/partial/0123456789abcdef0123456789abcdef?sig=00"
assert_contains "$OUT" "Code: 516" "a partial with a wrong signature and no credentials"
ok "statements on other tables pass through for admins (as the router's identity) and for listed tables; /ferry/router, /metrics and /ferry/partial need an admin, the token (or a bearer token) or the partial's signature"

# a move fences the router with the token, and alice's reads stay exact through it
from=$("$FERRY_BIN" route --tenant acme --split 0 --json --config "$CONF" | jq -r '.slices[0].shards[0]')
to=node$(( ${from#node} % 3 + 1 ))
before=$(curl -sS -u "alice:$ALICEPW" "$R/" --data-binary "SELECT count(), sum(x) FROM events")
"$FERRY_BIN" move --config "$CONF" --tenant acme --split 0 --to "$to" --grace 500 >"$T/move.out" 2>"$T/move.err" ||
    fail "move acme/0 with an authenticated router: $(cat "$T/move.err")"
assert_eq "$before" "$(curl -sS -u "alice:$ALICEPW" "$R/" --data-binary "SELECT count(), sum(x) FROM events")" "alice's rows after the move"
ok "a move of acme/0 ($from -> $to) passed the router fence with [cluster] router_token_file; alice's answer unchanged"

# ---- limits ----
"$FERRY_BIN" user add lim --tenants acme --max-concurrent 1 --queue-wait 5s --max-execution-time 3s \
    --password-file "$T/alice.pw" --config "$CONF" >/dev/null
"$FERRY_BIN" user add rate --tenants acme --max-rps 2 --password-file "$T/alice.pw" --config "$CONF" >/dev/null
V=$(sqlite3 "$LAB/catalog.db" "SELECT value FROM meta WHERE key = 'routing_version'")
wait_for 10 bash -c "[ \$(curl -s -H 'X-Ferry-Token: $TOKEN' $R/ferry/router | jq .routing_version) -ge $V ]"
# acme's 600 rows of k = 0 at 50 ms each: far beyond 3 s; 24 rows: about a second
SLOW="SELECT count() FROM events WHERE k = 0 AND sleepEachRow(0.05) = 0 SETTINGS function_sleep_max_microseconds_per_block = 60000000"
SHORT="SELECT count() FROM events WHERE x < 120 AND sleepEachRow(0.05) = 0 SETTINGS function_sleep_max_microseconds_per_block = 60000000"
# the queue: a second request waits for the first one's slot, then runs
curl -sS -o "$T/q1.out" -w '%{http_code}' -u "lim:$ALICEPW" "$R/" --data-binary "$SHORT" >"$T/q1.code" &
Q1=$!
wait_for 10 bash -c "[ \"\$(curl -s -H 'X-Ferry-Token: $TOKEN' $R/ferry/router | jq '.limits.users.lim.running // 0')\" = 1 ]" ||
    fail "the first request did not take the slot"
curl -sS -o "$T/q2.out" -w '%{http_code}' -u "lim:$ALICEPW" "$R/" --data-binary "$SHORT" >"$T/q2.code" &
Q2=$!
wait_for 10 bash -c "[ \"\$(curl -s -H 'X-Ferry-Token: $TOKEN' $R/ferry/router | jq '.limits.users.lim.waiting // 0')\" = 1 ]" ||
    fail "the second request was not queued"
wait "$Q1" "$Q2"
assert_eq "200 200" "$(cat "$T/q1.code") $(cat "$T/q2.code")" "two requests, one slot, a 5 s queue: both answered"
assert_eq "$(cat "$T/q1.out")" "$(cat "$T/q2.out")" "the same answer"
# a read past max_execution_time: cancelled on every shard
t0=$(date +%s%N)
rq lim "$ALICEPW" "$SLOW"
el=$(( ($(date +%s%N) - t0) / 1000000 ))
assert_eq 408 "$CODE" "a read past max_execution_time: $BODY"
assert_contains "$BODY" "Code: 159" "TIMEOUT_EXCEEDED"
[ "$el" -lt 10000 ] || fail "the cancelled read answered after $el ms"
for u in "${NODES[@]}"; do
    wait_for 10 bash -c "[ \"\$(curl -sS '$u/' --data-binary \"SELECT count() FROM system.processes WHERE query LIKE '%sleepEachRow(0.05)%' AND query NOT LIKE '%system.processes%'\")\" = 0 ]" ||
        fail "the cancelled read still runs on $u"
done
assert_eq 1 "$(status | jq .limits.cancelled_reads)" "the router counts the cancelled read"
# too many at once: the queue wait runs out
"$FERRY_BIN" user set-limits lim --queue-wait 300ms --config "$CONF" >/dev/null
V=$(sqlite3 "$LAB/catalog.db" "SELECT value FROM meta WHERE key = 'routing_version'")
wait_for 10 bash -c "[ \$(curl -s -H 'X-Ferry-Token: $TOKEN' $R/ferry/router | jq .routing_version) -ge $V ]"
curl -sS -o /dev/null -u "lim:$ALICEPW" "$R/" --data-binary "$SLOW" &
SLOWPID=$!
wait_for 10 bash -c "[ \"\$(curl -s -H 'X-Ferry-Token: $TOKEN' $R/ferry/router | jq '.limits.users.lim.running // 0')\" = 1 ]"
rq lim "$ALICEPW" "$SHORT"
wait "$SLOWPID" || true
assert_eq 500 "$CODE" "over max_concurrent: ClickHouse's status"
assert_contains "$BODY" "Code: 202" "TOO_MANY_SIMULTANEOUS_QUERIES: $BODY"
assert_contains "$BODY" "(TOO_MANY_SIMULTANEOUS_QUERIES)" "the name"
# requests per second
codes=""
for i in 1 2 3 4 5 6; do codes+=" $(curl -s -o "$T/r$i" -w '%{http_code}' -u "rate:$ALICEPW" "$R/" --data-binary "$Q")"; done
case "$codes" in *500*) ;; *) fail "6 requests at once with max_rps 2: none refused ($codes)" ;; esac
grep -l "QUOTA_EXCEEDED" "$T"/r? >/dev/null || fail "no QUOTA_EXCEEDED answer"
ok "limits: a queued request waits for the slot and is answered; a read past 3 s is cancelled on every shard (TIMEOUT_EXCEEDED after $el ms, no query left); over max_concurrent after the queue wait: TOO_MANY_SIMULTANEOUS_QUERIES; over max_rps: QUOTA_EXCEEDED ($codes)"

# ---- changes on the running router ----
printf 'alice-new-%s\n' "$RANDOM" >"$T/alice2.pw"
NEWPW=$(head -1 "$T/alice2.pw")
BEFORE=$(curl -sS -u "alice:$ALICEPW" "$R/" --data-binary "$Q")
"$FERRY_BIN" user set-password alice --password-file "$T/alice2.pw" --config "$CONF" >/dev/null
wait_for 10 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -u 'alice:$ALICEPW' '$R/?query=SELECT+1') = 403 ]" ||
    fail "the old password still works"
assert_eq "$BEFORE" "$(curl -sS -u "alice:$NEWPW" "$R/" --data-binary "$Q")" "the new password"
"$FERRY_BIN" user set-tenants alice --tenants beta --config "$CONF" >/dev/null
wait_for 10 bash -c "[ \"\$(curl -sS -u 'alice:$NEWPW' '$R/' --data-binary 'SELECT count() FROM events')\" = \"$(chq "$REF" "SELECT count() FROM events WHERE tenant = 'beta'")\" ]" ||
    fail "alice was not rebound to beta"
"$FERRY_BIN" user remove alice --config "$CONF" >/dev/null
wait_for 10 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -u 'alice:$NEWPW' '$R/?query=SELECT+1') = 403 ]" ||
    fail "a removed user still works"
kill -0 "$ROUTER_PID" || fail "the router restarted"
ok "a password change, a rebinding to another tenant and a removal apply to the running router within one routing-version wait"

# ---- a real client: the official ClickHouse JS client, bound to beta ----
node "$FERRY_SOURCE_DIR/tests/lib/js_client_check.cjs" "$CHJS" "$R" bob "$BOBPW" beta acme >"$T/js.log" 2>&1 ||
    { cat "$T/js.log"; fail "the JS client check"; }
cat "$T/js.log"
ok "the ClickHouse JS client $(basename "$CHJS"): login, insert, read, and ClickHouse's codes for refusals"

# ---- secrets never logged, credentials never forwarded ----
for pw in "$ROOTPW" "$ALICEPW" "$BOBPW" "$NEWPW" "$TOKEN"; do
    if grep -rqF -- "$pw" "$T"/*.log "$LAB"/node*/node.log 2>/dev/null; then fail "a secret appears in a log"; fi
done
ok "no password or token in the router's or the nodes' logs"

# ---- doctor: the shard identity's grants (the lab's nodes have no access control) ----
expect_exit 1 "$FERRY_BIN" doctor --json --config "$CONF"
g=$(jq -r '[.checks[] | select(.check == "shard_grants" and .server == "node1") | .message] | join("\n")' <<<"$OUT")
assert_contains "$g" "has DROP TABLE ON default.events" "doctor finds DROP"
assert_contains "$g" "has S3" "doctor finds S3"
assert_contains "$g" "has FILE" "doctor finds FILE"
case "$g" in *"lacks SELECT"*|*"lacks INSERT"*|*"lacks KILL"*|*"lacks URL"*) fail "doctor says the lab lacks a needed grant: $g" ;; esac
ok "doctor: shard_grants reads the lab's all-powerful user and names what a production identity must not have"

# ---- auth = none: loopback only ----
sed -e 's/^\[router\]$/[router]\nauth = none/' "$CONF" >"$T/none.conf"
expect_exit 2 "$FERRY_BIN" router --config "$T/none.conf" --listen 0.0.0.0:0
assert_contains "$ERR" "auth = none is accepted only with an explicit listen address on the loopback" "auth = none off loopback"
start_router "$T/none.conf" router_none
grep -q 'auth = none' "$T/router_none.log" || fail "auth = none was not logged as a warning"
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' "$R_URL/?query=SELECT+1")" "auth = none on loopback"
ok "auth = none: refused with a non-loopback listen, accepted on 127.0.0.1 with a warning"
stop_router "$ROUTER_PID"
done_testing
