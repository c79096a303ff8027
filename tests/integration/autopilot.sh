# The coordinator's autopilot (issue 22): a 2-node lab, 8 tenants of 2 splits, a router listed in
# [cluster] routers, a writer (unique ids, retries with the same query_id) and a reader through
# it, and one `ferry coordinator` with [autopilot] rebalance_interval = 1s, tier_interval = 2s,
# retention_interval = 2s (keep = 365d), sweep_interval and doctor_interval = 3s.
# After the start the test runs no flow itself: it only changes the cluster (lab add-node + ferry
# init, ferry shard drain, ferry shard add) and pauses/resumes, and the coordinator alone
# - tiers the older days, removes t9's expired ones (retention), sweeps (report only) and runs
#   doctor, each run visible in ferry status,
# - rebalances onto the new node3 (logging the reason "shard node3 added"),
# - drains node2; a `ferry pause` during the drain stops new moves: none starts after the pause
#   plus one interval, node2 keeps the slices left, ferry status and the status page show the
#   pause, `ferry rebalance` is refused without --force; `ferry resume` and the drain finishes,
# - started again with a window that excludes now, starts no move although the plan is not
#   empty, and says why (ferry status: the window and when it opens).
# At the end every acknowledged row is stored exactly once and every read was exact.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
LOAD="python3 $FERRY_SOURCE_DIR/tests/lib/router_load.py"

L=$T/lab
lab_up "$L" --nodes 2
C=$L/ap.conf
ROUTERS=""
write_conf() {
    cp "$L/ferry.conf" "$C"
    [ -z "$ROUTERS" ] || sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $ROUTERS#" "$C"
    events_conf "$C" "passthrough = $(lab_url "$L" node1)" "shard_timeout = 30s" "route_wait = 30s"
}
write_conf
events_table --tiered $(lab_url "$L" node1) $(lab_url "$L" node2)
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add $(seq 0 7 | sed 's/^/t/') --splits 2 --config "$C" >/dev/null ||
    fail "tenant add"
"$FERRY_BIN" tenant add t9 --config "$C" >/dev/null || fail "tenant add t9" # old rows only
start_router "$C" router
R=$R_URL
ROUTERS=$R
write_conf
rq() { curl -sS --fail-with-body "$R/" --data-binary "$1"; }

# ---- older days (a month ago): the autopilot's tiering will take them --------------------------
for i in $(seq 0 7); do
    res=$($LOAD send "$R" TSV "t$i" $((1000000 + i * 10000)) 1500 --query-id "static-$i")
    assert_eq 200 "$(head -1 <<<"$res")" "older rows of t$i: $res"
done
# t9's rows of 2025-01-01 are past keep = 365d: the autopilot's retention removes them
res=$($LOAD send "$R" TSV t9 9000000 700 --query-id static-t9 --day 20250101)
assert_eq 200 "$(head -1 <<<"$res")" "expired rows of t9: $res"
RQ_ALL="SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE day >= 20261101 AND day < 20261104 GROUP BY tenant ORDER BY tenant FORMAT TSV"
REF_ALL=$(rq "$RQ_ALL")
assert_eq 8 "$(wc -l <<<"$REF_ALL")" "8 tenants in the reference"
ok "2 shards, 8 tenants of 2 splits, a router; 1500 older rows per tenant, 700 expired rows of t9"

