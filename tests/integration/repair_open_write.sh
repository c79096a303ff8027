# A repair must not change a replica while a router has a write to the slice open since before it
# looked (lib/flow/replica.c, wait_open_writes). Such a write may already have stored its rows on
# the replica being repaired and still fail (another of its shards stuck): its client's retry,
# arriving after the replica's parts were replaced or joined by copies that carry no block ids,
# would be stored a second time, and the next repair would carry the double to the other replica
# (the SQLite soaks' duplicates at a2541f0 and 67af25b, docs/reliability.md: a write stored on
# the target during a repair's first round, failed on another shard, was detached by its second
# round, and the client's retry stored it again). The wait is in every round, after the copies
# are staged and right before the target's parts are listed.
#
# gamma (rf 2) has 300 rows on node1 and none on node2; a client holds a write to gamma open
# through the router (its row routed, its body never ends). `ferry repair` waits for it, gives up
# after its bound and changes nothing; once the client is gone (the write ends, nothing was sent)
# the repair makes node2 equal to node1.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

L=$T/lab
lab_up "$L" --nodes 2
mv_conf "$L"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
C=$L/rf2.conf
lab_rf_conf "$L" 2 "$C.base"
{ cat "$C.base"; sed -n '/^\[table "events"\]/,$p' "$L/mv.conf"; echo 'split_key = user'
  printf '[router]\nauth = none\npassthrough = %s\nretry_window = 60s\n' "$U1"; } >"$C"
for u in "$U1" "$U2"; do
    chq "$u" "$MV_DDL" >/dev/null
    chq "$u" "ALTER TABLE events MODIFY SETTING non_replicated_deduplication_window = 1000" >/dev/null
done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add gamma --config "$C" >/dev/null || fail "tenant add gamma"
assert_eq "node1,node2" "$("$FERRY_BIN" route --config "$C" --tenant gamma --json | jq -r '.slices[0].shards | sort | join(",")')" "gamma on both nodes"
chq "$U1" "INSERT INTO events SELECT 'gamma', 20261101 + number % 3, 0, number, number FROM numbers(300)" >/dev/null
start_router "$C" router
sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $R_URL#" "$C"

# a write held open: one row of gamma routed (staged in the router), the body never ends
Q="INSERT INTO events (tenant, day, user, v) FORMAT TSV"
printf 'gamma\t20261101\t9999\t1\n' >"$T/open.tsv"
hold_write_open "$R_URL" "$Q" "$T/open.tsv"
CLIENT=$HOLD_PID
# open_is OP N: the router's open write to gamma/0 compares so with N ms (for wait_for)
S="$R_URL/ferry/router?tenant=gamma&split=0"
open_is() { [ "$(curl -sf "$S" | jq -r '.inflight_write_ms // 0')" "$1" "$2" ]; }
wait_for 30 open_is -gt 0 ||
    fail "the router does not report the open write: $(curl -s "$S")"

"$FERRY_BIN" repair --tenant gamma --config "$C" >"$T/repair1.out" 2>"$T/repair1.err" &&
    fail "the repair went ahead beside an open write: $(cat "$T/repair1.out")"
assert_contains "$(cat "$T/repair1.out" "$T/repair1.err")" "open for" "the repair names the open write"
# gamma has three days: after the first partition's wait the others are left for the next run
assert_contains "$(cat "$T/repair1.out" "$T/repair1.err")" "an earlier partition of the slice gave up" \
    "the slice's other partitions do not wait again"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'gamma'")" "node2 unchanged while the write is open"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_staging'")" \
    "the repair gave its staged copies back"
ok "a repair waits for a router's write to the slice open since before it looked, then leaves the replica as it was"

kill "$CLIENT" 2>/dev/null || true
wait_for 30 open_is -eq 0 ||
    fail "the router still reports the write open after its client went: $(curl -s "$S")"
assert_eq 0 "$(curl -sf "$S" | jq -r '.pending_retry_ms')" \
    "a write that sent no rows awaits no retry"
"$FERRY_BIN" repair --tenant gamma --config "$C" >"$T/repair2.out" 2>"$T/repair2.err" ||
    fail "the repair after the write ended: $(cat "$T/repair2.out" "$T/repair2.err")"
for u in "$U1" "$U2"; do
    assert_eq "300 300" "$(chq "$u" "SELECT count(), uniqExact(user) FROM events WHERE tenant = 'gamma'" | tr '\t' ' ')" "every row of gamma once on $u"
done
ok "once the write ended the repair made node2 equal to node1, every row once"
stop_router "$R_PID"
done_testing
