# The write router against a 3-node lab: 200 tenants ingesting in every format from concurrent
# clients while a split count is raised and routes switch; every row stored exactly once, on its
# slice's serving shard; retries deduplicated; errors clear; passthrough.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
TOOL=$FERRY_BUILD_DIR/tests/tools/catalog_tool
LOAD="python3 $FERRY_SOURCE_DIR/tests/lib/router_load.py"

LAB=$T/lab
lab_up "$LAB" --nodes 3
CONF=$LAB/ferry.conf
N1=$(lab_url "$LAB" node1); N2=$(lab_url "$LAB" node2); N3=$(lab_url "$LAB" node3)
NODES=("$N1" "$N2" "$N3")
events_conf "$CONF" "passthrough = $N1" "flush_bytes = 64K" "max_request_bytes = 1M" "shard_timeout = 20s" \
    "[splits]" "target_slice_bytes = 1G"
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"
CATALOG=$(sed -n 's/^catalog = //p' "$CONF")

events_table "${NODES[@]}"
ok "managed table created on 3 nodes with a deduplication window"

# 200 tenants: most with 1 split, every tenth with 3.
"$FERRY_BIN" tenant add $(seq 0 10 190 | sed 's/^/t/') --splits 3 --config "$CONF" >/dev/null ||
    fail "tenant add (3 splits)"
"$FERRY_BIN" tenant add $(seq 0 199 | awk '$1 % 10 != 0 {print "t" $1}') --config "$CONF" >/dev/null ||
    fail "tenant add (1 split)"
expect_exit 0 "$FERRY_BIN" tenant show t10 --json --config "$CONF"
assert_eq "$(jq -r '.splits' <<<"$OUT")" 3 "t10 has 3 splits"
assert_eq "$(jq -r '.slices | length' <<<"$OUT")" 3 "t10 has 3 slices"
[ "$(jq -r '[.slices[].route] | unique | length' <<<"$OUT")" -ge 2 ] || fail "t10's slices all on one shard: $OUT"
ok "200 tenants registered; t10's 3 slices placed on different shards"
expect_exit 2 "$FERRY_BIN" tenant set-splits t10 2 --config "$CONF"
assert_contains "$ERR" "only grow"

start_router "$CONF" router
R=$R_URL; ROUTER_PID=$R_PID

