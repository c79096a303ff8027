# Shell helpers for slice-move tests (source after harness.sh and lab.sh).
#
#   mv_setup DIR NODES      lab with NODES nodes, table `events` (shared layout, tiered policy) on
#                           each, DIR/mv.conf (the lab's ferry.conf plus [table "events"]), ferry init
#   mv_conf DIR             rewrites DIR/mv.conf from the lab's ferry.conf (after lab add-node);
#                           with MV_CATALOG set (a catalog URL, e.g. zk://...), that catalog
#                           instead of the lab's SQLite file
#   mv_rf2_conf DIR         writes DIR/rf2.conf: the lab's ferry.conf with a cluster-wide rf = 2
#                           plus DIR/mv.conf's [table "events"] (run mv_conf first)
#   mv_rf2_setup DIR [--stop-merges] [LAB_UP OPTIONS...]
#                           lab of two nodes (lab_up options, e.g. --version 26.5) with a
#                           cluster-wide rf = 2: DIR/rf2.conf (the lab's ferry.conf with rf = 2
#                           plus mv.conf's [table "events"]), table `events` on both nodes (with
#                           --stop-merges: merges stopped), ferry init; sets U1 and U2 (the
#                           nodes' URLs)
#   mv_ingest URL TENANT SPLIT DAYS ROWS_PER_DAY [SEED]   rows into one node
#   mv_fp URL TENANT SPLIT  per-partition fingerprint lines: partition_id rows sum xor
#   mv_day_rows FROM COUNT  the INSERT of the rows mv_ingest writes for acme's day 20261101
#                           (split 0), numbers FROM..FROM+COUNT-1: the same rows on any node
#   mv_no_residue DIR       fails when a shadow/ or detached/ folder of any node holds anything

MV_DDL="CREATE TABLE IF NOT EXISTS events (tenant String, day UInt32, split UInt8, user UInt64,
    v UInt64) ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (user)
    SETTINGS storage_policy = 'tiered'"
# Settings to append to MV_DDL (MV_DDL="$MV_DDL$MV_FAST_CLEANUP") for a test that waits for the
# server to remove outdated parts: a table's cleanup thread schedules itself by the table's
# activity, up to max_cleanup_delay_period (300 s) ahead, and a later MODIFY SETTING does not
# wake it; tables made AS events (staging, the empty twin) inherit the 1 s bound.
MV_FAST_CLEANUP=", cleanup_delay_period = 1, max_cleanup_delay_period = 1,
    cleanup_delay_period_random_add = 0"

mv_conf() {
    local dir=$1
    { cat "$dir/ferry.conf"
      printf '\n[table "events"]\ndatabase = default\nlayout = shared\n'
      printf 'tenant_column = tenant\nday_column = day\nsplit_column = split\n'; } >"$dir/mv.conf"
    [ -z "${MV_CATALOG:-}" ] || sed -i "s#^catalog = .*#catalog = $MV_CATALOG#" "$dir/mv.conf"
}

mv_urls() { "$FERRY_BIN" lab status --dir "$1" --json | jq -r '.nodes[].http'; }

mv_setup() {
    local dir=$1 nodes=$2 u
    lab_up "$dir" --nodes "$nodes"
    mv_conf "$dir"
    for u in $(mv_urls "$dir"); do chq "$u" "$MV_DDL" >/dev/null; done
    "$FERRY_BIN" init --config "$dir/mv.conf" >/dev/null || fail "ferry init failed"
}

mv_rf2_conf() {
    lab_rf_conf "$1" 2 "$1/rf2.conf.base"
    { cat "$1/rf2.conf.base"; sed -n '/^\[table "events"\]/,$p' "$1/mv.conf"; } >"$1/rf2.conf"
}

mv_rf2_setup() {
    local dir=$1 stop=0 u
    shift
    if [ "${1:-}" = --stop-merges ]; then stop=1; shift; fi
    lab_up "$dir" --nodes 2 "$@"
    mv_conf "$dir"
    mv_rf2_conf "$dir"
    U1=$(lab_url "$dir" node1); U2=$(lab_url "$dir" node2)
    for u in "$U1" "$U2"; do
        chq "$u" "$MV_DDL" >/dev/null
        [ "$stop" = 0 ] || chq "$u" "SYSTEM STOP MERGES events" >/dev/null
    done
    "$FERRY_BIN" init --config "$dir/rf2.conf" >/dev/null || fail "init"
}

# mv_rf2_acme DIR [mv_rf2_setup's options]: mv_rf2_setup, then tenant acme registered with the
# lab's rf 2 config; sets C to that config (and U1, U2 as mv_rf2_setup does).
mv_rf2_acme() {
    mv_rf2_setup "$@"
    C=$1/rf2.conf
    "$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add"
}

