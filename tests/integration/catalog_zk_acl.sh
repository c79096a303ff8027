# ZooKeeper digest ACLs for the catalog (docs/catalog.md, "ZooKeeper ACLs"), against a real
# ZooKeeper: with ?auth_file= in the catalog URL every znode ferry creates is readable and
# writable only by that digest identity; a session without it, or with another password, is
# refused; a secret file others may read is refused before connecting.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

write_config() { # write_config FILE CATALOG_URL
    cat >"$1" <<CFG
[cluster]
name = lab
catalog = $2
rf = 1

[shard "node1"]
capacity = 10G
replicas = http://127.0.0.1:8123
agent = http://127.0.0.1:9123
agent_token_file = $T/agent.token

[table "events"]
database = default
layout = shared
CFG
}

echo "agent-token-not-used" >"$T/agent.token"
chmod 600 "$T/agent.token"
zk_start
printf 'ferry:s3cret-digest\n' >"$T/zk.auth"
chmod 600 "$T/zk.auth"
URL="zk://$ZK_HOSTPORT/acl?auth_file=$T/zk.auth"
write_config "$T/a.conf" "$URL"
expect_exit 0 "$FERRY_BIN" init --config "$T/a.conf"
expect_exit 0 "$FERRY_BIN" catalog export --catalog "$URL"
assert_contains "$OUT" '"node1"' "export with the digest identity"
ok "init and export with the digest identity"

# the znodes' ACL, as ZooKeeper's own client shows it
CP=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar
[ -f /usr/share/java/slf4j-nop.jar ] && CP=$CP:/usr/share/java/slf4j-nop.jar
ANON=$(timeout 60 java -cp "$CP" org.apache.zookeeper.ZooKeeperMain -server "$ZK_HOSTPORT" \
    getAcl /acl/routing 2>&1 || true)
assert_contains "$ANON" "Insufficient permission" "getAcl without the identity: $ANON"
ACL=$(printf 'addauth digest ferry:s3cret-digest\ngetAcl /acl/routing\nquit\n' |
    timeout 60 java -cp "$CP" org.apache.zookeeper.ZooKeeperMain -server "$ZK_HOSTPORT" 2>&1 || true)
assert_contains "$ACL" "'digest,'ferry:" "ACL of /acl/routing with the identity: $ACL"
if grep -q "'world,'anyone" <<<"$ACL"; then fail "/acl/routing is open to anyone: $ACL"; fi
ok "znodes carry a creator-only digest ACL (no world access)"

for bad in "zk://$ZK_HOSTPORT/acl" "zk://$ZK_HOSTPORT/acl?auth_file=$T/other.auth"; do
    printf 'ferry:another-password\n' >"$T/other.auth"
    chmod 600 "$T/other.auth"
    if "$FERRY_BIN" catalog export --catalog "$bad" >"$T/out" 2>"$T/err"; then
        fail "export without the identity succeeded: $(head -c 300 "$T/out")"
    fi
    assert_contains "$(cat "$T/err")" "not authenticated" "refused without the identity ($bad)"
    if grep -q "s3cret-digest\|another-password" "$T/err" "$T/out"; then fail "a secret in the output"; fi
done
ok "no identity, or another password: refused (NOAUTH), no secret in messages"

chmod 644 "$T/zk.auth"
if "$FERRY_BIN" catalog export --catalog "$URL" >/dev/null 2>"$T/err"; then
    fail "a world-readable auth_file was accepted"
fi
assert_contains "$(cat "$T/err")" "readable by others" "world-readable secret file"
chmod 600 "$T/zk.auth"
printf 'no-colon\n' >"$T/bad.auth"; chmod 600 "$T/bad.auth"
if "$FERRY_BIN" catalog export --catalog "zk://$ZK_HOSTPORT/acl?auth_file=$T/bad.auth" >/dev/null 2>"$T/err"; then
    fail "a malformed auth_file was accepted"
fi
assert_contains "$(cat "$T/err")" "expected one line 'user:password'" "malformed secret file"
if "$FERRY_BIN" catalog export --catalog "zk://$ZK_HOSTPORT/acl?auth_file=rel.auth" >/dev/null 2>"$T/err"; then
    fail "a relative auth_file was accepted"
fi
assert_contains "$(cat "$T/err")" "absolute path" "relative auth_file"
ok "auth_file readable by others, malformed or relative: refused"

# ferry doctor: catalog_acl passes with the digest identity, fails on an open chroot
OTHERS=delete_refused,versioning,clickhouse_version,unmanaged_cold,shard_grants,broken_parts
expect_exit 0 "$FERRY_BIN" doctor --json --skip "$OTHERS" --config "$T/a.conf"
assert_eq "$(jq -r '.checks[] | select(.check == "catalog_acl") | .status' <<<"$OUT")" pass "doctor with auth_file"
write_config "$T/open.conf" "zk://$ZK_HOSTPORT/open"
expect_exit 0 "$FERRY_BIN" init --config "$T/open.conf"
expect_exit 1 "$FERRY_BIN" doctor --json --skip "$OTHERS" --config "$T/open.conf"
assert_eq "$(jq -r '.checks[] | select(.check == "catalog_acl") | .status' <<<"$OUT")" fail "doctor on an open chroot"
assert_contains "$OUT" "auth_file" "its fix"
ok "doctor: catalog_acl passes with auth_file, fails on open ACLs"
zk_stop
done_testing
