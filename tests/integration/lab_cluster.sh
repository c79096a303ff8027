# A 3-node lab through ClickHouse's HTTP interface: tiered tables on every node, 1M rows
# streamed in, queries with settings/params/formats/users, errors, a move to the cold disk,
# a large streamed result, concurrent queries, and the delete guard on shared blobs.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"

L=$T/lab
lab_up "$L" --nodes 3
ok "lab up with 3 nodes"
[ "$(jq '.nodes | length' <("$FERRY_BIN" lab status --dir "$L" --json))" = 3 ] || fail "3 nodes expected"
grep -q '^\[shard "node3"\]' "$L/ferry.conf" || fail "ferry.conf lacks node3"
grep -q "catalog = sqlite:$L/catalog.db" "$L/ferry.conf" || fail "ferry.conf lacks catalog"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2); U3=$(lab_url "$L" node3)

assert_eq "Ok." "$(curl -sS --max-time 10 "$U1/ping")" "/ping"
assert_eq "26.7.2.1" "$(chq "$U1" 'SELECT version()')" "version through HTTP"

DDL="CREATE TABLE events (tenant UInt32, day Date, id UInt64, v String) ENGINE = MergeTree
     PARTITION BY (tenant, day) ORDER BY id SETTINGS storage_policy = 'tiered'"
for u in "$U1" "$U2" "$U3"; do chq "$u" "$DDL" >/dev/null; done
ok "tiered table created on every node"

# 1M rows streamed in the body of ?query=INSERT ... FORMAT TSV.
python3 -c '
import sys
w = sys.stdout.write
for i in range(1000000):
    w("%d\t2026-11-%02d\t%d\tv%d\n" % (i % 2, 1 + i % 3, i, i))' >"$T/rows.tsv"
code=$(curl -sS --max-time 120 -o "$T/ins.out" -w '%{http_code}' \
    "$U1/?query=INSERT%20INTO%20events%20FORMAT%20TSV" --data-binary @"$T/rows.tsv")
assert_eq 200 "$code" "1M-row insert ($(cat "$T/ins.out"))"
assert_eq "1000000	499999500000" "$(chq "$U1" 'SELECT count(), sum(id) FROM events')" "1M rows back"
for u in "$U2" "$U3"; do
    chq "$u" "INSERT INTO events SELECT number % 2, toDate('2026-11-01') + number % 3, number, concat('v', toString(number)) FROM numbers(1000000)" >/dev/null
    assert_eq "1000000" "$(chq "$u" 'SELECT count() FROM events')" "1M rows on $u"
done
ok "1M rows on each node"

# Query in ?query=, default_format, query_id echo, settings and parameters in the URL.
hdr=$(curl -sS --max-time 10 -D - -o "$T/body" "$U1/?query=SELECT%20count()%20FROM%20events&default_format=JSONEachRow&query_id=q-123")
assert_contains "$hdr" "X-ClickHouse-Query-Id: q-123" "query id echoed"
assert_contains "$hdr" "X-ClickHouse-Format: JSONEachRow" "format header"
assert_eq '{"count()":1000000}' "$(cat "$T/body")" "default_format"
assert_eq "3" "$(curl -sS --max-time 10 "$U1/?query=SELECT%20getSetting('max_threads')&max_threads=3")" "setting from URL"
assert_eq "42" "$(curl -sSg --max-time 10 "$U1/?query=SELECT%20{x:UInt32}%2B1&param_x=41")" "query parameter"
# The setting must not leak into later requests on pooled connections.
for _ in 1 2 3 4; do
    [ "$(chq "$U1" "SELECT getSetting('max_threads')")" != 3 ] || fail "max_threads leaked"
done
chq "$U1" 'CREATE DATABASE other' >/dev/null
chq "$U1" 'CREATE TABLE other.t (x UInt8) ENGINE = Memory' >/dev/null
assert_eq "other" "$(curl -sS --max-time 10 "$U1/?database=other&query=SELECT%20currentDatabase()")" "database param"
[ "$(chq "$U1" 'SELECT currentDatabase()')" = default ] || fail "database leaked"
ok "URL parameters, settings and database do not leak"

