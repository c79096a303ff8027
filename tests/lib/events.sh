# Shell helpers for tests (and bench scripts) that route the managed table `events` through
# `ferry router`: the table's config section and the usual table on the lab's nodes. Source after
# harness.sh and lab.sh (events_table uses chq).

# events_conf CONF [LINE...]: appends to the config file CONF the section [table "events"]
# (database default, shared layout, tenant/day/split columns, split by uid) and a [router]
# section holding `auth = none` (these tests are about routing, not users; the routers they start
# listen on 127.0.0.1, where auth = none is accepted) and LINE..., one config line each
# ("passthrough = URL", "shard_timeout = 20s"); a LINE may start a later section too
# ("[splits]"). With --users first, no `auth = none`: the router authenticates the catalog's
# users (tests/integration/router_auth.sh).
events_conf() {
    local auth=1 conf line
    if [ "$1" = --users ]; then auth=0; shift; fi
    conf=$1
    shift
    {
        cat <<'EOF'
[table "events"]
database = default
layout = shared
tenant_column = tenant
day_column = day
split_column = split
split_key = uid
[router]
EOF
        [ "$auth" = 0 ] || echo "auth = none"
        for line in "$@"; do printf '%s\n' "$line"; done
    } >>"$conf"
}

# events_lab DIR [LINE...]: a lab of one node in DIR whose ferry.conf gets events_conf with
# "passthrough = " the node's URL and LINE..., then ferry init; sets EV_CONF (DIR/ferry.conf) and
# EV_NODE (the node's URL). The table is not created (events_table).
events_lab() {
    local dir=$1
    shift
    lab_up "$dir" --nodes 1
    EV_CONF=$dir/ferry.conf
    EV_NODE=$(lab_url "$dir" node1)
    events_conf "$EV_CONF" "passthrough = $EV_NODE" "$@"
    "$FERRY_BIN" init --config "$EV_CONF" >/dev/null || fail "init"
}

# events_table [--tiered] URL...: creates on every server URL the table events (tenant String,
# day UInt32, split UInt16, uid UInt64, id UInt64, v String), partitioned by (tenant, day, split),
# ordered by id, with a deduplication window of 10000 blocks (a router retry with the same token
# is dropped); --tiered: storage_policy 'tiered' (the lab's hot + cold disks).
events_table() {
    local settings="non_replicated_deduplication_window = 10000" u
    if [ "${1:-}" = --tiered ]; then
        settings="$settings, storage_policy = 'tiered'"
        shift
    fi
    for u in "$@"; do
        chq "$u" "CREATE TABLE events (tenant String, day UInt32, split UInt16, uid UInt64, id UInt64, v String)
     ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY id
     SETTINGS $settings" >/dev/null
    done
}
