# ferry init / status / route / catalog export|import against SQLite and a real ZooKeeper,
# including a dump moved sqlite -> zk -> sqlite that must come back byte for byte.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

write_config() { # write_config FILE CATALOG_URL RF
    cat >"$1" <<CFG
[cluster]
name = lab
catalog = $2
hash = sha256
rf = $3
fill = 0.85
clickhouse_version = 26.7
pointer_format = 5

[shard "node1"]
weight = 1
capacity = 10G
replicas = http://127.0.0.1:8123
agent = http://127.0.0.1:9123

[shard "node2"]
weight = 2
capacity = 20G
replicas = http://127.0.0.1:8124, http://127.0.0.2:8124
agent = http://127.0.0.1:9124

[table "events"]
database = default
layout = shared

[table "logs"]
layout = per_tenant
day_column = d
CFG
}

# --- init, and refusing different fixed settings ---
write_config "$T/a.conf" "sqlite:$T/a.db" 1
expect_exit 0 "$FERRY_BIN" init --config "$T/a.conf"
assert_contains "$OUT" "initialized cluster lab in the sqlite catalog: 2 shard(s), 2 table(s)" "init"
expect_exit 0 "$FERRY_BIN" init --config "$T/a.conf" --json
assert_eq '{"cluster":"lab","catalog":"sqlite","created":false,"shards_added":0,"tables_added":0}' "$OUT" "re-init is idempotent"
write_config "$T/b.conf" "sqlite:$T/a.db" 2
expect_exit 2 "$FERRY_BIN" init --config "$T/b.conf"
assert_contains "$ERR" "different 'rf'" "re-init with another rf"
assert_eq "" "$OUT" "nothing on stdout on error"
ok "init creates the cluster once and refuses other fixed settings"

# --- config errors name FILE:LINE ---
sed 's/^fill = 0.85/fill = 1.5/' "$T/a.conf" >"$T/bad1.conf"
expect_exit 2 "$FERRY_BIN" init --config "$T/bad1.conf"
assert_contains "$ERR" "bad1.conf:6: [cluster] fill = '1.5'" "bad fill"
sed 's/^agent = http:\/\/127.0.0.1:9123/agnet = x/' "$T/a.conf" >"$T/bad2.conf"
expect_exit 2 "$FERRY_BIN" init --config "$T/bad2.conf"
assert_contains "$ERR" "bad2.conf:14: unknown key 'agnet' in [shard]" "unknown key"
sed 's/^layout = per_tenant/layout = sideways/' "$T/a.conf" >"$T/bad3.conf"
expect_exit 2 "$FERRY_BIN" init --config "$T/bad3.conf"
assert_contains "$ERR" "[table \"logs\"] layout = 'sideways': expected shared or per_tenant" "bad layout"
expect_exit 1 "$FERRY_BIN" status --catalog "sqlite:$T/missing.db"
assert_contains "$ERR" "does not exist" "status on a missing catalog"
[ ! -e "$T/missing.db" ] || fail "status created a catalog file"
expect_exit 2 "$FERRY_BIN" status --catalog "ftp://x"
assert_contains "$ERR" "unknown scheme" "bad catalog URL"
ok "config errors are reported as FILE:LINE, exit 2"

# --- give the cluster tenants, slices, routes and moves through a dump ---
expect_exit 0 "$FERRY_BIN" catalog export --config "$T/a.conf"
printf '%s\n' "$OUT" >"$T/base.json"
python3 - "$T/base.json" "$T/full.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["tenants"] = [{"name": "acme", "splits": 3}, {"name": "beta", "splits": 1}]
d["slices"] = [{"tenant": t, "split": s, "bytes": b, "rows": 10, "placement": p}
               for (t, s, b, p) in [("acme", 0, 1 << 30, "node1"), ("acme", 1, 2 << 30, "node2"),
                                    ("acme", 2, 3 << 30, "node2"), ("beta", 0, 4 << 30, "node1")]]
d["routes"] = [{"tenant": x["tenant"], "split": x["split"], "shards": x["placement"]} for x in d["slices"]]
d["routes"][1]["shards"] = "node1,node2"
d["moves"] = [{"id": "m-1", "tenant": "acme", "split": 1, "from": "node1", "to": "node2",
               "state": "VERIFY", "step": 2, "steps": 5, "owner": "coord-a", "detail": "",
               "created": 1, "updated": 2},
              {"id": "m-0", "tenant": "beta", "split": 0, "from": "node2", "to": "node1",
               "state": "DONE", "step": 0, "steps": 5, "owner": "coord-a", "detail": "",
               "created": 1, "updated": 2}]
d["parts"] = [{"table": "events", "partition_id": "p1", "origin": "ferry_tier_1", "name": "all_1_1_0", "bytes": 7, "rows": 1,
               "servers": "node1", "objects": [{"key": "parts/x/data.bin", "size": 7, "checksum": "sha256:ab"}]}]
d["partitions"] = [{"server": "node1", "table": "events", "partition_id": "p1", "tenant": "acme",
                    "day": 20260101, "split": 0, "tier": "cold", "bytes": 7, "rows": 1}]
