# The node agent in a 2-node lab with the local object store: the tiering flow (freeze, upload,
# pointer part, ATTACH, REPLACE), hot and pointer parts sent agent to agent, a byte damaged in
# transit, bad input (token, table, partition, missing object, truncated pointer, path escapes,
# symlinks, full disk), and every operation run twice.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"

L=$T/lab
lab_up "$L" --nodes 2
check_local() { cmp -s "$L/blobs/$1" "$2"; }
agent_tier_flow "$L" check_local
U1=$AU1 U2=$AU2 T1=$AT1 T2=$AT2
CH2="$L/node2/data"

# ---- authentication ---------------------------------------------------------------------------
agent_expect 401 "bearer token" "$U1" wrong-token-0123456789 status
hdr=$(curl -sS --max-time 10 -D - -o /dev/null "$U1/agent/v1/status")
assert_contains "$hdr" "401" "no Authorization header"
assert_contains "$hdr" "WWW-Authenticate: Bearer" "challenge"
agent_expect 401 "bearer token" "$U1" "$T2" status   # node2's token is not node1's
agent_ok "$U1" "$T1" status
assert_eq "26.7.2.1" "$(jq -r .clickhouse_version <<<"$AG_BODY")" "status: version"
assert_eq 5 "$(jq -r .pointer_format <<<"$AG_BODY")" "status: pinned pointer format"
jq -e --arg d "$L/node1/data" '.roots | index($d)' <<<"$AG_BODY" >/dev/null || fail "data path not a root"
for f in "$L"/node*/node.log; do
    grep -q -e "$T1" -e "$T2" "$f" && fail "a token appears in $f"
done
ok "wrong or missing token: 401; tokens never logged"

# ---- parts ------------------------------------------------------------------------------------
agent_ok "$U1" "$T1" parts '{"database":"default","table":"e"}'
assert_eq 3 "$(jq '.parts | length' <<<"$AG_BODY")" "3 parts on node1"
assert_eq 100000 "$(jq '.parts[0].rows' <<<"$AG_BODY")" "rows"
[ "$(jq -r '.parts[0].hash_of_all_files | length' <<<"$AG_BODY")" = 32 ] || fail "no hash_of_all_files"
jq -e '.data_paths[] | select(.disk == "cold" and .remote)' <<<"$AG_BODY" >/dev/null || fail "no cold data path"
first=$AG_BODY
agent_ok "$U1" "$T1" parts '{"database":"default","table":"e"}'
assert_eq "$first" "$AG_BODY" "parts twice"
ok "parts: sizes, rows, hashes, data paths per disk"

# ---- a hot part sent from node1 to node2, agent to agent --------------------------------------
agent_ok "$U1" "$T1" freeze '{"database":"default","table":"e","partition_id":"0-20261101","name":"hot1"}'
HP=$(jq -r '.parts[0].name' <<<"$AG_BODY")
SEND="{\"database\":\"default\",\"table\":\"e\",\"freeze\":\"hot1\",\"part\":\"$HP\",\"target\":{\"url\":\"$U2\",\"token\":\"$T2\",\"database\":\"default\",\"table\":\"staging\"}}"
agent_ok "$U1" "$T1" send "$SEND"
assert_eq hot "$(jq -r .kind <<<"$AG_BODY")" "hot part sent"
assert_eq checksums.txt "$(jq -r .target.verified <<<"$AG_BODY")" "verified against checksums.txt"
assert_eq false "$(jq -r .target.existing <<<"$AG_BODY")" "placed"
agent_ok "$U1" "$T1" send "$SEND"
assert_eq true "$(jq -r .target.existing <<<"$AG_BODY")" "second send finds the same part"
chq "$U2" "ALTER TABLE staging ATTACH PARTITION ID '0-20261101'" >/dev/null
assert_eq "$(chq "$U1" "SELECT count(), sum(x), uniqExact(s) FROM e WHERE t = 0")" \
    "$(chq "$U2" "SELECT count(), sum(x), uniqExact(s) FROM staging WHERE t = 0")" "hot part data"
ok "hot part sent agent to agent, verified, attached on node2 (send twice: same result)"

