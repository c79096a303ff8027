# Shell helpers for node-agent tests (source after harness.sh and lab.sh).
#
#   agent_call URL TOKEN OP [JSON]   POST (GET without JSON) URL/agent/v1/OP; sets AG_CODE (HTTP
#                                    status) and AG_BODY (the answer)
#   agent_ok URL TOKEN OP [JSON]     same, failing the test unless the status is 200
#   agent_tier_flow LAB CHECK_FN     the tiering flow of docs/agent.md between node1 and node2 of
#                                    LAB; CHECK_FN KEY FILE must succeed when the object KEY holds
#                                    exactly the bytes of FILE

# The answer goes to a file of its own: calls run side by side (`comm <(...) <(...)` in
# sweep_inject.sh) once shared one and read each other's answers.
agent_call() {
    local url=$1 tok=$2 op=$3 body=${4:-} out
    out=$(mktemp "$T/agent_call.XXXXXX")
    local args=(-sS --max-time 120 -o "$out" -w '%{http_code}'
        -H "Authorization: Bearer $tok")
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
    AG_CODE=$(curl "${args[@]}" "$url/agent/v1/$op") || fail "curl failed for agent op $op"
    AG_BODY=$(cat "$out")
    rm -f "$out"
}

agent_ok() {
    agent_call "$@"
    [ "$AG_CODE" = 200 ] || fail "agent $3 on $1 gave HTTP $AG_CODE: $AG_BODY"
}

# agent_expect CODE SUBSTRING URL TOKEN OP [JSON]: the call must fail with CODE and a message
# containing SUBSTRING.
agent_expect() {
    local code=$1 sub=$2; shift 2
    agent_call "$@"
    [ "$AG_CODE" = "$code" ] || fail "agent $3: expected HTTP $code, got $AG_CODE: $AG_BODY"
    assert_contains "$AG_BODY" "$sub" "agent $3 answer"
}

AGENT_DDL="(t UInt32, d UInt32, x UInt64, s String) ENGINE = MergeTree PARTITION BY (t, d)
    ORDER BY x SETTINGS storage_policy = 'tiered'"

