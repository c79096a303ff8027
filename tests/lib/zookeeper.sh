# A real Apache ZooKeeper (Debian's `zookeeper` package) for tests and benchmarks. Source it after
# tests/lib/harness.sh (it uses $T, free_port, bg_start and wait_for).
#   zk_start [DIR]   starts a standalone server on a free 127.0.0.1 port (heap: $ZK_XMX, default
#                    256m); sets ZK_PORT, ZK_PID,
#                    ZK_HOSTPORT ("127.0.0.1:PORT"); waits until it answers `ruok` with `imok`
#   zk_url CHROOT    prints "zk://127.0.0.1:PORT/CHROOT" for ferry
#   zk_stop          SIGTERM by PID, then waits (harness also kills it at exit)
# tickTime is 500 ms so a session can time out in 1 s (sessions are 2..20 ticks), which keeps
# lease-expiry tests short.

zk_ruok() {
    local reply
    exec 9<>"/dev/tcp/127.0.0.1/$ZK_PORT" || return 1
    printf 'ruok' >&9
    reply=$(timeout 2 cat <&9 || true)
    exec 9<&- 9>&-
    [ "$reply" = imok ]
}

zk_start() {
    local dir=${1:-$T/zk}
    mkdir -p "$dir/data"
    ZK_PORT=$(free_port)
    cat >"$dir/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr,stat
CFG
    local cp=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar
    [ -f /usr/share/java/slf4j-nop.jar ] && cp=$cp:/usr/share/java/slf4j-nop.jar
    bg_start "$dir/zk.log" java -Xms32m "-Xmx${ZK_XMX:-256m}" -XX:+UseSerialGC -cp "$cp" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
    ZK_PID=$BG_PID
    ZK_HOSTPORT=127.0.0.1:$ZK_PORT
    if ! wait_for 60 zk_ruok; then
        echo "ZooKeeper did not answer ruok on port $ZK_PORT; log:" >&2
        tail -n 30 "$dir/zk.log" >&2 || true
        return 1
    fi
}

zk_url() { echo "zk://$ZK_HOSTPORT/${1#/}"; }

zk_stop() {
    [ -n "${ZK_PID:-}" ] || return 0
    kill -TERM "$ZK_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$ZK_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$ZK_PID" 2>/dev/null || true
    ZK_PID=
}
