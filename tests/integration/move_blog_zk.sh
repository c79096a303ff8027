# move_blog.sh on a ZooKeeper catalog: the blog's move (cold partitions as pointer files, a writer
# following the routing table, identical data, nothing left behind, refusals journal nothing)
# with its journal, lease and routing switch in ZooKeeper.
export MOVE_CATALOG=zk
source "$FERRY_SOURCE_DIR/tests/integration/move_blog.sh"
