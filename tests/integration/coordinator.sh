# `ferry coordinator` on SQLite and on a real ZooKeeper: one coordinator at a time (the second is
# refused while the first lives, and takes over once it is killed with -9), the routing table over
# HTTP with its version, filtered reads, long polls that wake on a routing switch and time out
# with 304 when nothing changes.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"
TOOL=$FERRY_BUILD_DIR/tests/tools/catalog_tool

write_config() { # write_config FILE CATALOG_URL
    cat >"$1" <<CFG
[cluster]
name = coordtest
catalog = $2
[shard "node1"]
replicas = http://127.0.0.1:1
[shard "node2"]
replicas = http://127.0.0.1:2
[table "events"]
layout = shared
CFG
}

start_coord() { # start_coord CONF NAME: sets CPID and CURL_BASE
    rm -f "$T/$2.port"
    bg_start "$T/$2.log" "$FERRY_BIN" coordinator --config "$1" --port-file "$T/$2.port"
    CPID=$BG_PID
    wait_for 30 test -s "$T/$2.port" || fail "coordinator $2 did not start: $(cat "$T/$2.log")"
    CURL_BASE=http://127.0.0.1:$(cat "$T/$2.port")
}

run_backend() { # run_backend NAME CATALOG_URL
    local name=$1 url=$2 conf=$T/$1.conf
    write_config "$conf" "$url"
    "$FERRY_BIN" init --config "$conf" >/dev/null
    "$TOOL" "$url" set-route acme 0 node1
    "$TOOL" "$url" set-route acme 1 node2
    "$TOOL" "$url" set-route beta 0 node2

    start_coord "$conf" "$name-a"
    local first=$CPID base=$CURL_BASE
    local body v
    body=$(curl -sS --max-time 5 "$base/routing")
    v=$(jq -r .version <<<"$body")
    assert_eq 3 "$(jq '.slices | length' <<<"$body")" "$name: three routes served"
    assert_eq '["node2"]' "$(jq -c '.slices[] | select(.tenant=="acme" and .split==1) | .shards' <<<"$body")" "$name: acme/1"
    assert_eq "$v" "$(curl -sS --max-time 5 -D - -o /dev/null "$base/routing" | tr -d '\r' | awk -F': ' '/X-Ferry-Routing-Version/ {print $2}')" "$name: version header"
    assert_eq 2 "$(curl -sS --max-time 5 "$base/routing?tenant=acme" | jq '.slices | length')" "$name: tenant filter"
    assert_eq 1 "$(curl -sS --max-time 5 "$base/routing?tenant=acme&split=0" | jq '.slices | length')" "$name: split filter"
    assert_eq 400 "$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$base/routing?split=x")" "$name: bad split"
    assert_eq true "$(curl -sS --max-time 5 "$base/health" | jq .lease)" "$name: health"
    ok "$name: routing table served with its version"

    # A second coordinator is refused while the first holds the lease.
    expect_exit 1 "$FERRY_BIN" coordinator --config "$conf"
    assert_contains "$ERR" "another coordinator is running" "$name: second coordinator refused"
    ok "$name: one coordinator at a time"

    # Long poll: unchanged -> 304 after the wait; a switch wakes it with the new version.
    local t0 code
    t0=$(date +%s%N)
    code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$base/routing?known=$v&wait=1")
    assert_eq 304 "$code" "$name: long poll without change"
    [ $(( ($(date +%s%N) - t0) / 1000000 )) -ge 900 ] || fail "$name: 304 came before the wait"
    curl -sS --max-time 20 "$base/routing?known=$v&wait=15" >"$T/$name.poll" &
    local poll=$!
    sleep 0.5
    t0=$(date +%s%N)
    "$TOOL" "$url" set-route acme 1 node1,node2
    wait $poll || fail "$name: long poll failed"
    local waited=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ "$waited" -lt 5000 ] || fail "$name: long poll took ${waited} ms to see the switch"
    assert_eq $((v + 1)) "$(jq .version "$T/$name.poll")" "$name: new version after the switch"
    assert_eq '["node1","node2"]' "$(jq -c '.slices[] | select(.tenant=="acme" and .split==1) | .shards' "$T/$name.poll")" "$name: switched route"
    ok "$name: long poll wakes on a routing switch (${waited} ms)"

    # kill -9: the lease goes with the process (flock / ephemeral node), a new one takes over.
    kill -KILL "$first"
    wait_for 30 bash -c "! kill -0 $first 2>/dev/null || grep -q '^State:.*Z' /proc/$first/status"
    local tries=0
    # A try counts once it serves (port file) - not merely once it lives 1.5 s: on a loaded
    # machine a refused one can take longer than that to exit.
    until "$FERRY_BIN" coordinator --config "$conf" --port-file "$T/$name-b.port" >"$T/$name-b.log" 2>&1 &
          BG=$!; _H_PIDS+=("$BG")
          wait_for 30 bash -c "test -s '$T/$name-b.port' || ! kill -0 $BG 2>/dev/null || grep -q '^State:.*Z' /proc/$BG/status"
          test -s "$T/$name-b.port"; do
        sleep 1
        tries=$((tries + 1)); [ $tries -lt 20 ] || fail "$name: no takeover after kill -9: $(cat "$T/$name-b.log")"
    done
    wait_for 60 test -s "$T/$name-b.port" || fail "$name: takeover coordinator not serving"
    assert_eq $((v + 1)) "$(curl -sS --max-time 5 "http://127.0.0.1:$(cat "$T/$name-b.port")/routing" | jq .version)" "$name: takeover serves the table"
    kill -TERM $BG; wait $BG || fail "$name: coordinator did not exit cleanly on SIGTERM"
    ok "$name: a coordinator killed with -9 loses the lease to the next (after $tries retries)"

    # The pause lives in the catalog (this backend): a coordinator's autopilot reads it there
    # and records its runs there; ferry status shows both; commands refuse without --force.
    "$FERRY_BIN" pause --config "$conf" --reason "$name maintenance" >/dev/null
    cp "$conf" "$T/$name-ap.conf"
    printf '[autopilot]\nrebalance_interval = 1s\n' >>"$T/$name-ap.conf"
    start_coord "$T/$name-ap.conf" "$name-ap"
    local ap=$CPID
    paused_run() {
        "$FERRY_BIN" status --config "$conf" --json | jq -e --arg r "$name maintenance" \
            '.autopilot.pause.paused and .autopilot.pause.reason == $r and
             ([.autopilot.runs[] | select(.action == "rebalance" and .result == "paused" and
                                          (.reason | contains($r)))] | length == 1)'
    }
    wait_for 30 paused_run || fail "$name: no paused rebalance run recorded: $("$FERRY_BIN" status --config "$conf" --json | jq -c .autopilot)"
    expect_exit 1 "$FERRY_BIN" rebalance --config "$conf"
    assert_contains "$ERR" "the cluster is paused" "$name: rebalance refused while paused"
    assert_contains "$ERR" "$name maintenance" "$name: the refusal gives the reason"
    "$FERRY_BIN" resume --config "$conf" >/dev/null
    resumed_run() {
        "$FERRY_BIN" status --config "$conf" --json | jq -e \
            '(.autopilot.pause.paused | not) and
             ([.autopilot.runs[] | select(.action == "rebalance" and .result != "paused")] |
              length == 1)'
    }
    wait_for 60 resumed_run || fail "$name: the autopilot did not run again after resume: $("$FERRY_BIN" status --config "$conf" --json | jq -c .autopilot)"
    assert_contains "$("$FERRY_BIN" resume --config "$conf")" "not paused" "$name: resume twice"
    kill -TERM $ap; wait $ap || fail "$name: the autopilot's coordinator did not exit cleanly"
    ok "$name: ferry pause / resume recorded in the catalog, obeyed and shown (autopilot runs recorded)"
}

run_backend sqlite "sqlite:$T/cat.db"

# Scheduled work intervals are checked before anything starts (FILE:LINE, exit 2).
write_config "$T/bad.conf" "sqlite:$T/bad.db"
sed -i 's/^\[cluster\]$/[cluster]\nsplits_interval = soon/' "$T/bad.conf"
expect_exit 2 "$FERRY_BIN" coordinator --config "$T/bad.conf"
assert_contains "$ERR" "bad.conf:2: [cluster] splits_interval = 'soon': expected a duration"
assert_eq "$OUT" "" "nothing on stdout"
ok "a bad splits_interval is refused with its file and line"

zk_start
run_backend zk "$(zk_url /coordtest)"
zk_stop
done_testing
