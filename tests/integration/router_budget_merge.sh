# The router's memory budget counts what merged reads buffer (docs/security.md, "What the router
# bounds"): on a 2-node lab, a GROUP BY over every tenant's rows (partials of about 12 MB from
# the two servers) under an 8 MiB [router] memory_budget is answered with ClickHouse's
# MEMORY_LIMIT_EXCEEDED (code 241), the budget is given back, and the router keeps serving: the
# same query with a narrower result, a small merged read, and the big one again once the budget
# is raised (a reload-free second router with a 64 MiB budget).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

LAB=$T/lab
lab_up "$LAB" --nodes 2
CONF=$LAB/ferry.conf
N1=$(lab_url "$LAB" node1); N2=$(lab_url "$LAB" node2)
cp "$CONF" "$T/base.conf"
events_conf "$CONF" "passthrough = $N1" "max_buffered_bytes = 1M" "memory_budget = 8M" \
    "shard_timeout = 30s"
"$FERRY_BIN" init --config "$CONF" >/dev/null || fail "init"
events_table "$N1" "$N2"
"$FERRY_BIN" tenant add t1 t2 t3 t4 --config "$CONF" >/dev/null || fail "tenant add"
shards=$(for t in t1 t2 t3 t4; do
    "$FERRY_BIN" route --tenant $t --json --config "$CONF" | jq -r '.slices[].shards[]'
done | sort -u | paste -sd,)
[ "$shards" = "node1,node2" ] || fail "the tenants are not on both nodes: $shards"

start_router "$CONF" router
R=$R_URL
q() { curl -sS -D "$T/h" "$R/" --data-binary "$1"; }

# 60000 rows of 200-byte values through the router's write path (12 MB over the two nodes)
chq "$N1" "SELECT concat('t', toString(number % 4 + 1)), 20261101, number % 1000, number,
    repeat('v', 200) FROM numbers(60000) FORMAT TSV" >"$T/rows.tsv"
out=$(curl -sS -w '\n%{http_code}' "$R/?query=$(jq -rn '"INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV"|@uri')" \
    --data-binary @"$T/rows.tsv")
[ "${out##*$'\n'}" = 200 ] || fail "insert: $out"
for u in "$N1" "$N2"; do
    [ "$(chq "$u" "SELECT count() FROM events")" -gt 0 ] || fail "no rows on $u"
done

BIG="SELECT id, max(v) AS mv FROM events GROUP BY id ORDER BY id FORMAT TSV"
# the three plan kinds that buffer what the servers send: partial aggregates, plain rows, and
# every row of the table for a query the initiator runs whole
for sql in "$BIG" "SELECT id, v FROM events ORDER BY id FORMAT TSV" \
    "SELECT count() FROM (SELECT id, any(v) AS v FROM events GROUP BY id) FORMAT TSV"; do
    out=$(q "$sql")
    plan=$(grep -i '^X-Ferry-Plan:' "$T/h" | tr -d '\r')
    echo "$plan: $(head -c 200 <<<"$out")"
    assert_contains "$out" "Code: 241" "$plan: a merge whose partials exceed the budget"
    assert_contains "$out" "MEMORY_LIMIT_EXCEEDED" "its name"
    assert_contains "$out" "memory_budget" "its message"
    grep -qi "^X-ClickHouse-Exception-Code: 241" "$T/h" || fail "no exception code header: $(cat "$T/h")"
    PLANS="${PLANS:-}${PLANS:+,}${plan#*: }"
done
assert_eq "aggregate,rows,gather" "$PLANS" "the plans tried"
wait_for 10 bash -c "[ \$(curl -s $R/ferry/router | jq .memory_budget.used) = 0 ]" ||
    fail "the budget was not given back: $(curl -s "$R/ferry/router" | jq -c .memory_budget)"
ok "merges of 12 MB of partials ($PLANS), 8 MiB budget: MEMORY_LIMIT_EXCEEDED (241), the budget given back"

out=$(q "SELECT tenant, count() FROM events GROUP BY tenant ORDER BY tenant FORMAT TSV")
assert_eq $'t1\t15000\nt2\t15000\nt3\t15000\nt4\t15000' "$out" "a small merged read after it"
out=$(q "SELECT id, max(v) AS mv FROM events WHERE id % 10 = 0 GROUP BY id ORDER BY id FORMAT TSV"); echo "narrow: ${out:0:300}"; out=$(wc -l <<<"$out")
assert_eq 6000 "$out" "the GROUP BY narrowed to a tenth of the ids"
ok "the router serves on: small merged reads answered"
pid_running "$R_PID" || fail "the router died"
for _ in 1 2 3; do
    assert_contains "$(q "$BIG")" "Code: 241" "the big merge again"
done
wait_for 10 bash -c "[ \$(curl -s $R/ferry/router | jq .memory_budget.used) = 0 ]" ||
    fail "the budget was not given back after 3 refusals"
stop_router "$R_PID"

# with room in the budget the same query is answered whole
cp "$T/base.conf" "$T/wide.conf"
events_conf "$T/wide.conf" "passthrough = $N1" "max_buffered_bytes = 1M" "memory_budget = 64M" \
    "shard_timeout = 30s"
start_router "$T/wide.conf" wide
R=$R_URL
lines=$(q "$BIG" | wc -l)
assert_eq 60000 "$lines" "the big merge under a 64 MiB budget"
ok "the same merge under a 64 MiB budget: 60000 rows"
stop_router "$R_PID"
for log in router wide; do
    if grep -q "AddressSanitizer\|runtime error" "$T/$log.log"; then
        fail "the $log router's sanitizer reported: $(grep -m3 'AddressSanitizer\|runtime error' "$T/$log.log")"
    fi
done
done_testing
