#!/usr/bin/env bash
# The reads of every record on a ZooKeeper catalog at scale (docs/benchmarks.md, "ZooKeeper at a
# million slices", "ZooKeeper: a tenant's slices and routes in one document each"): starts
# ZooKeeper (tests/lib/zookeeper.sh, 3 GB heap), registers TENANTS tenants in bench_scale's mix
# (10 slices per tenant on average, 100 shards) with the `ferry` of BUILD_DIR (and times one
# tenant more and a split raise), then on that catalog: bench_plan_scan (the scan of every slice
# and route, the plan's view, the plan, the cluster status; once each) and bench_router_load (a
# router's first load, routing changes, a full reload). With BEFORE_DIR (an older release
# build's bench/ directory, e.g. main's) the older build does the same first, on a catalog and a
# ZooKeeper of its own: catalogs of the older layout (a znode per slice and route) and of tenant
# documents are not readable by the other build. When BUILD_DIR has bench_zk_floor, it follows
# bench_plan_scan: the bare read of the documents a plan reads (no parsing) next to the plan and
# the status, each with ZooKeeper's CPU. JSON lines on stdout, each step preceded by the time,
# the load average and ZooKeeper's CPU so far.
#   usage: bench/zk_reads.sh [BUILD_DIR [TENANTS [BEFORE_DIR]]]   default build-release 100000
#   ONLY_AFTER=1 skips BEFORE_DIR's side. FERRY_BENCH_PACKS=1: bench_zk_floor also reads compact
#   documents of every tenant's slices written beside the catalog (the floor of a layout not built).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build-release}
tenants=${2:-100000}
before=${3:-}
export FERRY_BIN=$dir/ferry FERRY_SOURCE_DIR=$here
source "$here/tests/lib/harness.sh"
source "$here/tests/lib/zookeeper.sh"

# the time, the load average and ZooKeeper's CPU so far (user + system seconds of the server's
# process: its cost per phase is the difference between two stamps, whatever the load)
stamp() {
    local zk_cpu=null
    if [ -n "${ZK_PID:-}" ] && [ -r "/proc/$ZK_PID/stat" ]; then
        zk_cpu=$(awk -v t="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t}' "/proc/$ZK_PID/stat")
    fi
    echo "{\"run\":\"$1\",\"utc\":\"$(date -u +%H:%M:%S)\",\"load_average\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"zk_cpu_s\":$zk_cpu}"
}
# side NAME BENCH_DIR FERRY: registration, the reads and the router on chroot NAME of a
# ZooKeeper of its own (its `mntr` counts are the catalog's alone)
side() {
    local name=$1 bench=$2 bin=$3
    ZK_XMX=${ZK_XMX:-3g} zk_start "$T/zk-$name" >&2
    local url="zk://$ZK_HOSTPORT/$name?timeout_ms=20000&wait_ms=120000"
    stamp "$name-register"
    "$bench/bench_scale" "$T/$name" "$url" "$bin" "$tenants" register,one_more,raise,size mix 2>"$T/$name-scale.err"
    stamp "$name-reads"
    "$bench/bench_plan_scan" "$url" 1 new 2>"$T/$name-scan.err"
    if [ -x "$bench/bench_zk_floor" ]; then # the bare read of the same documents (no parsing)
        stamp "$name-floor"
        "$bench/bench_zk_floor" "$url" 2 "$ZK_PID" 2>"$T/$name-floor.err"
    fi
    stamp "$name-router"
    "$bench/bench_router_load" "$T/$name/ferry.conf" "$url" 2>"$T/$name-router.err"
    stamp "$name-done"
    zk_stop
}
if [ -n "$before" ] && [ "${ONLY_AFTER:-}" != 1 ]; then
    side before "$before" "$before/../ferry"
fi
side after "$dir/bench" "$FERRY_BIN"
stamp end
