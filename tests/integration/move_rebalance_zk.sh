# move_rebalance.sh on a ZooKeeper catalog: a shard added and rebalanced onto (2 moves at a time,
# a writer on a moving slice), then a shard drained and removed, with the journal, leases and
# routing in ZooKeeper.
export MOVE_CATALOG=zk
source "$FERRY_SOURCE_DIR/tests/integration/move_rebalance.sh"