# ---- a byte damaged in transit (test-only fault injection in a `ferry agent` daemon) -----------
printf 'daemon-token-0123456789abcdef\n' >"$T/dtoken"
DP=$(free_port)
FERRY_AGENT_TEST_CORRUPT_SEND=data.bin:100 bg_start "$T/daemon.log" "$FERRY_BIN" agent \
    --clickhouse "$U1" --data-path "$L/node1/data" --listen "127.0.0.1:$DP" \
    --token-file "$T/dtoken" --config "$L/ferry.conf"
D="http://127.0.0.1:$DP"
wait_for 20 grep -q "agent ready" "$T/daemon.log" || fail "daemon did not start: $(cat "$T/daemon.log")"
agent_expect 401 "bearer token" "$D" "$T1" status
agent_ok "$D" daemon-token-0123456789abcdef status
agent_expect 422 "does not match checksums.txt" "$D" daemon-token-0123456789abcdef send "$SEND"
assert_contains "$AG_BODY" "data.bin" "the damaged file is named"
agent_ok "$U2" "$T2" parts '{"database":"default","table":"staging"}'
detached2="$(jq -r '.data_paths[] | select(.disk == "default") | .path' <<<"$AG_BODY")detached"
[ -z "$(ls -A "$detached2")" ] || fail "something was left in $detached2: $(ls -A "$detached2")"
grep -q "flipped byte 100 of data.bin" "$T/daemon.log" || fail "injection not logged"
grep -q daemon-token "$T/daemon.log" && fail "daemon logged its token"
ok "a byte flipped in transit is caught by checksums.txt; nothing placed, no temp folder left"

# ---- a cold part's pointer files copied from node2 to node1 ------------------------------------
chq "$U1" "CREATE TABLE staging $AGENT_DDL" >/dev/null
agent_ok "$U2" "$T2" freeze '{"database":"default","table":"e","partition_id":"1-20261101","name":"cold1"}'
CP=$(jq -r '.parts[0].name' <<<"$AG_BODY")
CDIR=$(jq -r '.parts[0].path' <<<"$AG_BODY")
assert_eq pointer "$(jq -r '.parts[0].kind' <<<"$AG_BODY")" "frozen cold part is a pointer part"
jq -e '.parts[0].files[] | select(.name == "data.bin") | .objects[0].store_key' <<<"$AG_BODY" >/dev/null ||
    fail "frozen pointer listing lacks objects"
PSEND="{\"database\":\"default\",\"table\":\"e\",\"freeze\":\"cold1\",\"part\":\"$CP\",\"target\":{\"url\":\"$U1\",\"token\":\"$T1\",\"database\":\"default\",\"table\":\"staging\"}}"
agent_ok "$U2" "$T2" send "$PSEND"
assert_eq pointer "$(jq -r .kind <<<"$AG_BODY")" "pointer part sent"
assert_eq "$(ls "$CDIR" | wc -l)" "$(jq -r .target.objects_checked <<<"$AG_BODY")" "every object checked"
PPATH=$(jq -r .target.path <<<"$AG_BODY")
assert_eq 1 "$(sed -n 4p "$PPATH/data.bin")" "received pointer carries ref_count 1"
assert_eq 0 "$(sed -n 5p "$PPATH/data.bin")" "received pointer is not read-only"
agent_ok "$U2" "$T2" send "$PSEND"
assert_eq true "$(jq -r .target.existing <<<"$AG_BODY")" "second pointer send: same part"
chq "$U1" "ALTER TABLE staging ATTACH PARTITION ID '1-20261101'" >/dev/null
assert_eq "$(chq "$U1" "SELECT count(), sum(x), uniqExact(s) FROM e WHERE t = 1")" \
    "$(chq "$U1" "SELECT count(), sum(x), uniqExact(s) FROM staging")" "pointer part data on node1"
assert_eq cold "$(chq "$U1" "SELECT DISTINCT disk_name FROM system.parts WHERE table = 'staging' AND active")" "on cold"
ok "cold part copied as pointer files node2 -> node1, objects checked, attached"

