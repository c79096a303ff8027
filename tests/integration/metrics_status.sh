# Observability (issue 21): GET /metrics of the coordinator, the router and every agent pass
# `promtool check metrics`; a real Prometheus server scrapes them while a slice moves, and its
# HTTP API gives back the bytes the move copied (the agents' sent bytes), every shard's fill
# ratio and the coordinator's tallies (the move's cold and hot bytes); the coordinator shows a
# sweep's and doctor's results and an agent the deletes it saw refused; the example alerting
# rules pass `promtool check rules` and their unit test; the coordinator's status page, loaded in headless Chromium with a move in flight, renders the
# shards' bars, the move's row and the fill history's plot (a screenshot is kept in
# $FERRY_BUILD_DIR/test-artifacts/).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
command -v promtool >/dev/null || fail "promtool is missing (Debian package prometheus; make deps)"
command -v chromium >/dev/null || fail "chromium is missing (Debian package chromium; make deps)"

L=$T/lab
lab_up "$L" --nodes 3
mv_conf "$L"
C=$L/mv.conf
for n in node1 node2 node3; do sed -i "/^\[shard \"$n\"\]/a capacity = 64M" "$C"; done
sed -i '/^split_column = split$/a split_key = user' "$C" # the router's inserts need it
cat >>"$C" <<EOF
[coordinator]
history_interval = 1s
history_file = $T/fill-history.json
[router]
auth = none
passthrough = $(lab_url "$L" node1)
EOF
for u in $(mv_urls "$L"); do chq "$u" "$MV_DDL" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add acme big --config "$C" >/dev/null || fail "tenant add"
declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$L" $n); done
for t in acme big; do
    s=$("$FERRY_BIN" route --tenant $t --json --config "$C" | jq -r '.slices[0].shards[0]')
    mv_ingest "${U[$s]}" $t 0 6 50000
    for d in 1 2 3; do chq "${U[$s]}" "ALTER TABLE events MOVE PARTITION ('$t', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
done
"$FERRY_BIN" rebalance --dry-run --config "$C" >/dev/null || fail "inventory sync"
ok "lab: 3 shards with a capacity, tenants acme and big (6 days, 3 cold)"

bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$C" --listen 127.0.0.1:0 --port-file "$T/coord.port"
wait_for 60 test -s "$T/coord.port" || fail "coordinator did not start: $(tail -3 "$T/coord.log")"
CO=http://127.0.0.1:$(cat "$T/coord.port")
start_router "$C" router
R=$R_URL

# ---- every /metrics is valid Prometheus text ---------------------------------------------------
check_metrics() { # check_metrics NAME URL [TOKEN]
    local h=()
    [ -z "${3:-}" ] || h=(-H "Authorization: Bearer $3")
    curl -sSf "${h[@]}" "$2" >"$T/$1.prom" || fail "GET $2 failed"
    promtool check metrics <"$T/$1.prom" >"$T/$1.check" 2>&1 ||
        fail "promtool check metrics ($1): $(cat "$T/$1.check")"
}
check_metrics coordinator "$CO/metrics"
grep -q '^ferry_shard_fill_ratio{shard="node1"' "$T/coordinator.prom" || fail "no fill ratio: $(head -40 "$T/coordinator.prom")"
grep -q '^ferry_coordinator_lease{owner=' "$T/coordinator.prom" || fail "no lease gauge"
curl -s "$R/" --data-binary "SELECT count() FROM events WHERE tenant = 'acme'" >/dev/null
curl -s "$R/" --data-binary "SELECT tenant, count() FROM events GROUP BY tenant" >/dev/null
printf 'acme\t20261105\t0\t7\t1\nacme\t20261105\t0\t8\t2\n' >"$T/ins.tsv"
code=$(curl -s -o "$T/ins.out" -w '%{http_code}' "$R/?query=INSERT%20INTO%20events%20FORMAT%20TabSeparated" --data-binary @"$T/ins.tsv")
[ "$code" = 200 ] || fail "an insert through the router failed ($code): $(cat "$T/ins.out")"
check_metrics router "$R/metrics"
grep -q '^ferry_router_requests_total{kind="read",outcome="ok"} [1-9]' "$T/router.prom" ||
    fail "the routed read is not counted: $(grep requests_total "$T/router.prom")"
