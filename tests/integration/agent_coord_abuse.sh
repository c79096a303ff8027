# The router, a `ferry agent` and `ferry coordinator` abused together, all on loopback and bounded
# in count and time (docs/security.md, "What the servers bound"): slow sockets trickling header
# bytes at each, bodies trickled to the agent's receive, oversized bodies (1 GiB declared, 64 MiB
# chunked) at each, 1000 tiny requests at each, and a client over the per-address limit (429).
# Meanwhile a normal client per server keeps getting answers within a bound; each process's RSS
# stays under a bound; nothing crashes (sanitizer build).
# ABUSE_RATE_LIMIT=N (a measurement, docs/benchmarks.md): every server also has
# max_requests_per_second_per_address = N, the normal clients keep to N / 2 a second, and the
# floods' requests past N a second per address must be refused (429) instead of served.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
ABUSE="python3 $FERRY_SOURCE_DIR/tests/lib/server_abuse.py"

LAB=$T/lab
lab_up "$LAB" --nodes 1
CONF=$LAB/ferry.conf
N1=$(lab_url "$LAB" node1)
events_conf "$CONF" "passthrough = $N1" "max_buffered_bytes = 1M" "memory_budget = 8M" \
    "max_query_size = 1M" "max_connections = 300" "max_connections_per_address = 20" \
    "header_timeout = 3s" "receive_timeout = 8s" "idle_timeout = 30s"
cat >>"$CONF" <<EOF
[agent]
max_connections = 300
max_connections_per_address = 20
header_timeout = 3s
idle_timeout = 30s
min_receive_rate = 1K
max_request_bytes = 64K
max_receive_bytes = 8M
[coordinator]
max_connections = 300
max_connections_per_address = 20
header_timeout = 3s
receive_timeout = 8s
idle_timeout = 30s
EOF
if [ -n "${ABUSE_RATE_LIMIT:-}" ]; then
    for section in router agent coordinator; do # under its section's header, wherever that is
        sed -i "/^\[$section\]\$/a max_requests_per_second_per_address = $ABUSE_RATE_LIMIT" "$CONF"
    done
    export ABUSE_NORMAL_RATE=$((ABUSE_RATE_LIMIT / 2))
fi
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"
events_table "$N1"
"$FERRY_BIN" tenant add t1 --config "$CONF" >/dev/null || fail "tenant add"

# ---- bad bounds are refused with the key named ----
sed 's/^min_receive_rate = 1K$/min_receive_rate = fast/' "$CONF" >"$T/bad.conf"
printf 'abuse-token-0123456789abcdef\n' >"$T/token"
expect_exit 2 "$FERRY_BIN" agent --clickhouse "$N1" --data-path "$LAB/node1/data" \
    --listen 127.0.0.1:0 --token-file "$T/token" --config "$T/bad.conf"
assert_contains "$ERR" "[agent] min_receive_rate" "bad agent bound named"
sed 's/^max_connections_per_address = 20$/max_connections_per_address = 400/' "$CONF" >"$T/bad2.conf"
expect_exit 2 "$FERRY_BIN" coordinator --config "$T/bad2.conf"
assert_contains "$ERR" "[coordinator] max_connections_per_address" "bad coordinator bound named"
ok "bad [agent] and [coordinator] bounds refused, the key named"

# The sanitizer keeps freed memory in a quarantine (256 MB by default), which would swamp the
# processes' own use: a small one, so the RSS bounds below measure the servers.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
start_router "$CONF" router
DP=$(free_port)
bg_start "$T/agent.log" "$FERRY_BIN" agent --clickhouse "$N1" --data-path "$LAB/node1/data" \
    --listen "127.0.0.1:$DP" --token-file "$T/token" --config "$CONF"
