#!/usr/bin/env python3
"""Differential check of ferry's read routing against real ClickHouse (libchdb 26.7).

One embedded ClickHouse holds the reference table `events` (every slice once) and one table per
simulated server, ev_n1..ev_n3, holding the slices the routing table puts there, copies of
slices in a move included (so a slice really exists twice). For every query of the corpus:
  1. identity: all slices on one server, identity names -> the rewritten query must give the
     original's result;
  2. distributed: `ferry route-query` plans it over n1..n3 (one run per server so each server's
     query names its own table); the per-server queries are combined the way the router will
     (UNION ALL in place of the url() placeholder; GLOBAL subqueries computed once), and the
     result must equal the original's on the reference table.
Usage: sql_route_check.py FERRY CHDB_EXEC LIBCHDB WORKDIR
"""
import json
import re
import subprocess
import sys

FERRY, CHDB_EXEC, LIB, WORK = sys.argv[1:5]
DATA = WORK + "/ch"

ROUTES = [  # tenant, split, shards (first serves)
    ("acme", 0, ["n1"]), ("acme", 1, ["n1", "n2"]), ("acme", 2, ["n2"]),
    ("beta", 0, ["n2"]), ("beta", 1, ["n1"]), ("beta", 2, ["n3", "n1"]),
    ("gamma", 0, ["n3"]), ("gamma", 1, ["n2", "n3"]), ("gamma", 2, ["n3"]),
]
SERVERS = ["n1", "n2", "n3"]

