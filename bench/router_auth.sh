#!/usr/bin/env bash
# What authentication and the tenant restriction cost a read through `ferry router`
# (docs/security.md): one single-server query (the fast path), N times on one keep-alive
# connection each, interleaved, through
#   none   a router with [router] auth = none,
#   admin  a router with auth = catalog, as an admin user (HTTP Basic: one salted SHA-256),
#   bound  the same router as a user bound to the tenant (plus the scope check and the explicit
#          restriction in the server's query),
# and the time of a refused login. One JSON line: p50/p99 per way and the paired p50
# differences against none.
#   bash bench/router_auth.sh [BUILD_DIR] [N]          (defaults: build-release, 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
n=${2:-2000}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/events.sh
source tests/lib/router.sh

L=$T/lab
events_lab "$L"
CONF=$EV_CONF
events_table "$EV_NODE"
"$FERRY_BIN" tenant add solo --config "$CONF" >/dev/null
printf 'pw-%s\n' "$RANDOM$RANDOM" >"$T/pw"
"$FERRY_BIN" user add admin --admin --password-file "$T/pw" --config "$CONF" >/dev/null
"$FERRY_BIN" user add bound --tenants solo --password-file "$T/pw" --config "$CONF" >/dev/null
start_router "$CONF" none
RN=$R_URL
# the refused logins below must not slow down the others (they all come from 127.0.0.1)
sed -e 's/^auth = none$/auth = catalog\nlogin_free_failures = 1000000/' "$CONF" >"$T/auth.conf"
start_router "$T/auth.conf" auth
RA=$R_URL
chq "$EV_NODE" "INSERT INTO events SELECT 'solo', 20261101, 0, number % 1000, number, 'v'
    FROM numbers(100000)" >/dev/null

python3 - "$RN" "$RA" "$(head -1 "$T/pw")" "$n" <<'PY'
import base64, http.client, json, sys, time, urllib.parse
rn, ra, pw, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def conn(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port)

def timed(c, sql, user=None, password=pw, want=200):
    h = {}
    if user:
        h["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    t = time.perf_counter()
    c.request("POST", "/", body=sql.encode(), headers=h)
    r = c.getresponse()
    body = r.read()
    if r.status != want:
        raise SystemExit("HTTP %d: %s" % (r.status, body[:300]))
    return time.perf_counter() - t, body

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]

q = "SELECT count(), sum(id) FROM events WHERE tenant = 'solo'"
cn, ca, cb, cf = conn(rn), conn(ra), conn(ra), conn(ra)
for _ in range(50):
    timed(cn, q); timed(ca, q, "admin"); timed(cb, q, "bound")
tn, ta, tb, tf = [], [], [], []
for i in range(n):
    a, x = timed(cn, q); b, y = timed(ca, q, "admin"); c, z = timed(cb, q, "bound")
    assert x == y == z, (x, y, z)
    tn.append(a); ta.append(b); tb.append(c)
    if i % 10 == 0:  # refused logins, fewer (the throttle's free failures decay meanwhile)
        tf.append(timed(cf, q, "admin", "wrong", 403)[0])
ms = lambda x: round(x * 1000, 3)
paired = lambda xs, ys: ms(pct([x - y for x, y in zip(xs, ys)], .5))
print(json.dumps({"bench": "router_auth_read", "queries": n,
                  "none_p50_ms": ms(pct(tn, .5)), "none_p99_ms": ms(pct(tn, .99)),
                  "admin_p50_ms": ms(pct(ta, .5)), "admin_p99_ms": ms(pct(ta, .99)),
                  "bound_p50_ms": ms(pct(tb, .5)), "bound_p99_ms": ms(pct(tb, .99)),
                  "admin_minus_none_p50_paired_ms": paired(ta, tn),
                  "bound_minus_none_p50_paired_ms": paired(tb, tn),
                  "refused_login_p50_ms": ms(pct(tf, .5)),
                  "load_avg_1m": float(open("/proc/loadavg").read().split()[0])}), flush=True)
PY
