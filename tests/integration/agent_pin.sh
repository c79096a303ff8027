# The agent's `pin` (lib/agent/pin.c) on a 1-node lab: the ref_count of a part ClickHouse moved
# to the object disk itself (0, one link) raised to its links in place and synced, so that the
# server's removal of the part deletes no object. Checked:
#  - a pinned part says ref_count 1 in every file (the agent's own listing), a second pin raises
#    nothing
#  - refused whole, nothing written: a frozen part (FREEZE marks its files read-only), a
#    read-only pointer file, a count whose digits would grow
#    (9 -> 10 links), a file that is not a pointer, a subfolder; bad requests answer 400
#  - the point of it, against the real server: the pinned partition replaced from an empty table
#    and removed by the cleanup thread, no delete attempted (the lab's store refuses and counts
#    them) and no object gone; the same for an unpinned one tries to delete its objects (the
#    check can fail)
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"

L=$T/lab
lab_up "$L" --nodes 1
U=$(lab_url "$L" node1); TOK=$(cat "$L/node1/agent.token")
chq "$U" "CREATE TABLE e (t UInt32, d UInt32, x UInt64, s String) ENGINE = MergeTree
    PARTITION BY (t, d) ORDER BY x SETTINGS storage_policy = 'tiered', cleanup_delay_period = 1,
    max_cleanup_delay_period = 1, cleanup_delay_period_random_add = 0" >/dev/null
chq "$U" "CREATE TABLE e_empty AS e" >/dev/null
for d in 1 2 3; do
    chq "$U" "INSERT INTO e SELECT 1, 2026110$d, number, toString(number) FROM numbers(3000)" >/dev/null
    chq "$U" "ALTER TABLE e MOVE PARTITION (1, 2026110$d) TO DISK 'cold'" >/dev/null
