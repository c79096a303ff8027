# A tier swap statement that runs twice must not add its rows twice (the chaos soak: rows doubled
# after a swap retried while an earlier statement was still on its way, docs/reliability.md).
# A late-rows swap (partitions already cold + new hot rows: the attach form) is crashed right
# after its statement ran and before its journal record (FERRY_TEST_CRASH_AFTER=SWAP:ran), then
# the very statement, as ferry logged it, is sent again (a late duplicate), then a plain
# re-run resumes: same data, nothing doubled. And a swap cut between its halves (the frozen parts
# detached, the staged parts not yet attached) is finished by the resume, again without a double
# when its statement is repeated. Rows inserted between the choice of a swap and its statement
# are kept (the swap never drops a part it does not name).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"

# tenants 1 and 2: two old days each, tiered; then late rows into both days (a wave of two
# partitions per tenant whose swap is the attach form)
for k in 1 2; do
    chq "$U" "INSERT INTO events SELECT $k, toYYYYMMDD($TODAY - 5 - number % 2), 0,
        toDateTime($TODAY - 5 - number % 2) + number % 86400, number % 977, number
        FROM numbers(20000)" >/dev/null
done
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
assert_eq 4 "$(jq '[.jobs[] | select(.state == "DONE")] | length' <<<"$OUT")" "four partitions tiered ($OUT)"
late() { # TENANT
    chq "$U" "INSERT INTO events SELECT $1, toYYYYMMDD($TODAY - 5 - number % 2), 0,
        toDateTime($TODAY - 5 - number % 2), 7, 5000000 + number FROM numbers(308)" >/dev/null
}
# the last swap statement the last ferry command sent (its log names each one)
last_swap() {
    sed -n 's/.*msg="tier swap statement" server=[^ ]* sql="\(.*\)"$/\1/p' <<<"$ERR" | tail -n 1
}
resume_same() { # TENANT WANT WHAT
    expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant "$1" --json
    check_same "$@"
}
check_same() { # TENANT WANT WHAT  (OUT: the resumed run's summary)
    assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "$3: the resumed run finished ($OUT)"
    assert_eq "DONE DONE" "$(jq -r '[.jobs[].state] | join(" ")' <<<"$OUT")" "$3: both jobs done"
    assert_eq "$2" "$(tier_fp "$U" "tenant = $1")" "$3: same data, nothing doubled or lost"
    assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$1-%'")" "$3: all cold"
    tier_leftovers "$L" node1
}

# 1. the statement ran, the journal was not told; then the statement again, then the resume
late 1
want=$(tier_fp "$U" "tenant = 1")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP:ran "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 1
stmt=$(last_swap)
case "$stmt" in *"DETACH PART"*"ATTACH PARTITION"*) ;; *) fail "not the swap statement: $stmt" ;; esac
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "after the swap: same data"
# sent again, as a late duplicate would be: it must not add the staged parts a second time
code=$(curl -sS -o "$T/again.out" -w '%{http_code}' "$U/" --data-binary "$stmt")
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "the swap statement run twice (HTTP $code: $(head -c 200 "$T/again.out")): nothing doubled"
resume_same 1 "$want" "swap ran, then repeated"
ok "a late-rows swap statement run a second time after its crash adds nothing; the resume finishes"

# 2. the frozen parts detached (the first half of the statement), the staged parts not attached
late 2
want=$(tier_fp "$U" "tenant = 2")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 2
hot=$(chq "$U" "SELECT arrayStringConcat(groupArray(concat('DETACH PART ''', name, '''')), ', ') FROM system.parts
    WHERE active AND table = 'events' AND partition_id LIKE '2-%' AND disk_name = 'default' FORMAT TSVRaw")
[ -n "$hot" ] || fail "no frozen hot part of tenant 2 before the swap"
chq "$U" "ALTER TABLE events $hot" >/dev/null
assert_eq 20000 "$(chq "$U" "SELECT count() FROM events WHERE tenant = 2")" "the frozen late rows detached"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 2 --json
rerun=$OUT
stmt=$(last_swap)
case "$stmt" in *"MOVE PARTITION"*) ;; *) fail "the resume did not finish with MOVE PARTITION: $stmt" ;; esac
code=$(curl -sS -o "$T/again.out" -w '%{http_code}' "$U/" --data-binary "$stmt")
assert_eq "$want" "$(tier_fp "$U" "tenant = 2")" "the finishing MOVE PARTITION run twice (HTTP $code): nothing doubled"
OUT=$rerun
check_same 2 "$want" "half-run swap"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "every object in the store is recorded in the catalog"
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"
ok "a swap cut between its halves is finished by MOVE PARTITION from staging; run twice, it adds nothing"