# ---- a pointer part sent live, from the table's own folder (API 3: no freeze) ------------------
chq "$U1" "CREATE TABLE staging_live $AGENT_DDL" >/dev/null
LSEND="{\"database\":\"default\",\"table\":\"e\",\"live\":true,\"part\":\"$CP\",\"target\":{\"url\":\"$U1\",\"token\":\"$T1\",\"database\":\"default\",\"table\":\"staging_live\"}}"
shadows() { find "$CH2" -path '*/shadow/*' -maxdepth 4 2>/dev/null | sort; } # every freeze's folder
SHADOWS=$(shadows)
agent_ok "$U2" "$T2" send "$LSEND"
assert_eq pointer "$(jq -r .kind <<<"$AG_BODY")" "live pointer part sent"
assert_eq "$(ls "$CDIR" | wc -l)" "$(jq -r .target.objects_checked <<<"$AG_BODY")" "every object of the live part checked"
LPATH=$(jq -r .target.path <<<"$AG_BODY")
for f in "$CDIR"/*; do # the same objects as the frozen copy's; ref_count 1, not read-only
    assert_eq "$(sed -n '1,3p;6,$p' "$f")" "$(sed -n '1,3p;6,$p' "$LPATH/$(basename "$f")")" "live pointer file $(basename "$f") names the same objects"
done
assert_eq 1 "$(sed -n 4p "$LPATH/data.bin")" "live-sent pointer carries ref_count 1"
assert_eq "$SHADOWS" "$(shadows)" "a live send freezes nothing"
chq "$U1" "ALTER TABLE staging_live ATTACH PARTITION ID '1-20261101'" >/dev/null
assert_eq "$(chq "$U1" "SELECT count(), sum(x), uniqExact(s) FROM e WHERE t = 1")" \
    "$(chq "$U1" "SELECT count(), sum(x), uniqExact(s) FROM staging_live")" "live-sent part's data on node1"
assert_eq "$(chq "$U2" "SELECT hash_of_all_files FROM system.parts WHERE table = 'e' AND name = '$CP'")" \
    "$(chq "$U1" "SELECT hash_of_all_files FROM system.parts WHERE table = 'staging_live' AND active")" "live-sent part: the same hash_of_all_files"
# a hot part is never sent live (its files are the data; freeze it), a part not in the table is 404
HOTP=$(chq "$U1" "SELECT name FROM system.parts WHERE table = 'e' AND active AND disk_name = 'default' LIMIT 1")
[ -n "$HOTP" ] || fail "test setup: node1 has no hot part of e"
agent_expect 400 "not an object-storage disk" "$U1" "$T1" send "${LSEND/\"$CP\"/\"$HOTP\"}"
agent_expect 410 "not in this table" "$U2" "$T2" send "${LSEND/\"$CP\"/\"1-20261101_999_999_0\"}"
agent_expect 400 "live" "$U2" "$T2" send "${LSEND/\"live\":true/\"live\":\"yes\"}"
ok "a pointer part sent live from the table's folder: no FREEZE, the same objects, attached; hot parts (400) and absent ones (410) refused"

# ---- live pointer parts in a batch (API 5): one send, one receive, several parts --------------
chq "$U2" "CREATE TABLE bt $AGENT_DDL" >/dev/null
chq "$U2" "SYSTEM STOP MERGES bt" >/dev/null
for i in 1 2 3; do
    chq "$U2" "INSERT INTO bt SELECT 5, 20261101, number + $i * 1000, 'b$i' FROM numbers(1000)" >/dev/null
done
chq "$U2" "ALTER TABLE bt MOVE PARTITION ID '5-20261101' TO DISK 'cold'" >/dev/null
mapfile -t BP < <(chq "$U2" "SELECT name FROM system.parts WHERE table = 'bt' AND active ORDER BY name")
assert_eq 3 "${#BP[@]}" "three cold parts of bt on node2"
chq "$U1" "CREATE TABLE staging_bt $AGENT_DDL" >/dev/null
BTARGET="{\"url\":\"$U1\",\"token\":\"$T1\",\"database\":\"default\",\"table\":\"staging_bt\"}"
BSEND="{\"database\":\"default\",\"table\":\"bt\",\"live\":true,\"parts\":[\"${BP[0]}\",\"5-20261101_999_999_0\",\"${BP[1]}\",\"${BP[2]}\"],\"target\":$BTARGET}"
agent_ok "$U2" "$T2" send "$BSEND"
assert_eq "${BP[0]} ${BP[1]} ${BP[2]}" "$(jq -r '[.parts[].part] | join(" ")' <<<"$AG_BODY")" "batch: the parts sent"
assert_eq '["5-20261101_999_999_0"]' "$(jq -c .gone <<<"$AG_BODY")" "batch: a part not in the table is answered gone"
assert_eq 1 "$(jq '.targets | length' <<<"$AG_BODY")" "batch: one receive"
assert_eq 3 "$(jq '.targets[0].parts | length' <<<"$AG_BODY")" "batch: the receive placed three parts"
assert_eq "$(jq .files <<<"$AG_BODY")" "$(jq .targets[0].files <<<"$AG_BODY")" "batch: every file received"
assert_eq "$(jq .files <<<"$AG_BODY")" "$(jq .targets[0].objects_checked <<<"$AG_BODY")" "batch: every object checked"
for i in 0 1 2; do
    BPATH=$(jq -r ".targets[0].parts[$i].path" <<<"$AG_BODY")
    assert_eq "${BP[$i]}" "$(basename "$BPATH")" "batch: part $i placed under its name"
    assert_eq 1 "$(sed -n 4p "$BPATH/data.bin")" "batch: received pointer carries ref_count 1"
done
ls "$L/node1/data/disks/cold/store"/*/*/detached/ | grep -q tmp-ferry && fail "batch: temp folder left"
agent_ok "$U2" "$T2" send "$BSEND"
assert_eq "true true true" "$(jq -r '[.targets[0].parts[].existing] | map(tostring) | join(" ")' <<<"$AG_BODY")" "batch twice: the same parts"
chq "$U1" "ALTER TABLE staging_bt ATTACH PARTITION ID '5-20261101'" >/dev/null
assert_eq "$(chq "$U2" "SELECT count(), sum(x), groupArray(s) FROM (SELECT * FROM bt ORDER BY x)")" \
    "$(chq "$U1" "SELECT count(), sum(x), groupArray(s) FROM (SELECT * FROM staging_bt ORDER BY x)")" "batch: the data on node1"