A_PID=$BG_PID
A_URL=http://127.0.0.1:$DP
wait_for 60 grep -q "agent ready" "$T/agent.log" || fail "agent did not start: $(cat "$T/agent.log")"
bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$CONF" --port-file "$T/coord.port"
C_PID=$BG_PID
wait_for 60 test -s "$T/coord.port" || fail "coordinator did not start: $(cat "$T/coord.log")"
C_URL=http://127.0.0.1:$(cat "$T/coord.port")
wait_for 30 curl -sf "$C_URL/health"
AUTH='{"Authorization": "Bearer abuse-token-0123456789abcdef"}'
RECV="/agent/v1/receive?database=default&table=events&part=all_1_1_0&kind=hot"
cat >"$T/spec.json" <<EOF
[{"name": "router", "url": "$R_URL", "pid": $R_PID, "headers": {},
  "normal": ["POST", "/", "SELECT 1"], "tiny": ["POST", "/", "SELECT 1"],
  "big": [["POST", "/"]], "slow_body": null},
 {"name": "agent", "url": "$A_URL", "pid": $A_PID, "headers": $AUTH,
  "normal": ["GET", "/agent/v1/status", ""], "tiny": ["GET", "/agent/v1/metrics", ""],
  "big": [["POST", "$RECV"], ["POST", "/agent/v1/parts"]], "slow_body": ["POST", "$RECV"]},
 {"name": "coordinator", "url": "$C_URL", "pid": $C_PID, "headers": {},
  "normal": ["GET", "/health", ""], "tiny": ["GET", "/routing", ""],
  "big": [["GET", "/routing"]], "slow_body": null}]
EOF
declare -A RSS0 PIDS=([router]=$R_PID [agent]=$A_PID [coordinator]=$C_PID)
for s in router agent coordinator; do
    RSS0[$s]=$(awk '/^VmRSS:/ {print $2}' "/proc/${PIDS[$s]}/status")
done

# ---- unloaded ----
BASE=$($ABUSE normal "$T/spec.json" 40)
echo "unloaded: $BASE"
declare -A BOUND
for s in router agent coordinator; do
    [ "$(jq ".$s.n_bad" <<<"$BASE")" = 0 ] || fail "$s's normal client unloaded: $BASE"
    # 3x the unloaded p99, at least 1.5 s (the sanitizer build on a shared 2-core machine)
    BOUND[$s]=$(python3 -c "print(max(3 * $(jq ".$s.p99" <<<"$BASE"), 1500))")
done
ok "normal clients unloaded: p99 router $(jq .router.p99 <<<"$BASE") ms, agent $(jq .agent.p99 <<<"$BASE") ms, coordinator $(jq .coordinator.p99 <<<"$BASE") ms"

# ---- over the per-address limit: 429, before the body is read ----
for s in "router $R_URL /ping {}" "agent $A_URL /agent/v1/metrics $AUTH" "coordinator $C_URL /health {}"; do
    read -r name url path hdrs <<<"$s"
    PA=$($ABUSE peraddr "$url" "$path" 20 "$hdrs")
    echo "$name per-address: $(jq -c 'del(.head)' <<<"$PA")"
    assert_contains "$(jq -r .status_line <<<"$PA")" " 429 " "$name: the 21st connection from one address"
    assert_contains "$(jq -r .head <<<"$PA")" "Retry-After: 2" "$name: 429 says when to retry"
    assert_contains "$(jq -r .head <<<"$PA" | tr 'A-Z' 'a-z')" "connection: close" "$name: 429 closes"
    assert_eq true "$(jq .closed <<<"$PA")" "$name: the connection closed after the 429"
    assert_eq 200 "$(jq .other_address <<<"$PA")" "$name: another address meanwhile"
    assert_eq 20 "$(jq .held_alive <<<"$PA")" "$name: the 20 held connections untouched"
    # 30 more: 16 over the limit kept for their 429, 14 closed at accept (a connection just
    # closed may still be counted for a moment; some of the 16 may
    # be cut at 1 s already when looked at on a loaded machine)
    [ "$(jq .flood_closed_at_once <<<"$PA")" -ge 12 ] ||
        fail "$name: of 30 more connections $(jq .flood_closed_at_once <<<"$PA") closed at once (16 may wait)"
    assert_eq 200 "$(jq .after_release <<<"$PA")" "$name: the address once one connection closed"
