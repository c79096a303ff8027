#!/usr/bin/env bash
# Runs bench_router: a 1-node lab (so the router and the direct inserts reach the same single
# server), the managed table with a deduplication window, 5 tenants (2 splits each: 30 partitions per large batch, under max_partitions_per_insert_block), and a router; then direct
# vs routed TabSeparated inserts of ~1 KB and ~10 MB batches. Usage: bench/router.sh [BUILD_DIR]
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
bg_start "$T/router.log" "$ferry" router --config "$conf" --listen 127.0.0.1:0 --port-file "$T/port"
wait_for 20 test -s "$T/port"
"$bench" "http://127.0.0.1:$(cat "$T/port")" "$url" 5 "$secs"
