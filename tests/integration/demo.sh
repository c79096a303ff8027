# `ferry demo` scaled down (20 tenants, 3 days, the oldest tiered) with --json: every tenant
# verified, slices moved, the cold side of the moves copies pointer files only (< 1% of the
# cold bytes), the hot side copies about the hot bytes, and afterwards no node of the demo's lab
# runs and its temporary directory is gone. Then --dir/--keep leaves a working lab that
# `ferry status` and `ferry query` can use, which the test stops.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"

# nodes of a lab dir still running (by command line: ferry-node --config DIR/nodeK/node.conf)
demo_nodes_running() {
    local pid
    for pid in $(pgrep -f "ferry-node --config $1/" || true); do
        pid_running "$pid" && echo "$pid"
    done
}

mkdir -p "$T/tmp"
t0=$(date +%s)
TMPDIR="$T/tmp" "$FERRY_BIN" demo --json --tenants 20 --days 3 --cold-days 1 --rows-per-day 150000 \
    --max-parallel 4 >"$T/demo.out" 2>"$T/demo.err" || fail "ferry demo failed: $(tail -20 "$T/demo.err")"
secs=$(($(date +%s) - t0))
J=$(tail -n 1 "$T/demo.out")
jq -e . >/dev/null <<<"$J" || fail "the last line of stdout is not JSON: $J"
for k in tenants slices moves cold_bytes cold_copied_bytes hot_bytes hot_copied_bytes verify_failures wall_seconds; do
    jq -e --arg k "$k" 'has($k)' >/dev/null <<<"$J" || fail "JSON lacks $k: $J"
done
assert_eq 20 "$(jq .tenants <<<"$J")" "tenants"
assert_eq 0 "$(jq .verify_failures <<<"$J")" "verify failures ($(jq -r '.first_verify_failure // ""' <<<"$J"))"
assert_eq 0 "$(jq .moves_failed <<<"$J")" "no move failed"
[ "$(jq .moves <<<"$J")" -gt 0 ] || fail "no slice moved: $J"
assert_eq "$(jq .moves_planned <<<"$J")" "$(jq .moves <<<"$J")" "every planned move done"
[ "$(jq .slices <<<"$J")" -gt 20 ] || fail "no tenant has several splits: $J"
assert_eq "$(jq '.slices * .cold_days' <<<"$J")" "$(jq .partitions_tiered <<<"$J")" "every slice's oldest day tiered"
jq -e '.cold_bytes > 0 and .cold_copied_bytes > 0 and .cold_copied_bytes * 100 < .cold_bytes' >/dev/null <<<"$J" ||
    fail "cold side: $(jq -c '{cold_bytes, cold_copied_bytes}' <<<"$J") (want < 1%): $J"
jq -e '.hot_bytes > 0 and .hot_copied_bytes >= .hot_bytes * 0.9 and .hot_copied_bytes <= .hot_bytes * 1.2' >/dev/null <<<"$J" ||
    fail "hot side: $(jq -c '{hot_bytes, hot_copied_bytes}' <<<"$J") (want about the hot bytes)"
# the demo's moves wait 100 ms after their switch, not the 2 s default (nothing writes meanwhile)
assert_eq 100 "$(jq .move_grace_ms <<<"$J")" "the grace of the demo's moves (ms)"
jq -e '.move_state_ms.CLONE > 0 and .move_state_ms.SWITCH > 0 and .move_statements > 0 and .move_agent_requests > 0' \
    >/dev/null <<<"$J" || fail "the moves' state_ms and counts are missing: $J"
jq -e '.phase_cpu_seconds.rebalance.nodes > 0 and .phase_cpu_seconds.ingest.nodes > 0' >/dev/null <<<"$J" ||
    fail "phase_cpu_seconds lacks the nodes' CPU: $(jq -c .phase_cpu_seconds <<<"$J")"
grep -q "rebalance: .* moves done" "$T/demo.err" || fail "no rebalance progress on stderr"
grep -q '^\[ *[0-9.]*s\] verify' "$T/demo.err" || fail "no verify progress line on stderr"
dir=$(sed -n 's/.*lab: starting 3 nodes in \([^ ]*\) .*/\1/p' "$T/demo.err" | head -1)
[ -n "$dir" ] || fail "the progress does not name the lab's directory"
[[ "$dir" == "$T/tmp/"* ]] || fail "the temporary lab is not under TMPDIR: $dir"
[ ! -e "$dir" ] || fail "the temporary directory $dir is left"
assert_eq "" "$(demo_nodes_running "$dir")" "no node of the demo's lab left"
ok "demo: $(jq -c '{slices, moves, cold_bytes, cold_copied_bytes, hot_bytes, hot_copied_bytes}' <<<"$J") in ${secs}s; lab stopped, directory removed"

# table output (the default), a kept lab
K=$T/kept
_LAB_DIRS+=("$K")
"$FERRY_BIN" demo --dir "$K" --keep --tenants 2 --days 2 --cold-days 1 --rows-per-day 4000 --max-parallel 4 \
    >"$T/keep.out" 2>"$T/keep.err" || fail "ferry demo --keep failed: $(tail -20 "$T/keep.err")"
assert_contains "$(cat "$T/keep.out")" "What was actually copied" "the blog's table"
assert_contains "$(cat "$T/keep.out")" "pointer files" "cold row of the table"
assert_contains "$(cat "$T/keep.err")" "ferry lab down --dir $K" "how to stop the kept lab"
[ -n "$(demo_nodes_running "$K")" ] || fail "--keep: the lab is not running"
assert_eq 4 "$("$FERRY_BIN" lab status --dir "$K" --json | jq '[.nodes[] | select(.alive)] | length')" "4 nodes alive"
expect_exit 0 "$FERRY_BIN" status --config "$K/ferry.conf" --json
assert_eq 2 "$(jq '.tenants' <<<"$OUT")" "ferry status sees the 2 tenants"
rows=0
for u in $("$FERRY_BIN" lab status --dir "$K" --json | jq -r '.nodes[].http'); do
    expect_exit 0 "$FERRY_BIN" query --url "$u" "SELECT count() FROM events"
    rows=$((rows + OUT))
done
[ "$rows" -gt 0 ] || fail "no rows in the kept lab"
expect_exit 0 "$FERRY_BIN" rebalance --config "$K/ferry.conf" --dry-run --json
assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' <<<"$OUT")" "the kept lab is balanced"
"$FERRY_BIN" lab down --dir "$K" >/dev/null 2>&1 || fail "lab down failed"
assert_eq "" "$(demo_nodes_running "$K")" "lab down stops the kept lab"
ok "--dir/--keep: table on stdout, the lab runs with its ferry.conf ($rows rows), status/query/rebalance use it"
done_testing