done
ok "a 21st connection from one address: 429 with Retry-After and Connection: close, its 10 MiB body unread; served again once one closed"

# ---- everything at once ----
ALL=$($ABUSE all "$T/spec.json" 20)
echo "all: $ALL"
for s in router agent coordinator; do
    R=$(jq -c ".$s" <<<"$ALL")
    [ "$(jq .normal.n_bad <<<"$R")" = 0 ] || fail "$s's normal client failed under abuse: $R"
    [ "$(jq .normal.n <<<"$R")" -ge 5 ] || fail "$s's normal client got few answers: $R"
    python3 -c "import sys; sys.exit(0 if $(jq .normal.p99 <<<"$R") <= ${BOUND[$s]} else 1)" ||
        fail "$s's normal client p99 $(jq .normal.p99 <<<"$R") ms above ${BOUND[$s]} ms under abuse"
    assert_eq 0 "$(jq .slow.open_left <<<"$R")" "$s: slow sockets still open after 20 s (header_timeout 3s)"
    python3 -c "import sys; sys.exit(0 if $(jq .slow.held_max_s <<<"$R") < 10 else 1)" ||
        fail "$s: a trickling socket was held $(jq .slow.held_max_s <<<"$R") s (header_timeout 3s)"
    if [ -n "${ABUSE_RATE_LIMIT:-}" ]; then # past N a second per address: refused
        [ "$(jq .tiny.bad <<<"$R")" -ge 1 ] || fail "$s: no tiny request refused at $ABUSE_RATE_LIMIT a second per address: $R"
    else
        assert_eq 0 "$(jq .tiny.bad <<<"$R")" "$s: tiny requests that failed"
    fi
    for i in $(seq 0 $(($(jq '.big | length' <<<"$R") - 1))); do
        B=$(jq -c ".big[$i]" <<<"$R")
        assert_contains "$(jq -r '.declared_1GiB[0]' <<<"$B")" " 413 " "$s: 1 GiB declared: $B"
        python3 -c "import sys; sys.exit(0 if $(jq '.declared_1GiB[1]' <<<"$B") < 10 else 1)" ||
            fail "$s: the 413 to a 1 GiB body took $(jq '.declared_1GiB[1]' <<<"$B") s"
        C=$(jq -r '.chunked_64MiB[0]' <<<"$B")
        # the router reads a passthrough body whole and answers 413 past max_buffered_bytes; the
        # agent and the coordinator answer 413 at the end, or drop the connection 4 MiB past it
        [[ "$C" == *" 413 "* || "$C" == *"error after"* ]] || fail "$s: 64 MiB chunked: $B"
    done
    pid_running "${PIDS[$s]}" || fail "$s died"
    ok "$s under abuse: normal p99 $(jq .normal.p99 <<<"$R") ms (bound ${BOUND[$s]} ms, $(jq .normal.n <<<"$R") answers), 120 slow sockets cut within $(jq .slow.held_max_s <<<"$R") s, 1000 tiny in $(jq .tiny.seconds <<<"$R") s, oversized bodies 413, RSS peak $(jq .rss_max_kib <<<"$R") KiB"
done
SB=$(jq -c .agent.slow_body <<<"$ALL")
assert_eq 0 "$(jq .open_left <<<"$SB")" "agent: trickled bodies still open: $SB"
# cut by min_receive_rate = 1K over a 10 s window (not by a deadline: the agent has none)
python3 -c "import sys; sys.exit(0 if 9 <= $(jq .held_min_s <<<"$SB") and $(jq .held_max_s <<<"$SB") < 19 else 1)" ||
    fail "agent: trickled bodies held $(jq .held_min_s <<<"$SB")..$(jq .held_max_s <<<"$SB") s (min_receive_rate 1K, window 10 s)"
