# Retention across 3 lab servers that share cold objects (a partition ClickHouse moved to the
# cold disk on node1, its pointer parts copied to node2 and node3 by the agents and attached):
# a dry run changes nothing; bad input is refused; retention detaches the expired partitions on
# every server and removes their folders, deletes nothing while a table the catalog does not know
# (node3's archive) still reads the objects (the live check wins over the stale catalog), and
# deletes exactly the partition's objects once that last reference is gone (not while a move of
# the tenant is unfinished; a FAILED one holds nothing back). Hot expired data goes too; data
# inside the keep period stays.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"
source "$FERRY_SOURCE_DIR/tests/lib/retention.sh"

L=$T/lab
lab_up "$L" --nodes 3
rt_init "$L" 3 acme beta
C=$L/ferry.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2); U3=$(lab_url "$L" node3)
OLD=$(rt_day 10); NEW=$(rt_day 1)
for u in "$U1" "$U2" "$U3"; do chq "$u" "CREATE TABLE e $RT_DDL" >/dev/null; done
chq "$U3" "CREATE TABLE archive $RT_DDL" >/dev/null
chq "$U1" "INSERT INTO e SELECT t, d, 0, number, toString(number % 100) FROM numbers(20000)
           ARRAY JOIN ['acme', 'beta'] AS t ARRAY JOIN [$OLD, $NEW] AS d" >/dev/null
PA=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e' AND partition = '(''acme'',$OLD,0)'")
PB=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e' AND partition = '(''beta'',$OLD,0)'")
PN=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e' AND partition = '(''acme'',$NEW,0)'")
[ -n "$PA" ] && [ -n "$PB" ] && [ -n "$PN" ] || fail "partitions not found"
chq "$U1" "ALTER TABLE e MOVE PARTITION ID '$PA' TO DISK 'cold'" >/dev/null
chq "$U1" "ALTER TABLE e MOVE PARTITION ID '$PN' TO DISK 'cold'" >/dev/null
rt_cold_share "$L" node1 node2 node3 "$PA"
RT_TARGET_TABLE=archive rt_cold_share "$L" node1 node3 "$PA"
for u in "$U1" "$U2" "$U3"; do
    assert_eq 20000 "$(chq "$u" "SELECT count() FROM e WHERE t = 'acme' AND d = $OLD")" "acme $OLD on $u"
done
assert_eq 20000 "$(chq "$U3" "SELECT count() FROM archive")" "archive on node3"
# the shared objects: what node3's archive reads of node1's partition (ATTACH gives each copy
# a few objects of its own, e.g. invalidated_system_columns.txt)
TD1=$(chq "$U1" "SELECT arrayJoin(data_paths) FROM system.tables WHERE name = 'e'" | grep disks/cold)
TD3=$(chq "$U3" "SELECT arrayJoin(data_paths) FROM system.tables WHERE name = 'archive'" | grep disks/cold)
K1=$(rt_pointer_keys "$L" node1 "${TD1#"$L/node1/data/disks/cold/"}")
K3=$(rt_pointer_keys "$L" node3 "${TD3#"$L/node3/data/disks/cold/"}")
KEYS=$(comm -12 <(echo "$K1") <(echo "$K3"))
NKEYS=$(wc -l <<<"$KEYS")
[ "$NKEYS" -gt 5 ] || fail "too few objects for the shared partition: $NKEYS"
for k in $KEYS; do [ -f "$L/blobs/$k" ] || fail "object $k missing before retention"; done
ALL_BEFORE=$(cd "$L/blobs" && find . -type f | sort)
ok "3 servers read partition $PA's $NKEYS objects (node3 twice: e and archive)"

# ---- bad input --------------------------------------------------------------------------------
expect_exit 2 "$FERRY_BIN" retention --keep 2d --config "$C"
assert_contains "$ERR" "hot window" "retention shorter than hot_days"
assert_eq "" "$OUT" "nothing on stdout"
expect_exit 2 "$FERRY_BIN" retention --keep 30d --tenant nobody --config "$C"
assert_contains "$ERR" "unknown tenant 'nobody'" "unknown tenant"
expect_exit 2 "$FERRY_BIN" retention --all --config "$C"
assert_contains "$ERR" "--tenant" "--all needs a tenant"
expect_exit 2 "$FERRY_BIN" retention --keep 36h --config "$C"
assert_contains "$ERR" "whole number of days" "keep in whole days"
expect_exit 2 "$FERRY_BIN" retention --keep soon --config "$C"
ok "bad input refused with exit 2: shorter than the hot window, unknown tenant, --all alone, 36h"

