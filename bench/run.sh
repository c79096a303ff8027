#!/usr/bin/env bash
# Runs every benchmark in BUILD_DIR (default build-release), one JSON document per line.
set -euo pipefail
dir=${1:-build-release}
for b in "$dir"/bench/bench_*; do
    [ -x "$b" ] || continue
    "$b"
done
