# A move of an rf 2 slice never copies from a replica that missed acknowledged writes (issue 22):
# 3-node lab, rf 2, [router] min_insert_replicas = 1. The first replica of acme/0's route (A) is
# killed while writes go through the router, which acknowledges them from the other replica (B)
# and records the slice for repair (A missed them). A comes back, unrepaired. Then:
#  - `ferry move --to T` without --from (which used to copy from the route's first shard, A)
#    copies from B: every acknowledged row is on the target T exactly once;
#  - `ferry move --from A --to B` is refused (a copy from A would lose the rows it missed), and
#    changes nothing;
#  - `ferry repair` then makes A equal to the target and clears the record.
# Catalog: SQLite; move_rf_stale_zk.sh runs the same on ZooKeeper (MOVE_CATALOG=zk).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

L=$T/lab
lab_up "$L" --nodes 3
C=$L/rf2.conf
lab_rf_conf "$L" 2 "$C"
if [ "${MOVE_CATALOG:-sqlite}" = zk ]; then
    zk_start
    sed -i "s#^catalog = .*#catalog = $(zk_url /movestale)#" "$C"
fi
events_conf "$C" "shard_timeout = 5s" "min_insert_replicas = 1"
declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$L" "$n"); done
events_table "${U[@]}"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add"
route_of() { "$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")'; }
# the route's shards in name order
route_set() { "$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | sort | join(",")'; }
pair() { printf '%s\n%s\n' "$1" "$2" | sort | paste -sd,; }
ROUTE=$(route_of)
A=${ROUTE%%,*}; B=${ROUTE##*,}
[ "$A" != "$B" ] && [ -n "$A" ] && [ -n "$B" ] || fail "acme not on two shards: $ROUTE"
for n in node1 node2 node3; do [ "$n" = "$A" ] || [ "$n" = "$B" ] || TGT=$n; done
echo "# acme/0 on $A (first, will miss writes) and $B; target $TGT"

bg_start "$T/router.log" "$FERRY_BIN" router --config "$C" --listen 127.0.0.1:0 --port-file "$T/router.port"
ROUTER_PID=$BG_PID
wait_for 20 test -s "$T/router.port"
R=http://127.0.0.1:$(cat "$T/router.port")
wait_for 60 curl -sf "$R/ping"

# batch I DAY: 200 rows of acme (ids I*200..), one insert with a fixed token; prints the HTTP status
batch() {
    local i=$1 day=$2
    seq $((i * 200)) $((i * 200 + 199)) | awk -v d="$day" '{printf "acme\t%s\t%d\t%d\tv%d\n", d, $1 % 97, $1, $1}' >"$T/batch.tsv"
    curl -sS -m 60 -D "$T/last.hdr" -o "$T/last.body" -w '%{http_code}' --data-binary @"$T/batch.tsv" \
        "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV' '$q|@uri')&insert_deduplication_token=acme-b$i"
}
count() { chq "$1" "SELECT count() FROM events WHERE tenant = 'acme'"; }
uniq_ids() { chq "$1" "SELECT uniqExact(id) FROM events WHERE tenant = 'acme'"; }
for i in 0 1; do assert_eq 200 "$(batch "$i" 20261110)" "batch $i accepted"; done
for n in "$A" "$B"; do assert_eq 400 "$(count "${U[$n]}")" "400 rows on $n"; done

# ---- A (the route's first shard) down: writes acknowledged by B alone ----------------------------
kill -KILL "$(lab_pid "$L" "$A")"
wait_for 30 sh -c "! curl -s -m 1 ${U[$A]}/ping >/dev/null"
for i in 2 3 4 5 6 7; do
    d=20261110; [ $((i % 2)) = 1 ] && d=20261111
    code=$(batch "$i" "$d")
    [ "$code" = 200 ] || fail "batch $i with $A down: HTTP $code: $(cat "$T/last.body")"
done
total=1600
assert_eq "$total" "$(count "${U[$B]}")" "every acknowledged row on $B"
"$FERRY_BIN" status --config "$C" --json >"$T/st.json" || fail "ferry status"
assert_eq "acme 0 $A $B" "$(jq -r '.repair_needed[] | "\(.tenant) \(.split) \(.missed) \(.held)"' "$T/st.json")" "acme/0 recorded for repair: missed by $A, held by $B"
ok "$A stopped: 6 batches acknowledged by $B alone, the slice recorded for repair"

# ---- A back, not repaired --------------------------------------------------------------------------
lab_up "$L"
U[$A]=$(lab_url "$L" "$A")
wait_for 60 curl -sf "${U[$A]}/ping"
assert_eq 400 "$(count "${U[$A]}")" "$A is back with only the 400 rows it took"

# a move without --from: the source is the replica that took every acknowledged write
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to "$TGT" --grace 300 --json >"$T/m1.json" 2>"$T/m1.err" ||
    fail "move: $(tail -5 "$T/m1.err")"
assert_eq "$total" "$(count "${U[$TGT]}")" "every acknowledged row on $TGT"
assert_eq "$total" "$(uniq_ids "${U[$TGT]}")" "each exactly once on $TGT"
assert_eq "$B" "$(jq -r 'select(.from != null) | .from' "$T/m1.json" | tail -1)" "the move read from $B"
assert_eq "$(pair "$A" "$TGT")" "$(route_set)" "the route: $A and the target $TGT"
ok "ferry move --to $TGT copied from $B: all $total acknowledged rows on $TGT, each once"

# the record follows the copy: $TGT (a copy of $B) holds every acknowledged row, so routers keep
# reads on it and off $A, which is still in the route unrepaired
"$FERRY_BIN" status --config "$C" --json >"$T/st2.json" || fail "ferry status"
assert_eq "acme 0 $A $TGT" "$(jq -r '.repair_needed[] | "\(.tenant) \(.split) \(.missed) \(.held)"' "$T/st2.json")" \
    "the record: missed by $A, held by the target $TGT (was $B)"
wait_for 30 sh -c "[ \"\$(curl -sS -m 10 '$R/?query=SELECT%20count()%20FROM%20events%20WHERE%20tenant%3D%27acme%27')\" = $total ]"
for i in 1 2 3 4 5 6 7 8 9 10; do
    assert_eq "$total" "$(curl -sS -m 10 "$R/?query=SELECT%20count()%20FROM%20events%20WHERE%20tenant%3D%27acme%27")" \
        "read $i through the router: every acknowledged row (not $A's 400)"
done
ok "after the move the record names $TGT as the holder: 10 reads through the router see all $total rows"

# $A down again: a write acknowledged by $TGT alone keeps $TGT the holder (against $B, the
# record would have no holder left: every replica would have missed something)
kill -KILL "$(lab_pid "$L" "$A")"
wait_for 30 sh -c "! curl -s -m 1 ${U[$A]}/ping >/dev/null"
code=$(batch 8 20261111)
[ "$code" = 200 ] || fail "batch 8 with $A down: HTTP $code: $(cat "$T/last.body")"
total=1800
assert_eq "$total" "$(count "${U[$TGT]}")" "batch 8 on $TGT"
"$FERRY_BIN" status --config "$C" --json >"$T/st3.json" || fail "ferry status"
assert_eq "acme 0 $A $TGT" "$(jq -r '.repair_needed[] | "\(.tenant) \(.split) \(.missed) \(.held)"' "$T/st3.json")" \
    "a write acknowledged by $TGT alone keeps it the holder"
lab_up "$L"
U[$A]=$(lab_url "$L" "$A")
wait_for 60 curl -sf "${U[$A]}/ping"
ok "$A down again: batch 8 acknowledged by $TGT, still the holder"

# a move from the replica that missed writes is refused, and changes nothing
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --from "$A" --to "$B" --grace 300 >"$T/m0.out" 2>"$T/m0.err" &&
    fail "a move copying from $A (which missed acknowledged writes) was accepted"
assert_contains "$(cat "$T/m0.err")" "missed writes" "the refusal says why"
assert_contains "$(cat "$T/m0.err")" "ferry repair" "the refusal names the way out"
assert_eq "$(pair "$A" "$TGT")" "$(route_set)" "the route is unchanged"
assert_eq 0 "$(count "${U[$B]}")" "nothing copied back to $B"
ok "ferry move --from $A --to $B (A missed writes, unrepaired) is refused"

# the record still names $A (and the target as the holder): repair copies from the target and
# clears it
"$FERRY_BIN" repair --config "$C" --grace 500 --json >"$T/rep.json" 2>"$T/rep.err" || fail "repair: $(tail -5 "$T/rep.err")"
grep -q 'are on every replica now' "$T/rep.err" || fail "repair did not clear the record: $(tail -3 "$T/rep.err")"
for n in "$A" "$TGT"; do
    assert_eq "$total" "$(count "${U[$n]}")" "$n holds every acknowledged row after the repair"
    assert_eq "$total" "$(uniq_ids "${U[$n]}")" "each once on $n"
done
ok "ferry repair after the move: $A and $TGT both hold all $total rows, the record is cleared"

kill -TERM "$ROUTER_PID" 2>/dev/null || true
done_testing
