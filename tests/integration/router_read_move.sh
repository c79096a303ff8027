# Reads through `ferry router` are exact at every point of a move (docs/routing.md, "Reads during
# a move"): a move of acme/0 is stopped (test-only crash points) right after the switch, after
# the publish step was journaled, after one partition was published, after all were (before
# CLEANUP is journaled), and after the source's DETACH; at each point new rows are written
# through the router, then count and sum queries through the router must equal what was written. Before publishing the router
# reads the union of source and target; while publishing it holds the slice's reads (an error
# after [router] publish_wait, naming the move; a held read finishes exactly once the move is
# resumed); from CLEANUP on it reads the target alone. Also a clone (tenant set-rf + rebalance)
# stopped after its switch: its target (new writes only) is not read until the clone is done.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

LAB=$T/lab
lab_up "$LAB" --nodes 3
declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$LAB" "$n"); done
C=$LAB/ferry.conf
events_conf "$C" "passthrough = ${U[node1]}" "shard_timeout = 20s" "publish_wait = 60s"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
DDL="CREATE TABLE events (tenant String, day UInt32, split UInt32, uid UInt64, x UInt64)
     ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (tenant, x)"
for n in node1 node2 node3; do chq "${U[$n]}" "$DDL" >/dev/null; done
"$FERRY_BIN" tenant add acme beta gamma --config "$C" >/dev/null || fail "tenant add"

# R: publish_wait 60 s (held reads wait for the move); RQ: 2 s (a held read gives up quickly)
start_router "$C" router
R=$R_URL; RPID=$R_PID
sed -e 's/^publish_wait = 60s$/publish_wait = 2s/' "$C" >"$T/quick.conf"
start_router "$T/quick.conf" quick
RQ=$R_URL; RQPID=$R_PID
# moves fence both routers (writes after the switch, reads before publishing)
sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $R,$RQ#" "$C"
grep -q "^routers = $R,$RQ" "$C" || fail "routers line not written"

declare -A CNT SUM
NEXT=0
write() { # TENANT N: N new rows of TENANT through the router (3 days), expected totals updated
    local t=$1 n=$2 a=$NEXT b=$((NEXT + $2)) out
    awk -v t="$t" -v a="$a" -v b="$b" 'BEGIN { for (x = a; x < b; x++) printf "%s\t%d\t%d\t%d\n", t, 20261101 + x % 3, x % 50, x }' >"$T/rows.tsv"
    out=$(curl -sS -w '\n%{http_code}' "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, x) FORMAT TSV' '$q|@uri')" \
        --data-binary @"$T/rows.tsv")
    [ "${out##*$'\n'}" = 200 ] || fail "router insert: $out"
    CNT[$t]=$(( ${CNT[$t]:-0} + n ))
    SUM[$t]=$(( ${SUM[$t]:-0} + (a + b - 1) * n / 2 ))
    NEXT=$b
}
expect() { # TENANT: "count sum" expected
    echo "${CNT[$1]:-0} ${SUM[$1]:-0}"
}
rq() { # URL SQL: the answer, TSV, one line with tabs as spaces
    chq "$1" "$2" | tr '\t' ' '
}
check_tenant() { # URL TENANT WHAT
    assert_eq "$(expect "$2")" "$(rq "$1" "SELECT count(), sum(x) FROM events WHERE tenant = '$2'")" "$3: $2 count and sum through the router"
}
check_all() { # WHAT: every tenant, one by one and grouped (fan-out)
    local t want=""
    for t in acme beta gamma; do
        check_tenant "$R" "$t" "$1"
        want+="$t $(expect "$t")"$'\n'
    done
    assert_eq "${want%$'\n'}" "$(rq "$R" "SELECT tenant, count(), sum(x) FROM events GROUP BY tenant ORDER BY tenant")" "$1: every tenant, fan-out"
}
route_of() { "$FERRY_BIN" route --config "$C" --tenant "$1" --split 0 --json | jq -r '.slices[0].shards | join(",")'; }
unfinished() { sqlite3 "$LAB/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }
router_version() { curl -s "$1/ferry/router" | jq .routing_version; }
wait_routers() { # both routers have the catalog's routing version
    local v
    v=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r .version)
    wait_for 20 bash -c "[ \$(curl -s $R/ferry/router | jq .routing_version) -ge $v ] && [ \$(curl -s $RQ/ferry/router | jq .routing_version) -ge $v ]"
}

