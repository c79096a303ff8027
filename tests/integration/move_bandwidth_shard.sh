# `ferry rebalance --max-bytes-per-second-per-shard L` ([autopilot] bandwidth_per_shard for the
# coordinator): draining a node whose slices all move at once (one step per slice in parallel),
# the drained node is the source of every move, so together they send at most L bytes per
# second - not L per move. Measured from the moves' own results: the bytes they copied over the
# time the copies took (the longest CLONE state, all having started together) is within 10% of L.
# The moved tenants' rows are unchanged on their new shards.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 3
C="$L/mv.conf"
declare -A URL
for n in node1 node2 node3; do URL[$n]=$(lab_url "$L" $n); done
for i in 1 2 3 4 5 6; do "$FERRY_BIN" tenant add "t$i" --config "$C" >/dev/null || fail "tenant add t$i"; done
for i in 1 2 3 4 5 6; do
    "$FERRY_BIN" route --config "$C" --tenant "t$i" --json | jq -r '.slices[] | "\(.tenant) \(.shards[0])"'
done >"$T/routes"
N=$(awk '{print $2}' "$T/routes" | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
mapfile -t TS < <(awk -v n="$N" '$2 == n {print $1}' "$T/routes")
[ "${#TS[@]}" -ge 2 ] || fail "no node with two tenants: $(cat "$T/routes")"
# about 4 MB of barely compressible rows per tenant, 4 parts in each of 2 partitions
for t in "${TS[@]}"; do
    for seed in 1 2 3 4; do
        chq "${URL[$N]}" "INSERT INTO events SELECT '$t', 20261101 + number % 2, 0,
            cityHash64(number, $seed), cityHash64(number, $seed, '$t') FROM numbers(60000)" >/dev/null
    done
done
declare -A FP
for t in "${TS[@]}"; do FP[$t]=$(mv_fp "${URL[$N]}" "$t" 0); done
ok "${#TS[@]} tenants on $N: ${TS[*]}"

LIMIT=1000000
"$FERRY_BIN" shard drain "$N" --config "$C" >/dev/null || fail "drain $N"
P=${#TS[@]}
"$FERRY_BIN" rebalance --config "$C" --max-parallel "$P" --max-per-shard "$P" \
    --max-bytes-per-second-per-shard "$LIMIT" --grace 200 --json >"$T/rb.json" 2>"$T/rb.err" ||
    fail "rebalance failed: $(tail -5 "$T/rb.err")"
jq -e 'select(.event == "move") | select(.state != "DONE")' "$T/rb.json" >/dev/null && fail "a move is not DONE"
assert_eq "$P" "$(jq -s '[.[] | select(.event == "move" and .from == "'"$N"'")] | length' "$T/rb.json")" "every slice of $N moved"
read -r bytes ms <<<"$(jq -rs '[.[] | select(.event == "move")] | "\(map(.hot_copied_bytes + .cold_copied_bytes) | add) \(map(.state_ms.CLONE) | max)"' "$T/rb.json")"
rate=$((bytes * 1000 / ms))
echo "# $P moves from $N at once: $bytes bytes copied in ${ms} ms (the longest CLONE): $rate bytes/s, limit $LIMIT per shard (load $(cut -d' ' -f1 /proc/loadavg))"
[ "$bytes" -gt $((3 * LIMIT)) ] || fail "too few bytes to measure a rate: $bytes"
[ "$rate" -ge $((LIMIT * 90 / 100)) ] && [ "$rate" -le $((LIMIT * 110 / 100)) ] ||
    fail "$N sent at $rate bytes/s, not within 10% of $LIMIT (per move it would be $P times more)"
ok "the moves off $N together: $rate bytes/s (limit $LIMIT per shard, $P moves at once)"

for t in "${TS[@]}"; do
    to=$("$FERRY_BIN" route --config "$C" --tenant "$t" --json | jq -r '.slices[0].shards[0]')
    [ "$to" != "$N" ] || fail "$t still on $N"
    assert_eq "${FP[$t]}" "$(mv_fp "${URL[$to]}" "$t" 0)" "$t unchanged on $to"
done
ok "every moved tenant's rows unchanged on its new shard"
done_testing
