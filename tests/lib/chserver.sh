# A real clickhouse-server (Debian's package, 18.16 on bookworm) for tests: its own config and
# data directory under $T, an HTTP port on 127.0.0.1 chosen free, started with bg_start (so the
# harness stops it by PID at exit) and never touching the system's /etc or /var.
# Source after harness.sh. Functions:
#   ch_start [NAME]   start a server; sets CH_URL, CH_PID, CH_DIR, CH_PORT, CH_USER,
#                     CH_PASSWORD_FILE (user CH_USER has a password; user "default" has none)
#   ch_sql SQL        run SQL as "default" with curl (for setting up test data); prints the result
#   ch_stop           SIGTERM, wait up to 20 s, then SIGKILL
#   ch_kill           SIGKILL at once (a server dying mid-query)

ch_server_bin() {
    local b
    for b in /usr/bin/clickhouse-server /usr/sbin/clickhouse-server; do
        [ -x "$b" ] && { echo "$b"; return 0; }
    done
    echo "clickhouse-server not found: install Debian's package (apt-get install clickhouse-server)" >&2
    return 1
}

ch_start() {
    local name=${1:-ch}
    local bin
    bin=$(ch_server_bin)
    CH_DIR="$T/$name"
    CH_PORT=$(free_port)
    CH_USER=ferry_test
    CH_PASSWORD_FILE="$CH_DIR/password"
    mkdir -p "$CH_DIR/data" "$CH_DIR/tmp" "$CH_DIR/user_files" "$CH_DIR/format_schemas" "$CH_DIR/log"
    # A password with characters a URL or a shell would mangle, to catch leaks and escaping bugs.
    echo "pw-$RANDOM-$RANDOM:@%&" > "$CH_PASSWORD_FILE"
    local pw
    pw=$(head -n1 "$CH_PASSWORD_FILE" | sed 's/&/\&amp;/g')
    cat > "$CH_DIR/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger>
    <level>information</level>
    <log>$CH_DIR/log/server.log</log>
    <errorlog>$CH_DIR/log/server.err.log</errorlog>
    <console>0</console>
  </logger>
  <http_port>$CH_PORT</http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$CH_DIR/data/</path>
  <tmp_path>$CH_DIR/tmp/</tmp_path>
  <user_files_path>$CH_DIR/user_files/</user_files_path>
  <format_schema_path>$CH_DIR/format_schemas/</format_schema_path>
  <users_config>$CH_DIR/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <keep_alive_timeout>30</keep_alive_timeout>
  <max_concurrent_queries>32</max_concurrent_queries>
</yandex>
EOF
    cat > "$CH_DIR/users.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage><max_threads>2</max_threads></default></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
    <$CH_USER><password>$pw</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></$CH_USER>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
EOF
    bg_start "$CH_DIR/log/stdout.log" "$bin" --config-file="$CH_DIR/config.xml"
    CH_PID=$BG_PID
    CH_URL="http://127.0.0.1:$CH_PORT"
    if ! wait_for 60 curl -sSf --max-time 2 "$CH_URL/?query=SELECT%201"; then
        echo "clickhouse-server did not answer on $CH_URL within 60 s; its logs:" >&2
        tail -n 20 "$CH_DIR/log/stdout.log" "$CH_DIR/log/server.err.log" >&2 2>/dev/null || true
        return 1
    fi
}

ch_sql() {
    curl -sS --fail-with-body --max-time 60 "$CH_URL/" --data-binary "$1"
}

ch_stop() {
    kill -TERM "$CH_PID" 2>/dev/null || return 0
    local i
    for i in $(seq 1 200); do kill -0 "$CH_PID" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$CH_PID" 2>/dev/null || true
}

ch_kill() {
    kill -KILL "$CH_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do kill -0 "$CH_PID" 2>/dev/null || return 0; sleep 0.1; done
}
