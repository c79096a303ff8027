# Helpers for the retention, sweep and doctor tests (source after harness.sh, lab.sh, agent.sh).
#
#   rt_init LAB HOT_DAYS TENANTS...   adds [cluster] hot_days and a managed table "e" (shared
#                                     layout: PARTITION BY (t, d, s)) to LAB/ferry.conf, runs
#                                     ferry init and records the tenants in the catalog
#   rt_day N                          the UTC day N days ago as YYYYMMDD
#   rt_cold_share LAB SRC DSTS... PID  FREEZEs partition PID of e on SRC, sends its pointer parts
#                                     to table e on every DST (agents), ATTACHes them there, and
#                                     removes the freeze on SRC: DSTs then read SRC's objects
#   rt_agent LAB NODE OP JSON         agent_ok on LAB's NODE
RT_DDL="(t String, d UInt32, s UInt32, x UInt64, v String) ENGINE = MergeTree
    PARTITION BY (t, d, s) ORDER BY x SETTINGS storage_policy = 'tiered'"

rt_day() { date -u -d "$1 days ago" +%Y%m%d; }

rt_init() {
    local lab=$1 hot=$2; shift 2
    sed -i "s/^pointer_format = 5\$/pointer_format = 5\nhot_days = $hot/" "$lab/ferry.conf"
    grep -q "^hot_days = $hot" "$lab/ferry.conf" || fail "rt_init: no hot_days in $lab/ferry.conf"
    cat >>"$lab/ferry.conf" <<EOF2

[table "e"]
database = default
layout = shared
tenant_column = t
day_column = d
split_column = s
EOF2
    "$FERRY_BIN" init --config "$lab/ferry.conf" >/dev/null 2>"$T/init.err" ||
        fail "ferry init: $(cat "$T/init.err")"
    "$FERRY_BIN" catalog export --config "$lab/ferry.conf" >"$T/dump.json"
    local tenants; tenants=$(printf '%s\n' "$@" | jq -R '{name: ., splits: 1}' | jq -s .)
    jq --argjson t "$tenants" '.tenants = $t' "$T/dump.json" >"$T/dump2.json"
    rm -f "$lab"/catalog.db*
    "$FERRY_BIN" catalog import --config "$lab/ferry.conf" "$T/dump2.json" >/dev/null 2>&1 ||
        fail "catalog import failed"
}

rt_agent() {
    local lab=$1 node=$2; shift 2
    agent_ok "$(lab_url "$lab" "$node")" "$(cat "$lab/$node/agent.token")" "$@"
}

rt_cold_share() {
    local lab=$1 src=$2; shift 2
    local pid=${*: -1} dsts=("${@:1:$#-1}") fz="share$RANDOM$RANDOM"
    rt_agent "$lab" "$src" freeze "{\"database\":\"default\",\"table\":\"e\",\"partition_id\":\"$pid\",\"name\":\"$fz\"}"
    local parts; parts=$(jq -r '.parts[] | select(.kind == "pointer") | .name' <<<"$AG_BODY")
    [ -n "$parts" ] || fail "rt_cold_share: partition $pid on $src has no cold part"
    local d p
    for d in "${dsts[@]}"; do
        local durl dtok; durl=$(lab_url "$lab" "$d"); dtok=$(cat "$lab/$d/agent.token")
        for p in $parts; do
            rt_agent "$lab" "$src" send "{\"database\":\"default\",\"table\":\"e\",\"freeze\":\"$fz\",\"part\":\"$p\",\"target\":{\"url\":\"$durl\",\"token\":\"$dtok\",\"database\":\"default\",\"table\":\"${RT_TARGET_TABLE:-e}\"}}"
        done
        chq "$durl" "ALTER TABLE ${RT_TARGET_TABLE:-e} ATTACH PARTITION ID '$pid'" >/dev/null
    done
    rt_agent "$lab" "$src" remove-freeze "{\"name\":\"$fz\"}"
}

# rt_pointer_keys LAB NODE [UNDER]: the store keys the node's pointer files name (sorted, unique)
rt_pointer_keys() {
    local body='{}'
    [ -n "${3:-}" ] && body="{\"under\":\"$3\"}"
    rt_agent "$1" "$2" pointers "$body"
    jq -r '.files[].objects[].store_key // empty' <<<"$AG_BODY" | sort -u
}
