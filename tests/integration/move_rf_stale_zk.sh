# move_rf_stale.sh on a ZooKeeper catalog: the move reads the slice's repair-need record from
# ZooKeeper and copies from the replica that took every acknowledged write.
export MOVE_CATALOG=zk
source "$FERRY_SOURCE_DIR/tests/integration/move_rf_stale.sh"
