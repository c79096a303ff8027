# A tier job over partitions of many hot parts: the list of frozen parts is longer than a tier
# job's record keeps inline (TIER_JOB_DATA_INLINE, 2 KB, about 60 names; the chaos soak's list took
# 15,903 bytes). It goes to companion records (tier_hot.c, docs/tiering.md): a wave
# of two partitions of 150 parts each is tiered, crashed after UPLOAD (so the resumed run reads
# the lists back from the catalog): same data, every part cold, every object recorded.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
tier_no_bg_merges "$U" # keep the parts apart until the tiering (which runs --no-compact)
many() { # TENANT: two old days of 150 parts each (a part per 10-row block)
    chq "$U" "INSERT INTO events SELECT $1, toYYYYMMDD($TODAY - 5 - intDiv(number, 1500)), 0,
        toDateTime($TODAY - 5) + number, number % 97, number FROM numbers(3000)
        SETTINGS max_block_size = 10, min_insert_block_size_rows = 10, max_insert_block_size = 10,
        min_insert_block_size_bytes = 0" >/dev/null
}
parts_of() { chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$1-%'"; }
companions() { sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'jobs' AND name LIKE 'tier.%.$1-%.hot.%'"; }

many 1
[ "$(parts_of 1)" -ge 300 ] || fail "tenant 1 has only $(parts_of 1) parts"
want=$(tier_fp "$U" "tenant = 1")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=UPLOAD "$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 1
[ "$(companions 1)" -ge 2 ] || fail "the part lists were not journaled in companion records: $(companions 1)"
assert_eq 0 "$(sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'jobs' AND name LIKE 'tier.%' AND length(json_extract(doc, '\$.data')) >= 2048")" "every job record within its inline size"
expect_exit 0 "$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 1 --json
assert_eq "DONE DONE" "$(jq -r '[.jobs[].state] | join(" ")' <<<"$OUT")" "the resumed wave finished ($(jq -c '[.jobs[] | {state, error}]' <<<"$OUT"))"
assert_eq 2 "$(jq '[.jobs[] | select(.resumed and .hot_parts >= 150)] | length' <<<"$OUT")" "both jobs resumed with their long part lists"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '1-%'")" "all cold"
tier_leftovers "$L" node1
ok "a wave of 2 partitions of $(jq '[.jobs[].hot_parts] | add' <<<"$OUT") hot parts, crashed after UPLOAD: resumed from the companion records, same data"

assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "every object in the store is recorded in the catalog"
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"

done_testing