# Users: the lab user 'ferry' with its password by header, basic auth and URL; wrong ones refused.
PW=$(cat "$L/ferry.password")
assert_eq "1" "$(curl -sS --max-time 10 -H 'X-ClickHouse-User: ferry' -H "X-ClickHouse-Key: $PW" "$U1/?query=SELECT%201")" "header auth"
assert_eq "1" "$(curl -sS --max-time 10 -u "ferry:$PW" "$U1/?query=SELECT%201")" "basic auth"
assert_eq "1" "$(curl -sS --max-time 10 "$U1/?user=ferry&password=$PW&query=SELECT%201")" "URL auth"
hdr=$(curl -sS --max-time 10 -D - -o /dev/null -u ferry:wrong "$U1/?query=SELECT%201")
assert_contains "$hdr" "HTTP/1.1 403" "wrong password status"
assert_contains "$hdr" "X-ClickHouse-Exception-Code: 516" "wrong password code"
ok "users and passwords"

# Errors: non-200 with X-ClickHouse-Exception-Code, as ClickHouse's server maps them.
hdr=$(curl -sS --max-time 10 -D - -o "$T/body" "$U1/" --data-binary 'SELEC 1')
assert_contains "$hdr" "HTTP/1.1 400" "syntax error status"
assert_contains "$hdr" "X-ClickHouse-Exception-Code: 62" "syntax error code"
assert_contains "$(cat "$T/body")" "SYNTAX_ERROR" "syntax error text"
hdr=$(curl -sS --max-time 10 -D - -o /dev/null "$U1/" --data-binary 'SELECT * FROM nope')
assert_contains "$hdr" "HTTP/1.1 404" "unknown table status"
assert_contains "$hdr" "X-ClickHouse-Exception-Code: 60" "unknown table code"
hdr=$(curl -sS --max-time 10 -D - -o /dev/null "$U1/?query=SELECT%201&no_such_setting=1")
assert_contains "$hdr" "X-ClickHouse-Exception-Code: 115" "unknown setting code"
hdr=$(curl -sS --max-time 10 -D - -o /dev/null "$U1/?query=INSERT%20INTO%20events%20FORMAT%20TSV" --data-binary $'x\ty\n')
assert_contains "$hdr" "X-ClickHouse-Exception-Code" "bad insert data is an error"
case "$hdr" in *"HTTP/1.1 200"*) fail "bad insert data answered 200" ;; esac
hdr=$(curl -sS --max-time 10 -D - -o /dev/null "$U1/?query=DROP%20TABLE%20events")
assert_contains "$hdr" "X-ClickHouse-Exception-Code: 164" "GET is read-only"
# An error after the first rows: 200, then ClickHouse 25.11+'s tagged in-band exception block.
curl -sS --max-time 60 -D "$T/h" -o "$T/body" "$U1/" --data-binary 'SELECT throwIf(number = 2000000) FROM numbers(5000000) SETTINGS max_block_size = 65536' || true
tag=$(grep -i '^X-ClickHouse-Exception-Tag:' "$T/h" | tr -d '\r' | awk '{print $2}')
[ -n "$tag" ] || fail "no exception tag header"
tail -c 600 "$T/body" | grep -q "__exception__" || fail "no in-band exception block"
tail -c 600 "$T/body" | grep -q "$tag" || fail "exception block without the tag"
ok "errors: statuses, codes, in-band exception"

# Move a partition to the cold disk (blobs in the shared directory) and read it back.
before=$(chq "$U1" "SELECT count(), sum(id) FROM events WHERE tenant = 1 AND day = '2026-11-02'")
chq "$U1" "ALTER TABLE events MOVE PARTITION (1, '2026-11-02') TO DISK 'cold'" >/dev/null
assert_eq "cold" "$(chq "$U1" "SELECT DISTINCT disk_name FROM system.parts WHERE table = 'events' AND active AND partition = '(1,''2026-11-02'')'")" "partition on cold"
assert_eq "$before" "$(chq "$U1" "SELECT count(), sum(id) FROM events WHERE tenant = 1 AND day = '2026-11-02'")" "cold partition reads back"
nblobs=$(find "$L/blobs" -type f | wc -l)
[ "$nblobs" -gt 0 ] || fail "no blobs in $L/blobs"
ok "partition moved to cold ($nblobs blobs) and read back"

