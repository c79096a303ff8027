# The ZooKeeper catalog's slice packs (docs/catalog.md "Slice packs on ZooKeeper",
# tests/unit/test_zk_packs.c) on a real Apache ZooKeeper started here on a free loopback port:
# the packs against the records after every kind of write, a race and a rolled-back batch,
# unusable and damaged packs, and the conversion of a catalog of layout 2.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

suite=$FERRY_BUILD_DIR/tests/test_zk_packs
[ -x "$suite" ] || fail "$suite is not built"

zk_start
TMPDIR=$T FERRY_TEST_CATALOG="zk://$ZK_HOSTPORT" "$suite" >"$T/zk.log" 2>&1 || { cat "$T/zk.log"; fail "slice pack suite failed on ZooKeeper"; }
grep -q "PASSED.*5 test" "$T/zk.log" || { cat "$T/zk.log"; fail "ZooKeeper: not every test passed"; }
ok "slice packs follow every write, fall back, are rebuilt and converted on ZooKeeper"
zk_stop
done_testing