done
part_of() { chq "$U" "SELECT name FROM system.parts WHERE active AND table = 'e' AND partition_id = '$1'"; }
PA=$(part_of 1-20261101); PB=$(part_of 1-20261102); PC=$(part_of 1-20261103)
PATH_A=$(chq "$U" "SELECT path FROM system.parts WHERE active AND name = '$PA' AND table = 'e'")
DISKP=$(chq "$U" "SELECT path FROM system.disks WHERE name = 'cold'")
UNDER=${PATH_A#"$DISKP"}
UNDER=${UNDER%"$PA/"}
[ -d "$DISKP$UNDER$PA" ] || fail "the table folder: $DISKP + $UNDER + $PA"
pin_req() { jq -cn --arg u "$UNDER" --argjson p "$1" '{disk: "cold", under: $u, parts: $p}'; }
# counts PART: "ref_count/links" of each file of the part, as the agent lists them, sorted
counts() {
    agent_ok "$U" "$TOK" pointers "$(jq -cn --arg u "$UNDER$1" '{disk: "cold", under: $u}')"
    jq -r '[.files[] | "\(.ref_count)/\(.links)"] | unique | join(" ")' <<<"$AG_BODY"
}
assert_eq 0/1 "$(counts "$PA")" "ClickHouse's own cold part: ref_count 0, one link"

# ---- pin, and again ---------------------------------------------------------------------------
nfiles=$(ls "$DISKP$UNDER$PA" | wc -l)
agent_ok "$U" "$TOK" pin "$(pin_req "[\"$PA\"]")"
assert_eq "true $nfiles" "$(jq -r '"\(.parts[0].held) \(.raised)"' <<<"$AG_BODY")" "pinned: held, every file raised"
assert_eq 1/1 "$(counts "$PA")" "every file says ref_count 1"
assert_eq 3000 "$(chq "$U" "SELECT count() FROM e WHERE d = 20261101")" "the server still reads the part"
agent_ok "$U" "$TOK" pin "$(pin_req "[\"$PA\"]")"
assert_eq "true 0" "$(jq -r '"\(.parts[0].held) \(.raised)"' <<<"$AG_BODY")" "a second pin raises nothing"
ok "a native cold part pinned: ref_count 0 -> 1 in all $nfiles files, idempotent"

# ---- a frozen part -----------------------------------------------------------------------------
# FREEZE hard-links a part's files into shadow/ (ref_count 1, two links) and marks them
# read-only, all but the ones it copies (metadata_version.txt: 0, one link). A read-only file is
# not rewritten: the part is refused whole (a move then detaches it, as before the pin).
below() { # below PART: the files whose count is under their links
    counts "$1" >/dev/null
    jq -r '[.files[] | select(.ref_count < .links)] | length' <<<"$AG_BODY"
}
chq "$U" "ALTER TABLE e FREEZE PARTITION ID '1-20261103' WITH NAME 'pin_fz'" >/dev/null
assert_contains "$(counts "$PC")" "1/2" "frozen: ref_count 1, two links"
nbelow=$(below "$PC")
agent_ok "$U" "$TOK" pin "$(pin_req "[\"$PC\"]")"
assert_eq "false 0" "$(jq -r '"\(.parts[0].held) \(.raised)"' <<<"$AG_BODY")" "a frozen part: refused, nothing raised"
assert_contains "$(jq -r '.parts[0].error' <<<"$AG_BODY")" "read-only" "the answer says why"
assert_eq "$nbelow" "$(below "$PC")" "no file of it written"
ok "a frozen part (read-only files) refused whole"

# ---- refusals ----------------------------------------------------------------------------------
# read-only: the flag of one file set (byte after the count's line), the part refused whole
RO=$DISKP$UNDER$PB/count.txt
cp "$RO" "$T/ro.orig"
python3 - "$RO" <<'PY'
import os, sys
p = sys.argv[1]; b = open(p, "rb").read(); lines = b.split(b"\n")
off = sum(len(l) + 1 for l in lines[:2 + int(lines[1].split(b"\t")[0]) + 1])
assert b[off:off + 1] == b"0", b
fd = os.open(p, os.O_WRONLY); os.pwrite(fd, b"1", off); os.close(fd)
PY
agent_ok "$U" "$TOK" pin "$(pin_req "[\"$PB\"]")"
assert_eq "false 0" "$(jq -r '"\(.parts[0].held) \(.raised)"' <<<"$AG_BODY")" "read-only: not held, nothing raised"
assert_contains "$(jq -r '.parts[0].error' <<<"$AG_BODY")" "read-only" "the answer says why"
cat "$T/ro.orig" >"$RO"
assert_eq 0/1 "$(counts "$PB")" "no file of the refused part was written"
# made-up part folders beside the table's parts: digits that would grow, not a pointer, a folder
F=$DISKP$UNDER
mkdir -p "$F/1-20261199_1_1_0" "$F/1-20261199_2_2_0" "$F/1-20261199_3_3_0/sub" "$T/links"
printf '5\n1\t3\n3\t/x/y\n9\n0\n\n' >"$F/1-20261199_1_1_0/a.bin"
for i in 1 2 3 4 5 6 7 8 9; do ln "$F/1-20261199_1_1_0/a.bin" "$T/links/a$i"; done
echo 'not a pointer' >"$F/1-20261199_2_2_0/a.bin"
printf '5\n1\t3\n3\t/x/y\n0\n0\n\n' >"$F/1-20261199_3_3_0/a.bin"
agent_ok "$U" "$TOK" pin "$(pin_req '["1-20261199_1_1_0", "1-20261199_2_2_0", "1-20261199_3_3_0", "1-20261199_4_4_0"]')"
assert_eq "false false false false 0" "$(jq -r '[.parts[].held] + [.raised] | join(" ")' <<<"$AG_BODY")" "all four refused"
assert_contains "$(jq -r '.parts[0].error' <<<"$AG_BODY")" "changes the file's length" "9 -> 10 links"
assert_contains "$(jq -r '.parts[1].error' <<<"$AG_BODY")" "line 1" "not a pointer file"
assert_contains "$(jq -r '.parts[2].error' <<<"$AG_BODY")" "not a regular file" "a subfolder"
assert_contains "$(jq -r '.parts[3].error' <<<"$AG_BODY")" "1-20261199_4_4_0" "a missing part"
assert_eq "9 0" "$(sed -n 4p "$F/1-20261199_1_1_0/a.bin") $(sed -n 4p "$F/1-20261199_3_3_0/a.bin")" "nothing written"
rm -rf "$F"/1-20261199_* "$T/links"
agent_expect 400 "not a relative path" "$U" "$TOK" pin '{"disk":"cold","under":"../x","parts":["a_1_1_0"]}'
agent_expect 400 "not a part name" "$U" "$TOK" pin "$(jq -cn --arg u "$UNDER" '{disk: "cold", under: $u, parts: ["../x"]}')"
agent_expect 400 "1..4096" "$U" "$TOK" pin "$(jq -cn --arg u "$UNDER" '{disk: "cold", under: $u, parts: []}')"
agent_expect 400 "no object-storage disk" "$U" "$TOK" pin "$(jq -cn --arg u "$UNDER" '{disk: "default", under: $u, parts: ["a_1_1_0"]}')"
ln -s "$F" "$DISKP/pin_link"
agent_expect 400 "symlink" "$U" "$TOK" pin "$(jq -cn --arg p "$PA" '{disk: "cold", under: "pin_link/", parts: [$p]}')"
rm "$DISKP/pin_link"
ok "refused whole with the reason: read-only, growing digits, not a pointer, a subfolder, missing; bad requests 400"

# ---- against the server: replaced, removed, no delete ------------------------------------------
keys() { (cd "$L/blobs" && find . -type f | sort); }
keys >"$T/keys.before"
refused() { curl -sS "$U/ferry/status" | jq .refused_deletes; }
no_outdated() { [ "$(chq "$U" "SELECT count() FROM system.parts WHERE NOT active AND table = 'e'")" = 0 ]; }
assert_eq 0 "$(refused)" "no delete refused yet"
chq "$U" "ALTER TABLE e REPLACE PARTITION ID '1-20261101' FROM e_empty
    SETTINGS allow_replace_partition_from_empty_source = 1" >/dev/null
wait_for 60 no_outdated || fail "the pinned part was not removed: $(outdated_parts "$U" e)"
assert_eq 0 "$(refused)" "the server tried to delete nothing"
keys >"$T/keys.after"
assert_eq "" "$(comm -23 "$T/keys.before" "$T/keys.after")" "no object gone"
ok "the pinned part replaced and removed by the server: no delete tried, no object gone"
chq "$U" "ALTER TABLE e REPLACE PARTITION ID '1-20261102' FROM e_empty
    SETTINGS allow_replace_partition_from_empty_source = 1" >/dev/null
wait_for 60 no_outdated || fail "the unpinned part was not removed: $(outdated_parts "$U" e)"
tried() { [ "$(refused)" -gt 0 ]; }
wait_for 30 tried || fail "an unpinned native part's removal tried no delete: the check above proves nothing"
ok "the control: an unpinned native part's removal tries to delete its objects ($(refused) refused)"
done_testing
