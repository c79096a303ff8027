# Reads through `ferry router`: the same tenants loaded into a single reference node and, through
# the router's write path, into a 3-node lab whose tenants were split (set-splits between two
# loads) and moved (`ferry move`); a corpus of queries (tests/data/router_read_queries.sql) gives
# the reference's results through the router, also while a move is running and with a move
# stopped right after its switch. Then the errors:
# syntax errors as ClickHouse reports them, fan-out forbidden, GLOBAL transfer bounds, a server
# down (named with its URL).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
CHECK="python3 $FERRY_SOURCE_DIR/tests/lib/router_read_check.py"
CORPUS=$FERRY_SOURCE_DIR/tests/data/router_read_queries.sql

LAB=$T/lab
REFLAB=$T/ref
lab_up "$LAB" --nodes 3
lab_up "$REFLAB" --nodes 1
REF=$(lab_url "$REFLAB" node1)
N1=$(lab_url "$LAB" node1); N2=$(lab_url "$LAB" node2); N3=$(lab_url "$LAB" node3)
NODES=("$N1" "$N2" "$N3")
CONF=$LAB/ferry.conf
events_conf "$CONF" "passthrough = $N1" "shard_timeout = 20s"
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"

DDL="CREATE TABLE events (tenant String, day UInt32, split UInt32, uid UInt64, u String, x UInt64,
     ts DateTime, k UInt32, arr Array(UInt8)) ENGINE = MergeTree PARTITION BY (tenant, day, split)
     ORDER BY (tenant, ts) SETTINGS storage_policy = 'tiered', non_replicated_deduplication_window = 1000"
DIM="CREATE TABLE dim (k UInt32, name String) ENGINE = MergeTree ORDER BY k"
DIMROWS="INSERT INTO dim SELECT number, concat('k', toString(number)) FROM numbers(4)"
for u in "${NODES[@]}" "$REF"; do
    chq "$u" "$DDL" >/dev/null; chq "$u" "$DIM" >/dev/null; chq "$u" "$DIMROWS" >/dev/null
done
ok "events and dim on the 3 lab nodes and the reference"

TENANTS="acme beta gamma delta zeta"
"$FERRY_BIN" tenant add $TENANTS --config "$CONF" >/dev/null || fail "tenant add"

# 3000 rows: x < 1500 written while every tenant has 1 split, the rest after acme -> 3,
# beta -> 2, zeta -> 4 splits.
GEN="SELECT ['acme','beta','gamma','delta','zeta'][number % 5 + 1] AS tenant,
     20261101 + intDiv(number, 1000) AS day, cityHash64(number) % 50 AS uid,
     concat('u', toString(number % 7)) AS u, number AS x,
     toDateTime('2026-11-01 00:00:00') + number * 37 AS ts, number % 5 AS k,
     [number % 2, number % 3] AS arr FROM numbers(3000)"
chq "$REF" "INSERT INTO events SELECT tenant, day,
    if(x < 1500, 0, xxh3(toString(uid)) % multiIf(tenant = 'acme', 3, tenant = 'beta', 2, tenant = 'zeta', 4, 1)),
    uid, u, x, ts, k, arr FROM ($GEN)" >/dev/null

start_router "$CONF" router
R=$R_URL; ROUTER_PID=$R_PID
# moves fence this router: writes after the switch, reads of the union before publishing
sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $R#" "$CONF"
grep -q "^routers = $R" "$CONF" || fail "routers line not written"

