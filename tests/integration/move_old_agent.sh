# A move whose source agent is of API version 1 (tests/lib/agent_v1_proxy.py in front of node1's
# agent: status says api 1, a send "live" is refused with 400 as an agent before version 3 would):
# the mover freezes the cold partitions too and sends them from the freeze, never asks for a live
# send, never pins (API 4: the cold days ClickHouse moved itself are detached), and the slice
# arrives exact (docs/moves.md, "A copy round"; move_blog.sh and cold_cache.sh check the live
# sends of a current agent). Moved back, the old agent is the target: the live parts come one
# per request, never as a batch (API 5).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
lab_up "$L" --nodes 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
for u in "$U1" "$U2"; do chq "$u" "$MV_DDL" >/dev/null; done
P=$(free_port)
bg_start "$T/proxy.log" python3 "$FERRY_SOURCE_DIR/tests/lib/agent_v1_proxy.py" --port "$P" --upstream "$U1"
wait_for 30 grep -q listening "$T/proxy.log" || fail "the proxy did not start: $(cat "$T/proxy.log")"
mv_conf "$L"
C=$L/mv.conf
# the catalog learns node1's agent URL from the config at init
sed -i "/^\[shard \"node1\"\]/,/^\[/ s|^agent = .*|agent = http://127.0.0.1:$P|" "$C"
grep -q "agent = http://127.0.0.1:$P" "$C" || fail "config not rewritten: $(cat "$C")"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
mv_ingest "$U1" acme 0 4 20000
for d in 1 2; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$U1" acme 0)
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null
ok "lab: acme over 4 days on node1, 2 of them cold; node1's agent behind an API 1 proxy"

"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 0 --json >"$T/move.json" 2>"$T/move.err" ||
    fail "move failed: $(tail -5 "$T/move.err")"
R=$(jq -c 'select(.event == "move")' "$T/move.json")
assert_eq DONE "$(jq -r .state <<<"$R")" "move done"
[ "$(jq .cold_parts <<<"$R")" -ge 2 ] || fail "the cold days were not copied as cold parts: $R"
assert_eq 0 "$(jq .parts_sent_live <<<"$R")" "no part sent live through an agent of API 1"
[ "$(jq .freezes <<<"$R")" -ge 1 ] || fail "nothing frozen: $R"
V1=$(curl -sS "http://127.0.0.1:$P/__v1/status")
[ "$(jq .forwarded <<<"$V1")" -gt 0 ] || fail "the mover did not go through the proxy: $V1"
assert_eq 0 "$(jq '.refused_by_op.send // 0' <<<"$V1")" "the mover never asked the old agent for a live send"
# ClickHouse's own cold parts cannot be pinned by an agent below API 4: detached, never pinned
assert_contains "$(cat "$T/move.err")" "by_replace=2 to_detach=2" "the 2 hot days replaced, the 2 native cold ones detached"
case "$(cat "$T/move.err")" in *"cold parts pinned"*) fail "a pin through an agent of API 1" ;; esac
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme exact on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "nothing of acme left on node1"
mv_no_residue "$L"
ok "through an agent of API 1 the cold partitions are frozen and sent from the freeze; rows exact, no residue"

# back to node1: node2's agent (current) sends the cold parts live, but node1's (API 1 behind the
# proxy) takes no batch of parts: the mover asks both and sends one part per request
V1=$(curl -sS "http://127.0.0.1:$P/__v1/status")
recv0=$(jq '.forwarded_by_op.receive // 0' <<<"$V1")
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node1 --grace 0 --json >"$T/back.json" 2>"$T/back.err" ||
    fail "move back failed: $(tail -5 "$T/back.err")"
R=$(jq -c 'select(.event == "move")' "$T/back.json")
assert_eq DONE "$(jq -r .state <<<"$R")" "move back done"
live=$(jq .parts_sent_live <<<"$R")
[ "$live" -ge 2 ] || fail "the cold parts did not go live from node2's agent: $R"
V1=$(curl -sS "http://127.0.0.1:$P/__v1/status")
assert_eq 0 "$(jq '.refused_by_op.receive // 0' <<<"$V1")" "no batch sent to the agent of API 1"
[ "$(( $(jq '.forwarded_by_op.receive // 0' <<<"$V1") - recv0 ))" -ge "$live" ] ||
    fail "fewer receives than live parts through the proxy: $V1 ($live live)"
assert_eq "$want" "$(mv_fp "$U1" acme 0)" "acme exact on node1 again"
mv_no_residue "$L"
ok "to an agent of API 1 the live pointer parts go one per request (no batch); rows exact, no residue"

# the old agent refuses a live send as its version did: 400, "freeze" required
TOK=$(cat "$L/node1/agent.token")
code=$(curl -sS -o "$T/live.out" -w '%{http_code}' -H "Authorization: Bearer $TOK" \
    "http://127.0.0.1:$P/agent/v1/send" -H 'Content-Type: application/json' \
    --data '{"database":"default","table":"events","live":true,"part":"x_1_1_0","target":{}}')
assert_eq 400 "$code" "a live send to the API 1 proxy"
assert_contains "$(jq -r .error "$T/live.out")" '"freeze" (a non-empty string) is required' "it names the field an old agent requires"
ok "an agent of API 1 refuses a live send with 400 (the mover never sends one to it)"
