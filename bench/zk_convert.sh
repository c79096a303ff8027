#!/usr/bin/env bash
# Converting a ZooKeeper catalog of the older layout (a znode per slice and per route) to tenant
# documents in place (docs/catalog.md, "Tenant documents"): starts ZooKeeper (tests/lib/zookeeper.sh,
# 3 GB heap); an older release build (BEFORE_BUILD: its build directory, e.g. main's) registers
# TENANTS tenants in bench_scale's mix and exports the catalog; this build's `ferry` must refuse
# to open it, then converts it (`catalog export` with convert_layout=1 in the URL, timed with its
# CPU and ZooKeeper's) and exports it; the two dumps must be byte for byte the same, and so must a
# later export without the parameter. JSON lines and checks on stdout.
#   usage: bench/zk_convert.sh BEFORE_BUILD [BUILD_DIR [TENANTS]]   default build-release 10000
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
base=${1:?usage: bench/zk_convert.sh BEFORE_BUILD [BUILD_DIR [TENANTS]]}
dir=${2:-$here/build-release}
tenants=${3:-10000}
export FERRY_BIN=$dir/ferry FERRY_SOURCE_DIR=$here
source "$here/tests/lib/harness.sh"
source "$here/tests/lib/zookeeper.sh"

zk_cpu() { awk -v t="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t}' "/proc/$ZK_PID/stat"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
ZK_XMX=${ZK_XMX:-3g} zk_start "$T/zk" >&2
url="zk://$ZK_HOSTPORT/conv?timeout_ms=20000&wait_ms=120000"
"$base/bench/bench_scale" "$T/cat" "$url" "$base/ferry" "$tenants" register,size mix 2>"$T/scale.err"
"$base/ferry" catalog export --catalog "$url" >"$T/old.json"
if "$FERRY_BIN" catalog export --catalog "$url" >/dev/null 2>"$T/refused"; then
    echo "FAIL: this ferry opened a catalog of the older layout" >&2
    exit 1
fi
echo "{\"refused\":$(jq -Rs . <"$T/refused")}"
cpu0=$(zk_cpu)
echo "{\"run\":\"convert\",\"utc\":\"$(date -u +%H:%M:%S)\",\"load_average\":\"$(load)\"}"
/usr/bin/time -f '{"convert_and_export_wall_s":%e,"ferry_cpu_user_s":%U,"ferry_cpu_sys_s":%S}' \
    "$FERRY_BIN" catalog export --catalog "$url&convert_layout=1" >"$T/new.json" 2>"$T/convert.err"
tail -n 1 "$T/convert.err"
echo "{\"tenants\":$tenants,\"zk_cpu_s\":$(echo "$(zk_cpu) - $cpu0" | bc),\"load_average\":\"$(load)\"}"
cmp "$T/old.json" "$T/new.json" || { echo "FAIL: the dumps differ" >&2; exit 1; }
"$FERRY_BIN" catalog export --catalog "$url" >"$T/again.json"
cmp "$T/old.json" "$T/again.json" || { echo "FAIL: a later export differs" >&2; exit 1; }
echo "{\"dumps_identical\":true,\"dump_bytes\":$(wc -c <"$T/new.json")}"
printf mntr | timeout 5 bash -c "exec 9<>/dev/tcp/127.0.0.1/$ZK_PORT; cat >&9; cat <&9" |
    awk '$1 == "zk_znode_count" || $1 == "zk_approximate_data_size" {printf "{\"%s\":%s}\n", $1, $2}'
zk_stop