# The delete guard: node2 attaches the same blobs through copied pointer files; node1 drops the
# partition; ClickHouse's deletes are refused, the blobs stay, node2 still reads the rows.
part=$(chq "$U1" "SELECT name FROM system.parts WHERE table = 'events' AND active AND disk_name = 'cold' LIMIT 1")
src=$(chq "$U1" "SELECT path FROM system.parts WHERE table = 'events' AND name = '$part'")
dst=$(chq "$U2" "SELECT data_paths[2] FROM system.tables WHERE name = 'events'")
chq "$U2" "ALTER TABLE events DROP PARTITION (1, '2026-11-02')" >/dev/null  # node2's own copy
mkdir -p "$dst/detached" && cp -r "$src" "$dst/detached/$part"
chq "$U2" "ALTER TABLE events ATTACH PARTITION (1, '2026-11-02')" >/dev/null
assert_eq "$before" "$(chq "$U2" "SELECT count(), sum(id) FROM events WHERE tenant = 1 AND day = '2026-11-02'")" "node2 reads node1's blobs"
refused0=$(curl -sS --max-time 10 "$U1/ferry/status" | jq .refused_deletes)
chq "$U1" "ALTER TABLE events DROP PARTITION (1, '2026-11-02')" >/dev/null
wait_for 30 bash -c "[ \$(curl -sS --max-time 5 '$U1/ferry/status' | jq .refused_deletes) -gt $refused0 ]" ||
    fail "no refused delete after DROP PARTITION on the cold disk"
sleep 2
assert_eq "$nblobs" "$(find "$L/blobs" -type f | wc -l)" "blobs still there after DROP"
assert_eq "$before" "$(chq "$U2" "SELECT count(), sum(id), 0 * sum(length(v)) FROM events WHERE tenant = 1 AND day = '2026-11-02'" | cut -f1,2)" "node2 still reads after node1 dropped"
assert_eq "0" "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 1 AND day = '2026-11-02'")" "node1 dropped it"
ok "delete guard: refused=$(curl -sS --max-time 10 "$U1/ferry/status" | jq .refused_deletes), blobs kept, other node reads"

# Two slow queries at once finish together (a pool of connections, not one).
start=$(date +%s%N)
curl -sS --max-time 30 "$U1/" --data-binary 'SELECT sleepEachRow(1) FROM numbers(3) FORMAT Null' >"$T/c1" &
p1=$!
curl -sS --max-time 30 "$U1/" --data-binary 'SELECT sleepEachRow(1) FROM numbers(3) FORMAT Null' >"$T/c2" &
p2=$!
wait $p1 || fail "first concurrent query failed"
wait $p2 || fail "second concurrent query failed"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt 5500 ] || fail "two 3 s queries took $ms ms together"
ok "concurrent queries ($ms ms for two 3 s queries)"

# A large result is streamed: the node's peak memory grows far less than the result size.
pid1=$(lab_pid "$L" node1)
echo 5 >"/proc/$pid1/clear_refs" # resets the peak resident size (VmHWM) to the current one
hwm0=$(awk '/VmHWM/ {print $2}' /proc/$pid1/status)
bytes=$(curl -sS --max-time 120 -o /dev/null -w '%{size_download}' "$U1/" --data-binary 'SELECT number, toString(number) FROM numbers(40000000)')
hwm1=$(awk '/VmHWM/ {print $2}' /proc/$pid1/status)
[ "$bytes" -gt 500000000 ] || fail "large result only $bytes bytes"
grow=$(( (hwm1 - hwm0) / 1024 ))
[ "$grow" -lt 250 ] || fail "peak memory grew by $grow MB for a $((bytes / 1000000)) MB result"
ok "streamed $((bytes / 1000000)) MB with peak memory growth of $grow MB"

"$FERRY_BIN" lab down --dir "$L" >/dev/null
for p in $pid1; do pid_running "$p" && fail "node $p still running after lab down"; done
assert_eq "false false false" "$("$FERRY_BIN" lab status --dir "$L" --json | jq -r '[.nodes[].alive] | map(tostring) | join(" ")')" "all dead after down"
ok "lab down stopped every node"
done_testing
