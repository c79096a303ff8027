# The chaos soak (issue 24; `make soak`, docs/reliability.md). A 4-node lab on the S3 object store
# (s3rver behind the enforcing policy proxy, behind a chaos proxy that can make it unreachable or
# slow), 12 tenants (t0..t3 with rf 2, t4's rf toggled by the operations, some with 2 splits),
# the coordinator tiering, repairing and splitting on short intervals, two routers, a writer
# (unique ids, every acknowledged batch logged) and a reader (rows of a day no one writes, checked
# against a reference; for t8..t11 that day's parts are ClickHouse's own on the cold disk, which
# moves pin) through both routers. For SOAK_SECONDS (default 600) an operations loop
# runs rebalances, moves, tiering, repairs and rf changes while a fault injector, seeded with
# SOAK_SEED (printed; the same seed gives the same sequence of faults and operations), kills -9
# lab nodes (ClickHouse + agent), routers, the coordinator and running ferry operations and
# restarts them, makes the object store unreachable or slow, SIGSTOPs a node for longer than the
# timeouts, fills a node's disk (a loop-mounted ext4 when running as root), and stops ZooKeeper
# (SOAK_CATALOG=zk). Then everything is restored, unfinished moves and jobs are resumed with the
# ferry commands, and the invariants are checked: every acknowledged row stored exactly once per
# replica of its slice, reads through each router equal to what is stored and to the reference,
# sweep complete with no dangling pointer, no drift and no orphan older than the grace period
# (after `sweep --delete-orphans`), no move or job unfinished, zero deletes by the clickhouse and
# uploader roles at the S3 proxy, no sanitizer report. The report (JSON) goes to stdout and
# $SOAK_REPORT (default $FERRY_BUILD_DIR/soak-report.json). Exit 1 when an invariant is broken.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3policy.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"
source "$FERRY_SOURCE_DIR/tests/soak/procs.sh"

# The body is one compound command: bash reads it whole before running it, so editing this file
# while a soak runs cannot change the running one.
{

SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_SEED=${SOAK_SEED:-$(( $(date +%s%N) / 1000 % 1000000 ))}
SOAK_CATALOG=${SOAK_CATALOG:-sqlite}
SOAK_REPORT=${SOAK_REPORT:-$FERRY_BUILD_DIR/soak-report.json}
GRACE_S=${SOAK_ORPHAN_GRACE:-60}
case "$SOAK_CATALOG" in sqlite | zk) ;; *) fail "SOAK_CATALOG must be sqlite or zk, not '$SOAK_CATALOG'" ;; esac
echo "# soak: seed $SOAK_SEED, $SOAK_SECONDS s, catalog $SOAK_CATALOG (again: SOAK_SEED=$SOAK_SEED)"
echo "# soak: directory $T (kept on failure with FERRY_KEEP_FAILED=1)"
STARTED=$(date +%s)
SOAKDIR=$FERRY_SOURCE_DIR/tests/soak
PY=/usr/bin/python3
mkdir -p "$T/pids" "$T/logs"
EV=$T/events.log # "epoch kind detail" per fault and operation
: >"$EV"
ev() { echo "$(date +%s) $*" >>"$EV"; }
F() { "$FERRY_BIN" "$@" --config "$C"; }

# ---- object store: s3rver <- policy proxy (counts deletes per role) <- chaos proxy ----------
BUCKET=soak
s3policy_start "$T" "$BUCKET" || fail "the S3 policy proxy did not start"
CHAOS_PORT=$(free_port)
CHAOS_MODE=$T/chaos.mode
echo normal >"$CHAOS_MODE"
proc_start chaos "$PY" "$SOAKDIR/chaos_proxy.py" --port "$CHAOS_PORT" --upstream-port "$S3P_PORT" \
    --mode-file "$CHAOS_MODE"
wait_for 20 grep -q listening "$T/logs/chaos.log" || fail "chaos proxy: $(cat "$T/logs/chaos.log")"
LAB_S3=("${S3P_ARGS[@]}")
LAB_S3[3]=http://127.0.0.1:$CHAOS_PORT # --s3-endpoint's value: through the chaos proxy
[ "${LAB_S3[2]}" = --s3-endpoint ] || fail "unexpected S3P_ARGS layout: ${S3P_ARGS[*]}"

