# kill -9 of a node in the middle of a move: the lab's ferry-node is ClickHouse and its node
# agent in one process, so killing it kills both. The target while it receives a part (a
# half-written tmp-ferry-* folder is left in staging's detached/), the source while it sends
# one, the target and the source after the routing switch (during the grace period). Each time
# the mover stops cleanly (exit 1, "stopped in STATE", resume hint), the node is started again,
# and the resumed move gives identical data, nothing duplicated, no orphaned detached/ or shadow/
# folder. The receiving agents pause after each file (test-only knob) so a kill lands mid-part.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

export FERRY_AGENT_TEST_SLOW_RECEIVE_MS=100 # inherited by the nodes `lab up` starts
L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
url_of() { lab_url "$L" "$1"; }
mv_ingest "$(url_of node1)" acme 1 4 20000
for d in 1 2; do chq "$(url_of node1)" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 1) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$(url_of node1)" acme 1)
unfinished() { sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }
tmp_folders() { find "$L/$1/data" -path '*/detached/tmp-ferry-*' -maxdepth 8 2>/dev/null || true; }

src=node1; dst=node2
# kill_case VICTIM(src|dst) WHEN(receive|switch) STATE
kill_case() {
    local who=$1 when=$2 state=$3 victim grace=200
    [ "$who" = src ] && victim=$src || victim=$dst
    [ "$when" = switch ] && grace=6000
    # emptied first: the wait below must not read the last case's log before the mover's
    # redirection truncates it (a switch case's 'routing switched' killed the node too early)
    : >"$T/m.err"
    "$FERRY_BIN" move --config "$C" --tenant acme --split 1 --to "$dst" --grace $grace \
        >"$T/m.out" 2>"$T/m.err" &
    local mpid=$!
    if [ "$when" = receive ]; then
        # a hot part half received on the target: its tmp-ferry-* folder exists
        wait_for 120 sh -c "find '$L/$dst/data/store' -path '*/detached/tmp-ferry-*' 2>/dev/null | grep -q ." ||
            fail "no part was being received on $dst: $(cat "$T/m.err")"
    else
        wait_for 120 grep -q 'routing switched' "$T/m.err" || fail "no switch: $(cat "$T/m.err")"
    fi
    local vpid; vpid=$(lab_pid "$L" "$victim")
    kill -KILL "$vpid"
    local rc=0
    wait "$mpid" || rc=$?
    assert_eq 1 "$rc" "mover exit status after kill -9 of $victim ($who, $when)"
    assert_contains "$(cat "$T/m.err")" "stopped in $state (resume: ferry move --resume" "clean stop in $state"
    local id; id=$(unfinished)
    [ -n "$id" ] || fail "no unfinished move after killing $victim"
    assert_eq "$state" "$(sqlite3 "$L/catalog.db" "SELECT json_extract(doc, '\$.state') FROM records WHERE parent = 'moves' AND name = '$id'")" "journal state"
    # the mover is not retried while the node is down: it stops again with the same hint
    expect_exit 1 "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200
    assert_contains "$ERR" "stopped in $state" "resume while $victim is down stops cleanly"
    if [ "$who" = dst ] && [ "$when" = receive ]; then
        [ -n "$(tmp_folders "$dst")" ] || fail "expected the killed receive to leave its folder"
    fi
    lab_up "$L"
    [ "$(lab_alive "$L" "$victim")" = true ] || fail "$victim did not come back"
    "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >"$T/r.out" 2>"$T/r.err" ||
        fail "resume after killing $victim failed: $(cat "$T/r.err")"
    assert_contains "$(cat "$T/r.out")" "(resumed)" "resumed"
    local du su; du=$(url_of "$dst"); su=$(url_of "$src")
    assert_eq "$want" "$(mv_fp "$du" acme 1)" "data identical on $dst"
    assert_eq 0 "$(chq "$su" "SELECT count() FROM events WHERE tenant = 'acme'")" "$src holds nothing of acme"
    assert_eq 0 "$(chq "$du" "SELECT count() FROM events_ferry_staging")" "staging empty"
    assert_eq 80000 "$(chq "$du" "SELECT count() FROM events WHERE tenant = 'acme'")" "no row duplicated"
    assert_eq "$dst" "$("$FERRY_BIN" route --config "$C" --tenant acme --split 1 --json | jq -r '.slices[0].shards[0]')" "route"
    [ -z "$(tmp_folders "$dst")" ] || fail "half-received folders left on $dst: $(tmp_folders "$dst")"
    mv_no_residue "$L"
    ok "kill -9 of $victim ($who node) during $when: stopped in $state, resumed after restart: identical, no residue"
    local t=$src; src=$dst; dst=$t
}

