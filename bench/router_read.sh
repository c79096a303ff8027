#!/usr/bin/env bash
# Reads through `ferry router` (docs/routing.md, "Reads"), two measurements, one JSON line each:
#   single: a tenant served by one server; the same query N times on one keep-alive connection
#           through the router and directly to that server: p50/p99 latency and the difference
#           (the router's added latency; goal <= 0.3 ms at p50).
#   merged: an aggregation over a tenant whose splits live on the 3 servers of a lab, through the
#           router (partial -State queries on the 3 servers, merged on one of them), against the
#           same rows on one server queried directly: median wall time and the ratio (goal <= 1.5);
#           and, as the fair floor of a 3-server run on this machine, the same query split by
#           split across the 3 lab servers and sent to them directly in parallel (no merge).
#   bash bench/router_read.sh [BUILD_DIR] [ROWS] [N]      (defaults: build-release, 2000000, 2000)
# BASELINE_FERRY=/path/to/an/older/ferry adds a second router running that binary on the same lab
# and catalog, interleaved with the first and with the direct queries (the single-server numbers
# then compare old and new side by side, and each merged query runs on it too). added_p50_paired_ms is the median of the per-pair
# differences (router query i minus direct query i, run back to back), which drifts less with
# the machine's load than the difference of the two medians.
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
rows=${2:-2000000}
n=${3:-2000}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/events.sh

L=$T/lab REFL=$T/ref
lab_up "$L" --nodes 3
lab_up "$REFL" --nodes 1
REF=$(lab_url "$REFL" node1)
CONF=$L/ferry.conf
events_conf "$CONF" "passthrough = $(lab_url "$L" node1)"
"$FERRY_BIN" init --config "$CONF" >/dev/null
DDL="CREATE TABLE events (tenant String, day UInt32, split UInt32, uid UInt64, u String, x UInt64)
     ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (tenant, uid)"
for u in $(jq -r '.nodes[].http' <("$FERRY_BIN" lab status --dir "$L" --json)) "$REF"; do chq "$u" "$DDL" >/dev/null; done
"$FERRY_BIN" tenant add solo --config "$CONF" >/dev/null
"$FERRY_BIN" tenant add wide --splits 6 --config "$CONF" >/dev/null
shards=$("$FERRY_BIN" route --tenant wide --json --config "$CONF" | jq -r '[.slices[].shards[0]] | unique | length')
[ "$shards" = 3 ] || { echo "wide's 6 slices are on $shards shard(s), not 3" >&2; exit 1; }

bg_start "$T/router.log" "$FERRY_BIN" router --config "$CONF" --listen 127.0.0.1:0 --port-file "$T/router.port"
wait_for 20 test -s "$T/router.port"
R=http://127.0.0.1:$(cat "$T/router.port")
wait_for 10 curl -sf "$R/ping"
RB=
if [ -n "${BASELINE_FERRY:-}" ]; then
    bg_start "$T/router_base.log" "$BASELINE_FERRY" router --config "$CONF" --listen 127.0.0.1:0 \
        --port-file "$T/router_base.port"
    wait_for 20 test -s "$T/router_base.port"
    RB=http://127.0.0.1:$(cat "$T/router_base.port")
    wait_for 10 curl -sf "$RB/ping"
fi

# rows: through the router (splits set by it), the same rows with the same splits on the reference
GEN="SELECT 'wide' AS tenant, 20261101 + number % 3 AS day, cityHash64(number) % 100000 AS uid,
     concat('u', toString(number % 50)) AS u, number AS x FROM numbers($rows)"
chq "$REF" "INSERT INTO events SELECT tenant, day, xxh3(toString(uid)) % 6, uid, u, x FROM ($GEN)" >/dev/null
chq "$REF" "SELECT tenant, day, uid, u, x FROM ($GEN) FORMAT TSV" >"$T/rows.tsv"
q=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, u, x) FORMAT TSV' '$q|@uri')
curl -sSf "$R/?query=$q" --data-binary @"$T/rows.tsv" >/dev/null
chq "$REF" "SELECT 'solo', 20261101, 0, number, 'u', number FROM numbers(1000) FORMAT TSV" >"$T/solo.tsv"
curl -sSf "$R/?query=$q" --data-binary @<(cut -f1,2,4- "$T/solo.tsv") >/dev/null
solo_shard=$("$FERRY_BIN" route --tenant solo --json --config "$CONF" | jq -r '.slices[0].shards[0]')
SOLO=$(lab_url "$L" "$solo_shard")

# where wide's splits are served, for the 3-servers-direct floor below
PARTS=$("$FERRY_BIN" route --tenant wide --json --config "$CONF" | jq -c '[.slices[] | {split, shard: .shards[0]}]')
NODES=$("$FERRY_BIN" lab status --dir "$L" --json | jq -c '[.nodes[] | {name, http}]')

