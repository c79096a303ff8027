# The read router with rf = 2 in a 4-node lab: every read picks one replica per slice and, when a
# node is kill -9'd, fails over to the other replica without reading a slice twice. A read-heavy
# loop (exact queries: count, sum, GROUP BY, ORDER BY LIMIT; single-server and merged plans)
# runs while one node is killed and while another tenant is being ingested: every answer stays
# identical to the one computed before. Writes to a slice with a replica on the dead node fail
# naming it (the documented write path) and reach the live replica. A query error is the
# user's (not failed over); a slice with both replicas down fails naming both. The node comes
# back, `ferry repair` makes its partitions identical (fingerprints) and the router sends it
# reads again (its query count in GET /ferry/router grows). Last, the node hangs (SIGSTOP):
# reads that picked it time out and fail over.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"

L=$T/lab
lab_up "$L" --nodes 4
C=$L/rf2.conf
lab_rf_conf "$L" 2 "$C"
events_conf "$C" "shard_timeout = 5s" "replica_error_half_life = 2s"
NODES="node1 node2 node3 node4"
declare -A U
for n in $NODES; do U[$n]=$(lab_url "$L" "$n"); done
DDL="CREATE TABLE events (tenant String, day UInt32, split UInt16, uid UInt64, id UInt64, v UInt64)
     ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY id
     SETTINGS non_replicated_deduplication_window = 10000, storage_policy = 'tiered'"
for n in $NODES; do chq "${U[$n]}" "$DDL" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
# read tenants r1..r4 (r1 with 3 splits: its slices spread over several shards), one ingested
# tenant w
"$FERRY_BIN" tenant add r1 --splits 3 --config "$C" >/dev/null || fail "tenant add r1"
"$FERRY_BIN" tenant add r2 r3 r4 w --config "$C" >/dev/null || fail "tenant add"
for t in r1 r2 r3 r4 w; do "$FERRY_BIN" route --config "$C" --tenant "$t" --json; done | jq -s '{slices: [.[].slices[]]}' >"$T/route.json"
shards_of() { jq -r --arg t "$1" '[.slices[] | select(.tenant == $t) | .shards[]] | unique | join(" ")' "$T/route.json"; }
for t in r1 r2 r3 r4 w; do
    n=$(jq -r --arg t "$t" '[.slices[] | select(.tenant == $t) | .shards | length] | min' "$T/route.json")
    assert_eq 2 "$n" "every slice of $t has two replicas"
