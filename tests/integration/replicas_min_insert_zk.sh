# replicas_min_insert.sh on a ZooKeeper catalog: the router records the slices a stopped replica
# missed in ZooKeeper before it acknowledges, the repair reads and clears them there.
export REPLICAS_CATALOG=zk
source "$FERRY_SOURCE_DIR/tests/integration/replicas_min_insert.sh"