assert_eq "$(chq "$U2" "SELECT groupArray(hash_of_all_files) FROM (SELECT hash_of_all_files FROM system.parts WHERE table = 'bt' AND active ORDER BY 1)")" \
    "$(chq "$U1" "SELECT groupArray(hash_of_all_files) FROM (SELECT hash_of_all_files FROM system.parts WHERE table = 'staging_bt' AND active ORDER BY 1)")" "batch: the same hash_of_all_files"
# every part gone: nothing sent, no receive
agent_ok "$U2" "$T2" send "{\"database\":\"default\",\"table\":\"bt\",\"live\":true,\"parts\":[\"5-20261101_998_998_0\"],\"target\":$BTARGET}"
assert_eq '0 1 0' "$(jq -r '"\(.parts | length) \(.gone | length) \(.targets | length)"' <<<"$AG_BODY")" "batch of gone parts: nothing sent"
# refused: not live, with "part", empty, twice the same part, a hot part, a part line outside a batch
agent_expect 400 'a batch) goes with' "$U2" "$T2" send "${BSEND/\"live\":true/\"live\":false}"
agent_expect 400 'a batch) goes with' "$U2" "$T2" send "${BSEND/\"live\":true/\"live\":true,\"part\":\"${BP[0]}\"}"
agent_expect 400 "array of 1 to 1024 part names" "$U2" "$T2" send "{\"database\":\"default\",\"table\":\"bt\",\"live\":true,\"parts\":[],\"target\":$BTARGET}"
agent_expect 400 "named twice" "$U2" "$T2" send "{\"database\":\"default\",\"table\":\"bt\",\"live\":true,\"parts\":[\"${BP[0]}\",\"${BP[0]}\"],\"target\":$BTARGET}"
agent_expect 400 "not a part name" "$U2" "$T2" send "{\"database\":\"default\",\"table\":\"bt\",\"live\":true,\"parts\":[\"../x\"],\"target\":$BTARGET}"
agent_expect 400 "not an object-storage disk" "$U1" "$T1" send "{\"database\":\"default\",\"table\":\"e\",\"live\":true,\"parts\":[\"$HOTP\"],\"target\":$BTARGET}"
printf 'ferry-part 1\nP %s\nE 0\n' "${BP[0]}" >"$T/pline.bin"
code=$(curl -sS -o "$T/pline.out" -w '%{http_code}' -H "Authorization: Bearer $T1" --data-binary @"$T/pline.bin" \
    "$U1/agent/v1/receive?database=default&table=staging_bt&part=${BP[0]}&kind=pointer")
