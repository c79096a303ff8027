# kill -9 at each step of the strictly read-only staging load ([cluster] clickhouse_object_access
# = read-only; lib/flow/staging_load.c): STAGE:detached (the load table DETACHed, nothing placed),
# STAGE:placed (the pointer folders in its data directory, the table still detached),
# STAGE:attached (loaded into the load table, not yet moved into staging) and STAGE:moved (in
# staging, the flow not told). Each point is hit by tiering (one new day each), by a move
# (node1 -> node2 -> node3 -> node1 -> node2) and, once, by a clone; a plain re-run (ferry tier,
# ferry move --resume all, ferry rebalance) finishes the job: every row exact, the load table
# attached and empty, nothing left in detached/ or shadow/, and the clickhouse role (reduced to
# GET, HEAD and LIST at the enforcing proxy) sent no PUT, POST or DELETE.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3policy.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

BUCKET=ferryrocrash
s3policy_start "$T" "$BUCKET" --role clickhouse=GET,HEAD,LIST || fail "policy proxy did not start"
L=$T/lab
lab_up "$L" --nodes 3 "${S3P_ARGS[@]}"
mv_conf "$L"
C=$L/mv.conf
sed -i 's/^clickhouse_version = /clickhouse_object_access = read-only\nclickhouse_version = /' "$C"
declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$L" "$n"); chq "${U[$n]}" "$MV_DDL" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
mv_ingest "${U[node1]}" blog 0 8 20000
before=$(mv_fp "${U[node1]}" blog 0)
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null || fail "inventory sync failed"
POINTS="STAGE:detached STAGE:placed STAGE:attached STAGE:moved"

load_attached() { chq "$1" "SELECT count() FROM system.tables WHERE name = 'events_ferry_staging_load'"; }
load_parts() { chq "$1" "SELECT count() FROM system.parts WHERE active AND rows > 0 AND table = 'events_ferry_staging_load'"; }
cold_days() { chq "$1" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' AND partition LIKE '%blog%'"; }
# where a crash at point $1 leaves the load table on the server at $2
check_left() {
    assert_eq 1 "$(chq "$2" "SELECT count() FROM system.tables WHERE name = 'events_ferry_staging'")" "$1: staging itself stays attached"
    case $1 in
    STAGE:detached|STAGE:placed) assert_eq 0 "$(load_attached "$2")" "$1: the load table left detached by the crash" ;;
    STAGE:attached) [ "$(load_parts "$2")" -gt 0 ] || fail "$1: the load table should hold the loaded parts" ;;
    STAGE:moved) assert_eq 0 "$(load_parts "$2")" "$1: the load table moved everything into staging" ;;
    esac
}
done_ok() { # the load table attached and empty on $2 after the resumed run ($1: what)
    assert_eq 1 "$(load_attached "$2")" "$1: the load table attached again"
    assert_eq 0 "$(load_parts "$2")" "$1: the load table empty"
}

# ---- tiering: one new day per crash point ---------------------------------------------------
i=0
for p in $POINTS; do
    i=$((i + 1))
    now=$(date -u -d "2026-11-0$((4 + i))T00:00:00Z" +%s)   # day 2026110$i becomes due
    expect_exit 137 env FERRY_TEST_NOW="$now" FERRY_TEST_CRASH_AFTER="$p" "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant blog
    check_left "$p" "${U[node1]}"
    expect_exit 0 env FERRY_TEST_NOW="$now" "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant blog --json
    assert_eq 1 "$(jq .jobs_resumed <<<"$OUT")" "$p: the tier job resumed"
    done_ok "$p" "${U[node1]}"
    assert_eq "$i" "$(cold_days "${U[node1]}")" "$p: $i days cold on node1"
    assert_eq "$before" "$(mv_fp "${U[node1]}" blog 0)" "$p: every row exact after the resumed tiering"
done
ok "tiering killed at each step of the read-only load, resumed: 4 days cold, rows exact"

# ---- moves: node1 -> node2 -> node3 -> node1 -> node2, one crash point each ---------------------------
from=node1
set -- node2 node3 node1 node2
for p in $POINTS; do
    to=$1; shift
    expect_exit 137 env FERRY_TEST_CRASH_AFTER="$p" "$FERRY_BIN" move --config "$C" --tenant blog --split 0 --to "$to" --grace 200
    check_left "$p" "${U[$to]}"
    expect_exit 0 "$FERRY_BIN" move --config "$C" --resume all --grace 200 --json
    assert_eq "$to" "$("$FERRY_BIN" route --config "$C" --tenant blog --split 0 --json | jq -r '.slices[0].shards | join(",")')" "$p: routed to $to"
    assert_eq "$before" "$(mv_fp "${U[$to]}" blog 0)" "$p: every row exact on $to"
    assert_eq 4 "$(cold_days "${U[$to]}")" "$p: 4 cold days on $to"
    assert_eq 0 "$(chq "${U[$from]}" "SELECT count() FROM events WHERE tenant = 'blog'")" "$p: $from holds nothing of blog"
    done_ok "$p" "${U[$to]}"
    from=$to
done
ok "moves killed at each step of the read-only load, resumed: rows exact on every target"

# ---- a clone killed with the pointer folders placed -------------------------------------------
"$FERRY_BIN" tenant set-rf blog 2 --config "$C" >/dev/null || fail "set-rf failed"
expect_exit 137 env FERRY_TEST_CRASH_AFTER=STAGE:placed "$FERRY_BIN" rebalance --config "$C" --grace 200
expect_exit 0 "$FERRY_BIN" rebalance --config "$C" --grace 200 --json
SH=$("$FERRY_BIN" route --config "$C" --tenant blog --json | jq -r '.slices[0].shards | join(" ")')
assert_eq 2 "$(wc -w <<<"$SH")" "blog on 2 replicas ($SH)"
for n in $SH; do
    assert_eq "$before" "$(mv_fp "${U[$n]}" blog 0)" "$n: every row exact after the resumed clone"
    done_ok "$n" "${U[$n]}"
done
ok "a clone killed with the folders placed and the load table detached, resumed: both replicas exact"

mv_no_residue "$L"
M=$(s3policy_methods clickhouse)
for m in PUT POST DELETE; do
    assert_eq 0 "$(s3policy_counts | jq --arg m "$m" '.methods.clickhouse[$m] // 0')" "clickhouse role: no $m request"
done
ok "no residue; the clickhouse role sent only reads through every crash ($M)"
done_testing
