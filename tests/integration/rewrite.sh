# `ferry rewrite` on a blog-like tenant with rf 2: 5 cold days of acme on node1, tiered by ferry,
# cloned to node2 (rf 2: both replicas read the same objects). A GDPR erasure of one user
# (--delete-where "user_id = 42") on every cold day and both replicas: row counts drop by exactly
# that user's rows on each replica, every other row's aggregates are identical, another tenant is
# untouched, the partitions are cold again (new objects), ClickHouse removes the replaced parts
# without deleting any object, and `ferry sweep --delete-orphans` then deletes every old object
# of the tenant: none of the objects that held user 42 is left, and the sweep is clean. kill -9
# of `ferry rewrite` at each step (its own points and the tiering's inside it), then a plain
# re-run: the same result. Then --dry-run, --update, a re-run that finds nothing, and bad input.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

L=$T/lab
lab_up "$L" --nodes 2
mv_conf "$L"
C=$L/mv.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
# ClickHouse removes replaced parts within seconds here (default: 8 minutes), so the test sees
# the old objects become unreferenced
DDL="CREATE TABLE IF NOT EXISTS events (tenant String, day UInt32, split UInt8, user_id UInt64,
    v UInt64, page String) ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (user_id)
    SETTINGS storage_policy = 'tiered', old_parts_lifetime = 1, cleanup_delay_period = 1,
    cleanup_delay_period_random_add = 0, max_cleanup_delay_period = 1"
for u in "$U1" "$U2"; do chq "$u" "$DDL" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
PER=40000
for t in acme other; do
    chq "$U1" "INSERT INTO events SELECT '$t', 20261101 + intDiv(number, $PER), 0,
        cityHash64(number, '$t') % 1000, cityHash64(number, 1) % 1000000,
        concat('/post/', toString(number % 97)) FROM numbers($((5 * PER)))
        SETTINGS max_partitions_per_insert_block = 1000" >/dev/null
done
"$FERRY_BIN" tier --config "$C" --older-than 1d --json >"$T/tier.json" || fail "ferry tier failed: $(cat "$T/tier.json")"
assert_eq 10 "$(jq .partitions_tiered "$T/tier.json")" "10 partitions tiered"
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null || fail "inventory sync failed"
"$FERRY_BIN" tenant set-rf acme 2 --config "$C" >/dev/null || fail "set-rf failed"
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb.json" 2>"$T/rb.err" || fail "clone failed: $(tail -5 "$T/rb.err")"
assert_eq DONE "$(jq -r 'select(.event == "move") | .state' "$T/rb.json")" "the clone finished ($(jq -c 'select(.event == "move")' "$T/rb.json"))"
assert_eq "node1,node2" "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "acme on two replicas"
cold_n() { chq "$1" "SELECT countIf(disk_name = 'cold') || '/' || count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%acme%'"; }
assert_eq "$(cold_n "$U1")" "$(cold_n "$U2")" "same cold parts on both replicas"
ok "acme: 5 cold days tiered by ferry on node1, cloned to node2 (rf 2)"

