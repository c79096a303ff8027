# Tiering refuses bad input and bad cluster state with a clear error, before touching anything:
# a catalog table missing on the server, a table whose storage policy has no object-storage disk,
# a staging table whose cold disk is missing, a pointer format (or ClickHouse version) the server
# cannot read pinned in the catalog, and a second run while one holds the "tier" lease. Each time
# the partitions stay hot and intact and nothing is left behind. Also the per_tenant layout, and
# a damaged frozen file failing only its own partition's job in a wave.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
tier_fill "$U" 3 20000 6
WANT=$(tier_fp "$U")
hot() { chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name != 'default'"; }
untouched() {
    assert_eq "$WANT" "$(tier_fp "$U")" "$1: data unchanged"
    assert_eq 0 "$(hot)" "$1: every partition still hot"
    assert_eq "" "$(ls -A "$L/blobs")" "$1: nothing uploaded"
    assert_eq 0 "$(chq "$U" "SELECT count() FROM system.tables WHERE name = 'events_ferry_staging'")" "$1: no staging table"
    tier_leftovers "$L" node1
}

# --table not in the catalog: a usage error
expect_exit 2 "$FERRY_BIN" tier --config "$C" --table nope
assert_contains "$ERR" "--table nope: no such table in the catalog" "unknown --table"
assert_eq "" "$OUT" "nothing on stdout"
expect_exit 2 "$FERRY_BIN" tier --config "$C" --server node9
assert_contains "$ERR" "no such shard" "unknown --server"
ok "--table and --server not in the catalog: exit 2"

# a pointer format the server cannot read, pinned in a test catalog: refused before anything
"$FERRY_BIN" catalog export --config "$C" >"$T/dump.json"
for pin in 'pointer_format = 6' 'clickhouse_version = "26.8"'; do
    jq ".settings[0].${pin/ = /=}" "$T/dump.json" >"$T/bad.json" || fail "jq"
    rm -f "$T/bad.db"
    sed "s#^catalog = .*#catalog = sqlite:$T/bad.db#" "$C" >"$T/bad.conf"
    "$FERRY_BIN" catalog import "$T/bad.json" --config "$T/bad.conf" >/dev/null || fail "import"
    expect_exit 1 "$FERRY_BIN" tier --config "$T/bad.conf" --older-than 3d
    case $pin in
    pointer*) assert_contains "$ERR" "cannot read the pointer format the catalog pins (pointer_format = 6)" "format 6" ;;
    *) assert_contains "$ERR" "runs ClickHouse 26.7" "version pin"; assert_contains "$ERR" "pins 26.8" "version pin" ;;
    esac
    untouched "$pin"
done
ok "an unreadable pointer format or another pinned ClickHouse version: refused before FREEZE"

# a catalog table that does not exist on the server, and one without the tiered policy
printf '\n[table "ghost"]\ndatabase = default\n\n[table "plain"]\ndatabase = default\n' >>"$C"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
tier_create "$U" plain default
tier_fill "$U" 3 1000 6 plain
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --table ghost
assert_contains "$ERR" "table default.ghost does not exist" "missing table"
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --table plain
assert_contains "$ERR" "storage policy 'default', which has no object-storage disk" "plain policy"
untouched "bad tables"
assert_eq 0 "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'plain' AND disk_name != 'default'")" "plain untouched"
ok "missing table, table without an object-storage disk: clear errors, nothing touched"

# a staging table whose cold disk is missing
chq "$U" "CREATE TABLE events_ferry_staging (tenant UInt32, day UInt32, split UInt32, ts DateTime,
    user UInt32, value UInt64) ENGINE = MergeTree PARTITION BY (tenant, day, split)
    ORDER BY (ts, user)" >/dev/null
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --table events
assert_contains "$ERR" "staging table default.events_ferry_staging has storage policy 'default'" "staging"
assert_contains "$ERR" "cold disk is missing" "staging"
assert_eq "$WANT" "$(tier_fp "$U")" "staging: data unchanged"
assert_eq 0 "$(hot)" "staging: still hot"
assert_eq "" "$(ls -A "$L/blobs")" "staging: nothing uploaded"
ok "staging table without the cold disk: refused before FREEZE"

# only one tiering run at a time: the catalog lease "tier"
chq "$U" "RENAME TABLE events_ferry_staging TO old_staging" >/dev/null
bg_start "$T/flock.log" bash -c "exec 9>>'$L/catalog.db-lease-tier'; flock 9; exec sleep 30"
wait_for 60 sh -c "! flock -n '$L/catalog.db-lease-tier' true" || fail "the test could not hold the lease"
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --table events
assert_contains "$ERR" "another tiering run is in progress" "lease"
kill "$BG_PID"; wait "$BG_PID" 2>/dev/null || true
assert_eq 0 "$(hot)" "lease: still hot"
# a run on one server holds that server's lease: a full run and a run on that server are refused
bg_start "$T/flock2.log" bash -c "exec 9>>'$L/catalog.db-lease-tier.node1'; flock 9; exec sleep 30"
wait_for 60 sh -c "! flock -n '$L/catalog.db-lease-tier.node1' true" || fail "the test could not hold the server lease"
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --table events
assert_contains "$ERR" "another tiering run is in progress" "server lease, full run"
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --table events --server node1
assert_contains "$ERR" "another tiering run is in progress" "server lease, run on that server"
kill "$BG_PID"; wait "$BG_PID" 2>/dev/null || true
assert_eq 0 "$(hot)" "server lease: still hot"
ok "a second tiering run is refused while one holds the lease (the run's or the server's)"

