#!/usr/bin/env python3
"""Load and format helpers for the router tests: encodes rows of the test table
(tenant String, day UInt32, uid UInt64, id UInt64, v String; split set by the router) in every
format the router routes, and sends batches through it from several threads.

  router_load.py load URL OUT.json --tenants N --batches B --rows R --clients C [--id-base K]
                    [--until FILE] [--setting NAME=VALUE]... [--ids IDS.txt]
                    [--retry N] [--formats F,F...] [--days D,D...] [--stats STATS.json]
      sends B batches per client (with --until: until FILE exists, at least one each), each of
      R rows of random tenants t0..t{N-1} with unique ids, cycling through the formats (settings
      passed as URL parameters); writes {"tenant": [rows, sum_of_ids], ...} of what the router
      accepted (200), and with --ids every accepted id, one per line. Any other answer is an
      error (printed, exit 1) unless --retry N: a failed batch is sent again with the same
      query_id (as a client retries) up to N times, and counts once it is accepted. --stats
      writes {"batches", "retried", "failed_attempts", "errors": [first ones]}.
  router_load.py send URL FORMAT TENANT ID_FROM COUNT [--query-id Q] [--day YYYYMMDD]
      one batch (days 20261101..03 unless --day); prints the HTTP status and body.
  router_load.py encode FORMAT TENANT ID_FROM COUNT
      writes the encoded batch to stdout (bytes)."""
import json
import random
import struct
import sys
import threading
import urllib.error
import urllib.request

FORMATS = ["JSONEachRow", "TSV", "TSVWithNames", "CSV", "CSVWithNames", "RowBinary"]
COLS = ["tenant", "day", "uid", "id", "v"]

# Values that exercise quoting and escaping in every format.
TRICKY = ["plain", "tab\there", "new\nline", 'quote"d', "comma,sep", "back\\slash", "ünï😀",
          "", "'single'", "\\N"]


def value(i):
    return TRICKY[i % len(TRICKY)] + str(i)