assert_eq 422 "$code" "a part line in the stream of one part: $(cat "$T/pline.out")"
code=$(curl -sS -o "$T/pline.out" -w '%{http_code}' -H "Authorization: Bearer $T1" --data-binary @"$T/pline.bin" \
    "$U1/agent/v1/receive?database=default&table=staging&batch=1&kind=hot")
assert_eq 400 "$code" "a batch of hot parts: $(cat "$T/pline.out")"
ok "live pointer parts in a batch: one receive places them all (same hashes, ref_count 1); gone ones answered, twice the same; bad batches refused"

# ---- pointer parts that must be refused -------------------------------------------------------
# A copy of the frozen part (cp: new inodes; the shadow files are hard links of the live part).
CREL=${CDIR#"$CH2/disks/cold/shadow/cold1/"}
mkdir -p "$(dirname "$CH2/disks/cold/shadow/bad1/$CREL")"
cp -r "$CDIR" "$CH2/disks/cold/shadow/bad1/$CREL"
head -c 20 "$CDIR/data.bin" >"$CH2/disks/cold/shadow/bad1/$CREL/data.bin"
agent_expect 422 "pointer file data.bin" "$U2" "$T2" send "${PSEND/\"cold1\"/\"bad1\"}"
mkdir -p "$(dirname "$CH2/disks/cold/shadow/bad2/$CREL")"
cp -r "$CDIR" "$CH2/disks/cold/shadow/bad2/$CREL"
sed -i 's#/default/e/1-20261101/\(.*\)/data.bin#/default/e/1-20261101/\1/gone.bin#' \
    "$CH2/disks/cold/shadow/bad2/$CREL/data.bin"
grep -q gone.bin "$CH2/disks/cold/shadow/bad2/$CREL/data.bin" || fail "test setup: key not changed"
agent_expect 409 "missing" "$U2" "$T2" send "${PSEND/\"cold1\"/\"bad2\"}"
# the same through write-pointers: an object that is not in the store
agent_expect 409 "missing" "$U1" "$T1" write-pointers \
    "{\"database\":\"default\",\"table\":\"staging\",\"part\":\"1-20261101_9_9_0\",\"objects\":[{\"file\":\"data.bin\",\"key\":\"default/e/nope/data.bin\",\"size\":5}]}"
agent_ok "$U1" "$T1" parts '{"database":"default","table":"staging"}'
assert_eq 0 "$(jq '.detached | length' <<<"$AG_BODY")" "nothing placed on node1"
ls "$L/node1/data/disks/cold/store"/*/*/detached/ | grep -q tmp-ferry && fail "temp folder left"
ok "truncated pointer file (422) and missing objects (409) refused before ATTACH"

# ---- bad input --------------------------------------------------------------------------------
agent_expect 404 "does not exist" "$U1" "$T1" parts '{"database":"default","table":"nope"}'
agent_expect 404 "does not exist" "$U1" "$T1" freeze '{"database":"default","table":"nope","partition_id":"1-20261101","name":"x"}'
agent_expect 404 "has no parts" "$U1" "$T1" freeze '{"database":"default","table":"e","partition_id":"9-20991231","name":"x"}'
[ -e "$L/node1/data/shadow/x" ] && fail "a freeze of nothing left shadow/x"
agent_expect 404 "not in freeze" "$U1" "$T1" upload '{"database":"default","table":"e","freeze":"tier1","part":"7-20261101_1_1_0"}'
agent_expect 400 "JSON object" "$U1" "$T1" parts 'not json'
agent_expect 400 "required" "$U1" "$T1" parts '{}'
agent_expect 404 "no agent operation" "$U1" "$T1" frobnicate '{}'
agent_expect 405 "takes POST" "$U1" "$T1" parts
for name in '../x' '..' '.hidden' '/etc' 'a b' 'a/b' ''; do
    agent_expect 400 'name' "$U1" "$T1" freeze "{\"database\":\"default\",\"table\":\"e\",\"partition_id\":\"1-20261101\",\"name\":\"$name\"}"
done
for part in '../../etc' '/etc/passwd' '1-20261101_1_1' 'x_a_1_0' '..' 'a b_1_1_0'; do
    agent_call "$U1" "$T1" upload "{\"database\":\"default\",\"table\":\"e\",\"freeze\":\"tier1\",\"part\":\"$part\"}"
    assert_eq 400 "$AG_CODE" "upload part '$part' refused ($AG_BODY)"
    agent_call "$U2" "$T2" write-pointers "{\"database\":\"default\",\"table\":\"staging\",\"part\":\"$part\",\"objects\":[{\"file\":\"a\",\"key\":\"k\",\"size\":1}]}"
    assert_eq 400 "$AG_CODE" "write-pointers part '$part' refused"
done
agent_expect 400 "plain file name" "$U2" "$T2" write-pointers '{"database":"default","table":"staging","part":"1-20261101_5_5_0","objects":[{"file":"../../x","key":"k","size":1}]}'
agent_expect 400 "not allowed" "$U1" "$T1" remove-detached '{"database":"default","table":"e","part":".."}'
agent_expect 400 "not allowed" "$U1" "$T1" remove-freeze '{"name":"../shadow"}'
agent_expect 400 "relative path" "$U1" "$T1" pointers '{"under":"../.."}'
agent_expect 400 "relative path" "$U1" "$T1" pointers '{"under":"/etc"}'
# a call with a bad target is refused by the target, with its reason
agent_expect 404 "does not exist" "$U1" "$T1" send "${SEND/\"staging\"/\"nope\"}"
ok "unknown table/partition/part, bad JSON, odd and escaping names refused"

# symlinks out of the data directories
mkdir -p "$T/outside/${FLOW_DIR#"$L/node1/data/shadow/tier1/"}"
ln -s "$T/outside" "$L/node1/data/shadow/evil"
agent_expect 400 "outside the ClickHouse data directories" "$U1" "$T1" frozen '{"database":"default","table":"e","name":"evil"}'
chq "$U2" "CREATE TABLE evil $AGENT_DDL" >/dev/null
agent_ok "$U2" "$T2" parts '{"database":"default","table":"evil"}'
EVIL_COLD=$(jq -r '.data_paths[] | select(.remote) | .path' <<<"$AG_BODY")
rm -rf "${EVIL_COLD}detached"
ln -s "$T/outside" "${EVIL_COLD}detached"
agent_expect 400 "outside the ClickHouse data directories" "$U2" "$T2" write-pointers \
    "$(jq -c '.table = "evil"' <<<"$FLOW_WP")"
[ -z "$(find "$T/outside" -type f)" ] || fail "something was written outside: $(find "$T/outside")"
ok "symlinked shadow and detached folders pointing outside are refused"

# ---- a full disk: a 64 KiB tmpfs as the target's detached/ ------------------------------------
MNT=
if [ "$(id -u)" = 0 ]; then
    chq "$U2" "CREATE TABLE small $AGENT_DDL" >/dev/null
    agent_ok "$U2" "$T2" parts '{"database":"default","table":"small"}'
    MNT="$(jq -r '.data_paths[] | select(.disk == "default") | .path' <<<"$AG_BODY")detached"
    mkdir -p "$MNT"
    if mount -t tmpfs -o size=64k tmpfs "$MNT" 2>/dev/null; then
        at_exit '[ -n "$MNT" ] && umount "$MNT" 2>/dev/null'
        agent_expect 507 "No space left" "$U1" "$T1" send "${SEND/\"staging\"/\"small\"}"
        [ -z "$(ls -A "$MNT")" ] || fail "left on the full disk: $(ls -A "$MNT")"
        umount "$MNT"
        MNT=
        ok "full disk: 507, temporary folder removed"
    else
        ok "# SKIP full disk: mount -t tmpfs is not permitted here"
    fi
else
    ok "# SKIP full disk: needs root for mount -t tmpfs"
fi

# ---- removal and listing, each twice ----------------------------------------------------------
RD='{"database":"default","table":"staging","part":"1-20261101_2_2_0"}'
agent_ok "$U2" "$T2" write-pointers "$(jq -c '.part = "1-20261101_2_2_0"' <<<"$FLOW_WP")"
agent_ok "$U2" "$T2" remove-detached "$RD"
assert_eq true "$(jq -r .existed <<<"$AG_BODY")" "remove-detached removes"
agent_ok "$U2" "$T2" remove-detached "$RD"
assert_eq false "$(jq -r .existed <<<"$AG_BODY")" "remove-detached twice"
for f in $(jq -r '.[].key' <<<"$FLOW_OBJECTS"); do [ -f "$L/blobs/$f" ] || fail "object $f was removed"; done
ok "remove-detached: plain file removal, objects untouched (twice: same result)"

agent_ok "$U2" "$T2" pointers '{}'
PL=$AG_BODY
jq -e '.files[] | select(.objects[0].store_key | test("^default/e/1-20261101/"))' <<<"$PL" >/dev/null ||
    fail "pointers lists no file naming ferry's objects"
jq -e '.files[] | select(.path | startswith("shadow/cold1/"))' <<<"$PL" >/dev/null || fail "shadow not listed"
agent_ok "$U2" "$T2" pointers '{}'
assert_eq "$PL" "$AG_BODY" "pointers twice"
ok "pointers lists the cold disk's pointer files with their objects"

live=$(jq -r '.files[] | select(.path | test("^store/.*/'"$CP"'/data.bin$")) | .path' <<<"$PL" | head -1)
[ -n "$live" ] || fail "live pointer of $CP not found"
rc_before=$(sed -n 4p "$CH2/disks/cold/$live")
rm -rf "$CH2/disks/cold/shadow/bad1" "$CH2/disks/cold/shadow/bad2"
agent_ok "$U2" "$T2" remove-freeze '{"name":"cold1"}'
assert_eq true "$(jq -r .existed <<<"$AG_BODY")" "remove-freeze removes"
assert_eq '["default.e"]' "$(jq -c .unfrozen <<<"$AG_BODY")" "UNFREEZE for the object disk"
[ -e "$CH2/disks/cold/shadow/cold1" ] && fail "shadow/cold1 still there"
assert_eq "$((rc_before - 1))" "$(sed -n 4p "$CH2/disks/cold/$live")" "FREEZE's ref_count increment undone"
agent_ok "$U2" "$T2" remove-freeze '{"name":"cold1"}'
assert_eq false "$(jq -r .existed <<<"$AG_BODY")" "remove-freeze twice"
agent_ok "$U1" "$T1" remove-freeze '{"name":"tier1"}'
[ -e "$L/node1/data/shadow/tier1" ] && fail "shadow/tier1 still there"
assert_eq "300000" "$(chq "$U1" 'SELECT count() FROM e')" "node1 data intact"
assert_eq "$(chq "$U1" "SELECT count(), sum(x) FROM e WHERE t = 1")" \
    "$(chq "$U2" "SELECT count(), sum(x) FROM e WHERE t = 1")" "node2 still serves the partition"
ok "remove-freeze: shadow gone, ref_count restored, data intact (twice: same result)"

# The removed folders went through the disks' trash (lib/agent/trash.c): renamed there, then
# emptied by the agent's reaper; what a killed agent left there is emptied by the next agent
# once a request names the disk; the pointer walk never lists the trash.
trash_empty() { [ -d "$1" ] && [ -z "$(ls -A "$1")" ]; }
for tr in "$CH2/disks/cold/ferry_trash" "$L/node1/data/ferry_trash"; do
    wait_for 30 trash_empty "$tr" || fail "$tr not emptied: $(ls -A "$tr" 2>&1 | head -5)"
done
mkdir -p "$CH2/disks/cold/ferry_trash/left-by-a-killed-agent/sub"
echo x >"$CH2/disks/cold/ferry_trash/left-by-a-killed-agent/sub/f"
agent_ok "$U2" "$T2" pointers '{}'
jq -e '.files[] | select(.path | startswith("ferry_trash"))' <<<"$AG_BODY" >/dev/null &&
    fail "the pointer walk lists the trash"
wait_for 30 trash_empty "$CH2/disks/cold/ferry_trash" || fail "a trash left behind is not emptied"
ok "removals go through the disks' trash, which the agent empties (also what a killed agent left)"

# ---- many parts per request (API 2): each part answered on its own -----------------------------
agent_ok "$U1" "$T1" status
assert_eq 5 "$(jq .api <<<"$AG_BODY")" "status: API version 5"
FZ='{"database":"default","table":"e","partitions":[{"partition_id":"0-20261101","name":"many0"},
    {"partition_id":"2-20261101","name":"many2"},{"partition_id":"9-20261101","name":"many9"}]}'
