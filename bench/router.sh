#!/usr/bin/env bash
# Runs bench_router: a 1-node lab (so the router and the direct inserts reach the same single
# server), the managed table with a deduplication window, 5 tenants (2 splits each: 30 partitions per large batch, under max_partitions_per_insert_block), and a router; then direct
# vs routed TabSeparated inserts of ~1 KB and ~10 MB batches, through a router without and one with
# a retry journal. Usage: bench/router.sh [BUILD_DIR]
# [SECONDS_PER_CASE] (default build-release, made by `make release`; 10 s).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build-release}
secs=${2:-10}
bench=$dir/bench/bench_router
ferry=$dir/ferry
[ -x "$bench" ] && [ -x "$ferry" ] || { echo "bench/router.sh: build $dir first (make release)" >&2; exit 2; }
export FERRY_BIN=$ferry FERRY_SOURCE_DIR=$here
source "$here/tests/lib/harness.sh"
source "$here/tests/lib/lab.sh"
lab_up "$T/lab" --nodes 1
conf=$T/lab/ferry.conf
url=$(lab_url "$T/lab" node1)
printf '[table "events"]\nsplit_key = uid\n[router]\nauth = none\npassthrough = %s\n' "$url" >>"$conf"
"$ferry" init --config "$conf" >/dev/null
chq "$url" "CREATE TABLE events (tenant String, day UInt32, split UInt16, uid UInt64, id UInt64, v String)
    ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY id
    SETTINGS non_replicated_deduplication_window = 1000" >/dev/null
"$ferry" tenant add $(seq 0 4 | sed 's/^/t/') --splits 2 --config "$conf" >/dev/null
# Two routers side by side: without and with a retry journal ([router] retry_journal: a write()
# per slice a request touches and one at its end). Each case runs twice, alternating; each line
# is bench_router's JSON with the router's CPU seconds (user + system, /proc) over the run.
bg_start "$T/router.log" "$ferry" router --config "$conf" --listen 127.0.0.1:0 --port-file "$T/port"
plain_pid=$BG_PID
bg_start "$T/router-j.log" "$ferry" router --config "$conf" --listen 127.0.0.1:0 \
    --port-file "$T/port-j" --retry-journal "$T/retries"
journal_pid=$BG_PID
wait_for 20 test -s "$T/port"
wait_for 20 test -s "$T/port-j"
cpu_s() { awk '{printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/$1/stat"; }
for round in 1 2; do
    for side in plain journal; do
        if [ $side = plain ]; then pid=$plain_pid port=$(cat "$T/port"); else pid=$journal_pid port=$(cat "$T/port-j"); fi
        c0=$(cpu_s "$pid")
        out=$("$bench" "http://127.0.0.1:$port" "$url" 5 "$secs")
        c1=$(cpu_s "$pid")
        echo "{\"router\":\"$side\",\"round\":$round,\"router_cpu_s\":$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.2f", b - a}'),\"run\":$out}"
    done
done
