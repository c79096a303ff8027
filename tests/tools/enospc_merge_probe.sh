#!/bin/bash
# A probe of ClickHouse itself, not of ferry (docs/reliability.md, "ClickHouse commits broken
# parts when its disk fills"): does a merge that runs out of disk space commit a part with an
# empty or short file? One lab node (ferry-node, the embedded ClickHouse 26.7) on a small
# loop-mounted ext4 (no blocks reserved for root, as the chaos soak's node4), inserts of 20,000
# rows every 30 ms into two partitions (merges run all the time), and ROUNDS times: 3 s of work,
# then the file system filled to the last block with fallocate for 3 s, then freed. ferry runs no
# flow: only INSERTs and ClickHouse's own merges. At the end every active part is read whole;
# an unreadable one is printed as BROKEN with ClickHouse's error, and the exit status is 1.
#
#   sudo FERRY_BIN=build/ferry bash tests/tools/enospc_merge_probe.sh [ROUNDS] [TABLE_SETTINGS]
#
# TABLE_SETTINGS is appended to the CREATE TABLE (e.g. "SETTINGS fsync_after_insert = 1,
# fsync_part_directory = 1, min_rows_to_fsync_after_merge = 1"). Needs root (mount), mkfs.ext4,
# fallocate, curl and jq. Leaves nothing behind: the lab is stopped and the image removed
# (PROBE_KEEP_LOG=FILE keeps a copy of ClickHouse's log; PROBE_STRACE=FILE writes there every
# write-side system call of the server that failed, from strace).
set -u
ROUNDS=${1:-20}
TSET=${2:-}
FERRY_BIN=${FERRY_BIN:-build/ferry}
[ "$(id -u)" = 0 ] || { echo "enospc_merge_probe: needs root (a loop mount)" >&2; exit 2; }
D=$(mktemp -d /tmp/enospc-probe.XXXXXX)
W=
cleanup() {
    touch "$D/stop"
    [ -n "$W" ] && wait "$W" 2>/dev/null
    "$FERRY_BIN" lab down --dir "$D/mnt/lab" >/dev/null 2>&1
    [ -n "${PROBE_KEEP_LOG:-}" ] && cp "$D/mnt/lab/node1/data/clickhouse.log" "$PROBE_KEEP_LOG"
    umount "$D/mnt" 2>/dev/null || umount -l "$D/mnt" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
truncate -s 300M "$D/img"
mkfs.ext4 -q -m 0 -F "$D/img" && mkdir -p "$D/mnt" && mount -o loop "$D/img" "$D/mnt" || exit 2
"$FERRY_BIN" lab up --dir "$D/mnt/lab" --nodes 1 --timeout 90 >/dev/null 2>"$D/up.err" ||
    { cat "$D/up.err" >&2; exit 2; }
U=$("$FERRY_BIN" lab status --dir "$D/mnt/lab" --json | jq -r '.nodes[0].http')
q() { curl -sS "$U/" --data-binary "$1"; }
S=
if [ -n "${PROBE_STRACE:-}" ]; then
    # the server's failed write-side system calls, to tell whether the kernel refused a write
    strace -f -qq -Z -y -e trace=write,pwrite64,writev,pwritev,pwritev2,fallocate,ftruncate,fsync,fdatasync,close \
        -o "$PROBE_STRACE" -p "$("$FERRY_BIN" lab status --dir "$D/mnt/lab" --json | jq -r '.nodes[0].pid')" &
    S=$!
    sleep 1
fi
q "CREATE TABLE t (k UInt32, v UInt64, s String) ENGINE = MergeTree PARTITION BY k % 2
    ORDER BY v $TSET" || exit 2
( i=0; while [ ! -e "$D/stop" ]; do
    q "INSERT INTO t SELECT number % 4, number + $i * 100000, toString(cityHash64(number, $i))
        FROM numbers(20000)" >/dev/null 2>&1
    i=$((i + 1)); sleep 0.03; done ) &
W=$!
for round in $(seq 1 "$ROUNDS"); do
    sleep 3
    avail=$(df -B1 --output=avail "$D/mnt" | tail -1)
    fallocate -l "$avail" "$D/mnt/filler" 2>/dev/null ||
        fallocate -l $((avail - 65536)) "$D/mnt/filler" 2>/dev/null
    sleep 3
    rm -f "$D/mnt/filler"
done
touch "$D/stop"; wait "$W"; W=
[ -n "$S" ] && kill "$S" && wait "$S" 2>/dev/null
sleep 3
broken=0
parts=$(q "SELECT name FROM system.parts WHERE active AND table = 't' ORDER BY name")
for p in $parts; do
    r=$(q "SELECT count() FROM t WHERE _part = '$p' AND NOT ignore(*)" 2>&1)
    case "$r" in *Exception*) broken=$((broken + 1)); echo "BROKEN $p: ${r:0:300}" ;; esac
done
enospc=$(grep -c "No space left on device" "$D/mnt/lab/node1/data/clickhouse.err.log" || true)
refused=$(grep -c "NOT_ENOUGH_SPACE" "$D/mnt/lab/node1/data/clickhouse.err.log" || true)
echo "rounds=$ROUNDS parts=$(wc -w <<<"$parts") broken=$broken enospc_errors_logged=$enospc" \
     "not_enough_space_refusals=$refused"
[ "$broken" = 0 ]
