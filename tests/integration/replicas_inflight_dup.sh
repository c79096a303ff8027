# A replica sync (a clone's SWITCH, `ferry repair`) must not copy a batch whose own write to the
# target is still on its way there: a copied part carries no insert deduplication token, so when
# that write lands the target holds the batch twice. Found by the chaos soak: a clone's first
# SWITCH round, three seconds after its routing switch, left a 100-row batch's share twice on the
# new replica (docs/reliability.md). Here the router's two writes of one batch are made by hand,
# one straight into the source, the other into the target while the sync runs: the sync (stopped
# with SIGSTOP as soon as it logs that it waits for writes in flight, so nothing here depends on
# timing) must find the target's own copy and add nothing. Before the fix the clone and the
# repair copied the batch at once and the late write made it twice.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
lab_up "$L" --nodes 2
mv_conf "$L"
C=$L/rf2.conf
lab_rf_conf "$L" 2 "$C.base"
{ cat "$C.base"; sed -n '/^\[table "events"\]/,$p' "$L/mv.conf"; echo 'split_key = user'; } >"$C"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
for u in "$U1" "$U2"; do chq "$u" "$MV_DDL" >/dev/null; chq "$u" "ALTER TABLE events MODIFY SETTING non_replicated_deduplication_window = 1000" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"

# batch URL TENANT FIRST N TOKEN: one write of N rows with ids FIRST.. (user), three days, as the
# router sends it to one replica: its own insert_deduplication_token.
batch() {
    chq "$1" "INSERT INTO events SELECT '$2', 20261101 + number % 3, 0, $3 + number, number
        FROM numbers($4) SETTINGS insert_deduplication_token = '$5'" >/dev/null
}
# once URL TENANT: 'rows distinct' of the tenant on the node.
once() { chq "$1" "SELECT count(), uniqExact(user) FROM events WHERE tenant = '$2'" | tr '\t' ' '; }

# sync_with_late_write LOG URL_SRC URL_DST TENANT FIRST N TOKEN CMD...: batch into the source,
# CMD (a clone's resume, a repair) in the background; once it logs that it waits for writes in
# flight it is stopped (SIGSTOP), the batch's write to the target lands, and it goes on. Fails if
# CMD ends without waiting (it copied the batch; the late write then doubles it) or fails.
sync_with_late_write() {
    local log=$1 us=$2 ud=$3 tenant=$4 first=$5 n=$6 token=$7; shift 7
    batch "$us" "$tenant" "$first" "$n" "$token"
    bg_start "$log" "$@"
    local pid=$BG_PID
    wait_for 120 bash -c "grep -q 'waits for writes in flight' '$log' || ! kill -0 $pid" ||
        fail "$* neither waited nor ended: $(tail -5 "$log")"
    if ! grep -q 'waits for writes in flight' "$log"; then
        wait "$pid" || true
        batch "$ud" "$tenant" "$first" "$n" "$token"
        fail "$* did not wait for the batch's write in flight to the target (then $(once "$ud" "$tenant") rows/distinct there): $(grep -E 'replica sync|error' "$log" | tail -5)"
    fi
    kill -STOP -- -"$pid"
    batch "$ud" "$tenant" "$first" "$n" "$token"
    kill -CONT -- -"$pid"
    wait "$pid" || fail "$* failed: $(tail -5 "$log")"
}

