#!/usr/bin/env python3
"""Differential check of `ferry router` reads: every query of a corpus file (one per line, --
comments) runs through the router and on a reference ClickHouse node; the answers must be equal
(text formats as sorted lines, since rows with equal sort keys may come in any order; JSON as
meta + rows + sorted data, without timing statistics). Prints each difference and a summary line
"queries: N, failures: F, plans: {...}" (plans from the router's X-Ferry-Plan header).
Usage: router_read_check.py ROUTER_URL REFERENCE_URL CORPUS [REPEAT]
"""
import json
import sys
import urllib.error
import urllib.request


def run(url, sql):
    req = urllib.request.Request(url + "/", data=sql.encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode("utf-8", "replace"), r.headers.get("X-Ferry-Plan", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace"), ""


def canon(sql, text):
    if sql.rstrip().endswith("FORMAT JSON"):
        # The lab node streams FORMAT JSON as one document per block it sends; a real server
        # sends one. Documents are merged (meta of the first, rows summed, data concatenated).
        docs, dec, i = [], json.JSONDecoder(), 0
        try:
            while i < len(text):
                if text[i].isspace():
                    i += 1
                    continue
                d, i = dec.raw_decode(text, i)
                docs.append(d)
        except ValueError:
            return "not JSON: " + text
        if not docs:
            return "no JSON document"
        data = [json.dumps(r, sort_keys=True) for d in docs for r in d["data"]]
        return json.dumps({"meta": docs[0]["meta"], "rows": sum(d["rows"] for d in docs),
                           "data": sorted(data)}, sort_keys=True)
    return "\n".join(sorted(text.splitlines()))


def main():
    router, ref, corpus = sys.argv[1:4]
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    queries = [l.strip() for l in open(corpus) if l.strip() and not l.startswith("--")]
    plans, failures, empty = {}, 0, 0
    for _ in range(repeat):
        for sql in queries:
            st_ref, want, _ = run(ref, sql)
            st, got, plan = run(router, sql)
            plans[plan or "?"] = plans.get(plan or "?", 0) + 1
            if st_ref != 200:
                print("FAIL reference error %d: %s\n  %s" % (st_ref, sql, want[:400]))
                failures += 1
                continue
            if not want.strip():
                empty += 1
            if st != 200:
                print("FAIL router error %d: %s\n  %s" % (st, sql, got[:600]))
                failures += 1
                continue
            if canon(sql, want) != canon(sql, got):
                print("FAIL differs: %s\n  want %r\n  got  %r" % (sql, want[:400], got[:400]))
                failures += 1
    print("queries: %d, failures: %d, empty: %d, plans: %s" %
          (len(queries) * repeat, failures, empty, json.dumps(plans, sort_keys=True)))
    return 1 if failures else 0


sys.exit(main())
