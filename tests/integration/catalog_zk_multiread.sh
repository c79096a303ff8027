# The ZooKeeper catalog's scans read by multiRead (lib/catalog/zk_bulk.c) on a real ZooKeeper
# with digest ACLs, and fall back to one request per znode on a server without multiRead:
#  1. 400 tenants registered (2,000 records: 1,200 znodes, the slices and routes in tenant
#     documents); `ferry catalog export` (a scan of every folder) takes far fewer
#     requests than znodes it reads (ZooKeeper's own packet count, `mntr`), authenticated;
#  2. the same export through a proxy that refuses multiRead as ZooKeeper 3.5 does (closes the
#     connection: tests/lib/zk_no_multiread.py) is identical, read one znode a request.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

echo "agent-token-not-used" >"$T/agent.token"
chmod 600 "$T/agent.token"
zk_start
printf 'ferry:s3cret-digest\n' >"$T/zk.auth"
chmod 600 "$T/zk.auth"
write_config() { # write_config FILE CATALOG_URL
    cat >"$1" <<CFG
[cluster]
name = lab
catalog = $2
rf = 1

[shard "node1"]
replicas = http://127.0.0.1:8123
agent = http://127.0.0.1:9123
agent_token_file = $T/agent.token

[table "events"]
database = default
layout = shared
CFG
}
URL="$(zk_url /mr)?auth_file=$T/zk.auth"
write_config "$T/ferry.conf" "$URL"
"$FERRY_BIN" init --config "$T/ferry.conf" >/dev/null || fail "init"
# shellcheck disable=SC2046
"$FERRY_BIN" tenant add --config "$T/ferry.conf" --splits 2 $(seq -f 't%04g' 1 400) >/dev/null || fail "tenant add"

packets() { timeout 5 bash -c "exec 9<>/dev/tcp/127.0.0.1/$ZK_PORT && printf mntr >&9 && cat <&9" | awk '$1 == "zk_packets_received" {print $2}'; }

p0=$(packets)
"$FERRY_BIN" catalog export --catalog "$URL" >"$T/direct.json" || fail "export"
p1=$(packets)
slices=$(jq '[.records[] | select(.kind == "slice")] | length' "$T/direct.json" 2>/dev/null || jq '.slices | length' "$T/direct.json")
echo "# export: $((p1 - p0)) requests to ZooKeeper for $slices slices (and as many routes, 400 tenants)"
assert_eq 800 "$slices" "the export holds every slice"
[ $((p1 - p0)) -lt 400 ] || fail "the export sent $((p1 - p0)) requests for 2,000 records: not read by multiRead"
ok "a scan reads by multiRead: $((p1 - p0)) requests for 2,000 records"

python3 "$FERRY_SOURCE_DIR/tests/lib/zk_no_multiread.py" "$ZK_PORT" "$T/proxy.port" "$T/refused" >"$T/proxy.log" 2>&1 &
PROXY_PID=$!
wait_for 20 test -s "$T/proxy.port"
PURL="zk://127.0.0.1:$(cat "$T/proxy.port")/mr?auth_file=$T/zk.auth"
p0=$(packets)
"$FERRY_BIN" catalog export --catalog "$PURL" >"$T/proxied.json" || fail "export through the proxy: $(cat "$T/proxy.log")"
p1=$(packets)
[ -s "$T/refused" ] || fail "the proxy saw no multiRead"
cmp -s "$T/direct.json" "$T/proxied.json" || fail "the export without multiRead differs"
# 2,000 records in 1,200 znodes: 400 tenants, and a slice document and a route document per
# tenant (docs/catalog.md "Tenant documents"); one request per znode without multiRead
[ $((p1 - p0)) -ge 1200 ] || fail "without multiRead the export sent only $((p1 - p0)) requests"
ok "without multiRead (refused $(cat "$T/refused") time(s)): the same export, $((p1 - p0)) requests"
kill -TERM "$PROXY_PID" 2>/dev/null || true
done_testing
