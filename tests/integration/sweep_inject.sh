# ferry sweep on a 2-node lab whose cold partition node1 shares with node2: a clean cluster gives
# a complete report with nothing to fix; then injected faults are all found: an old and a young
# orphan, a pointer file naming a missing object, one naming an object of another size, a
# catalog part listed for a server that does not hold it (catalog_only drift) and a server that
# holds a part the catalog does not list it for (server_only drift). --delete-orphans deletes only
# the orphan older than the grace period, never a referenced or catalog-named object; a server
# that cannot be read makes the report incomplete and nothing is deleted; neither is anything
# while a move is unfinished, and a FAILED or DONE move holds nothing back.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"
source "$FERRY_SOURCE_DIR/tests/lib/retention.sh"

L=$T/lab
lab_up "$L" --nodes 2
rt_init "$L" 3 acme
C=$L/ferry.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
OLD=$(rt_day 10)
for u in "$U1" "$U2"; do chq "$u" "CREATE TABLE e $RT_DDL" >/dev/null; done
chq "$U1" "INSERT INTO e SELECT 'acme', $OLD, 0, number, toString(number) FROM numbers(5000)" >/dev/null
PA=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e'")
chq "$U1" "ALTER TABLE e MOVE PARTITION ID '$PA' TO DISK 'cold'" >/dev/null
rt_cold_share "$L" node1 node2 "$PA"
assert_eq 5000 "$(chq "$U2" "SELECT count() FROM e")" "node2 reads node1's objects"

expect_exit 0 "$FERRY_BIN" sweep --json --config "$C"
assert_eq true "$(jq -r .complete <<<"$OUT")" "complete"
assert_eq "0 0 0" "$(jq -r '[(.orphans|length), (.dangling|length), (.drift|length)] | join(" ")' <<<"$OUT")" "nothing found on a clean cluster"
[ "$(jq -r .referenced_objects <<<"$OUT")" -gt 5 ] || fail "no referenced objects counted"
ok "clean cluster: complete, no orphan, no dangling pointer, no drift"

# ---- inject -------------------------------------------------------------------------------------
mkdir -p "$L/blobs/zzo" "$L/blobs/zzy" "$L/blobs/zzw" "$L/blobs/zzc"
echo "old orphan" >"$L/blobs/zzo/old"; touch -d '3 days ago' "$L/blobs/zzo/old"
echo "young orphan" >"$L/blobs/zzy/young"
printf 'short' >"$L/blobs/zzw/sized"; touch -d '3 days ago' "$L/blobs/zzw/sized"
echo "catalog only" >"$L/blobs/zzc/cat"; touch -d '3 days ago' "$L/blobs/zzc/cat"
TD2=$(chq "$U2" "SELECT arrayJoin(data_paths) FROM system.tables WHERE name = 'e'" | grep disks/cold)
mkdir -p "${TD2}detached/injected_9_9_0"
printf '5\n1\t10\n10\t%s\n1\n0\n\n' "$L/blobs/zzm/missing" >"${TD2}detached/injected_9_9_0/gone.bin"
printf '5\n1\t10\n10\t%s\n1\n0\n\n' "$L/blobs/zzw/sized" >"${TD2}detached/injected_9_9_0/sized.bin"
REL2=${TD2#"$L/node2/data/disks/cold/"}
# the catalog: part P1 lists node1 only for an object node2's live part reads too; part P2 lists
# node2 for an object no pointer file names
SHARED=$(comm -12 <(rt_pointer_keys "$L" node1) <(rt_pointer_keys "$L" node2) | head -1)
[ -n "$SHARED" ] || fail "no shared object"
"$FERRY_BIN" catalog export --config "$C" >"$T/d.json"
jq --arg pa "$PA" --arg k "$SHARED" '.parts = [
  {table: "e", partition_id: $pa, origin: "native", name: "p1", bytes: 0, rows: 0, servers: "node1",
   objects: [{key: $k, size: 1, checksum: ""}]},
  {table: "e", partition_id: $pa, origin: "native", name: "p2", bytes: 0, rows: 0, servers: "node2",
   objects: [{key: "zzc/cat", size: 13, checksum: ""}]}]' "$T/d.json" >"$T/d2.json"
rm -f "$L"/catalog.db*
"$FERRY_BIN" catalog import --config "$C" "$T/d2.json" >/dev/null || fail "import"

expect_exit 1 "$FERRY_BIN" sweep --json --config "$C"
R=$OUT; echo "$R" > "$T/sweep1.json"
assert_eq true "$(jq -r .complete <<<"$R")" "complete ($(jq -c .problems <<<"$R"))"
assert_eq "zzo/old,zzy/young" "$(jq -r '.orphans | join(",")' <<<"$R")" "orphans"
assert_eq "false" "$(jq -r '.orphan_details[] | select(.key == "zzy/young") | .old_enough' <<<"$R")" "young orphan not old enough (no grace period given)"
assert_eq "node2:cold:$REL2""detached/injected_9_9_0/gone.bin,node2:cold:$REL2""detached/injected_9_9_0/sized.bin" \
    "$(jq -r '.dangling | join(",")' <<<"$R")" "dangling pointer files"
