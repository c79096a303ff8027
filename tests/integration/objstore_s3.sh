# The object store conformance suite (tests/unit/test_objstore.c) against a real S3-protocol
# server: s3rver on loopback, path-style and virtual-host style, then again through
# tests/lib/sigv4_verify.py, which recomputes every request's SigV4 signature with botocore and
# refuses mismatches. Checks that every kind of request ferry makes was verified, and that a
# request signed with a wrong secret was refused. Then once more through the enforcing policy
# proxy with a key per role.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"

CONFORMANCE="$FERRY_BUILD_DIR/tests/test_objstore"
[ -x "$CONFORMANCE" ] || fail "conformance program missing: $CONFORMANCE"
BUCKET=ferry-test
SECRET="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"

s3rver_start "$T/s3" "$BUCKET" || fail "s3rver did not start"
ok "s3rver listening on $S3RVER_PORT"

run_suite() { # run_suite NAME ENV...: runs the conformance program with ENV, checks it passed
    local name=$1; shift
    if ! env "$@" FERRY_TEST_S3_BUCKET=$BUCKET FERRY_TEST_S3_SECRET="$SECRET" \
            "$CONFORMANCE" >"$T/$name.out" 2>&1; then
        cat "$T/$name.out" >&2
        fail "conformance suite failed: $name"
    fi
    grep -q "PASSED" "$T/$name.out" || fail "$name: no PASSED line"
    if grep -q "$SECRET" "$T/$name.out"; then fail "$name: the secret appears in the output"; fi
    ok "conformance suite: $name ($(grep -c '\[       OK \]' "$T/$name.out") passed)"
}

# 1. s3rver directly (it does not check signatures, and has no AbortMultipartUpload).
#    It ignores encoding-type=url and If-None-Match: the suite expects a refused listing of
#    control characters, and skips the never-replace check.
run_suite s3rver-path FERRY_TEST_S3_ENDPOINT="$S3RVER_ENDPOINT" FERRY_TEST_S3_KEY_ID=S3RVER \
    FERRY_TEST_S3_NO_ABORT=1 FERRY_TEST_S3_RAW_LISTING=1 FERRY_TEST_S3_NO_CONDITIONAL_PUT=1
run_suite s3rver-virtual FERRY_TEST_S3_ENDPOINT="http://s3.localhost:$S3RVER_PORT" \
    FERRY_TEST_S3_KEY_ID=S3RVER FERRY_TEST_S3_URL_STYLE=virtual FERRY_TEST_S3_NO_ABORT=1 \
    FERRY_TEST_S3_RAW_LISTING=1 FERRY_TEST_S3_NO_CONDITIONAL_PUT=1

# 2. Through the botocore verifier.
VPORT=$(free_port)
echo "FERRYVERIFYKEY $SECRET" >"$T/keys"
bg_start "$T/verify.out" /usr/bin/python3 "$FERRY_SOURCE_DIR/tests/lib/sigv4_verify.py" \
    --port "$VPORT" --upstream "$S3RVER_ENDPOINT" --keys "$T/keys" --log "$T/verify.log"
wait_for 20 grep -q listening "$T/verify.out" || { cat "$T/verify.out" >&2; fail "verifier did not start"; }

# The verifier itself must refuse a bad signature and accept a good one (curl's own signer,
# with the parameters deps-notes says it handles).
code=$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 \
    --user "FERRYVERIFYKEY:not-the-secret" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    "http://127.0.0.1:$VPORT/$BUCKET/probe")
assert_eq 403 "$code" "verifier refuses a wrong secret"
code=$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 \
    --user "FERRYVERIFYKEY:$SECRET" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    -X PUT --data-binary probe "http://127.0.0.1:$VPORT/$BUCKET/probe")
assert_eq 200 "$code" "verifier accepts curl's correct signature"
ok "verifier refuses a wrong secret and accepts a good signature"
: >"$T/verify.log"

run_suite verified-path FERRY_TEST_S3_ENDPOINT="http://127.0.0.1:$VPORT" \
    FERRY_TEST_S3_KEY_ID=FERRYVERIFYKEY FERRY_TEST_S3_NO_ABORT=1 FERRY_TEST_S3_CHECKS_SIGNATURES=1
