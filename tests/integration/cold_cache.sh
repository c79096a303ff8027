# Every flow with ClickHouse's filesystem cache in front of the cold disk (`ferry lab up
# --cold-cache`): cold parts name the cache disk `cold_cache`, which wraps `cold` and shares its
# metadata path. The blog tenant (acme, 6 days) tiered by ferry: every part on cold_cache, rows
# exact, the pointer files ferry wrote read through the cache (a repeated scan reads only from
# it). A move to node2: pointer files only, rows exact, node2's cache starts cold. A rewrite of
# one partition: the rebuilt part's pointer files name new objects, so its cache entries are
# new ones: no read of the erased rows through the old objects' entries, still in the cache.
# Then the sweep: complete, each pointer file counted once (not once per disk), no drift, the
# cache's files never taken for pointer files; --delete-orphans deletes only the rewrite's old
# objects, and every object a pointer file names is still there.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
lab_up "$L" --nodes 2 --cold-cache 64M
mv_conf "$L"
C=$L/mv.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
assert_eq "cold_cache" "$(chq "$U1" "SELECT arrayStringConcat(disks) FROM system.storage_policies WHERE policy_name = 'tiered' AND volume_name = 'cold'")" "the cold volume is the cache disk"
assert_eq "$L/node1/data/disks/cold/ $L/node1/data/disks/cold/ $L/node1/data/cache/cold_cache/" \
    "$(chq "$U1" "SELECT arrayStringConcat([(SELECT path FROM system.disks WHERE name = 'cold'), path, cache_path], ' ') FROM system.disks WHERE name = 'cold_cache'")" \
    "cold_cache shares cold's metadata path; its cache under the data path's cache/"
# ClickHouse removes replaced parts within seconds here (default: 8 minutes)
DDL="CREATE TABLE IF NOT EXISTS events (tenant String, day UInt32, split UInt8, user UInt64,
    v UInt64) ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (user)
    SETTINGS storage_policy = 'tiered', old_parts_lifetime = 1, cleanup_delay_period = 1,
    cleanup_delay_period_random_add = 0, max_cleanup_delay_period = 1"
for u in "$U1" "$U2"; do chq "$u" "$DDL" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
mv_ingest "$U1" acme 0 6 40000
mv_ingest "$U1" other 0 2 1000 7
chq "$U1" "OPTIMIZE TABLE events FINAL" >/dev/null
FP=$(mv_fp "$U1" acme 0); FPO=$(mv_fp "$U1" other 0)

# ---- tiering -------------------------------------------------------------------------------
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 1d --json
assert_eq 8 "$(jq .partitions_tiered <<<"$OUT")" "8 partitions tiered (acme 6, other 2)"
assert_eq "cold_cache	8" "$(chq "$U1" "SELECT disk_name, count() FROM system.parts WHERE active AND table = 'events' GROUP BY disk_name")" "every part on the cache disk"
assert_eq "$FP" "$(mv_fp "$U1" acme 0)" "acme's rows exact after tiering"
assert_eq "$FPO" "$(mv_fp "$U1" other 0)" "other's rows exact"
# the pointer files are ferry's: every object they name is one the catalog recorded
ptr_keys() { # NODE: the object keys every pointer file of events names
    find "$L/$1/data/disks/cold/store" -path '*/detached' -prune -o -type f -print | while read -r f; do
        sed -n '3,/^[0-9]*$/p' "$f" | awk -F'\t' 'NF == 2 {print $2}'
    done | sort -u
}
cat_keys() { "$FERRY_BIN" catalog export --config "$C" | jq -r '.parts[].objects[].key' | sed "s|^|$L/blobs/|" | sort -u; }
# ClickHouse removes the replaced and staging parts a little after the swap (on a loaded machine
# while the listing runs): wait until only the live parts are left, then compare
keys_settled() { [ "$(cat_keys)" = "$(ptr_keys node1 2>/dev/null)" ]; }
wait_for 60 keys_settled || true
assert_eq "$(cat_keys)" "$(ptr_keys node1)" "node1's pointer files name exactly the catalog's objects"
ok "tiered through the cache disk: 8 partitions on cold_cache, rows exact, pointer files name ferry's objects"

