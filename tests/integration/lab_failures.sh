# The lab under bad input and failures: library missing, directory not writable, port taken,
# a node killed mid-query, idempotent lab up, add-node, two labs side by side.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"

# Library missing: a clear message, non-zero exit, nothing left running.
expect_exit 1 env FERRY_LIBCHDB=/nonexistent/libchdb.so "$FERRY_BIN" lab up --dir "$T/nolib" --nodes 2 --timeout 30
assert_contains "$ERR" "libchdb not found at /nonexistent/libchdb.so" "missing library named"
assert_contains "$ERR" "make deps" "says how to get it"
[ -z "$(pgrep -f "$T/nolib/" || true)" ] || fail "nodes left running after a failed lab up"
ok "library missing"
# A file that is not libchdb.
echo "not a library" >"$T/fake.so"
expect_exit 1 "$FERRY_BIN" lab up --dir "$T/fakelib" --nodes 1 --libchdb "$T/fake.so" --timeout 30
assert_contains "$ERR" "cannot load libchdb from $T/fake.so" "wrong library named"
[ -z "$(pgrep -f "$T/fakelib/" || true)" ] || fail "nodes left running after a wrong library"
ok "wrong library"

# Directory not writable (root ignores modes, so make it immutable), or not a directory.
mkdir -p "$T/ro"
if chattr +i "$T/ro" 2>/dev/null; then
    set +e; "$FERRY_BIN" lab up --dir "$T/ro" --nodes 1 >"$T/o" 2>"$T/e"; rc=$?; set -e
    chattr -i "$T/ro"
    assert_eq 2 "$rc" "not-writable exit status"
    assert_contains "$(cat "$T/e")" "not writable" "not-writable message"
    ok "directory not writable"
fi
touch "$T/afile"
expect_exit 1 "$FERRY_BIN" lab up --dir "$T/afile/lab" --nodes 1
assert_contains "$ERR" "cannot create lab directory" "bad directory message"
expect_exit 2 "$FERRY_BIN" lab status --dir "$T/none"
assert_contains "$ERR" "no lab in" "status of no lab"
expect_exit 2 "$FERRY_BIN" lab up --dir "$T/x" --nodes 0
expect_exit 2 "$FERRY_BIN" lab up --dir "$T/x" --object-store s3
assert_contains "$ERR" "--s3-endpoint" "s3 options required"
ok "bad input"

# Port taken: the node says so and exits.
PORT=$(free_port)
python3 -c "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $PORT)); s.listen(); time.sleep(120)" &
holder=$!
_H_PIDS+=("$holder")
wait_for 60 python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT)).close()" || fail "port holder did not start"
mkdir -p "$T/pt"
cat >"$T/pt/node.conf" <<CONF
[node]
name = pt
data_path = $T/pt/data
http_port = $PORT
[object_store]
type = local
path = $T/pt/blobs/
CONF
expect_exit 1 timeout 60 "$FERRY_BUILD_DIR/ferry-node" --config "$T/pt/node.conf"
assert_contains "$ERR" "cannot listen on 127.0.0.1:$PORT: Address already in use" "port taken message"
ok "port taken is reported by the node"

# Two labs at once, in different directories, do not interfere.
A=$T/labA; B=$T/labB
lab_up "$A" --nodes 1
lab_up "$B" --nodes 2
UA=$(lab_url "$A" node1); UB=$(lab_url "$B" node1)
[ "$UA" != "$UB" ] || fail "two labs share a port"
chq "$UA" "CREATE TABLE t (x UInt64) ENGINE = MergeTree ORDER BY x SETTINGS storage_policy = 'tiered'" >/dev/null
chq "$UB" "CREATE TABLE t (x UInt64) ENGINE = MergeTree ORDER BY x SETTINGS storage_policy = 'tiered'" >/dev/null
chq "$UA" "INSERT INTO t SELECT number FROM numbers(10)" >/dev/null
chq "$UB" "INSERT INTO t SELECT number FROM numbers(20)" >/dev/null
chq "$UA" "ALTER TABLE t MOVE PARTITION tuple() TO DISK 'cold'" >/dev/null
assert_eq 10 "$(chq "$UA" 'SELECT count() FROM t')" "lab A data"
assert_eq 20 "$(chq "$UB" 'SELECT count() FROM t')" "lab B data"
[ "$(find "$A/blobs" -type f | wc -l)" -gt 0 ] || fail "lab A cold data not in its blob dir"
[ "$(find "$B/blobs" -type f | wc -l)" = 0 ] || fail "lab A's cold data went to lab B"
pidsB=$(lab_pids "$B")
"$FERRY_BIN" lab down --dir "$A" >/dev/null
for p in $pidsB; do pid_running "$p" || fail "lab B node $p died when lab A went down"; done
assert_eq "20" "$(chq "$UB" 'SELECT count() FROM t')" "lab B still serves"
ok "two labs side by side"

# lab up is idempotent; add-node adds one more.
pid1=$(lab_pid "$B" node1)
lab_up "$B"
assert_eq "$pid1" "$(lab_pid "$B" node1)" "running node kept by lab up"
"$FERRY_BIN" lab add-node --dir "$B" --timeout 90 >/dev/null 2>"$T/e" || fail "add-node: $(cat "$T/e")"
assert_eq "true" "$(lab_alive "$B" node3)" "node3 added"
grep -q '^\[shard "node3"\]' "$B/ferry.conf" || fail "ferry.conf lacks the added node"
ok "idempotent lab up, add-node"

# A node killed mid-query: the client gets an error (no hang), status says dead, up restarts it.
U1=$(lab_url "$B" node1)
set +e
curl -sS --max-time 60 "$U1/" --data-binary 'SELECT number, sleepEachRow(0.5) FROM numbers(40) SETTINGS max_block_size = 1' >"$T/mid.out" 2>"$T/mid.err" &
cpid=$!
set -e
sleep 2
kill -KILL "$pid1"
start=$(date +%s)
set +e; wait $cpid; crc=$?; set -e
[ "$crc" != 0 ] || fail "client got success from a killed node"
[ $(( $(date +%s) - start )) -lt 10 ] || fail "client hung after the node died"
assert_eq "false" "$(lab_alive "$B" node1)" "dead node reported"
lab_up "$B"
assert_eq "true" "$(lab_alive "$B" node1)" "lab up restarted the dead node"
[ "$(lab_pid "$B" node1)" != "$pid1" ] || fail "restarted node has the old PID"
assert_eq 20 "$(chq "$(lab_url "$B" node1)" 'SELECT count() FROM t')" "data survives the restart"
ok "killed mid-query: client error (curl $crc), status dead, restarted"

pidsB=$(lab_pids "$B")
"$FERRY_BIN" lab down --dir "$B" >/dev/null
for p in $pidsB; do pid_running "$p" && fail "node $p still running after lab down"; done
ok "nothing left running"
done_testing