run_suite verified-virtual FERRY_TEST_S3_ENDPOINT="http://localhost:$VPORT" \
    FERRY_TEST_S3_KEY_ID=FERRYVERIFYKEY FERRY_TEST_S3_URL_STYLE=virtual FERRY_TEST_S3_NO_ABORT=1 \
    FERRY_TEST_S3_CHECKS_SIGNATURES=1
grep -q "wrong_secret" "$T/verified-path.out" && ! grep -q "SKIPPED \] test_wrong_secret" "$T/verified-path.out" \
    || fail "the wrong-secret test did not run through the verifier"

# Every kind of request was checked by botocore and accepted ...
L="$T/verify.log"
need() { grep -Eq "$1" "$L" || { head -50 "$L" >&2; fail "no verified request matching: $1"; }; }
need '^OK PUT /[^?]+$'                                   # put object
need '^OK GET /[^?]+$'                                   # get object
need '^OK HEAD /'                                        # head
need '^OK DELETE /[^?]+$'                                # delete
need '^OK GET /[^ ]*\?continuation-token=[^ ]+&encoding-type=url&list-type=2&max-keys=5&prefix='  # list page 2+
need '^OK POST /[^ ]+\?uploads=$'                        # initiate multipart
need '^OK PUT /[^ ]+\?partNumber=[0-9]+&uploadId='       # upload part
need '^OK POST /[^ ]+\?uploadId='                        # complete multipart
need '^OK DELETE /[^ ]+\?uploadId='                      # abort (s3rver then answers 405)
need '^OK [A-Z]+ /[^ ]*%20'                              # a key that needed encoding
need '^OK PUT /[^ ]*mpu/big.bin'                         # virtual host: path without bucket
# ... and the only refusals are the wrong-secret requests (a put and a head per run).
rejects=$(grep -c '^REJECT' "$L" || true)
bad=$(grep '^REJECT' "$L" | grep -vc 'wrong/secret signature mismatch' || true)
assert_eq 0 "$bad" "requests refused for another reason: $(grep '^REJECT' "$L" | grep -v 'wrong/secret' | head -3)"
assert_eq 4 "$rejects" "refused wrong-secret requests"
ok "$(grep -c '^OK' "$L") ferry requests verified by botocore; $rejects wrong-secret requests refused"

s3rver_stop
ok "s3rver stopped"

# 3. Through the enforcing policy proxy (tests/lib/s3_policy_proxy.py), one key per role: every
#    request is signed, allowed by its role's policy, listings carry keys of every byte class
#    through encoding-type=url, and puts over existing keys get 412.
source "$FERRY_SOURCE_DIR/tests/lib/s3policy.sh"
s3policy_start "$T/pol" ferry-pol || fail "policy proxy did not start"
BUCKET=ferry-pol run_suite policy FERRY_TEST_S3_ENDPOINT="$S3P_ENDPOINT" \
    FERRY_TEST_S3_ROLE_KEYS="$T/pol/keys" FERRY_TEST_S3_KEY_ID="$(cat "$T/pol/keys/clickhouse.id")" \
    FERRY_TEST_S3_NO_ABORT=1 FERRY_TEST_S3_CHECKS_SIGNATURES=1
for r in clickhouse uploader janitor; do
    grep -q "$(cat "$T/pol/keys/$r.secret")" "$T/policy.out" && fail "the $r secret appears in the output"
done
P="$T/pol/proxy.log"
grep -Eq '^ALLOW clickhouse LIST GET /ferry-pol\?[^ ]*encoding-type=url[^ ]*bytes%2F' "$P" ||
    fail "no listing of the key bytes through the proxy"
grep -Eq '^ALLOW uploader PUT PUT /ferry-pol/[^ ]*basic/hello.txt 412' "$P" ||
    fail "no refused replacement (412) through the proxy"
denied=$(grep -Ec '^(DENY|REJECT)' "$P" || true)
assert_eq 2 "$denied" "refused requests (the wrong-secret put and head): $(grep -E '^(DENY|REJECT)' "$P" | head -3)"
ok "conformance suite through the policy proxy, a key per role: every key byte class listed exactly, no replacement"
done_testing