# ---- the coordinator with its autopilot -------------------------------------------------------
# pause/resume/status/rebalance use the test's config; the coordinator its own copy, which knows
# no node3: it follows the catalog's shards.
coord_conf() { # coord_conf FILE [WINDOW]
    cp "$C" "$1"
    cat >>"$1" <<EOF
[autopilot]
rebalance_interval = 1s
tier_interval = 2s
retention_interval = 2s
keep = 365d
sweep_interval = 3s
doctor_interval = 3s
doctor_skip = shard_grants
max_moves = 2
max_moves_per_shard = 2
move_batch = 1
EOF
    [ -z "${2:-}" ] || echo "window = $2" >>"$1"
}
# move_batch = 1: each move its own unit, so a pause lands between the moves of one drain and
# max_moves counts moves (a batch, default 8, counts as one and begins its moves together)
coord_conf "$T/coord.conf"
start_coord() { # start_coord CONF NAME
    bg_start "$T/$2.log" "$FERRY_BIN" coordinator --config "$1" --listen 127.0.0.1:0 \
        --port-file "$T/$2.port"
    COORD_PID=$BG_PID
    wait_for 60 test -s "$T/$2.port" || fail "coordinator $2 did not start: $(tail -5 "$T/$2.log")"
    COORD_URL=http://127.0.0.1:$(cat "$T/$2.port")
}
start_coord "$T/coord.conf" coord
grep -q 'autopilot action scheduled.*action=rebalance every_s=1' "$T/coord.log" ||
    fail "rebalance not scheduled: $(head -5 "$T/coord.log")"

cold_parts() {
    local n c=0
    for n in "$@"; do
        c=$((c + $(chq "$(lab_url "$L" $n)" "SELECT count() FROM system.parts WHERE table = 'events' AND active AND disk_name = 'cold'")))
    done
    echo $c
}
# (no writer yet: every part of events holds older days)
hot_parts() {
    local n c=0
    for n in "$@"; do
        c=$((c + $(chq "$(lab_url "$L" $n)" "SELECT count() FROM system.parts WHERE table = 'events' AND active AND disk_name = 'default'")))
    done
    echo $c
}
# no hot part left, and no tier job unfinished: a partition whose swap (DETACH PART, then ATTACH
# PARTITION FROM staging, docs/tiering.md) is under way has neither a hot part nor its cold ones
# for that moment, and the rows read then would miss it
unfinished_tier() { sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'jobs' AND name LIKE 'tier.%' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }
no_hot_parts() { [ "$(hot_parts node1 node2)" = 0 ] && [ "$(unfinished_tier)" = 0 ]; }
wait_for 60 no_hot_parts ||
    fail "the autopilot did not tier the older days: $(grep -i 'action=tier' "$T/coord.log" | tail -3)"
assert_eq "$REF_ALL" "$(rq "$RQ_ALL")" "the older days after the autopilot's tiering"
ok "the autopilot tiered the older days on its own ($(cold_parts node1 node2) cold parts)"

t9_gone() { [ "$(rq "SELECT count() FROM events WHERE tenant = 't9'")" = 0 ]; }
wait_for 60 t9_gone || fail "the autopilot's retention did not remove t9's expired rows: $(grep 'action=retention' "$T/coord.log" | tail -3)"
for n in node1 node2; do
    assert_eq 0 "$(chq "$(lab_url "$L" $n)" "SELECT count() FROM system.parts WHERE table = 'events' AND partition LIKE '%20250101%'")" "t9's expired parts on $n"
done
grep -q 'action=retention result="ok" reason="scheduled (partitions older than keep = 365d)" summary="[1-9] partition(s) expired, [1-9] removed' "$T/coord.log" ||
    fail "no retention run logged as removing one partition: $(grep 'action=retention' "$T/coord.log" | tail -3)"
run_of() { "$FERRY_BIN" status --config "$C" --json | jq -c --arg a "$1" '.autopilot.runs[] | select(.action == $a)'; }
swept() { run_of sweep | jq -e '.summary | test("^0 orphan.*0 deleted")'; }
wait_for 30 swept || fail "no sweep run recorded: $(run_of sweep) $(grep 'action=sweep' "$T/coord.log" | tail -2)"
doctored() { run_of doctor | jq -e '.result == "ok" and (.summary | test("^[1-9][0-9]* check.*all passed"))'; }
wait_for 30 doctored || fail "no passing doctor run recorded: $(run_of doctor) $(grep 'action=doctor' "$T/coord.log" | tail -2)"
ok "retention removed t9's expired partition (keep = 365d); the sweep (report only: no orphan, nothing deleted) and doctor ran and are in ferry status"

