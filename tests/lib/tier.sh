# Shell helpers for tiering tests (source after harness.sh and lab.sh).
#
#   tier_lab DIR ARGS...        lab_up DIR ARGS..., then a [table "events"] (shared layout) in its
#                               ferry.conf and `ferry init`
#   tier_create URL [TABLE] [POLICY]   the events table (tenant, day, split, ts, user, value)
#   tier_fill URL TENANT ROWS DAYS [TABLE]   ROWS rows over the DAYS days before today
#   tier_fp URL [WHERE] [TABLE] per partition: count, sum(value), uniqExact(user),
#                               uniqExact(cityHash64(*)) - the data, whatever its parts
#   tier_leftovers LAB NODE     fails when a shadow folder, a detached part (of events or its
#                               staging table) or a temporary ferry folder is left on NODE
#   tier_merges_on URL PID      fails unless merges run on events (OPTIMIZE of PID succeeds)
#   tier_no_bg_merges URL       events merges only when told (OPTIMIZE): no part is small enough
#                               for a background merge (max_bytes_to_merge_* = 1 byte)
#   tier_parts URL TENANT DAYS_AGO PARTS ROWS   PARTS inserts of ROWS rows each into events, one
#                               part each, for the partition of TENANT DAYS_AGO days before today
#   tier_local_keys LAB         the ferry-uploaded object keys of a local lab, sorted
#   tier_catalog_keys CONF      the object keys the catalog's part records name, sorted
#   tier_copy_frozen LAB NODE WHERE DEST   freezes events on NODE and keeps a copy of what the
#                               freeze holds of its active parts matching WHERE (a system.parts
#                               condition) in DEST/<partition_id>/<part>/, then unfreezes
#   tier_match_frozen DEST DIR [SUFFIX]   fails unless every file of DEST (tier_copy_frozen) has
#                               an object with the same bytes at DIR/<partition_id>/*/<part>/<file>SUFFIX
#                               (a local store's or s3rver's folder of the table's objects)

# One fixed clock for the whole test (ferry reads FERRY_TEST_NOW, test-only), and the same day
# in SQL: a test that crosses midnight UTC sees the same partitions due.
export FERRY_TEST_NOW=${FERRY_TEST_NOW:-$(date -u +%s)}
TODAY="toDate(toDateTime($FERRY_TEST_NOW, 'UTC'))"

tier_lab() {
    local dir=$1; shift
    lab_up "$dir" "$@"
    printf '\n[table "events"]\ndatabase = default\nlayout = shared\n' >>"$dir/ferry.conf"
    "$FERRY_BIN" init --config "$dir/ferry.conf" >/dev/null || fail "ferry init failed"
}

tier_create() {
    local url=$1 table=${2:-events} policy=${3:-tiered}
    chq "$url" "CREATE TABLE $table (tenant UInt32, day UInt32, split UInt32, ts DateTime,
        user UInt32, value UInt64) ENGINE = MergeTree PARTITION BY (tenant, day, split)
        ORDER BY (ts, user) SETTINGS storage_policy = '$policy'" >/dev/null
}

tier_fill() {
    local url=$1 tenant=$2 rows=$3 days=$4 table=${5:-events}
    chq "$url" "INSERT INTO $table SELECT $tenant, toYYYYMMDD($TODAY - 1 - number % $days), 0,
        toDateTime($TODAY - 1 - number % $days) + intDiv(number, $days) % 86400,
        cityHash64(number, $tenant) % 50000, number FROM numbers($rows)
        SETTINGS max_partitions_per_insert_block = 1000" >/dev/null
}

tier_fp() {
    local url=$1 where=${2:-1} table=${3:-events}
    chq "$url" "SELECT _partition_id, count(), sum(value), uniqExact(user), uniqExact(cityHash64(*))
        FROM $table WHERE $where GROUP BY _partition_id ORDER BY _partition_id"
}

