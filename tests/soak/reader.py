#!/usr/bin/env python3
"""The soak's reader (tests/soak/soak.sh): reads the rows written before the faults began (days
that no writer touches any more; tiered early) through the routers, alternating between them,
and compares every answer with the reference read at the start.

    reader.py --routers URL,URL --reference FILE --where SQL --stop FILE --stats FILE [--seed S]

--reference holds "tenant<TAB>count<TAB>distinct ids<TAB>sum of ids" lines (the answer of the
all-tenants query). Each round is either that query (every slice, fan-out) or one tenant's
(its slice(s) only). An answer is ok (200 and equal), error (not 200, or the connection failed:
expected while a fault lasts) or wrong (200 and different: a broken invariant). --stats (JSON,
rewritten every round): counts per outcome and the first wrong answers.
"""
import argparse
import json
import os
import random
import time
import urllib.error
import urllib.request


def query(url, sql):
    req = urllib.request.Request(url + "/", data=sql.encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception as e:  # refused, reset, timeout
        return 0, "%s: %s" % (type(e).__name__, e)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--routers", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--where", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--seed", type=int, default=0)
    o = p.parse_args()
    routers = o.routers.split(",")
    ref_all = open(o.reference).read().strip()
    ref = {ln.split("\t")[0]: ln for ln in ref_all.splitlines()}
    rnd = random.Random(o.seed)
    st = {"ok": 0, "error": 0, "wrong": 0, "fanout": 0, "one_tenant": 0, "wrong_samples": [],
          "last_errors": []}
    k = 0
    while not os.path.exists(o.stop):
        url = routers[k % len(routers)]
        k += 1
        if rnd.random() < 0.5:
            st["fanout"] += 1
            want = ref_all
            sql = ("SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE %s "
                   "GROUP BY tenant ORDER BY tenant FORMAT TSV" % o.where)
        else:
            st["one_tenant"] += 1
            t = rnd.choice(sorted(ref))
            want = ref[t]
            sql = ("SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE "
                   "tenant = '%s' AND %s GROUP BY tenant FORMAT TSV" % (t, o.where))
        status, text = query(url, sql)
        if status != 200:
            st["error"] += 1
            st["last_errors"] = (st["last_errors"] + ["%s %s: %d %s" % (
                time.strftime("%H:%M:%S"), url, status, text[:200].replace("\n", " "))])[-5:]
        elif text.strip() == want:
            st["ok"] += 1
        else:
            st["wrong"] += 1
            if len(st["wrong_samples"]) < 10:
                st["wrong_samples"].append({"at": time.strftime("%H:%M:%S"), "router": url,
                                            "sql": sql, "want": want, "got": text[:600]})
        tmp = o.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, o.stats)
        time.sleep(0.2)


if __name__ == "__main__":
    main()