agent_ok "$U1" "$T1" freeze "$FZ"
assert_eq 2 "$(jq '.parts | length' <<<"$AG_BODY")" "two partitions frozen by one request, a missing one freezes nothing"
assert_eq "many0,many2" "$(jq -r '[.parts[].freeze] | sort | join(",")' <<<"$AG_BODY")" "each under its own name"
P0=$(jq -r '.parts[] | select(.freeze == "many0") | .name' <<<"$AG_BODY")
P2=$(jq -r '.parts[] | select(.freeze == "many2") | .name' <<<"$AG_BODY")
[ -d "$L/node1/data/shadow/many0" ] && [ -d "$L/node1/data/shadow/many2" ] || fail "shadow folders missing"
FIRST=$(jq -c '.parts' <<<"$AG_BODY")
agent_ok "$U1" "$T1" freeze "$FZ"
assert_eq 1 "$(jq -r .frozen_now <<<"$AG_BODY")" "the same request again freezes only the empty partition again"
assert_eq "$FIRST" "$(jq -c '.parts' <<<"$AG_BODY")" "and lists the same parts"
UP="{\"database\":\"default\",\"table\":\"e\",\"parts\":[{\"freeze\":\"many0\",\"part\":\"$P0\"},
    {\"freeze\":\"many2\",\"part\":\"$P2\"},{\"freeze\":\"many2\",\"part\":\"2-20261101_99_99_0\"}]}"
agent_ok "$U1" "$T1" upload "$UP"
R=$AG_BODY
assert_eq "true,true,404" "$(jq -r '[.results[] | if has("status") then .status else .verified end] | map(tostring) | join(",")' <<<"$R")" "two parts uploaded and checked, the missing one 404"
assert_eq "$P0" "$(jq -r '.results[0].part' <<<"$R")" "answers in request order"
agent_expect 400 "parts[0].part" "$U1" "$T1" upload '{"database":"default","table":"e","parts":[{"freeze":"many0","part":"../x"}]}'
chq "$U2" "CREATE TABLE staging2 $AGENT_DDL" >/dev/null
WP=$(jq -c '{database: "default", table: "staging2", parts: ([.results[0:2][] | {part, objects: [.objects[] | {file, key, size}]}]
    + [{part: "2-20261101_98_98_0", objects: [{file: "count.txt", key: "default/e/none", size: 1}]}])}' <<<"$R")
