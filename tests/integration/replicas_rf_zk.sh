# replicas_rf.sh on a ZooKeeper catalog: clone moves (a replica added), repair and replica drops
# with their journal, routes and part records in ZooKeeper.
export REPLICAS_CATALOG=zk
source "$FERRY_SOURCE_DIR/tests/integration/replicas_rf.sh"
