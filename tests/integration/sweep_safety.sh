# What the sweep must count as an incomplete read of a server's pointer files, so that it never
# deletes an object some pointer file names (2-node lab, local store):
#  - a shard with two replicas (node1, node2): node2 holds the only pointer files naming its
#    cold part's objects; with an agent per replica the sweep reads both and finds no orphan,
#    with one agent for two replicas the report is incomplete; nothing is deleted either way
#  - an agent that answers "no object-storage disk" (a fake agent here): incomplete
#  - a pointer file under the cold disk whose path does not fit the agent's buffers (the walk
#    used to skip it silently): incomplete, its object is kept
#  - a pointer file ClickHouse is rewriting in place (truncate, then write: a hard link's or an
#    unlink's ref_count change) while the sweep reads it: read again, not counted as damaged
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"
source "$FERRY_SOURCE_DIR/tests/lib/retention.sh"

L=$T/lab
lab_up "$L" --nodes 2
# both agents take node1's token: a shard has one agent token for all its replicas
"$FERRY_BIN" lab down --dir "$L" >/dev/null
cp "$L/node1/agent.token" "$L/node2/agent.token"
lab_up "$L" --nodes 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)

# shard_conf OUT REPLICAS AGENTS: the lab's config with one shard, node1, of the given replicas
# and agents, its own catalog, and the managed table e
shard_conf() {
    awk -v r="$2" -v a="$3" '
        /^\[shard "node2"\]/ { skip = 1; next }
        /^\[/ { skip = 0 }
        skip { next }
        /^replicas = / { print "replicas = " r; next }
        /^agent = / { print "agent = " a; next }
        /^catalog = / { sub(/catalog\.db$/, "catalog-" FILENAME_TAG ".db") }
        { print }' FILENAME_TAG="$(basename "$1" .conf)" "$L/ferry.conf" >"$1"
    cat >>"$1" <<EOF

[table "e"]
database = default
layout = shared
tenant_column = t
day_column = d
split_column = s
EOF
    grep -q '^\[shard "node2"\]' "$1" && fail "shard_conf: node2 is still a shard"
    "$FERRY_BIN" init --config "$1" >/dev/null 2>"$T/init.err" || fail "ferry init $1: $(cat "$T/init.err")"
}
shard_conf "$T/two.conf" "$U1, $U2" "$U1, $U2"
shard_conf "$T/one.conf" "$U1, $U2" "$U1"

# a mismatched agent list is refused when the config is read
sed 's/^agent = .*/agent = http:\/\/127.0.0.1:1, http:\/\/127.0.0.1:2, http:\/\/127.0.0.1:3/' "$T/two.conf" >"$T/bad.conf"
expect_exit 2 "$FERRY_BIN" init --config "$T/bad.conf"
assert_contains "$ERR" "one per replica" "the error says what agent must list"
ok "[shard] agent: one URL per replica, or one; three for two replicas is refused"

# node2 (the shard's second replica) alone holds a cold part; its objects are old
OLD=$(rt_day 10)
for u in "$U1" "$U2"; do chq "$u" "CREATE TABLE e $RT_DDL" >/dev/null; done
chq "$U2" "INSERT INTO e SELECT 'acme', $OLD, 0, number, toString(number) FROM numbers(3000)" >/dev/null
PA=$(chq "$U2" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e'")
chq "$U2" "ALTER TABLE e MOVE PARTITION ID '$PA' TO DISK 'cold'" >/dev/null
find "$L/blobs" -type f -exec touch -d '3 days ago' {} +
NOBJ=$(find "$L/blobs" -type f | wc -l)
[ "$NOBJ" -gt 3 ] || fail "node2's cold part has $NOBJ objects"

expect_exit 0 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$T/two.conf"
assert_eq "true 0 0" "$(jq -r '"\(.complete) \(.orphans | length) \(.deleted)"' <<<"$OUT")" "agent per replica: complete, no orphan ($(jq -c .problems <<<"$OUT"))"
[ "$(jq -r .referenced_objects <<<"$OUT")" -ge "$NOBJ" ] || fail "node2's objects not counted as referenced"
ok "an agent per replica: node2's pointer files read, its $NOBJ objects referenced, nothing deleted"

expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$T/one.conf"
assert_eq "false 0" "$(jq -r '"\(.complete) \(.deleted)"' <<<"$OUT")" "one agent for two replicas"
assert_contains "$(jq -r '.problems | join(" ")' <<<"$OUT")" "replica $U2" "the problem names the replica"
assert_eq "$NOBJ" "$(find "$L/blobs" -type f | wc -l)" "objects after the sweeps"
assert_eq 3000 "$(chq "$U2" "SELECT count() FROM e")" "node2 reads its rows"
ok "one agent for two replicas: incomplete, nothing deleted, node2 still reads every row"

# ---- an agent that answers "no object-storage disk" ---------------------------------------------
FPORT=$(free_port)
cat >"$T/fake_agent.py" <<'PY'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": "the server has no object-storage disk"}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("listening", flush=True)
s.serve_forever()
PY
bg_start "$T/fake_agent.log" python3 "$T/fake_agent.py" "$FPORT"
wait_for 20 grep -q listening "$T/fake_agent.log" || fail "fake agent did not start"
shard_conf "$T/nodisk.conf" "$U1, $U2" "$U1, http://127.0.0.1:$FPORT"
expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$T/nodisk.conf"
assert_eq "false 0" "$(jq -r '"\(.complete) \(.deleted)"' <<<"$OUT")" "no object-storage disk"
assert_contains "$(jq -r '.problems | join(" ")' <<<"$OUT")" "no object-storage disk" "the problem says why"
assert_eq "$NOBJ" "$(find "$L/blobs" -type f | wc -l)" "objects after the sweep"
ok "a replica whose agent reports no object-storage disk: incomplete, nothing deleted"

# ---- a pointer file whose path does not fit ---------------------------------------------------
rt_agent "$L" node1 status
COLD1=$(jq -r '.disks[] | select(.name == "cold") | .path' <<<"$AG_BODY")
[ -d "$COLD1" ] || fail "node1's cold disk path '$COLD1'"
mkdir -p "$L/blobs/zzdeep"
echo "named by a pointer file nobody can read" >"$L/blobs/zzdeep/obj"
touch -d '3 days ago' "$L/blobs/zzdeep/obj"
NAME=$(printf 'd%.0s' $(seq 1 200))
(
    cd "$COLD1" && mkdir deep && cd deep
    for _ in $(seq 1 24); do mkdir "$NAME" && cd "$NAME"; done
    printf '5\n1\t39\n39\t%s\n0\n0\n\n' "$L/blobs/zzdeep/obj" >pointer.bin
)
expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$T/two.conf"
assert_eq "false 0" "$(jq -r '"\(.complete) \(.deleted)"' <<<"$OUT")" "a path too long"
assert_contains "$(jq -r '.problems | join(" ")' <<<"$OUT")" "deep/" "the problem names the folder"
[ -f "$L/blobs/zzdeep/obj" ] || fail "the object named by the unreadable pointer file was deleted"
rm -rf "$COLD1/deep"
expect_exit 0 "$FERRY_BIN" sweep --json --config "$T/two.conf"
assert_eq true "$(jq -r .complete <<<"$OUT")" "complete again"
ok "a pointer file under a path too long for the agent: incomplete, its object kept"

# a part ClickHouse set aside as broken at start (a crash left its pointer files empty, as the
# chaos soak's full disk did on node4: 676 unreadable files): one problem per part that says what
# to do, not one per file; the report is incomplete and nothing is deleted
BROKEN="store/zzz/broken_table/detached/broken-on-start_x_1_1_0"
mkdir -p "$COLD1/$BROKEN"
: >"$COLD1/$BROKEN/data.bin"; : >"$COLD1/$BROKEN/data.cmrk3"; : >"$COLD1/$BROKEN/count.txt"
expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1h --config "$T/two.conf"
assert_eq "false 0" "$(jq -r '"\(.complete) \(.deleted)"' <<<"$OUT")" "a broken part: incomplete, nothing deleted"
assert_eq 1 "$(jq '[.problems[] | select(contains("broken part"))] | length' <<<"$OUT")" "one problem for the broken part's 3 files ($(jq -c .problems <<<"$OUT"))"
assert_contains "$(jq -r '.problems | join(" ")' <<<"$OUT")" "$BROKEN: 3 pointer file(s) not readable" "the problem names the part and counts its files"
assert_contains "$(jq -r '.problems | join(" ")' <<<"$OUT")" "remove the folder" "the problem says what to do"
rm -rf "$COLD1/store/zzz"
expect_exit 0 "$FERRY_BIN" sweep --json --config "$T/two.conf"
assert_eq true "$(jq -r .complete <<<"$OUT")" "complete once the broken folder is gone"
ok "a broken-on-start part: one problem naming it and what to do, nothing deleted"

# ---- a pointer file rewritten in place while the walk reads it ---------------------------------
# ClickHouse rewrites a pointer file in place whenever its ref_count changes (MOVE / REPLACE
# PARTITION links it, removing a link rewrites it again). A walk that read it in that window saw an
# empty file and made the sweep incomplete (CI at fc3ee45: retention's live check, cold_cache).
# Here the file is empty when each sweep starts, and the helper writes its content back as soon as
# someone has read it empty (inotify: IN_CLOSE_NOWRITE), as a rewrite that finishes right after a
# read: the walk's first read always sees it empty, a read again sees it whole.
rt_agent "$L" node2 status
COLD2=$(jq -r '.disks[] | select(.name == "cold") | .path' <<<"$AG_BODY")
SRC=$(find "$COLD2/store" -name 'data.bin' -size +0 | head -1)
[ -n "$SRC" ] || fail "no pointer file under node2's cold disk $COLD2"
mkdir -p "$COLD2/store/zzz/rewritten/all_1_1_0"
REWRITTEN="$COLD2/store/zzz/rewritten/all_1_1_0/data.bin"
cp "$SRC" "$T/pointer.copy"
: >"$REWRITTEN"
cat >"$T/rewriter.py" <<'PY'
import ctypes, os, sys
path, data = sys.argv[1], open(sys.argv[2], "rb").read()
libc = ctypes.CDLL("libc.so.6", use_errno=True)
fd = libc.inotify_init()
if fd < 0 or libc.inotify_add_watch(fd, path.encode(), 0x10) < 0:  # IN_CLOSE_NOWRITE
    sys.exit("inotify: errno %d" % ctypes.get_errno())
print("watching", flush=True)
while os.read(fd, 4096):
    if os.path.getsize(path) == 0:  # read empty: the rewrite finishes now
        with open(path, "r+b") as f:
            f.write(data)
PY
bg_start "$T/rewriter.log" python3 "$T/rewriter.py" "$REWRITTEN" "$T/pointer.copy"
REWRITER=$BG_PID
wait_for 20 grep -q watching "$T/rewriter.log" || fail "the rewriter did not start: $(cat "$T/rewriter.log")"
for i in 1 2 3 4 5; do
    : >"$REWRITTEN"
    expect_exit 0 "$FERRY_BIN" sweep --json --config "$T/two.conf"
    assert_eq true "$(jq -r .complete <<<"$OUT")" "sweep $i beside an in-place rewrite ($(jq -c .problems <<<"$OUT"))"
    cmp -s "$REWRITTEN" "$T/pointer.copy" || fail "sweep $i never read the emptied pointer file (the rewriter did not fill it)"
done
kill "$REWRITER"
wait "$REWRITER" 2>/dev/null || true
rm -rf "$COLD2/store/zzz"
ok "a pointer file read empty by each of 5 sweeps and rewritten right after: read again, every sweep complete"

done_testing