def tsv_escape(s):
    return (s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n"))


def csv_quote(s):
    return '"' + s.replace('"', '""') + '"'


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def rb_string(s):
    b = s.encode()
    return varint(len(b)) + b


def rows_for(tenant, id_from, count, day=None):
    return [(tenant, day if day else 20261101 + (i % 3), (i * 7919) % 1000003, i, value(i))
            for i in range(id_from, id_from + count)]


def encode(fmt, rows):
    if fmt == "JSONEachRow":
        return "".join(json.dumps(dict(zip(COLS, r)), ensure_ascii=False) + "\n"
                       for r in rows).encode()
    if fmt in ("TSV", "TSVWithNames"):
        head = "\t".join(COLS) + "\n" if fmt == "TSVWithNames" else ""
        return (head + "".join("\t".join(tsv_escape(str(x)) for x in r) + "\n"
                               for r in rows)).encode()
    if fmt in ("CSV", "CSVWithNames"):
        head = ",".join(COLS) + "\n" if fmt == "CSVWithNames" else ""
        return (head + "".join(",".join(csv_quote(x) if isinstance(x, str) else str(x)
                                        for x in r) + "\n" for r in rows)).encode()
    if fmt == "RowBinary":
        out = bytearray()
        for t, day, uid, i, v in rows:
            out += rb_string(t) + struct.pack("<IQQ", day, uid, i) + rb_string(v)
        return bytes(out)
    raise ValueError(fmt)


def statement(fmt):
    # Formats without names send an explicit column list (the table also has `split`).
    if fmt in ("TSV", "CSV", "RowBinary"):
        return "INSERT INTO events (tenant, day, uid, id, v) FORMAT " + fmt
    return "INSERT INTO events FORMAT " + fmt


def send(url, fmt, body, query_id=None, timeout=120, settings=None):
    q = urllib.parse.urlencode({"query": statement(fmt), **({"query_id": query_id} if query_id else {}),
                                **(settings or {})})
    req = urllib.request.Request(url + "/?" + q, data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def load(url, out, tenants, batches, nrows, clients, id_base, until=None, settings=None,
         ids_out=None, retry=0, formats=None, days=None, stats_out=None):
    import os
    import time
    lock = threading.Lock()
    sent = {}
    ids = []
    errors = []
    stats = {"batches": 0, "retried": 0, "failed_attempts": 0, "errors": []}
    formats = formats or FORMATS
    days = days or [20261101, 20261102, 20261103]
    # ids of client c start at id_base + c * per * nrows (per: batches, or 10^6 with --until)
    per = batches if until is None else 1000000

    def client(c):
        rnd = random.Random(c)
        b = 0
        while (b < batches) if until is None else (b == 0 or not os.path.exists(until)):
            fmt = formats[(c + b) % len(formats)]
            first = id_base + (c * per + b) * nrows
            b += 1
            rows = []
            for k in range(nrows):
                t = "t%d" % rnd.randrange(tenants)
                i = first + k
                rows.append((t, days[i % len(days)], (i * 7919) % 1000003, i, value(i)))
            body = encode(fmt, rows)
            qid = "load-%d-%d-%d" % (id_base, c, b)
            for attempt in range(retry + 1):
                status, text = send(url, fmt, body, qid, settings=settings)
                if status == 200:
                    break
                with lock:
                    stats["failed_attempts"] += 1
                    if len(stats["errors"]) < 10:
                        stats["errors"].append("%s %s %d %s" % (qid, fmt, status, text[:400]))
                if attempt < retry:
                    time.sleep(0.2 * (attempt + 1))
            with lock:
                stats["batches"] += 1
                if attempt:
                    stats["retried"] += 1
                if status != 200:
                    errors.append("%s %d %s" % (fmt, status, text[:300]))
                    continue
                for r in rows:
                    n, s = sent.get(r[0], (0, 0))
                    sent[r[0]] = (n + 1, s + r[3])
                    ids.append(r[3])

    th = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    json.dump(sent, open(out, "w"))
    if stats_out:
        json.dump(stats, open(stats_out, "w"))
    if ids_out:
        with open(ids_out, "w") as f:
            f.write("".join("%d\n" % i for i in ids))
    if errors:
        print("\n".join(errors[:5]), file=sys.stderr)
        sys.exit(1)


def main():
    import argparse
    import urllib.parse  # noqa: F401 (used by send)
    a = sys.argv[1:]
    if a[0] == "load":
        p = argparse.ArgumentParser()
        p.add_argument("url")
        p.add_argument("out")
        p.add_argument("--tenants", type=int, default=200)
        p.add_argument("--batches", type=int, default=10)
        p.add_argument("--rows", type=int, default=200)
        p.add_argument("--clients", type=int, default=4)
        p.add_argument("--id-base", type=int, default=0)
        p.add_argument("--until")
        p.add_argument("--ids")
        p.add_argument("--setting", action="append", default=[])
        p.add_argument("--retry", type=int, default=0)
        p.add_argument("--formats")
        p.add_argument("--days")
        p.add_argument("--stats")
        o = p.parse_args(a[1:])
        load(o.url, o.out, o.tenants, o.batches, o.rows, o.clients, o.id_base, o.until,
             dict(x.split("=", 1) for x in o.setting), o.ids, o.retry,
             o.formats.split(",") if o.formats else None,
             [int(d) for d in o.days.split(",")] if o.days else None, o.stats)
    elif a[0] == "send":
        qid = a[a.index("--query-id") + 1] if "--query-id" in a else None
        day = int(a[a.index("--day") + 1]) if "--day" in a else None
        fmt, tenant, first, count = a[2], a[3], int(a[4]), int(a[5])
        status, text = send(a[1], fmt, encode(fmt, rows_for(tenant, first, count, day)), qid)
        print(status)
        print(text)
    elif a[0] == "encode":
        fmt, tenant, first, count = a[1], a[2], int(a[3]), int(a[4])
        sys.stdout.buffer.write(encode(fmt, rows_for(tenant, first, count)))
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    import urllib.parse
    main()
