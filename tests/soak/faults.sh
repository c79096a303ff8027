# The soak's fault injector (sourced by tests/soak/soak.sh; runs in a background subshell whose
# RANDOM is seeded). Until $T/stop-faults exists: a pause of 5-19 s, then one fault, held for a
# while and undone before the next. Every fault is a line "fault KIND DETAIL" in $EV. Before each
# fault it checks that nothing it did not kill has died ("crash NAME" in $EV, then restarted):
# an unexpected exit is a finding.
#
#   kill_node    kill -9 of a lab node (its ClickHouse and its agent: one process), restarted
#                with `ferry lab up` 2-9 s later
#   kill_router  kill -9 of one of the two routers, restarted on its port 1-5 s later
#   kill_coord   kill -9 of the coordinator (tiering/repair/splits on schedule), restarted
#   kill_op      kill -9 of the running ferry rebalance / move / tier / repair of the ops loop
#   s3_down      the object store unreachable for 5-19 s (the chaos proxy resets connections)
#   s3_slow      every chunk to and from the object store delayed 100-499 ms, for 10-29 s
#   sigstop      SIGSTOP of a lab node for 15-34 s (the routers' shard_timeout is 10 s), SIGCONT
#   disk_full    node4's file system filled to 256 KB free for 10-24 s (when loop-mounted)
#   zk_stop      ZooKeeper stopped for 3-12 s (SOAK_CATALOG=zk)

FAULT_KINDS=(kill_node kill_router kill_coord kill_op s3_down s3_slow sigstop)
[ "$DISKFULL" = loop ] && FAULT_KINDS+=(disk_full)
[ "$SOAK_CATALOG" = zk ] && FAULT_KINDS+=(zk_stop zk_stop)

lab_up_retry() {
    local k
    for k in 1 2 3 4 5; do
        "$FERRY_BIN" lab up --dir "$L" --timeout 120 >>"$T/logs/lab_up.log" 2>&1 && return 0
        sleep 3
    done
    ev problem "lab up failed 5 times"
    return 1
}

zk_up() {
    [ "$SOAK_CATALOG" = zk ] || return 0
    proc_alive zk && return 0
    proc_start zk $ZK_CMD
    wait_for 60 zk_ruok || ev problem "ZooKeeper did not come back"
}

# check_alive: restarts (and reports) what died without the injector.
check_alive() {
    local k n
    for k in 1 2; do
        proc_alive "router$k" || { ev crash "router$k"; router_up "$k" || ev problem "router$k did not restart"; }
    done
    if [ ! -e "$T/coord.stopped" ] && ! proc_alive coordinator; then
        # a coordinator that lost its lease (ZooKeeper stopped longer than it waits for its
        # session) exits on purpose for its supervisor to restart it: not a crash
        if tail -n +"$(cat "$T/coord.logline" 2>/dev/null || echo 1)" "$T/logs/coordinator.log" |
            grep -q 'lost the coordinator lease; exiting'; then
            ev restart "coordinator (lease lost)"
        else
            ev crash coordinator
        fi
        coord_up || ev problem "coordinator did not restart"
    fi
    for n in $NODES; do
        if [ "$(lab_alive "$L" "$n")" != true ]; then
            ev crash "$n"
            lab_up_retry
        fi
    done
    if [ "$SOAK_CATALOG" = zk ] && ! proc_alive zk; then ev crash zk; zk_up; fi
}

rand_node() { echo "node$((1 + RANDOM % 4))"; }

fault_one() {
    local kind=$1 n p k d
    case $kind in
    kill_node)
        n=$(rand_node); p=$(lab_pid "$L" "$n")
        ev fault "kill_node $n"
        kill -KILL "$p"
        sleep $((2 + RANDOM % 8))
        lab_up_retry ;;
    kill_router)
        k=$((1 + RANDOM % 2))
        ev fault "kill_router router$k"
        proc_kill9 "router$k"
        sleep $((1 + RANDOM % 5))
        router_up "$k" || ev problem "router$k did not restart" ;;
    kill_coord)
        ev fault "kill_coord coordinator"
        proc_kill9 coordinator
        sleep $((1 + RANDOM % 5))
        coord_up || ev problem "coordinator did not restart" ;;
    kill_op)
        # the ops loop pauses between operations: wait for the next one (at most 20 s)
        d=$((1 + RANDOM % 20)) # seconds into the operation
        for _ in $(seq 1 200); do proc_alive op && break; sleep 0.1; done
        sleep $((d / 4))
        if proc_alive op; then
            ev fault "kill_op $(cat "$T/op.what" 2>/dev/null)"
            proc_kill9 op
        else
            ev skipped "kill_op (no operation running)"
        fi ;;
    s3_down)
        d=$((5 + RANDOM % 15))
        ev fault "s3_down ${d}s"
        echo down >"$CHAOS_MODE"; sleep "$d"; echo normal >"$CHAOS_MODE" ;;
    s3_slow)
        d=$((10 + RANDOM % 20)); k=$((100 + RANDOM % 400))
        ev fault "s3_slow ${d}s ${k}ms"
        echo "slow $k" >"$CHAOS_MODE"; sleep "$d"; echo normal >"$CHAOS_MODE" ;;
    sigstop)
        n=$(rand_node); p=$(lab_pid "$L" "$n"); d=$((15 + RANDOM % 20))
        ev fault "sigstop $n ${d}s"
        kill -STOP "$p"; sleep "$d"; kill -CONT "$p" ;;
    disk_full)
        d=$((10 + RANDOM % 15))
        local avail filled=0 try
        # the node writes meanwhile: what was free a moment ago may not be any more, so a
        # failed fill is tried again with what is free then (a harness race, not ferry's)
        for try in 1 2 3; do
            avail=$(df -B1 --output=avail "$MNT" | tail -1)
            if fallocate -l $((avail - 1048576)) "$MNT/soak-filler" 2>>"$T/logs/faults.log"; then
                filled=1; break
            fi
            rm -f "$MNT/soak-filler"
        done
        ev fault "disk_full node4 ${d}s (filled $((avail / 1048576)) MB)"
        [ "$filled" = 1 ] || ev problem "fallocate failed 3 times"
        sleep "$d"; rm -f "$MNT/soak-filler" ;;
    zk_stop)
        d=$((3 + RANDOM % 10))
        ev fault "zk_stop ${d}s"
        proc_stop zk; sleep "$d"; zk_up ;;
    esac
}

fault_loop() {
    set +e
    local kind
    while [ ! -e "$T/stop-faults" ]; do
        sleep $((5 + RANDOM % 15))
        [ -e "$T/stop-faults" ] && break
        check_alive
        kind=${FAULT_KINDS[RANDOM % ${#FAULT_KINDS[@]}]}
        echo "# $(date -u +%T) fault $kind"
        fault_one "$kind"
        # the clickhouse role's delete attempts so far: which fault window they appear in
        ev s3del "$kind $(s3policy_n clickhouse DELETE denied 2>/dev/null || echo '?')"
    done
}

# restore_all: the end of the faults, whatever state the injector left: store reachable, disk
# freed, every node running (SIGCONT, lab up), routers and ZooKeeper up.
restore_all() {
    local n p k
    echo normal >"$CHAOS_MODE"
    [ "$DISKFULL" != loop ] || rm -f "$MNT/soak-filler"
    for n in $NODES; do p=$(lab_pid "$L" "$n"); [ -z "$p" ] || kill -CONT "$p" 2>/dev/null || true; done # gone: lab_up_retry
    zk_up
    lab_up_retry
    for k in 1 2; do proc_alive "router$k" || { ev crash "router$k"; router_up "$k"; }; done
}