done
WS=$(jq -r '.slices[] | select(.tenant == "w") | .shards | join(" ")' "$T/route.json")
V=${WS%% *}   # the victim: w's first replica in route order (in_order prefers it)
LIVE=${WS##* }
ok "rf = 2: w on $WS; the victim is $V"

bg_start "$T/router.log" "$FERRY_BIN" router --config "$C" --listen 127.0.0.1:0 --port-file "$T/router.port"
ROUTER_PID=$BG_PID
wait_for 20 test -s "$T/router.port"
R=http://127.0.0.1:$(cat "$T/router.port")
wait_for 10 curl -sf "$R/ping"
# a second router with load_balancing = in_order and errors forgotten at once: every query
# reads w's slice from V first, so with V down every query that reads it fails over
sed 's/^replica_error_half_life = 2s$/replica_error_half_life = 0s\nload_balancing = in_order/' "$C" >"$L/inorder.conf"
bg_start "$T/router0.log" "$FERRY_BIN" router --config "$L/inorder.conf" --listen 127.0.0.1:0 --port-file "$T/router0.port"
ROUTER0_PID=$BG_PID
wait_for 20 test -s "$T/router0.port"
R0=http://127.0.0.1:$(cat "$T/router0.port")
wait_for 10 curl -sf "$R0/ping"

# insert TENANT FROM COUNT DAY [TOKEN]: rows id FROM..FROM+COUNT-1 through the router; prints
# the HTTP status, the body to $T/ins.body
insert() {
    local t=$1 from=$2 count=$3 day=$4 token=${5:-$1-$2}
    seq "$from" $((from + count - 1)) | awk -v t="$t" -v d="$day" '{printf "%s\t%s\t%d\t%d\t%d\n", t, d, $1 * 7919 % 1000, $1, $1 % 1013}' >"$T/ins.$t.tsv"
    curl -sS -m 60 -o "$T/ins.body" -w '%{http_code}' --data-binary @"$T/ins.$t.tsv" \
        "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV' '$q|@uri')&insert_deduplication_token=$token"
}
for t in r1 r2 r3 r4 w; do
    for b in 0 1 2; do assert_eq 200 "$(insert "$t" $((b * 3000)) 3000 $((20261110 + b % 2)))" "load $t batch $b"; done
done
ok "5 tenants loaded through the router (9000 rows each, on both replicas)"

# rq SQL: the router's answer (fails on non-200)
rq() { chq "$R" "$1"; }
# the corpus: exact queries, single-server (one tenant) and merged (several tenants / all)
Q=(
    "SELECT count() FROM events WHERE tenant = 'r2'"
    "SELECT sum(v), min(id), max(id) FROM events WHERE tenant = 'r3'"
    "SELECT day, count(), sum(v) FROM events WHERE tenant = 'r1' GROUP BY day ORDER BY day"
    "SELECT id, v FROM events WHERE tenant = 'r4' ORDER BY v DESC, id LIMIT 5"
    "SELECT tenant, count(), sum(v) FROM events WHERE tenant IN ('r1', 'r2', 'r3', 'r4') GROUP BY tenant ORDER BY tenant"
    "SELECT split, count() FROM events WHERE tenant = 'r1' GROUP BY split ORDER BY split"
    "SELECT tenant, id FROM events WHERE tenant IN ('r1', 'r3') ORDER BY id DESC, tenant LIMIT 7"
    "SELECT count(), uniqExact(tenant, id) FROM events WHERE tenant != 'w'"
)
declare -a E
for i in "${!Q[@]}"; do E[$i]=$(rq "${Q[$i]}"); done
# cross-check the expected answers against one replica per slice, read directly
assert_eq "9000" "$(rq "${Q[0]}")" "r2 count"
direct=$(for t in r1 r2 r3 r4; do
    for s in $(jq -r --arg t "$t" '.slices[] | select(.tenant == $t) | "\(.split):\(.shards[0])"' "$T/route.json"); do
        chq "${U[${s#*:}]}" "SELECT count() FROM events WHERE tenant = '$t' AND split = ${s%%:*}"; echo
    done
done | awk '{s += $1} END {print s}')
assert_eq 36000 "$direct" "the read tenants hold 36000 rows (read on one replica of each slice)"
assert_eq "$(printf '36000\t36000')" "${E[7]}" "the router's fan-out count"
ok "${#Q[@]} exact queries computed before any failure"

status() { curl -sf "$R/ferry/router"; }
node_queries() { status | jq -r --arg n "$1" '.reads.shards[$n].queries'; }
# both replicas serve reads: over 40 single-tenant reads of a slice on V, V gets some, the
# other replica some
VT=""
for t in r2 r3 r4; do case " $(shards_of "$t") " in *" $V "*) VT=$t ;; esac; done
[ -n "$VT" ] || VT=w
before=$(status)
for _ in $(seq 40); do rq "SELECT count() FROM events WHERE tenant = '$VT'" >/dev/null; done
after=$(status)
for n in $(shards_of "$VT"); do
    d=$(($(jq -r --arg n "$n" '.reads.shards[$n].queries' <<<"$after") - $(jq -r --arg n "$n" '.reads.shards[$n].queries' <<<"$before")))
    [ "$d" -ge 5 ] || fail "replica $n of $VT got $d of 40 reads (random load balancing)"
    echo "# $n: $d of 40 reads of $VT"
done
ok "reads of one slice are spread over both replicas (load_balancing = random)"

# ---- a query error is the user's: passed through, not failed over ----------------------------
fo0=$(status | jq .reads.failovers)
code=$(curl -sS -o "$T/err.body" -w '%{http_code}' "$R/" --data-binary "SELECT nosuchcolumn FROM events WHERE tenant = 'r2'")
[ "$code" != 200 ] || fail "a bad query succeeded"
assert_contains "$(cat "$T/err.body")" "UNKNOWN_IDENTIFIER" "ClickHouse's own error comes back"
assert_eq "$fo0" "$(status | jq .reads.failovers)" "no failover for a query error"
ok "a query error (HTTP $code) goes back as ClickHouse reported it, without failover"

