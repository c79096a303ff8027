# A rolling ClickHouse upgrade under ferry (docs/operations.md, "Upgrading ClickHouse"): a
# 3-node lab on ClickHouse 26.5 (libchdb 26.5.3, no streaming-insert API: ferry-node spools
# INSERT bodies) takes rows through the router in TSV, JSONEachRow and RowBinary (Native and a
# bad body straight to a node), tiers the old days and moves a slice; then the nodes are
# upgraded to 26.7 one at a time (stopped and started on the same data directory) while a
# reader keeps asking the router: every answer it gets is exact. In the mixed cluster cold
# slices move 26.5 -> 26.7 and 26.7 -> 26.5 (pointer files written by each version read by the
# other: counts, sums and per-partition fingerprints unchanged), `ferry doctor` names each
# server's version and the pointer formats it reads, and tiering on a server not at the pinned
# version is refused with a message saying why.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

[ -s "$FERRY_CACHE/chdb-26.5.3/libchdb.so" ] ||
    fail "ClickHouse 26.5 is not installed: run 'scripts/setup.sh --chdb 26.5' (make test's set-up fetches it)"

# versions the lab does not know, or has not fetched, are refused with what to do
expect_exit 2 "$FERRY_BIN" lab up --dir "$T/bad" --nodes 1 --version 25.3
assert_contains "$ERR" "--version must be 26.7 or 26.5" "an unknown version"
mkdir -p "$T/nocache"
expect_exit 1 env FERRY_CACHE="$T/nocache" "$FERRY_BIN" lab up --dir "$T/bad" --nodes 1 --version 26.5
assert_contains "$ERR" "scripts/setup.sh --chdb 26.5" "a version not fetched names the command that fetches it"
ok "lab up --version: unknown and missing versions refused"

L=$T/lab
lab_up "$L" --nodes 3 --version 26.5
expect_exit 2 "$FERRY_BIN" lab restart-node --dir "$L" --node node9 --version 26.7
assert_contains "$ERR" "has no node 'node9'" "restart-node of a node the lab does not have"
expect_exit 2 "$FERRY_BIN" lab restart-node --dir "$L" --version 26.7
versions() { # "NAME:CLICKHOUSE:INSERT_MODE ..." of every node
    "$FERRY_BIN" lab status --dir "$L" --json |
        jq -r '[.nodes[] | "\(.name):\(.clickhouse | split(".")[0:2] | join(".")):\(.insert_mode)"] | join(" ")'
}
assert_eq "node1:26.5:spooled node2:26.5:spooled node3:26.5:spooled" "$(versions)" "three 26.5 nodes, inserts spooled"
C=$L/ferry.conf
grep -q '^clickhouse_version = 26.5$' "$C" || fail "the lab's ferry.conf does not pin 26.5: $(grep clickhouse_version "$C")"
"$FERRY_BIN" lab status --dir "$L" >"$T/status.txt"
assert_contains "$(cat "$T/status.txt")" "26.5.1.1" "lab status shows the version"
ok "a 26.5 lab: $(versions)"

declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$L" "$n"); done
events_conf "$C" "passthrough = ${U[node1]}" "shard_timeout = 20s" "publish_wait = 60s"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
# events_table's table, and ClickHouse's cleanup of replaced parts within seconds: 26.5 writes
# no empty covering part on REPLACE PARTITION (26.7 does), so a 26.5 server stopped while the
# replaced parts are still on disk (old_parts_lifetime, 8 min by default) loads them again as
# active, doubling the partition (docs/operations.md, "Upgrading ClickHouse", step 3)
for n in node1 node2 node3; do
    chq "${U[$n]}" "CREATE TABLE events (tenant String, day UInt32, split UInt16, uid UInt64, id UInt64, v String)
     ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY id
     SETTINGS non_replicated_deduplication_window = 10000, storage_policy = 'tiered',
     old_parts_lifetime = 1, cleanup_delay_period = 1, cleanup_delay_period_random_add = 0,
     max_cleanup_delay_period = 1" >/dev/null
