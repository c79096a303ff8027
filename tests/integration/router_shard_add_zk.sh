# router_shard_add.sh on a ZooKeeper catalog: the router follows shards added and removed through
# ZooKeeper's watch instead of SQLite's polling.
export SHARD_ADD_CATALOG=zk
source "$FERRY_SOURCE_DIR/tests/integration/router_shard_add.sh"