# and with everything fixed, the same partitions tier
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --table events --json
assert_eq 3 "$(jq .partitions_tiered <<<"$OUT")" "3 old days tiered"
assert_eq "$WANT" "$(tier_fp "$U")" "data unchanged after tiering"
tier_leftovers "$L" node1
ok "with the bad inputs gone, tiering works"

# the per_tenant layout: one table <name>_<tenant> per tenant of the catalog, PARTITION BY (day, split)
chq "$U" "CREATE TABLE pt_acme (day UInt32, split UInt32, ts DateTime, user UInt32, value UInt64)
    ENGINE = MergeTree PARTITION BY (day, split) ORDER BY ts SETTINGS storage_policy = 'tiered'" >/dev/null
chq "$U" "INSERT INTO pt_acme SELECT toYYYYMMDD($TODAY - 1 - number % 6), 0,
    toDateTime($TODAY - 1 - number % 6), number % 10, number FROM numbers(6000)" >/dev/null
PTW=$(tier_fp "$U" 1 pt_acme)
"$FERRY_BIN" catalog export --config "$C" |
    jq '.tables += [{"name":"pt","database":"default","layout":"per_tenant","tenant_column":"tenant","day_column":"day","split_column":"split"}]
        | .tenants += [{"name":"acme","splits":1},{"name":"zed","splits":1}]' >"$T/pt.json"
sed "s#^catalog = .*#catalog = sqlite:$T/pt.db#" "$C" >"$T/pt.conf"
"$FERRY_BIN" catalog import "$T/pt.json" --config "$T/pt.conf" >/dev/null || fail "import per_tenant catalog"
expect_exit 0 "$FERRY_BIN" tier --config "$T/pt.conf" --older-than 3d --table pt --json
assert_eq 3 "$(jq .partitions_tiered <<<"$OUT")" "per_tenant: 3 old days of pt_acme tiered"
assert_eq acme "$(jq -r '[.jobs[].tenant] | unique | join(",")' <<<"$OUT")" "per_tenant: the tenant comes from the table"
assert_eq "$PTW" "$(tier_fp "$U" 1 pt_acme)" "per_tenant: data unchanged"
assert_eq 3 "$(chq "$U" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'pt_acme' AND disk_name = 'cold'")" "per_tenant: 3 cold"
ok "per_tenant layout: pt_acme's old days tiered (tenant zed has no table here: skipped)"

# one damaged part in a wave: the agent's upload finds a frozen file that does not match its
# checksums.txt, that partition's job fails and is rolled back, the other partitions of the wave
# are tiered
chq "$U" "INSERT INTO events SELECT 4, toYYYYMMDD($TODAY - 4 - number % 3), 0,
    toDateTime($TODAY - 4 - number % 3) + number, number % 10, number FROM numbers(9000)" >/dev/null
W4=$(tier_fp "$U" "tenant = 4")
read -r BADPID BADPATH < <(chq "$U" "SELECT partition_id, path FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '4-%' ORDER BY partition_id LIMIT 1")
BADFILE=$(ls "$BADPATH"/*.bin | head -1)
cp "$BADFILE" "$T/good.bin"
printf 'X' | dd of="$BADFILE" bs=1 seek=40 conv=notrunc status=none
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --table events --tenant 4 --json
cp "$T/good.bin" "$BADFILE"
assert_eq 2 "$(jq .partitions_tiered <<<"$OUT")" "the two good partitions of the wave tiered"
assert_eq 1 "$(jq .jobs_failed <<<"$OUT")" "the damaged one failed alone"
assert_contains "$(jq -r '.jobs[] | select(.error) | .error' <<<"$OUT")" "does not match its checksums.txt" "the error names the damage"
assert_eq FAILED "$(jq -r --arg p "$BADPID" '.jobs[] | select(.partition_id == $p) | .state' <<<"$OUT")" "its job is FAILED (rolled back)"
assert_eq default "$(chq "$U" "SELECT groupUniqArray(disk_name)[1] FROM system.parts WHERE active AND table = 'events' AND partition_id = '$BADPID'")" "the damaged partition stays hot"
assert_eq "$W4" "$(tier_fp "$U" "tenant = 4")" "data of the wave unchanged"
tier_leftovers "$L" node1
tier_merges_on "$U" "$BADPID"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --table events --tenant 4 --json
assert_eq 1 "$(jq .partitions_tiered <<<"$OUT")" "repaired: the next run tiers it"
assert_eq "$W4" "$(tier_fp "$U" "tenant = 4")" "data unchanged after the retry"
tier_leftovers "$L" node1
ok "a damaged frozen file fails its partition's job alone; the rest of the wave is tiered"

done_testing