done
"$FERRY_BIN" tenant add acme beta gamma --config "$C" >/dev/null || fail "tenant add"
start_router "$C" router
R=$R_URL
pin_routers() { # moves fence the router; lab restart-node rewrites the lab's part of ferry.conf
    grep -q "^routers = $R\$" "$C" || sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $R#" "$C"
    grep -q "^routers = $R\$" "$C" || fail "routers line not written"
}
pin_routers

# ---- inserts on 26.5: spooled bodies in every format the router forwards -------------------
OLD1=$(date -u -d '10 days ago' +%Y%m%d); OLD2=$(date -u -d '9 days ago' +%Y%m%d); NOW=$(date -u +%Y%m%d)
declare -A CNT SUM
NEXT=0
write() { # TENANT N FORMAT: N new rows (ids NEXT..) of TENANT through the router
    local t=$1 n=$2 f=$3 a=$NEXT out
    # the rows, made in FORMAT by a node (binary-safe: straight to a file)
    curl -sS -o "$T/rows.$f" "${U[node3]}/" --data-binary "SELECT '$t' AS tenant,
        toUInt32(arrayElement([$OLD1, $OLD2, $NOW], number % 3 + 1)) AS day, toUInt64(number % 97) AS uid,
        number AS id, toString(number) AS v FROM numbers($a, $n) FORMAT $f" || fail "make rows"
    out=$(curl -sS -w '\n%{http_code}' "$R/?query=$(jq -rn --arg q "INSERT INTO events (tenant, day, uid, id, v) FORMAT $f" '$q|@uri')" \
        --data-binary @"$T/rows.$f")
    [ "${out##*$'\n'}" = 200 ] || fail "router insert ($f): $out"
    CNT[$t]=$(( ${CNT[$t]:-0} + n ))
    SUM[$t]=$(( ${SUM[$t]:-0} + (2 * a + n - 1) * n / 2 ))
    NEXT=$((a + n))
}
want_all() { local t; for t in acme beta gamma; do printf '%s\t%s\t%s\n' "$t" "${CNT[$t]:-0}" "${SUM[$t]:-0}"; done; }
ALLQ="SELECT tenant, count(), sum(id) FROM events GROUP BY tenant ORDER BY tenant"
check_all() { # WHAT: every tenant's count and sum through the router, one by one and fanned out
    local t
    for t in acme beta gamma; do
        assert_eq "${CNT[$t]:-0} ${SUM[$t]:-0}" "$(chq "$R" "SELECT count(), sum(id) FROM events WHERE tenant = '$t'" | tr '\t' ' ')" "$1: $t"
    done
    assert_eq "$(want_all)" "$(chq "$R" "$ALLQ")" "$1: every tenant, fanned out"
}
route_of() { "$FERRY_BIN" route --config "$C" --tenant "$1" --split 0 --json | jq -r '.slices[0].shards | join(",")'; }
fp() { # NODE TENANT: per-partition rows, sum and xor of row hashes, where the slice is
    chq "${U[$1]}" "SELECT _partition_id, count(), sum(cityHash64(*)), groupBitXor(cityHash64(*)) FROM events
        WHERE tenant = '$2' GROUP BY _partition_id ORDER BY _partition_id"
}
cold_parts() { chq "${U[$1]}" "SELECT count() FROM system.parts WHERE table = 'events' AND active AND disk_name = 'cold' AND partition LIKE '%$2%'"; }

write acme 3000 TabSeparated
write beta 3000 JSONEachRow
write gamma 3000 RowBinary
check_all "26.5, written"
for n in node1 node2 node3; do
    assert_eq "" "$(ls -A "$L/$n/data/spool")" "$n: no spooled body left behind"
done
ok "26.5 nodes took TSV, JSONEachRow and RowBinary through the router (spooled inserts)"

