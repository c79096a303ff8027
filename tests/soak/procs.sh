# Named long-running processes of the soak (source after harness.sh and lab.sh). The fault
# injector kills and restarts them from a background subshell, so their PIDs live in files
# ($T/pids/NAME), not in the harness's list; every one still running is stopped at exit.
#   proc_start NAME CMD...   starts CMD in its own session, output appended to $T/logs/NAME.log
#   proc_pid NAME            its PID (empty when none was started)
#   proc_alive NAME          true while it runs
#   proc_kill9 NAME          kill -9 (the process and its session)
#   proc_stop NAME [SECS]    SIGTERM, then SIGKILL after SECS (default 30) seconds
#   proc_wait NAME SECS      waits for it to exit by itself (false on timeout)

proc_start() {
    local name=$1; shift
    setsid "$@" >>"$T/logs/$name.log" 2>&1 &
    echo $! >"$T/pids/$name"
}
proc_pid() { cat "$T/pids/$1" 2>/dev/null || true; }
proc_alive() { local p; p=$(proc_pid "$1"); [ -n "$p" ] && pid_running "$p"; }
proc_kill9() {
    local p; p=$(proc_pid "$1")
    [ -n "$p" ] || return 0
    kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
    for _ in $(seq 1 100); do pid_running "$p" || return 0; sleep 0.1; done
}
proc_stop() {
    local p; p=$(proc_pid "$1")
    [ -n "$p" ] || return 0
    kill -TERM "$p" 2>/dev/null || return 0
    for _ in $(seq 1 $((${2:-30} * 10))); do pid_running "$p" || return 0; sleep 0.1; done
    ev problem "$1 did not stop within ${2:-30} s of SIGTERM: killed"
    kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
}
proc_wait() {
    local p; p=$(proc_pid "$1")
    [ -n "$p" ] || return 0
    local deadline=$(( $(date +%s) + $2 ))
    while pid_running "$p"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.5
    done
}

_procs_cleanup() {
    local f p
    touch "$T/stop-faults" "$T/stop-ops" "$T/stop-writer" "$T/stop-reader" 2>/dev/null
    for f in "$T"/pids/*; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        [ -n "$p" ] || continue
        kill -CONT "$p" 2>/dev/null
        kill -TERM "$p" 2>/dev/null
    done
    for f in "$T"/pids/*; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        [ -n "$p" ] || continue
        for _ in $(seq 1 100); do pid_running "$p" || break; sleep 0.1; done
        kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
    done
}
at_exit _procs_cleanup
