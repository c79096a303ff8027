# The enforcing S3 layer for tests (source after harness.sh and s3rver.sh):
#   s3policy_start DIR BUCKET [PROXY ARGS...]   s3rver plus tests/lib/s3_policy_proxy.py in
#                               front of it with three keys, one per role (PROXY ARGS go to the
#                               proxy, e.g. --role clickhouse=GET,HEAD,LIST); sets S3P_ENDPOINT
#                               (the proxy), S3P_PORT and S3P_ARGS (the `ferry lab up` options
#                               for an s3 lab with a key per role; prefix tier/)
#   s3policy_methods ROLE       the role's requests by HTTP method, "GET=N HEAD=N ..." sorted
#   s3policy_counts             the proxy's counts as JSON ({counts: {ROLE: {OP: {allowed,
#                               denied, failed}}}})
#   s3policy_n ROLE OP OUTCOME  one count (0 when absent)
s3policy_start() {
    local dir=$1 bucket=$2
    shift 2
    s3rver_start "$dir/s3" "$bucket" || return 1
    mkdir -p "$dir/keys"
    : >"$dir/keys/proxy"
    local r
    for r in clickhouse uploader janitor; do
        echo "FERRY${r^^}KEY" >"$dir/keys/$r.id"
        head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/keys/$r.secret"
        chmod 600 "$dir/keys/$r.secret"
        echo "FERRY${r^^}KEY $(cat "$dir/keys/$r.secret") $r" >>"$dir/keys/proxy"
    done
    S3P_PORT=$(free_port)
    bg_start "$dir/proxy.out" /usr/bin/python3 "$FERRY_SOURCE_DIR/tests/lib/s3_policy_proxy.py" \
        --port "$S3P_PORT" --upstream "$S3RVER_ENDPOINT" --keys "$dir/keys/proxy" \
        --log "$dir/proxy.log" "$@"
    S3P_PID=$BG_PID
    wait_for 20 grep -q listening "$dir/proxy.out" || { cat "$dir/proxy.out" >&2; return 1; }
    S3P_ENDPOINT="http://127.0.0.1:$S3P_PORT"
    S3P_ARGS=(--object-store s3 --s3-endpoint "$S3P_ENDPOINT" --s3-bucket "$bucket" --s3-prefix tier/
        --s3-access-key-file "$dir/keys/clickhouse.id" --s3-secret-key-file "$dir/keys/clickhouse.secret"
        --s3-uploader-access-key-file "$dir/keys/uploader.id" --s3-uploader-secret-key-file "$dir/keys/uploader.secret"
        --s3-janitor-access-key-file "$dir/keys/janitor.id" --s3-janitor-secret-key-file "$dir/keys/janitor.secret")
}

s3policy_counts() { curl -sS --max-time 10 "$S3P_ENDPOINT/__policy/status"; }
s3policy_n() { s3policy_counts | jq -r --arg r "$1" --arg o "$2" --arg x "$3" '.counts[$r][$o][$x] // 0'; }
s3policy_methods() { s3policy_counts | jq -r --arg r "$1" '.methods[$r] // {} | to_entries | sort_by(.key) | map("\(.key)=\(.value)") | join(" ")'; }
