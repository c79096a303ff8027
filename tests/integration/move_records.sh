# The catalog's part records follow the cold parts when slices change servers: after a move, a
# clone (rf 1 -> 2) and a replica drop (rf 2 -> 1), the records name exactly the servers whose
# pointer files reference their objects, so `ferry sweep` finds no drift (it found every moved
# cold part twice before: catalog_only on the old server, server_only on the new one), and every
# move's job record ends DONE (a finished move once left it at SWITCH, and the sweep then refused
# to delete anything: found by the chaos soak).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1)
mv_ingest "$U1" acme 0 3 20000
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "tier failed: $(tail -3 "$T/tier.err")"
assert_eq 3 "$(jq .partitions_tiered "$T/tier.json")" "3 partitions tiered by ferry"

servers() { # the distinct servers lists of acme's part records
    "$FERRY_BIN" catalog export --config "$C" | jq -r '[.parts[]?.servers] | unique | join(" ")'
}
sweep_clean() { # what: the sweep is complete and finds no drift
    expect_exit 0 "$FERRY_BIN" sweep --config "$C" --json
    assert_eq "true 0 0" "$(jq -r '"\(.complete) \(.drift | length) \(.dangling | length)"' <<<"$OUT")" "sweep clean $1"
    # a finished move leaves no job record that looks in flight, so the sweep may delete
    assert_eq "" "$("$FERRY_BIN" catalog export --config "$C" | jq -r '.jobs[]? | select(.kind == "move" and .state != "DONE") | "\(.id) \(.state)"')" "move job records DONE $1"
    expect_exit 0 "$FERRY_BIN" sweep --config "$C" --json --delete-orphans --min-age 1d
    assert_eq false "$(jq .deletion_skipped <<<"$OUT")" "sweep deletion not skipped $1: $(jq -c .problems <<<"$OUT")"
}
assert_eq node1 "$(servers)" "records name node1 after tiering"
sweep_clean "after tiering"

"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200 >/dev/null 2>"$T/mv.err" ||
    fail "move failed: $(tail -3 "$T/mv.err")"
assert_contains "$(cat "$T/mv.err")" "part records updated" "the move updated the records"
assert_eq node2 "$(servers)" "records name node2 after the move"
sweep_clean "after the move"
ok "move: the records follow the slice (node1 -> node2), no drift"

"$FERRY_BIN" tenant set-rf acme 2 --config "$C" >/dev/null || fail "set-rf 2 failed"
"$FERRY_BIN" rebalance --config "$C" --grace 200 --json >"$T/rb.json" 2>"$T/rb.err" ||
    fail "rebalance (clone) failed: $(tail -3 "$T/rb.err")"
assert_eq "clone DONE" "$(jq -r 'select(.event == "move") | "\(.kind // "clone") \(.state)"' "$T/rb.json" | head -1)" "clone done"
assert_eq "node1,node2" "$("$FERRY_BIN" catalog export --config "$C" | jq -r '[.parts[]?.servers | split(",") | sort | join(",")] | unique | join(" ")')" "records name both replicas"
sweep_clean "after the clone"
ok "clone: the records name both replicas, no drift"

"$FERRY_BIN" tenant set-rf acme 1 --config "$C" >/dev/null || fail "set-rf 1 failed"
"$FERRY_BIN" rebalance --config "$C" --grace 200 --json >"$T/rb2.json" 2>"$T/rb2.err" ||
    fail "rebalance (drop) failed: $(tail -3 "$T/rb2.err")"
left=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')
[ "$left" = node1 ] || [ "$left" = node2 ] || fail "one replica expected, route says '$left'"
assert_eq "$left" "$(servers)" "records name the replica left"
sweep_clean "after the drop"
ok "drop: the records name the replica left ($left), no drift"
done_testing