# ---- reads (and ingestion) while V is kill -9'd ----------------------------------------------
reader() {
    local n=0 bad=0 i got body
    while [ ! -e "$T/stop_reads" ]; do
        for i in "${!Q[@]}"; do
            got=$(curl -sS -m 60 -w "\n%{http_code}" "$R/" --data-binary "${Q[$i]}" 2>&1) || true
            body=$(printf '%s' "${got%$'\n'*}") # without trailing newlines, as E[] holds it
            if [ "${got##*$'\n'}" != 200 ] || [ "$body" != "${E[$i]}" ]; then
                bad=$((bad + 1))
                printf 'query %s: %s\n' "$i" "$got" >>"$T/read_errors"
            fi
            n=$((n + 1))
        done
        echo "$n" >"$T/reads_done"
    done
    echo "$n $bad" >"$T/reader.out"
}
at_exit "touch $T/stop_reads"
reader &
RPID=$!
wait_for 60 bash -c "[ \$(cat '$T/reads_done' 2>/dev/null || echo 0) -ge 16 ]"
KPID=$(lab_pid "$L" "$V")
kill -KILL "$KPID"
wait_for 30 sh -c "! curl -s -m 1 ${U[$V]}/ping >/dev/null"
killed_at=$(cat "$T/reads_done")
# ingestion while V is down: w's batches go to both replicas; with V dead each fails naming it,
# and its rows reach the live replica
wfail=0
for b in 3 4 5 6 7; do
    code=$(insert w $((b * 3000)) 3000 20261112)
    if [ "$code" != 200 ]; then
        wfail=$((wfail + 1))
        assert_contains "$(cat "$T/ins.body")" "$V" "the failed write names the dead shard"
    fi
done
assert_eq 5 "$wfail" "every batch to a slice with a replica on the dead node fails"
assert_eq 24000 "$(chq "${U[$LIVE]}" "SELECT count() FROM events WHERE tenant = 'w'")" "the failed batches' rows are on the live replica $LIVE"
ok "writes with $V down: every batch fails naming $V, its rows reach $LIVE (no partial success)"
# deterministic failovers (the in_order router): a merged fan-out and a single-server read of w
st0() { curl -sf "$R0/ferry/router"; }
a=$(st0)
assert_eq "${E[7]}" "$(chq "$R0" "${Q[7]}")" "fan-out over every slice with $V down (in_order router)"
b=$(st0)
[ "$(jq .reads.failovers <<<"$b")" -gt "$(jq .reads.failovers <<<"$a")" ] || fail "the fan-out did not fail over: $b"
[ "$(jq .reads.merged <<<"$b")" -gt "$(jq .reads.merged <<<"$a")" ] || fail "the fan-out was not a merged plan: $b"
assert_eq 24000 "$(chq "$R0" "SELECT count() FROM events WHERE tenant = 'w'")" "w's count with $V down (in_order router)"
c=$(st0)
[ "$(jq .reads.failovers <<<"$c")" -gt "$(jq .reads.failovers <<<"$b")" ] || fail "the single read did not fail over: $c"
ok "in_order router with $V down: a merged fan-out and a single-server read each failed over, exact"
wait_for 120 bash -c "[ \$(cat '$T/reads_done') -ge $((killed_at + 48)) ]"
touch "$T/stop_reads"
wait "$RPID" || fail "reader failed"
read -r nreads nbad <"$T/reader.out"
echo "# reader: $nreads reads, $nbad wrong or failed ($((nreads - killed_at)) after the kill)"
[ -s "$T/read_errors" ] && head -5 "$T/read_errors"
assert_eq 0 "$nbad" "every read during the kill and the ingestion succeeded with the expected answer"
nfo=$(grep -c 'read failover' "$T/router.log" || true)
[ "$nfo" -ge 1 ] || fail "no failover logged"
grep -m 2 'read failover' "$T/router.log" | sed 's/^/# /' # -m: under pipefail, head -2 could SIGPIPE grep
[ "$(status | jq -r --arg n "$V" '.reads.shards[$n].errors')" -ge 1 ] || fail "no error counted against $V"
ok "kill -9 of $V: $((nreads - killed_at)) reads after it, all identical ($nfo failovers logged, errors counted against $V)"
# ---- both replicas of a slice down: a clear error naming them ----------------------------------
kill -KILL "$(lab_pid "$L" "$LIVE")"
wait_for 30 sh -c "! curl -s -m 1 ${U[$LIVE]}/ping >/dev/null"
code=$(curl -sS -o "$T/both.body" -w '%{http_code}' "$R/" --data-binary "SELECT count() FROM events WHERE tenant = 'w'")
[ "$code" != 200 ] || fail "a read with both replicas down succeeded"
assert_contains "$(cat "$T/both.body")" "no replica of slice w/0 could be reached" "the error says so"
assert_contains "$(cat "$T/both.body")" "$V" "and names $V"
assert_contains "$(cat "$T/both.body")" "$LIVE" "and names $LIVE"
ok "both replicas of w down ($V, $LIVE): HTTP $code, '$(head -c 170 "$T/both.body")...'"

