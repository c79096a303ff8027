#!/usr/bin/env bash
# Runs a command with TMPDIR on a fresh journaled ext4 (a sparse image file mounted through a loop
# device), then unmounts and removes it: the file system a ClickHouse server's data disk has, for
# benchmarks whose labs would otherwise run in this machine's /tmp, an ext4 without a journal
# where every new file pays a scan of recently freed inodes (bench/file_create_floor.sh,
# docs/benchmarks.md "Session 31"). Needs root (mount) and mkfs.ext4.
#   bash bench/on_journaled_fs.sh [-s SIZE] COMMAND [ARGS...]
# SIZE: the image's size (default 30G, sparse: only what the command writes takes room). The
# image is made in ${FS_IMAGE_DIR:-/var/tmp}; the command's exit status is the script's.
set -euo pipefail
size=30G
if [ "${1:-}" = -s ]; then
    size=${2:?"-s needs a size, e.g. -s 20G"}
    shift 2
fi
die() { echo "bench/on_journaled_fs.sh: $*" >&2; exit 2; }
[ $# -gt 0 ] || die "usage: bash bench/on_journaled_fs.sh [-s SIZE] COMMAND [ARGS...]"
[ "$(id -u)" = 0 ] || die "mounting needs root"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 is missing (Debian: e2fsprogs)"
work=$(mktemp -d "${FS_IMAGE_DIR:-/var/tmp}/ferry-jfs.XXXXXX")
img=$work/fs.img mnt=$work/mnt
cleanup() {
    local rc=$?
    if mountpoint -q "$mnt"; then
        umount "$mnt" || umount -l "$mnt" ||
            echo "bench/on_journaled_fs.sh: could not unmount $mnt" >&2
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT INT TERM
truncate -s "$size" "$img"
mkfs.ext4 -q -m 0 "$img"
mkdir "$mnt"
mount -o loop "$img" "$mnt"
chmod 1777 "$mnt"
echo "bench/on_journaled_fs.sh: TMPDIR=$mnt (ext4 with a journal on $img)" >&2
TMPDIR=$mnt "$@"
