# `ferry move`, `ferry rebalance`, `ferry shard` bad input: clear message, exit 2, nothing on
# stdout; no server needed.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

for c in move rebalance shard; do
    expect_exit 0 "$FERRY_BIN" help $c
    assert_contains "$OUT" "usage: ferry $c" "help $c"
done
ok "help move, rebalance, shard"

check() { # check CODE NEEDLE ARGS...
    local code=$1 needle=$2; shift 2
    expect_exit "$code" "$FERRY_BIN" "$@"
    assert_eq "" "$OUT" "nothing on stdout for: $*"
    assert_contains "$ERR" "$needle" "message for: $*"
}
printf '[cluster]\nname = x\ncatalog = sqlite:%s/c.db\n' "$T" >"$T/f.conf"
check 2 "needs --tenant" move --config "$T/f.conf" --tenant a --split 0
check 2 "not a split number" move --config "$T/f.conf" --tenant a --split x --to n
check 2 "--resume takes no" move --config "$T/f.conf" --resume all --tenant a
check 2 "--resume takes no" move --config "$T/f.conf" --resume all --from node1
check 2 "not milliseconds" move --config "$T/f.conf" --tenant a --split 0 --to b --grace -1
check 2 "unknown option" move --config "$T/f.conf" --bogus
check 2 "is not 1..64" rebalance --config "$T/f.conf" --max-parallel 0
check 2 "is not a size" rebalance --config "$T/f.conf" --max-bytes-per-second lots
check 2 "is not a fill spread (0 < F <= 1)" rebalance --config "$T/f.conf" --skew 0
check 2 "is not a fill spread" rebalance --config "$T/f.conf" --skew 1.5
check 2 "needs an action" shard add
check 2 "unknown action" shard grow node1
check 2 "--weight goes with add" shard drain node1 --weight 2
check 2 "positive number" shard add node1 --weight -1
# one name rule (include/ferry/names.h) with the same words as the config and placement: 128
# characters are refused before anything is read, never cut to 127
check 2 "is not a valid name (1..127 characters of A-Z a-z 0-9 _ . -, not . or ..)" \
    shard add "$(printf 'n%.0s' $(seq 128))" --config "$T/f.conf"
check 2 "is not a valid name" shard drain "bad name" --config "$T/f.conf"
env -u FERRY_CONFIG "$FERRY_BIN" move --tenant a --split 0 --to b >"$T/o" 2>"$T/e" && fail "no config accepted"
assert_contains "$(cat "$T/e")" "config" "no config"
ok "bad options: exit 2 with a message, nothing on stdout"
done_testing