for t in acme beta gamma; do write "$t" 600; done
"$FERRY_BIN" rebalance --config "$C" --grace 200 >/dev/null 2>"$T/rb0.err" || fail "rebalance: $(tail -3 "$T/rb0.err")"
wait_routers
check_all "loaded"
ok "3 tenants written through the router, placement settled"

# ---- a clone stopped after its switch ---------------------------------------------------------
"$FERRY_BIN" tenant set-rf beta 2 --config "$C" >/dev/null || fail "set-rf beta"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan.json" || fail "plan"
P=$(jq -c 'select(.event == "plan")' "$T/plan.json")
assert_eq "clone" "$(jq -r '[.moves[].kind] | unique | join(",")' <<<"$P")" "only a clone planned"
CSRC=$(jq -r '.moves[0].from' <<<"$P"); CDST=$(jq -r '.moves[0].to' <<<"$P")
FERRY_TEST_CRASH_AFTER=SWITCH:switched expect_exit 137 "$FERRY_BIN" rebalance --config "$C" --grace 200
id=$(unfinished)
assert_contains "$id" "cl-" "a clone stopped in SWITCH"
assert_eq "$CSRC,$CDST" "$(route_of beta)" "the route lists the source and the clone target"
wait_routers
write beta 300 # to both replicas
# the clone target has the new rows only: reading it would miss the old ones
assert_eq 300 "$(chq "${U[$CDST]}" "SELECT count() FROM events WHERE tenant = 'beta'")" "the clone target holds only the new writes"
check_tenant "$R" beta "clone stopped after its switch"
hdr=$(curl -sS -D - -o /dev/null "$R/" --data-binary "SELECT count() FROM events WHERE tenant = 'beta'")
assert_contains "$hdr" "X-Ferry-Shards: $CSRC" "the clone's source serves the read"
check_all "clone stopped after its switch"
"$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >/dev/null 2>"$T/clone_resume.err" || fail "clone resume: $(cat "$T/clone_resume.err")"
wait_routers
check_all "clone resumed and done"
assert_eq "$(expect beta | cut -d' ' -f1)" "$(chq "${U[$CDST]}" "SELECT count() FROM events WHERE tenant = 'beta'")" "the new replica is complete"
ok "clone stopped after its switch: reads exact from the source; after the clone both replicas are complete"

