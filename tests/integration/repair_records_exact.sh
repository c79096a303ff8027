# A repair that changes a replica makes the part records name it for exactly the pointer parts it
# holds (found by the chaos soak: one catalog_only drift entry on node2 after the settle phase's
# repair, "part records updated ... like=node3 to=node2"). Replicas get the same inserts, so a
# part of node1 that ferry tiered can be byte-identical to a hot part node2 wrote itself (the
# same hash_of_all_files): the sync counts it as held and copies only what node2 lacks, and the
# records must not name node2 for the tiered part's objects, which no pointer file of node2
# references. The records follow node2's own pointer files (lib/flow/replica.c,
# mirror_records).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_acme "$L" --stop-merges
mv_ingest "$U1" acme 0 1 4000 # 2026-11-01 on both replicas, the same insert
mv_ingest "$U2" acme 0 1 4000
hashes() { chq "$1" "SELECT groupArray(hash_of_all_files) FROM (SELECT hash_of_all_files FROM system.parts WHERE active AND table = 'events' ORDER BY 1)"; }
assert_eq "$(hashes "$U1")" "$(hashes "$U2")" "the replicas' parts are byte-identical"
sweep() { mv_sweep_summary "$C"; } # "complete drift dangling", the drift to $T/drift.json
# node1 alone tiers the day: its part goes cold (pointer files ferry wrote), node2's stays hot
"$FERRY_BIN" tier --config "$C" --older-than 3d --server node1 --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "tier: $(tail -3 "$T/tier.err")"
assert_eq "cold default" "$(chq "$U1" "SELECT disk_name FROM system.parts WHERE active AND table = 'events'") $(chq "$U2" "SELECT disk_name FROM system.parts WHERE active AND table = 'events'")" "node1's part is cold, node2's hot"
assert_eq "$(hashes "$U1")" "$(hashes "$U2")" "the tiered part has the hot part's hash"
assert_eq "true 0 0" "$(sweep)" "the sweep is clean before the repair: $(cat "$T/drift.json")"
# a late write node2 missed: the repair copies that part alone to node2
chq "$U1" "INSERT INTO events SELECT 'acme', 20261101, 0, number, number * 3 FROM numbers(500)" >/dev/null
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "acme equal on both replicas"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" "node2 holds no pointer part"
assert_eq "true 0 0" "$(sweep)" "the sweep after the repair: complete, no drift, no dangling: $(cat "$T/drift.json")"
assert_eq node1 "$(sqlite3 "$L/catalog.db" "SELECT DISTINCT json_extract(doc, '\$.servers') FROM records WHERE parent LIKE 'events%' OR json_extract(doc, '\$.table') = 'events'" | grep . | sort -u | paste -sd' ')" "the tiered part's record names node1 alone"
ok "a repair that copied a late part to node2: the records name node2 for no object it does not reference"
done_testing
