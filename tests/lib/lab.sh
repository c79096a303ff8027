# Shell helpers for tests that run a ferry lab (source after harness.sh). Every lab started
# with lab_up is stopped at exit (ferry lab down, then a check by PID that nothing is left).
_LAB_DIRS=()

# lab_up DIR ARGS...: ferry lab up --dir DIR ARGS... (fails the test when it fails).
lab_up() {
    local dir=$1; shift
    _LAB_DIRS+=("$dir")
    "$FERRY_BIN" lab up --dir "$dir" --timeout 90 "$@" >"$T/lab_up.out" 2>"$T/lab_up.err" ||
        fail "lab up $dir failed: $(cat "$T/lab_up.err")"
}

# lab_rf_conf DIR RF OUT: writes to OUT the lab's ferry.conf with `rf = RF` in its [cluster]
# section (a cluster-wide replication factor for `ferry init`).
lab_rf_conf() {
    sed "s/^clickhouse_version = /rf = $2\nclickhouse_version = /" "$1/ferry.conf" >"$3"
    grep -q "^rf = $2\$" "$3" || fail "lab_rf_conf: no clickhouse_version line in $1/ferry.conf"
}

# lab_url DIR NAME: the node's HTTP URL.
lab_url() { "$FERRY_BIN" lab status --dir "$1" --json | jq -r --arg n "$2" '.nodes[] | select(.name == $n) | .http'; }
# lab_pid DIR NAME: the node's PID.
lab_pid() { "$FERRY_BIN" lab status --dir "$1" --json | jq -r --arg n "$2" '.nodes[] | select(.name == $n) | .pid'; }
lab_alive() { "$FERRY_BIN" lab status --dir "$1" --json | jq -r --arg n "$2" '.nodes[] | select(.name == $n) | .alive'; }

# chq URL SQL [CURL ARGS...]: runs SQL (POST body), prints the result, fails on non-200.
chq() {
    local url=$1 sql=$2; shift 2
    local out
    out=$(curl -sS --max-time 120 -w '\n%{http_code}' "$url/" --data-binary "$sql" "$@") ||
        fail "curl failed for: $sql"
    local code=${out##*$'\n'}
    [ "$code" = 200 ] || fail "query '$sql' gave HTTP $code: ${out%$'\n'*}"
    printf '%s' "${out%$'\n'*}"
}

# outdated_parts URL TABLE...: the outdated parts of TABLEs that still hold rows, one per line,
# with why ClickHouse keeps each (system.parts.removal_state); empty when there are none.
outdated_parts() {
    local u=$1; shift
    local list
    list=$(printf "'%s'," "$@")
    chq "$u" "SELECT table, name, disk_name, refcount, removal_state FROM system.parts
        WHERE NOT active AND rows > 0 AND database = currentDatabase() AND table IN (${list%,})"
}

# outdated_left "URL..." TABLE...: the outdated parts of TABLEs with rows on every URL (listed)
outdated_left() {
    local u
    for u in $1; do outdated_parts "$u" "${@:2}"; done
}

# wait_outdated_gone "URL..." TABLE...: waits until ClickHouse has removed the outdated parts of
# TABLEs on every URL (those a swap, a rewrite or a move's source left), failing the test with
# each left part and why ClickHouse keeps it. ClickHouse 26.7 runs a table's cleanup on an
# adaptive delay, up to max_cleanup_delay_period (300 s) when the table is idle, and a table's
# shutdown (DETACH TABLE) does not remove them: tables that must see their old parts go soon set
# old_parts_lifetime, cleanup_delay_period and max_cleanup_delay_period to 1.
wait_outdated_gone() {
    _outdated_none() { [ -z "$(outdated_left "$@")" ]; }
    wait_for 120 _outdated_none "$@" ||
        fail "ClickHouse did not remove the outdated parts within 120 s: $(outdated_left "$@" | head -8)"
}

# lab_pids DIR: the PIDs of the lab's live nodes.
lab_pids() { "$FERRY_BIN" lab status --dir "$1" --json | jq -r '.nodes[] | select(.alive) | .pid'; }

_lab_cleanup() {
    local d pid
    for d in "${_LAB_DIRS[@]:-}"; do
        [ -n "$d" ] && [ -f "$d/lab.json" ] || continue
        local pids
        pids=$(jq -r '.nodes[].pid' "$d/lab.json" 2>/dev/null || true)
        "$FERRY_BIN" lab down --dir "$d" >/dev/null 2>&1 || true
        for pid in $pids; do
            [ "$pid" -gt 0 ] 2>/dev/null || continue
            if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$d/"; then
                echo "lab.sh: node $pid of $d still running after lab down; killing it" >&2
                kill -KILL "$pid" 2>/dev/null || true
            fi
        done
    done
}
at_exit _lab_cleanup

# pid_running PID: true when PID exists and is not a zombie (nodes outlive the `ferry lab up`
# that forked them, and a container's init may not reap them).
pid_running() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
