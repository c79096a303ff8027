# `ferry place` and `ferry plan` from outside: output format, determinism, JSON fields, and
# every kind of bad input (FILE:LINE on stderr, exit 2, nothing on stdout).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

cat >"$T/slices.tsv" <<'TSV'
# tenant	split	bytes
acme	0	1000000
acme	1	2000000
beta	0	500
gamma	0	1G
gamma	1	1G
gamma	2	1G
TSV
printf 'shard1\t1\nshard2\t1\nshard3\t1\n' >"$T/three.tsv"
printf 'shard1\t1\nshard2\t1\nshard3\t1\nshard4\t1\n' >"$T/four.tsv"

expect_exit 0 "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$T/three.tsv"
assert_eq 6 "$(printf '%s\n' "$OUT" | wc -l)" "one line per slice"
assert_eq "acme	0" "$(printf '%s\n' "$OUT" | head -1 | cut -f1,2)" "sorted by tenant, split"
printf '%s\n' "$OUT" | awk -F'\t' 'NF != 3 || $3 !~ /^shard[123]$/ { exit 1 }' ||
    fail "every line is tenant<TAB>split<TAB>shard"
# a tenant's splits on distinct shards (3 splits, 3 shards)
assert_eq 3 "$(printf '%s\n' "$OUT" | awk -F'\t' '$1 == "gamma" { print $3 }' | sort -u | wc -l)" \
    "gamma's splits apart"
first=$OUT
ok "place prints tenant, split, shard"

# determinism: shuffled input, same output
{ grep -v '^#' "$T/slices.tsv" | tac; } >"$T/shuffled.tsv"
printf 'shard3\t1\nshard1\t1\nshard2\t1\n' >"$T/three-shuffled.tsv"
expect_exit 0 "$FERRY_BIN" place --slices "$T/shuffled.tsv" --shards "$T/three-shuffled.tsv" --threads 1
assert_eq "$first" "$OUT" "same output for shuffled input"
ok "deterministic"

expect_exit 0 "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$T/four.tsv" --rf 2 --hash xxh3
printf '%s\n' "$OUT" | awk -F'\t' '{ n = split($3, a, ","); if (n != 2 || a[1] == a[2]) exit 1 }' ||
    fail "rf 2: two distinct shards per slice"
ok "rf 2"

expect_exit 0 "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$T/three.tsv" --json
python3 - "$OUT" <<'PY' || fail "place --json fields"
import json, sys
d = json.loads(sys.argv[1])
assert d["hash"] == "sha256" and d["rf"] == 1 and d["slices"] == 6
assert len(d["placements"]) == 6 and all(len(p["shards"]) == 1 for p in d["placements"])
assert sum(s["replicas"] for s in d["shards"]) == 6
PY
ok "place --json"

# zones: 4 shards in 2 zones, rf 2: every slice in both zones
printf 'shard1\t1\t-\teu-a\nshard2\t1\t-\teu-a\nshard3\t1\t-\teu-b\nshard4\t1\t-\teu-b\n' >"$T/zones.tsv"
expect_exit 0 "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$T/zones.tsv" --rf 2 --json
python3 - "$OUT" <<'PY' || fail "place with zones"
import json, sys
d = json.loads(sys.argv[1])
zone = {s["name"]: s["zone"] for s in d["shards"]}
assert zone == {"shard1": "eu-a", "shard2": "eu-a", "shard3": "eu-b", "shard4": "eu-b"}, zone
assert d["zone_relaxed"] == 0
for p in d["placements"]:
    assert len(p["shards"]) == 2 and {zone[s] for s in p["shards"]} == {"eu-a", "eu-b"}, p
PY
ok "zones: rf 2 replicas in distinct zones"

# capacity: fill target respected; too small a cluster is bad input
printf 'shard1\t1\t2G\nshard2\t1\t2G\nshard3\t1\t2G\n' >"$T/cap.tsv"
expect_exit 0 "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$T/cap.tsv" --fill 0.6
assert_eq 3 "$(printf '%s\n' "$OUT" | awk -F'\t' '$1 == "gamma" { print $3 }' | sort -u | wc -l)" \
    "each 1G slice on its own 2G shard at fill 0.6"
printf 'shard1\t1\t1G\nshard2\t1\t1G\nshard3\t1\t1G\n' >"$T/small.tsv"
expect_exit 2 "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$T/small.tsv"
assert_eq "" "$OUT" "nothing on stdout when infeasible"
assert_contains "$ERR" "below the fill target 0.85" "infeasible message"
ok "fill target"

# plan: adding a shard moves slices only to it
expect_exit 0 "$FERRY_BIN" plan --slices "$T/slices.tsv" --from "$T/three.tsv" --to "$T/four.tsv" --json
python3 - "$OUT" <<'PY' || fail "plan --json fields"
import json, sys
d = json.loads(sys.argv[1])
for k in ("slices", "moved", "moved_bytes", "moved_between_existing", "moves"):
    assert k in d, k
