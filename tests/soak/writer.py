#!/usr/bin/env python3
"""The soak's writer (tests/soak/soak.sh): batches of one tenant's rows with unique ids (over
--days) through the routers, each batch retried with the same query_id (the router's deduplication token) until a router
acknowledges it with 200, alternating routers between attempts. Every acknowledged row is
appended to --acked at once ("id<TAB>tenant<TAB>day", flushed per batch), so the log is true
even if the soak dies. A batch not acknowledged within --give-up seconds goes to --unacked
(its rows may be stored on some replicas, at most once each) and the writer moves on.

    writer.py --routers URL,URL --tenants t0,t1,... --days D,D,... --acked FILE --unacked FILE
              --stop FILE --stats FILE [--rows N] [--clients C] [--seed S] [--give-up SEC]
              [--id-base K]

Writes until --stop exists; the batch in flight when it appears is still retried (up to
--give-up). --stats (JSON, rewritten every few seconds and at the end): batches, rows, retried
batches, failed attempts, given up, HTTP statuses of failed attempts, the first and last errors.
"""
import argparse
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import router_load  # noqa: E402  (encode, statement, send: the formats the router takes)

FORMATS = ["TSV", "JSONEachRow", "RowBinary", "CSVWithNames"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--routers", required=True)
    p.add_argument("--tenants", required=True)
    p.add_argument("--days", required=True)
    p.add_argument("--acked", required=True)
    p.add_argument("--unacked", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--rows", type=int, default=100)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--give-up", type=float, default=300)
    p.add_argument("--id-base", type=int, default=10**9)
    o = p.parse_args()
    routers = o.routers.split(",")
    tenants = o.tenants.split(",")
    days = [int(d) for d in o.days.split(",")]
    lock = threading.Lock()
    acked = open(o.acked, "a")
    unacked = open(o.unacked, "a")
    st = {"batches": 0, "rows": 0, "retried": 0, "failed_attempts": 0, "gave_up": 0,
          "statuses": {}, "first_errors": [], "last_errors": []}

    def dump():
        tmp = o.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, o.stats)

    def client(c):
        rnd = random.Random(o.seed * 1000 + c)
        b = 0
        while b == 0 or not os.path.exists(o.stop):
            first = o.id_base + c * 10**8 + b * o.rows
            b += 1
            fmt = FORMATS[(c + b) % len(FORMATS)]
            # one tenant per batch (as an application writes), its rows over the days
            tenant = rnd.choice(tenants)
            rows = []
            for k in range(o.rows):
                i = first + k
                rows.append((tenant, rnd.choice(days), (i * 7919) % 1000003, i,
                             router_load.value(i)))
            body = router_load.encode(fmt, rows)
            qid = "soak-%d-%d-%d" % (o.seed, c, b)
            start = time.time()
            attempt = 0
            while True:
                url = routers[(c + b + attempt) % len(routers)]
                try:
                    status, text = router_load.send(url, fmt, body, qid, timeout=60)
                except Exception as e:  # connection refused/reset, timeout
                    status, text = 0, "%s: %s" % (type(e).__name__, e)
                if status == 200:
                    break
                attempt += 1
                with lock:
                    st["failed_attempts"] += 1
                    st["statuses"][str(status)] = st["statuses"].get(str(status), 0) + 1
                    e = "%s %s via %s: %d %s" % (time.strftime("%H:%M:%S"), qid, url, status,
                                                 text[:300].replace("\n", " "))
                    if len(st["first_errors"]) < 10:
                        st["first_errors"].append(e)
                    st["last_errors"] = (st["last_errors"] + [e])[-10:]
                if time.time() - start > o.give_up:
                    break
                time.sleep(min(0.2 * attempt, 2.0))
            lines = "".join("%d\t%s\t%d\n" % (r[3], r[0], r[1]) for r in rows)
            with lock:
                st["batches"] += 1
                if attempt:
                    st["retried"] += 1
                if status == 200:
                    st["rows"] += len(rows)
                    acked.write(lines)
                    acked.flush()
                else:
                    st["gave_up"] += 1
                    unacked.write(lines)
                    unacked.flush()

    th = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(o.clients)]
    for t in th:
        t.start()
    while any(t.is_alive() for t in th):
        with lock:
            dump()
        for t in th:
            t.join(timeout=2)
    dump()


if __name__ == "__main__":
    main()