# ---- a clone's SWITCH ---------------------------------------------------------------------------
# beta on one node (rf 1), 3,000 rows; rf 2: the clone is stopped right after its routing switch,
# so writes reach both replicas from then on; then one batch lands on the source while its write
# to the new replica is still on the way, and the clone is resumed.
"$FERRY_BIN" tenant add beta --config "$C" >/dev/null || fail "tenant add beta"
"$FERRY_BIN" tenant set-rf beta 1 --config "$C" >/dev/null || fail "set-rf beta 1"
"$FERRY_BIN" rebalance --config "$C" --grace 100 >/dev/null 2>"$T/rb1.err" || fail "rebalance to rf 1: $(tail -3 "$T/rb1.err")"
SRC=$("$FERRY_BIN" route --config "$C" --tenant beta --json | jq -r '.slices[0].shards | join(",")')
case "$SRC" in node1) DST=node2 ;; node2) DST=node1 ;; *) fail "beta not on one shard: $SRC" ;; esac
US=$(lab_url "$L" "$SRC"); UD=$(lab_url "$L" "$DST")
batch "$US" beta 0 3000 beta-base
"$FERRY_BIN" tenant set-rf beta 2 --config "$C" >/dev/null || fail "set-rf beta 2"
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWITCH:switched "$FERRY_BIN" rebalance --config "$C" --grace 100
assert_eq "$SRC,$DST" "$("$FERRY_BIN" route --config "$C" --tenant beta --json | jq -r '.slices[0].shards | join(",")')" "beta routed to both after the switch"
for u in "$US" "$UD"; do batch "$u" beta 3000 100 beta-after-switch; done # a write that reached both
sync_with_late_write "$T/clone.log" "$US" "$UD" beta 5000 100 beta-late \
    "$FERRY_BIN" move --resume all --config "$C" --grace 100
assert_eq 0 "$(sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")" "the clone finished"
assert_eq "3200 3200" "$(once "$UD" beta)" "every row once on the new replica $DST"
assert_eq "3200 3200" "$(once "$US" beta)" "every row once on the source $SRC"
assert_eq "$(mv_fp "$US" beta 0)" "$(mv_fp "$UD" beta 0)" "beta equal on both replicas"
# the client's retry of the late batch (same token): deduplicated on both
for u in "$US" "$UD"; do batch "$u" beta 5000 100 beta-late; done
assert_eq "3200 3200" "$(once "$UD" beta)" "a retry of the late batch adds nothing to $DST"
ok "a clone's SWITCH left a batch still on its way to the new replica to its own write: every row once"

# ---- a repair -----------------------------------------------------------------------------------
# acme on both nodes (rf 2); node2 missed one batch (its rows only on node1: the repair copies
# them), and another batch is on its way to node2 while the repair runs. --grace 0: the grace a
# cluster with [cluster] routers uses (the router fence covers a switch, not a sync).
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add acme"
assert_eq 2 "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | length')" "acme on two replicas"
for u in "$U1" "$U2"; do batch "$u" acme 0 2000 acme-base; done
batch "$U1" acme 10000 90 acme-missed # failed on node2, never retried
sync_with_late_write "$T/repair.log" "$U1" "$U2" acme 20000 100 acme-late \
    "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0
assert_contains "$(cat "$T/repair.log")" "copy-parts" "the repair copied the missed batch"
assert_eq "2190 2190" "$(once "$U2" acme)" "every row once on node2 (the missed batch copied, the late one written once)"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "acme equal on both replicas"
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0
ok "a repair copied the missed batch and left the one on its way to node2 to its own write: every row once"

# ---- a target whose write takes longer than the settle time ------------------------------------
# The chaos soak's node4 (a loop-mounted disk, statements of 12 s) ran a batch's INSERT longer
# than the settle time: a clone's SWITCH copied the batch's part from the source, the INSERT then
# landed, and the new replica held those rows twice. Here the target's write of a batch starts
# first and takes about 4 s (sleepEachRow), the source's lands at once, and a repair with a
# settle time of 100 ms runs meanwhile: it must wait for that INSERT and copy nothing.
"$FERRY_BIN" tenant add delta --config "$C" >/dev/null || fail "tenant add delta"
for u in "$U1" "$U2"; do batch "$u" delta 0 2000 delta-base; done
chq "$U2" "INSERT INTO events SELECT 'delta', 20261101 + number % 3, 0, 40000 + number, number
    FROM numbers(100) WHERE sleepEachRow(0.04) = 0
    SETTINGS insert_deduplication_token = 'delta-slow', function_sleep_max_microseconds_per_block = 30000000" \
    >"$T/slow.out" 2>&1 &