# Native, and a bad body, straight to a node: the spooled path reports ClickHouse's own error
chq "${U[node2]}" "CREATE TABLE nat (a UInt32, b String) ENGINE = MergeTree ORDER BY a" >/dev/null
curl -sS -o "$T/nat.bin" "${U[node2]}/" --data-binary "SELECT number AS a, toString(number) AS b FROM numbers(1000) FORMAT Native"
expect_exit 0 curl -sS -f "${U[node2]}/?query=INSERT%20INTO%20nat%20FORMAT%20Native" --data-binary @"$T/nat.bin"
assert_eq "1000	499500" "$(chq "${U[node2]}" "SELECT count(), sum(a) FROM nat")" "Native insert on 26.5"
printf 'x\ty\n' >"$T/bad.tsv"
code=$(curl -sS -o "$T/bad.out" -D "$T/bad.hdr" -w '%{http_code}' "${U[node2]}/?query=INSERT%20INTO%20nat%20FORMAT%20TSV" --data-binary @"$T/bad.tsv")
assert_eq 400 "$code" "a bad TSV body is refused like ClickHouse does"
assert_contains "$(cat "$T/bad.hdr")" "X-ClickHouse-Exception-Code: 27" "with CANNOT_PARSE_INPUT_ASSERTION_FAILED's code"
assert_contains "$(head -c 200 "$T/bad.out")" "Code: 27. DB::Exception: Cannot parse input" "and ClickHouse's message, once"
assert_eq "" "$(ls -A "$L/node2/data/spool")" "no spooled body left after the failure"
ok "Native insert and a failing body on 26.5 (HTTP $code, code 27)"

# ---- tier and move on 26.5 -----------------------------------------------------------------
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/tier1.json" 2>"$T/tier1.err" || fail "tier on 26.5: $(tail -3 "$T/tier1.err")"
tiered=0
for n in node1 node2 node3; do tiered=$((tiered + $(cold_parts "$n" ""))); done
[ "$tiered" -ge 6 ] || fail "only $tiered cold parts after tiering on 26.5"
check_all "26.5, tiered"
next_node() { echo "node$(( ${1#node} % 3 + 1 ))"; }
move() { # TENANT TO WHAT: moves TENANT/0, fingerprints unchanged
    local t=$1 to=$2 from before
    from=$(route_of "$t")
    before=$(fp "$from" "$t")
    "$FERRY_BIN" move --config "$C" --tenant "$t" --split 0 --to "$to" --grace 200 >/dev/null 2>"$T/mv.err" ||
        fail "$3: move $t $from -> $to: $(tail -3 "$T/mv.err")"
    assert_eq "$to" "$(route_of "$t")" "$3: the route names $to"
    assert_eq "$before" "$(fp "$to" "$t")" "$3: $t's partitions on $to are the ones that left $from"
    [ "$(cold_parts "$to" "$t")" -ge 2 ] || fail "$3: $t's cold partitions are not cold on $to"
    check_all "$3"
}
A_FROM=$(route_of acme)
move acme "$(next_node "$A_FROM")" "26.5 -> 26.5"
ok "tiered $tiered cold parts and moved acme/0 $A_FROM -> $(route_of acme) on 26.5"

