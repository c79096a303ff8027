#!/usr/bin/env python3
"""Differential check of `ferry router` reads: every query of a corpus file (one per line, --
comments) runs through the router and on a reference ClickHouse node; the answers must be equal
(text formats as sorted lines, since rows with equal sort keys may come in any order; JSON as
meta + rows + sorted data, without timing statistics). Prints each difference and a summary line
"queries: N, failures: F, plans: {...}" (plans from the router's X-Ferry-Plan header).
Usage: router_read_check.py [--user U --password P] [--ref-database DB]
                            [--bound TENANT --foreign T1,T2...] ROUTER_URL REFERENCE_URL CORPUS [REPEAT]
  --user/--password  the router's credentials (HTTP Basic)
  --ref-database DB  the reference's tables are in DB (e.g. a copy holding only one tenant's rows)
  --bound TENANT     the user is bound to TENANT: a query naming one of the --foreign tenants
                     must be refused with ACCESS_DENIED (497, HTTP 403) and nothing else; every
                     other query must equal the reference (which holds only TENANT's rows)
"""
import base64
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

def run(url, sql, auth=None, database=None):
    if database:
        url = url + "/?" + urllib.parse.urlencode({"database": database})
    else:
        url = url + "/"
    req = urllib.request.Request(url, data=sql.encode(), method="POST")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
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


def names_foreign(sql, foreign):
    literals = re.findall(r"'((?:[^'\\]|\\.|'')*)'", sql)
    return any(l in foreign for l in literals)


def main():
    args = sys.argv[1:]
    user = password = refdb = bound = None
    foreign = set()
    while args and args[0].startswith("--"):
        opt, val = args[0], args[1]
        args = args[2:]
        if opt == "--user":
            user = val
        elif opt == "--password":
            password = val
        elif opt == "--ref-database":
            refdb = val
        elif opt == "--bound":
            bound = val
        elif opt == "--foreign":
            foreign = set(val.split(","))
        else:
            sys.exit("unknown option " + opt)
    auth = "%s:%s" % (user, password) if user else None
    router, ref, corpus = args[0:3]
    repeat = int(args[3]) if len(args) > 3 else 1
    queries = [l.strip() for l in open(corpus) if l.strip() and not l.startswith("--")]
    plans, failures, empty, refused = {}, 0, 0, 0
    for _ in range(repeat):
        for sql in queries:
            if bound and names_foreign(sql, foreign):
                st, got, _ = run(router, sql, auth)
                # refused, and nothing else: one line of ClickHouse's error, no rows
                if st != 403 or not got.startswith("Code: 497.") or \
                        "(ACCESS_DENIED)" not in got or got.rstrip("\n").count("\n") > 0:
                    print("FAIL not refused (%d): %s\n  %s" % (st, sql, got[:400]))
                    failures += 1
                else:
                    refused += 1
                continue
            st_ref, want, _ = run(ref, sql, None, refdb)
            st, got, plan = run(router, sql, auth)
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
    print("queries: %d, failures: %d, empty: %d, refused: %d, plans: %s" %
          (len(queries) * repeat, failures, empty, refused, json.dumps(plans, sort_keys=True)))
    return 1 if failures else 0


sys.exit(main())