# ---- writer and reader through the router from now on -----------------------------------------
TODAY=$(date -u +%Y%m%d)
$LOAD load "$R" "$T/sent.json" --tenants 8 --rows 300 --clients 1 --until "$T/stop" \
    --retry 30 --formats TSV --days "$TODAY" --ids "$T/ids.txt" --stats "$T/stats.json" \
    2>"$T/load.err" &
LOADPID=$!
at_exit "touch $T/stop"
reader() {
    local got
    while [ ! -e "$T/stop" ]; do
        got=$(rq "$RQ_ALL" 2>&1) || true
        [ "$got" = "$REF_ALL" ] && echo ok || echo "bad: $(head -c 300 <<<"$got")"
        sleep 0.2
    done >>"$T/reads.txt"
}
: >"$T/reads.txt"
reader 2>"$T/reader.err" &
READPID=$!

# ---- node3 joins (while paused: it stays new and empty), then the autopilot rebalances onto it --
"$FERRY_BIN" pause --config "$C" --reason "node3 joins" >/dev/null || fail "pause"
mark=$(wc -l <"$T/coord.log")
"$FERRY_BIN" lab add-node --dir "$L" >/dev/null 2>&1 || fail "lab add-node failed"
write_conf
N3=$(lab_url "$L" node3)
events_table --tiered "$N3"
"$FERRY_BIN" init --config "$C" --json >"$T/init.json" || fail "init with node3: $(cat "$T/init.json")"
assert_eq 1 "$(jq .shards_added "$T/init.json")" "ferry init added node3"
slices_on() { "$FERRY_BIN" status --config "$C" --json | jq --arg s "$1" '.shards[] | select(.name == $s) | .slices'; }
state_of() { "$FERRY_BIN" status --config "$C" --json | jq -r --arg s "$1" '.shards[] | select(.name == $s) | .state'; }
assert_eq new "$(state_of node3)" "node3's state right after ferry init"
sleep 3 # three intervals, paused
moves_since() { tail -n +$((mark + 1)) "$T/coord.log" | grep -c 'autopilot move starts' || true; }
assert_eq 0 "$(moves_since)" "moves started while paused"
assert_eq 0 "$(slices_on node3)" "slices on node3 while paused"
assert_eq new "$(state_of node3)" "node3 while paused"
"$FERRY_BIN" resume --config "$C" >/dev/null || fail "resume"
in_flight() { "$FERRY_BIN" status --config "$C" --json | jq '.moves_in_flight | length'; }
node3_filled() { [ "$(slices_on node3)" -gt 0 ] && [ "$(in_flight)" = 0 ] && grep -q 'action=rebalance result="ok"' "$T/coord.log"; }
wait_for 90 node3_filled ||
    fail "the autopilot did not rebalance onto node3: $(grep autopilot "$T/coord.log" | tail -5)"
grep -q 'action=rebalance result="ok" reason="[^"]*shard node3 added' "$T/coord.log" ||
    fail "the rebalance's reason does not name node3: $(grep 'action=rebalance' "$T/coord.log" | grep -v idle | tail -3)"
on3=$(slices_on node3)
assert_eq active "$(state_of node3)" "node3 after its first rebalance"
[ "$(chq "$N3" "SELECT count() FROM events")" -gt 0 ] || fail "node3 holds no rows"
ok "node3 joined while paused: new and empty; resumed: the autopilot moved $on3 slice(s) onto it (reason logged: shard node3 added), then active"

# ---- node2 drains; a pause in the middle stops new moves ----------------------------------------
before2=$(slices_on node2)
[ "$before2" -ge 3 ] || fail "node2 serves only $before2 slices: too few to pause a drain half-way"
mark=$(wc -l <"$T/coord.log")
"$FERRY_BIN" shard drain node2 --config "$C" >/dev/null || fail "shard drain node2"
# grep -c, not -q: -q stops at the first match and tail then dies of SIGPIPE under pipefail
drain_started() { [ "$(tail -n +$((mark + 1)) "$T/coord.log" | grep -c 'autopilot move starts.*from=node2')" -gt 0 ]; }
wait_for 60 drain_started ||
    fail "no move off node2 started: $(grep autopilot "$T/coord.log" | tail -3)"