# ---- formats round-trip (tricky values), before the load ----
fi_=0
for f in JSONEachRow TSV TSVWithNames CSV CSVWithNames RowBinary; do
    tn=t$((RANDOM % 200))
    # ids of their own per format (a range of 1,000,000 each; random within it): the formats'
    # ranges once overlapped and two formats' rows met (TSV's 9413000 was JSONEachRow's too)
    fi_=$((fi_ + 1))
    base=$((9000000 + fi_ * 1000000 + RANDOM % 500 * 1000))
    res=$($LOAD send "$R" "$f" "$tn" "$base" 20)
    assert_eq "$(head -1 <<<"$res")" 200 "$f insert: $res"
    got=""
    for u in "${NODES[@]}"; do
        got+=$(chq "$u" "SELECT id, v FROM events WHERE id >= $base AND id < $base + 20 FORMAT JSONEachRow")
    done
    want=$(python3 -c "
import sys; sys.path.insert(0, '$FERRY_SOURCE_DIR/tests/lib'); import router_load as L, json
print(json.dumps(sorted([[r[3], r[4]] for r in L.rows_for('$tn', $base, 20)])))")
    have=$(jq -cs 'map([(.id|tonumber), .v]) | sort' <<<"$got")
    assert_eq "$(jq -c . <<<"$have")" "$(jq -c . <<<"$want")" "$f round-trip"
done
ok "each format round-trips (tabs, newlines, quotes, commas, backslashes, unicode, \\N text)"

# ---- load: 4 clients, every format, while a split count rises and routes switch ----
$LOAD load "$R" "$T/sent1.json" --tenants 200 --batches 12 --rows 150 --clients 4 --id-base 0 &
LOADPID=$!
sleep 2
# t5 grows: 1 -> 4 splits mid-run.
"$FERRY_BIN" tenant set-splits t5 4 --config "$CONF" >/dev/null || fail "set-splits t5"
# Switch some routes mid-run (as a move's SWITCH step would): t7/0 and t20/1 to another shard.
old7=$("$FERRY_BIN" route --tenant t7 --split 0 --json --config "$CONF" | jq -r '.slices[0].shards[0]')
new7=node1; [ "$old7" = node1 ] && new7=node2
old20=$("$FERRY_BIN" route --tenant t20 --split 1 --json --config "$CONF" | jq -r '.slices[0].shards[0]')
new20=node3; [ "$old20" = node3 ] && new20=node1
"$TOOL" "$CATALOG" set-route t7 0 "$new7" || fail "set-route"
"$TOOL" "$CATALOG" set-route t20 1 "$new20" || fail "set-route"
SWITCH_VERSION=$("$FERRY_BIN" route --tenant t7 --json --config "$CONF" | jq -r .version)
wait "$LOADPID" || fail "load clients saw errors (see stderr)"
ok "4 concurrent clients x 12 batches x 150 rows across 200 tenants, every format, all accepted"

# After the switch is seen by the router, new rows of t7/0 go only to the new shard.
wait_for 60 bash -c "[ \$(curl -s $R/ferry/router | jq .routing_version) -ge $SWITCH_VERSION ]"
res=$($LOAD send "$R" JSONEachRow t7 7000000 300)
assert_eq "$(head -1 <<<"$res")" 200 "post-switch insert"

# ---- exactly once, on the right shard ----
union_counts() { # tenant rows sum(id) over the 3 nodes, for ids below $1
    for u in "${NODES[@]}"; do
        chq "$u" "SELECT tenant, count(), sum(id) FROM events WHERE id < $1 GROUP BY tenant FORMAT TSV"
        echo
    done | awk 'NF==3 {n[$1]+=$2; s[$1]+=$3} END {for (t in n) print t, n[t], s[t]}' | sort
}
union_counts 1000000 >"$T/stored.txt"
jq -r 'to_entries[] | "\(.key) \(.value[0]) \(.value[1])"' "$T/sent1.json" | sort >"$T/sent.txt"
[ "$(wc -l <"$T/sent.txt")" -ge 190 ] || fail "load reached too few tenants: $(wc -l <"$T/sent.txt")"
diff "$T/sent.txt" "$T/stored.txt" >"$T/diff.txt" || fail "stored rows differ from sent rows: $(head "$T/diff.txt")"
ok "every row sent is stored exactly once (count and sum of ids per tenant, $(wc -l <"$T/sent.txt") tenants)"

# Each node holds only slices it served: compare (tenant, split) per node with the routes.
"$FERRY_BIN" catalog export --config "$CONF" | jq -r '.routes[] | "\(.tenant)/\(.split) \(.shards)"' >"$T/routes.txt"
[ "$(wc -l <"$T/routes.txt")" -ge 200 ] || fail "routes export: $(head -3 "$T/routes.txt")"
for n in 1 2 3; do
    u=${NODES[$((n - 1))]}
    chq "$u" "SELECT DISTINCT tenant, split FROM events WHERE id < 1000000 FORMAT TSV" | while read -r tn sp; do
        [ -n "$tn" ] || continue
        served=$(awk -v k="$tn/$sp" '$1 == k {print $2}' "$T/routes.txt")
        case "$tn/$sp" in
        t7/0) [ "node$n" = "$old7" ] || [ "node$n" = "$new7" ] || echo "t7/0 on node$n" ;;
        t20/1) [ "node$n" = "$old20" ] || [ "node$n" = "$new20" ] || echo "t20/1 on node$n" ;;
        *) [[ ",$served," == *",node$n,"* ]] || echo "$tn/$sp on node$n, served by $served" ;;
        esac
    done
done >"$T/misplaced.txt"
[ ! -s "$T/misplaced.txt" ] || fail "rows on shards that do not serve their slice: $(head -5 "$T/misplaced.txt")"
post=$(for u in "${NODES[@]}"; do chq "$u" "SELECT count() FROM events WHERE id >= 7000000 AND id < 7000300 AND split = 0"; echo; done | paste -sd' ')
t7new=$(chq "$(lab_url "$LAB" "$new7")" "SELECT count() FROM events WHERE id >= 7000000 AND id < 7000300")
assert_eq "$t7new" 300 "rows written after the switch are all on t7/0's new shard ($new7); per node: $post"
ok "rows are only on the shard(s) serving their slice; after a switch, new rows go to the new shard"

