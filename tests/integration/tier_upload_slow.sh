# A big partition tiers under a slow object store (found by the chaos soak: the settle phase's
# `ferry tier` sent a wave of hundreds of parts as 2 upload requests, one of them took longer
# than the client's 600 s, and the job failed while the agent went on uploading). Upload and
# write-pointers requests now carry at most 16 parts each (lib/flow/tier_int.h,
# TIER_CHUNK_PARTS), so a request's time no longer grows with the partition. Scaled down: the
# agent pauses 150 ms after each part it uploads (FERRY_AGENT_TEST_SLOW_UPLOAD_MS, a slow store)
# and tiering waits at most 6 s for an agent's answer (FERRY_TEST_AGENT_TIMEOUT_MS): a
# partition of 150 parts in 2 requests needs about 11 s each; in requests of 16 parts, 2.4 s.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
FERRY_AGENT_TEST_SLOW_UPLOAD_MS=150 tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
chq "$U" "SYSTEM STOP MERGES events" >/dev/null # keep the parts apart until the tiering
# and during it: a tiering run starts a table's stopped merges when no job of its needs them
# stopped (docs/tiering.md), and 150 parts of ~1 KB would be 3 before their upload
chq "$U" "ALTER TABLE events MODIFY SETTING max_bytes_to_merge_at_max_space_in_pool = 1" >/dev/null
chq "$U" "INSERT INTO events SELECT 1, toYYYYMMDD($TODAY - 5), 0, toDateTime($TODAY - 5) + number,
    number % 97, number FROM numbers(1500) SETTINGS max_block_size = 10,
    min_insert_block_size_rows = 10, max_insert_block_size = 10, min_insert_block_size_bytes = 0" >/dev/null
parts=$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events'")
[ "$parts" -ge 150 ] || fail "only $parts parts"
want=$(tier_fp "$U" "tenant = 1")
t0=$(date +%s)
# --no-compact: the run would otherwise merge the 150 parts into one before tiering it
# (docs/tiering.md), and one part takes no chunking
FERRY_TEST_AGENT_TIMEOUT_MS=6000 "$FERRY_BIN" tier --config "$C" --older-than 3d --no-compact --json >"$T/t.json" 2>"$T/t.err" ||
    fail "tier under a slow store: $(jq -c '[.jobs[] | {state, error}]' "$T/t.json" 2>/dev/null) $(tail -3 "$T/t.err")"
assert_eq DONE "$(jq -r '[.jobs[].state] | join(" ")' "$T/t.json")" "the job finished"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events'")" "all cold"
tier_leftovers "$L" node1
uploads=$(grep -c 'agent: op=upload status=200' "$L/node1/node.log" || true)
[ "$uploads" -ge $(( (parts + 15) / 16 )) ] ||
    fail "the $parts parts went up in $uploads upload requests, not in requests of at most 16"
ok "a partition of $parts parts tiered with a slow store ($(( $(date +%s) - t0 )) s), no agent request near the 6 s timeout"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "every object in the store is recorded in the catalog"
ok "every uploaded object recorded"
done_testing
