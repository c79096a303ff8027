#!/usr/bin/env bash
# What creating a move's files costs on the file system under DIR (default: ${TMPDIR:-/tmp}): 40
# folders of 22 small files each, the pointer parts a move of the 100x tenant writes on its target
# (ClickHouse's clone of them at the publish creates about as many again). Prints one JSON line:
# the wall time of the creations, of their removal, and of the same creations straight after it,
# and whether the file system keeps a journal.
#
# Why: ext4 without a journal will not reuse an inode freed in the last minute or so
# (fs/ext4/ialloc.c, recently_deleted(), checked only when there is no journal), and it looks at
# each such inode's table block to tell, one by one. Where many files were created and removed
# lately (a test suite's /tmp, a lab's folders after a few moves), every new file then costs a
# scan: 0.5-0.7 ms a file on this machine's /tmp against 0.02 ms on a journaled ext4 on the same
# disk (docs/benchmarks.md, "Session 31").
#   bash bench/file_create_floor.sh [DIR]
set -euo pipefail
base=${1:-${TMPDIR:-/tmp}}
d=$(mktemp -d "$base/ferry-create-floor.XXXXXX")
trap 'rm -rf "$d"' EXIT
dev=$(df --output=source "$d" | tail -1)
fstype=$(df --output=fstype "$d" | tail -1 | tr -d ' ')
journal=unknown
if [ "$fstype" = ext4 ]; then
    name=$(basename "$(readlink -f "$dev")")
    journal=no
    compgen -G "/proc/fs/jbd2/$name-*" >/dev/null && journal=yes
fi
python3 - "$d" "$fstype" "$journal" <<'EOF'
import json, os, shutil, sys, time
d, fstype, journal = sys.argv[1:4]
def create(root):
    t = time.monotonic()
    for i in range(40):
        p = os.path.join(root, f"part{i}")
        os.mkdir(p)
        for k in range(22):
            fd = os.open(os.path.join(p, f"file{k}"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
            os.write(fd, b"x" * 120)
            os.close(fd)
    return (time.monotonic() - t) * 1000
os.mkdir(os.path.join(d, "a"))
first = create(os.path.join(d, "a"))
t = time.monotonic()
shutil.rmtree(os.path.join(d, "a"))
removed = (time.monotonic() - t) * 1000
os.mkdir(os.path.join(d, "b"))
again = create(os.path.join(d, "b"))
print(json.dumps({"bench": "file_create_floor", "dir": d, "fstype": fstype, "journal": journal,
                  "files": 880, "create_ms": round(first, 1), "remove_ms": round(removed, 1),
                  "create_after_remove_ms": round(again, 1),
                  "loadavg": open("/proc/loadavg").read().split()[0]}))
EOF
