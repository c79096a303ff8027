# The compact scans, the plan's view and plan, and the cluster status against the records they
# stand for (tests/unit/test_plan_scan.c) on a real Apache ZooKeeper started here on a free
# loopback port: the scans' other backend (the unit test covers SQLite; the SQLite-only test of a
# scan beside a writer's transaction is skipped here).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

suite=$FERRY_BUILD_DIR/tests/test_plan_scan
[ -x "$suite" ] || fail "$suite is not built"

zk_start
TMPDIR=$T FERRY_TEST_CATALOG="zk://$ZK_HOSTPORT" "$suite" >"$T/zk.log" 2>&1 || { cat "$T/zk.log"; fail "plan scan suite failed on ZooKeeper"; }
grep -q "PASSED.*7 test" "$T/zk.log" || { cat "$T/zk.log"; fail "ZooKeeper: not every test passed"; }
ok "compact scans, plan and status agree with the records on ZooKeeper"
zk_stop
done_testing
