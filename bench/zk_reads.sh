#!/usr/bin/env bash
# The reads of every record on a ZooKeeper catalog at scale (docs/benchmarks.md, "ZooKeeper at a
# million slices"): starts ZooKeeper (tests/lib/zookeeper.sh, 3 GB heap), registers TENANTS
# tenants in bench_scale's mix (10 slices per tenant on average, 100 shards) with the `ferry` of
# BUILD_DIR, then on that catalog: bench_plan_scan (the scan of every slice and route, the plan's
# view, the plan, the cluster status; once each) with BEFORE_DIR's build first when given (an
# older release build's bench/ directory, e.g. main's), then BUILD_DIR's, then BUILD_DIR's
# bench_router_load (a router's first load, routing changes, a full reload). JSON lines on
# stdout, each run preceded by the time and the load average.
#   usage: bench/zk_reads.sh [BUILD_DIR [TENANTS [BEFORE_DIR]]]   default build-release 100000
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build-release}
tenants=${2:-100000}
before=${3:-}
export FERRY_BIN=$dir/ferry FERRY_SOURCE_DIR=$here
source "$here/tests/lib/harness.sh"
source "$here/tests/lib/zookeeper.sh"

stamp() { echo "{\"run\":\"$1\",\"utc\":\"$(date -u +%H:%M:%S)\",\"load_average\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"; }
ZK_XMX=${ZK_XMX:-3g} zk_start >&2
url="zk://$ZK_HOSTPORT/reads?timeout_ms=20000&wait_ms=120000"
stamp register
"$dir/bench/bench_scale" "$T/reads" "$url" "$FERRY_BIN" "$tenants" register,size mix 2>"$T/scale.err"
if [ -n "$before" ]; then
    stamp before
    "$before/bench_plan_scan" "$url" 1 new 2>"$T/before.err"
fi
stamp after
"$dir/bench/bench_plan_scan" "$url" 1 new 2>"$T/after.err"
stamp router
"$dir/bench/bench_router_load" "$T/reads/ferry.conf" "$url" 2>"$T/router.err"
stamp end
zk_stop
