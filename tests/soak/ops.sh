# The soak's operations loop (sourced by tests/soak/soak.sh; runs in a background subshell whose
# RANDOM is seeded). Until $T/stop-ops exists it runs one ferry operation at a time, as an
# operator or cron would, with a pause of 2-8 s between them: a rebalance, a move of a random
# slice to a random shard outside its route, a tiering run, a repair, or an rf change of t4
# (1 <-> 2) followed by a rebalance. The running one is the process `op` (procs.sh), which
# the fault injector may kill -9. Each ends as one line "op NAME rc=N secs=S" in $EV; exit 1 is
# expected while a fault lasts (the operation says why and resumes on the next run), exit 137 is
# the injector's kill.

# op_run NAME ARGS...: ferry ARGS --config C as the process `op`; logs its outcome.
op_run() {
    local name=$1; shift
    local t0 rc=0
    t0=$(date +%s)
    echo "$name" >"$T/op.what"
    echo "# $(date -u +%T) op $name: ferry $*"
    proc_start op "$FERRY_BIN" "$@" --config "$C"
    wait "$(proc_pid op)" || rc=$?
    rm -f "$T/pids/op"
    ev op "$name rc=$rc secs=$(( $(date +%s) - t0 ))"
    echo "# $(date -u +%T) op $name rc=$rc"
}

# op_move: one slice of a random tenant to a shard outside its route (for a replicated slice,
# one of its replicas; --from names it).
op_move() {
    local tenants=(${TENANTS//,/ }) t line split shards from to cand=()
    t=${tenants[RANDOM % ${#tenants[@]}]}
    line=$("$FERRY_BIN" route --tenant "$t" --json --config "$C" 2>/dev/null |
        jq -r '.slices[] | "\(.split) \(.shards | join(","))"' | shuf -n 1 --random-source=<(yes "$RANDOM")) || return 0
    [ -n "$line" ] || return 0
    split=${line%% *}; shards=${line#* }
    local n
    for n in $NODES; do [[ ",$shards," == *",$n,"* ]] || cand+=("$n"); done
    [ ${#cand[@]} -gt 0 ] || return 0
    to=${cand[RANDOM % ${#cand[@]}]}
    from=${shards%%,*}
    if [[ $shards == *,* ]]; then
        local a=(${shards//,/ })
        from=${a[RANDOM % ${#a[@]}]}
        op_run move move --tenant "$t" --split "$split" --from "$from" --to "$to"
    else
        op_run move move --tenant "$t" --split "$split" --to "$to"
    fi
}

ops_loop() {
    set +e
    local rf4=1 r
    while [ ! -e "$T/stop-ops" ]; do
        r=$((RANDOM % 10))
        case $r in
        0 | 1 | 2) op_run rebalance rebalance --max-parallel 2 --json ;;
        3 | 4 | 5) op_move ;;
        6 | 7) op_run tier tier --older-than 3d --json ;;
        8) op_run repair repair --json ;;
        9) rf4=$((3 - rf4))
           op_run set_rf tenant set-rf t4 "$rf4"
           op_run rebalance rebalance --max-parallel 2 --json ;;
        esac
        sleep $((2 + RANDOM % 7))
    done
}
