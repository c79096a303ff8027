# The node agent's limits and refusals on a 1-node lab:
#  - remove-detached and remove-freeze refuse a symlink where ClickHouse makes a directory (they
#    followed it and removed the target, a live part's folder or anything under the data path)
#  - a hot receive is bounded: checksums.txt at most 16 MiB, a metadata file checksums.txt does
#    not list at most 16 MiB, all of them together at most 64 MiB beyond what checksums.txt lists
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"

L=$T/lab
lab_up "$L" --nodes 1
U=$(lab_url "$L" node1); TOK=$(cat "$L/node1/agent.token")
chq "$U" "CREATE TABLE e $AGENT_DDL" >/dev/null
chq "$U" "INSERT INTO e SELECT 1, 20261101, number, toString(number) FROM numbers(1000)" >/dev/null
TD=$(chq "$U" "SELECT arrayJoin(data_paths) FROM system.tables WHERE name = 'e'" | grep -v disks/cold)
DATA=$L/node1/data
[ -d "$TD" ] || fail "table folder $TD"

# ---- symlinks ---------------------------------------------------------------------------------
mkdir -p "$TD/detached/keepme"
echo canary >"$TD/detached/keepme/file"
ln -s "$TD/detached/keepme" "$TD/detached/1-20261101_9_9_0"
agent_expect 400 "symlink" "$U" "$TOK" remove-detached \
    '{"database":"default","table":"e","part":"1-20261101_9_9_0"}'
[ -f "$TD/detached/keepme/file" ] || fail "remove-detached removed the symlink's target"
rm "$TD/detached/1-20261101_9_9_0"
# the live part's folder through a link: the same refusal
PART=$(chq "$U" "SELECT name FROM system.parts WHERE table = 'e' AND active LIMIT 1")
ln -s "$TD$PART" "$TD/detached/1-20261101_8_8_0"
agent_expect 400 "symlink" "$U" "$TOK" remove-detached \
    '{"database":"default","table":"e","part":"1-20261101_8_8_0"}'
[ -d "$TD$PART" ] || fail "remove-detached removed a live part through a symlink"
rm "$TD/detached/1-20261101_8_8_0"
mkdir -p "$DATA/canary_dir" "$DATA/shadow"
echo canary >"$DATA/canary_dir/file"
ln -s "$DATA/canary_dir" "$DATA/shadow/evil"
agent_expect 400 "symlink" "$U" "$TOK" remove-freeze '{"name":"evil"}'
[ -f "$DATA/canary_dir/file" ] || fail "remove-freeze removed the symlink's target"
rm "$DATA/shadow/evil"
assert_eq 1000 "$(chq "$U" "SELECT count() FROM e")" "rows"
ok "remove-detached and remove-freeze refuse symlinks; their targets and the live part stay"

# ---- bounded receives -------------------------------------------------------------------------
STREAM=$FERRY_BUILD_DIR/tests/tools/part_stream
[ -x "$STREAM" ] || fail "$STREAM not built"
agent_ok "$U" "$TOK" freeze '{"database":"default","table":"e","partition_id":"1-20261101","name":"hz"}'
FDIR=$(jq -r '.parts[0].path' <<<"$AG_BODY")
[ -f "$FDIR/checksums.txt" ] || fail "frozen part at $FDIR"
receive() { # receive PART NAME=FILE...: sends the stream; sets AG_CODE and AG_BODY
    local part=$1; shift
    "$STREAM" "$@" >"$T/stream"
    AG_CODE=$(curl -sS --max-time 120 -o "$T/recv.body" -w '%{http_code}' -H "Authorization: Bearer $TOK" \
        --data-binary @"$T/stream" "$U/agent/v1/receive?database=default&table=e&part=$part&kind=hot")
    AG_BODY=$(cat "$T/recv.body")
}
head -c $((17 << 20)) /dev/urandom >"$T/big17"
head -c $((15 << 20)) /dev/urandom >"$T/big15"
receive 1-20261101_20_20_0 checksums.txt="$T/big17"
assert_eq 422 "$AG_CODE" "a 17 MiB checksums.txt: $AG_BODY"
assert_contains "$AG_BODY" "checksums.txt: 17825792 bytes is more than" "the error says why"
receive 1-20261101_21_21_0 checksums.txt="$FDIR/checksums.txt" columns.txt="$T/big17"
assert_eq 422 "$AG_CODE" "a 17 MiB columns.txt: $AG_BODY"
assert_contains "$AG_BODY" "not listed in checksums.txt may have" "the error says why"
receive 1-20261101_22_22_0 checksums.txt="$FDIR/checksums.txt" columns.txt="$T/big15" \
    default_compression_codec.txt="$T/big15" metadata_version.txt="$T/big15" \
    columns_substreams.txt="$T/big15" invalidated_system_columns.txt="$T/big15"
assert_eq 422 "$AG_CODE" "75 MiB of unlisted files: $AG_BODY"
assert_contains "$AG_BODY" "larger than" "the error says why"
for p in 20 21 22; do
    [ ! -e "$TD/detached/1-20261101_${p}_${p}_0" ] || fail "a refused part was placed"
done
# a real part still goes through
args=()
for f in "$FDIR"/*; do args+=("$(basename "$f")=$f"); done
receive 1-20261101_23_23_0 "${args[@]}"
assert_eq 200 "$AG_CODE" "the frozen part, sent whole: $AG_BODY"
[ -f "$TD/detached/1-20261101_23_23_0/checksums.txt" ] || fail "the received part is not in detached/"
ok "receive: a 17 MiB checksums.txt, a 17 MiB unlisted file and 75 MiB of unlisted files refused; a real part placed"

done_testing