for p in single merged; do
    grep -q "^ferry_router_read_seconds_count{plan=\"$p\"} 1\$" "$T/router.prom" ||
        fail "the $p read's latency is not observed: $(grep read_seconds_count "$T/router.prom")"
done
acme_shard=$("$FERRY_BIN" route --tenant acme --json --config "$C" | jq -r '.slices[0].shards[0]')
grep -q "^ferry_router_rows_written_total{shard=\"$acme_shard\"} 2\$" "$T/router.prom" &&
    grep -q "^ferry_router_bytes_written_total{shard=\"$acme_shard\"} $(stat -c %s "$T/ins.tsv")\$" "$T/router.prom" ||
    fail "rows and bytes written to $acme_shard: $(grep -E 'written_total' "$T/router.prom"), the body had 2 rows and $(stat -c %s "$T/ins.tsv") bytes"
for n in node1 node2 node3; do
    check_metrics "agent-$n" "${U[$n]}/agent/v1/metrics" "$(cat "$L/$n/agent.token")"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "${U[node1]}/agent/v1/metrics")
assert_eq 401 "$code" "an agent's metrics need its token"
ok "coordinator, router and 3 agents: /metrics passes promtool check metrics (agents' need the token); the router timed a single and a merged read and counted the insert's rows and bytes on $acme_shard"

# ---- a real Prometheus scrapes them while a slice moves ---------------------------------------
PP=$(free_port)
{
    printf 'global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n'
    printf '  - job_name: coordinator\n    static_configs: [{targets: ["%s"]}]\n' "${CO#http://}"
    printf '  - job_name: router\n    static_configs: [{targets: ["%s"]}]\n' "${R#http://}"
    for n in node1 node2 node3; do
        printf '  - job_name: agent-%s\n    metrics_path: /agent/v1/metrics\n' $n
        printf '    authorization: {credentials_file: %s}\n' "$L/$n/agent.token"
        printf '    static_configs: [{targets: ["%s"], labels: {node: %s}}]\n' "${U[$n]#http://}" $n
    done
} >"$T/prometheus.yml"
promtool check config "$T/prometheus.yml" >"$T/promcfg.out" 2>&1 || fail "prometheus config: $(cat "$T/promcfg.out")"
bg_start "$T/prometheus.log" prometheus --config.file="$T/prometheus.yml" \
    --storage.tsdb.path="$T/prom-data" --web.listen-address="127.0.0.1:$PP"
PROM=http://127.0.0.1:$PP
pq() { curl -sS --get "$PROM/api/v1/query" --data-urlencode "query=$1"; }
up_all() { [ "$(pq 'sum(up)' | jq -r '.data.result[0].value[1] // 0')" = 5 ]; }
wait_for 120 up_all || fail "Prometheus does not see 5 targets up: $(pq up | jq -c '[.data.result[] | {j: .metric.job, v: .value[1]}]'); $(tail -5 "$T/prometheus.log")"
src=$("$FERRY_BIN" route --tenant acme --json --config "$C" | jq -r '.slices[0].shards[0]')
dst=$([ "$src" = node1 ] && echo node2 || echo node1)
"$FERRY_BIN" move --tenant acme --split 0 --to "$dst" --json --config "$C" >"$T/move.json" 2>"$T/move.err" ||
    fail "move: $(tail -3 "$T/move.err")"
