# A lab node (ferry-node) is bounded like ferry's other servers (docs/lab.md, "node.conf"):
# sockets that trickle header bytes are cut at its header deadline (10 s by default, [node]
# header_timeout), and the node agent it embeds takes the body limits of the ferry config's
# [agent] section (max_request_bytes, max_receive_bytes) as `ferry agent` does; a normal query
# is answered meanwhile.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"

LAB=$T/lab
lab_up "$LAB" --nodes 1
CONF=$LAB/ferry.conf
printf '[agent]\nmax_request_bytes = 64K\nmax_receive_bytes = 1M\n' >>"$CONF"
"$FERRY_BIN" lab restart-node --dir "$LAB" --node node1 >/dev/null 2>&1 || fail "restart-node"
N1=$(lab_url "$LAB" node1)
TOKEN=$(cat "$LAB/node1/agent.token")

# 30 sockets trickling a header byte every 0.5 s; a normal query meanwhile
J=$(python3 - "$N1" <<'PY'
import json, socket, sys, threading, time, urllib.request
from urllib.parse import urlparse
u = urlparse(sys.argv[1])
t0 = time.monotonic()
held = []
def slow():
    s = socket.create_connection((u.hostname, u.port))
    s.settimeout(0.5)
    s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    while time.monotonic() - t0 < 40:
        try:
            s.sendall(b"a")
            if s.recv(1) == b"":
                break
        except socket.timeout:
            continue
        except OSError:
            break
    held.append(round(time.monotonic() - t0, 1))
ths = [threading.Thread(target=slow) for _ in range(30)]
for t in ths:
    t.start()
time.sleep(1)
q0 = time.monotonic()
r = urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/", data=b"SELECT 1"), timeout=30)
normal = [r.status, r.read().decode().strip(), round(time.monotonic() - q0, 3)]
for t in ths:
    t.join()
print(json.dumps({"held_max_s": max(held), "held_min_s": min(held), "n": len(held), "normal": normal}))
PY
)
echo "slow: $J"
assert_eq '[200,"1"]' "$(jq -c '.normal[0:2]' <<<"$J")" "a normal query while 30 sockets trickle headers"
python3 -c "import sys; sys.exit(0 if 9 <= $(jq .held_min_s <<<"$J") and $(jq .held_max_s <<<"$J") < 16 else 1)" ||
    fail "trickling sockets held $(jq .held_min_s <<<"$J")..$(jq .held_max_s <<<"$J") s (header_timeout 10 s)"
ok "30 sockets trickling header bytes cut after $(jq .held_min_s <<<"$J")..$(jq .held_max_s <<<"$J") s; a normal query answered in $(jq '.normal[2]' <<<"$J") s"

# the embedded agent: an operation's body over [agent] max_request_bytes, a receive over
# max_receive_bytes
code=$(head -c 100000 /dev/zero | curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' "$N1/agent/v1/parts" --data-binary @-)
assert_eq 413 "$code" "a 100 KB operation body ([agent] max_request_bytes = 64K)"
code=$(head -c 2000000 /dev/zero | curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    "$N1/agent/v1/receive?database=default&table=t&part=all_1_1_0&kind=hot" --data-binary @-)
assert_eq 413 "$code" "a 2 MB receive ([agent] max_receive_bytes = 1M)"
ok "the node's agent takes [agent] max_request_bytes and max_receive_bytes"
[ "$(chq "$N1" "SELECT 1")" = 1 ] || fail "the node stopped answering"
done_testing