"$FERRY_BIN" pause --config "$C" --reason "autopilot test" >/dev/null || fail "pause"
P=$(date +%s)
# moves in flight finish; then nothing starts: watch three intervals after the last one ended
none_in_flight() { [ "$(in_flight)" = 0 ]; }
wait_for 60 none_in_flight ||
    fail "the move in flight did not finish after the pause"
sleep 3
late=$(grep -o 'autopilot move starts.* unix=[0-9]*' "$T/coord.log" | awk -F'unix=' -v p=$((P + 1)) '$2 > p' | wc -l)
assert_eq 0 "$late" "moves started more than one interval after the pause"
left2=$(slices_on node2)
[ "$left2" -gt 0 ] || fail "node2 was drained completely although paused (it served $before2)"
"$FERRY_BIN" status --config "$C" --json >"$T/st.json"
assert_eq true "$(jq .autopilot.pause.paused "$T/st.json")" "ferry status shows the pause"
assert_eq "autopilot test" "$(jq -r .autopilot.pause.reason "$T/st.json")" "the pause's reason"
says_paused() { "$FERRY_BIN" status --config "$C" --json | jq -e '.autopilot.runs[] | select(.action == "rebalance") | .reason | test("paused by .*autopilot test")'; }
wait_for 10 says_paused ||
    fail "the rebalance run does not say it is paused: $(jq -c .autopilot.runs "$T/st.json")"
# the page and the metrics read a cluster status cached for a few seconds
page_paused() { local p; p=$(curl -sf "$COORD_URL/") && grep -q 'Paused</b>.*autopilot test' <<<"$p"; }
wait_for 20 page_paused || fail "the status page does not show the pause"
metric_is() { local m; m=$(curl -sf "$COORD_URL/metrics") && grep -q "^$1 $2\$" <<<"$m"; }
wait_for 20 metric_is ferry_autopilot_paused 1 || fail "metrics: not paused"
expect_exit 1 "$FERRY_BIN" rebalance --config "$C"
assert_contains "$ERR" "paused" "ferry rebalance refused while paused"
expect_exit 1 "$FERRY_BIN" tier --config "$C"
assert_contains "$ERR" "--force" "ferry tier refused while paused"
ok "paused during the drain: no move started after the pause + 1 interval, node2 kept $left2 of $before2 slices; status, page and metrics show it; rebalance and tier refused"

"$FERRY_BIN" resume --config "$C" >/dev/null || fail "resume"
drained() { [ "$(slices_on node2)" = 0 ] && [ "$(in_flight)" = 0 ]; }
wait_for 90 drained ||
    fail "the drain did not finish after resume: $(grep autopilot "$T/coord.log" | tail -3)"
# the run's line is logged once the run returns, after its last move is done (which the wait
# above sees first)
drain_logged() { grep -q 'action=rebalance result="ok" reason="[^"]*shard node2 draining' "$T/coord.log"; }
wait_for 30 drain_logged ||
    fail "no rebalance logged with the reason 'shard node2 draining': $(grep 'action=rebalance' "$T/coord.log" | tail -3)"
node2_empty() { [ "$(chq "$(lab_url "$L" node2)" "SELECT count() FROM events")" = 0 ]; }
wait_for 30 node2_empty ||
    fail "node2 still holds rows after its drain"
wait_for 20 metric_is ferry_autopilot_paused 0 || fail "metrics: still paused"
ok "resumed: the autopilot drained node2 (0 slices, 0 rows left)"