# mv_place_tenants DIR SHARDS_TSV N: N tenants t01..tN of 1-3 splits placed by `ferry place` on
# the shards of SHARDS_TSV (name, weight), each slice's rows (3 days) inserted on its shard (URL:
# node name -> ClickHouse URL), then the oldest day of every tenant on node1 moved to the cold
# disk. Leaves $T/slices.tsv and $T/place.json.
mv_place_tenants() {
    local dir=$1 shards=$2 n=$3 i k s tenant split shard p
    : >"$T/slices.tsv"
    for i in $(seq 1 "$n"); do
        k=$((i % 3 + 1))
        for s in $(seq 0 $((k - 1))); do printf 't%02d\t%d\t%d\n' "$i" "$s" $((1000 + i * 100)) >>"$T/slices.tsv"; done
    done
    "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$shards" --json >"$T/place.json" || fail "ferry place failed"
    while read -r tenant split shard; do
        chq "${URL[$shard]}" "INSERT INTO events SELECT '$tenant', 20261101 + number % 3, $split,
            cityHash64(number, '$tenant') % 100000, number FROM numbers($((500 + 37 * 10#${tenant#t}))) SETTINGS max_partitions_per_insert_block = 100" >/dev/null
    done < <(jq -r '.placements[] | "\(.tenant) \(.split) \(.shards[0])"' "$T/place.json")
    chq "${URL[node1]}" "SELECT DISTINCT partition FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%20261101%'" |
        while read -r p; do chq "${URL[node1]}" "ALTER TABLE events MOVE PARTITION $(sed "s/\\\\'/'/g" <<<"$p") TO DISK 'cold'" >/dev/null; done
}

# mv_tenant_fps NODE...: "tenant split rows hash" of every slice on the nodes (URL), sorted.
mv_tenant_fps() {
    local n
    for n in "$@"; do chq "${URL[$n]}" "SELECT tenant, split, count(), sum(cityHash64(*)) FROM events GROUP BY tenant, split"; echo; done | grep . | sort
}

# mv_only_where_routed CONF NODE...: fails when a slice has rows on a node it is not routed to.
mv_only_where_routed() {
    local conf=$1 n t s r
    shift
    for n in "$@"; do
        chq "${URL[$n]}" "SELECT DISTINCT tenant || ' ' || toString(split) FROM events" | while read -r t s; do
            r=$("$FERRY_BIN" route --config "$conf" --tenant "$t" --split "$s" --json | jq -r '.slices[0].shards[0]')
            [ "$r" = "$n" ] || fail "$t/$s has rows on $n but is routed to $r"
        done
    done
}

mv_ingest() {
    local url=$1 tenant=$2 split=$3 days=$4 per=$5 seed=${6:-0}
    chq "$url" "INSERT INTO events SELECT '$tenant', 20261101 + intDiv(number, $per), $split,
        cityHash64(number, $seed) % 100000, cityHash64(number, $seed, 1) % 1000000
        FROM numbers($((days * per))) SETTINGS max_partitions_per_insert_block = 1000" >/dev/null
}

mv_fp() {
    chq "$1" "SELECT partition_id, count(), sum(h), groupBitXor(h) FROM (SELECT _partition_id AS
        partition_id, cityHash64(*) AS h FROM events WHERE tenant = '$2' AND split = $3)
        GROUP BY partition_id ORDER BY partition_id"
}

mv_no_residue() {
    local dir=$1 d left
    for d in "$dir"/node*/data; do
        left=$(find "$d/shadow" "$d/disks/cold/shadow" -mindepth 1 -maxdepth 1 ! -name increment.txt 2>/dev/null || true)
        [ -z "$left" ] || fail "leftover freeze folders: $left"
        left=$(find "$d/store" "$d/disks/cold/store" -path '*/detached/*' -mindepth 4 -maxdepth 4 2>/dev/null || true)
        [ -z "$left" ] || fail "leftover detached folders: $left"
    done
}

# mv_sweep_summary CONF: runs ferry sweep on CONF and prints "complete drift dangling" (counts);
# the drift goes to $T/drift.json
mv_sweep_summary() {
    "$FERRY_BIN" sweep --config "$1" --json >"$T/sweep.json" 2>"$T/sweep.err" || true
    jq -c .drift "$T/sweep.json" >"$T/drift.json" || fail "sweep gave no report: $(tail -3 "$T/sweep.err")"
    jq -r '"\(.complete) \(.drift | length) \(.dangling | length)"' "$T/sweep.json"
}

mv_day_rows() {
    echo "INSERT INTO events SELECT 'acme', 20261101, 0, cityHash64(number, 0) % 100000,
        cityHash64(number, 0, 1) % 1000000 FROM numbers($1, $2)"
}