# ---- the cache is used ------------------------------------------------------------------------
ev() { chq "$1" "SELECT sum(value) FROM system.events WHERE event = '$2'"; }
scan() { chq "$1" "SELECT count(), sum(v), uniqExact(user) FROM events WHERE tenant = 'acme' SETTINGS max_threads = 2"; }
chq "$U1" "SYSTEM DROP FILESYSTEM CACHE" >/dev/null
src0=$(ev "$U1" CachedReadBufferReadFromSourceBytes); hit0=$(ev "$U1" CachedReadBufferReadFromCacheBytes)
first=$(scan "$U1")
src1=$(ev "$U1" CachedReadBufferReadFromSourceBytes); hit1=$(ev "$U1" CachedReadBufferReadFromCacheBytes)
second=$(scan "$U1")
src2=$(ev "$U1" CachedReadBufferReadFromSourceBytes); hit2=$(ev "$U1" CachedReadBufferReadFromCacheBytes)
assert_eq "$first" "$second" "the same answer from the cache"
[ "$((src1 - src0))" -gt 100000 ] || fail "first scan read $((src1 - src0)) bytes from the store"
assert_eq 0 "$((src2 - src1))" "the repeated scan read nothing from the store"
[ "$((hit2 - hit1))" -ge "$((src1 - src0))" ] || fail "repeated scan read $((hit2 - hit1)) bytes from the cache, the first $((src1 - src0)) from the store"
cached=$(chq "$U1" "SELECT sum(size) FROM system.filesystem_cache WHERE cache_name = 'cold_cache'")
[ "$cached" -gt 0 ] || fail "system.filesystem_cache is empty"
[ -n "$(find "$L/node1/data/cache/cold_cache" -type f | head -1)" ] || fail "no cache file on disk"
echo "# first scan: $((src1 - src0)) bytes from the store; repeated: $((hit2 - hit1)) bytes from the cache, 0 from the store; cache holds $cached bytes"
ok "repeated scan served from the cache (ProfileEvents CachedReadBufferReadFromCacheBytes), none from the store"

# ---- a move: pointer files only, the target's cache starts cold -------------------------------
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null || fail "inventory sync failed"
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 300 --json >"$T/move.json" 2>"$T/move.err" ||
    fail "move failed: $(tail -5 "$T/move.err")"
R=$(jq -c 'select(.event == "move")' "$T/move.json")
assert_eq DONE "$(jq -r .state <<<"$R")" "move done"
[ "$(jq .cold_copied_bytes <<<"$R")" -lt "$(( $(jq .cold_bytes <<<"$R") / 50 ))" ] || fail "the cold side copied more than pointer files: $R"
# every partition cold: each part sent from the table's folder, nothing frozen on node1
assert_eq "0 6 6" "$(jq -r '"\(.freezes) \(.parts_sent_live) \(.cold_parts)"' <<<"$R")" "a slice of cold partitions only: freezes, parts sent live, cold parts"
assert_eq "cold_cache	6" "$(chq "$U2" "SELECT disk_name, count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%acme%' GROUP BY disk_name")" "node2 serves acme from its cache disk"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "node1 holds nothing of acme"
# (the scans first: anything reading acme's columns on node2 warms its cache)
s0=$(ev "$U2" CachedReadBufferReadFromSourceBytes); scan "$U2" >/dev/null; s1=$(ev "$U2" CachedReadBufferReadFromSourceBytes)
scan "$U2" >/dev/null; s2=$(ev "$U2" CachedReadBufferReadFromSourceBytes)
[ "$((s1 - s0))" -gt 100000 ] || fail "node2's first scan read only $((s1 - s0)) bytes from the store (its cache should start cold)"
assert_eq 0 "$((s2 - s1))" "node2's repeated scan read nothing from the store"
assert_eq "$FP" "$(mv_fp "$U2" acme 0)" "acme's rows exact on node2"
mv_no_residue "$L"
ok "move: pointer files only, rows exact on node2, its cache cold at first ($((s1 - s0)) bytes from the store), warm after"