M=$(jq -c 'select(.event == "move")' "$T/move.json")
copied=$(jq '.hot_copied_bytes + .cold_copied_bytes' <<<"$M")
[ "$copied" -gt 0 ] || fail "the move copied nothing: $M"
sent_is() { [ "$(pq 'sum(ferry_agent_sent_bytes_total)' | jq -r '.data.result[0].value[1] // 0')" = "$copied" ]; }
wait_for 60 sent_is || fail "Prometheus: the agents' sent bytes are $(pq 'sum(ferry_agent_sent_bytes_total)' | jq -c .data.result), the move copied $copied"
fills=$(pq 'ferry_shard_fill_ratio' | jq -r '[.data.result[] | "\(.metric.shard)=\(.value[1])"] | sort | join(" ")')
[ "$(wc -w <<<"$fills")" = 3 ] || fail "fill ratios through Prometheus: $fills"
dst_fill=$(pq "ferry_shard_fill_ratio{shard=\"$dst\"}" | jq -r '.data.result[0].value[1]')
awk -v f="$dst_fill" 'BEGIN { exit !(f > 0) }' || fail "$dst's fill after the move is $dst_fill"
ok "Prometheus scraped 5 targets; through its API: the agents sent $copied bytes (the move's cold pointer and hot bytes, exactly), fill ratios $fills"

# the coordinator's tallies, whoever ran the flow (here: commands, not the autopilot)
cold=$(jq .cold_copied_bytes <<<"$M"); hot=$(jq .hot_copied_bytes <<<"$M")
pv() { pq "$1" | jq -r '.data.result[0].value[1] // "none"'; }
tally_is() { [ "$(pv 'ferry_move_copied_bytes_total{tier="cold"}')" = "$cold" ] &&
             [ "$(pv 'ferry_move_copied_bytes_total{tier="hot"}')" = "$hot" ] &&
             [ "$(pv 'ferry_moves_ended_total{outcome="done"}')" = 1 ]; }
wait_for 60 tally_is || fail "Prometheus: the coordinator's move tally is cold=$(pv 'ferry_move_copied_bytes_total{tier="cold"}') hot=$(pv 'ferry_move_copied_bytes_total{tier="hot"}') done=$(pv 'ferry_moves_ended_total{outcome="done"}'); the move said cold=$cold hot=$hot"
ok "the coordinator's tally through Prometheus: 1 move done, $cold cold pointer bytes and $hot hot bytes copied (the move's own counts)"

# ClickHouse deleting cold objects is refused, and the agent says so: a throwaway table with the
# tiered policy, one part moved to the cold disk, dropped
chq "${U[node1]}" "CREATE TABLE junk (x UInt64) ENGINE = MergeTree ORDER BY x SETTINGS storage_policy = 'tiered'" >/dev/null
chq "${U[node1]}" "INSERT INTO junk SELECT number FROM numbers(1000)" >/dev/null
chq "${U[node1]}" "ALTER TABLE junk MOVE PARTITION tuple() TO DISK 'cold'" >/dev/null
chq "${U[node1]}" "DROP TABLE junk SYNC" >/dev/null
refused() { pv 'ferry_agent_refused_deletes_total{source="guard",node="node1"}'; }
refused_some() { local r; r=$(refused); [ "$r" != none ] && [ "$r" -gt 0 ]; }
wait_for 60 refused_some ||
    fail "no refused delete seen on node1: $(pq 'ferry_agent_refused_deletes_total' | jq -c .data.result)"
[ "$(pv 'ferry_agent_refused_deletes_total{source="clickhouse",node="node1"}')" = 0 ] ||
    fail "ClickHouse's S3 delete counter on a local-store lab: $(pq 'ferry_agent_refused_deletes_total' | jq -c .data.result)"
ok "dropping a table with a cold part: node1's agent reports $(refused) refused deletes (the lab's guard), 0 S3 delete requests"

