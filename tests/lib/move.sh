# Shell helpers for slice-move tests (source after harness.sh and lab.sh).
#
#   mv_setup DIR NODES      lab with NODES nodes, table `events` (shared layout, tiered policy) on
#                           each, DIR/mv.conf (the lab's ferry.conf plus [table "events"]), ferry init
#   mv_conf DIR             rewrites DIR/mv.conf from the lab's ferry.conf (after lab add-node);
#                           with MV_CATALOG set (a catalog URL, e.g. zk://...), that catalog
#                           instead of the lab's SQLite file
#   mv_rf2_setup DIR [--stop-merges] [LAB_UP OPTIONS...]
#                           lab of two nodes (lab_up options, e.g. --version 26.5) with a
#                           cluster-wide rf = 2: DIR/rf2.conf (the lab's ferry.conf with rf = 2
#                           plus mv.conf's [table "events"]), table `events` on both nodes (with
#                           --stop-merges: merges stopped), ferry init; sets U1 and U2 (the
#                           nodes' URLs)
#   mv_ingest URL TENANT SPLIT DAYS ROWS_PER_DAY [SEED]   rows into one node
#   mv_fp URL TENANT SPLIT  per-partition fingerprint lines: partition_id rows sum xor
#   mv_no_residue DIR       fails when a shadow/ or detached/ folder of any node holds anything

MV_DDL="CREATE TABLE IF NOT EXISTS events (tenant String, day UInt32, split UInt8, user UInt64,
    v UInt64) ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (user)
    SETTINGS storage_policy = 'tiered'"

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

mv_rf2_setup() {
    local dir=$1 stop=0 u
    shift
    if [ "${1:-}" = --stop-merges ]; then stop=1; shift; fi
    lab_up "$dir" --nodes 2 "$@"
    mv_conf "$dir"
    lab_rf_conf "$dir" 2 "$dir/rf2.conf.base"
    { cat "$dir/rf2.conf.base"; sed -n '/^\[table "events"\]/,$p' "$dir/mv.conf"; } >"$dir/rf2.conf"
    U1=$(lab_url "$dir" node1); U2=$(lab_url "$dir" node2)
    for u in "$U1" "$U2"; do
        chq "$u" "$MV_DDL" >/dev/null
        [ "$stop" = 0 ] || chq "$u" "SYSTEM STOP MERGES events" >/dev/null
    done
    "$FERRY_BIN" init --config "$dir/rf2.conf" >/dev/null || fail "init"
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