CORPUS = [
    # aggregations
    "SELECT count() FROM events",
    "SELECT count() FROM events WHERE tenant = 'acme'",
    "SELECT count(), sum(x), min(x), max(x) FROM events WHERE tenant IN ('acme', 'beta')",
    "SELECT tenant, count() AS c, sum(x) AS s FROM events GROUP BY tenant ORDER BY tenant",
    "SELECT u, avg(x) AS a FROM events WHERE tenant = 'gamma' GROUP BY u ORDER BY u",
    "SELECT u, uniqExact(k) AS uk, uniq(x) AS ux FROM events GROUP BY u ORDER BY u",
    "SELECT tenant, split, count() FROM events GROUP BY tenant, split ORDER BY tenant, split",
    "SELECT toDate(ts) AS d, count() AS c FROM events GROUP BY d ORDER BY d",
    "SELECT u, sumIf(x, k > 2) AS s FROM events GROUP BY u HAVING s > 100 ORDER BY s DESC",
    "SELECT u, count() FROM events GROUP BY u HAVING count() > 40 ORDER BY u",
    "SELECT argMax(x, ts), argMin(u, x) FROM events WHERE tenant = 'beta'",
    "SELECT quantileExact(0.5)(x), median(x) FROM events WHERE tenant = 'acme'",
    "SELECT k, max(ts) AS m FROM events GROUP BY k ORDER BY m DESC LIMIT 3",
    "SELECT k, count() AS c FROM events GROUP BY k ORDER BY c DESC, k LIMIT 2 OFFSET 1",
    "SELECT countIf(k = 1) * 100 / count() AS pct FROM events",
    "SELECT u, sum(x) / count() AS mean FROM events GROUP BY u ORDER BY u",
    "SELECT varPop(x), stddevSamp(x) FROM events WHERE tenant = 'gamma'",
    "SELECT groupArray(x) AS g FROM (SELECT x FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 5)",
    "SELECT arraySort(groupUniqArray(k)) FROM events WHERE tenant = 'beta'",
    "SELECT count(DISTINCT u) FROM events",
    "SELECT u, count() FROM events GROUP BY u WITH TOTALS ORDER BY u",
    "SELECT toStartOfHour(ts) AS h, count() FROM events WHERE tenant = 'acme' GROUP BY h ORDER BY h LIMIT 5",
    "SELECT count() FROM events WHERE tenant = 'nobody'",
    "SELECT sum(x) FROM events WHERE tenant = 'beta' AND split = 2",
    # plain rows
    "SELECT x, u FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 10",
    "SELECT * FROM events WHERE tenant = 'beta' ORDER BY x DESC LIMIT 7",
    "SELECT x FROM events ORDER BY x LIMIT 5, 5",
    "SELECT x FROM events ORDER BY x LIMIT 5 OFFSET 3",
    "SELECT x, ts FROM events WHERE tenant IN ('acme', 'gamma') AND k = 3 ORDER BY ts, x",
    "SELECT x FROM events WHERE tenant = 'acme' OR k = 4 ORDER BY x",
    "SELECT x + 1 AS y FROM events WHERE (tenant = 'beta' AND x % 5 = 0) ORDER BY y",
    "SELECT x FROM events WHERE x IN (SELECT x FROM events WHERE k = 0) AND tenant = 'acme' ORDER BY x",
    "SELECT x, a FROM events ARRAY JOIN arr AS a WHERE tenant = 'gamma' ORDER BY x, a LIMIT 12",
    "SELECT DISTINCT u FROM events ORDER BY u",
    "SELECT u, x FROM events ORDER BY x LIMIT 1 BY u",
    "SELECT x FROM events PREWHERE tenant = 'beta' WHERE k = 1 ORDER BY x",
    "SELECT 'FROM events WHERE tenant = ''x''' AS s, x FROM events /* events */ WHERE tenant = 'acme' -- c\n ORDER BY x LIMIT 3",
    "SELECT `x` FROM `events` WHERE `tenant` = 'gamma' ORDER BY 1",
    "SELECT x FROM events e WHERE e.tenant = 'acme' ORDER BY e.x LIMIT 4",
    "SELECT events.x FROM events WHERE events.k = 2 ORDER BY events.x LIMIT 6",
    # joins, subqueries, windows, unions, WITH
    "SELECT d.name, count() AS c FROM events AS e JOIN dim AS d ON e.k = d.k GROUP BY d.name ORDER BY d.name",
    "SELECT d.name, sum(e.x) FROM dim AS d LEFT JOIN events AS e ON e.k = d.k AND e.tenant = 'acme' GROUP BY d.name ORDER BY d.name",
    "SELECT e.x, d.name FROM events AS e INNER JOIN dim AS d USING (k) WHERE e.tenant = 'beta' ORDER BY e.x LIMIT 5",
    "SELECT count() FROM events AS a JOIN events AS b ON a.x = b.x + 3 WHERE a.tenant = 'acme'",
    "SELECT x, sum(x) OVER (PARTITION BY u ORDER BY x) AS running FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 10",
    "SELECT x, row_number() OVER (ORDER BY x) AS r FROM events WHERE tenant = 'gamma' ORDER BY r LIMIT 5",
    "SELECT t, c FROM (SELECT tenant AS t, count() AS c FROM events GROUP BY tenant) ORDER BY t",
    "SELECT max(c) FROM (SELECT u, count() AS c FROM events WHERE tenant = 'beta' GROUP BY u)",
    "SELECT x FROM events WHERE tenant = 'acme' AND x < 20 UNION ALL SELECT x FROM events WHERE tenant = 'beta' AND x < 20 ORDER BY x",
    "WITH 3 AS lim SELECT x FROM events WHERE k = lim ORDER BY x LIMIT 5",
    "WITH sub AS (SELECT u, x FROM events WHERE tenant = 'gamma') SELECT u, max(x) FROM sub GROUP BY u ORDER BY u",
    "SELECT count() FROM events WHERE u GLOBAL IN (SELECT u FROM events WHERE tenant = 'gamma' AND x < 30)",
    "SELECT x FROM events WHERE k GLOBAL IN (SELECT k FROM dim WHERE name = 'k2') AND tenant = 'beta' ORDER BY x",
    "SELECT e.x, r.m FROM events AS e GLOBAL JOIN (SELECT k, max(x) AS m FROM events WHERE tenant = 'acme' GROUP BY k) AS r ON e.k = r.k WHERE e.tenant = 'beta' ORDER BY e.x LIMIT 5",
    "SELECT (SELECT count() FROM dim) AS n, count() FROM events",
    # statement tails
    "SELECT tenant, count() FROM events GROUP BY tenant ORDER BY tenant FORMAT JSONEachRow",
    "SELECT x FROM events WHERE tenant = 'acme' ORDER BY x LIMIT 3 FORMAT CSV SETTINGS max_threads = 1",
    "SELECT u, sum(x) FROM events GROUP BY u ORDER BY u SETTINGS max_threads = 2 FORMAT TSVWithNames",
]


def chdb(queries):
    """Runs queries in one process; returns each result's text (None for all on failure)."""
    args = [CHDB_EXEC, LIB, DATA]
    for i, q in enumerate(queries):
        args += [q, "SELECT '@@@%d'" % i]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    parts = re.split(r"^@@@\d+\n", r.stdout, flags=re.M)
    return parts[:len(queries)], ""


def chdb_one(q):
    res, err = chdb([q])
    return (res[0] if res else None), err