SLOW=$!
wait_for 30 sh -c "[ \"\$(curl -sS '$U2/' --data-binary \"SELECT count() FROM system.processes WHERE query_kind = 'Insert'\")\" != 0 ]" ||
    fail "the slow INSERT never showed in node2's system.processes: $(cat "$T/slow.out")"
batch "$U1" delta 40000 100 delta-slow
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant delta --grace 100
wait "$SLOW" || fail "the slow INSERT failed: $(cat "$T/slow.out")"
assert_eq "2100 2100" "$(once "$U2" delta)" "every row of delta once on node2 (the slow write landed once, nothing copied)"
assert_contains "$ERR" "waits for an INSERT still running on the target" "the repair waited for the slow write"
assert_eq "$(mv_fp "$U1" delta 0)" "$(mv_fp "$U2" delta 0)" "delta equal on both replicas"
ok "a repair waited for a target's INSERT slower than the settle time: every row once"

# ---- a repair while a client's retry is expected ------------------------------------------------
# A write through a router fails on node2 (killed; started again afterwards) after node1 stored
# it; the client will send it again with the same token. Without the check the repair copied the
# 100 rows to node2 and the retry left 2,200 rows of 2,100 distinct there. A
# repair meanwhile would copy the rows to node2 and the retry would store them there a second
# time (a copied part carries no token): with [cluster] routers it asks them and skips the slice
# (busy) while one expects a retry. The retry then brings the rows to node2, deduplicated on node1.
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
CR=$L/router.conf
{ cat "$C"; printf '[router]\nauth = none\nshard_timeout = 3s\nretry_window = 120s\n'; } >"$CR"
start_router "$CR" router
"$FERRY_BIN" tenant add gamma --config "$C" >/dev/null || fail "tenant add gamma"
rbatch() { # FIRST N TOKEN: through the router; prints the HTTP status
    seq "$1" $(($1 + $2 - 1)) | awk '{printf "gamma\t%d\t0\t%d\t%d\n", 20261101 + $1 % 3, $1, $1}' >"$T/r.tsv"
    curl -sS -m 60 -o "$T/r.body" -w '%{http_code}' --data-binary @"$T/r.tsv" \
        "$R_URL/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, split, user, v) FORMAT TSV' '$q|@uri')&insert_deduplication_token=$3"
}
assert_eq 200 "$(rbatch 0 2000 gamma-base)" "a batch through the router to both replicas"
kill -KILL "$(lab_pid "$L" node2)"
wait_for 30 sh -c "! curl -s -m 1 $U2/ping >/dev/null"
code=$(rbatch 30000 100 gamma-retried)
[ "$code" != 200 ] || fail "the write with node2 down was acknowledged"
lab_up "$L"
U2=$(lab_url "$L" node2)
wait_for 60 curl -sf "$U2/ping"
assert_eq "2000 2000" "$(once "$U2" gamma)" "node2 back without the failed write's rows"
CP=$L/rf2-routers.conf
sed "/^\[cluster\]/a routers = $R_URL" "$C" >"$CP"
expect_exit 1 "$FERRY_BIN" repair --config "$CP" --tenant gamma --grace 0
assert_contains "$OUT$ERR" "expects a client to retry" "the repair skips the slice while a retry is expected"
assert_eq 200 "$(rbatch 30000 100 gamma-retried)" "the client's retry"
for u in "$U1" "$U2"; do assert_eq "2100 2100" "$(once "$u" gamma)" "every row of gamma once on $u after the retry"; done
assert_eq "$(mv_fp "$U1" gamma 0)" "$(mv_fp "$U2" gamma 0)" "gamma equal on both replicas"
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant gamma --grace 0
ok "a repair skipped the slice while a router expected a client's retry; the retry made both replicas exact"
done_testing