# ---- the rolling upgrade, one node at a time, reads exact throughout --------------------------
reader() { # until $T/stop: router reads, each answer exact (G) or an error (E) in $T/reads
    local out
    while [ ! -e "$T/stop" ]; do
        out=$(curl -sS --max-time 30 -w '\n%{http_code}' "$R/" --data-binary "$ALLQ" 2>&1) || out=$'\n000'
        if [ "${out##*$'\n'}" = 200 ]; then
            out=${out%$'\n'*}
            if [ "${out%$'\n'}" = "$(cat "$T/want")" ]; then echo G >>"$T/reads"; else
                printf 'WRONG: %s\n' "$out" >>"$T/reader.wrong"; fi
        else
            echo E >>"$T/reads"
        fi
    done
}
goods() { grep -c G "$T/reads" 2>/dev/null || true; }
outdated() { chq "${U[$1]}" "SELECT count() FROM system.parts WHERE database = 'default' AND NOT active"; }
RP=
at_exit 'touch "$T/stop"; [ -z "$RP" ] || kill "$RP" 2>/dev/null'
upgrade() { # NODE: restarted on 26.7 while the reader runs
    # step 3 of the procedure: no replaced part left on disk for a restart to bring back
    # (one count decides: a merge that ends between two counts leaves its sources outdated, and
    # those a restart finds covered by the merged part; a fresh-clone run failed on that)
    local i g n
    for i in $(seq 1 300); do n=$(outdated "$1"); [ "$n" = 0 ] && break; sleep 0.3; done
    [ "$n" = 0 ] || fail "$1 still holds $n outdated parts"
    want_all >"$T/want"
    rm -f "$T/stop" "$T/reads" "$T/reader.wrong"
    reader &
    RP=$!
    wait_for 60 grep -q G "$T/reads" || fail "no exact read before $1's upgrade"
    "$FERRY_BIN" lab restart-node --dir "$L" --node "$1" --version 26.7 --timeout 120 >"$T/restart.out" 2>"$T/restart.err" ||
        fail "restart-node $1: $(cat "$T/restart.err")"
    pin_routers
    assert_eq "${U[$1]}" "$(lab_url "$L" "$1")" "$1 came back on its port"
    g=$(goods)
    # the reader goes on until it got an exact answer from the upgraded cluster (up to 180 s: on a
    # loaded machine a read of the restarted node can take tens of seconds; a helper's run beside a
    # soak found none within the 60 s this waited before)
    for i in $(seq 1 900); do [ "$(goods)" -gt "$g" ] && break; sleep 0.2; done
    touch "$T/stop"
    wait "$RP"
    RP=
    [ ! -s "$T/reader.wrong" ] || fail "a read during $1's upgrade was wrong: $(head -3 "$T/reader.wrong")"
    [ "$(goods)" -gt "$g" ] || fail "no exact read after $1's upgrade"
    check_all "after $1's upgrade"
    ok "$1 upgraded to 26.7: $(goods) exact reads through the router around its restart, $(grep -c E "$T/reads" || true) refused (its slices were down), none wrong"
}
upgrade node1
assert_contains "$(versions)" "node1:26.7:streamed node2:26.5:spooled node3:26.5:spooled" "a mixed lab"
write acme 600 TabSeparated
write beta 600 JSONEachRow
write gamma 600 RowBinary
check_all "mixed, written"
ok "writes through the router on the mixed cluster"

# doctor names the mixed state, every server's version and the pointer formats it reads
expect_exit 1 "$FERRY_BIN" doctor --json --skip shard_grants,unmanaged_cold --config "$C"
mixed=$(jq -r '.checks[] | select(.check == "clickhouse_version" and (.server == null)) | .message' <<<"$OUT")
assert_contains "$mixed" "mixed cluster: ClickHouse 26.7.2.1 on node1 (reads pointer formats 1 to 5); 26.5.1.1 on node2 node3 (reads pointer formats 1 to 5); the cluster pins 26.5" "doctor's mixed finding"
assert_eq "node1:26.7.2.1:fail node2:26.5.1.1:pass node3:26.5.1.1:pass" \
    "$(jq -r '[.checks[] | select(.check == "clickhouse_version" and .server != null) | "\(.server):\(.clickhouse):\(.status)"] | join(" ")' <<<"$OUT")" "doctor per server"
"$FERRY_BIN" doctor --skip shard_grants,unmanaged_cold --config "$C" >"$T/doctor.txt" 2>&1 || true
assert_contains "$(cat "$T/doctor.txt")" "mixed cluster" "the text report says it too"
ok "doctor: $mixed"

# tiering refuses the server that is not at the pin; the 26.5 servers still tier
chq "${U[node1]}" "INSERT INTO events VALUES ('zeta', $OLD1, 0, 1, 1, 'z')" >/dev/null
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --server node1
assert_contains "$ERR" "node1 runs ClickHouse 26.7.2.1 but the catalog pins 26.5" "tiering on the upgraded server is refused"
chq "${U[node1]}" "ALTER TABLE events DROP PARTITION ('zeta', $OLD1, 0)" >/dev/null
for n in node2 node3; do
    "$FERRY_BIN" tier --config "$C" --older-than 3d --server "$n" >/dev/null 2>"$T/tier.err" || fail "tier on $n (26.5): $(tail -3 "$T/tier.err")"
