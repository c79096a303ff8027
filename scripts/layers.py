#!/usr/bin/env python3
"""The layers of lib/, checked on the built objects (docs/architecture.md, "Layers").

Each folder of lib/ belongs to one layer; an object file may use symbols defined in its own
folder or in a folder of a lower layer, never a higher one, and the pure core may not call
anything that reaches outside the process (network, databases, processes, files). The check
reads what the linker reads: `nm` on every object of the library, so an include that slipped
through, a declaration copied by hand or a call through a macro are all caught.

It also keeps libcurl's door single: in the library and in the commands (src/), only
lib/net/curl_easy.c may call curl_global_init (not thread-safe: once per process, under
pthread_once there) or make an easy handle (curl_easy_init, curl_easy_duphandle); every other
file gets its handles from ferry_curl_new (include/ferry/curl_easy.h).

    python3 scripts/layers.py BUILD_DIR     exit 0 when every object keeps to its layer

The layers are read from lib/LAYERS, which CMakeLists.txt also builds from (one static library
per layer); a folder of lib/ that is in no layer fails the check.
"""
import collections
import glob
import os
import re
import subprocess
import sys

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_layers():
    """lib/LAYERS: [(layer, [folders])], lowest first."""
    layers = []
    with open(os.path.join(SOURCE_DIR, "lib", "LAYERS")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                layer, folders = line.split(":", 1)
                layers.append((layer.strip(), folders.split()))
    return layers


LAYERS = read_layers()

# what a pure-core object must not call: sockets, HTTP, databases, processes, loading code,
# and files (the base layer reads config files; the core gets their text)
CORE_FORBIDDEN = re.compile(
    r"^(curl_\w+|sqlite3_\w+|zoo_\w+|zookeeper_\w+|MHD_\w+|socket|connect|accept|bind|"
    r"fork|vfork|execv\w*|execl\w*|posix_spawn\w*|system|popen|dlopen|"
    r"open|open64|openat|fopen|fopen64|opendir|creat|unlink|rename|mkdir)$")


# libcurl's global set-up and easy handles: only from CURL_DOOR
CURL_DOOR = "lib/net/curl_easy.c"
CURL_DOOR_ONLY = re.compile(r"^(curl_global_\w+|curl_easy_init|curl_easy_duphandle)$")


def objects(build):
    """The library's objects of the current build (one static library per layer, named
    ferrycore_<layer>): those whose source still exists (a file moved or removed leaves its old
    object behind in the build folder)."""
    found = []
    for layer, _ in LAYERS:
        base = os.path.join(build, "CMakeFiles", f"ferrycore_{layer}.dir")
        for o in sorted(glob.glob(os.path.join(base, "lib", "*", "*.o"))):
            rel = os.path.relpath(o, base)[:-2]  # lib/<folder>/<file>.c
            if os.path.exists(os.path.join(SOURCE_DIR, rel)):
                found.append(o)
    return found


def command_objects(build):
    """The objects of the command-line tool (src/) whose source still exists."""
    base = os.path.join(build, "CMakeFiles", "ferry.dir")
    return [(o, os.path.relpath(o, base)[:-2])
            for o in sorted(glob.glob(os.path.join(base, "src", "*.o")))
            if os.path.exists(os.path.join(SOURCE_DIR, os.path.relpath(o, base)[:-2]))]


def symbols(obj, *flags):
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def curl_problem(src, sym):
    return (f"{src} calls {sym}: only {CURL_DOOR} sets libcurl up and makes its handles; "
            "use ferry_curl_new (ferry/curl_easy.h)")


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    objs = objects(sys.argv[1])
    if not objs:
        print(f"layers: no object under {sys.argv[1]}/CMakeFiles/ferrycore_<layer>.dir/lib/: "
              "build first (make build)", file=sys.stderr)
        return 2
    rank = {folder: i for i, (_, folders) in enumerate(LAYERS) for folder in folders}
    name = {i: layer for i, (layer, _) in enumerate(LAYERS)}
    folder_of = lambda o: os.path.basename(os.path.dirname(o))
    problems = []
    for folder in sorted(os.listdir(os.path.join(SOURCE_DIR, "lib"))):
        if os.path.isdir(os.path.join(SOURCE_DIR, "lib", folder)) and folder not in rank:
            problems.append(f"lib/{folder}/ is in no layer: place it in lib/LAYERS (and "
                            "docs/architecture.md)")
    defined = {}
    for o in objs:
        for s in symbols(o, "--defined-only", "-g"):
            defined[s] = folder_of(o)
    edges = collections.Counter()
    for o in objs:
        f = folder_of(o)
        if f not in rank:
            continue
        src = f"lib/{f}/{os.path.basename(o)[:-2]}"
        for s in symbols(o, "-u"):
            g = defined.get(s)
            if g and g != f and g in rank:
                edges[(f, g)] += 1
                if rank[g] > rank[f]:
                    problems.append(f"{src} ({name[rank[f]]}) calls {s} of lib/{g}/ "
                                    f"({name[rank[g]]}): a lower layer may not use a higher one")
            if name[rank[f]] == "core" and CORE_FORBIDDEN.match(s):
                problems.append(f"{src} (core) calls {s}: the core does no I/O; move the call "
                                "to an io-layer folder")
            if src != CURL_DOOR and CURL_DOOR_ONLY.match(s):
                problems.append(curl_problem(src, s))
    for o, src in command_objects(sys.argv[1]):
        for s in symbols(o, "-u"):
            if CURL_DOOR_ONLY.match(s):
                problems.append(curl_problem(src, s))
    for p in problems:
        print(f"layers: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"layers: {len(objs)} objects in {len(rank)} folders keep to "
          f"{' < '.join(layer for layer, _ in LAYERS)}; {len(edges)} folder dependencies; "
          f"libcurl handles only from {CURL_DOOR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