# ---- node4's data directory on a small file system that the injector can fill --------------
L=$T/lab
DISKFULL=none
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null && [ "${SOAK_DISK_FULL:-1}" = 1 ]; then
    MNT=$L/node4/data
    mkdir -p "$MNT"
    truncate -s 3G "$T/node4.img"
    mkfs.ext4 -q -m 0 "$T/node4.img"
    if mount -o loop "$T/node4.img" "$MNT" 2>"$T/mount.err"; then
        DISKFULL=loop
        _soak_umount() {
            "$FERRY_BIN" lab down --dir "$L" >/dev/null 2>&1
            mkdir -p "$T/node4-logs" && cp "$MNT"/*.log "$T/node4-logs/" 2>/dev/null # kept with $T
            # the image goes: what filled it stays (bytes, inodes, the folders holding most files)
            { df -h "$MNT"; df -i "$MNT"; echo "# inodes by folder (3 levels)"
              du --inodes -x -d 3 "$MNT" 2>/dev/null | sort -n | tail -25; } >"$T/node4-logs/disk.txt" 2>&1
            umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
            rm -f "$T/node4.img"
        }
        at_exit _soak_umount
    else
        echo "# disk-full faults off: loop mount failed: $(cat "$T/mount.err")"
    fi
else
    echo "# disk-full faults off: they need root and mkfs.ext4 for a loop-mounted file system"
fi

# ---- lab, catalog, tables, tenants --------------------------------------------------------
lab_up "$L" --nodes 4 "${LAB_S3[@]}"
NODES="node1 node2 node3 node4"
C=$L/soak.conf
CATALOG=""
if [ "$SOAK_CATALOG" = zk ]; then
    zk_start "$T/zk" || fail "ZooKeeper did not start"
    CATALOG=$(zk_url /soak)
    ZK_CMD=$(tr '\0' ' ' <"/proc/$ZK_PID/cmdline")
    echo "$ZK_PID" >"$T/pids/zk"
fi
R1_PORT=$(free_port); R2_PORT=$(free_port); CO_PORT=$(free_port)
R1=http://127.0.0.1:$R1_PORT; R2=http://127.0.0.1:$R2_PORT
cp "$L/ferry.conf" "$C"
[ -z "$CATALOG" ] || sed -i "s#^catalog = .*#catalog = $CATALOG#" "$C"
sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $R1,$R2#" "$C"
events_conf "$C" "passthrough = $(lab_url "$L" node1)" "shard_timeout = 10s" "route_wait = 20s" \
    "publish_wait = 30s" "retry_window = 30s"
cp "$C" "$T/coord.conf"
sed -i "s#^\[cluster\]\$#[cluster]\ntier_interval = 20s\nrepair_interval = 30s\nsplits_interval = 60s#" "$T/coord.conf"
printf '[splits]\ntarget_slice_bytes = 4M\ntarget_slice_rows_per_s = 0\nmax_splits = 4\n' >>"$T/coord.conf"
events_table --tiered $(for n in $NODES; do lab_url "$L" $n; done)
F init >/dev/null || fail "ferry init"
TENANTS=$(seq 0 11 | sed 's/^/t/' | paste -sd,)
F tenant add t0 t1 t4 t5 t8 t9 t10 t11 >/dev/null || fail "tenant add"
F tenant add t2 t3 t6 t7 --splits 2 >/dev/null || fail "tenant add --splits 2"

router_up() { # router_up 1|2
    local port; [ "$1" = 1 ] && port=$R1_PORT || port=$R2_PORT
    proc_start "router$1" "$FERRY_BIN" router --config "$C" --listen "127.0.0.1:$port" \
        --retry-journal "$T/router$1.retries"
    wait_for 60 curl -sf "http://127.0.0.1:$port/ping"
}
# Starts the coordinator and waits until it serves. After a kill -9 its lease outlives it on
# ZooKeeper until the dead process's session expires: the new one refuses to start ("another
# coordinator is running") and is started again until the lease is free, as a supervisor would
# (at most 90 s). A coordinator that exits for any other reason is a crash of its own.
coord_up() {
    local k n0
    for k in $(seq 1 45); do
        n0=$({ wc -l <"$T/logs/coordinator.log"; } 2>/dev/null || echo 0) # no log yet: 0
        echo "$((n0 + 1))" >"$T/coord.logline" # where this coordinator's log starts
        proc_start coordinator "$FERRY_BIN" coordinator --config "$T/coord.conf" --listen "127.0.0.1:$CO_PORT"
        wait_for 20 curl -sf "http://127.0.0.1:$CO_PORT/health" && return 0
        proc_alive coordinator && return 0
        tail -n +"$((n0 + 1))" "$T/logs/coordinator.log" | grep -q 'another coordinator is running' || return 1
        sleep 2
    done
    return 1
}
router_up 1 || fail "router 1 did not start: $(tail -5 "$T/logs/router1.log")"
router_up 2 || fail "router 2 did not start: $(tail -5 "$T/logs/router2.log")"
# rf 2 for t0..t3: clones made by a rebalance (its fence needs both routers up)
for t in t0 t1 t2 t3; do F tenant set-rf $t 2 >/dev/null || fail "set-rf $t 2"; done
F rebalance --grace 0 --json >"$T/rb0.json" 2>"$T/rb0.err" || fail "first rebalance: $(tail -3 "$T/rb0.err")"

# ---- the reference: a day no one writes again, tiered -------------------------------------
day_ago() { date -u -d "@$(( $(date +%s) - $1 * 86400 ))" +%Y%m%d; }
STATIC_DAY=$(day_ago 30)
WDAYS=$(for k in 0 1 2 3 4 5 6; do day_ago $k; done | paste -sd,)
ID_BASE=1000000000
for i in $(seq 0 11); do
    res=$($PY "$FERRY_SOURCE_DIR/tests/lib/router_load.py" send "$R1" TSV "t$i" $((i * 100000)) 2000 \
        --query-id "static-$i" --day "$STATIC_DAY")
    assert_eq 200 "$(head -1 <<<"$res")" "static rows of t$i: $res"
done
# ClickHouse's own cold parts: the static day of t8-t11 moved to the cold disk by the server
# itself (as a TTL would). Tiering skips them (no hot part); a move or rebalance of their slices
# pins them on its source (lib/agent/pin.c) and releases them by REPLACE
NATIVE=0
for n in $NODES; do
    u=$(lab_url "$L" $n)
    for pid in $(chq "$u" "SELECT DISTINCT _partition_id FROM events WHERE tenant IN ('t8', 't9', 't10', 't11') AND day = $STATIC_DAY"); do
        chq "$u" "ALTER TABLE events MOVE PARTITION ID '$pid' TO DISK 'cold'" >/dev/null ||
            fail "native move of $pid on $n"
        NATIVE=$((NATIVE + 1))
    done
done
[ "$NATIVE" -gt 0 ] || fail "no static partition of t8-t11 found to move to the cold disk"
echo "# soak: $NATIVE static partitions of t8-t11 moved to the cold disk by ClickHouse itself"
F tier --older-than 3d --json >"$T/tier0.json" 2>"$T/tier0.err" || fail "first tier: $(tail -3 "$T/tier0.err")"
REFQ="SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE day = $STATIC_DAY GROUP BY tenant ORDER BY tenant FORMAT TSV"
curl -sS --fail-with-body "$R1/" --data-binary "$REFQ" >"$T/reference.tsv" || fail "reference read"
assert_eq 12 "$(wc -l <"$T/reference.tsv")" "12 tenants in the reference"
while read -r t n u s; do
    i=${t#t}
    assert_eq "2000 2000 $((2000 * i * 100000 + 1999 * 1000))" "$n $u $s" "reference rows of $t"
done <"$T/reference.tsv"
coord_up || fail "the coordinator did not start: $(tail -5 "$T/logs/coordinator.log")"
ok "set-up: 4 nodes (s3 through the chaos proxy), $SOAK_CATALOG catalog, 12 tenants (t0-t3 rf 2), 2 routers, coordinator; reference tiered"

# ---- load ----------------------------------------------------------------------------------
LOAD_T0=$(date +%s)
proc_start writer "$PY" "$SOAKDIR/writer.py" --routers "$R1,$R2" --tenants "$TENANTS" --days "$WDAYS" \
    --acked "$T/acked.tsv" --unacked "$T/unacked.tsv" --stop "$T/stop-writer" --stats "$T/writer.json" \
    --seed "$SOAK_SEED" --id-base "$ID_BASE" --rows 100 --clients 2 --give-up 300
proc_start reader "$PY" "$SOAKDIR/reader.py" --routers "$R1,$R2" --reference "$T/reference.tsv" \
    --where "day = $STATIC_DAY" --stop "$T/stop-reader" --stats "$T/reader.json" --seed "$SOAK_SEED"

# ---- operations between faults (seeded) ----------------------------------------------------
source "$SOAKDIR/ops.sh"
source "$SOAKDIR/faults.sh"
( RANDOM=$((SOAK_SEED * 2 + 1)); ops_loop ) >>"$T/logs/ops.log" 2>&1 &
OPS_LOOP=$!
( RANDOM=$((SOAK_SEED * 2)); fault_loop ) >>"$T/logs/faults.log" 2>&1 &
FAULT_LOOP=$!
echo "$OPS_LOOP" >"$T/pids/ops_loop"; echo "$FAULT_LOOP" >"$T/pids/fault_loop"
END=$((LOAD_T0 + SOAK_SECONDS))
while [ "$(date +%s)" -lt "$END" ]; do sleep 5; done
touch "$T/stop-faults"
wait "$FAULT_LOOP" || echo "# the fault loop ended with $?"
touch "$T/stop-ops"
# The operation running when the faults end finishes, within SOAK_OPS_END_WAIT (600 s). One that
# runs longer is stopped (SIGTERM, kill -9 after 60 s) and named as a problem in the report; the
# settle resumes its work. (Session 29: a tiering run that uploaded piled-up parts one by one was
# still running 23 minutes after the faults, and the soak waited for it.)
for _ in $(seq 1 $(( ${SOAK_OPS_END_WAIT:-600} * 2 ))); do
    pid_running "$OPS_LOOP" || break
    sleep 0.5
done
if pid_running "$OPS_LOOP"; then
    ev problem "operation $(cat "$T/op.what" 2>/dev/null || echo '?') still ran ${SOAK_OPS_END_WAIT:-600} s after the faults: stopped"
    proc_stop op 60
fi
wait "$OPS_LOOP" || echo "# the operations loop ended with $?"
FAULTS_DONE=$(date +%s)
ok "soak ran $((FAULTS_DONE - LOAD_T0)) s (set-up $((LOAD_T0 - STARTED)) s): $(grep -c ' fault ' "$EV" || true) faults, $(grep -c ' op ' "$EV" || true) operations"

# ---- settle: everything back, load stopped, unfinished work resumed ------------------------
restore_all
touch "$T/stop-writer" "$T/stop-reader"
proc_wait writer 400 || fail "the writer did not stop within 400 s"
proc_wait reader 120 || fail "the reader did not stop"
# a scheduled tiering pass in progress finishes before the coordinator stops (docs/tiering.md)
proc_stop coordinator 900
settle() { # settle NAME CMD...: retried up to 5 times until it exits 0
    local name=$1 k; shift
    for k in 1 2 3 4 5; do
        if "$@" >>"$T/logs/settle.log" 2>&1; then ev settle "$name ok $k"; return 0; fi
        ev settle "$name failed $k"
        sleep 5
    done
    return 1
}
settle move_resume F move --resume all || echo "# move --resume all kept failing"
settle tier F tier --older-than 3d || echo "# tier kept failing"
settle rebalance F rebalance --json || echo "# rebalance kept failing"
settle repair F repair --json || echo "# repair kept failing"
SETTLED=$(date +%s)

# ---- invariants ----------------------------------------------------------------------------
source "$SOAKDIR/checks.sh"
run_checks
report
[ "$(jq '[.invariants[] | select(.ok | not)] | length' "$SOAK_REPORT")" = 0 ] ||
    fail "invariants broken: $(jq -c '[.invariants | to_entries[] | select(.value.ok | not) | .key]' "$SOAK_REPORT") (report: $SOAK_REPORT)"
ok "every invariant holds (report: $SOAK_REPORT)"
done_testing
exit 0
}