ok "agent: 5 bodies trickled at 2 bytes/s cut after $(jq .held_min_s <<<"$SB")..$(jq .held_max_s <<<"$SB") s by min_receive_rate"

# ---- still serving; memory bounded; no sanitizer report ----
AFTER=$($ABUSE normal "$T/spec.json" 10)
for name in router agent coordinator; do
    [ "$(jq ".$name.n_bad" <<<"$AFTER")" = 0 ] || fail "$name after the abuse: $AFTER"
    pid_running "${PIDS[$name]}" || fail "$name died"
    peak=$(jq ".$name.rss_max_kib" <<<"$ALL")
    # 300 connections at most (a thread each), the bodies each holds, the sanitizer's bookkeeping
    limit=$((RSS0[$name] + 150 * 1024))
    [ "$peak" -le "$limit" ] || fail "$name RSS peaked at $peak KiB (start ${RSS0[$name]} KiB, bound $limit KiB)"
    echo "$name RSS: start ${RSS0[$name]} KiB, peak $peak KiB (bound $limit KiB)"
done
ok "router, agent and coordinator alive and serving; RSS within start + 150 MiB"
# two requests to the agent without its token
for _ in 1 2; do
    assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' "$A_URL/agent/v1/status")" "agent without its token"
done
for s in "router $R_URL/metrics" "agent $A_URL/agent/v1/metrics" "coordinator $C_URL/metrics"; do
    read -r name url <<<"$s"
    hdr=()
    [ "$name" != agent ] || hdr=(-H "Authorization: Bearer abuse-token-0123456789abcdef")
    m=$(curl -sf --max-time 30 "${hdr[@]}" "$url") || fail "$name /metrics"
    val() { awk -v k="ferry_${name}_http_refused_total{reason=\"$1\"}" '$1 == k {print $2}' <<<"$m"; }
    # the router answers an oversized body itself (ClickHouse's QUERY_IS_TOO_LARGE): not counted
    reasons="header_timeout max_connections_per_address"
    [ "$name" = router ] || reasons="$reasons body_too_large"
    for reason in $reasons; do
        [ "$(val $reason)" -ge 1 ] 2>/dev/null || fail "$name /metrics: refused by $reason: '$(val $reason)'"
    done
    [ "$(val header_timeout)" -ge 100 ] || fail "$name /metrics: $(val header_timeout) cut at the header deadline"
    if command -v promtool >/dev/null; then
        promtool check metrics <<<"$m" >/dev/null 2>&1 || fail "$name /metrics: promtool: $(promtool check metrics <<<"$m" 2>&1 | head -3)"
    fi
    if [ "$name" = agent ]; then
        na=$(awk '$1 == "ferry_agent_refused_total{reason=\"authentication\"}" {print $2}' <<<"$m")
        [ "${na:-0}" -ge 2 ] 2>/dev/null || fail "agent /metrics: requests without the token: '$na'"
    fi
    echo "$name refused: $(grep "^ferry_${name}_http_refused_total\|^ferry_${name}_refused_total" <<<"$m" | tr '\n' ' ')"
done
ok "router, agent and coordinator /metrics count what their bounds refused, by bound (the agent also requests without its token)"
stop_router "$R_PID"
stop_pid "$A_PID" agent
stop_pid "$C_PID" coordinator
for f in router agent coord; do
    if grep -q "AddressSanitizer\|runtime error\|LeakSanitizer" "$T/$f.log"; then
        fail "the $f's sanitizer reported: $(grep -m3 'AddressSanitizer\|runtime error\|LeakSanitizer' "$T/$f.log")"
    fi
done
ok "all three stopped, no sanitizer report"
done_testing