done
check_all "mixed, 26.5 servers tiered"
ok "tier on node1 (26.7) refused: $(head -c 300 <<<"$ERR"); node2 and node3 (26.5) tiered"

# cold slices across versions, both directions
T1=beta; F1=$(route_of "$T1")
if [ "$F1" = node1 ]; then move "$T1" node2 "26.7 (node1) -> 26.5 (node2)"; F1=node2; fi
move "$T1" node1 "26.5 ($F1) -> 26.7 (node1)"
move "$T1" "$F1" "26.7 (node1) -> 26.5 ($F1)"
ok "$T1/0 moved $F1 (26.5) -> node1 (26.7) -> $F1 (26.5): exact; pointer files of each version read by the other"

upgrade node2
# node2 (26.7) -> node3 (26.5) and back, with pointer files node2's 26.7 rewrote
F2=$(route_of "$T1")
[ "$F2" = node2 ] || move "$T1" node2 "$F2 -> 26.7 (node2)"
move "$T1" node3 "26.7 (node2) -> 26.5 (node3)"
move "$T1" node2 "26.5 (node3) -> 26.7 (node2)"
ok "$T1/0 moved node2 (26.7) -> node3 (26.5) -> node2 (26.7): exact"
upgrade node3
assert_eq "node1:26.7:streamed node2:26.7:streamed node3:26.7:streamed" "$(versions)" "all upgraded"
write gamma 300 RowBinary
check_all "all on 26.7"
expect_exit 1 "$FERRY_BIN" doctor --json --skip shard_grants,unmanaged_cold --config "$C"
assert_eq "" "$(jq -r '.checks[] | select(.check == "clickhouse_version" and (.server == null)) | .message' <<<"$OUT")" "no mixed finding once every server runs 26.7"
assert_eq "fail fail fail" "$(jq -r '[.checks[] | select(.check == "clickhouse_version") | .status] | join(" ")' <<<"$OUT")" "every server is off the 26.5 pin until it is re-pinned"
ok "every node on 26.7, reads and writes exact; doctor asks for the re-pin"

# the re-pin (docs/operations.md): the catalog exported, its pin changed, imported afresh
"$FERRY_BIN" catalog export --config "$C" >"$T/dump.json" || fail "catalog export"
jq '.settings |= map(.clickhouse_version = "26.7")' "$T/dump.json" >"$T/dump26.7.json"
"$FERRY_BIN" catalog import --catalog "sqlite:$L/catalog267.db" "$T/dump26.7.json" >/dev/null || fail "catalog import"
sed -e "s#^catalog = sqlite:$L/catalog.db\$#catalog = sqlite:$L/catalog267.db#" \
    -e 's/^clickhouse_version = 26.5$/clickhouse_version = 26.7/' "$C" >"$T/repinned.conf"
grep -q "catalog267" "$T/repinned.conf" || fail "repinned.conf names the old catalog"
expect_exit 0 "$FERRY_BIN" doctor --json --skip shard_grants,unmanaged_cold --config "$T/repinned.conf"
assert_eq "pass pass pass" "$(jq -r '[.checks[] | select(.check == "clickhouse_version") | .status] | join(" ")' <<<"$OUT")" "re-pinned: every server passes"
chq "${U[node1]}" "INSERT INTO events VALUES ('zeta', $OLD1, 0, 1, 1, 'z')" >/dev/null
"$FERRY_BIN" tier --config "$T/repinned.conf" --older-than 3d --server node1 >/dev/null 2>"$T/tier.err" || fail "tier on node1 after the re-pin: $(tail -3 "$T/tier.err")"
[ "$(cold_parts node1 zeta)" -ge 1 ] || fail "node1 (26.7) did not tier after the re-pin"
chq "${U[node1]}" "ALTER TABLE events DETACH PARTITION ('zeta', $OLD1, 0)" >/dev/null
check_all "re-pinned"
ok "re-pinned to 26.7 through export and import: doctor passes, node1 tiers again"

done_testing