load() { # WHERE: rows of the generator through the router
    chq "$REF" "SELECT tenant, day, uid, u, x, ts, k, arr FROM ($GEN) WHERE $1 FORMAT TSV" >"$T/rows.tsv"
    out=$(curl -sS -w '\n%{http_code}' "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, u, x, ts, k, arr) FORMAT TSV' '$q|@uri')" \
        --data-binary @"$T/rows.tsv")
    [ "${out##*$'\n'}" = 200 ] || fail "router insert: $out"
}
load "x < 1500"
"$FERRY_BIN" tenant set-splits acme 3 --config "$CONF" >/dev/null || fail "set-splits acme"
"$FERRY_BIN" tenant set-splits beta 2 --config "$CONF" >/dev/null || fail "set-splits beta"
"$FERRY_BIN" tenant set-splits zeta 4 --config "$CONF" >/dev/null || fail "set-splits zeta"
V=$("$FERRY_BIN" route --tenant zeta --json --config "$CONF" | jq -r .version)
wait_for 10 bash -c "[ \$(curl -s $R/ferry/router | jq .routing_version) -ge $V ]"
load "x >= 1500"
total=0
for u in "${NODES[@]}"; do total=$((total + $(chq "$u" "SELECT count() FROM events"))); done
assert_eq "$total" 3000 "3000 rows stored once over the 3 nodes"

# moves: acme/0 and zeta/1 to another shard
move_away() { # TENANT SPLIT [ARGS]: moves the slice to the next node
    local from to
    from=$("$FERRY_BIN" route --tenant "$1" --split "$2" --json --config "$CONF" | jq -r '.slices[0].shards[0]')
    to=node$(( ${from#node} % 3 + 1 ))
    "$FERRY_BIN" move --config "$CONF" --tenant "$1" --split "$2" --to "$to" --grace 2000 "${@:3}" \
        >"$T/move_$1_$2.out" 2>"$T/move_$1_$2.err"
}
move_away acme 0 || fail "move acme/0: $(cat "$T/move_acme_0.err")"
move_away zeta 1 || fail "move zeta/1: $(cat "$T/move_zeta_1.err")"
ok "5 tenants written through the router, 3 of them split after half the rows, 2 slices moved"

# ---- the corpus ----
$CHECK "$R" "$REF" "$CORPUS" >"$T/check.log" 2>&1 || { cat "$T/check.log"; fail "router answers differ from the reference"; }
cat "$T/check.log"
summary=$(tail -1 "$T/check.log")
assert_contains "$summary" "failures: 0"
n=$(sed -n 's/^queries: \([0-9]*\),.*/\1/p' <<<"$summary")
[ "$n" -ge 50 ] || fail "corpus too small: $n"
for kind in single aggregate rows gather; do
    assert_contains "$summary" "\"$kind\"" "the corpus exercises $kind plans"
done
ok "$n queries give the reference's answers through the router"

# fast path: a single-server tenant's query goes to one shard
hdr=$(curl -sS -D - -o /dev/null "$R/" --data-binary "SELECT count() FROM events WHERE tenant = 'gamma'")
assert_contains "$hdr" "X-Ferry-Plan: single" "gamma (1 split) is answered by one server"
# statements that do not read managed tables pass through unchanged
assert_eq "$(chq "$R" "SELECT count() FROM dim")" 4 "dim passes through"

# ---- the corpus during a move ----
# Every round must give the reference's answers, whatever state the move is in (docs/routing.md,
# "Reads during a move": the union of source and target from the switch until the publish step,
# reads of the slice held while it publishes, the target from CLEANUP on). The 20 s grace keeps the
# move in SWITCH for several rounds.
move_state() {
    sqlite3 "$LAB/catalog.db" "SELECT lower(json_extract(doc, '\$.state')) FROM records WHERE parent LIKE 'moves%'
        AND json_extract(doc, '\$.tenant') = 'beta' AND json_extract(doc, '\$.split') = 1" 2>/dev/null | tail -1
}
from=$("$FERRY_BIN" route --tenant beta --split 1 --json --config "$CONF" | jq -r '.slices[0].shards[0]')
( move_away beta 1 --grace 20000; echo $? >"$T/move_bg.rc" ) &
MOVEPID=$!
rounds=0 in_switch=0
while :; do
    # the round runs in the background while the move's states are sampled
    seen=" $(move_state)"
    ( $CHECK "$R" "$REF" "$CORPUS" >"$T/check_move.log" 2>&1; echo $? >"$T/check_move.rc" ) &
    CHECKPID=$!
    while kill -0 "$CHECKPID" 2>/dev/null; do
        st=$(move_state)
        case "$seen " in *" $st "*) ;; *) seen+=" $st" ;; esac
        sleep 0.2
    done
    wait "$CHECKPID"
    [ "$(cat "$T/check_move.rc")" = 0 ] ||
        { cat "$T/check_move.log"; fail "answers differ during a move (states seen:$seen)"; }
    echo "# round $rounds, move states seen:$seen"
    case "$seen" in *switch*) in_switch=$((in_switch + 1)) ;; esac
    rounds=$((rounds + 1))
    [ -e "$T/move_bg.rc" ] && break
    [ "$rounds" -lt 60 ] || fail "the move did not finish"