# ---- dry run ------------------------------------------------------------------------------------
expect_exit 0 "$FERRY_BIN" retention --keep 5d --dry-run --json --config "$C"
assert_eq "$(rt_day 4)" "$(jq -r .cutoff <<<"$OUT")" "cut-off: the 5 newest days are kept"
assert_eq "$(printf '%s\n' "$PA" "$PB" | sort | paste -sd,)" "$(jq -r '[.jobs[].partition_id] | sort | join(",")' <<<"$OUT")" "expired partitions"
assert_eq "node1,node2,node3" "$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .servers | sort | join(",")' <<<"$OUT")" "servers holding $PA"
assert_eq 20000 "$(chq "$U2" "SELECT count() FROM e WHERE t = 'acme' AND d = $OLD")" "dry run changed nothing"
assert_eq "[]" "$(jq -c .jobs "$("$FERRY_BIN" catalog export --config "$C" >"$T/x.json"; echo "$T/x.json")")" "no job recorded by the dry run"
ok "dry run lists $PA on node1..3 and $PB, changes nothing"

# ---- retention while node3's archive still reads the objects -----------------------------------
expect_exit 1 "$FERRY_BIN" retention --keep 5d --json --config "$C"
R=$OUT
assert_eq DONE "$(jq -r --arg p "$PB" '.jobs[] | select(.partition_id == $p) | .state' <<<"$R")" "hot partition $PB done"
assert_eq DELETE "$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .state' <<<"$R")" "$PA waits in DELETE"
# what was deleted: only objects no pointer file names any more (the blobs ClickHouse wrote
# when node2 and node3 attached their copies); everything the archive reads stays
D1=$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .deleted' <<<"$R")
GONE1=$(comm -23 <(echo "$ALL_BEFORE") <(cd "$L/blobs" && find . -type f | sort) | wc -l)
assert_eq "$D1" "$GONE1" "the deleted count is what left the store"
assert_contains "$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .kept[0].blocker' <<<"$R")" "node3" "the blocker is node3's archive"
for u in "$U1" "$U2" "$U3"; do
    assert_eq 0 "$(chq "$u" "SELECT count() FROM e WHERE d = $OLD")" "expired data gone from e on $u"
    assert_eq 0 "$(chq "$u" "SELECT count() FROM system.detached_parts WHERE table = 'e'")" "no detached folder left on $u"
done
assert_eq 20000 "$(chq "$U1" "SELECT count() FROM e WHERE t = 'acme' AND d = $NEW")" "kept acme"
assert_eq 20000 "$(chq "$U1" "SELECT count() FROM e WHERE t = 'beta' AND d = $NEW")" "kept beta"
for k in $KEYS; do [ -f "$L/blobs/$k" ] || fail "object $k deleted while node3's archive reads it"; done
assert_eq 20000 "$(chq "$U3" "SELECT count() FROM archive")" "archive still reads every row"
for n in node1 node2 node3; do
    for k in $(rt_pointer_keys "$L" $n); do [ -f "$L/blobs/$k" ] || fail "$n still names $k, deleted"; done
done
# the catalog alone says nothing references them any more (stale: it never knew the archive)
"$FERRY_BIN" catalog export --config "$C" >"$T/cat.json"
assert_eq "" "$(jq -r --arg p "$PA" '[.parts[] | select(.partition_id == $p) | .servers] | map(select(. != "")) | join(",")' "$T/cat.json")" "catalog lists no server for $PA's parts"
[ "$(jq --arg p "$PA" '[.parts[] | select(.partition_id == $p) | .objects[]] | length' "$T/cat.json")" -ge "$NKEYS" ] ||
    fail "the catalog does not record $PA's objects"
ok "DETACH + folder removal on 3 servers; the live check keeps $NKEYS objects node3's archive reads (catalog stale); $D1 unreferenced deleted"

