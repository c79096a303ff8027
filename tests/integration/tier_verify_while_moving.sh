# A tier job whose swap may have run and is not verified holds its table's merges stopped (I6 in
# lib/flow/tier.c). When its slice is moving, it used to wait for the move's end; a move that
# needed those merges (its freezes failed once the piled-up parts took every inode of the node,
# in the ZooKeeper soak of session 26) then waited for the job for ever. Now such a job runs as
# far as its verification while its slice moves, and its CLEANUP (the part records a move hands
# over when it ends) waits for the move:
#   1. a job killed after its swap (journaled in VERIFY), then a move of its slice from the same
#      server stopped before its routing switch: `ferry tier` verifies the job, leaves it in
#      CLEANUP and starts the table's merges; after the move, the next run finishes it and its
#      records follow the slice;
#   2. a job killed after its swap was chosen and journaled but before it ran, then a move of its
#      slice from that server stopped after its routing switch: the swap is taken back (not run,
#      nothing rolled back) and the merges start; after the move the job ends and nothing is left
#      behind.
# Background merges are off for the table (max_bytes_to_merge_* = 1 byte), so a merge happens only
# when the test asks for one (OPTIMIZE), and only when the table's merges are not stopped.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
tier_no_bg_merges "$U1"
tier_no_bg_merges "$U2"
mv_ingest "$U1" acme 0 3 5000
mv_ingest "$U1" gamma 0 3 5000 5
want_acme=$(mv_fp "$U1" acme 0)
want_gamma=$(mv_fp "$U1" gamma 0)
tier_state() { sqlite3 "$L/catalog.db" "SELECT group_concat(s, ' ') FROM (SELECT json_extract(doc, '\$.state') AS s FROM records WHERE parent = 'jobs' AND name LIKE 'tier.node1.%' AND json_extract(doc, '\$.data') LIKE '%\"tenant\":\"$1\"%' ORDER BY name)"; }
unfinished_move() { sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.tenant') = '$1' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }
cold() { chq "$1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$2''%' AND disk_name = 'cold'"; }
# a partition of two parts of another tenant on node1: OPTIMIZE merges it only when the table's
# merges are not stopped
probe=0
two_parts() {
    probe=$((probe + 1))
    local t="probe$probe" i
    for i in 1 2; do
        chq "$U1" "INSERT INTO events SELECT '$t', 20261201, 0, number, number FROM numbers(10)" >/dev/null
    done
    PROBE=$t
}
probe_parts() { chq "$U1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$PROBE''%'"; }
optimize_probe() { # OPTIMIZE of the probe's partition on node1: its HTTP code; the answer in $T/opt.out
    curl -sS --max-time 120 -o "$T/opt.out" -w '%{http_code}' "$U1/" --data-binary \
        "OPTIMIZE TABLE events PARTITION ('$PROBE', 20261201, 0) FINAL" || fail "curl to node1 failed"
}
merges_stopped() { # fails unless node1's merges of events are stopped: OPTIMIZE refused
    two_parts
    local code
    code=$(optimize_probe)
    [ "$code" != 200 ] || fail "$1: OPTIMIZE on node1 ran: the table's merges are not stopped"
    assert_eq 2 "$(probe_parts)" "$1: nothing merged"
}
merges_run() {
    two_parts
    local code
    code=$(optimize_probe)
    [ "$code" = 200 ] || fail "OPTIMIZE on node1 failed (HTTP $code): the table's merges are stopped ($(head -c 300 "$T/opt.out"))"
    assert_eq 1 "$(probe_parts)" "node1's merges of events run"
}

# ---- 1. verified while its slice moves (source, before the routing switch) ----
expect_exit 137 env FERRY_TEST_CRASH_AFTER=VERIFY "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme
assert_eq "VERIFY VERIFY VERIFY" "$(tier_state acme)" "acme's tier jobs stopped after their swap"
merges_stopped "after the swap (I6)"
# doctor names each job that holds the merges; past 10 minutes it warns, past an hour it fails
holds() { # [NOW]: doctor's tier_holds findings as "status job" lines in $HOLDS, its exit code in $DOC_RC
    set +e
    env ${1:+FERRY_TEST_NOW=$1} "$FERRY_BIN" doctor --json --config "$C" \
        --skip delete_refused,versioning,clickhouse_version,unmanaged_cold,shard_grants,catalog_acl,object_access \
        >"$T/doctor.json" 2>"$T/doctor.err"
    DOC_RC=$?
    set -e
    HOLDS=$(jq -r '[.checks[] | select(.check == "tier_holds") | .status + " " + (.message | capture("tier job (?<id>tier[.][^ ]+)").id // "-")] | sort | join(",")' "$T/doctor.json") ||
        fail "doctor's report: $(cat "$T/doctor.json") $(tail -3 "$T/doctor.err")"
}
acme_jobs=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'jobs' AND name LIKE 'tier.node1.%' AND json_extract(doc, '\$.data') LIKE '%\"tenant\":\"acme\"%' ORDER BY name")
expect_holds() { # STATUS: every acme job reported with STATUS
    local want="" j
    for j in $acme_jobs; do want="$want${want:+,}$1 $j"; done
    holds "${2:-}"
    assert_eq "$want" "$HOLDS" "doctor's tier_holds ($1)"
}
expect_holds pass
assert_eq 0 "$DOC_RC" "doctor passes with young holds"
expect_holds warn $(($(date +%s) + 700))
assert_eq 0 "$DOC_RC" "doctor passes with warnings"
expect_holds fail $(($(date +%s) + 4000))
assert_eq 1 "$DOC_RC" "doctor fails on a hold past an hour"
assert_contains "$(cat "$T/doctor.json")" "ferry tier --server node1" "the fix is named"
ok "doctor reports the jobs that hold node1's merges, by age"
FERRY_TEST_CRASH_BEFORE=VERIFY expect_exit 137 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200
id=$(unfinished_move acme)
[ -n "$id" ] || fail "no unfinished move of acme"
"$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme --json >"$T/t1.json" 2>"$T/t1.err" || fail "tier during the move: $(tail -3 "$T/t1.err")"
assert_contains "$(cat "$T/t1.err")" "tier job verified while its slice moves" "the verification is logged"
assert_eq "CLEANUP CLEANUP CLEANUP" "$(tier_state acme)" "verified; CLEANUP waits for the move ($(jq -c '[.jobs[]? | {state, error}]' "$T/t1.json"))"
merges_run
assert_eq "$want_acme" "$(mv_fp "$U1" acme 0)" "acme's data on node1 unchanged"
holds $(($(date +%s) + 4000))
assert_eq "pass -" "$HOLDS" "doctor: no job holds merges once verified"
assert_eq 0 "$DOC_RC" "doctor passes once the swaps are verified"
ok "a job with an unverified swap is verified while its slice moves, and merges run again"
"$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >/dev/null 2>"$T/r1.err" || fail "move resume: $(tail -3 "$T/r1.err")"
assert_eq "$want_acme" "$(mv_fp "$U2" acme 0)" "acme's data on node2 after the move"
"$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme --json >"$T/t2.json" 2>"$T/t2.err" || fail "tier after the move: $(tail -3 "$T/t2.err")"
assert_eq "DONE DONE DONE" "$(tier_state acme)" "acme's tier jobs finished after the move"
assert_contains "$(cat "$T/t2.err")" "part records follow the slice's move" "the records follow the slice"
ok "after the move the job's CLEANUP runs and its records follow the slice"

# ---- 2. a swap chosen, not run, taken back while its slice moves (after the routing switch) ----
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant gamma
assert_eq "REPLACE REPLACE REPLACE" "$(tier_state gamma)" "gamma's tier jobs stopped with their swap chosen"
assert_eq 0 "$(cold "$U1" gamma)" "the swap did not run"
merges_stopped "after the swap was chosen (I6)"
FERRY_TEST_CRASH_AFTER=SWITCH:switched expect_exit 137 "$FERRY_BIN" move --config "$C" --tenant gamma --split 0 --to node2 --grace 200
id=$(unfinished_move gamma)
[ -n "$id" ] || fail "no unfinished move of gamma"
"$FERRY_BIN" tier --config "$C" --older-than 3d --tenant gamma --json >"$T/t3.json" 2>"$T/t3.err" || fail "tier during the move: $(tail -3 "$T/t3.err")"
assert_contains "$(cat "$T/t3.err")" "taken back (it did not run)" "the take-back is logged"
assert_eq "REPLACE REPLACE REPLACE" "$(tier_state gamma)" "the jobs wait in REPLACE"
swapped=$(sqlite3 "$L/catalog.db" "SELECT group_concat(json_extract(json_extract(doc, '\$.data'), '\$.swapped'), ' ') FROM records WHERE parent = 'jobs' AND name LIKE 'tier.node1.%' AND json_extract(doc, '\$.data') LIKE '%\"tenant\":\"gamma\"%'")
assert_eq "0 0 0" "$swapped" "no swap is journaled as chosen any more"
merges_run
assert_eq 0 "$(cold "$U1" gamma)" "nothing was swapped on node1"
assert_eq "$want_gamma" "$(mv_fp "$U1" gamma 0)" "gamma's data on node1 unchanged"
ok "a swap chosen but not run is taken back while its slice moves, and merges run again"
"$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >/dev/null 2>"$T/r2.err" || fail "move resume: $(tail -3 "$T/r2.err")"
assert_eq "$want_gamma" "$(mv_fp "$U2" gamma 0)" "gamma's data on node2 after the move"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t4.json" 2>"$T/t4.err" || fail "tier after the move: $(tail -3 "$T/t4.err")"
assert_eq "" "$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'jobs' AND name LIKE 'tier.%' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")" "no tier job left unfinished"
assert_eq 0 "$(jq .jobs_failed "$T/t4.json")" "no failure: gamma's jobs on node1 end with their partitions gone ($(jq -c '[.jobs[] | select(.error) | .error]' "$T/t4.json"))"
assert_eq 3 "$(jq '[.jobs[] | select(.server == "node1" and .tenant == "gamma" and .note != null)] | length' "$T/t4.json")" "gamma's jobs on node1 say why they ended"
tier_leftovers "$L" node1
tier_leftovers "$L" node2
assert_eq "$want_gamma" "$(mv_fp "$U2" gamma 0)" "gamma's data on node2 after tiering there"
assert_eq "$want_acme" "$(mv_fp "$U2" acme 0)" "acme's data on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant IN ('acme', 'gamma')")" "nothing of the moved slices on node1"
"$FERRY_BIN" sweep --config "$C" --json >"$T/sweep.json" 2>"$T/sweep.err" || fail "sweep: $(tail -3 "$T/sweep.err")"
assert_eq true "$(jq .complete "$T/sweep.json")" "the sweep is complete"
assert_eq 0 "$(jq '.drift | length' "$T/sweep.json")" "no drift between the part records and the pointer files ($(jq -c '.drift[:4]' "$T/sweep.json"))"
assert_eq 0 "$(jq '.dangling | length' "$T/sweep.json")" "no dangling pointer"
ok "after the move the slices tier on node2; records, pointers and data agree"
done_testing
