# Shared helpers for ferry's shell tests. Source it first; it sets `set -euo pipefail`, makes a
# private temporary directory ($T), and on exit stops every process started with `bg_start`
# (by PID, then its process group) and removes $T unless FERRY_KEEP_TMP=1 (or FERRY_KEEP_FAILED=1
# and the test failed). A test never fails silently: any command that fails outside a condition
# is named with its line, any non-zero exit is reported, and the last lines of every log under
# $T (lab nodes, agents, routers) are printed.
set -euo pipefail

: "${FERRY_BIN:?FERRY_BIN must point at build/ferry}"
: "${FERRY_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${FERRY_BUILD_DIR:=$(dirname "$FERRY_BIN")}"
export FERRY_CACHE=${FERRY_CACHE:-$HOME/.cache/ferry}
# leaks of libraries, never ferry's own (tests/lsan.supp says which and why)
case "${LSAN_OPTIONS:-}" in *lsan.supp*) ;; *)
    export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$FERRY_SOURCE_DIR/tests/lsan.supp:print_suppressions=0" ;;
esac

T=$(mktemp -d "${TMPDIR:-/tmp}/ferry-test.XXXXXX")
touch "$T/.started"
_H_PIDS=()
_H_AT_EXIT=()
_H_PASSED=0
_H_FAILED=0
_H_NAME=$(basename "$0" .sh)

# at_exit CMD...: runs CMD (eval'd) at exit, before the processes are stopped; the last
# registered runs first. Cleanup never stops half-way: errexit is off while it runs.
at_exit() { _H_AT_EXIT+=("$*"); }

# _h_dump_logs: the last lines of every log under $T (lab nodes, agents, routers, servers), so a
# failure seen only in CI can be diagnosed from its output.
_h_dump_logs() {
    local f n=0
    while IFS= read -r f; do
        [ -s "$f" ] || continue
        n=$((n + 1))
        [ "$n" -le 24 ] || { echo "# (more logs under $T)" >&2; break; }
        echo "# ---- last lines of ${f#"$T"/} ----" >&2
        # ClickHouse's own logs: its errors and warnings only, not its trace chatter nor the
        # background pool's pauses (they hide the lines that say what went wrong)
        case "$f" in
        */clickhouse.log | */clickhouse.err.log)
            grep -E '<(Error|Warning|Fatal)>' "$f" | grep -v 'Temporarily pause scheduling' | tail -n 10 ;;
        *) tail -n 15 "$f" ;;
        esac | cut -c1-400 | sed 's/^/#   /' >&2
    done < <(find "$T" -maxdepth 5 -type f \( -name '*.log' -o -name '*.err' \) -newer "$T/.started" 2>/dev/null | sort)
}

# A command that fails outside a condition (errexit) says which one and where, once, from the
# test's own shell; fail() says why itself.
_H_ERR_SEEN=0
_h_err() {
    local rc=$1 cmd=$2 where=$3
    # only where errexit is on: expect_exit and other `set +e` regions expect failures
    [[ $- == *e* ]] && [ "$BASH_SUBSHELL" -eq 0 ] && [ "$_H_ERR_SEEN" = 0 ] || return 0
    _H_ERR_SEEN=1
    echo "FAIL [$_H_NAME]: command failed with exit status $rc at $where: $cmd" >&2
}
set -E
trap '_h_err $? "$BASH_COMMAND" "${BASH_SOURCE[0]##*/}:$LINENO"' ERR

_h_cleanup() {
    local rc=$?
    set +e
    trap - ERR
    if [ "$rc" != 0 ]; then
        [ "$_H_ERR_SEEN" = 1 ] || [ "$_H_FAILED" != 0 ] ||
            echo "FAIL [$_H_NAME]: exited with status $rc" >&2
        _h_dump_logs
    fi
    local i
    for ((i = ${#_H_AT_EXIT[@]} - 1; i >= 0; i--)); do
        eval "${_H_AT_EXIT[i]}"
    done
    local pid
    for pid in "${_H_PIDS[@]:-}"; do
        [ -n "$pid" ] || continue
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${_H_PIDS[@]:-}"; do
        [ -n "$pid" ] || continue
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    if [ "${FERRY_KEEP_TMP:-0}" = 1 ] || { [ "$rc" != 0 ] && [ "${FERRY_KEEP_FAILED:-0}" = 1 ]; }; then
        echo "kept $T" >&2
    else
        [ "$rc" = 0 ] || echo "# FERRY_KEEP_FAILED=1 keeps the test's directory (logs, lab) when it fails" >&2
        rm -rf "$T"
    fi
    exit $rc
}
trap _h_cleanup EXIT
trap 'exit 130' INT TERM

# A TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
    python3 - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# bg_start LOGFILE CMD...: starts CMD in the background in its own session; sets BG_PID.
bg_start() {
    local log=$1; shift
    setsid "$@" >"$log" 2>&1 &
    BG_PID=$!
    _H_PIDS+=("$BG_PID")
}

# wait_for SECONDS CMD...: retries CMD every 0.1 s until it succeeds or time runs out.
wait_for() {
    local secs=$1; shift
    local deadline=$(( $(date +%s%N) + secs * 1000000000 ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s%N)" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# all_threads_stopped PID: every thread of PID is in state T (kill -STOP returns before they are)
all_threads_stopped() {
    local t
    [ -d "/proc/$1/task" ] || return 1
    for t in /proc/"$1"/task/*/stat; do
        [ "$(awk '{print $3}' "$t" 2>/dev/null)" = T ] || return 1
    done
}

fail() { echo "FAIL [$_H_NAME]: $*" >&2; _H_FAILED=$((_H_FAILED + 1)); exit 1; }
ok() { echo "ok - $*"; _H_PASSED=$((_H_PASSED + 1)); }

assert_eq() { # assert_eq EXPECTED ACTUAL MESSAGE
    [ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"
}
assert_contains() { # assert_contains HAYSTACK NEEDLE MESSAGE
    case "$1" in *"$2"*) ;; *) fail "$3: '$2' not found in: $1" ;; esac
}

# expect_exit CODE CMD...: runs CMD, captures stdout in $OUT and stderr in $ERR, checks the code.
expect_exit() {
    local want=$1; shift
    set +e
    "$@" >"$T/.out" 2>"$T/.err"
    local got=$?
    set -e
    OUT=$(cat "$T/.out"); ERR=$(cat "$T/.err")
    [ "$got" = "$want" ] || fail "'$*' exited $got, expected $want (stderr: $ERR) (stdout: $(tail -c 3000 "$T/.out"))"
}

# done_testing: prints the closing line CTest logs show.
done_testing() { echo "$_H_PASSED passed, $_H_FAILED failed"; }
