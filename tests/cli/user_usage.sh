# `ferry user`: help, bad options (exit 2, nothing on stdout), and the catalog records it writes
# without a server: add (password file and SHA-256), set-tenants, set-password (a new salt),
# set-limits, remove, list; no password, salt or hash is ever printed, and the same password
# hashes differently for two users (salted).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

expect_exit 0 "$FERRY_BIN" help user
assert_contains "$OUT" "usage: ferry user add NAME (--password-file F | --password-sha256 HEX)" "help user"
ok "help user"

cat >"$T/x.conf" <<CONF
[cluster]
name = x
catalog = sqlite:$T/c.db
[shard "a"]
replicas = http://127.0.0.1:1
[table "events"]
tenant_column = tenant
split_column = split
day_column = day
CONF
"$FERRY_BIN" init --config "$T/x.conf" >/dev/null
"$FERRY_BIN" tenant add acme beta --config "$T/x.conf" >/dev/null
printf 'hunter2-secret\n' >"$T/pw"
check_usage() { # NEEDLE ARGS...
    local needle=$1; shift
    expect_exit 2 "$FERRY_BIN" user "$@" --config "$T/x.conf"
    assert_eq "" "$OUT" "nothing on stdout for: $*"
    assert_contains "$ERR" "$needle" "message for: $*"
}
check_usage "needs add, set-tenants" 
check_usage "unknown subcommand 'frob'" frob x
check_usage "add needs --password-file" add u1 --tenants acme
check_usage "add needs --tenants" add u1 --password-file "$T/pw"
check_usage "--tenants or --admin, not both" add u1 --password-file "$T/pw" --tenants acme --admin
check_usage "not both" add u1 --password-file "$T/pw" --password-sha256 00 --admin
check_usage "--max-execution-time 'soon'" add u1 --password-file "$T/pw" --admin --max-execution-time soon
check_usage "--max-rps 'x'" add u1 --password-file "$T/pw" --admin --max-rps x
check_usage "tenant 'nope' is not registered" add u1 --password-file "$T/pw" --tenants acme,nope
check_usage "is not an IPv4 or IPv6 address" add u1 --password-file "$T/pw" --tenants acme --networks nonsense
check_usage "not a table as DATABASE.TABLE" add u1 --password-file "$T/pw" --tenants acme --tables dim
check_usage "64 hex digits" add u1 --password-sha256 abc --admin
check_usage "'bad/name' is not a user name" add bad/name --password-file "$T/pw" --admin
check_usage "set-limits needs at least one limit" set-limits u1
check_usage "set-tenants takes only" set-tenants u1 --tenants acme --max-rps 3
: >"$T/empty"
check_usage "the password is empty" add u1 --password-file "$T/empty" --admin
ok "bad options, unknown tenants, malformed networks, tables and hashes: exit 2, nothing on stdout"

expect_exit 0 "$FERRY_BIN" user add alice --password-file "$T/pw" --tenants "acme, beta" \
    --tables default.dim --networks "10.0.0.0/8, ::1/128" --max-concurrent 4 --queue-wait 1500ms \
    --max-rps 20 --max-execution-time 30s --json --config "$T/x.conf"
assert_eq '{"name":"alice","admin":false,"tenants":["acme","beta"],"tables":["default.dim"],"networks":["10.0.0.0/8","::1/128"],"max_concurrent":4,"max_rps":20,"max_execution_ms":30000,"queue_wait_ms":1500}' "$OUT" "alice"
expect_exit 0 "$FERRY_BIN" user add bob --password-sha256 "$(printf %s hunter2-secret | sha256sum | cut -c1-64)" --admin --config "$T/x.conf"
expect_exit 1 "$FERRY_BIN" user add bob --password-file "$T/pw" --admin --config "$T/x.conf"
assert_contains "$ERR" "user bob exists" "a second add is refused"
# salted: the same password, two different hashes; nothing of it printed or in the dump as text
h=$(sqlite3 "$T/c.db" "SELECT json_extract(doc, '\$.hash') FROM records WHERE parent = 'users' ORDER BY name")
[ "$(sort -u <<<"$h" | wc -l)" = 2 ] || fail "two users with the same password have the same hash: $h"
"$FERRY_BIN" catalog export --config "$T/x.conf" >"$T/dump.json"
grep -q hunter2 "$T/dump.json" "$T"/*.out 2>/dev/null && fail "the password appears"
# set-password: a new salt and hash; set-tenants; set-limits; remove
before=$(sqlite3 "$T/c.db" "SELECT doc FROM records WHERE parent = 'users' AND name = 'alice'")
rv0=$(sqlite3 "$T/c.db" "SELECT value FROM meta WHERE key = 'routing_version'")
expect_exit 0 "$FERRY_BIN" user set-password alice --password-file "$T/pw" --config "$T/x.conf"
assert_eq "user alice: password changed" "$OUT" "set-password says only that"
after=$(sqlite3 "$T/c.db" "SELECT doc FROM records WHERE parent = 'users' AND name = 'alice'")
[ "$(jq -r .salt <<<"$before")" != "$(jq -r .salt <<<"$after")" ] || fail "set-password kept the salt"
expect_exit 0 "$FERRY_BIN" user set-tenants alice --admin --json --config "$T/x.conf"
assert_eq "true 0" "$(jq -r '"\(.admin) \(.tenants | length)"' <<<"$OUT")" "set-tenants --admin"
expect_exit 0 "$FERRY_BIN" user set-limits alice --networks "" --max-rps 0 --json --config "$T/x.conf"
assert_eq "[] 0 4" "$(jq -r '"\(.networks) \(.max_rps) \(.max_concurrent)"' <<<"$OUT")" "set-limits clears and keeps"
rv1=$(sqlite3 "$T/c.db" "SELECT value FROM meta WHERE key = 'routing_version'")
assert_eq $((rv0 + 3)) "$rv1" "each change raised the routing version"
expect_exit 0 "$FERRY_BIN" user list --config "$T/x.conf"
assert_contains "$OUT" "alice" "list"
case "$OUT" in *hunter2*|*"$(jq -r .hash <<<"$after")"*) fail "list shows a secret" ;; esac
expect_exit 0 "$FERRY_BIN" user remove alice --config "$T/x.conf"
expect_exit 1 "$FERRY_BIN" user remove alice --config "$T/x.conf"
assert_contains "$ERR" "there is no user alice" "removing twice"
expect_exit 0 "$FERRY_BIN" user list --json --config "$T/x.conf"
assert_eq bob "$(jq -r '[.users[].name] | join(",")' <<<"$OUT")" "bob is left"
ok "add, set-password (new salt), set-tenants, set-limits, remove, list: each change raises the routing version; no password, salt or hash printed"
done_testing