# Splits follow xxh3(canonical key) % splits; t5 (raised 1 -> 4 mid-run) uses 1 or 4.
bad=0
for u in "${NODES[@]}"; do
    b=$(chq "$u" "SELECT count() FROM events WHERE id < 1000000 AND tenant != 't5' AND
        split != xxh3(toString(uid)) % (if(toUInt32(substring(tenant, 2)) % 10 = 0, 3, 1))")
    b5=$(chq "$u" "SELECT count() FROM events WHERE tenant = 't5' AND split != 0 AND split != xxh3(toString(uid)) % 4")
    bad=$((bad + b + b5))
done
assert_eq "$bad" 0 "rows whose split is not xxh3(uid) % splits"
t5splits=$(for u in "${NODES[@]}"; do chq "$u" "SELECT DISTINCT split FROM events WHERE tenant = 't5' FORMAT TSV"; echo; done | sort -un | paste -sd,)
ok "each row's split is xxh3(toString(uid)) % its tenant's splits at write time (t5 splits seen: $t5splits)"

# ---- retry with the same query id stores nothing new ----
count_all() { local c=0; for u in "${NODES[@]}"; do c=$((c + $(chq "$u" "SELECT count() FROM events"))); done; echo $c; }
# the same without the named node (which is down)
count_all_but() {
    local c=0 u
    for u in "${NODES[@]}"; do
        [ "$u" = "$(lab_url "$LAB" "$1")" ] && continue
        c=$((c + $(chq "$u" "SELECT count() FROM events")))
    done
    echo $c
}
before=$(count_all)
k=0
for f in JSONEachRow CSV RowBinary; do
    k=$((k + 1))
    res=$($LOAD send "$R" "$f" t10 $((8000000 + k * 1000)) 500 --query-id "retry-$f")
    assert_eq "$(head -1 <<<"$res")" 200 "first $f"
    res=$($LOAD send "$R" "$f" t10 $((8000000 + k * 1000)) 500 --query-id "retry-$f")
    assert_eq "$(head -1 <<<"$res")" 200 "retried $f"
done
after=$(count_all)
assert_eq "$after" $((before + 1500)) "3 formats x 500 rows, each sent twice with the same query_id"
ok "a retried batch (same query_id) is stored once, across shards"

# ---- a failing shard: the others are written, the response names it; a retry completes it ----
# The router takes its shards from the catalog, so a shard fails for real: node3 is killed, and
# brought back (lab up restarts it on its port and data) before the retry.
before=$(count_all)
before_x=$(count_all_but node3)
# A tenant with 3 splits, one of them served by node3 and one elsewhere.
PT=""
for i in $(seq 0 10 190); do
    routes=$("$FERRY_BIN" tenant show "t$i" --json --config "$CONF" | jq -r '[.slices[].route] | join(" ")')
    if [[ " $routes " == *" node3 "* ]] && [[ "$routes" == *node1* || "$routes" == *node2* ]]; then PT=t$i; break; fi
done
[ -n "$PT" ] || fail "no tenant with slices on node3 and elsewhere"
N3PID=$(lab_pid "$LAB" node3)
kill -KILL "$N3PID"
wait_for 30 bash -c "! kill -0 $N3PID 2>/dev/null"
res=$($LOAD send "$R" TSV "$PT" 8100000 400 --query-id partial-1)
code=$(head -1 <<<"$res")
[ "$code" -ge 500 ] || fail "expected an error status, got $res"
assert_contains "$res" "node3"
assert_contains "$res" "written only in part"
mid=$(count_all_but node3)
[ "$mid" -gt "$before_x" ] && [ "$mid" -lt $((before_x + 400)) ] ||
    fail "partial write: before $before_x, after $mid (node1 + node2)"
lab_up "$LAB" >/dev/null
res=$($LOAD send "$R" TSV "$PT" 8100000 400 --query-id partial-1)
assert_eq "$(head -1 <<<"$res")" 200 "retry once node3 is back"
assert_eq "$(count_all)" $((before + 400)) "after the retry every row is stored once"
ok "a failing shard fails only its part (named in the error); retrying the request stores the rest once"

# ---- a shard that accepts connections and never answers: only its part fails, on time ----
# node3 hangs (SIGSTOP): its kernel still accepts connections, nothing answers.
sed -e 's/^shard_timeout = .*/shard_timeout = 4s/' "$CONF" >"$T/slow.conf"
start_router "$T/slow.conf" router3
R3=$R_URL; ROUTER3_PID=$R_PID
before=$(count_all)
N3PID=$(lab_pid "$LAB" node3)
kill -STOP "$N3PID"
at_exit "kill -CONT $N3PID 2>/dev/null || true"
t0=$(date +%s)
res=$($LOAD send "$R3" TSV "$PT" 8600000 3000 --query-id slow-1)
t1=$(date +%s)
kill -CONT "$N3PID"
assert_contains "$res" "node3"; assert_contains "$res" "written only in part"
[ $((t1 - t0)) -lt 60 ] || fail "the request took $((t1 - t0)) s with shard_timeout 4s"
res=$($LOAD send "$R" TSV "$PT" 8600000 3000 --query-id slow-1)
assert_eq "$(head -1 <<<"$res")" 200 "retry once node3 runs again"
assert_eq "$(count_all)" $((before + 3000)) "after the retry every row is stored once"
stop_router "$ROUTER3_PID"
ok "a shard that never answers fails only its part after shard_timeout ($((t1 - t0)) s); the others are written; a retry completes it once"

# ---- errors ----
before=$(count_all)
errq() { curl -s -w '\n%{http_code}' "$R/?query=$(jq -rn --arg q "$1" '$q|@uri')" --data-binary "$2"; }
out=$(errq "INSERT INTO events FORMAT JSONEachRow" $'{"tenant":"t1","day":20261101,"uid":1,"id":1,"v":"a"}\n{"tenant":"t1","day":2026')
assert_contains "$out" "cut short"; assert_contains "$out" "nothing was written"; assert_eq "${out##*$'\n'}" 400 "status"
out=$(errq "INSERT INTO events FORMAT JSONEachRow" $'{"tenant":"nobody","day":20261101,"uid":1,"id":1,"v":"a"}\n')
assert_contains "$out" "tenant 'nobody' is not registered"; assert_eq "${out##*$'\n'}" 400 "status"
out=$(errq "INSERT INTO events FORMAT TSVWithNames" $'tenant\tday\tid\tv\nt1\t20261101\t1\ta\n')
assert_contains "$out" "no split key column 'uid'"; assert_contains "$out" "THERE_IS_NO_COLUMN"
out=$(errq "INSERT INTO events FORMAT CSV" $'"t1",20261101,5,6\n')
assert_contains "$out" "field(s), expected"
out=$(errq "INSERT INTO events FORMAT Parquet" "xx")
assert_contains "$out" "format Parquet is not routed"; assert_eq "${out##*$'\n'}" 501 "status"
out=$(errq "INSERT INTO events VALUES ('t1', 20261101, 0, 1, 1, 'a')" "")
assert_contains "$out" "is a managed table"
$LOAD encode JSONEachRow t1 8200000 20000 >"$T/big.json"
# declared far over max_request_bytes (Content-Length): refused before a byte is read
out=$(curl -s -w '\n%{http_code}' "$R/?query=INSERT%20INTO%20events%20FORMAT%20JSONEachRow" --data-binary @"$T/big.json")
assert_eq "${out##*$'\n'}" 413 "oversize status (Content-Length)"
assert_contains "$out" "max_request_bytes" "oversize (Content-Length)"
assert_contains "$out" "nothing was read" "oversize (Content-Length)"
assert_eq "$before" "$(count_all)" "nothing written for an oversize Content-Length"
# found over it while streaming (chunked): the rows before the limit are written, and said so
out=$(curl -s -w '\n%{http_code}' -H 'Transfer-Encoding: chunked' "$R/?query=INSERT%20INTO%20events%20FORMAT%20JSONEachRow" --data-binary @"$T/big.json")
assert_eq "${out##*$'\n'}" 413 "oversize status"
assert_contains "$out" "max_request_bytes"
assert_contains "$out" "already written"
after=$(count_all)
# The oversize request says how much it wrote (complete rows before the limit, flushed).
written=$((after - before))
assert_contains "$out" "$written row(s) before it were already written"
ok "malformed rows, unknown tenant, missing split key, unsupported format, VALUES and oversize: clear errors, writes reported"

# More bad input: no tenant column, a row without its split key, cut-short RowBinary, a format
# in the body-statement form, and a malformed row after streams opened (rows before it written,
# and the message says exactly how many).
before=$(count_all)
out=$(errq "INSERT INTO events FORMAT TSVWithNames" $'day\tuid\tid\tv\n20261101\t1\t1\ta\n')
assert_contains "$out" "THERE_IS_NO_COLUMN"; assert_contains "$out" "tenant"; assert_contains "$out" "nothing was written"
out=$(errq "INSERT INTO events FORMAT JSONEachRow" $'{"tenant":"t1","day":20261101,"id":1,"v":"a"}\n')
assert_contains "$out" "uid"; assert_contains "$out" "nothing was written"; assert_eq "${out##*$'\n'}" 400 "status (row without its split key)"
$LOAD encode RowBinary t1 8400000 3 | head -c -3 >"$T/cut.rb"
out=$(curl -s -w '\n%{http_code}' "$R/?query=$(jq -rn --arg q "INSERT INTO events (tenant, day, uid, id, v) FORMAT RowBinary" '$q|@uri')" --data-binary @"$T/cut.rb")
assert_eq "${out##*$'\n'}" 400 "cut-short RowBinary status"; assert_contains "$out" "INCORRECT_DATA"; assert_contains "$out" "nothing was written"
out=$(printf 'INSERT INTO events FORMAT Avro\nxx' | curl -s -w '\n%{http_code}' "$R/" --data-binary @-)
assert_contains "$out" "format Avro is not routed"; assert_eq "${out##*$'\n'}" 501 "status (format in the body)"
assert_eq "$(count_all)" "$before" "nothing stored by the refused requests"
$LOAD encode JSONEachRow t2 8500000 6000 >"$T/mid.json"
printf '{"tenant":"t2","day":20261101,"uid":5,"id":1,"v":\n' >>"$T/mid.json"
out=$(curl -s -w '\n%{http_code}' "$R/?query=INSERT%20INTO%20events%20FORMAT%20JSONEachRow" --data-binary @"$T/mid.json")
assert_eq "${out##*$'\n'}" 400 "malformed row after streams opened: status"
assert_contains "$out" "row 6001"
written=$(( $(count_all) - before ))
[ "$written" -gt 0 ] || fail "expected the streamed rows before the bad one to be written: $out"
assert_contains "$out" "$written row(s) before it were already written"
ok "no tenant column, missing split key, cut RowBinary, unrouted format in the body, malformed row mid-stream ($written rows before it written, as the error says)"

# Query in the body (clickhouse-client style), data after FORMAT on the next line.
before=$(count_all)
printf 'INSERT INTO events FORMAT JSONEachRow\n{"tenant":"t3","day":20261101,"uid":9,"id":8300000,"v":"body"}\n' |
    curl -sf "$R/" --data-binary @- >/dev/null || fail "insert with the query in the body"
assert_eq "$(count_all)" $((before + 1)) "query-in-body insert"

# ---- passthrough ----
assert_eq "$(curl -s "$R/?query=SELECT%201%2B1")" 2 "SELECT passes through"
curl -sf "$R/" --data-binary "CREATE TABLE pt_check (x UInt8) ENGINE = Memory" >/dev/null || fail "CREATE via router"
assert_eq "$(chq "$N1" "SELECT count() FROM system.tables WHERE name = 'pt_check'")" 1 "CREATE reached the passthrough server"
out=$(curl -s -w '\n%{http_code}' "$R/?query=SELECT%20nosuchcolumn")
assert_eq "${out##*$'\n'}" 404 "passthrough keeps the server's status"
ok "SELECT and CREATE pass through unchanged (status and body)"

# ---- the split manager ----
sed -i 's/^target_slice_bytes = 1G/target_slice_bytes = 1K/' "$CONF"
expect_exit 0 "$FERRY_BIN" splits --dry-run --json --config "$CONF"
raised=$(jq .raised <<<"$OUT")
[ "$raised" -gt 0 ] || fail "splits --dry-run raised nothing: $OUT"
assert_eq "$("$FERRY_BIN" tenant show t1 --json --config "$CONF" | jq .splits)" 1 "dry run changed nothing"
v0=$("$FERRY_BIN" route --tenant t1 --json --config "$CONF" | jq .version)
expect_exit 0 "$FERRY_BIN" splits --json --tenant t1 --tenant t2 --config "$CONF"
n1=$("$FERRY_BIN" tenant show t1 --json --config "$CONF" | jq '.splits')
[ "$n1" -gt 1 ] || fail "t1 was not raised: $OUT"
v1=$(jq .routing_version <<<"$OUT")
[ "$v1" -gt "$v0" ] || fail "routing version did not rise: $v0 -> $v1"
assert_eq "$("$FERRY_BIN" tenant show t1 --json --config "$CONF" | jq '[.slices[] | select(.route != "")] | length')" "$n1" "every new slice is routed"
ok "ferry splits raised $raised tenant(s) by size; new slices placed and routed; routing version $v0 -> $v1"
stop_router "$ROUTER_PID"
grep -q 'router stopping' "$T/router.log" || fail "the router did not log its stop"
ok "the router stops on SIGTERM"

done_testing
