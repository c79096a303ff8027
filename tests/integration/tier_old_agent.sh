# Tiering through a node agent of API version 1 (tests/lib/agent_v1_proxy.py in front of the
# lab's agent: it refuses the many-part forms with 400 and reports no checksums): the flow falls
# back to one request per partition or part, verifies by reading rows (the upload was not checked
# against checksums.txt), reads the part records' checksums back from the store, and tiers the
# same data as with a current agent. Then the same server through the current agent: one request
# per step for the whole wave, verification by part hashes, no row read.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
lab_up "$L" --nodes 1
U=$(lab_url "$L" node1)
P=$(free_port)
bg_start "$T/proxy.log" python3 "$FERRY_SOURCE_DIR/tests/lib/agent_v1_proxy.py" --port "$P" --upstream "$U"
wait_for 30 grep -q listening "$T/proxy.log" || fail "the proxy did not start"
C=$T/old.conf
sed "s#^agent = .*#agent = http://127.0.0.1:$P#" "$L/ferry.conf" >"$C"
printf '\n[table "events"]\ndatabase = default\nlayout = shared\n' >>"$C"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
tier_create "$U"
for t in 1 2; do tier_fill "$U" $t 30000 6; done
WANT=$(tier_fp "$U")

expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 1 --json
R=$OUT
assert_eq 3 "$(jq .partitions_tiered <<<"$R")" "tenant 1: 3 old days tiered"
assert_eq rows "$(jq -r '[.jobs[].verified_by] | unique | join(",")' <<<"$R")" "verified by reading rows"
jq -e '.fingerprint_ms > 0' <<<"$R" >/dev/null || fail "no row fingerprint was read: $R"
[ "$(curl -sS "http://127.0.0.1:$P/__v1/status" | jq .refused)" -ge 3 ] || fail "the proxy refused nothing"
assert_eq "$WANT" "$(tier_fp "$U")" "data unchanged"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "objects = catalog records"
jq -e '[.parts[].objects[] | select(.checksum | test("^(cityhash128|sha256):[0-9a-f]{32,64}$") | not)] | length == 0' \
    <<<"$("$FERRY_BIN" catalog export --config "$C")" >/dev/null || fail "objects without checksums"
tier_leftovers "$L" node1
ok "an agent of API 1: one request per part, rows verified, checksums read back from the store"

# the same cluster through the current agent: the catalog (its shard record names the agent)
# copied with the agent's own URL
"$FERRY_BIN" catalog export --config "$C" | jq --arg u "$U" '.shards[0].agent = $u' >"$T/new.json"
sed -e "s#^agent = .*#agent = $U#" -e "s#^catalog = .*#catalog = sqlite:$T/new.db#" "$C" >"$T/new.conf"
C=$T/new.conf
"$FERRY_BIN" catalog import "$T/new.json" --config "$C" >/dev/null || fail "catalog import failed"
refused=$(curl -sS "http://127.0.0.1:$P/__v1/status" | jq .refused)
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
R=$OUT
assert_eq 3 "$(jq .partitions_tiered <<<"$R")" "tenant 2: 3 old days tiered"
assert_eq parts "$(jq -r '[.jobs[].verified_by] | unique | join(",")' <<<"$R")" "verified by part hashes"
assert_eq 0 "$(jq .fingerprint_ms <<<"$R")" "no row read to verify"
assert_eq 1 "$(jq .waves <<<"$R")" "one wave"
assert_eq "$refused" "$(curl -sS "http://127.0.0.1:$P/__v1/status" | jq .refused)" "the old agent was not asked"
[ "$(jq .agent_requests <<<"$R")" -le 10 ] || fail "more agent requests than steps: $(jq .agent_requests <<<"$R")"
assert_eq "$WANT" "$(tier_fp "$U")" "data unchanged"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "objects = catalog records"
tier_leftovers "$L" node1
tier_merges_on "$U" "$(chq "$U" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND disk_name = 'default' LIMIT 1")"
ok "the current agent: $(jq .agent_requests <<<"$R") agent requests and $(jq .statements <<<"$R") statements for 3 partitions, part hashes verified"

done_testing
