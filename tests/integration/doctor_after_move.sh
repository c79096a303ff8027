# ferry doctor on a healthy lab after a move: the staging table a move leaves beside each
# managed table (<table>_ferry_staging, on the tiered policy) is ferry's own, not an unmanaged
# table on the cold disk (doctor failed with one unmanaged_cold finding per staging table). A
# table of the same form for a table ferry does not manage is still reported. And a part folder
# ClickHouse set aside as broken fails the doctor in a managed table, warns in a staging table.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 3 20000
"$FERRY_BIN" tier --config "$C" --older-than 1d --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "tier failed: $(tail -3 "$T/tier.err")"
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200 >/dev/null 2>"$T/mv.err" ||
    fail "move failed: $(tail -3 "$T/mv.err")"
staged=0
for u in "$U1" "$U2"; do
    staged=$((staged + $(chq "$u" "SELECT count() FROM system.tables WHERE name = 'events_ferry_staging' AND storage_policy = 'tiered'")))
done
[ "$staged" -ge 1 ] || fail "no staging table after the move: the test would prove nothing"
ok "tiered and moved acme/0 node1 -> node2; $staged staging table(s) on the tiered policy"

# shard_grants is left out: the lab runs every query as one all-powerful user (router_auth checks it).
expect_exit 0 "$FERRY_BIN" doctor --json --skip shard_grants --config "$C"
assert_eq "" "$(jq -r '.checks[] | select(.status == "fail") | .message' <<<"$OUT")" "no failed check"
assert_eq "pass pass" "$(jq -r '[.checks[] | select(.check == "unmanaged_cold") | .status] | join(" ")' <<<"$OUT")" "unmanaged_cold on both servers"
assert_contains "$(jq -r '[.checks[] | select(.check == "unmanaged_cold") | .message] | join(" ")' <<<"$OUT")" "staging" "the staging tables are counted as ferry's"
ok "doctor passes after the move"
assert_eq "pass pass" "$(jq -r '[.checks[] | select(.check == "broken_parts") | .status] | join(" ")' <<<"$OUT")" "broken_parts on both servers"

# a part folder ClickHouse set aside as broken (as it does at start for a part it cannot load):
# in the managed table it fails the doctor, in the staging table it is a warning
det=$(chq "$U2" "SELECT arrayJoin(data_paths) FROM system.tables WHERE database = 'default' AND name = 'events' LIMIT 1")detached
pid=$(chq "$U2" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' LIMIT 1")
[ -d "$det" ] && [ -n "$pid" ] || fail "no detached/ folder ('$det') or partition ('$pid') of events on node2"
mkdir "$det/broken-on-start_${pid}_99_99_0"
expect_exit 1 "$FERRY_BIN" doctor --json --skip shard_grants --config "$C"
assert_eq "broken_parts" "$(jq -r '[.checks[] | select(.status == "fail") | .check] | join(" ")' <<<"$OUT")" "only broken_parts fails"
assert_contains "$(jq -r '.checks[] | select(.check == "broken_parts" and .status == "fail") | .message + " " + .fix' <<<"$OUT")" "default.events/detached/broken-on-start_${pid}_99_99_0" "the finding names the folder"
rmdir "$det/broken-on-start_${pid}_99_99_0"
sdet=$(chq "$U2" "SELECT arrayJoin(data_paths) FROM system.tables WHERE database = 'default' AND name = 'events_ferry_staging' LIMIT 1")detached
mkdir -p "$sdet/broken-on-start_${pid}_98_98_0"
expect_exit 0 "$FERRY_BIN" doctor --json --skip shard_grants --config "$C"
assert_eq "warn" "$(jq -r '[.checks[] | select(.check == "broken_parts" and .server == "node2") | .status] | join(" ")' <<<"$OUT")" "a broken folder in staging is a warning"
rmdir "$sdet/broken-on-start_${pid}_98_98_0"
ok "a part folder set aside as broken: the doctor fails in a managed table, warns in staging"

chq "$U2" "CREATE TABLE other_ferry_staging (x UInt64) ENGINE = MergeTree ORDER BY x SETTINGS storage_policy = 'tiered'" >/dev/null
expect_exit 1 "$FERRY_BIN" doctor --json --skip shard_grants --config "$C"
assert_eq "default.other_ferry_staging" "$(jq -r '.checks[] | select(.status == "fail") | .message' <<<"$OUT" | grep -o 'default\.[a-z_]*')" "only the unmanaged one"
ok "a staging-like table of an unmanaged table is still unmanaged"

done_testing