# ---- V comes back: repaired, and serves reads again ------------------------------------------
lab_up "$L"
for n in $NODES; do U[$n]=$(lab_url "$L" "$n"); done
wait_for 60 curl -sf "${U[$V]}/ping"
before_v=$(chq "${U[$V]}" "SELECT count() FROM events WHERE tenant = 'w'")
[ "$before_v" -lt 24000 ] || fail "$V missed no writes ($before_v)"
"$FERRY_BIN" repair --config "$C" --grace 500 --json >"$T/rep.json" 2>"$T/rep.err" ||
    fail "repair failed: $(tail -5 "$T/rep.json" "$T/rep.err")"
S=$(jq -c 'select(.event == "summary")' "$T/rep.json")
echo "# repair: $S"
assert_eq 0 "$(jq .failed <<<"$S")" "no partition failed"
[ "$(jq .repaired <<<"$S")" -ge 1 ] || fail "nothing repaired: $S"
fp() { chq "$1" "SELECT _partition_id, count(), sum(cityHash64(*)), groupBitXor(cityHash64(*)) FROM events WHERE tenant = '$2' GROUP BY 1 ORDER BY 1"; }
for t in r1 r2 r3 r4 w; do
    set -- $(shards_of "$t")
    if [ "$t" = r1 ]; then continue; fi # several slices on different pairs: compared below
    assert_eq "$(fp "${U[$1]}" "$t")" "$(fp "${U[$2]}" "$t")" "$t: identical per-partition fingerprints on $1 and $2"
done
assert_eq 24000 "$(chq "${U[$V]}" "SELECT count() FROM events WHERE tenant = 'w'")" "$V holds every row of w"
ok "$V back ($before_v of 24000 rows of w); ferry repair made every partition identical"

for i in "${!Q[@]}"; do assert_eq "${E[$i]}" "$(rq "${Q[$i]}")" "query $i after the repair"; done
# $V's error count (raised while it was down, decaying with a 2 s half-life) must fall to the
# other replica's before the random policy picks it again, as in ClickHouse: read until it
# does, at most 60 s.
q0=$(node_queries "$V")
q1=$q0
reads=0
t_end=$(($(date +%s) + 60))
while [ "$q1" -le "$q0" ] && [ "$(date +%s)" -lt "$t_end" ]; do
    for _ in $(seq 10); do rq "SELECT count() FROM events WHERE tenant = '$VT'" >/dev/null; rq "SELECT count() FROM events WHERE tenant = 'w'" >/dev/null; done
    reads=$((reads + 20))
    q1=$(node_queries "$V")
done
[ "$q1" -gt "$q0" ] || fail "the router sends no reads to $V after its return ($q0 -> $q1 over $reads reads; status: $(status | jq -c .reads.shards))"
assert_eq 24000 "$(rq "SELECT count() FROM events WHERE tenant = 'w'")" "w read through the router"
ok "$V serves reads again: $((q1 - q0)) of $reads reads went to it"
# ---- a timeout (the node hangs: SIGSTOP) fails over too --------------------------------------
VPID=$(lab_pid "$L" "$V")
kill -STOP "$VPID"
at_exit "kill -CONT $VPID 2>/dev/null || true"
n_to=0
for i in $(seq 12); do
    s0=$(date +%s%N)
    assert_eq 24000 "$(rq "SELECT count() FROM events WHERE tenant = 'w'")" "read $i of w with $V hanging"
    ms=$((($(date +%s%N) - s0) / 1000000))
    if [ "$ms" -ge 4000 ]; then n_to=$((n_to + 1)); fi
    if [ "$n_to" -ge 1 ] && [ "$i" -ge 4 ]; then break; fi
done
kill -CONT "$VPID"
[ "$n_to" -ge 1 ] || fail "no read was sent to the hanging $V"
grep -q 'read failover.*timed out' "$T/router.log" || fail "no timeout failover logged: $(grep 'read failover' "$T/router.log" | tail -2)"
ok "$V hanging (SIGSTOP): reads that picked it waited shard_timeout (5s), then failed over to $LIVE; all exact"
kill -TERM "$ROUTER_PID" "$ROUTER0_PID" 2>/dev/null || true
done_testing
