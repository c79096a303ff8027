# Passthrough bodies and answers far larger than the router's buffers stream through it
# (docs/routing.md, "Passthrough"): 200 MB INSERTs into a table the router does not manage (the
# statement in the URL with a chunked body, and at the body's start with a Content-Length), then
# a SELECT of those 400 MB back, while the router's RSS stays within a bound far below the body
# (max_buffered_bytes 1M: a body read whole would be refused; the memory budget 16M).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
PS="python3 $FERRY_SOURCE_DIR/tests/lib/passthrough_stream.py"
MB=${FERRY_STREAM_MB:-200}

LAB=$T/lab
lab_up "$LAB" --nodes 1
CONF=$LAB/ferry.conf
N1=$(lab_url "$LAB" node1)
events_conf "$CONF" "passthrough = $N1" "max_request_bytes = 512M" "max_buffered_bytes = 1M" \
    "memory_budget = 16M" "stream_buffer_bytes = 1M" "passthrough_timeout = 60s"
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"
events_table "$N1"
chq "$N1" "CREATE TABLE big (id UInt64, s String) ENGINE = MergeTree ORDER BY id" >/dev/null

# a small quarantine, so the RSS measures the router and not the sanitizer's freed memory
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
start_router "$CONF" router
R=$R_URL
RSS0=$(awk '/^VmRSS:/ {print $2}' "/proc/$R_PID/status")
# the ring (1 MiB), libcurl's and the answer pipe's buffers, a connection's thread and the
# sanitizer's bookkeeping: far below one body
LIMIT=$((RSS0 + 48 * 1024))

# a statement read whole is held only up to max_query_size (256 KiB here, ClickHouse's
# default): trailing white space past it is dropped, anything else refused as the server would
# (code 62), and past max_buffered_bytes (1M) when the request raises max_query_size beyond it
out=$(head -c 2000000 /dev/zero | tr '\0' ' ' | { printf 'SELECT 1'; cat; } |
    curl -s -w '\n%{http_code}' "$R/" --data-binary @-)
assert_eq "$(printf '1\n\n200')" "$out" "SELECT 1 and 2 MB of spaces (past max_query_size: dropped)"
out=$(head -c 2000000 /dev/zero | tr '\0' ' ' | { printf 'SELECT 1'; cat; printf '+1'; } |
    curl -s -w '\n%{http_code}' "$R/" --data-binary @-)
assert_contains "$out" "Max query size exceeded" "a 2 MB SELECT body (max_query_size 256K)"
assert_eq 400 "${out##*$'\n'}" "its status"
out=$(head -c 2000000 /dev/zero | tr '\0' ' ' | { printf 'SELECT 1'; cat; printf '+1'; } |
    curl -s -o /dev/null -w '%{http_code}' "$R/?max_query_size=4000000" --data-binary @-)
assert_eq 413 "$out" "a 2 MB SELECT body with max_query_size 4M (max_buffered_bytes 1M)"

for mode in url body; do
    J=$($PS insert "$R" "$R_PID" "$MB" $mode)
    echo "insert ($mode): $J"
    assert_eq "$(jq .status <<<"$J")" 200 "the $MB MB insert ($mode): $(jq -r .answer <<<"$J")"
    [ "$(jq .rss_max_kib <<<"$J")" -le "$LIMIT" ] ||
        fail "router RSS $(jq .rss_max_kib <<<"$J") KiB during the $MB MB insert ($mode), bound $LIMIT KiB (start $RSS0)"
    ok "$MB MB INSERT ($mode) through the passthrough in $(jq .seconds <<<"$J") s; router RSS peak $(jq .rss_max_kib <<<"$J") KiB (start $RSS0, bound $LIMIT)"
    ROWS=$((${ROWS:-0} + $(jq .rows <<<"$J")))
done
assert_eq "$(chq "$N1" "SELECT count() FROM big")" "$ROWS" "rows stored on the node"

J=$($PS select "$R" "$R_PID")
echo "select: $J"
assert_eq "$(jq .status <<<"$J")" 200 "SELECT of the big table"
assert_eq "$(jq .lines <<<"$J")" "$ROWS" "rows answered"
[ "$(jq .rss_max_kib <<<"$J")" -le "$LIMIT" ] ||
    fail "router RSS $(jq .rss_max_kib <<<"$J") KiB while answering $(jq .bytes <<<"$J") bytes, bound $LIMIT KiB"
ok "SELECT of $(jq .bytes <<<"$J") bytes streamed back in $(jq .seconds <<<"$J") s; router RSS peak $(jq .rss_max_kib <<<"$J") KiB"

# a client that goes away mid-body: the server gets no complete-looking body, nothing stored
before=$(chq "$N1" "SELECT count() FROM big")
python3 - "$R" <<'PY'
import socket, sys
from urllib.parse import urlparse
u = urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /?query=INSERT%20INTO%20big%20FORMAT%20TSV HTTP/1.1\r\nHost: x\r\n"
          b"Content-Length: 100000000\r\n\r\n" + b"".join(b"%d\tabc\n" % i for i in range(200000)))
s.close()
PY
sleep 2
assert_eq "$(chq "$N1" "SELECT count() FROM big")" "$before" "rows stored from a body cut off by its client"
curl -sf "$R/?query=SELECT%201" >/dev/null || fail "router not serving after a cut-off body"
ok "a body cut off by its client stores nothing; the router serves on"

pid_running "$R_PID" || fail "the router died"
stop_router "$R_PID"
if grep -q "AddressSanitizer\|runtime error" "$T/router.log"; then
    fail "the router's sanitizer reported: $(grep -m3 'AddressSanitizer\|runtime error' "$T/router.log")"
fi
ok "router stopped cleanly, no sanitizer report"
done_testing