def route(sql, routes_file, local=None):
    args = [FERRY, "route-query", "--tables", "events:shared", "--routes", routes_file, "--json"]
    if local:
        args += ["--local", "events=" + local]
    r = subprocess.run(args + [sql], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("route-query failed: " + r.stderr)
    return json.loads(r.stdout)


def tail(plan):
    t = ""
    if plan["settings"]:
        t += " SETTINGS " + ", ".join("%s = %s" % (s["name"], s["value"]) for s in plan["settings"])
    if plan["format"]:
        t += " FORMAT " + plan["format"]
    return t


def union(sqls):
    return "(" + " UNION ALL ".join(sqls) + ")"


def compose(plans):
    """The query the router's plan amounts to, with the per-server results inlined."""
    base = plans["n1"]
    kind = base["kind"]
    # each server's query comes from the run that named that server's table
    per = []
    for s in SERVERS:
        for q in plans[s]["queries"]:
            if q["server"] == s:
                per.append(q)
    globals_ = {g["name"]: g["sql"] for g in base["globals"]}

    def materialise(sql):
        for name, g in globals_.items():
            sql = sql.replace(name, "(" + g + ")")
        return sql

    if kind == "single":
        return materialise(per[0]["sql"]) + tail(base)
    if kind in ("rows", "aggregate"):
        parts = [materialise(q["sql"]) for q in per]
        return base["initiator"].replace("{{ferry.partial}}", union(parts)) + tail(base)
    init = base["initiator"]
    refs = sorted({q["ref"] for q in per})
    for r in refs:
        init = init.replace("{{ferry.rows.%d}}" % r, union([q["sql"] for q in per if q["ref"] == r]))
    return init + tail(base)


def canon(text, ordered):
    lines = text.splitlines()
    return lines if ordered else sorted(lines)


def main():
    slices_on = {s: [] for s in SERVERS}
    for t, sp, shards in ROUTES:
        for s in shards:
            slices_on[s].append((t, sp))
    setup = [
        "CREATE TABLE events (tenant String, split UInt32, u String, x UInt64, ts DateTime, "
        "k UInt32, arr Array(UInt8)) ENGINE = MergeTree PARTITION BY (tenant, split) "
        "ORDER BY (tenant, ts)",
        "INSERT INTO events SELECT ['acme','beta','gamma'][number % 3 + 1], intDiv(number, 3) % 3, "
        "concat('u', toString(number % 7)), number, toDateTime('2026-01-01 00:00:00') + number * 37, "
        "number % 5, [number % 2, number % 3] FROM numbers(900)",
        "CREATE TABLE dim (k UInt32, name String) ENGINE = MergeTree ORDER BY k",
        "INSERT INTO dim SELECT number, concat('k', toString(number)) FROM numbers(4)",
    ]
    for s in SERVERS:
        cond = " OR ".join("(tenant = '%s' AND split = %d)" % ts for ts in slices_on[s])
        setup += ["CREATE TABLE ev_%s AS events" % s,
                  "INSERT INTO ev_%s SELECT * FROM events WHERE %s" % (s, cond)]
    res, err = chdb(setup + ["SELECT count() FROM ev_n1", "SELECT count() FROM ev_n2",
                             "SELECT count() FROM ev_n3"])
    if res is None:
        print("setup failed: " + err)
        return 1
    copies = sum(int(x) for x in res[-3:]) - 900
    print("data: 900 rows, %d more held as copies of slices in a move" % copies)
    assert copies > 0

    routes3 = WORK + "/routes3.tsv"
    with open(routes3, "w") as f:
        for t, sp, shards in ROUTES:
            f.write("%s\t%d\t%s\n" % (t, sp, ",".join(shards)))
    routes1 = WORK + "/routes1.tsv"
    with open(routes1, "w") as f:
        for t, sp, _ in ROUTES:
            f.write("%s\t%d\tn0\n" % (t, sp))

    kinds = {}
    batch, meta = [], []
    for sql in CORPUS:
        one = route(sql, routes1)
        assert one["kind"] == "single", sql
        identity = one["queries"][0]["sql"] + tail(one)
        plans = {s: route(sql, routes3, "ev_" + s) for s in SERVERS}
        kinds[plans["n1"]["kind"]] = kinds.get(plans["n1"]["kind"], 0) + 1
        combined = compose(plans)
        meta.append((sql, identity, combined, plans["n1"]["kind"]))
        batch += [sql, identity, combined]
    res, err = chdb(batch)
    failed = 0
    if res is None:  # find the failing query
        for sql, identity, combined, kind in meta:
            for label, q in (("original", sql), ("identity", identity), (kind, combined)):
                r, e = chdb_one(q)
                if r is None:
                    print("FAIL %s query errors: %s\n  %s\n  original: %s" % (label, e.strip(), q, sql))
                    failed += 1
        return 1
    for i, (sql, identity, combined, kind) in enumerate(meta):
        orig, ident, comb = res[3 * i:3 * i + 3]
        ordered = False  # rows of equal sort keys may come in any order: compare as sets
        if canon(orig, ordered) != canon(ident, ordered):
            print("FAIL identity differs: %s\n  rewritten: %s\n  want %r\n  got  %r" % (sql, identity, orig[:300], ident[:300]))
            failed += 1
        if canon(orig, ordered) != canon(comb, ordered):
            print("FAIL %s differs: %s\n  combined: %s\n  want %r\n  got  %r" % (kind, sql, combined, orig[:300], comb[:300]))
            failed += 1
        if not orig.strip():
            print("FAIL empty result (a test that cannot fail): " + sql)
            failed += 1
    print("queries: %d, plans: %s, failures: %d" % (len(CORPUS), json.dumps(kinds, sort_keys=True), failed))
    return 1 if failed else 0


sys.exit(main())
