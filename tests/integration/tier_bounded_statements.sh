# The ALTER statements of a tiering wave are bounded by parts, as its agent requests are: ATTACH
# PART in staging at most TIER_STATEMENT_PARTS (32) parts a statement, the swap whole partitions
# packed up to 32 parts (a bigger partition alone). Found by the chaos soak: the settle phase's
# wave of 12 partitions and 1,614 parts was ONE `ATTACH PARTITION ...` statement that got no
# answer within the client's 600 s (each pointer part is checked through the object store), and
# its swap of several hundred DETACH PARTs likewise. Here: three partitions of 40 parts each
# (120), tiered; then a run killed after its first ATTACH statement and one killed after its
# first swap statement, both resumed: every statement within the bound, the data exact.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
tier_no_bg_merges "$U" # the parts stay apart (the runs are --no-compact)
many() { # TENANT DAYS_BACK...: per day 40 parts of 25 rows (one part per insert)
    local t=$1 d k; shift
    for d in "$@"; do
        for k in $(seq 1 40); do
            chq "$U" "INSERT INTO events SELECT $t, toYYYYMMDD($TODAY - $d), 0,
                toDateTime($TODAY - $d) + number + $k * 100, number % 97, number + $k * 1000
                FROM numbers(25)" >/dev/null
        done
    done
}
parts_of() { chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$1-%'"; }
# stmts LOG: "ATTACH_STATEMENTS SWAP_STATEMENTS OVER": the statements ferry logged, and how many of
# them break the bound (an ATTACH of more than 32 parts; a swap statement of more than 32 DETACH
# PARTs that covers more than one partition)
stmts() {
    awk '/tier attach statement/ { a++; if (match($0, /parts=[0-9]+/) && substr($0, RSTART + 6, RLENGTH - 6) + 0 > 32) over++ }
         /tier swap statement/ { s++; d = gsub(/DETACH PART/, "&"); p = gsub(/(REPLACE|ATTACH|MOVE) PARTITION ID/, "&");
                                 if (p > 1 && d > 32) over++ }
         END { print a + 0, s + 0, over + 0 }' "$1"
}

# ---- one run: 3 partitions x 40 parts ------------------------------------------------------------
many 1 5 6 7
[ "$(parts_of 1)" -ge 120 ] || fail "tenant 1 has only $(parts_of 1) parts"
want=$(tier_fp "$U" "tenant = 1")
"$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 1 --json >"$T/t1.json" 2>"$T/t1.log" ||
    fail "tier: $(tail -5 "$T/t1.log")"
assert_eq "DONE DONE DONE" "$(jq -r '[.jobs[].state] | join(" ")' "$T/t1.json")" "every job done"
read -r na ns over < <(stmts "$T/t1.log")
assert_eq 0 "$over" "no statement over the bound"
assert_eq 4 "$na" "120 parts attached in 4 statements (32 + 32 + 32 + 24)"
assert_eq 3 "$ns" "the swaps of three partitions of 40 parts each as 3 statements"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '1-%'")" "all cold"
tier_leftovers "$L" node1
ok "a wave of 120 parts: ATTACH in 4 statements of at most 32 parts, the swap a statement per partition, same data"

# ---- killed after its first ATTACH statement, resumed ------------------------------------------
many 2 5 6 7
want=$(tier_fp "$U" "tenant = 2")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=ATTACH:statement "$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 2
assert_contains "$ERR" "tier attach statement" "the killed run ran an ATTACH statement"
left=$(chq "$U" "SELECT count() FROM system.detached_parts WHERE table = 'events_ferry_staging' AND partition_id LIKE '2-%'")
assert_eq 88 "$left" "88 pointer parts still detached in staging after the first statement of 32"
"$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 2 --json >"$T/t2.json" 2>"$T/t2.log" ||
    fail "resumed tier: $(tail -5 "$T/t2.log")"
assert_eq "DONE DONE DONE" "$(jq -r '[.jobs[].state] | join(" ")' "$T/t2.json")" "every resumed job done ($(jq -c '[.jobs[] | {state, error}]' "$T/t2.json"))"
read -r na ns over < <(stmts "$T/t2.log")
assert_eq 0 "$over" "no statement over the bound"
assert_eq 3 "$na" "the resumed ATTACH took the 88 parts left in 3 statements"
assert_eq "$want" "$(tier_fp "$U" "tenant = 2")" "same data after the resume"
tier_leftovers "$L" node1
ok "killed after its first ATTACH statement: the resumed run attached the 88 parts left, same data"

# ---- killed after its first swap statement, resumed; then late rows (the attach form) ----------
many 3 5 6 7
want=$(tier_fp "$U" "tenant = 3")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP:ran "$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 3
assert_eq 1 "$(grep -c 'tier swap statement' "$T/.err")" "the killed run ran one swap statement"
"$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 3 --json >"$T/t3.json" 2>"$T/t3.log" ||
    fail "resumed tier: $(tail -5 "$T/t3.log")"
assert_eq "DONE DONE DONE" "$(jq -r '[.jobs[].state] | join(" ")' "$T/t3.json")" "every resumed job done ($(jq -c '[.jobs[] | {state, error}]' "$T/t3.json"))"
read -r na ns over < <(stmts "$T/t3.log")
assert_eq 0 "$over" "no statement over the bound"
assert_eq 2 "$ns" "the resume swapped the two partitions left"
assert_eq "$want" "$(tier_fp "$U" "tenant = 3")" "same data after the resume"
# late rows into the tiered days: 40 more parts each, tiered with the attach form
many 3 5 6 7
want=$(tier_fp "$U" "tenant = 3")
"$FERRY_BIN" tier --no-compact --config "$C" --older-than 3d --tenant 3 --json >"$T/t4.json" 2>"$T/t4.log" ||
    fail "tier of late rows: $(tail -5 "$T/t4.log")"
assert_eq "DONE DONE DONE" "$(jq -r '[.jobs[].state] | join(" ")' "$T/t4.json")" "the late rows' jobs done"
# grep -c reads to the end (grep -q stops at the first match and, under pipefail, the first
# grep's SIGPIPE failed the check although the attach form was there)
[ "$(grep 'tier swap statement' "$T/t4.log" | grep -c 'DETACH PART')" -gt 0 ] || fail "the late rows were not swapped with the attach form: $(grep 'tier swap statement' "$T/t4.log" | head -c 400)"
read -r na ns over < <(stmts "$T/t4.log")
assert_eq 0 "$over" "no statement over the bound"
assert_eq "$want" "$(tier_fp "$U" "tenant = 3")" "same data with the late rows"
tier_leftovers "$L" node1
ok "killed after its first swap statement: resumed, same data; late rows swapped with the attach form within the bound"

assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "every object in the store is recorded in the catalog"
done_testing
