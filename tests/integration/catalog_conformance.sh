# The catalog conformance suite (tests/unit/test_catalog_conformance.c) against both backends:
# SQLite, and a real Apache ZooKeeper started here on a free loopback port.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

suite=$FERRY_BUILD_DIR/tests/test_catalog_conformance
[ -x "$suite" ] || fail "$suite is not built"

TMPDIR=$T FERRY_TEST_CATALOG= "$suite" >"$T/sqlite.log" 2>&1 || { cat "$T/sqlite.log"; fail "conformance suite failed on SQLite"; }
# SQLite skips the session-expiry test, ZooKeeper the SQLite durability test
grep -q "PASSED.*19 test" "$T/sqlite.log" || { cat "$T/sqlite.log"; fail "SQLite: not every test passed"; }
ok "conformance suite passes on SQLite"

zk_start
TMPDIR=$T FERRY_TEST_CATALOG="zk://$ZK_HOSTPORT" "$suite" >"$T/zk.log" 2>&1 || { cat "$T/zk.log"; fail "conformance suite failed on ZooKeeper"; }
grep -q "PASSED.*19 test" "$T/zk.log" || { cat "$T/zk.log"; fail "ZooKeeper: not every test passed"; }
ok "conformance suite passes on ZooKeeper (including session expiry)"
zk_stop
done_testing