# a sweep and doctor, run as commands, show in the coordinator's metrics
"$FERRY_BIN" sweep --json --config "$C" >"$T/sweep.json" 2>"$T/sweep.err" || fail "sweep: $(tail -3 "$T/sweep.err")"
"$FERRY_BIN" doctor --json --config "$C" >"$T/doctor.json" 2>"$T/doctor.err" || true
jq -e '.checks | length > 0' "$T/doctor.json" >/dev/null || fail "doctor gave no checks: $(cat "$T/doctor.json" "$T/doctor.err")"
orph=$(jq '.orphans | length' "$T/sweep.json"); dang=$(jq '.dangling | length' "$T/sweep.json")
[ "$orph" -gt 0 ] || fail "the dropped table's objects are not orphans: $(head -c 600 "$T/sweep.json")"
cm() { curl -sSf "$CO/metrics" >"$T/co2.prom" && grep -q '^ferry_doctor_check{' "$T/co2.prom" && grep -q "^ferry_sweep_orphans $orph\$" "$T/co2.prom"; }
wait_for 30 cm || fail "the coordinator does not show the sweep ($orph orphans) and doctor: $(grep -E '^ferry_(sweep|doctor)' "$T/co2.prom")"
promtool check metrics <"$T/co2.prom" >"$T/co2.check" 2>&1 || fail "promtool check metrics (coordinator, tallies): $(cat "$T/co2.check")"
grep -q "^ferry_sweep_dangling_pointers $dang\$" "$T/co2.prom" || fail "dangling: $(grep dangling "$T/co2.prom"), sweep said $dang"
grep -q "^ferry_sweep_complete $(jq -r 'if .complete then 1 else 0 end' "$T/sweep.json")\$" "$T/co2.prom" || fail "sweep completeness: $(grep sweep_complete "$T/co2.prom")"
grep -q '^ferry_sweep_last_complete_age_seconds ' "$T/co2.prom" || fail "no age of the last complete sweep"
# each check's status is the worst of its findings
jq -r '[.checks[] | {c: .check, s: .status, r: ({"fail":0,"warn":1,"unsupported":2,"skipped":3,"pass":4}[.status] // 0)}]
       | group_by(.c)[] | min_by(.r) | "\(.c) \(.s)"' "$T/doctor.json" | sort >"$T/doctor.want"
sed -n 's/^ferry_doctor_check{check="\([^"]*\)",status="\([^"]*\)"} 1$/\1 \2/p' "$T/co2.prom" | sort >"$T/doctor.got"
diff "$T/doctor.want" "$T/doctor.got" >"$T/doctor.diff" || fail "doctor's checks in /metrics differ from doctor --json: $(cat "$T/doctor.diff")"
ok "sweep ($orph orphans, $dang dangling) and doctor ($(wc -l <"$T/doctor.got") checks: $(tr '\n' ' ' <"$T/doctor.got")) show in the coordinator's /metrics"

# ---- alerting rules and the dashboard ------------------------------------------------------
promtool check rules "$FERRY_SOURCE_DIR/deploy/prometheus/ferry-rules.yml" >"$T/rules.out" 2>&1 ||
    fail "promtool check rules: $(cat "$T/rules.out")"
(cd "$FERRY_SOURCE_DIR/deploy/prometheus" && promtool test rules ferry-rules.test.yml) >"$T/rtest.out" 2>&1 ||
    fail "promtool test rules: $(cat "$T/rtest.out")"
jq -e '.panels | length > 0' "$FERRY_SOURCE_DIR/deploy/grafana/ferry.json" >/dev/null || fail "grafana dashboard JSON"
ok "alerting rules: promtool check rules and promtool test rules pass; the Grafana dashboard is valid JSON"

# ---- the status page in a real browser, with a move in flight ----------------------------------
FERRY_TEST_CRASH_AFTER=SWITCH:switched "$FERRY_BIN" move --tenant big --split 0 \
    --to "$(comm -23 <(printf 'node1\nnode2\nnode3\n') <("$FERRY_BIN" route --tenant big --json --config "$C" | jq -r '.slices[0].shards[]') | head -1)" \
    --config "$C" >/dev/null 2>"$T/crash.err" && fail "the move was to stop at its crash point"
