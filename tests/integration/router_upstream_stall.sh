# The router in front of a stalled upstream (docs/security.md, "What the servers bound"): the
# one ClickHouse node, both the passthrough server and the shard, hangs (SIGSTOP). A statement
# passed through gets TIMEOUT_EXCEEDED within [router] passthrough_timeout, an INSERT fails within
# shard_timeout, neither holds its client longer; the router keeps answering meanwhile, and once
# the node resumes both work again and the rows are there.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

LAB=$T/lab
lab_up "$LAB" --nodes 1
CONF=$LAB/ferry.conf
N1=$(lab_url "$LAB" node1)
events_conf "$CONF" "passthrough = $N1" "shard_timeout = 3s" "passthrough_timeout = 3s"
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"
events_table "$N1"
"$FERRY_BIN" tenant add t1 --config "$CONF" >/dev/null || fail "tenant add"

sed 's/^passthrough_timeout = 3s$/passthrough_timeout = soon/' "$CONF" >"$T/bad.conf"
expect_exit 2 "$FERRY_BIN" router --config "$T/bad.conf" --listen 127.0.0.1:0
assert_contains "$ERR" "[router] passthrough_timeout = 'soon'" "bad passthrough_timeout named"
ok "a bad passthrough_timeout is refused, the key named"

start_router "$CONF" router
R=$R_URL
rows() { # rows FIRST N: N rows of tenant t1 with ids FIRST..
    python3 -c "
import sys
f, n = int(sys.argv[1]), int(sys.argv[2])
sys.stdout.write(''.join(f't1\t20261101\t0\t{i}\t{i}\tv\n' for i in range(f, f + n)))" "$1" "$2"
}
insert() { # insert FIRST N: prints the body and status of the router's answer
    rows "$1" "$2" | curl -s --max-time 60 -w '\n%{http_code}' \
        "$R/?query=$(jq -rn '"INSERT INTO events FORMAT TSV"|@uri')" --data-binary @-
}
out=$(insert 0 100)
assert_eq 200 "$(tail -n1 <<<"$out")" "insert before the stall: $out"
assert_eq 1 "$(curl -sf --max-time 30 "$R" -d 'SELECT 1')" "SELECT 1 passed through"

# ---- the node hangs ----
NPID=$(lab_pid "$LAB" node1)
kill -STOP "$NPID"
at_exit "kill -CONT $NPID 2>/dev/null || true"
# kill returns before every thread has stopped (a fresh-clone run got 200 for a SELECT sent right
# after it)
wait_for 30 all_threads_stopped "$NPID" || fail "node1 (pid $NPID) did not stop"
s0=$(date +%s%N)
out=$(curl -s --max-time 60 -w '\n%{http_code}' "$R" -d 'SELECT 1')
ms=$((($(date +%s%N) - s0) / 1000000))
echo "passthrough while stalled: $ms ms: $out"
[ "$(tail -n1 <<<"$out")" != 200 ] || fail "passthrough to a stopped server answered 200: $out"
assert_contains "$out" "TIMEOUT_EXCEEDED" "passthrough to a stopped server"
assert_contains "$out" "passthrough_timeout" "the answer names the key"
[ "$ms" -ge 2500 ] && [ "$ms" -le 12000 ] || fail "passthrough failed after $ms ms (passthrough_timeout 3s)"
ok "passthrough to a stopped server: TIMEOUT_EXCEEDED after $ms ms (passthrough_timeout 3s)"

s0=$(date +%s%N)
out=$(insert 1000 10)
ms=$((($(date +%s%N) - s0) / 1000000))
echo "insert while stalled: $ms ms: $out"
[ "$(tail -n1 <<<"$out")" != 200 ] || fail "insert into a stopped shard answered 200: $out"
[ "$ms" -le 20000 ] || fail "insert into a stopped shard failed after $ms ms (shard_timeout 3s)"
ok "insert into a stopped shard: $(tail -n1 <<<"$out") after $ms ms (shard_timeout 3s): $(head -c 200 <<<"$out")"

s0=$(date +%s%N)
curl -sf --max-time 10 "$R/ping" >/dev/null || fail "router /ping while the node is stopped"
curl -sf --max-time 10 "$R/ferry/router" >/dev/null || fail "router status while the node is stopped"
ok "the router answers /ping and its status while the node is stopped ($((($(date +%s%N) - s0) / 1000000)) ms)"

# ---- the node resumes ----
kill -CONT "$NPID"
wait_for 60 test "$(curl -s --max-time 10 "$R" -d 'SELECT 1')" = 1 || fail "passthrough after the node resumed"
out=$(insert 2000 10)
assert_eq 200 "$(tail -n1 <<<"$out")" "insert after the node resumed: $out"
assert_eq 100 "$(chq "$N1" "SELECT count() FROM events WHERE id < 1000")" "rows before the stall"
assert_eq 10 "$(chq "$N1" "SELECT count() FROM events WHERE id >= 2000")" "rows after the stall"
ok "after the node resumed: passthrough and inserts work, rows exact"
pid_running "$R_PID" || fail "the router died"
stop_router "$R_PID"
if grep -q "AddressSanitizer\|runtime error" "$T/router.log"; then
    fail "the router's sanitizer reported: $(grep -m3 'AddressSanitizer\|runtime error' "$T/router.log")"
fi
ok "router stopped cleanly, no sanitizer report"
done_testing