tier_leftovers() {
    local lab=$1 node=$2 data="$1/$2/data" url
    url=$(lab_url "$lab" "$node")
    local sh
    sh=$(ls -A "$data/shadow" 2>/dev/null | grep -v '^increment.txt$' || true)
    [ -z "$sh" ] || fail "$node: shadow folders left: $sh"
    if [ -d "$data/disks/cold/shadow" ]; then
        sh=$(ls -A "$data/disks/cold/shadow" | grep -v '^increment.txt$' || true)
        [ -z "$sh" ] || fail "$node: cold shadow folders left: $sh"
    fi
    local det
    det=$(chq "$url" "SELECT table, name FROM system.detached_parts WHERE table IN ('events', 'events_ferry_staging')")
    [ -z "$det" ] || fail "$node: detached parts left: $det"
    local tmp
    # find exits 1 when ClickHouse removes a folder while it walks (an outdated part's cleanup;
    # seen under a CPU burner): what it lists is still the answer
    tmp=$(find "$data" -name 'tmp-ferry-*' 2>/dev/null | head -3 || true)
    [ -z "$tmp" ] || fail "$node: temporary folders left: $tmp"
}

tier_no_bg_merges() {
    chq "$1" "ALTER TABLE events MODIFY SETTING max_bytes_to_merge_at_max_space_in_pool = 1,
        max_bytes_to_merge_at_min_space_in_pool = 1" >/dev/null
}

tier_parts() {
    local url=$1 tenant=$2 ago=$3 parts=$4 rows=$5 b
    for b in $(seq 1 "$parts"); do
        chq "$url" "INSERT INTO events SELECT $tenant, toYYYYMMDD($TODAY - $ago), 0,
            toDateTime($TODAY - $ago) + number, number % 97, number + $b * 1000000 FROM numbers($rows)" >/dev/null
    done
}

tier_merges_on() {
    local url=$1 pid=$2
    chq "$url" "OPTIMIZE TABLE events PARTITION ID '$pid' FINAL" >/dev/null
}

tier_local_keys() { (cd "$1/blobs" && find default -type f | sort); }

tier_catalog_keys() {
    "$FERRY_BIN" catalog export --config "$1" | jq -r '.parts[]?.objects[].key' | sort
}

# tier_s3rver_restart DIR BUCKET PORT: starts s3rver again on PORT with the data of DIR (as
# s3rver_start left it), for tests that take the store away and bring it back.
tier_s3rver_restart() {
    local dir=$1 bucket=$2 port=$3
    : >"$dir/s3rver.log"
    bg_start "$dir/s3rver.log" node --openssl-legacy-provider "$S3RVER_JS" -d "$dir/data" \
        -a 127.0.0.1 -p "$port" --service-endpoint localhost --configure-bucket "$bucket"
    S3RVER_PID=$BG_PID
    wait_for 30 grep -q "listening" "$dir/s3rver.log" || fail "s3rver did not restart"
}

# tier_s3_keys DIR BUCKET: every object key in s3rver's store, sorted.
tier_s3_keys() {
    (cd "$1/data/$2" && find . -name '*._S3rver_object' | sed 's#^\./##; s#\._S3rver_object$##' | sort)
}

tier_copy_frozen() {
    local lab=$1 node=$2 where=$3 dest=$4 url pid part
    url=$(lab_url "$lab" "$node")
    chq "$url" "ALTER TABLE events FREEZE WITH NAME 'testcopy'" >/dev/null
    mkdir -p "$dest"
    while IFS=$'\t' read -r pid part; do
        mkdir -p "$dest/$pid"
        cp -r "$(echo "$lab/$node"/data/shadow/testcopy/store/*/*/"$part")" "$dest/$pid/$part"
    done < <(chq "$url" "SELECT partition_id, name FROM system.parts WHERE active AND table = 'events' AND $where")
    chq "$url" "ALTER TABLE events UNFREEZE WITH NAME 'testcopy'" >/dev/null
    rm -rf "$lab/$node/data/shadow/testcopy"
}

tier_match_frozen() {
    local dest=$1 dir=$2 suffix=${3:-} f rel obj
    while read -r f; do
        rel=${f#"$dest/"}                      # <partition_id>/<part>/<file>
        # keys carry the freeze name between partition and part (docs/formats.md)
        obj=$(compgen -G "$dir/${rel%%/*}/*/${rel#*/}$suffix" | head -n 1 || true)
        [ -n "$obj" ] || fail "no object for the frozen file $rel"
        cmp -s "$f" "$obj" || fail "object $obj differs from the frozen file"
    done < <(find "$dest" -type f)
}
