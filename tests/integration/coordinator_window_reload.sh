# The maintenance window holds every autopilot action that changes data, and the coordinator
# reloads its config on SIGHUP (issue 22). A 2-node lab, rf = 2, one coordinator with splits,
# tier, repair, retention and sweep (delete_orphans) every second and a window that excludes now:
# - splits, tier, repair and retention record `outside window` and change nothing (the old days
#   stay hot, the expired partition stays, rows only node1 has are not copied to node2); the
#   sweep still reports but its deletes are held;
# - SIGHUP with a bad file (an impossible window): refused with a log line naming the file, the
#   line and the fix; the coordinator keeps running on the old config (the next runs are still
#   held);
# - SIGHUP with the window removed: `config reloaded`, and then the same actions run on their
#   own: the old days are tiered, the expired partition removed, node2 repaired to node1's rows.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"

L=$T/lab
lab_up "$L" --nodes 2
C=$L/rf2.conf
lab_rf_conf "$L" 2 "$C"
events_conf "$C"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
events_table --tiered "$U1" "$U2"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add t1 t9 --config "$C" >/dev/null || fail "tenant add"
for u in "$U1" "$U2"; do
    # t1: two old days (tiering candidates); t9: a day past keep = 365d (retention)
    chq "$u" "INSERT INTO events SELECT 't1', 20261101 + number % 2, 0, number % 97, number, 'x' FROM numbers(2000)" >/dev/null
    chq "$u" "INSERT INTO events SELECT 't9', 20250101, 0, number % 97, 100000 + number, 'y' FROM numbers(300)" >/dev/null
done
# rows only node1 has (as if node2 had missed a write): the repair's work
chq "$U1" "INSERT INTO events SELECT 't1', 20261101, 0, number % 97, 500000 + number, 'late' FROM numbers(150)" >/dev/null
cold() { chq "$1" "SELECT count() FROM system.parts WHERE table = 'events' AND active AND disk_name = 'cold'"; }
t9_rows() { chq "$1" "SELECT count() FROM events WHERE tenant = 't9'"; }
t1_rows() { chq "$1" "SELECT count() FROM events WHERE tenant = 't1'"; }

H=$(date -u +%H)
WIN=$(printf '%02d:00-%02d:00' $(((10#$H + 2) % 24)) $(((10#$H + 3) % 24)))
CC=$T/coord.conf
conf() { # conf WINDOW_LINE: the coordinator's config
    cp "$C" "$CC.new"
    cat >>"$CC.new" <<EOF
[autopilot]
splits_interval = 1s
tier_interval = 1s
repair_interval = 1s
retention_interval = 1s
keep = 365d
sweep_interval = 1s
delete_orphans = true
min_age = 1h
$1
EOF
    mv "$CC.new" "$CC"
}
conf "window = $WIN"
bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$CC" --listen 127.0.0.1:0 --port-file "$T/coord.port"
CPID=$BG_PID
wait_for 60 test -s "$T/coord.port" || fail "coordinator did not start: $(tail -5 "$T/coord.log")"
CURL=http://127.0.0.1:$(cat "$T/coord.port")

run_of() { "$FERRY_BIN" status --config "$C" --json | jq -c --arg a "$1" '.autopilot.runs[] | select(.action == $a)'; }
# held_since ACTION T: its recorded run started at or after unix time T and was held by the window
held_since() { run_of "$1" | jq -e --argjson t "$2" '.started >= $t and .result == "outside window" and (.reason | test("outside the window"))' >/dev/null; }
T0=$(date +%s)
for a in splits tier repair retention; do
    wait_for 60 held_since $a "$T0" || fail "$a not held by the window $WIN: $(run_of $a)"
done
sweep_held() { run_of sweep | jq -e --argjson t "$1" '.started >= $t and (.reason | test("deletes held, outside the window"))' >/dev/null; }
wait_for 60 sweep_held "$T0" || fail "the sweep's deletes not held: $(run_of sweep)"
for u in "$U1" "$U2"; do
    assert_eq 0 "$(cold "$u")" "nothing tiered outside the window"
    assert_eq 300 "$(t9_rows "$u")" "nothing expired outside the window"
done
assert_eq 2000 "$(t1_rows "$U2")" "nothing repaired outside the window"
ok "window $WIN (excludes now): splits, tier, repair and retention held, the sweep reports without deleting; nothing changed"

# ---- SIGHUP with a bad file: refused, the old config kept ------------------------------------
conf "window = 26:00-27:00"
kill -HUP "$CPID"
wait_for 30 grep -q 'config reload refused; the running config is kept' "$T/coord.log" ||
    fail "no refusal logged: $(tail -3 "$T/coord.log")"
line=$(grep 'config reload refused' "$T/coord.log" | tail -1)
echo "# $line"
assert_contains "$line" "$CC:" "the refusal names the file"
assert_contains "$line" "HH:MM-HH:MM" "and says what a window looks like"
curl -sf "$CURL/health" >/dev/null || fail "the coordinator died on a bad reload"
T1=$(date +%s)
wait_for 60 held_since tier "$T1" || fail "after the refused reload the old window no longer holds: $(run_of tier)"
assert_eq 0 "$(cold "$U1")" "still nothing tiered"
ok "SIGHUP with a bad window: refused with a clear log line, the coordinator runs on with the old config"

# ---- SIGHUP with the window removed: the actions run ------------------------------------------
conf ""
kill -HUP "$CPID"
wait_for 30 grep -q 'msg="config reloaded"' "$T/coord.log" || fail "no reload logged: $(tail -3 "$T/coord.log")"
tiered() { [ "$(cold "$U1")" -gt 0 ] && [ "$(cold "$U2")" -gt 0 ]; }
wait_for 120 tiered || fail "nothing tiered after the reload: $(run_of tier)"
expired() { [ "$(t9_rows "$U1")" = 0 ] && [ "$(t9_rows "$U2")" = 0 ]; }
wait_for 120 expired || fail "t9 not expired after the reload: $(run_of retention)"
repaired() { [ "$(t1_rows "$U2")" = 2150 ]; }
wait_for 120 repaired || fail "node2 not repaired after the reload: $(run_of repair)"
fp() { chq "$1" "SELECT _partition_id, count(), sum(cityHash64(*)) FROM events WHERE tenant = 't1' GROUP BY 1 ORDER BY 1"; }
assert_eq "$(fp "$U1")" "$(fp "$U2")" "t1 identical on both replicas"
ok "SIGHUP without the window: config reloaded; tier, retention and repair ran on their own"
kill -TERM "$CPID" 2>/dev/null || true
done_testing