agent_ok "$U2" "$T2" write-pointers "$WP"
assert_eq "false,false,409" "$(jq -r '[.results[] | if has("status") then .status else .existing end] | map(tostring) | join(",")' <<<"$AG_BODY")" "two pointer parts written, the one naming a missing object 409"
[ -e "$CH2/disks/cold/store" ] && [ -z "$(find "$CH2/disks/cold" -path '*detached/2-20261101_98_98_0*')" ] ||
    fail "the refused pointer part was written"
chq "$U2" "ALTER TABLE staging2 ATTACH PARTITION ID '0-20261101', ATTACH PARTITION ID '2-20261101'" >/dev/null
assert_eq "$(chq "$U1" "SELECT hash_of_all_files, rows FROM system.parts WHERE active AND table = 'e' AND partition_id IN ('0-20261101', '2-20261101') ORDER BY 1")" \
    "$(chq "$U2" "SELECT hash_of_all_files, rows FROM system.parts WHERE active AND table = 'staging2' ORDER BY 1")" \
    "the attached pointer parts have the hot parts' hash_of_all_files"
assert_eq "$(chq "$U1" "SELECT count(), sum(x) FROM e WHERE t IN (0, 2)")" \
    "$(chq "$U2" "SELECT count(), sum(x) FROM staging2")" "and their rows"
agent_ok "$U1" "$T1" remove-freeze '{"names":["many0","many2","many9"]}'
assert_eq "true,true,false" "$(jq -r '[.results[].existed] | map(tostring) | join(",")' <<<"$AG_BODY")" "remove-freeze of three names"
[ -e "$L/node1/data/shadow/many0" ] || [ -e "$L/node1/data/shadow/many2" ] && fail "shadow folders left"
ok "freeze, upload, write-pointers and remove-freeze of many parts per request; one bad part fails alone"

done_testing
