# The sweep, retention and doctor on stores holding several thousand objects (more than two
# listing pages of 1000, s3rver's page size too), on both stores: a lab with a local blob
# directory, and a lab on s3rver behind the enforcing policy proxy. Each lab has a cold
# partition shared by node1 and node2 and 3,500 orphans. The sweep lists every page (it exited
# 1 with nothing on stdout once a second page was read) and finds exactly the orphans; doctor
# passes; retention deletes exactly the expired partition's objects; the sweep then deletes
# the 3,500 orphans and nothing a pointer file names.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"
source "$FERRY_SOURCE_DIR/tests/lib/retention.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3policy.sh"

N=3500
OLD=$(rt_day 10); NEW=$(rt_day 1)

# put_orphans_s3 ENDPOINT BUCKET PREFIX N: N small objects straight into s3rver (keep-alive)
put_orphans_s3() {
    python3 - "$@" <<'PY'
import http.client, sys
from urllib.parse import urlsplit
u = urlsplit(sys.argv[1]); bucket, prefix, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
for i in range(n):
    c.request("PUT", "/%s/%s%05d" % (bucket, prefix, i), body=b"orphan %d" % i,
              headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    r = c.getresponse(); r.read()
    if r.status != 200:
        sys.exit("put %d: HTTP %d" % (i, r.status))
PY
}

# run_lab KIND: the whole story on a lab of KIND (local or s3)
run_lab() {
    local kind=$1 L=$T/lab-$1 args=() store_count
    if [ "$kind" = s3 ]; then
        s3policy_start "$T/s3p" scale || fail "policy proxy did not start"
        args=("${S3P_ARGS[@]}")
        store_count() { # objects under the lab's prefix, counted by s3rver's own files
            find "$T/s3p/s3/data/scale/tier" -type f -name '*._S3rver_object' 2>/dev/null | wc -l
        }
        orphan_count() {
            find "$T/s3p/s3/data/scale/tier/zzorphan" -type f -name '*._S3rver_object' 2>/dev/null | wc -l
        }
    else
        store_count() { find "$L/blobs" -type f ! -name '.ferry-*' | wc -l; }
        orphan_count() { find "$L/blobs/zzorphan" -type f 2>/dev/null | wc -l; }
    fi
    lab_up "$L" --nodes 2 "${args[@]}"
    rt_init "$L" 3 acme
    local C=$L/ferry.conf U1 U2
    U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
    for u in "$U1" "$U2"; do chq "$u" "CREATE TABLE e $RT_DDL" >/dev/null; done
    chq "$U1" "INSERT INTO e SELECT 'acme', d, 0, number, toString(number % 100) FROM numbers(20000)
               ARRAY JOIN [$OLD, $NEW] AS d" >/dev/null
    local PA PN
    PA=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e' AND partition = '(''acme'',$OLD,0)'")
    PN=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e' AND partition = '(''acme'',$NEW,0)'")
    chq "$U1" "ALTER TABLE e MOVE PARTITION ID '$PA' TO DISK 'cold'" >/dev/null
    chq "$U1" "ALTER TABLE e MOVE PARTITION ID '$PN' TO DISK 'cold'" >/dev/null
    rt_cold_share "$L" node1 node2 "$PA"
    assert_eq 20000 "$(chq "$U2" "SELECT count() FROM e")" "$kind: node2 reads node1's objects"

    if [ "$kind" = s3 ]; then
        put_orphans_s3 "$S3RVER_ENDPOINT" scale tier/zzorphan/ "$N" || fail "putting the orphans"
        sleep 2 # older than --min-age 1s below
    else
        mkdir -p "$L/blobs/zzorphan"
        (cd "$L/blobs/zzorphan" && for i in $(seq -w 1 "$N"); do echo "orphan $i" >"o$i"; done)
        find "$L/blobs/zzorphan" -type f -exec touch -d '3 days ago' {} +
    fi
    assert_eq "$N" "$(orphan_count)" "$kind: orphans in the store"
    local total; total=$(store_count)
    [ "$total" -gt 2000 ] || fail "$kind: only $total objects: fewer than two listing pages"

    expect_exit 0 "$FERRY_BIN" sweep --json --config "$C"
    local R=$OUT
    assert_eq true "$(jq -r .complete <<<"$R")" "$kind: complete ($(jq -c .problems <<<"$R"))"
    assert_eq "$N" "$(jq -r '[.orphans[] | select(startswith("tier/zzorphan/") or startswith("zzorphan/"))] | length' <<<"$R")" "$kind: every orphan found"
    assert_eq "$N" "$(jq -r '.orphans | length' <<<"$R")" "$kind: nothing else is an orphan"
    assert_eq "$((total - N))" "$(jq -r .referenced_objects <<<"$R")" "$kind: every other object referenced"
    ok "$kind: sweep over $total objects ($(( (total + 999) / 1000 )) pages): complete, the $N orphans and nothing else"

    expect_exit 0 "$FERRY_BIN" doctor --json --config "$C"
    assert_eq "" "$(jq -r '.checks[] | select(.status == "fail") | .message' <<<"$OUT")" "$kind: doctor"
    ok "$kind: doctor passes with $total objects in the store"

    local KA; KA=$(rt_pointer_keys "$L" node1 | grep -v '^$' || true)
    expect_exit 0 "$FERRY_BIN" retention --keep 5d --json --config "$C"
    assert_eq DONE "$(jq -r '.jobs[0].state' <<<"$OUT")" "$kind: retention done"
    local deleted; deleted=$(jq -r '[.jobs[].deleted] | add' <<<"$OUT")
    [ "$deleted" -gt 0 ] || fail "$kind: retention deleted nothing"
    assert_eq "$N" "$(orphan_count)" "$kind: retention left the orphans alone"
    assert_eq "$((total - deleted))" "$(store_count)" "$kind: retention deleted only what it counted"
    assert_eq 20000 "$(chq "$U1" "SELECT count() FROM e WHERE d = $NEW")" "$kind: the kept partition reads"
    ok "$kind: retention deleted the expired partition's $deleted objects among $total"

    expect_exit 0 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1s --config "$C"
    assert_eq "true $N 0" "$(jq -r '"\(.complete) \(.deleted) \(.delete_failed)"' <<<"$OUT")" "$kind: sweep deletes the orphans ($(jq -c .problems <<<"$OUT"))"
    assert_eq 0 "$(orphan_count)" "$kind: orphans left"
    assert_eq 20000 "$(chq "$U1" "SELECT count() FROM e WHERE d = $NEW")" "$kind: node1 still reads"
    expect_exit 0 "$FERRY_BIN" sweep --json --config "$C"
    assert_eq "true 0" "$(jq -r '"\(.complete) \(.orphans | length)"' <<<"$OUT")" "$kind: clean afterwards"
    ok "$kind: sweep --delete-orphans deleted the $N orphans and nothing referenced"
    "$FERRY_BIN" lab down --dir "$L" >/dev/null
}

run_lab local
run_lab s3
assert_eq 0 "$(s3policy_n clickhouse DELETE allowed)" "the clickhouse credential deleted nothing"
done_testing
