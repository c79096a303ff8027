# A replica whose partition holds a broken part is repaired instead of blocking every repair and
# clone of the slice (found by the chaos soak: node4's disk filled, ClickHouse wrote a merged hot
# part whose data.cmrk4 was empty, every read of that partition on node4 failed with "Empty
# marks file", and the clone onto node4 (its SWITCH) and `ferry repair` stopped on it for good).
# When a replica's fingerprint read fails, CHECK TABLE ... PARTITION names the broken parts; the
# replica being made equal to the other one gets them detached (kept in detached/, a warning
# naming them), and the partition is synced from the other replica. A broken replica is never
# the source. Here: rf 2 on two nodes, node2 missed rows of acme's day 1, and a part of that
# partition on node2 loses its marks (truncated to 0 bytes, the mark cache dropped).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_acme "$L" --stop-merges
for u in "$U1" "$U2"; do mv_ingest "$u" acme 0 2 3000; mv_ingest "$u" acme 0 1 1000 5; done
mv_ingest "$U1" acme 0 1 500 9 # rows node2 missed
P=$(chq "$U2" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%20261101%' LIMIT 1")
read -r PART PPATH < <(chq "$U2" "SELECT name, path FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P' ORDER BY name LIMIT 1")
marks=$(ls "$PPATH" | grep -E '\.c?mrk[0-9]*$' || true)
[ -n "$marks" ] || fail "no marks file in $PPATH: $(ls "$PPATH")"
for m in $marks; do : >"$PPATH/$m"; done
chq "$U2" "SYSTEM DROP MARK CACHE" >/dev/null
code=$(curl -sS -o "$T/read.err" -w '%{http_code}' "$U2/" --data-binary "SELECT count(), sum(v) FROM events WHERE _partition_id = '$P'")
[ "$code" != 200 ] || fail "reading the damaged partition on node2 succeeded: $(cat "$T/read.err")"
echo "# node2 partition $P, part $PART without marks: HTTP $code: $(head -c 200 "$T/read.err")"
ok "node2's partition $P cannot be read (part $PART lost its marks)"

"$FERRY_BIN" repair --config "$C" --tenant acme >"$T/r1.out" 2>"$T/r1.err" ||
    fail "repair with a broken part on node2: $(tail -5 "$T/r1.out") $(tail -3 "$T/r1.err")"
assert_contains "$(cat "$T/r1.err")" "broken parts detached" "the detach is logged"
assert_contains "$(cat "$T/r1.err")" "$PART" "the log names the broken part"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "acme equal on both replicas"
assert_eq 1 "$(chq "$U2" "SELECT count() FROM system.detached_parts WHERE table = 'events' AND name = '$PART'")" "the broken part kept in detached/"
assert_eq 7500 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "node2 holds every row once"
ok "repair detached the broken part on node2 and made the partition equal to node1's"
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant acme
ok "a second repair finds everything in sync"

# ---- a clone whose new replica breaks a part after the routing switch -------------------------
# beta goes to rf 1 (a rebalance drops a replica), then back to rf 2: the clone is stopped right
# after its routing switch; writes then reach both replicas (here straight into both nodes, as
# the router would), the new replica loses a part's marks, and the resumed clone's SWITCH (a
# replica sync of every partition) detaches it there instead of stopping for good.
"$FERRY_BIN" tenant add beta --config "$C" >/dev/null || fail "tenant add beta"
"$FERRY_BIN" tenant set-rf beta 1 --config "$C" >/dev/null || fail "set-rf beta 1"
"$FERRY_BIN" rebalance --config "$C" --grace 100 >/dev/null 2>"$T/rb1.err" || fail "rebalance to rf 1: $(tail -3 "$T/rb1.err")"
SRC=$("$FERRY_BIN" route --config "$C" --tenant beta --json | jq -r '.slices[0].shards | join(",")')
case "$SRC" in node1) DST=node2 ;; node2) DST=node1 ;; *) fail "beta not on one shard: $SRC" ;; esac
US=$(lab_url "$L" "$SRC"); UD=$(lab_url "$L" "$DST")
mv_ingest "$US" beta 0 2 2000 3
"$FERRY_BIN" tenant set-rf beta 2 --config "$C" >/dev/null || fail "set-rf beta 2"
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWITCH:switched "$FERRY_BIN" rebalance --config "$C" --grace 100
assert_eq 2 "$("$FERRY_BIN" route --config "$C" --tenant beta --json | jq -r '.slices[0].shards | length')" "beta routed to both after the switch"
for u in "$US" "$UD"; do mv_ingest "$u" beta 0 1 700 11; done
# a repair keeps off a slice whose unfinished move a mover runs now (the chaos soak: a repair
# and a clone's SWITCH synced the same partition into the same staging table, rows doubled on
# the new replica): here the move's lease held by another process (flock, as a running mover)
MID=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
[ -n "$MID" ] || fail "no unfinished clone"
bg_start "$T/mholder.log" flock -o -x "$L/catalog.db-lease-move.$MID" sleep 300
MH=$BG_PID
wait_for 20 bash -c "! flock -n '$L/catalog.db-lease-move.$MID' true" || fail "the move's lease file was not locked"
expect_exit 1 "$FERRY_BIN" repair --config "$C" --tenant beta
assert_contains "$OUT" "busy" "repair reports the slice busy while its move runs"
kill -- -"$MH"; wait "$MH" 2>/dev/null || true
ok "repair skips a slice whose unfinished move a mover runs"
BP=$(chq "$UD" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%beta%' ORDER BY partition_id LIMIT 1")
read -r BPART BPATH < <(chq "$UD" "SELECT name, path FROM system.parts WHERE active AND table = 'events' AND partition_id = '$BP' LIMIT 1")
for m in $(ls "$BPATH" | grep -E '\.c?mrk[0-9]*$'); do : >"$BPATH/$m"; done
chq "$UD" "SYSTEM DROP MARK CACHE" >/dev/null
"$FERRY_BIN" move --resume all --config "$C" --grace 100 >"$T/resume.out" 2>"$T/resume.err" ||
    fail "the clone's resume with a broken part on $DST: $(tail -3 "$T/resume.err")"
assert_contains "$(cat "$T/resume.err")" "broken parts detached" "the clone logs the detach"
assert_eq 0 "$(sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")" "no unfinished move"
assert_eq "$(mv_fp "$US" beta 0)" "$(mv_fp "$UD" beta 0)" "beta equal on both replicas"
ok "a clone whose new replica ($DST) broke part $BPART after the switch finishes: part detached, partition synced"
done_testing
