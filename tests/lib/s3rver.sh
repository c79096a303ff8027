# s3rver helpers for shell tests (source after harness.sh). s3rver 3.7.1 is an S3-protocol
# server on loopback; it does NOT check SigV4 signatures (use tests/lib/sigv4_verify.py for that)
# and answers 405 to AbortMultipartUpload. Node 20 needs --openssl-legacy-provider, or listing
# with a continuation token fails (s3rver encrypts the token with DES).
#
#   s3rver_start DIR BUCKET   starts it on a free port; sets S3RVER_PORT, S3RVER_PID and
#                             S3RVER_ENDPOINT (http://127.0.0.1:PORT). Virtual-host requests work
#                             with the endpoint http://s3.localhost:PORT (service endpoint
#                             "localhost": BUCKET.s3.localhost). Access key id: S3RVER.
#   s3rver_stop               stops it by PID (the harness also does at exit).

S3RVER_JS=${S3RVER_JS:-$FERRY_CACHE/s3rver-3.7.1/node_modules/s3rver/bin/s3rver.js}

s3rver_start() {
    local dir=$1 bucket=$2
    [ -f "$S3RVER_JS" ] || { echo "s3rver is not installed at $S3RVER_JS (run scripts/setup.sh)" >&2; return 1; }
    mkdir -p "$dir/data"
    S3RVER_PORT=$(free_port)
    bg_start "$dir/s3rver.log" node --openssl-legacy-provider "$S3RVER_JS" -d "$dir/data" \
        -a 127.0.0.1 -p "$S3RVER_PORT" --service-endpoint localhost --configure-bucket "$bucket"
    S3RVER_PID=$BG_PID
    S3RVER_ENDPOINT="http://127.0.0.1:$S3RVER_PORT"
    if ! wait_for 30 grep -q "listening" "$dir/s3rver.log"; then
        echo "s3rver did not start; its log:" >&2
        cat "$dir/s3rver.log" >&2
        return 1
    fi
}

s3rver_stop() {
    [ -n "${S3RVER_PID:-}" ] || return 0
    kill -TERM "$S3RVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$S3RVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$S3RVER_PID" 2>/dev/null || true
    S3RVER_PID=
}
