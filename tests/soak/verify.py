#!/usr/bin/env python3
"""The soak's end check of the written rows (tests/soak/soak.sh), after the faults stopped and
the system settled.

    verify.py --acked FILE --unacked FILE --routes FILE --dump NODE=FILE... \
              [--unreadable NODE=FILE...] --router-read FILE... --out FILE

--acked / --unacked: the writer's logs ("id<TAB>tenant<TAB>day"). --routes: "tenant<TAB>split
<TAB>shard,shard" (the catalog's routes at the end). --dump: every row the writer could have
written as each node holds it ("id<TAB>tenant<TAB>day<TAB>split", read from the node directly).
--unreadable: the node's parts ClickHouse could not read ("part<TAB>rows<TAB>modified<TAB>error";
their rows are not in its dump), named in acked_present's detail.
--router-read: the answer of "tenant, count(), uniqExact(id), sum(id) GROUP BY tenant ORDER BY
tenant" over the writer's rows through one router (one file per router).

Invariants (each a key of --out, with ok and counts or the first offending ids):
  acked_present      every acknowledged row is stored
  no_phantom         every stored id was sent by the writer (acknowledged or given up)
  once_per_replica   no node holds an id twice
  on_route           the nodes holding an acknowledged id are exactly its slice's route (rf
                     copies, once each); a given-up id is on a subset of its route
  row_intact         tenant and day as written
  router_reads       each router's answer equals the rows stored (each id once)
Exit 0 when every invariant holds.
"""
import argparse
import json
import os
import sys
from collections import defaultdict


def load_log(path):
    d = {}
    with open(path) as f:
        for ln in f:
            p = ln.rstrip("\n").split("\t")
            if len(p) == 3:
                d[int(p[0])] = (p[1], int(p[2]))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--acked", required=True)
    ap.add_argument("--unacked", required=True)
    ap.add_argument("--routes", required=True)
    ap.add_argument("--dump", action="append", default=[])
    ap.add_argument("--unreadable", action="append", default=[])
    ap.add_argument("--router-read", action="append", default=[])
    ap.add_argument("--out", required=True)
    o = ap.parse_args()
    acked = load_log(o.acked)
    unacked = load_log(o.unacked)
    routes = {}
    with open(o.routes) as f:
        for ln in f:
            t, s, shards = ln.rstrip("\n").split("\t")
            routes[(t, int(s))] = set(shards.split(","))
    where = defaultdict(list)  # id -> [(node, tenant, day, split)]
    dup, unreadable = [], []
    for spec in o.dump:
        node, path = spec.split("=", 1)
        seen = set()
        with open(path) as f:
            for n, ln in enumerate(f, 1):
                if not ln.strip():
                    continue
                p = ln.rstrip("\n").split("\t")
                try:
                    i, row = int(p[0]), (node, p[1], int(p[2]), int(p[3]))
                except (ValueError, IndexError):
                    # a dump that is not rows (an error text, a cut line) is a finding, not a crash
                    if len(unreadable) < 10:
                        unreadable.append("%s line %d: %r" % (node, n, ln[:120]))
                    continue
                if i in seen and len(dup) < 10:
                    dup.append("%d twice on %s" % (i, node))
                seen.add(i)
                where[i].append(row)
    res = {}
    res["dumps_readable"] = {"ok": not unreadable, "first": unreadable}
    missing = [i for i in acked if i not in where]
    # parts ClickHouse could not read (checks.sh dump_node): their rows are not in the dumps; the
    # report names them, so a missing row behind a broken part is told from one really gone
    broken = []
    for spec in o.unreadable:
        node, path = spec.split("=", 1)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for ln in f:
                p = ln.rstrip("\n").split("\t")
                if len(p) >= 4:
                    broken.append({"node": node, "part": p[0], "rows": int(p[1] or 0),
                                   "modified": p[2], "error": p[3][:300]})
    res["acked_present"] = {"ok": not missing, "acked_rows": len(acked), "missing": len(missing),
                            "first_missing": sorted(missing)[:10],
                            "unreadable_parts": broken[:10],
                            "unreadable_rows": sum(b["rows"] for b in broken)}
    phantom = [i for i in where if i not in acked and i not in unacked]
    res["no_phantom"] = {"ok": not phantom, "phantom": len(phantom),
                         "first": sorted(phantom)[:10]}
    res["once_per_replica"] = {"ok": not dup, "first": dup}
    off, bad_rows, copies = [], [], defaultdict(int)
    for i, locs in where.items():
        want = acked.get(i) or unacked.get(i)
        if want is None:
            continue
        nodes = [x[0] for x in locs]
        for (_, t, d, _) in locs:
            if (t, d) != want and len(bad_rows) < 10:
                bad_rows.append("%d: %s %d, written %s %d" % (i, t, d, want[0], want[1]))
        split = locs[0][3]
        route = routes.get((want[0], split))
        if route is None:
            off.append("%d: no route for %s split %d" % (i, want[0], split))
            continue
        ok = (set(nodes) == route) if i in acked else set(nodes) <= route
        if not ok and len(off) < 10:
            off.append("%d (%s/%d) on %s, route %s" % (i, want[0], split, ",".join(sorted(nodes)),
                                                       ",".join(sorted(route))))
        copies[len(nodes)] += 1
    res["on_route"] = {"ok": not off, "first": off, "ids_by_copies": {str(k): v for k, v in
                                                                      sorted(copies.items())}}
    res["row_intact"] = {"ok": not bad_rows, "first": bad_rows}
    agg = defaultdict(lambda: [0, 0])
    for i, locs in where.items():
        t = locs[0][1]
        agg[t][0] += 1
        agg[t][1] += i
    want_read = "\n".join("%s\t%d\t%d\t%d" % (t, n, n, s) for t, (n, s) in sorted(agg.items()))
    rr = []
    for path in o.router_read:
        got = open(path).read().strip()
        if got != want_read:
            rr.append({"file": path, "got": got[:800], "want": want_read[:800]})
    res["router_reads"] = {"ok": not rr and bool(o.router_read), "routers": len(o.router_read),
                           "differ": rr}
    res["unacked_rows"] = len(unacked)
    res["unacked_stored"] = sum(1 for i in unacked if i in where)
    json.dump(res, open(o.out, "w"), indent=1)
    bad = [k for k, v in res.items() if isinstance(v, dict) and not v["ok"]]
    if bad:
        print("verify: broken: " + ", ".join(bad), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
