# Retention killed at each journaled transition (the flow engine's crash hook,
# include/ferry/flow_journal.h: FERRY_TEST_CRASH_AFTER / _BEFORE=<state>, kill -9 of the process)
# and resumed: one expired cold partition read by two lab servers (shared objects). Each run dies at the next point (after SCAN, DETACH, REMOVE, DELETE is journaled; before DONE), the
# journal holds the state the point names (no object deleted before DELETE is journaled), and
# the following run resumes from there. A plain run then finishes: the expired rows gone on both
# servers, no detached folder left, every
# object of the partition deleted and nothing else, the part records gone, the journal DONE.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"
source "$FERRY_SOURCE_DIR/tests/lib/retention.sh"

L=$T/lab
lab_up "$L" --nodes 2
rt_init "$L" 3 acme
C=$L/ferry.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
OLD=$(rt_day 10); NEW=$(rt_day 1)
for u in "$U1" "$U2"; do chq "$u" "CREATE TABLE e $RT_DDL" >/dev/null; done
chq "$U1" "INSERT INTO e SELECT 'acme', d, 0, number, toString(number % 100) FROM numbers(5000)
           ARRAY JOIN [$OLD, $NEW] AS d" >/dev/null
PA=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e' AND partition = '(''acme'',$OLD,0)'")
[ -n "$PA" ] || fail "partition not found"
chq "$U1" "ALTER TABLE e MOVE PARTITION ID '$PA' TO DISK 'cold'" >/dev/null
rt_cold_share "$L" node1 node2 "$PA"
ALL_BEFORE=$(cd "$L/blobs" && find . -type f | sort)
KEYS=$( (rt_pointer_keys "$L" node1; rt_pointer_keys "$L" node2) | sort -u)
[ "$(wc -l <<<"$KEYS")" -gt 3 ] || fail "too few objects for the cold partition"
assert_eq 5000 "$(chq "$U2" "SELECT count() FROM e WHERE d = $OLD")" "node2 reads node1's objects"
ok "an expired cold partition read by node1 and node2 (shared objects)"

job_state() {
    "$FERRY_BIN" catalog export --config "$C" >"$T/cat.json"
    jq -r --arg p "$PA" '.jobs[] | select(.kind == "retention" and (.id | endswith($p))) | .state' "$T/cat.json"
}

for point in CRASH_AFTER:SCAN CRASH_AFTER:DETACH CRASH_AFTER:REMOVE CRASH_AFTER:DELETE CRASH_BEFORE:DONE; do
    knob=FERRY_TEST_${point%%:*} state=${point#*:}
    expect_exit 137 env "$knob=$state" "$FERRY_BIN" retention --keep 5d --json --config "$C"
    assert_contains "$ERR" "test crash point reached" "$point: killed at the point"
    want=$state
    [ "$knob" = FERRY_TEST_CRASH_BEFORE ] && want=DELETE # the point before DONE: still DELETE
    assert_eq "$want" "$(job_state)" "$point: the journal holds $want"
    if [ "$point" = CRASH_AFTER:DELETE ]; then
        for k in $KEYS; do [ -f "$L/blobs/$k" ] || fail "object $k deleted before its step ran"; done
    fi
done
ok "killed after SCAN, DETACH, REMOVE, DELETE and before DONE; each run resumed the last one's job"

expect_exit 0 "$FERRY_BIN" retention --keep 5d --json --config "$C"
assert_eq true "$(jq -r .complete <<<"$OUT")" "the run completes"
assert_eq DONE "$(job_state)" "journal: DONE"
for u in "$U1" "$U2"; do
    assert_eq 0 "$(chq "$u" "SELECT count() FROM e WHERE d = $OLD")" "expired rows gone on $u"
    assert_eq 0 "$(chq "$u" "SELECT count() FROM system.detached_parts WHERE table = 'e'")" "no detached folder on $u"
done
assert_eq 5000 "$(chq "$U1" "SELECT count() FROM e WHERE d = $NEW")" "rows inside the keep period stay"
for k in $KEYS; do [ -f "$L/blobs/$k" ] && fail "object $k of the expired partition still there"; done
GONE=$(comm -23 <(echo "$ALL_BEFORE") <(cd "$L/blobs" && find . -type f | sort) | wc -l)
assert_eq "$(wc -l <<<"$KEYS")" "$GONE" "exactly the partition's objects left the store"
assert_eq 0 "$(jq --arg p "$PA" '[.parts[] | select(.partition_id == $p)] | length' "$T/cat.json")" "part records gone"
ok "a plain run finished it: rows, folders, objects ($GONE) and part records gone, nothing else"

done_testing
