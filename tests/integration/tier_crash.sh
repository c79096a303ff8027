# kill -9 of the tiering process at every step (test-only FERRY_TEST_CRASH_AFTER / _BEFORE, which
# _exit(137) right after / right before a state is journaled, plus the points SWAP and RECORDED),
# then a plain re-run: the job is resumed from the journal and finished; the data is the same, no
# row doubled or lost, no detached, shadow or temporary folder left, merges running again, and
# every object in the store recorded in the catalog. The same for the late-rows swap (ATTACH FROM
# + DETACH PART) crashed in the middle, for a wave of three partitions crashed at points of the
# wave, for a wave whose swap ran for one of its partitions only, and for pointer parts merged in
# staging before the swap.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
CASES=(AFTER:FREEZE BEFORE:UPLOAD AFTER:UPLOAD BEFORE:POINTERS AFTER:POINTERS BEFORE:ATTACH
       AFTER:ATTACH BEFORE:REPLACE AFTER:REPLACE AFTER:SWAP BEFORE:VERIFY AFTER:VERIFY
       BEFORE:CLEANUP AFTER:CLEANUP AFTER:RECORDED BEFORE:DONE AFTER:DONE BEFORE:FREEZE)
N=${#CASES[@]}
# one old day per tenant 1..N, in two inserts (two parts), and a hot day
for b in 0 1; do
    chq "$U" "INSERT INTO events SELECT number % $N + 1, toYYYYMMDD($TODAY - 6), 0,
        toDateTime($TODAY - 6) + number % 86400, number % 977, number + $b * 1000000
        FROM numbers(40000)" >/dev/null
done
chq "$U" "INSERT INTO events SELECT 1, toYYYYMMDD($TODAY), 0, now(), 1, number FROM numbers(10)" >/dev/null
HOTPID=$(chq "$U" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '1-%' ORDER BY partition_id DESC LIMIT 1")

crash_and_resume() { # TENANT VAR POINT
    local k=$1 var=$2 point=$3 want
    want=$(tier_fp "$U" "tenant = $k")
    expect_exit 137 env "FERRY_TEST_CRASH_$var=$point" "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant "$k"
    expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant "$k" --json
    assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "$var $point: the re-run finished ($OUT)"
    assert_eq "$want" "$(tier_fp "$U" "tenant = $k")" "$var $point: same data, nothing doubled or lost"
    assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$k-%' AND partition_id != '$HOTPID'")" "$var $point: tiered"
    jq -e '[.jobs[] | select(.state != "DONE")] | length == 0' <<<"$OUT" >/dev/null ||
        fail "$var $point: a job did not finish: $OUT"
    tier_leftovers "$L" node1
}

k=0
for c in "${CASES[@]}"; do
    k=$((k + 1))
    crash_and_resume "$k" "${c%%:*}" "${c#*:}"
done
tier_merges_on "$U" "$HOTPID"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "every object in the store is recorded in the catalog"
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"
ok "kill -9 after or before each of the $N points, then a re-run: same data, no leftovers, no stray objects"

# late rows into tiered days, crashed in the middle of the ATTACH FROM + DETACH PART swap
k=0
for c in AFTER:SWAP BEFORE:VERIFY AFTER:VERIFY; do
    k=$((k + 1))
    before=$(chq "$U" "SELECT count() FROM events WHERE tenant = $k AND day != toYYYYMMDD($TODAY)")
    chq "$U" "INSERT INTO events SELECT $k, toYYYYMMDD($TODAY - 6), 0, toDateTime($TODAY - 6), 5, 9000000 + number FROM numbers(123)" >/dev/null
    crash_and_resume "$k" "${c%%:*}" "${c#*:}"
    assert_eq "$((before + 123))" "$(chq "$U" "SELECT count() FROM events WHERE tenant = $k AND day != toYYYYMMDD($TODAY)")" "late rows of tenant $k counted once"
done
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "late rows: every object recorded"
ok "late-row swaps crashed before, during and after the swap: resumed, counted once"

# ---- waves: several partitions of one table tiered together, crashed at points of the wave -----
# tenant k has three old days (three jobs in one wave); a crash leaves every job of the wave at
# the same point, and the re-run resumes them as one wave
wave_fill() { # TENANT
    for b in 0 1; do
        chq "$U" "INSERT INTO events SELECT $1, toYYYYMMDD($TODAY - 4 - number % 3), 0,
            toDateTime($TODAY - 4 - number % 3) + number % 86400, number % 977, number + $b * 1000000
            FROM numbers(30000)" >/dev/null
    done
}
k=40
for c in AFTER:FREEZE AFTER:UPLOAD BEFORE:ATTACH AFTER:SWAP BEFORE:VERIFY AFTER:RECORDED BEFORE:DONE; do
    k=$((k + 1))
    wave_fill $k
    crash_and_resume "$k" "${c%%:*}" "${c#*:}"
    assert_eq 3 "$(jq '[.jobs[] | select(.resumed)] | length' <<<"$OUT")" "${c}: the wave's 3 jobs resumed"
    assert_eq 1 "$(jq .waves <<<"$OUT")" "${c}: resumed as one wave"
done
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "waves: every object recorded"
tier_merges_on "$U" "$HOTPID"
ok "a wave of three partitions crashed at 7 points: resumed as one wave, same data, no leftovers"

# a swap that ran for some partitions of a wave only (one command of the ALTER committed, the
# others not: a server error or crash in the middle of it): the re-run finishes each on its own
k=50
wave_fill $k
want=$(tier_fp "$U" "tenant = $k")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant $k
first=$(chq "$U" "SELECT min(partition_id) FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$k-%'")
chq "$U" "ALTER TABLE events REPLACE PARTITION ID '$first' FROM events_ferry_staging" >/dev/null
assert_eq "cold,default" "$(chq "$U" "SELECT arrayStringConcat(arraySort(groupUniqArray(disk_name)), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$k-%'")" "one partition swapped, two not"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant $k --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "partial swap: the re-run finished ($OUT)"
assert_eq 3 "$(jq '[.jobs[] | select(.state == "DONE")] | length' <<<"$OUT")" "partial swap: three jobs done"
assert_eq "$want" "$(tier_fp "$U" "tenant = $k")" "partial swap: same data"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$k-%'")" "partial swap: all cold"
tier_leftovers "$L" node1
tier_merges_on "$U" "$HOTPID"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "partial swap: every object recorded"
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"
ok "a wave's swap that ran for one partition of three: finished per partition, nothing doubled or lost"

# staging's merges started between ATTACH's check and the swap (ferry stops merges there, a
# server restart starts them again): the cold volume is prefer_not_to_merge (docs/operations.md),
# so even OPTIMIZE FINAL leaves the pointer parts as they are, and the resumed job finishes. (The
# swap's refusal of pointer parts whose hashes changed stays for servers configured without it.)
k=60
for b in 0 1; do
    chq "$U" "INSERT INTO events SELECT $k, toYYYYMMDD($TODAY - 5), 0, toDateTime($TODAY - 5) + number,
        number % 977, number + $b * 1000000 FROM numbers(20000)" >/dev/null
done
want=$(tier_fp "$U" "tenant = $k")
pid=$(chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$k-%'")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=REPLACE "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant $k
assert_eq 2 "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_staging' AND partition_id = '$pid'")" "two pointer parts in staging"
assert_eq 1 "$(chq "$U" "SELECT prefer_not_to_merge FROM system.storage_policies WHERE policy_name = 'tiered' AND volume_name = 'cold'")" "the cold volume is prefer_not_to_merge"
chq "$U" "SYSTEM START MERGES events_ferry_staging" >/dev/null
chq "$U" "OPTIMIZE TABLE events_ferry_staging PARTITION ID '$pid' FINAL" >/dev/null
assert_eq 2 "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_staging' AND partition_id = '$pid'")" "pointer parts not merged in staging"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant $k --json
assert_eq "DONE" "$(jq -r '[.jobs[].state] | join(" ")' <<<"$OUT")" "the resumed job finished"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$pid'")" "cold"
assert_eq "$want" "$(tier_fp "$U" "tenant = $k")" "same data"
tier_leftovers "$L" node1
tier_merges_on "$U" "$HOTPID"
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"
ok "merges started in staging before the swap: the cold volume keeps pointer parts unmerged, the resumed job finishes"

done_testing
