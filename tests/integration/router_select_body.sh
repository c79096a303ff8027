# Large SELECT bodies through `ferry router` (docs/security.md, "Request size"): a statement the
# router reads whole is held only up to max_query_size, as a server parses it (the request's
# setting, else [router] max_query_size), and what the read path's analysis holds is charged to
# the memory budget. On a one-node lab:
#   - a SELECT with a 4 MB IN list over the managed table (URL max_query_size=8000000), read and
#     routed, and one over a table the router does not manage (passed through), both answered as
#     the node answers them;
#   - the same without the setting: SYNTAX_ERROR (62) "Max query size exceeded", as the node says;
#   - a 100 MB body over the limit: refused as it arrives, the router's peak RSS (VmHWM) growing
#     far less than the body (holding the body once, let alone twice, fails the bound);
#   - a second router with a 16 MiB memory_budget: the 4 MB IN list's analysis does not fit, so
#     MEMORY_LIMIT_EXCEEDED (241), the budget given back, and the router answers the next query.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

LAB=$T/lab
lab_up "$LAB" --nodes 1
CONF=$LAB/ferry.conf
N1=$(lab_url "$LAB" node1)
cp "$CONF" "$T/base.conf"
# (the node takes seconds to parse and run a 450,000-element IN list; far longer on a loaded
# machine: generous timeouts toward it)
events_conf "$CONF" "passthrough = $N1" "max_buffered_bytes = 256M" "memory_budget = 512M" \
    "max_request_bytes = 512M" "shard_timeout = 300s"
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"
events_table "$N1"
"$FERRY_BIN" tenant add t1 --config "$CONF" >/dev/null || fail "tenant add"

# a small quarantine, so the RSS measures the router and not the sanitizer's freed memory
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
start_router "$CONF" router
R=$R_URL
R_PID1=$R_PID

chq "$N1" "SELECT 't1', 20261101, number % 100, number, 'x' FROM numbers(10000) FORMAT TSV" >"$T/rows.tsv"
out=$(curl -sS -w '\n%{http_code}' "$R/?query=$(jq -rn '"INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV"|@uri')" \
    --data-binary @"$T/rows.tsv")
[ "${out##*$'\n'}" = 200 ] || fail "insert: $out"

# The IN list: every third id up to 1.5 million, about 4 MB of text; 3334 of them are stored.
python3 - "$T" <<'PY'
import sys
t = sys.argv[1]
ids = ", ".join(str(i) for i in range(0, 1500000, 3))
open(t + "/managed.sql", "w").write(
    "SELECT count(), sum(id) FROM events WHERE tenant = 't1' AND id IN (%s) FORMAT TSV" % ids)
open(t + "/other.sql", "w").write(
    "SELECT count(), sum(number) FROM numbers(10000) WHERE number IN (%s) FORMAT TSV" % ids)
PY
SIZE=$(stat -c %s "$T/managed.sql")
[ "$SIZE" -gt 4000000 ] || fail "the statement is $SIZE bytes"
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
post() { curl -sS -D "$T/h" "$1" --data-binary @"$2"; }

# warm the read path up (the routing cache, a pooled connection) before the peak is read
out=$(curl -sS "$R/?query=$(jq -rn '"SELECT count() FROM events FORMAT TSV"|@uri')")
assert_eq 10000 "$out" "rows through the router"

# 1. over the limit: 100 MB, refused as it arrives; nothing past max_query_size is held
H0=$(hwm "$R_PID1")
J=$(python3 - "$R" <<'PY'
import json, socket, sys, time
from urllib.parse import urlparse
u = urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
total = 100 * 1000 * 1000
s.sendall(b"POST /?max_query_size=8000000 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
          b"Connection: close\r\n\r\n" % total)
piece = b"SELECT count() FROM events WHERE id IN (" + b"1, " * 340000
piece = piece[:1 << 20]
sent, t0 = 0, time.time()
try:
    while sent < total:
        n = min(len(piece), total - sent)
        s.sendall(piece[:n])
        sent += n
except OSError:
    pass  # the router may close once it answered
s.settimeout(60)
answer = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        answer += d
except OSError:
    pass
print(json.dumps({"sent": sent, "seconds": round(time.time() - t0, 2),
                  "answer": answer.decode("utf-8", "replace")[:600]}))
PY
)
H1=$(hwm "$R_PID1")
echo "over the limit: $(jq -c . <<<"$J"); VmHWM $H0 -> $H1 KiB"
assert_contains "$(jq -r .answer <<<"$J")" "Code: 62" "the over-limit body's answer"
assert_contains "$(jq -r .answer <<<"$J")" "Max query size exceeded" "its message"
assert_contains "$(jq -r .answer <<<"$J")" "X-ClickHouse-Exception-Code: 62" "its code header"
# 8 MB held at most, its buffer's growth and the sanitizer's quarantine (16 MiB); the body
# held once would be 100 MB
[ $((H1 - H0)) -le $((48 * 1024)) ] ||
    fail "router VmHWM grew $((H1 - H0)) KiB on a 100 MB body refused at 8 MB (bound 48 MiB)"