# ---- a move stopped at each point ----------------------------------------------------------
held_check() { # POINT ID: reads of acme are held while the move publishes
    expect_exit 0 curl -sS -w '\n%{http_code}' "$RQ/" --data-binary "SELECT count() FROM events WHERE tenant = 'acme'"
    assert_contains "$OUT" "TIMEOUT_EXCEEDED" "$1: a read of the publishing slice gives up after publish_wait"
    assert_contains "$OUT" "move $2 is publishing" "$1: the error names the move"
    [ "${OUT##*$'\n'}" != 200 ] || fail "$1: a held read that gave up answered 200"
    check_tenant "$RQ" beta "$1 (other tenants are not held)"
}
for point in CRASH_AFTER=SWITCH:switched CRASH_AFTER=SWITCH:caught-up \
             CRASH_AFTER=SWITCH:published-one CRASH_BEFORE=CLEANUP CRASH_AFTER=CLEANUP:detached; do
    from=$(route_of acme)
    to=node$(( ${from#node} % 3 + 1 ))
    expect_exit 137 env "FERRY_TEST_$point" "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to "$to" --grace 200
    assert_contains "$ERR" "test crash point reached" "crashed at $point"
    id=$(unfinished)
    [ -n "$id" ] || fail "no unfinished move after $point"
    assert_eq "$to" "$(route_of acme)" "$point: the route names the target"
    wait_routers
    write acme 200 # to the target's real table
    state=$(sqlite3 "$LAB/catalog.db" "SELECT json_extract(doc, '\$.state') || ' ' || json_extract(doc, '\$.step') FROM records WHERE parent = 'moves' AND name = '$id'")
    case "$point" in
    CRASH_AFTER=SWITCH:switched)
        check_tenant "$R" acme "$point"
        hdr=$(curl -sS -D - -o /dev/null "$R/" --data-binary "SELECT count() FROM events WHERE tenant = 'acme'")
        assert_contains "$hdr" "$from" "$point: the source is read ($hdr)"
        assert_contains "$hdr" "$to" "$point: the target is read"
        # route-query --router shows the plan the router would run now: source AND target
        "$FERRY_BIN" route-query --router "$R" --json "SELECT count() FROM events WHERE tenant = 'acme'" >"$T/explain.json"
        assert_eq "$from,$to" "$(jq -r '[.queries[].server] | sort | join(",")' "$T/explain.json")" "$point: explain lists the source and the target"
        assert_eq "false" "$(jq -r .held "$T/explain.json")" "$point: explain: not held"
        assert_eq "2" "$(jq -r '[.queries[].sql | select(contains("tenant = '"'acme'"'"))] | length' "$T/explain.json")" "$point: explain: both read acme"
        check_all "$point"
        ;;
    CRASH_AFTER=SWITCH:caught-up | CRASH_AFTER=SWITCH:published-one | CRASH_BEFORE=CLEANUP)
        assert_contains "$state" "SWITCH 1000" "$point: the journal is publishing"
        held_check "$point" "$id"
        "$FERRY_BIN" route-query --router "$R" "SELECT count() FROM events WHERE tenant = 'acme'" >"$T/explain.txt"
        assert_contains "$(cat "$T/explain.txt")" "held: " "$point: explain says the read is held"
        assert_contains "$(cat "$T/explain.txt")" "$id" "$point: explain names the move"
        # a read started now is held, and answers exactly once the resumed move reaches CLEANUP
        rm -f "$T/held.rc" "$T/held.out" "$T/held.err"
        ( rq "$R" "SELECT count(), sum(x) FROM events WHERE tenant = 'acme'" >"$T/held.out" 2>"$T/held.err"; echo $? >"$T/held.rc" ) &
        HELD=$!
        sleep 1
        [ ! -e "$T/held.rc" ] || fail "$point: the read was not held: $(cat "$T/held.out" "$T/held.err")"
        ;;
    CRASH_AFTER=CLEANUP:detached)
        assert_eq 0 "$(chq "${U[$from]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "$point: the source detached acme"
        "$FERRY_BIN" route-query --router "$R" --json "SELECT count() FROM events WHERE tenant = 'acme'" >"$T/explain.json"
        assert_eq "$to" "$(jq -r '[.queries[].server] | join(",")' "$T/explain.json")" "$point: explain lists the target alone"
        check_all "$point"
        ;;
    esac
    "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >/dev/null 2>"$T/resume.err" || fail "resume after $point: $(cat "$T/resume.err")"
    if [ -n "${HELD:-}" ]; then
        wait "$HELD"
        HELD=
        assert_eq 0 "$(cat "$T/held.rc")" "$point: the held read answered ($(cat "$T/held.err"))"
        assert_eq "$(expect acme)" "$(cat "$T/held.out")" "$point: the held read is exact"
    fi
    wait_routers
    assert_eq "" "$(unfinished)" "$point: the move finished"
    assert_eq 0 "$(chq "${U[$from]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "$point: nothing of acme left on the source"
    write acme 50
    check_all "after $point, resumed"
    ok "move stopped at $point: reads exact (or held, never wrong); resumed: exact"
done
stop_router "$RQPID"
stop_router "$RPID"
done_testing
