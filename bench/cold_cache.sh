#!/usr/bin/env bash
# Scans of the blog tenant's cold days over object storage with real latency: s3rver behind
# bench/delay_proxy.py (every request held DELAY_MS), a 2-node lab without and with
# `--cold-cache`. The tenant (acme, 5 days of ROWS_PER_DAY rows) is tiered by ferry; then one
# scan (per day: rows, sum, distinct users) is timed first (nothing cached: the server's
# mark cache and filesystem cache dropped) and repeated (3 times, the median), with the
# requests that reached the store; then the tenant is moved to node2 with `ferry move` and the
# scans are timed there (the target's cache is cold), and, with the cache, the tenant is moved
# back with `ferry move --warm-cache` (docs/moves.md) and the first scan there is timed. One
# JSON line per variant, then the load average.
#   bash bench/cold_cache.sh [BUILD_DIR] [DELAY_MS] [ROWS_PER_DAY]   (build-release, 20, 400000)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
delay=${2:-20}
per=${3:-400000}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh
source tests/lib/s3rver.sh

BUCKET=bench
s3rver_start "$T/s3" "$BUCKET" || fail "s3rver did not start"
PPORT=$(free_port)
bg_start "$T/proxy.log" python3 bench/delay_proxy.py --port "$PPORT" --upstream "$S3RVER_ENDPOINT" --delay-ms "$delay"
wait_for 30 grep -q listening "$T/proxy.log" || fail "delay proxy did not start: $(cat "$T/proxy.log")"
PROXY=http://127.0.0.1:$PPORT
printf 'S3RVER\n' >"$T/ak"; printf 'S3RVER\n' >"$T/sk"; chmod 600 "$T/sk"

SCAN="SELECT day, count(), sum(v), uniqExact(user) FROM events WHERE tenant = 'acme' GROUP BY day ORDER BY day"
reqs() { curl -sS "$PROXY/__delay/status" | jq .requests; }
# timed URL: the scan's wall time in ms; the answer must be the expected one
timed() {
    local t0 t1 out
    t0=$(date +%s%N)
    out=$(chq "$1" "$SCAN" --max-time 600)
    t1=$(date +%s%N)
    [ "$out" = "$WANT" ] || fail "wrong answer from $1: $out"
    echo $(( (t1 - t0) / 1000000 ))
}
drop() { # URL: nothing cached in the server (marks, the filesystem cache when there is one)
    chq "$1" "SYSTEM DROP MARK CACHE" >/dev/null
    chq "$1" "SYSTEM DROP FILESYSTEM CACHE" >/dev/null 2>&1 || true
}
first() { # URL: "ms requests"
    local r0 ms; drop "$1"; r0=$(reqs); ms=$(timed "$1"); echo "$ms $(( $(reqs) - r0 ))"
}
repeated() { # URL: "median_ms requests_of_the_three"
    local r0 a b c; r0=$(reqs)
    a=$(timed "$1"); b=$(timed "$1"); c=$(timed "$1")
    echo "$(printf '%s\n' "$a" "$b" "$c" | sort -n | sed -n 2p) $(( $(reqs) - r0 ))"
}

run() { # run NAME [lab up args...]
    local name=$1; shift
    local L=$T/$name
    lab_up "$L" --nodes 2 --object-store s3 --s3-endpoint "$PROXY" --s3-bucket "$BUCKET" \
        --s3-access-key-file "$T/ak" --s3-secret-key-file "$T/sk" --s3-prefix "$name/" "$@"
    mv_conf "$L"
    local U1 U2 u
    U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
    for u in "$U1" "$U2"; do chq "$u" "$MV_DDL" >/dev/null; done
    "$FERRY_BIN" init --config "$L/mv.conf" >/dev/null || fail "ferry init failed"
    mv_ingest "$U1" acme 0 5 "$per"
    chq "$U1" "OPTIMIZE TABLE events FINAL" --max-time 600 >/dev/null
    WANT=$(chq "$U1" "$SCAN")
    "$FERRY_BIN" tier --config "$L/mv.conf" --older-than 1d --json >"$T/$name.tier" 2>"$T/$name.tier.err" ||
        fail "tier: $(tail -3 "$T/$name.tier.err")"
    [ "$(jq .partitions_tiered "$T/$name.tier")" = 5 ] || fail "tier: $(cat "$T/$name.tier")"
    local bytes f r f2 r2 w=null f3=null t0 t1 mv_ms
    bytes=$(chq "$U1" "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'events'")
    f=$(first "$U1"); r=$(repeated "$U1")
    "$FERRY_BIN" rebalance --config "$L/mv.conf" --dry-run >/dev/null
    t0=$(date +%s%N)
    "$FERRY_BIN" move --config "$L/mv.conf" --tenant acme --split 0 --to node2 --grace 0 --json \
        >"$T/$name.move" 2>"$T/$name.move.err" || fail "move: $(tail -3 "$T/$name.move.err")"
    t1=$(date +%s%N); mv_ms=$(( (t1 - t0) / 1000000 ))
    # the target's first scan: nothing of acme was ever read there
    local r0; r0=$(reqs); f2="$(timed "$U2") $(( $(reqs) - r0 ))"
    r2=$(repeated "$U2")
    if [ "$name" = cache ]; then
        # back to node1 with `ferry move --warm-cache`, node1's cache dropped first (it still
        # holds acme's objects from the first scans): the hot-list is node2's cache, read on
        # node1 after the switch; then node1's first user scan
        drop "$U1"
        "$FERRY_BIN" move --config "$L/mv.conf" --tenant acme --split 0 --to node1 --grace 0 \
            --warm-cache --json >"$T/$name.move2" 2>"$T/$name.move2.err" || fail "move --warm-cache: $(tail -3 "$T/$name.move2.err")"
        w=$(jq -c 'select(.event == "cache_warm") | {ms: (.ms | floor), partitions, columns, read_from_store_bytes}' "$T/$name.move2")
        r0=$(reqs); f3="$(timed "$U1") $(( $(reqs) - r0 ))"
        f3="{\"ms\": ${f3% *}, \"requests\": ${f3#* }}"
    fi
    printf '{"bench": "cold_cache", "variant": "%s", "delay_ms": %s, "rows": %s, "cold_bytes": %s, "first": {"ms": %s, "requests": %s}, "repeated": {"ms": %s, "requests_3_scans": %s}, "move_ms": %s, "after_move_first": {"ms": %s, "requests": %s}, "after_move_repeated": {"ms": %s, "requests_3_scans": %s}, "warm_cache": %s, "after_warm_move_first": %s}\n' \
        "$name" "$delay" "$((5 * per))" "$bytes" ${f% *} ${f#* } ${r% *} ${r#* } "$mv_ms" ${f2% *} ${f2#* } ${r2% *} ${r2#* } "$w" "$f3"
    "$FERRY_BIN" lab down --dir "$L" >/dev/null
}

run nocache
run cache --cold-cache 1G
echo "{\"bench\": \"cold_cache\", \"loadavg\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"nproc\": $(nproc)}"
