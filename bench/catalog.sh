#!/usr/bin/env bash
# Runs bench_catalog against SQLite and a real ZooKeeper started here (tests/lib/zookeeper.sh) on a
# free loopback port; stops it afterwards. Usage: bench/catalog.sh [BUILD_DIR] (default
# build-release, made by `make release`).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build-release}
bench=$dir/bench/bench_catalog
[ -x "$bench" ] || { echo "bench/catalog.sh: $bench not built (make release)" >&2; exit 2; }
export FERRY_BIN=$bench FERRY_SOURCE_DIR=$here
source "$here/tests/lib/harness.sh"
source "$here/tests/lib/zookeeper.sh"
zk_start >&2
FERRY_BENCH_ZK="zk://$ZK_HOSTPORT" "$bench"
zk_stop