assert_eq "missing wrong_size" "$(jq -r '[.dangling_details[].problem] | join(" ")' <<<"$R")" "missing and wrong size"
assert_eq 5 "$(jq -r '.dangling_details[] | select(.problem == "wrong_size") | .object_size' <<<"$R")" "listed size"
assert_eq "catalog_only:node2:p2 server_only:node2:p1" \
    "$(jq -r '[.drift[] | "\(.kind):\(.server):\(.part)"] | sort | join(" ")' <<<"$R")" "drift"
assert_eq "zzc/cat" "$(jq -r '.catalog_only | join(",")' <<<"$R")" "catalog-only object"
expect_exit 1 "$FERRY_BIN" sweep --config "$C"
assert_contains "$OUT" "dangling node2:cold:" "text report"
ok "found: 2 orphans (one young), a missing and a wrong-size object, catalog_only and server_only drift"

# ---- bad input ------------------------------------------------------------------------------------
expect_exit 2 "$FERRY_BIN" sweep --delete-orphans --config "$C"
assert_contains "$ERR" "--min-age" "delete needs a grace period"
expect_exit 2 "$FERRY_BIN" sweep --delete-orphans --min-age 0s --config "$C"
expect_exit 2 "$FERRY_BIN" sweep --min-age 1h --config "$C"
expect_exit 2 "$FERRY_BIN" sweep --config "$T/nope.conf"
assert_eq "" "$OUT" "nothing on stdout"
ok "bad input: --delete-orphans without --min-age, 0s, --min-age alone, missing config"

# ---- a server that cannot be read: incomplete, nothing deleted ----------------------------------
cp "$L/node2/agent.token" "$T/token.save"
echo "wrong-token-0123456789abcdef" >"$L/node2/agent.token"
expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$C"
assert_eq false "$(jq -r .complete <<<"$OUT")" "incomplete"
assert_eq 0 "$(jq -r .deleted <<<"$OUT")" "nothing deleted"
assert_contains "$(jq -r '.problems | join(" ")' <<<"$OUT")" "node2" "the problem names node2"
[ -f "$L/blobs/zzo/old" ] || fail "old orphan deleted from an incomplete report"
cp "$T/token.save" "$L/node2/agent.token"
ok "node2 unreadable: report incomplete, nothing deleted"

# ---- a move in flight holds deletion back; a FAILED or DONE one does not ------------------------
# (the records are written through the catalog, as the move flow writes them, which keeps the
# index of unfinished moves the sweep reads)
TOOL=$FERRY_BUILD_DIR/tests/tools/catalog_tool
CAT=$(sed -n 's/^catalog = //p' "$C")
for m in m-live m-failed m-done; do
    "$TOOL" "$CAT" add-move $m acme 0 node1 node2 || fail "add $m"
done
"$TOOL" "$CAT" advance-move m-failed FAILED || fail "fail m-failed"
for s in CLONE VERIFY SWITCH CLEANUP DONE; do "$TOOL" "$CAT" advance-move m-done $s || fail "m-done to $s"; done
for state in PLANNED CLONE; do
    [ $state = PLANNED ] || "$TOOL" "$CAT" advance-move m-live $state || fail "advance m-live to $state"
    expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$C"
    assert_eq 0 "$(jq -r .deleted <<<"$OUT")" "nothing deleted while m-live is $state"
    assert_contains "$(jq -r '.problems | join(" ")' <<<"$OUT")" "move m-live is in flight ($state)" "the problem names the move"
    [ -f "$L/blobs/zzo/old" ] || fail "old orphan deleted while a move is in flight"
done
"$TOOL" "$CAT" advance-move m-live FAILED || fail "fail m-live"
ok "a move in flight (PLANNED, then CLONE): nothing deleted, the problem names it"

# ---- delete orphans older than 1 hour ------------------------------------------------------------
expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$C"
assert_eq 1 "$(jq -r .deleted <<<"$OUT")" "one orphan deleted"
[ -f "$L/blobs/zzo/old" ] && fail "the old orphan is still there"
[ -f "$L/blobs/zzy/young" ] || fail "the young orphan was deleted (grace period)"
[ -f "$L/blobs/zzc/cat" ] || fail "an object the catalog names was deleted"
[ -f "$L/blobs/zzw/sized" ] || fail "a referenced object was deleted"
for n in node1 node2; do
    for k in $(rt_pointer_keys "$L" $n); do
        case $k in zzm/*) continue ;; esac
        [ -f "$L/blobs/$k" ] || fail "$n: referenced $k deleted"
    done
done
assert_eq 5000 "$(chq "$U2" "SELECT count(), sum(x) = 12497500 FROM e" | cut -f1)" "node2 still reads"
ok "--delete-orphans --min-age 1h (moves FAILED and DONE only): only the 3-day-old orphan deleted; young, catalog-named and referenced objects stay"

done_testing