# run again: still referenced, still kept (idempotent)
expect_exit 1 "$FERRY_BIN" retention --keep 5d --json --config "$C"
assert_eq DELETE "$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .state' <<<"$OUT")" "still waiting"
for k in $KEYS; do [ -f "$L/blobs/$k" ] || fail "object $k deleted on the second run"; done

# ---- the last reference goes: node3's archive is detached and its folder removed --------------
chq "$U3" "ALTER TABLE archive DETACH PARTITION ID '$PA'" >/dev/null
for p in $(chq "$U3" "SELECT name FROM system.detached_parts WHERE table = 'archive'"); do
    rt_agent "$L" node3 remove-detached "{\"database\":\"default\",\"table\":\"archive\",\"part\":\"$p\"}"
done
# a move of acme in flight (a record written through the catalog, nothing runs it) holds the
# deletion back; a move of another tenant does not matter; once it FAILED (rolled back) the
# deletion goes on
TOOL=$FERRY_BUILD_DIR/tests/tools/catalog_tool
CAT=$(sed -n 's/^catalog = //p' "$C")
"$TOOL" "$CAT" add-move m-acme acme 0 node1 node2 || fail "add m-acme"
"$TOOL" "$CAT" add-move m-beta beta 0 node1 node2 || fail "add m-beta"
"$TOOL" "$CAT" advance-move m-beta FAILED || fail "fail m-beta"
expect_exit 1 "$FERRY_BIN" retention --keep 5d --json --config "$C"
assert_eq DELETE "$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .state' <<<"$OUT")" "$PA waits while acme moves"
assert_contains "$OUT" "move m-acme of tenant acme is in flight" "the problem names the move"
for k in $KEYS; do [ -f "$L/blobs/$k" ] || fail "object $k deleted while a move of acme is in flight"; done
"$TOOL" "$CAT" advance-move m-acme FAILED || fail "fail m-acme"
ok "a move of acme in flight: $PA stays in DELETE, nothing deleted"
expect_exit 0 "$FERRY_BIN" retention --keep 5d --json --config "$C"
assert_eq DONE "$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .state' <<<"$OUT")" "$PA done"
DELETED=$(jq -r --arg p "$PA" '.jobs[] | select(.partition_id == $p) | .deleted' <<<"$OUT")
for k in $KEYS; do [ -f "$L/blobs/$k" ] && fail "object $k still there after the last reference went"; done
GONE=$(comm -23 <(echo "$ALL_BEFORE") <(cd "$L/blobs" && find . -type f | sort) | wc -l)
assert_eq "$((D1 + DELETED))" "$GONE" "exactly the deleted objects are gone"
# nothing else: every object a pointer file still names is there
for n in node1 node2 node3; do
    for k in $(rt_pointer_keys "$L" $n); do [ -f "$L/blobs/$k" ] || fail "$n: $k was deleted"; done
done
assert_eq 20000 "$(chq "$U1" "SELECT count() FROM e WHERE t = 'acme' AND d = $NEW")" "cold data inside the keep period still reads"
"$FERRY_BIN" catalog export --config "$C" >"$T/cat.json"
assert_eq 0 "$(jq --arg p "$PA" '[.parts[] | select(.partition_id == $p)] | length' "$T/cat.json")" "part records gone"
assert_eq DONE "$(jq -r --arg p "$PA" '.jobs[] | select(.id | endswith($p)) | .state' "$T/cat.json")" "journal: DONE"
ok "the last reference gone: exactly $DELETED objects (the partition's, incl. attach-time objects) deleted"

# ---- tenant removal: all of beta, hot and cold --------------------------------------------------
chq "$U1" "ALTER TABLE e MOVE PARTITION ('beta', $NEW, 0) TO DISK 'cold'" >/dev/null
expect_exit 0 "$FERRY_BIN" retention --tenant beta --all --json --config "$C"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM e WHERE t = 'beta'")" "beta gone"
assert_eq 20000 "$(chq "$U1" "SELECT count() FROM e WHERE t = 'acme'")" "acme stays"
[ "$(jq '[.jobs[] | select(.tenant == "beta")] | length' <<<"$OUT")" -ge 1 ] || fail "no beta job"
[ "$(jq '[.jobs[] | .deleted] | add' <<<"$OUT")" -gt 0 ] || fail "beta's cold objects not deleted"
ok "--tenant beta --all: beta's hot and cold data removed, its objects deleted, acme untouched"

done_testing