done
wait "$MOVEPID"
assert_eq "$(cat "$T/move_bg.rc")" 0 "move beta/1: $(cat "$T/move_beta_1.err")"
to=$("$FERRY_BIN" route --tenant beta --split 1 --json --config "$CONF" | jq -r '.slices[0].shards[0]')
[ "$to" != "$from" ] || fail "beta/1 did not move"
[ "$in_switch" -ge 1 ] || fail "no round overlapped the move's SWITCH state ($rounds rounds)"
$CHECK "$R" "$REF" "$CORPUS" >"$T/check_after.log" 2>&1 || { cat "$T/check_after.log"; fail "answers differ after the move"; }
ok "the corpus ran $rounds time(s) while beta/1 moved $from -> $to, $in_switch of them in SWITCH: all identical to the reference, and after it"
# the repeated corpus ran its merged plans pipelined (docs/routing.md, "Pipelined merges")
pipelined=$(curl -s "$R/ferry/router" | jq .reads.pipelined)
[ "$pipelined" -ge 20 ] || fail "only $pipelined merged queries ran pipelined"
ok "$pipelined merged queries ran pipelined (initiator started with the partials)"

# A move stopped right after its switch (the source holds the old rows, the target's real table
# nothing yet): the corpus reads the union and is exact; then resumed: exact.
from=$("$FERRY_BIN" route --tenant delta --split 0 --json --config "$CONF" | jq -r '.slices[0].shards[0]')
FERRY_TEST_CRASH_AFTER=SWITCH:switched expect_exit 137 move_away delta 0
id=$(sqlite3 "$LAB/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
[ -n "$id" ] || fail "no move stopped in SWITCH"
V=$("$FERRY_BIN" route --tenant delta --json --config "$CONF" | jq -r .version)
wait_for 10 bash -c "[ \$(curl -s $R/ferry/router | jq .routing_version) -ge $V ]"
$CHECK "$R" "$REF" "$CORPUS" >"$T/check_stopped.log" 2>&1 || { cat "$T/check_stopped.log"; fail "answers differ with delta/0 stopped after its switch"; }
"$FERRY_BIN" move --config "$CONF" --resume "$id" --grace 200 >/dev/null 2>"$T/resume.err" || fail "resume delta/0: $(cat "$T/resume.err")"
$CHECK "$R" "$REF" "$CORPUS" >"$T/check_resumed.log" 2>&1 || { cat "$T/check_resumed.log"; fail "answers differ after delta/0 resumed"; }
ok "delta/0 stopped after its switch ($from -> $("$FERRY_BIN" route --tenant delta --split 0 --json --config "$CONF" | jq -r '.slices[0].shards[0]')): the corpus is identical; resumed: identical"

# ---- errors ----
expect_exit 0 curl -sS -w '\n%{http_code}' "$R/" --data-binary "SELECT count( FROM events WHERE tenant = 'acme'"
assert_contains "$OUT" "SYNTAX_ERROR" "unbalanced bracket: ClickHouse's syntax error"
assert_eq "${OUT##*$'\n'}" 400 "syntax error status"
expect_exit 0 curl -sS -w '\n%{http_code}' "$R/" --data-binary "SELECT count() FROM events WHERE tenant IN ('acme', 'beta') AND AND x = 1"
assert_contains "$OUT" "SYNTAX_ERROR" "routed query with a syntax error: the server's exception"
assert_contains "$OUT" "Code: 62" "ClickHouse's code"
assert_eq "${OUT##*$'\n'}" 400 "syntax error status (routed)"
expect_exit 0 curl -sS -w '\n%{http_code}' "$R/" --data-binary "SELECT nosuchcolumn FROM events WHERE tenant = 'gamma'"
assert_contains "$OUT" "UNKNOWN_IDENTIFIER" "unknown column: the server's exception"

# fan-out forbidden, GLOBAL bounds: a second router with other limits
CONF2=$T/ferry2.conf
sed -e '/^\[router\]/a allow_fanout = false\nglobal_max_rows = 5' "$CONF" >"$CONF2"
start_router "$CONF2" router2
R2=$R_URL
expect_exit 0 curl -sS -w '\n%{http_code}' "$R2/" --data-binary "SELECT count() FROM events"
assert_contains "$OUT" "allow_fanout = false" "fan-out refused"
assert_contains "$OUT" "BAD_ARGUMENTS" "fan-out error name"
assert_eq "${OUT##*$'\n'}" 400 "fan-out status"
assert_eq "$(chq "$R2" "SELECT count() FROM events WHERE tenant IN ('acme', 'beta')")" "$(chq "$REF" "SELECT count() FROM events WHERE tenant IN ('acme', 'beta')")" "with a tenant filter it runs"
GQ="SELECT count() FROM events WHERE tenant IN ('acme', 'beta', 'gamma', 'delta', 'zeta') AND x GLOBAL IN (SELECT x FROM events WHERE tenant = 'acme' AND x < LIM)"
assert_eq "$(chq "$R2" "${GQ/LIM/20}")" "$(chq "$REF" "${GQ/LIM/20}")" "GLOBAL IN within the bound"
expect_exit 0 curl -sS -w '\n%{http_code}' "$R2/" --data-binary "${GQ/LIM/1000}"
assert_contains "$OUT" "global_max_rows (5)" "GLOBAL IN over the row bound"
assert_contains "$OUT" "TOO_MANY_ROWS_OR_BYTES" "bound error name"
CONF3=$T/ferry3.conf
sed -e '/^\[router\]/a global_max_bytes = 100' "$CONF" >"$CONF3"
start_router "$CONF3" router3
R3=$R_URL
expect_exit 0 curl -sS -w '\n%{http_code}' "$R3/" --data-binary "${GQ/LIM/1000}"
assert_contains "$OUT" "global_max_bytes (100 bytes)" "GLOBAL IN over the byte bound"
ok "fan-out forbidden and GLOBAL transfer bounds give clear errors"

# a server down
kill -KILL "$(lab_pid "$LAB" node3)"
wait_for 20 bash -c "! curl -sf $N3/ping"
expect_exit 0 curl -sS -w '\n%{http_code}' "$R/" --data-binary "SELECT tenant, count() FROM events GROUP BY tenant"
assert_contains "$OUT" "shard node3 ($N3)" "the error names the shard and its URL"
assert_contains "$OUT" "ALL_CONNECTION_TRIES_FAILED" "error name"
# a tenant whose slices are all elsewhere still answers
others=$("$FERRY_BIN" route --tenant gamma --json --config "$CONF" | jq -r '.slices[].shards[0]' | sort -u)
if [ "$others" != node3 ]; then
    assert_eq "$(chq "$R" "SELECT count() FROM events WHERE tenant = 'gamma'")" 600 "gamma on $others answers"
fi
ok "a server down: a clear error naming it"
stop_router "$ROUTER_PID"
done_testing
