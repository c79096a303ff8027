# Slice and route records in tenant documents (docs/catalog.md "Tenant documents"):
# tests/unit/test_catalog_entries.c against SQLite and against a real ZooKeeper (there with the
# race between the backend's read of a document and its multi, the layout marker, the refusal of
# a catalog in the older layout and the document size limit).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

suite=$FERRY_BUILD_DIR/tests/test_catalog_entries
[ -x "$suite" ] || fail "$suite is not built"

TMPDIR=$T FERRY_TEST_CATALOG= "$suite" >"$T/sqlite.log" 2>&1 || { cat "$T/sqlite.log"; fail "failed on SQLite"; }
grep -q "PASSED.*5 test" "$T/sqlite.log" || { cat "$T/sqlite.log"; fail "SQLite: not every test passed"; }
ok "entry semantics on SQLite (the ZooKeeper-only tests skipped)"

zk_start
TMPDIR=$T FERRY_TEST_CATALOG="zk://$ZK_HOSTPORT" "$suite" >"$T/zk.log" 2>&1 || { cat "$T/zk.log"; fail "failed on ZooKeeper"; }
grep -q "PASSED.*7 test" "$T/zk.log" || { cat "$T/zk.log"; fail "ZooKeeper: not every test passed"; }
ok "entry semantics, layout and limits on ZooKeeper"
zk_stop
done_testing
