#!/usr/bin/env bash
# The scale benchmark (bench/bench_scale.c) against SQLite and a real ZooKeeper started here
# (tests/lib/zookeeper.sh, with a heap for a million slices), at TENANTS tenants in the mix of
# bench_scale (10 slices per tenant), then 10,000 tenants in that mix, then 10,000 tenants of one
# split each (`ferry tenant add`'s default, the size of the earlier measurements); with BASELINE=/path/to/an/older/ferry, that binary registers the same
# 10,000 tenants and runs the same dry run side by side. JSON lines on stdout, one per phase,
# each with the backend and the load average before it. On ZooKeeper the big run does only what
# does not read every record (ZK_BIG_PHASES): at a million slices each full read takes 15-30 s
# since scans read by multiRead (minutes before), and the sync of `ferry shard add` writes every
# slice's size; bench_plan_scan and bench_router_load measure those reads on the catalog left
# behind (docs/benchmarks.md, "ZooKeeper at a million slices"); the 10,000-tenant runs do every
# phase.
# PHASES=a,b,... runs those phases in the big run (and SMALL_PHASES in the 10,000-tenant runs,
# "none" to skip them), e.g. PHASES=register,dry_run,plan,status SMALL_PHASES=none.
# BENCH_WRAP="perf record -g -o FILE" runs each bench_scale under that command.
#   usage: bench/scale.sh [BUILD_DIR [TENANTS [BACKENDS]]]   default build-release 100000 "sqlite zk"
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build-release}
tenants=${2:-100000}
backends=${3:-sqlite zk}
bench=$dir/bench/bench_scale
[ -x "$bench" ] || { echo "bench/scale.sh: $bench not built (make release)" >&2; exit 2; }
export FERRY_BIN=$dir/ferry FERRY_SOURCE_DIR=$here
source "$here/tests/lib/harness.sh"
source "$here/tests/lib/zookeeper.sh"

# run NAME CATALOG FERRY TENANTS PHASES MIX: one bench_scale run, each line tagged
run() {
    local name=$1 url=$2 bin=$3 n=$4 phases=$5 mix=$6
    echo "{\"run\":\"$name\",\"load_average\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"ferry\":\"$bin\"}"
    ${BENCH_WRAP:-} "$bench" "$T/$name" "$url" "$bin" "$n" "$phases" "$mix" 2>"$T/$name.err" |
        sed -u "s/^{/{\"run\":\"$name\",/"
}

all=register,one_more,raise,split_manager,size,router,dry_run,plan,capacity,status
small=register,one_more,raise,router,dry_run,plan,status
for b in $backends; do
    if [ "$b" = zk ]; then
        ZK_XMX=${ZK_XMX:-3g} zk_start >&2
        url() { echo "zk://$ZK_HOSTPORT/$1?timeout_ms=20000&wait_ms=120000"; }
    else
        url() { echo "sqlite:$T/$1/c.db"; }
    fi
    phases=${PHASES:-$all}
    if [ "$b" = zk ]; then phases=${ZK_BIG_PHASES:-register,one_more,raise,split_manager,size}; fi
    run "$b-$tenants" "$(url "$b-$tenants")" "$FERRY_BIN" "$tenants" "$phases" mix
    if [ "${SMALL_PHASES:-}" = none ]; then
        [ "$b" = zk ] && zk_stop
        continue
    fi
    run "$b-10000" "$(url "$b-10000")" "$FERRY_BIN" 10000 "${SMALL_PHASES:-$all}" mix
    run "$b-10000-one" "$(url "$b-10000-one")" "$FERRY_BIN" 10000 "${SMALL_PHASES:-$small}" one
    if [ -n "${BASELINE:-}" ]; then
        run "$b-10000-one-baseline" "$(url "$b-10000-one-baseline")" "$BASELINE" 10000 \
            register,one_more,dry_run one
    fi
    if [ "$b" = zk ]; then zk_stop; fi
done