# ---- a window that excludes now: no move starts ------------------------------------------------
stop_pid "$COORD_PID" coordinator
now_min=$((10#$(date -u +%H) * 60 + 10#$(date -u +%M)))
w0=$(((now_min + 120) % 1440)); w1=$(((now_min + 180) % 1440))
WIN=$(printf '%02d:%02d-%02d:%02d' $((w0 / 60)) $((w0 % 60)) $((w1 / 60)) $((w1 % 60)))
coord_conf "$T/coord2.conf" "$WIN"
start_coord "$T/coord2.conf" coord2
"$FERRY_BIN" shard add node2 --config "$C" >/dev/null || fail "shard add node2 (active again)"
"$FERRY_BIN" rebalance --dry-run --config "$C" --json >"$T/plan.json"
[ "$(jq -s '[.[] | select(.event == "plan")][0].moved' "$T/plan.json")" -gt 0 ] ||
    fail "node2 active again but the plan is empty: the window test would prove nothing"
wait_for 30 grep -q 'action=rebalance result="outside window"' "$T/coord2.log" ||
    fail "the rebalance did not report the window: $(grep autopilot "$T/coord2.log" | tail -3)"
sleep 3
! grep -q 'autopilot move starts' "$T/coord2.log" || fail "a move started outside the window"
assert_eq 0 "$(slices_on node2)" "node2 gained no slice outside the window"
"$FERRY_BIN" status --config "$T/coord2.conf" >"$T/st.txt" # the config with the window
assert_contains "$(cat "$T/st.txt")" "maintenance window $WIN UTC: opens" "ferry status shows the window"
assert_contains "$(cat "$T/st.txt")" "outside the window $WIN UTC" "ferry status shows why nothing moved"
wait_for 20 metric_is ferry_autopilot_window_open 0 || fail "metrics: window open"
ok "window $WIN (now excluded): the plan moves node2's share back but no move started, and status says why"

# ---- max_moves = 2 held throughout: never more than 2 moves between their start and end lines ----
peak=$(cat "$T/coord.log" "$T/coord2.log" | awk '/autopilot move starts/ { n++; if (n > m) m = n }
    /autopilot move (done|failed)/ { n-- } END { print m + 0 }')
started=$(cat "$T/coord.log" "$T/coord2.log" | grep -c 'autopilot move starts' || true)
[ "$started" -ge 8 ] || fail "only $started moves started in the whole scenario"
[ "$peak" -le 2 ] || fail "$peak moves ran at once (max_moves = 2)"
[ "$peak" = 2 ] || fail "the moves never ran 2 at a time (peak $peak): the limit was not exercised"
ok "$started moves, at most $peak at a time (max_moves = 2)"

# ---- the end: every batch once, every read exact -------------------------------------------------
touch "$T/stop"
wait "$LOADPID" || fail "the writer gave up: $(cat "$T/load.err") $(cat "$T/stats.json" 2>/dev/null)"
wait "$READPID" || true
echo "# writer: $(cat "$T/stats.json")"
batches=$(jq .batches "$T/stats.json")
[ "$batches" -ge 10 ] || fail "only $batches batches were written during the scenario"
nreads=$(grep -c . "$T/reads.txt")
nbad=$(grep -vc '^ok$' "$T/reads.txt" || true)
[ "$nbad" = 0 ] || fail "$nbad of $nreads reads differed from the reference: $(grep -v '^ok$' "$T/reads.txt" | head -3)"
[ "$nreads" -ge 10 ] || fail "only $nreads reads ran: $(tail -5 "$T/reader.err")"
want=$(jq -r 'to_entries | sort_by(.key)[] | "\(.key) \(.value[0]) \(.value[1])"' "$T/sent.json")
got=$(rq "SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE day = $TODAY GROUP BY tenant ORDER BY tenant FORMAT TSV" |
    awk '{ if ($2 != $3) print "DUPLICATE", $0; else print $1, $2, $4 }')
assert_eq "$want" "$got" "rows written during the scenario, per tenant: count, sum of ids (and no id twice)"
total=0
for n in node1 node2 node3; do
    total=$((total + $(chq "$(lab_url "$L" $n)" "SELECT count() FROM events WHERE day = $TODAY")))
done
assert_eq "$(jq '[.[] | .[0]] | add' "$T/sent.json")" "$total" "no copy left behind on any node"
ok "$batches batches ($(jq .retried "$T/stats.json") retried) stored exactly once; $nreads reads, all exact"
done_testing
