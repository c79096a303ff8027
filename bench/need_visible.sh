#!/usr/bin/env bash
# How long after a repair need is recorded another router stops reading the replica that missed
# writes, and how long after it is cleared it reads it again (bench/bench_need_visible.c), on
# SQLite and on a real ZooKeeper started here (tests/lib/zookeeper.sh). A cluster of 3 shards
# (never contacted: the router reads only the catalog here), rf 2, TENANTS one-split tenants
# registered with `ferry tenant add`; ROUNDS slices each get a need recorded and cleared.
# JSON lines on stdout, each with the load average before it.
#   usage: bench/need_visible.sh [BUILD_DIR [TENANTS [BACKENDS [ROUNDS]]]]
#          default build-release 10000 "sqlite zk" 9
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build-release}
tenants=${2:-10000}
backends=${3:-sqlite zk}
rounds=${4:-9}
bench=$dir/bench/bench_need_visible
[ -x "$bench" ] || { echo "bench/need_visible.sh: $bench not built (make release)" >&2; exit 2; }
export FERRY_BIN=$dir/ferry FERRY_SOURCE_DIR=$here
source "$here/tests/lib/harness.sh"
source "$here/tests/lib/zookeeper.sh"

for b in $backends; do
    d=$T/$b
    mkdir -p "$d"
    if [ "$b" = zk ]; then
        ZK_XMX=${ZK_XMX:-1g} zk_start >&2
        url="zk://$ZK_HOSTPORT/need?timeout_ms=20000&wait_ms=120000"
    else
        url="sqlite:$d/c.db"
    fi
    {
        printf '[cluster]\nname = needs\ncatalog = %s\nrf = 2\n' "$url"
        for s in 1 2 3; do
            printf '[shard "s%d"]\nreplicas = http://127.0.0.1:1\nagent = http://127.0.0.1:1\n' "$s"
        done
        printf '[table "events"]\ndatabase = default\nlayout = shared\ntenant_column = tenant\n'
        printf 'split_column = split\nday_column = day\n'
        printf '[router]\nlisten = 127.0.0.1:0\npassthrough = http://127.0.0.1:1\n'
    } >"$d/ferry.conf"
    "$FERRY_BIN" init --config "$d/ferry.conf" >/dev/null
    for ((t = 0; t < tenants; t += 10000)); do
        n=$((tenants - t < 10000 ? tenants - t : 10000))
        # shellcheck disable=SC2046
        "$FERRY_BIN" tenant add --config "$d/ferry.conf" $(seq -f 'n%07g' "$t" $((t + n - 1))) >/dev/null
    done
    echo "{\"run\":\"$b-$tenants\",\"load_average\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
    "$bench" "$d/ferry.conf" "$url" "$rounds" 2>"$d/bench.err"
    echo "{\"run\":\"$b-$tenants-end\",\"load_average\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
    if [ "$b" = zk ]; then zk_stop; fi
done
