# Shell helpers for tests that run `ferry router` (source after harness.sh).
#
#   start_router CONF NAME   starts a router with config CONF on a free loopback port (log
#                            $T/NAME.log, port file $T/NAME.port) and waits until it answers
#                            /ping; sets R_URL (http://127.0.0.1:PORT) and R_PID
#   stop_router PID          SIGTERM, then waits for the exit (fails after 30 s)
#   stop_pid PID [WHAT]      the same for any process (WHAT names it in the failure)
#   tenants_on_two CONF TAG  adds tenants TAG1, TAG2, ... until one is placed on node1 and one
#                            on node2; sets TA (node1's) and TB (node2's)
#   retry_scenario LAB TAG WINDOW URL [LINE...]
#                            for the client-retry tests (events.sh sourced): LAB/TAG.conf from
#                            LAB/ferry.conf on a catalog of its own, events_conf with passthrough
#                            URL, shard_timeout 5s, retry_window WINDOW and the [router] LINEs,
#                            ferry init, tenants_on_two,
#                            a router started and listed in [cluster] routers; sets RS_CONF, TA,
#                            TB, R_URL and R_PID
#   hold_write_open URL QUERY ROWS_FILE
#                            a client that sends the INSERT QUERY with the rows of ROWS_FILE as
#                            the first chunk of a body that never ends (the router routes them
#                            and keeps the write open); waits until they are sent; sets HOLD_PID
#                            (killed at exit; kill it to end the write, nothing sent to shards)

stop_pid() {
    local pid=$1 what=${2:-process}
    kill -TERM "$pid" 2>/dev/null || return 0
    # the sanitizer build's leak check makes the exit slow
    for _ in $(seq 1 300); do pid_running "$pid" || return 0; sleep 0.1; done
    fail "$what $pid did not stop within 30 s of SIGTERM"
}

stop_router() { stop_pid "$1" router; }

start_router() {
    local conf=$1 name=$2
    bg_start "$T/$name.log" "$FERRY_BIN" router --config "$conf" --listen 127.0.0.1:0 \
        --port-file "$T/$name.port"
    R_PID=$BG_PID
    wait_for 60 test -s "$T/$name.port"
    R_URL=http://127.0.0.1:$(cat "$T/$name.port")
    wait_for 60 curl -sf "$R_URL/ping"
}

tenants_on_two() {
    local conf=$1 tag=$2 i x
    TA="" TB=""
    for i in $(seq 1 60); do
        x=$tag$i
        "$FERRY_BIN" tenant add "$x" --config "$conf" >/dev/null || fail "tenant add $x"
        case "$("$FERRY_BIN" route --tenant "$x" --json --config "$conf" | jq -r '.slices[0].shards[0]')" in
        node1) [ -n "$TA" ] || TA=$x ;;
        node2) [ -n "$TB" ] || TB=$x ;;
        esac
        [ -n "$TA" ] && [ -n "$TB" ] && return 0
    done
    fail "no tenants on node1 and node2 ($tag)"
}

retry_scenario() {
    local lab=$1 tag=$2 window=$3 url=$4
    shift 4
    RS_CONF=$lab/$tag.conf
    cp "$lab/ferry.conf" "$RS_CONF"
    sed -i "s#^catalog = .*#catalog = sqlite:$lab/$tag.db#" "$RS_CONF"
    events_conf "$RS_CONF" "passthrough = $url" "shard_timeout = 5s" "retry_window = $window" "$@"
    "$FERRY_BIN" init --config "$RS_CONF" >/dev/null || fail "init ($tag)"
    tenants_on_two "$RS_CONF" "$tag"
    start_router "$RS_CONF" "router-$tag"
    sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $R_URL#" "$RS_CONF"
}

hold_write_open() {
    local url=$1 query=$2 rows=$3 sent
    sent=$(mktemp "$T/hold.XXXXXX")
    python3 - "$url" "$query" "$rows" "$sent" <<'PY' &
import socket, sys, time, urllib.parse
url, q, rows, sent = sys.argv[1:5]
host, port = url.split("//")[1].split(":")
s = socket.create_connection((host, int(port)))
body = open(rows, "rb").read()
s.sendall(("POST /?query=%s HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
           % (urllib.parse.quote(q), host)).encode())
s.sendall(b"%x\r\n%s\r\n" % (len(body), body))  # the rows; the body never ends
open(sent, "w").write("sent\n")
time.sleep(300)
PY
    HOLD_PID=$!
    _H_PIDS+=("$HOLD_PID")
    wait_for 30 test -s "$sent" || fail "hold_write_open: the client did not send its rows to $url"
}