agent_tier_flow() {
    local lab=$1 check=$2
    AU1=$(lab_url "$lab" node1); AU2=$(lab_url "$lab" node2)
    AT1=$(cat "$lab/node1/agent.token"); AT2=$(cat "$lab/node2/agent.token")
    grep -q "agent = $AU1" "$lab/ferry.conf" || fail "ferry.conf lacks node1's agent"
    grep -q "agent_token_file = $lab/node1/agent.token" "$lab/ferry.conf" ||
        fail "ferry.conf lacks node1's agent token file"
    for u in "$AU1" "$AU2"; do chq "$u" "CREATE TABLE e $AGENT_DDL" >/dev/null; done
    chq "$AU2" "CREATE TABLE staging $AGENT_DDL" >/dev/null
    chq "$AU1" "INSERT INTO e SELECT number % 3, 20261101, number, toString(number % 1000)
                FROM numbers(300000)" >/dev/null

    # freeze, twice: the second finds the shadow copy and answers the same listing
    local fz='{"database":"default","table":"e","partition_id":"1-20261101","name":"tier1"}'
    agent_ok "$AU1" "$AT1" freeze "$fz"
    assert_eq false "$(jq -r .existing <<<"$AG_BODY")" "first freeze"
    local first; first=$(jq -c .parts <<<"$AG_BODY")
    agent_ok "$AU1" "$AT1" freeze "$fz"
    assert_eq true "$(jq -r .existing <<<"$AG_BODY")" "second freeze finds the shadow"
    assert_eq "$first" "$(jq -c .parts <<<"$AG_BODY")" "second freeze lists the same files"
    FLOW_PART=$(jq -r '.parts[0].name' <<<"$AG_BODY")
    FLOW_DIR=$(jq -r '.parts[0].path' <<<"$AG_BODY")
    assert_eq hot "$(jq -r '.parts[0].kind' <<<"$AG_BODY")" "frozen part is hot"
    [ -f "$FLOW_DIR/checksums.txt" ] || fail "frozen part has no checksums.txt at $FLOW_DIR"
    ok "freeze twice gives one listing ($FLOW_PART, $(jq '.parts[0].files | length' <<<"$AG_BODY") files)"

    # upload, twice: the second uploads nothing and names the same objects
    local up="{\"database\":\"default\",\"table\":\"e\",\"freeze\":\"tier1\",\"part\":\"$FLOW_PART\"}"
    agent_ok "$AU1" "$AT1" upload "$up"
    local objects; objects=$(jq -c '[.objects[] | {file, key, size}]' <<<"$AG_BODY")
    local nfiles; nfiles=$(ls "$FLOW_DIR" | wc -l)
    assert_eq "$nfiles" "$(jq -r .uploaded <<<"$AG_BODY")" "every frozen file uploaded"
    agent_ok "$AU1" "$AT1" upload "$up"
    assert_eq 0 "$(jq -r .uploaded <<<"$AG_BODY")" "re-upload uploads nothing"
    assert_eq "$nfiles" "$(jq -r .skipped <<<"$AG_BODY")" "re-upload skips every file"
    assert_eq "$objects" "$(jq -c '[.objects[] | {file, key, size}]' <<<"$AG_BODY")" "same objects"
    local f key
    for f in $(ls "$FLOW_DIR"); do
        key=$(jq -r --arg f "$f" '.[] | select(.file == $f) | .key' <<<"$objects")
        case "$key" in *"default/e/1-20261101/tier1/$FLOW_PART/$f") ;; *) fail "unexpected key $key" ;; esac
        "$check" "$key" "$FLOW_DIR/$f" || fail "object $key differs from the frozen $f"
    done
    ok "objects equal the frozen files byte for byte, under stable keys"

    # every file checksums.txt lists was hashed on the way and matched it
    assert_eq true "$(jq -r .verified <<<"$AG_BODY")" "upload checked against checksums.txt"
    assert_eq "$(cat "$FLOW_DIR/count.txt")" "$(jq -r .rows <<<"$AG_BODY")" "rows from count.txt"
    jq -e '.objects[] | select(.file == "data.bin" or .file == "primary.cidx") | .file_hash | test("^[0-9a-f]{32}$")' <<<"$AG_BODY" >/dev/null ||
        fail "no file_hash for a listed file: $AG_BODY"
    jq -e '.objects[] | select(.file == "columns.txt") | .sha256 | test("^[0-9a-f]{64}$")' <<<"$AG_BODY" >/dev/null ||
        fail "no sha256 for a small file: $AG_BODY"

    # other bytes at an existing key (same size): the upload fails, the object is not replaced.
    # columns.txt is not listed in checksums.txt, so only the object store comparison sees the
    # difference. The frozen file is a hard link of the live part's: its bytes are put back.
    local cf="$FLOW_DIR/columns.txt" ckey
    ckey=$(jq -r '.[] | select(.file == "columns.txt") | .key' <<<"$objects")
    cp "$cf" "$T/columns.txt.orig"
    printf 'X' | dd of="$cf" bs=1 seek=0 conv=notrunc status=none
    agent_call "$AU1" "$AT1" upload "$up"
    dd if="$T/columns.txt.orig" of="$cf" conv=notrunc status=none
    assert_eq 409 "$AG_CODE" "upload over other bytes: $AG_BODY"
    assert_contains "$AG_BODY" "never replaces" "the error says why"
    "$check" "$ckey" "$T/columns.txt.orig" || fail "the object $ckey was replaced"
    agent_ok "$AU1" "$AT1" upload "$up"
    assert_eq 0 "$(jq -r .uploaded <<<"$AG_BODY")" "the same bytes again: nothing uploaded"
    ok "an existing object with other bytes is never replaced (409); the same bytes succeed"

    # a listed file whose bytes no longer match checksums.txt (a damaged frozen part): 422
    # before the object store is asked, and nothing is replaced
    cf="$FLOW_DIR/count.txt"
    ckey=$(jq -r '.[] | select(.file == "count.txt") | .key' <<<"$objects")
    cp "$cf" "$T/count.txt.orig"
    printf 'X' | dd of="$cf" bs=1 seek=0 conv=notrunc status=none
    agent_call "$AU1" "$AT1" upload "$up"
    dd if="$T/count.txt.orig" of="$cf" conv=notrunc status=none
    assert_eq 422 "$AG_CODE" "damaged frozen file: $AG_BODY"
    assert_contains "$AG_BODY" "count.txt does not match its checksums.txt" "the error names the file"
    "$check" "$ckey" "$T/count.txt.orig" || fail "the object $ckey was replaced"
    ok "a frozen file that does not match checksums.txt is refused (422), nothing replaced"

    # pointer part into node2's staging detached/, twice
    FLOW_OBJECTS=$objects
    local wp; wp=$(jq -c --arg p "$FLOW_PART" \
        '{database: "default", table: "staging", part: $p, objects: .}' <<<"$objects")
    FLOW_WP=$wp
    agent_ok "$AU2" "$AT2" write-pointers "$wp"
    assert_eq false "$(jq -r .existing <<<"$AG_BODY")" "pointer part written"
    assert_eq cold "$(jq -r .disk <<<"$AG_BODY")" "pointer part on the cold disk"
    local ppath; ppath=$(jq -r .path <<<"$AG_BODY")
    assert_eq 5 "$(head -1 "$ppath/count.txt")" "pointer format 5"
    assert_eq 1 "$(sed -n 4p "$ppath/count.txt")" "ref_count 1 in a written pointer"
    agent_ok "$AU2" "$AT2" write-pointers "$wp"
    assert_eq true "$(jq -r .existing <<<"$AG_BODY")" "second write finds the same part"
    ok "pointer part written into staging detached/ (idempotent)"

    chq "$AU2" "ALTER TABLE staging ATTACH PARTITION ID '1-20261101'" >/dev/null
    chq "$AU2" "ALTER TABLE e REPLACE PARTITION ID '1-20261101' FROM staging" >/dev/null
    local want got
    want=$(chq "$AU1" "SELECT count(), sum(x), uniqExact(s), uniqExact(x % 777) FROM e WHERE t = 1")
    got=$(chq "$AU2" "SELECT count(), sum(x), uniqExact(s), uniqExact(x % 777) FROM e WHERE t = 1")
    assert_eq "$want" "$got" "node2 serves the partition like node1"
    assert_eq "100000" "$(cut -f1 <<<"$got")" "row count"
    assert_eq cold "$(chq "$AU2" "SELECT DISTINCT disk_name FROM system.parts WHERE table = 'e' AND active AND partition_id = '1-20261101'")" "served from the cold disk"
    ok "ATTACH + REPLACE PARTITION on node2: count, sum and distinct counts match node1"
}