ok "a 100 MB SELECT body over max_query_size: code 62 as it arrived; router peak RSS +$((H1 - H0)) KiB"
curl -sf "$R/?query=SELECT%201" >/dev/null || fail "router not serving after the big body"

# 2. the 4 MB IN lists with max_query_size raised: answered as the node answers them
want=$(curl -sS -m 600 "$N1/?max_query_size=8000000" --data-binary @"$T/managed.sql")
assert_eq "$(printf '3334\t16668333')" "$want" "the node's own answer"
for f in other managed; do
    H0=$(hwm "$R_PID1")
    got=$(post "$R/?max_query_size=8000000" "$T/$f.sql")
    H1=$(hwm "$R_PID1")
    # the same answer for both: ids 0..9999 of t1, and numbers 0..9999
    assert_eq "$want" "$got" "the $f 4 MB IN list through the router"
    plan=$(grep -i '^X-Ferry-Plan:' "$T/h" | tr -d '\r' || true)
    echo "$f: $got (${plan:-passthrough}); VmHWM $H0 -> $H1 KiB"
    # the text (4 MB), its tokens (about ten times the text for a list of numbers, charged to
    # the budget) and the rewritten query; far below the 100 MB above
    [ $((H1 - H0)) -le $((160 * 1024)) ] ||
        fail "router VmHWM grew $((H1 - H0)) KiB on the $SIZE-byte $f statement (bound 160 MiB)"
    ok "$f: a $SIZE-byte SELECT answered as the node answers it (${plan:-passthrough}); peak RSS +$((H1 - H0)) KiB"
done
wait_for 10 bash -c "[ \$(curl -s $R/ferry/router | jq .memory_budget.used) = 0 ]" ||
    fail "the budget was not given back: $(curl -s "$R/ferry/router" | jq -c .memory_budget)"

# 3. without the setting: refused by the router as the node refuses it
node=$(curl -sS "$N1/" --data-binary @"$T/managed.sql")
assert_contains "$node" "Max query size exceeded" "the node without max_query_size"
for f in other managed; do
    got=$(post "$R/" "$T/$f.sql")
    assert_contains "$got" "Code: 62" "the $f statement without max_query_size"
    assert_contains "$got" "Max query size exceeded" "its message"
    grep -q '^HTTP/1.1 400' "$T/h" || fail "status: $(head -1 "$T/h")"
done
# the statement in the URL counts too (headers are at most 32 KiB: a 2000-byte query parameter
# over max_query_size=1000), and so does a body after a query parameter within it
head -c 2000 "$T/managed.sql" >"$T/q2000"
got=$(curl -sS -G "$R/?max_query_size=1000" --data-urlencode "query@$T/q2000")
assert_contains "$got" "Max query size exceeded" "a URL query over max_query_size"
got=$(curl -sS "$R/?max_query_size=1000&query=SELECT%201%20IN%20(" --data-binary @"$T/q2000")
assert_contains "$got" "Max query size exceeded" "a body after the URL's query parameter"
got=$(curl -sS "$R/?max_query_size=1000&query=SELECT%20count()%20FROM%20events%20WHERE%20id" \
    --data-binary " IN (1, 2, 3) FORMAT TSV")
assert_eq 3 "$got" "a routed read whose statement is the query parameter, a newline and the body"
ok "without max_query_size: code 62, Max query size exceeded, as the node answers"

# 4. a small memory budget: the analysis of the 4 MB list does not fit
cp "$T/base.conf" "$T/small.conf"
events_conf "$T/small.conf" "passthrough = $N1" "max_buffered_bytes = 8M" "memory_budget = 16M" \
    "shard_timeout = 300s"
start_router "$T/small.conf" router2
R2=$R_URL
got=$(post "$R2/?max_query_size=8000000" "$T/managed.sql")
assert_contains "$got" "Code: 241" "the 4 MB IN list under a 16 MiB budget"
assert_contains "$got" "MEMORY_LIMIT_EXCEEDED" "its name"
wait_for 10 bash -c "[ \$(curl -s $R2/ferry/router | jq .memory_budget.used) = 0 ]" ||
    fail "the budget was not given back: $(curl -s "$R2/ferry/router" | jq -c .memory_budget)"
got=$(curl -sS "$R2/?query=$(jq -rn '"SELECT count() FROM events WHERE id IN (1, 2, 3) FORMAT TSV"|@uri')")
assert_eq 3 "$got" "a small read after the refusal"
ok "16 MiB budget: the 4 MB IN list's analysis refused with MEMORY_LIMIT_EXCEEDED; the router serves on"

for pid in "$R_PID1" "$R_PID"; do
    pid_running "$pid" || fail "a router died"
    stop_router "$pid"
done
if grep -q "AddressSanitizer\|runtime error" "$T/router.log" "$T/router2.log"; then
    fail "the router's sanitizer reported: $(grep -m3 'AddressSanitizer\|runtime error' "$T/router.log" "$T/router2.log")"
fi
ok "routers stopped cleanly, no sanitizer report"
done_testing