kill_case dst receive CLONE
kill_case src receive CLONE
kill_case dst switch SWITCH
kill_case src switch SWITCH
for n in node1 node2; do assert_eq 0 "$(curl -s "$(url_of $n)/ferry/status" | jq .refused_deletes)" "no delete attempted on $n"; done

# ---- bad input around dead and unfinished moves (nothing journaled, clear message) ----------
# the slice is on node1 now
nmoves() { sqlite3 "$L/catalog.db" "SELECT count(*) FROM records WHERE parent = 'moves'"; }
n0=$(nmoves)
kill -KILL "$(lab_pid "$L" node1)"
expect_exit 1 "$FERRY_BIN" move --config "$C" --tenant acme --split 1 --to node2
assert_contains "$ERR" "source shard node1 is not reachable" "source down named"
assert_eq "" "$OUT" "nothing on stdout"
assert_eq "$n0" "$(nmoves)" "nothing journaled with the source down"
lab_up "$L"
expect_exit 2 "$FERRY_BIN" move --config "$C" --resume mv-nope
assert_contains "$ERR" "unknown move 'mv-nope'" "unknown move id"
FERRY_TEST_CRASH_BEFORE=VERIFY expect_exit 137 "$FERRY_BIN" move --config "$C" --tenant acme --split 1 --to node2 --grace 200
id=$(unfinished)
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant acme --split 1 --to node1
assert_contains "$ERR" "has an unfinished move $id to node2" "another unfinished move of the slice"
assert_contains "$ERR" "ferry move --resume $id" "says how to finish it"
"$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >/dev/null 2>"$T/r.err" || fail "resume: $(cat "$T/r.err")"
"$FERRY_BIN" shard drain node1 --config "$C" >/dev/null 2>"$T/d.err" || fail "drain: $(cat "$T/d.err")"
n0=$(nmoves)
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant acme --split 1 --to node1
assert_contains "$ERR" "shard node1 is draining; moves go to active shards only" "target not active"
assert_eq "$n0" "$(nmoves)" "nothing journaled for a draining target"
assert_eq "$want" "$(mv_fp "$(url_of node2)" acme 1)" "data intact on node2"
ok "source down (exit 1), unknown move id, another unfinished move, draining target (exit 2): nothing journaled"

# a tmp-ferry folder whose writer still runs is a receive in progress: the agent keeps it
U=$(url_of node1)
dir=$(chq "$U" "SELECT data_paths[1] FROM system.tables WHERE name = 'events'")detached
mkdir -p "$dir/tmp-ferry-$$-0123456789abcdef" "$dir/tmp-ferry-999999999-0123456789abcdef"
tok=$(cat "$L/node1/agent.token")
rm_tmp() { curl -s -o "$T/rm.json" -w '%{http_code}' -H "Authorization: Bearer $tok" "$U/agent/v1/remove-detached" \
    --data-binary "{\"database\": \"default\", \"table\": \"events\", \"part\": \"$1\"}"; }
assert_eq 409 "$(rm_tmp "tmp-ferry-$$-0123456789abcdef")" "live writer's folder refused"
assert_contains "$(cat "$T/rm.json")" "receive in progress" "refusal says why"
assert_eq 200 "$(rm_tmp "tmp-ferry-999999999-0123456789abcdef")" "dead writer's folder removed"
rmdir "$dir/tmp-ferry-$$-0123456789abcdef"
ok "remove-detached keeps a folder whose writer runs, removes one whose writer is gone"
done_testing