python3 - "$R" "$SOLO" "$REF" "$n" "$PARTS" "$NODES" "$RB" <<'PY'
import http.client, json, sys, threading, time, urllib.parse
router, solo, ref, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
parts, nodes = json.loads(sys.argv[5]), {x["name"]: x["http"] for x in json.loads(sys.argv[6])}
base = sys.argv[7]

def conn(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port)

def timed(c, sql):
    t = time.perf_counter()
    c.request("POST", "/", body=sql.encode())
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit("HTTP %d: %s" % (r.status, body[:300]))
    return time.perf_counter() - t, body

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]

# single-server tenant: router vs direct, interleaved so both see the same machine load
q = "SELECT count(), sum(x) FROM events WHERE tenant = 'solo'"
cr, cd = conn(router), conn(solo)
cb = conn(base) if base else None
for _ in range(50):
    timed(cr, q); timed(cd, q)
    if cb: timed(cb, q)
tr, td, tb = [], [], []
for _ in range(n):
    a, br = timed(cr, q); b, bd = timed(cd, q)
    assert br == bd, (br, bd)
    tr.append(a); td.append(b)
    if cb:
        c, bb = timed(cb, q)
        assert bb == bd, (bb, bd)
        tb.append(c)
ms = lambda x: round(x * 1000, 3)
paired = lambda xs, ys: ms(pct([x - y for x, y in zip(xs, ys)], .5))
single = {"bench": "router_read_single", "queries": n,
          "router_p50_ms": ms(pct(tr, .5)), "router_p99_ms": ms(pct(tr, .99)),
          "direct_p50_ms": ms(pct(td, .5)), "direct_p99_ms": ms(pct(td, .99)),
          "added_p50_ms": ms(pct(tr, .5) - pct(td, .5)),
          "added_p99_ms": ms(pct(tr, .99) - pct(td, .99)),
          "added_p50_paired_ms": paired(tr, td)}
if cb:
    single.update({"baseline_router_p50_ms": ms(pct(tb, .5)),
                   "baseline_router_p99_ms": ms(pct(tb, .99)),
                   "baseline_added_p50_ms": ms(pct(tb, .5) - pct(td, .5)),
                   "baseline_added_p50_paired_ms": paired(tb, td)})
single["load_avg_1m"] = float(open("/proc/loadavg").read().split()[0])
print(json.dumps(single), flush=True)

# 3-server tenant vs the same rows on one server
aggs = {
    "count_sum": "SELECT count(), sum(x) FROM events WHERE tenant = 'wide'",
    "group_by_u": "SELECT u, count(), sum(x), avg(x) FROM events WHERE tenant = 'wide' GROUP BY u ORDER BY u",
    "uniq_exact": "SELECT uniqExact(uid) FROM events WHERE tenant = 'wide'",
    "top10_uid": "SELECT uid, count() AS c FROM events WHERE tenant = 'wide' GROUP BY uid ORDER BY c DESC, uid LIMIT 10",
}
cf = conn(ref)
# The floor of any 3-server plan on this machine: the same query, each server restricted to the
# splits it serves, sent directly to the 3 servers in parallel (no router, no merge). The three
# lab servers share the machine's cores, so this shows what splitting the scan costs here.
by_shard = {}
for p in parts:
    by_shard.setdefault(p["shard"], []).append(p["split"])
direct = [(conn(nodes[sh]), sorted(sp)) for sh, sp in sorted(by_shard.items())]
def three_direct(sql):
    th = [threading.Thread(target=timed, args=(c, sql.replace("WHERE tenant = 'wide'",
          "WHERE tenant = 'wide' AND split IN (%s)" % ", ".join(map(str, sp)))))
          for c, sp in direct]
    t = time.perf_counter()
    for x in th: x.start()
    for x in th: x.join()
    return time.perf_counter() - t
out = {"bench": "router_read_merged", "rows": None, "runs": 15}
for name, sql in aggs.items():
    for _ in range(3):
        timed(cr, sql); timed(cf, sql); three_direct(sql)
    a, b, c, d = [], [], [], []
    for _ in range(15):
        x, br = timed(cr, sql); y, bf = timed(cf, sql)
        assert br == bf, (name, br[:200], bf[:200])
        a.append(x); b.append(y); c.append(three_direct(sql))
        if cb:
            z, bb = timed(cb, sql)
            assert bb == bf, (name, bb[:200], bf[:200])
            d.append(z)
    out[name] = {"router_3_servers_ms": ms(pct(a, .5)), "one_server_ms": ms(pct(b, .5)),
                 "ratio": round(pct(a, .5) / pct(b, .5), 2),
                 "three_servers_direct_ms": ms(pct(c, .5)),
                 "ratio_to_three_direct": round(pct(a, .5) / pct(c, .5), 2)}
    if cb:
        out[name].update({"baseline_router_ms": ms(pct(d, .5)),
                          "baseline_ratio": round(pct(d, .5) / pct(b, .5), 2)})
out["load_avg_1m"] = float(open("/proc/loadavg").read().split()[0])
_, body = timed(cf, "SELECT count() FROM events")
out["rows"] = int(body)
print(json.dumps(out))
PY