# per partition: rows and a fingerprint of the rows OTHER than the erased users'
fp_rest() { # URL WHERE
    chq "$1" "SELECT _partition_id, count(), sum(cityHash64(*)), groupBitXor(cityHash64(*)) FROM events
        WHERE $2 GROUP BY _partition_id ORDER BY _partition_id"
}
cnt() { chq "$1" "SELECT count() FROM events WHERE $2"; }
all_cold() { # URL: every acme part is on the object disk
    assert_eq 0 "$(chq "$1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%acme%' AND disk_name != 'cold'")" "$2: every acme part cold again"
}
leftovers() {
    for u in "$U1" "$U2"; do
        assert_eq 0 "$(chq "$u" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_rewrite'")" "build table empty"
        assert_eq "" "$(chq "$u" "SELECT table, name FROM system.detached_parts WHERE table LIKE 'events%'")" "no detached part left"
    done
    mv_no_residue "$L"
}
D1=$(chq "$U1" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%acme%20261101%' LIMIT 1")

# ---- dry run ---------------------------------------------------------------------------------
E1=$(cnt "$U1" "tenant = 'acme' AND user_id = 42"); E2=$(cnt "$U2" "tenant = 'acme' AND user_id = 42")
[ "$E1" -gt 0 ] && [ "$E1" = "$E2" ] || fail "user 42 has $E1 / $E2 rows"
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --all-days --delete-where "user_id = 42" --dry-run --json
assert_eq "10 $((E1 + E2))" "$(jq -r '"\(.partitions) \(.rows_changed)"' <<<"$OUT")" "dry run: 10 partitions (5 days x 2 replicas), every row of user 42"
assert_eq "42" "$(jq -r '[.sample[].user_id] | unique | map(tostring) | join(",")' <<<"$OUT")" "dry run: the sample shows user 42's rows"
[ "$(jq '.sample | length' <<<"$OUT")" -gt 0 ] || fail "empty sample"
assert_eq "$E1" "$(cnt "$U1" "tenant = 'acme' AND user_id = 42")" "dry run changed nothing"
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --partition "$D1" --delete-where "user_id = 42" --dry-run
assert_contains "$OUT" "would change in 2 partitions" "text dry run of one partition on both replicas"
ok "dry run: counts and a sample of the rows that would change, nothing changed"

# ---- kill -9 at every step, then a re-run --------------------------------------------------
# case k erases user 100+k from day 1: the crash leaves the job (node1's first) at that point;
# the re-run resumes it and finishes both replicas
CASES=(REWRITE_CRASH_AFTER:PLANNED REWRITE_CRASH_AFTER:BUILD REWRITE_CRASH_AFTER:INSERTED
       REWRITE_CRASH_BEFORE:SWAP REWRITE_CRASH_AFTER:REPLACED REWRITE_CRASH_AFTER:TIER
       CRASH_AFTER:UPLOAD CRASH_AFTER:SWAP REWRITE_CRASH_BEFORE:RECORD REWRITE_CRASH_AFTER:RECORD
       REWRITE_CRASH_BEFORE:DONE)
k=0
for c in "${CASES[@]}"; do
    k=$((k + 1)); user=$((100 + k))
    var=${c%%:*}; point=${c#*:}
    declare -A before rest
    for u in "$U1" "$U2"; do
        before[$u]=$(cnt "$u" "tenant = 'acme'")
        rest[$u]=$(fp_rest "$u" "tenant = 'acme' AND user_id != $user")
    done
    gone=$(cnt "$U1" "tenant = 'acme' AND day = 20261101 AND user_id = $user")
    [ "$gone" -gt 0 ] || fail "user $user has no rows on day 1"
    expect_exit 137 env "FERRY_TEST_$var=$point" "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = $user"
    expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = $user" --json
    assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "$c: the re-run finished"
    for u in "$U1" "$U2"; do
        assert_eq "$((before[$u] - gone))" "$(cnt "$u" "tenant = 'acme'")" "$c: exactly user $user's rows gone ($u)"
        assert_eq "${rest[$u]}" "$(fp_rest "$u" "tenant = 'acme' AND user_id != $user")" "$c: the other rows identical ($u)"
        all_cold "$u" "$c"
    done
    assert_eq 0 "$("$FERRY_BIN" catalog export --config "$C" | jq '[.jobs[]? | select(.kind == "rewrite" and .state != "DONE")] | length')" "$c: no rewrite job left unfinished"
    leftovers
done
ok "kill -9 at ${#CASES[@]} points (rewrite's own and the tiering's inside it), then a re-run: same result, nothing left"

# ---- reads through the router during a rewrite: the old partition or the new one -------------
{ cat "$C"; printf '[router]\nauth = none\n'; } >"$T/router.conf"
start_router "$T/router.conf" router
R=$R_URL; RPID=$R_PID
q1="SELECT count(), sum(v) FROM events WHERE tenant = 'acme' AND day = 20261101"
OLDV=$(chq "$R" "$q1" | tr '\t' ' ')
reader() { # until $T/stop: one line per answer (or "error ...") in $T/reads
    while [ ! -e "$T/stop" ]; do
        curl -sS --max-time 30 "$R/" --data-binary "$q1" 2>&1 | tr '\t' ' ' >>"$T/reads" || echo "error curl" >>"$T/reads"
    done
}
: >"$T/reads"
reader & RDPID=$!
wait_for 30 test -s "$T/reads" || fail "the reader got no answer"
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = 999"
# text mode: one progress line per partition on stderr, the table on stdout
assert_eq 2 "$(grep -c '^rewrite: [12]/2 partitions, [0-9]*/[0-9]* rows read, [0-9]* changed, elapsed [0-9.]*s, ETA [0-9]*s (node[12] ' <<<"$ERR")" "a progress line per partition (stderr: $ERR)"
assert_contains "$(grep '^rewrite: 2/2' <<<"$ERR")" "ETA 0s" "ETA 0 at the end"
assert_contains "$OUT" "2 partitions rewritten" "the summary on stdout"
n0=$(wc -l <"$T/reads"); wait_for 30 bash -c "[ \$(wc -l <'$T/reads') -gt $((n0 + 3)) ]"
touch "$T/stop"; wait "$RDPID"; rm -f "$T/stop"
NEWV=$(chq "$R" "$q1" | tr '\t' ' ')
[ "$OLDV" != "$NEWV" ] || fail "user 999 had no rows on day 1"
bad=$(grep -v -x -F -e "$OLDV" -e "$NEWV" "$T/reads" | sort | uniq -c | head -5 || true)
[ -z "$bad" ] || fail "a read through the router saw neither the old nor the new partition: $bad"
echo "# router reads during the rewrite: $(grep -c -x -F "$OLDV" "$T/reads") old, $(grep -c -x -F "$NEWV" "$T/reads") new, nothing else"
stop_router "$RPID"
ok "reads through the router during a rewrite see the old partition or the new one, never a mix or nothing"

# ---- the erasure: user 42 on every cold day, both replicas ----------------------------------
store_keys() { (cd "$L/blobs" && find default -type f | sort); }
OLD_KEYS=$(store_keys)
ACME_PIDS=$(chq "$U1" "SELECT groupUniqArray(partition_id) FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%acme%' FORMAT JSONEachRow" | jq -c '.[]')
# the objects of acme's cold parts now: every one holds user 42's rows or shares a part with them
"$FERRY_BIN" catalog export --config "$C" | jq -r --argjson p "$ACME_PIDS" '.parts[] | select(.partition_id as $x | $p | index($x)) | .objects[].key' | sort -u >"$T/acme_old_keys"
[ -s "$T/acme_old_keys" ] || fail "no catalog objects for acme"
for u in "$U1" "$U2"; do
    declare -A b42 r42
    b42[$u]=$(cnt "$u" "tenant = 'acme'")
    r42[$u]=$(fp_rest "$u" "tenant = 'acme' AND user_id != 42")
done
OTHER=$(fp_rest "$U1" "tenant = 'other'")
"$FERRY_BIN" rewrite --config "$C" --tenant acme --all-days --delete-where "user_id = 42" --json >"$T/rw.json" 2>"$T/rw.err" || fail "rewrite failed: $(cat "$T/rw.err") $(cat "$T/rw.json")"
assert_eq "10 $((E1 + E2)) 0" "$(jq -r '"\(.partitions) \(.rows_changed) \(.jobs_failed)"' "$T/rw.json")" "10 jobs, every row of user 42"
# --json: stdout one object, progress as JSON lines on stderr, one per partition, in batches
grep '^{' "$T/rw.err" | jq -c 'select(.event == "progress")' >"$T/progress" || fail "progress lines not JSON: $(head -3 "$T/rw.err")"
assert_eq "1 2 3 4 5 6 7 8 9 10" "$(jq -r .done "$T/progress" | tr '\n' ' ' | sed 's/ $//')" "a progress object per partition"
assert_eq "10 0 $((E1 + E2)) 0" "$(tail -1 "$T/progress" | jq -r '"\(.total) \(.failed) \(.rows_changed) \(.eta_s)"')" "the last: 10 of 10, none failed, every row changed, ETA 0"
[ "$(tail -1 "$T/progress" | jq '.rows_read == .rows_total')" = true ] || fail "rows_read != rows_total at the end: $(tail -1 "$T/progress")"
echo "# rewrite of 10 partitions ($((5 * PER)) rows per replica): $(jq .wall_ms "$T/rw.json") ms, load $(cut -d' ' -f1-3 /proc/loadavg)"
for u in "$U1" "$U2"; do
    assert_eq "$((b42[$u] - E1))" "$(cnt "$u" "tenant = 'acme'")" "row count dropped by exactly user 42's rows ($u)"
    assert_eq 0 "$(cnt "$u" "tenant = 'acme' AND user_id = 42")" "no row of user 42 ($u)"
    assert_eq "${r42[$u]}" "$(fp_rest "$u" "tenant = 'acme' AND user_id != 42")" "other rows identical ($u)"
    all_cold "$u" "erasure"
done
assert_eq "$OTHER" "$(fp_rest "$U1" "tenant = 'other'")" "tenant other untouched"
leftovers
ok "user 42 erased from 5 cold days on both replicas; counts exact, other rows identical"

# the replaced parts go (ClickHouse's cleanup), deleting no object; then the sweep deletes the
# old objects, which no pointer file and no catalog record names any more
for u in "$U1" "$U2"; do assert_eq 0 "$(curl -sS "$u/ferry/status" | jq .refused_deletes)" "no delete attempt so far ($u)"; done
wait_outdated_gone "$U1 $U2" events events_ferry_staging
for u in "$U1" "$U2"; do assert_eq 0 "$(curl -sS "$u/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete an object ($u)"; done
# a part ClickHouse is removing right now (its delete_tmp_ folder, pointer files being rewritten)
# makes the sweep incomplete: wait until a sweep sees every server whole
sweep_complete() { "$FERRY_BIN" sweep --config "$C" --json >"$T/sweep0.json" 2>/dev/null; [ "$(jq .complete "$T/sweep0.json")" = true ]; }
# (ClickHouse 26.7 renames it delete_tmp_<part> and rewrites each pointer file's ref_count in
# place, O_TRUNC, ClickHouse issue #113179)
wait_for 60 sweep_complete || fail "the sweep stays incomplete: $(jq -c .problems "$T/sweep0.json")"
"$FERRY_BIN" sweep --config "$C" --json --delete-orphans --min-age 1s >"$T/sweep.json" 2>"$T/sweep.err" ||
    fail "sweep: $(jq -c '{complete, problems, dangling: .dangling[:3], drift: .drift[:3], deleted}' "$T/sweep.json") $(cat "$T/sweep.err")"
OUT=$(cat "$T/sweep.json")
assert_eq "true 0 0" "$(jq -r '"\(.complete) \(.dangling | length) \(.drift | length)"' <<<"$OUT")" "sweep complete, no dangling pointer, no drift"
deleted=$(jq .deleted <<<"$OUT")
[ "$deleted" -gt 0 ] || fail "the sweep deleted no old object"
keys_now=$(store_keys)
assert_eq "" "$(comm -12 "$T/acme_old_keys" <(echo "$keys_now") | head -3)" "none of acme's old objects (those that held user 42) is left in the store"
old_acme=$(wc -l <"$T/acme_old_keys")
expect_exit 0 "$FERRY_BIN" sweep --config "$C" --json
assert_eq "0 true" "$(jq -r '"\(.orphans | length) \(.complete)"' <<<"$OUT")" "second sweep: clean"
# every object left is named by a catalog record that lists a server, and none of them is one of
# the objects of the parts that held user 42 before
assert_eq "$(store_keys)" "$("$FERRY_BIN" catalog export --config "$C" | jq -r '.parts[].objects[].key' | sort -u)" "every object in the store is a recorded one"
echo "# objects: $(echo "$OLD_KEYS" | wc -l) before, $(echo "$keys_now" | wc -l) after; $old_acme objects of the parts that held user 42, all gone; the sweep deleted $deleted orphans in all (the crash cases' rewrites too)"
ok "replaced parts removed by ClickHouse with no delete attempt; the sweep deleted the $old_acme old objects; sweep clean"

# the same command again: nothing matches any more
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --all-days --delete-where "user_id = 42" --json
assert_eq "0 0" "$(jq -r '"\(.partitions) \(.jobs | length)"' <<<"$OUT")" "re-run: nothing to do"
assert_contains "$(jq -r '.skipped[0].reason' <<<"$OUT")" "no row matches" "re-run: skipped, no row matches"
ok "a re-run of the erasure finds nothing to do"

# ---- --update: a late correction ----------------------------------------------------------------
u7=$(cnt "$U1" "tenant = 'acme' AND day = 20261102 AND user_id = 7")
tot=$(cnt "$U1" "tenant = 'acme'")
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261102 --update "page = '/erased'" --where "user_id = 7" --json
assert_eq "$((2 * u7))" "$(jq .rows_changed <<<"$OUT")" "update: user 7's rows on both replicas"
for u in "$U1" "$U2"; do
    assert_eq "$tot" "$(cnt "$u" "tenant = 'acme'")" "update: no row added or lost ($u)"
    assert_eq "$u7" "$(cnt "$u" "tenant = 'acme' AND day = 20261102 AND page = '/erased'")" "update: the rows changed ($u)"
    all_cold "$u" "update"
done
ok "--update rewrites a column in place ($u7 rows per replica), counts unchanged, cold again"

# ---- bad input --------------------------------------------------------------------------------
bad() { # MESSAGE ARGS...
    local msg=$1; shift
    expect_exit 2 "$FERRY_BIN" rewrite --config "$C" --tenant acme "$@"
    assert_contains "$ERR" "$msg" "refused: $*"
}
bad "one expression only" --all-days --delete-where "user_id = 1; SELECT 1"
bad "no subquery" --all-days --delete-where "user_id IN (SELECT user_id FROM other_table)"
bad "reads another table" --all-days --delete-where "user_id IN other_table"
bad "reads beyond the table" --all-days --delete-where "dictGet('d', 'x', user_id) = 1"
bad "reads beyond the table" --all-days --delete-where "user_id = (file('/etc/passwd') = '')"
bad "exactly one of --partition" --delete-where "user_id = 1"
bad "exactly one of --partition" --all-days --days 20261101 --delete-where "user_id = 1"
bad "exactly one of --delete-where" --all-days
bad "--update needs --where" --all-days --update "v = 1"
bad "column = expression" --all-days --update "v" --where "1"
bad "--days wants" --days 2026-11-01 --delete-where "user_id = 1"
bad "only blanks" --all-days --delete-where "  "
expect_exit 2 "$FERRY_BIN" rewrite --config "$C" --tenant acme --all-days --update "day = 1" --where "user_id = 5"
assert_contains "$ERR" "partition column" "update of a partition column refused"
expect_exit 1 "$FERRY_BIN" rewrite --config "$C" --tenant nosuch --all-days --delete-where "user_id = 1"
assert_contains "$ERR" "no partition of tenant nosuch" "unknown tenant"
expect_exit 1 "$FERRY_BIN" rewrite --config "$C" --tenant acme --all-days --delete-where "no_such_column = 1"
assert_contains "$ERR" "no_such_column" "an unknown column named by ClickHouse"
# a partition ClickHouse moved to the cold disk itself (its own objects, ref_count 0): replacing
# it would make ClickHouse delete them, so it is refused before anything is touched
chq "$U1" "INSERT INTO events SELECT 'raw', 20261101, 0, number % 10, number, '/x' FROM numbers(1000)" >/dev/null
RAWPID=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%raw%'")
chq "$U1" "ALTER TABLE events MOVE PARTITION ID '$RAWPID' TO DISK 'cold'" >/dev/null
expect_exit 1 "$FERRY_BIN" rewrite --config "$C" --tenant raw --all-days --delete-where "user_id = 1"
assert_contains "$ERR" "reads no object ferry recorded" "a partition not tiered by ferry is refused"
assert_eq 1000 "$(cnt "$U1" "tenant = 'raw'")" "and left untouched"
assert_eq cold "$(chq "$U1" "SELECT DISTINCT disk_name FROM system.parts WHERE active AND table = 'events' AND partition_id = '$RAWPID'")" "still the same cold part"
ok "bad input refused with a clear message"
done_testing