wait_for 30 bash -c "curl -sf '$CO/' | grep -q 'class=\"move\"'" || fail "the page shows no move in flight"
sleep 2 # a few history samples
chrome() {
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --no-first-run --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$T/chrome" "$@" 2>>"$T/chrome.err"
}
chrome --dump-dom "$CO/" >"$T/page.html" || fail "chromium --dump-dom failed: $(tail -5 "$T/chrome.err")"
dom() { python3 - "$T/page.html" "$1" <<'PY'
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
print(len(re.findall(sys.argv[2], html)))
PY
}
assert_eq 3 "$(dom '<tr class="shard">')" "three shard rows"
assert_eq 3 "$(dom '<rect class="fill"')" "three fill bars"
[ "$(dom '<tr class="move">')" -ge 1 ] || fail "no move row in the rendered page"
[ "$(dom '<path class="series"[^>]* d="M')" -ge 3 ] || fail "the fill history has no plotted series: $(grep -o '<svg id="fill-history".\{0,300\}' "$T/page.html")"
grep -q 'SWITCH' "$T/page.html" || fail "the move's state is not shown"
[ "$(dom '<tr class="recent-move">')" -ge 1 ] || fail "no recent move in the rendered page"
[ "$(dom '<td class="eta">')" -ge 1 ] || fail "the move in flight has no ETA cell"
[ "$(dom '<tr class="check"')" -ge 1 ] || fail "no doctor check in the rendered page"
grep -q 'id="sweep">Last sweep' "$T/page.html" || fail "the last sweep is not shown: $(grep -o 'id="sweep".\{0,200\}' "$T/page.html")"
ART=$FERRY_BUILD_DIR/test-artifacts
mkdir -p "$ART"
chrome --screenshot="$ART/status_page.png" --window-size=1100,1500 "$CO/" >/dev/null ||
    fail "screenshot failed: $(tail -5 "$T/chrome.err")"
[ -s "$ART/status_page.png" ] || fail "no screenshot written"
ok "status page in headless Chromium: 3 shard rows and bars, the move in flight with its ETA, recent moves, the last sweep and doctor's checks, 3 plotted series; screenshot in $ART/status_page.png"
# ferry status draws the same bars on a terminal (script gives it one)
script -qc "$FERRY_BIN status --config $C" /dev/null >"$T/status.txt" || fail "ferry status"
grep -q '|' "$T/status.txt" && grep -q '#' "$T/status.txt" || fail "ferry status has no fill bars: $(cat "$T/status.txt")"
id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
"$FERRY_BIN" move --resume "$id" --config "$C" >/dev/null 2>"$T/resume.err" || fail "resume: $(tail -3 "$T/resume.err")"
ok "ferry status draws fill bars against the target on a terminal; the stopped move resumed"

# a tiering run, by command, shows in the coordinator's tier tally
"$FERRY_BIN" tier --json --config "$C" >"$T/tier.json" 2>"$T/tier.err" || fail "tier: $(tail -3 "$T/tier.err")"
tiered=$(jq -s 'map(select(has("partitions_tiered")))[0].partitions_tiered' "$T/tier.json")
up=$(jq -s 'map(select(has("bytes_uploaded")))[0].bytes_uploaded' "$T/tier.json")
[ "$tiered" -gt 0 ] || fail "ferry tier tiered nothing: $(head -c 600 "$T/tier.json")"
tier_shown() { curl -sSf "$CO/metrics" >"$T/co3.prom" &&
    grep -q "^ferry_tier_partitions_tiered_total $tiered\$" "$T/co3.prom" &&
    grep -q "^ferry_tier_uploaded_bytes_total $up\$" "$T/co3.prom" && grep -q '^ferry_tier_runs_total 1$' "$T/co3.prom"; }
wait_for 30 tier_shown || fail "the coordinator's tier tally: $(grep '^ferry_tier_' "$T/co3.prom"); ferry tier said $tiered partitions, $up bytes"
ok "a tiering run ($tiered partitions, $up bytes uploaded) shows in the coordinator's tier tally"
done_testing