# 2b. the swap cut with a frozen part neither detached nor active: its DETACH PART cut short (the
# ZooKeeper soak of session 28: NOT_ENOUGH_SPACE on node4's full hot disk left the part out of
# the table with no copy in detached/, and the job stopped for a person while the rows were
# missing); emulated with DROP PART. Its rows are in staging's cold copy alone: the resume
# finishes the swap with MOVE PARTITION from staging and every row is back.
chq "$U" "INSERT INTO events SELECT 4, toYYYYMMDD($TODAY - 5 - number % 2), 0,
    toDateTime($TODAY - 5 - number % 2) + number % 86400, number % 977, number
    FROM numbers(20000)" >/dev/null
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 4 --json
late 4
want=$(tier_fp "$U" "tenant = 4")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 4
mapfile -t frozen < <(chq "$U" "SELECT name FROM system.parts WHERE active AND table = 'events'
    AND partition_id LIKE '4-%' AND disk_name = 'default' ORDER BY name")
[ "${#frozen[@]}" -ge 2 ] || fail "test setup: ${#frozen[@]} frozen hot parts of tenant 4"
chq "$U" "ALTER TABLE events DROP PART '${frozen[0]}'" >/dev/null
for p in "${frozen[@]:1}"; do chq "$U" "ALTER TABLE events DETACH PART '$p'" >/dev/null; done
assert_eq 20000 "$(chq "$U" "SELECT count() FROM events WHERE tenant = 4")" "the frozen late rows out of the table"
assert_eq 0 "$(chq "$U" "SELECT count() FROM system.detached_parts WHERE table = 'events' AND name = '${frozen[0]}'")" "the dropped part is not in detached/"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 4 --json
assert_contains "$ERR" "frozen parts left the table without a copy in detached/" "the resume says what it found"
case "$(last_swap)" in *"MOVE PARTITION"*) ;; *) fail "the resume did not finish with MOVE PARTITION: $(last_swap)" ;; esac
check_same 4 "$want" "a frozen part out of the table and not detached"
ok "a swap whose DETACH PART left a frozen part nowhere is finished from staging: every row back"

# 3. rows inserted between the swap's choice and its statement (the ZooKeeper soak of session 13:
# REPLACE PARTITION dropped such a part, 1,383 acknowledged rows lost). Tenant 3's two old days,
# never tiered (the partitions hold exactly the frozen parts), are tiered by a run stopped
# (SIGSTOP) right after the swap was chosen and journaled; late rows arrive; the run goes on and
# its swap keeps them.
chq "$U" "INSERT INTO events SELECT 3, toYYYYMMDD($TODAY - 5 - number % 2), 0,
    toDateTime($TODAY - 5 - number % 2) + number % 86400, number % 977, number
    FROM numbers(20000)" >/dev/null
FERRY_TEST_STOP_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 3 --json \
    >"$T/t3.out" 2>"$T/t3.err" &
TPID=$!
_H_PIDS+=("$TPID") # killed at exit if the test fails while it is stopped
stopped() { [ "$(awk '{print $3}' "/proc/$TPID/stat" 2>/dev/null)" = T ]; }
wait_for 120 stopped || fail "the tier run did not stop at SWAP: $(tail -5 "$T/t3.err")"
late 3
want=$(tier_fp "$U" "tenant = 3")
assert_eq 20308 "$(chq "$U" "SELECT count() FROM events WHERE tenant = 3")" "the late rows are in"
kill -CONT "$TPID"
wait "$TPID" || fail "the tier run failed after it went on: $(tail -5 "$T/t3.err")"
OUT=$(cat "$T/t3.out")
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "the swap finished ($OUT)"
assert_eq attach "$(jq -r '[.jobs[].swap] | unique | join(",")' <<<"$OUT")" "swapped by DETACH PART and ATTACH (never REPLACE PARTITION)"
assert_eq "$want" "$(tier_fp "$U" "tenant = 3")" "every row kept, the late ones too"
assert_eq 20308 "$(chq "$U" "SELECT count() FROM events WHERE tenant = 3")" "20,308 rows"
tier_leftovers "$L" node1
ok "rows inserted between the swap's choice and its statement are kept"

done_testing