assert d["slices"] == 6 and d["moved_between_existing"] == 0
assert d["moved"] == len(d["moves"])
assert all(m["to"] == "shard4" for m in d["moves"])
assert all(set(m) >= {"tenant", "split", "from", "to", "bytes"} for m in d["moves"])
assert d["moved_bytes"] == sum(m["bytes"] for m in d["moves"])
PY
ok "plan --json"
expect_exit 0 "$FERRY_BIN" plan --slices "$T/slices.tsv" --from "$T/three.tsv" --to "$T/four.tsv"
assert_contains "$OUT" "plan: 6 slices" "plan text summary"
assert_contains "$OUT" "between existing shards" "plan text summary"
ok "plan text"
# draining shard3: only its slices move
printf 'shard1\t1\nshard2\t1\n' >"$T/two.tsv"
expect_exit 0 "$FERRY_BIN" plan --slices "$T/slices.tsv" --from "$T/three.tsv" --to "$T/two.tsv" --json
python3 - "$OUT" <<'PY' || fail "drain moves only shard3's slices"
import json, sys
d = json.loads(sys.argv[1])
on3 = [s for s in d["shards"] if s["name"] == "shard3"][0]["before_replicas"]
assert d["moved"] == on3 and all(m["from"] == "shard3" for m in d["moves"])
PY
ok "plan drain"

# bad input: message names the file (and line), exit 2, nothing on stdout
bad() { # bad NEEDLE ARGS...
    local needle=$1; shift
    expect_exit 2 "$FERRY_BIN" "$@"
    assert_eq "" "$OUT" "nothing on stdout for: $*"
    assert_contains "$ERR" "$needle" "message for: $*"
}
printf 'acme\t0\n' >"$T/cols.tsv"
bad "$T/cols.tsv:1: expected 3 tab-separated columns" place --slices "$T/cols.tsv" --shards "$T/three.tsv"
printf '# c\nacme 0 5\n' >"$T/malformed.tsv"
bad "$T/malformed.tsv:2: expected 3" place --slices "$T/malformed.tsv" --shards "$T/three.tsv"
printf 'acme\tx\t5\n' >"$T/split.tsv"
bad "$T/split.tsv:1: split 'x'" place --slices "$T/split.tsv" --shards "$T/three.tsv"
printf 'acme\t0\t5\nacme\t1\t5\nacme\t0\t7\n' >"$T/dup.tsv"
bad "$T/dup.tsv:3: duplicate slice acme/split0 (first at line 1)" place --slices "$T/dup.tsv" --shards "$T/three.tsv"
printf 'shard1\t1\nshard2\t-1\n' >"$T/neg.tsv"
bad "$T/neg.tsv:2: shard shard2: weight -1 must be a positive" place --slices "$T/slices.tsv" --shards "$T/neg.tsv"
printf 'shard1\t0\n' >"$T/zero.tsv"
bad "$T/zero.tsv:1: shard shard1: weight 0 must be a positive" place --slices "$T/slices.tsv" --shards "$T/zero.tsv"
printf 'shard1\t1\t2\tz\t3\n' >"$T/wide.tsv"
bad "$T/wide.tsv:1: expected 2 to 4" place --slices "$T/slices.tsv" --shards "$T/wide.tsv"
printf '# no shards yet\n' >"$T/empty.tsv"
bad "$T/empty.tsv: no shards" place --slices "$T/slices.tsv" --shards "$T/empty.tsv"
bad "$T/three.tsv: replication factor 4 is larger than the 3 shards" place --slices "$T/slices.tsv" --shards "$T/three.tsv" --rf 4
bad "unknown hash 'md5'" place --slices "$T/slices.tsv" --shards "$T/three.tsv" --hash md5
bad "--fill: '0' must be a number in (0, 1]" place --slices "$T/slices.tsv" --shards "$T/three.tsv" --fill 0
bad "--fill: '1.5' must be a number in (0, 1]" place --slices "$T/slices.tsv" --shards "$T/three.tsv" --fill 1.5
bad "$T/missing.tsv: cannot open" place --slices "$T/missing.tsv" --shards "$T/three.tsv"
bad "--slices and --shards are required" place --slices "$T/slices.tsv"
bad "$T/neg.tsv:2:" plan --slices "$T/slices.tsv" --from "$T/three.tsv" --to "$T/neg.tsv"
bad "$T/dup.tsv:3: duplicate slice" plan --slices "$T/dup.tsv" --from "$T/three.tsv" --to "$T/four.tsv" --json
bad "$T/two.tsv: replication factor 3 is larger than the 2 shards" plan --slices "$T/slices.tsv" --from "$T/three.tsv" --to "$T/two.tsv" --rf 3
ok "bad input: file:line, exit 2, empty stdout"

# shard names follow the catalog's rule (include/ferry/names.h): 100 characters are placed and
# printed whole, 128 are refused with the same words as the config and `ferry shard add`
LONG=$(printf 's%.0s' $(seq 100))
printf '%s\t1\nshard2\t1\n' "$LONG" >"$T/long.tsv"
expect_exit 0 "$FERRY_BIN" place --slices "$T/slices.tsv" --shards "$T/long.tsv"
assert_contains "$OUT" "$LONG" "a 100-character shard holds slices"
printf '%s\t1\n' "$(printf 's%.0s' $(seq 128))" >"$T/toolong.tsv"
bad "$T/toolong.tsv:1: bad shard name" place --slices "$T/slices.tsv" --shards "$T/toolong.tsv"
assert_contains "$ERR" "1..127 characters of A-Z a-z 0-9 _ . -, not . or .." "the name rule"
ok "shard names of 100 characters placed, 128 refused"

expect_exit 0 "$FERRY_BIN" help place
assert_contains "$OUT" "usage: ferry place" "help place"
expect_exit 0 "$FERRY_BIN" help plan
assert_contains "$OUT" "usage: ferry plan" "help plan"
ok "help"

done_testing
