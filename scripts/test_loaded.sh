#!/usr/bin/env bash
# `make test-loaded`: the whole `make test` while CPU burners keep every core busy (issue 24: a
# suite that passes on a quiet machine must pass on a loaded one; its earlier silent and
# load-dependent failures showed only there). BURNERS busy loops (default: one per core) run at
# normal priority beside the tests and are stopped by PID when the tests end, however they end.
# Prints the load average at the start and the end, the wall time and the tests' exit status.
#   scripts/test_loaded.sh [make arguments...]    e.g. JOBS=2
set -u
burners=${BURNERS:-$(nproc 2>/dev/null || echo 2)}
case $burners in
'' | *[!0-9]*) echo "test_loaded: BURNERS='$burners' is not a number of busy loops" >&2; exit 2 ;;
esac
pids=()
stop_burners() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    pids=()
}
trap stop_burners EXIT
trap 'exit 130' INT TERM
# the build first, quiet: the load is meant for the tests, and a build under burners only waits
make deps build "$@" || exit $?
for _ in $(seq 1 "$burners"); do
    (exec bash -c 'while :; do :; done') &
    pids+=($!)
done
start=$(date +%s)
echo "test_loaded: $burners CPU burners (pids ${pids[*]}); load average $(cut -d' ' -f1-3 /proc/loadavg)"
make test "$@"
rc=$?
echo "test_loaded: make test exited $rc after $(($(date +%s) - start)) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
