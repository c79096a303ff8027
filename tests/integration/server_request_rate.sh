# The servers' request rate per client address (`max_requests_per_second_per_address`, the shared
# HTTP layer lib/net/httpd.c; docs/security.md "What the servers bound"), driven through a real
# `ferry coordinator` on loopback: a burst from one address gets 429 with Retry-After past its
# second's worth and, coming straight back, is closed at accept; another address meanwhile is
# served, reconnecting does not refill the budget,
# 2 s later the address is served again, /metrics counts the refusals; a bad value is
# refused naming the key, in each server's section.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"

LAB=$T/lab
lab_up "$LAB" --nodes 1
CONF=$LAB/ferry.conf
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"

# ---- a bad value is refused with the key named ----
for section in coordinator router agent; do
    { cat "$CONF"; printf '\n[%s]\nmax_requests_per_second_per_address = 2000000\n' "$section"; } \
        >"$T/bad-$section.conf"
done
expect_exit 2 "$FERRY_BIN" coordinator --config "$T/bad-coordinator.conf"
assert_contains "$ERR" "[coordinator] max_requests_per_second_per_address" "coordinator: key named"
expect_exit 2 "$FERRY_BIN" router --config "$T/bad-router.conf" --listen 127.0.0.1:0
assert_contains "$ERR" "[router] max_requests_per_second_per_address" "router: key named"
printf 'rate-token-0123456789abcdef\n' >"$T/token"
expect_exit 2 "$FERRY_BIN" agent --clickhouse "$(lab_url "$LAB" node1)" \
    --data-path "$LAB/node1/data" --listen 127.0.0.1:0 --token-file "$T/token" \
    --config "$T/bad-agent.conf"
assert_contains "$ERR" "[agent] max_requests_per_second_per_address" "agent: key named"
ok "max_requests_per_second_per_address past 1000000 refused in [coordinator], [router], [agent]"

# ---- 5 requests a second per address ----
printf '\n[coordinator]\nmax_requests_per_second_per_address = 5\n' >>"$CONF"
bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$CONF" --port-file "$T/coord.port"
wait_for 60 test -s "$T/coord.port" || fail "coordinator did not start: $(cat "$T/coord.log")"
C_URL=http://127.0.0.1:$(cat "$T/coord.port")
wait_for 30 curl -sf "$C_URL/health"
sleep 1.2 # the probes above came from 127.0.0.1; the addresses below are new anyway

# Requests as fast as they are answered: 100 from 127.0.7.1 on a kept-alive connection (a new
# one after each 429, which closes it; one closed at accept while the address owes requests
# counts as "closed"), one from 127.0.7.2 right after, 10 more from 127.0.7.1 each on a new
# connection, then, 2.2 s later (the debt of a refused burst is at most a second's worth, so
# the budget is full again after 2 s), 5 more. At 5 a second the burst can only pass wholly if its
# requests take 190 ms each.
OUT=$(python3 - "$C_URL" <<'EOF'
import http.client, json, sys, time
host, port = sys.argv[1][len("http://"):].split(":")
def burst(src, n, reuse=True):
    got = {"ok": 0, "over": 0, "closed": 0, "other": 0, "retry_after": None, "closes": False,
           "msg": ""}
    c = None
    for _ in range(n):
        if c is None:
            c = http.client.HTTPConnection(host, int(port), timeout=10, source_address=(src, 0))
        try:
            c.request("GET", "/health")
            r = c.getresponse()
            body = r.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException):
            got["closed"] += 1 # closed at accept: the address owes requests
            c.close()
            c = None
            time.sleep(0.005)
            continue
        if r.status == 200:
            got["ok"] += 1
        elif r.status == 429:
            got["over"] += 1
            got["retry_after"] = r.getheader("Retry-After")
            got["closes"] = (r.getheader("Connection") or "").lower() == "close"
            got["msg"] = body.strip()
        else:
            got["other"] += 1
        if not reuse or (r.getheader("Connection") or "").lower() == "close":
            c.close()
            c = None
    if c is not None:
        c.close()
    return got
out = {"burst": burst("127.0.7.1", 100), "other_address": burst("127.0.7.2", 1),
       "new_connections": burst("127.0.7.1", 10, reuse=False)}
time.sleep(2.2)
out["later"] = burst("127.0.7.1", 5)
print(json.dumps(out))
EOF
) || fail "the rate probe failed: $OUT"
echo "rate probe: $OUT"
B=$(jq -c .burst <<<"$OUT")
[ "$(jq .ok <<<"$B")" -ge 5 ] || fail "the burst's first second's worth (5) was not served: $B"
[ "$(jq .over <<<"$B")" -ge 1 ] || fail "a burst of 100 at 5 a second got no 429: $B"
[ "$(jq .closed <<<"$B")" -ge 1 ] || fail "a client coming straight back after its 429 was not closed at accept: $B"
assert_eq 100 "$(jq '.ok + .over + .closed' <<<"$B")" "every request of the burst answered 200 or 429, or closed at accept"
assert_eq '"2"' "$(jq .retry_after <<<"$B")" "429 says when to retry"
assert_eq true "$(jq .closes <<<"$B")" "429 closes the connection"
assert_contains "$(jq -r .msg <<<"$B")" "at most 5 a second" "429 names the limit"
ok "a burst from one address: $(jq .ok <<<"$B") served, $(jq .over <<<"$B") answered 429 (Retry-After: 2), $(jq .closed <<<"$B") closed at accept"
assert_eq 1 "$(jq .other_address.ok <<<"$OUT")" "another address is served during the burst"
[ "$(jq '.new_connections.over + .new_connections.closed' <<<"$OUT")" -ge 3 ] ||
    fail "new connections refilled the address's budget: $(jq -c .new_connections <<<"$OUT")"
ok "another address served; reconnecting does not refill the budget ($(jq -c .new_connections <<<"$OUT"))"
[ "$(jq .later.ok <<<"$OUT")" -ge 4 ] || fail "2.2 s later the address is still refused: $OUT"
ok "2 s later the address is served again ($(jq .later.ok <<<"$OUT") of 5)"

M=$(curl -sf "$C_URL/metrics") || fail "GET /metrics failed"
N=$(grep '^ferry_coordinator_http_refused_total{reason="max_requests_per_second_per_address"}' \
    <<<"$M" | awk '{print $2}')
[ -n "$N" ] && [ "${N%.*}" -ge "$(jq '.burst.over + .burst.closed + .new_connections.over + .new_connections.closed' <<<"$OUT")" ] ||
    fail "metrics count ${N:-nothing} refusals by rate: $(grep refused_total <<<"$M")"
ok "/metrics counts the refusals by rate ($N)"
done_testing
