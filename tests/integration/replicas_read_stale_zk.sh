# replicas_read_stale.sh on a ZooKeeper catalog: the router records the slice a stopped replica
# missed in ZooKeeper, every router takes the record (and its removal by ferry repair) through
# its routing reload from there.
export REPLICAS_CATALOG=zk
source "$FERRY_SOURCE_DIR/tests/integration/replicas_read_stale.sh"