# ---- a rewrite: new objects, new cache entries -------------------------------------------------
P1=$(chq "$U2" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%acme%20261101%'")
X=$(chq "$U2" "SELECT user FROM events WHERE tenant = 'acme' AND day = 20261101 GROUP BY user ORDER BY count() DESC, user LIMIT 1")
nx=$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme' AND day = 20261101 AND user = $X")
[ "$nx" -gt 0 ] || fail "user $X has no row"
cache_paths() { # URL PID: the cache files of the partition's active parts
    chq "$1" "SELECT arrayJoin(cache_paths) FROM system.remote_data_paths WHERE disk_name = 'cold_cache'
        AND local_path IN (SELECT concat(substring(path, length((SELECT path FROM system.disks WHERE name = 'cold_cache')) + 1), f)
                           FROM system.parts ARRAY JOIN ['data.bin', 'data.cmrk4', 'primary.cidx', 'count.txt'] AS f
                           WHERE active AND table = 'events' AND partition_id = '$2') ORDER BY 1"
}
OLD_CP=$(cache_paths "$U2" "$P1")
[ -n "$OLD_CP" ] || fail "the partition's objects are not in node2's cache before the rewrite"
tot=$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user = $X"
assert_contains "$ERR" "rewrite: 1/1 partitions" "progress line on stderr"
assert_contains "$OUT" "1 partitions rewritten" "one partition rewritten"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme' AND user = $X AND day = 20261101")" "user $X's rows gone (read through the cache)"
assert_eq "$((tot - nx))" "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "exactly $nx rows fewer"
assert_eq "cold_cache" "$(chq "$U2" "SELECT groupUniqArray(disk_name)[1] FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P1'")" "cold again, on the cache disk"
scan "$U2" >/dev/null
NEW_CP=$(cache_paths "$U2" "$P1")
[ -n "$NEW_CP" ] || fail "the rebuilt partition is not in the cache after a scan"
assert_eq "" "$(comm -12 <(echo "$OLD_CP") <(echo "$NEW_CP"))" "no cache entry of the old objects serves the rebuilt part"
still=$(comm -12 <(echo "$OLD_CP") <(chq "$U2" "SELECT cache_path FROM system.filesystem_cache ORDER BY 1") | wc -l)
echo "# old objects' cache entries still in the cache: $still (never read: no pointer file names their objects)"
ok "rewrite: the rebuilt part names new objects, read through new cache entries; the erased rows are not read from the old ones"

# ---- sweep -----------------------------------------------------------------------------------
# the parts the rewrite replaced on node2, and the move's source parts on node1 (outdated, not
# yet removed, they still name the old objects: the sweep rightly keeps those)
wait_outdated_gone "$U1 $U2" events events_ferry_staging events_ferry_rewrite
# a part being removed sits in a delete_tmp_ folder until ClickHouse is done with it
delete_tmp() { find "$L"/node*/data/disks/cold/store -mindepth 3 -maxdepth 3 -type d -name 'delete_tmp_*'; }
no_delete_tmp() { [ -z "$(delete_tmp)" ]; }
wait_for 60 no_delete_tmp || fail "half-removed parts left: $(delete_tmp | head -3)"
npf=0
for n in node1 node2; do
    npf=$((npf + $(find "$L/$n/data/disks/cold/store" -path '*/detached' -prune -o -path '*/delete_tmp_*' -prune -o -type f -print | wc -l)))
done
sweep_complete() { "$FERRY_BIN" sweep --config "$C" --json >"$T/sweep0.json" 2>/dev/null; [ "$(jq .complete "$T/sweep0.json")" = true ]; }
wait_for 60 sweep_complete || fail "sweep incomplete: $(jq -c .problems "$T/sweep0.json")"
S=$(cat "$T/sweep0.json")
assert_eq "0 0" "$(jq -r '"\(.dangling | length) \(.drift | length)"' <<<"$S")" "no dangling pointer, no drift"
assert_eq "$npf" "$(jq .pointer_files <<<"$S")" "each pointer file counted once (cold and cold_cache share the path)"
[ "$(jq '.orphans | length' <<<"$S")" -gt 0 ] || fail "the rewrite's old objects are not orphans: $(jq -c '{pointer_files, referenced_objects, outside_references, catalog_only}' <<<"$S")"
"$FERRY_BIN" sweep --config "$C" --json --delete-orphans --min-age 1s >"$T/sweep.json" 2>"$T/sweep.err" || fail "sweep --delete-orphans: $(cat "$T/sweep.err")"
[ "$(jq .deleted "$T/sweep.json")" -gt 0 ] || fail "nothing deleted"
for n in node1 node2; do
    while read -r k; do [ -z "$k" ] || [ -f "$k" ] || fail "$n: object $k named by a pointer file was deleted"; done < <(ptr_keys $n)
done
assert_eq "$(cat_keys)" "$( (ptr_keys node1; ptr_keys node2) | sort -u)" "the store's recorded objects = what the pointer files name"
assert_eq "$(find "$L/blobs" -type f | sort)" "$(cat_keys)" "every object left in the store is named"
assert_eq "$((tot - nx))" "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "acme's rows after the sweep"
assert_eq "$FPO" "$(mv_fp "$U1" other 0)" "other's rows after the sweep"
for u in "$U1" "$U2"; do assert_eq 0 "$(curl -sS "$u/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete an object"; done
expect_exit 0 "$FERRY_BIN" sweep --config "$C" --json
assert_eq "true 0" "$(jq -r '"\(.complete) \(.orphans | length)"' <<<"$OUT")" "second sweep clean"
ok "sweep with the cache: complete, $npf pointer files counted once, no drift, only the rewrite's old objects deleted"

# ---- a move with --warm-cache: the target's first scan finds the columns cached -------------
# node1's cache dropped (it still held acme's objects from before the first move); node2's
# holds all of acme's columns (the scans above)
chq "$U1" "SYSTEM DROP FILESYSTEM CACHE" >/dev/null
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node1 --grace 300 --warm-cache --json >"$T/move2.json" 2>"$T/move2.err" ||
    fail "move back failed: $(tail -5 "$T/move2.err")"
W=$(jq -c 'select(.event == "cache_warm")' "$T/move2.json")
[ -n "$W" ] || fail "no cache_warm line: $(cat "$T/move2.json")"
assert_eq "node1 6" "$(jq -r '"\(.server) \(.partitions)"' <<<"$W")" "the warm-up read acme's 6 cached partitions on node1"
[ "$(jq .read_from_store_bytes <<<"$W")" -gt 100000 ] || fail "the warm-up read nothing from the store: $W"
s0=$(ev "$U1" CachedReadBufferReadFromSourceBytes); h0=$(ev "$U1" CachedReadBufferReadFromCacheBytes)
scan "$U1" >/dev/null
s1=$(ev "$U1" CachedReadBufferReadFromSourceBytes); h1=$(ev "$U1" CachedReadBufferReadFromCacheBytes)
assert_eq 0 "$((s1 - s0))" "node1's first scan after the warmed move read nothing from the store"
[ "$((h1 - h0))" -gt 100000 ] || fail "node1's first scan read $((h1 - h0)) bytes from the cache"
assert_eq "$((tot - nx))" "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "acme's rows on node1"
echo "# warm-up: $W"
ok "move --warm-cache: the target's first scan served from its cache ($((h1 - h0)) bytes), none from the store"

# ---- retention: a tenant's cold data removed through the cache disk ---------------------------
# the pointer files are found under the cache disk's name (system.parts names cold_cache; the
# table's data path maps to the disk of its policy), their objects deleted, nothing else
OPIDS=$(chq "$U1" "SELECT groupUniqArray(partition_id) FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%other%' FORMAT JSONEachRow" | jq -c '.[]')
"$FERRY_BIN" catalog export --config "$C" | jq -r --argjson p "$OPIDS" '.parts[] | select(.partition_id as $x | $p | index($x)) | .objects[].key' | sed "s|^|$L/blobs/|" | sort -u >"$T/other_keys"
[ "$(wc -l <"$T/other_keys")" -gt 10 ] || fail "other's objects not in the catalog"
# and a day of other that ClickHouse moved to the cold volume itself: no catalog record, so
# retention finds its objects only through the pointer files under the table's data path on the
# cache disk
chq "$U1" "INSERT INTO events SELECT 'other', 20261103, 0, number, number FROM numbers(5000)" >/dev/null
PRAW=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition = '(''other'',20261103,0)'")
chq "$U1" "ALTER TABLE events MOVE PARTITION ID '$PRAW' TO DISK 'cold_cache'" >/dev/null
for f in "$(chq "$U1" "SELECT path FROM system.parts WHERE active AND table = 'events' AND partition_id = '$PRAW'")"*; do
    sed -n '3,/^[0-9]*$/p' "$f" | awk -F'\t' 'NF == 2 {print $2}'
done | sort -u >"$T/raw_keys"
[ "$(wc -l <"$T/raw_keys")" -gt 5 ] || fail "no objects of ClickHouse's own cold part"
cat "$T/raw_keys" >>"$T/other_keys"
acme_before=$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")
expect_exit 0 "$FERRY_BIN" retention --config "$C" --tenant other --all --json
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'other'")" "other's rows gone"
assert_eq 0 "$(while read -r k; do [ ! -e "$k" ] || echo "$k"; done <"$T/other_keys" | wc -l)" "every object of other's cold partitions deleted"
assert_eq "$acme_before" "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "acme untouched"
for n in node1 node2; do
    while read -r k; do [ -z "$k" ] || [ -f "$k" ] || fail "$n: object $k named by a pointer file was deleted"; done < <(ptr_keys $n)
done
for u in "$U1" "$U2"; do assert_eq 0 "$(curl -sS "$u/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete an object"; done
ok "retention --all of tenant other through the cache disk: its $(wc -l <"$T/other_keys") objects deleted ($(wc -l <"$T/raw_keys") of a part ClickHouse moved itself), acme's untouched"

# ---- bad input -------------------------------------------------------------------------------
expect_exit 2 "$FERRY_BIN" move --config "$C" --resume all --warm-cache
assert_contains "$ERR" "--warm-cache goes with" "--warm-cache with --resume refused"
expect_exit 2 "$FERRY_BIN" lab up --dir "$L" --cold-cache 1K
assert_contains "$ERR" "--cold-cache wants a size" "too small a cache refused"
expect_exit 2 "$FERRY_BIN" lab up --dir "$L" --cold-cache 128M
assert_contains "$ERR" "cannot change" "the cache of an existing lab cannot change"
ok "bad --cold-cache refused"
done_testing
