# The layers of lib/ hold in the build (scripts/layers.py; docs/architecture.md, "Layers"): no
# object calls into a higher layer, the pure core does no I/O, and only lib/net/curl_easy.c sets
# libcurl up and makes its easy handles (lib/ and src/). The check is shown to fail on a copy of
# the build's objects where one core object is replaced by one that calls the router daemon and
# opens a file, and an io object and a command's object by ones that call libcurl directly.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
L="$FERRY_SOURCE_DIR/scripts/layers.py"

expect_exit 0 python3 "$L" "$FERRY_BUILD_DIR"
assert_contains "$OUT" "base < core < io < catalog < flow < serve" "the layers named"
assert_contains "$OUT" "libcurl handles only from lib/net/curl_easy.c" "the one libcurl door"
ok "the build keeps its layers: $OUT"

# a copy of the objects, one core object (lib/sql/) replaced by a bad one
B=$T/build
mkdir -p "$B/CMakeFiles"
for layer in $(sed -n 's/^\([a-z_]*\):.*/\1/p' "$FERRY_SOURCE_DIR/lib/LAYERS"); do
    cp -r "$FERRY_BUILD_DIR/CMakeFiles/ferrycore_$layer.dir" "$B/CMakeFiles/"
done
victim=$(ls "$B/CMakeFiles/ferrycore_core.dir/lib/sql/"*.c.o | head -1)
[ -n "$victim" ] || fail "no object under lib/sql/ in $FERRY_BUILD_DIR"
cat >"$T/bad.c" <<'EOF'
#include <fcntl.h>
struct ferry_router;
int ferry_router_start(const void *opt, struct ferry_router **out, void *err);
int layer_probe(void);
int layer_probe(void) { return ferry_router_start(0, 0, 0) + open("/etc/hostname", O_RDONLY); }
EOF
cc -c -o "$victim" "$T/bad.c" || fail "cannot compile the probe"
expect_exit 1 python3 "$L" "$B"
assert_contains "$ERR" "calls ferry_router_start of lib/router/ (serve): a lower layer may not use a higher one" "a call upward"
assert_contains "$ERR" "(core) calls open: the core does no I/O" "I/O in the core"
ok "a core object calling the router daemon and opening a file is refused, each named"

# libcurl set up, or a handle made, outside lib/net/curl_easy.c: in lib/ and in src/
cat >"$T/curl.c" <<'EOF'
#include <curl/curl.h>
void *curl_probe(void);
void *curl_probe(void) { return curl_global_init(CURL_GLOBAL_DEFAULT) ? NULL : curl_easy_init(); }
EOF
victim=$B/CMakeFiles/ferrycore_io.dir/lib/objstore/s3.c.o
[ -f "$victim" ] || fail "no lib/objstore/s3.c object in $FERRY_BUILD_DIR"
cc -c -o "$victim" "$T/curl.c" || fail "cannot compile the libcurl probe"
mkdir -p "$B/CMakeFiles/ferry.dir/src"
cc -c -o "$B/CMakeFiles/ferry.dir/src/cmd_query.c.o" "$T/curl.c" || fail "cannot compile the probe"
expect_exit 1 python3 "$L" "$B"
assert_contains "$ERR" "lib/objstore/s3.c calls curl_easy_init: only lib/net/curl_easy.c" "a handle in lib/"
assert_contains "$ERR" "lib/objstore/s3.c calls curl_global_init" "libcurl set up in lib/"
assert_contains "$ERR" "src/cmd_query.c calls curl_easy_init" "a handle in src/"
ok "libcurl set up or a handle made outside lib/net/curl_easy.c is refused, in lib/ and src/"

expect_exit 2 python3 "$L" "$T/nothing"
assert_contains "$ERR" "build first" "no build"
ok "no objects: exit 2 with what to do"

done_testing
