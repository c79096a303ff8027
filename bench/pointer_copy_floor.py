"""The durable copy of pointer parts, as cheap as this disk allows: what any move pays to give a
target the pointer files of a slice's cold parts (bench/move.sh, MOVE_FLOOR). Reads every file
of each part folder named, writes it under DEST/tmp-floor_<part>, makes all of them durable,
then renames each folder to <part> and syncs DEST. One JSON object on stdout: files, bytes, ms.

  python3 bench/pointer_copy_floor.py MODE DEST PART_DIR...

MODE: fsync8 (as ferry's agent does: each file's writeback started when it is written, then
every file fsync'd, eight threads) or syncfs (one syncfs of the file system for all of them: the
least a durable write of many files can cost on a file system with nothing else to write).
"""
import ctypes, json, os, sys, time
from concurrent.futures import ThreadPoolExecutor


def fsync_path(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    mode, dest, parts = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode not in ("fsync8", "syncfs") or not parts:
        sys.exit("usage: pointer_copy_floor.py fsync8|syncfs DEST PART_DIR...")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong,
                                     ctypes.c_uint]
    t0 = time.monotonic()
    written, nbytes, tmps = [], 0, []
    for src in parts:
        name = os.path.basename(src.rstrip("/"))
        tmp = os.path.join(dest, "tmp-floor_" + name)
        os.mkdir(tmp)
        tmps.append((tmp, os.path.join(dest, name)))
        for f in sorted(os.listdir(src)):
            with open(os.path.join(src, f), "rb") as r:
                data = r.read()
            out = os.path.join(tmp, f)
            with open(out, "wb") as w:
                w.write(data)
                w.flush()
                if mode == "fsync8":  # SYNC_FILE_RANGE_WRITE
                    libc.sync_file_range(w.fileno(), 0, 0, 2)
            written.append(out)
            nbytes += len(data)
    if mode == "fsync8":
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(fsync_path, written + [t for t, _ in tmps]))
    else:
        fd = os.open(dest, os.O_RDONLY)
        try:
            if libc.syncfs(fd) != 0:
                sys.exit("syncfs: " + os.strerror(ctypes.get_errno()))
        finally:
            os.close(fd)
    for tmp, final in tmps:
        os.rename(tmp, final)
    fsync_path(dest)
    ms = (time.monotonic() - t0) * 1000
    print(json.dumps({"mode": mode, "parts": len(parts), "files": len(written), "bytes": nbytes,
                      "ms": round(ms, 1)}))


main()