d["routing_version"] = 7
json.dump(d, open(sys.argv[2], "w"))
PY
expect_exit 1 "$FERRY_BIN" catalog import --config "$T/a.conf" "$T/full.json"
assert_contains "$ERR" "not empty" "import refuses a non-empty catalog"
echo '{"format": "ferry-catalog", "format_version": 1, "routing_version": 0, "shards": [{"name": "x"}]}' >"$T/broken.json"
expect_exit 2 "$FERRY_BIN" catalog import --catalog "sqlite:$T/broken.db" "$T/broken.json"
assert_contains "$ERR" "shards[0]" "import names the bad record"
expect_exit 0 "$FERRY_BIN" catalog import --catalog "sqlite:$T/s1.db" "$T/full.json"
expect_exit 0 "$FERRY_BIN" catalog export --catalog "sqlite:$T/s1.db"
printf '%s\n' "$OUT" >"$T/s1.json"
ok "import loads a dump into an empty catalog only"

# --- status and route ---
expect_exit 0 "$FERRY_BIN" status --catalog "sqlite:$T/s1.db" --json
python3 - "$OUT" <<'PY'
import json, sys
s = json.loads(sys.argv[1])
assert s["tenants"] == 2 and s["slices"] == 4 and s["routing_version"] == 7, s
by = {x["name"]: x for x in s["shards"]}
G = 1 << 30
assert by["node1"]["bytes"] == 7 * G, by   # acme/0 (1G) + acme/1 (2G, both) + beta/0 (4G)
assert by["node2"]["bytes"] == 5 * G, by   # acme/1 (2G) + acme/2 (3G)
assert abs(by["node1"]["fill"] - 0.7) < 1e-9 and abs(by["node2"]["fill"] - 0.25) < 1e-9, by
assert [m["id"] for m in s["moves_in_flight"]] == ["m-1"], s["moves_in_flight"]
PY
expect_exit 0 "$FERRY_BIN" status --catalog "sqlite:$T/s1.db"
assert_contains "$OUT" "2 tenant(s), 4 slice(s), routing version 7, 1 move(s) in flight" "status text"
assert_contains "$OUT" "70.0%" "node1 fill"
expect_exit 0 "$FERRY_BIN" route --catalog "sqlite:$T/s1.db" --tenant acme --json
assert_eq '{"version":7,"slices":[{"tenant":"acme","split":0,"shards":["node1"]},{"tenant":"acme","split":1,"shards":["node1","node2"]},{"tenant":"acme","split":2,"shards":["node2"]}]}' "$OUT" "route --json"
expect_exit 0 "$FERRY_BIN" route --catalog "sqlite:$T/s1.db" --tenant acme --split 1
assert_contains "$OUT" "routing version 7" "route text"
assert_contains "$OUT" "node1,node2" "route text shards"
expect_exit 1 "$FERRY_BIN" route --catalog "sqlite:$T/s1.db" --tenant nobody
assert_contains "$ERR" "tenant nobody has no routes" "unknown tenant"
expect_exit 2 "$FERRY_BIN" route --catalog "sqlite:$T/s1.db"
ok "status shows fill and moves in flight; route shows shards and the routing version"

# --- sqlite -> zk -> sqlite ---
zk_start
ZK=$(zk_url ferry-cmds)
expect_exit 0 "$FERRY_BIN" catalog import --catalog "$ZK" "$T/s1.json"
expect_exit 0 "$FERRY_BIN" catalog export --catalog "$ZK"
printf '%s\n' "$OUT" >"$T/zk.json"
cmp "$T/s1.json" "$T/zk.json" || fail "sqlite and zk dumps differ"
expect_exit 0 "$FERRY_BIN" catalog import --catalog "sqlite:$T/s2.db" - <"$T/zk.json"
expect_exit 0 "$FERRY_BIN" catalog export --catalog "sqlite:$T/s2.db"
printf '%s\n' "$OUT" >"$T/s2.json"
cmp "$T/s1.json" "$T/s2.json" || fail "sqlite -> zk -> sqlite changed the dump"
expect_exit 0 "$FERRY_BIN" route --catalog "$ZK" --tenant acme --split 1 --json
assert_eq '{"version":7,"slices":[{"tenant":"acme","split":1,"shards":["node1","node2"]}]}' "$OUT" "route from zk"
ok "a dump moves sqlite -> zk -> sqlite unchanged"

# --- init straight into ZooKeeper ---
write_config "$T/z.conf" "$(zk_url ferry-init)" 2
expect_exit 0 "$FERRY_BIN" init --config "$T/z.conf"
assert_contains "$OUT" "in the zk catalog: 2 shard(s), 2 table(s)" "init on zk"
write_config "$T/z1.conf" "$(zk_url ferry-init)" 1
expect_exit 2 "$FERRY_BIN" init --config "$T/z1.conf"
expect_exit 0 "$FERRY_BIN" status --config "$T/z.conf"
assert_contains "$OUT" "cluster lab (zk catalog): hash sha256, rf 2" "status on zk"
ok "init and status on ZooKeeper"
zk_stop
done_testing
