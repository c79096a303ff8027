# The sha256 scores ferry computes equal the reference Python (hashlib, math.log) exactly, for
# a few hundred slice/shard pairs, and `ferry place` picks the reference's argmax for slices
# with no constraint in play (single-split tenants, no capacity).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

python3 - "$T" <<'PY'
import random, sys
rnd = random.Random(20261129)
t = sys.argv[1]
with open(f"{t}/slices.tsv", "w") as f:
    for i in range(60):
        name = rnd.choice(["tenant", "t", "acme-", "x_"]) + str(rnd.randrange(10**rnd.randrange(1, 9)))
        f.write(f"{name}\t{rnd.randrange(0, 40)}\t{rnd.randrange(1, 10**9)}\n")
with open(f"{t}/shards.tsv", "w") as f:
    for j in range(7):
        f.write(f"shard-{j}.dc{rnd.randrange(3)}\t{rnd.choice([1, 1, 2, 0.5, 3.25])}\n")
PY
# duplicates are possible in random names: drop them
sort -u -t$'\t' -k1,2 "$T/slices.tsv" >"$T/s.tsv"

expect_exit 0 "$FERRY_BIN" place --slices "$T/s.tsv" --shards "$T/shards.tsv" --scores
printf '%s\n' "$OUT" >"$T/scores.txt"
pairs=$(wc -l <"$T/scores.txt")
[ "$pairs" -ge 300 ] || fail "expected a few hundred pairs, got $pairs"
python3 - "$T/scores.txt" "$T/shards.tsv" <<'PY' || fail "scores differ from the Python reference"
import hashlib, math, sys
weights = dict((l.split("\t")[0], float(l.split("\t")[1])) for l in open(sys.argv[2]))
bad = 0
for line in open(sys.argv[1]):
    slice_id, shard, hexh, score = line.rstrip("\n").split("\t")
    h = int(hashlib.sha256(f"{slice_id}:{shard}".encode()).hexdigest()[:16], 16)
    ref = -weights[shard] / math.log((h + 0.5) / 2**64)
    if int(hexh, 16) != h or float(score) != ref:
        bad += 1
        print("mismatch", slice_id, shard, hexh, hex(h), score, repr(ref), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok "sha256 scores equal the reference for $pairs pairs"

# the reference's place(): argmax of the score, for every slice of a single-split tenant
cut -f1 "$T/s.tsv" | sort | uniq -u >"$T/single.txt"
expect_exit 0 "$FERRY_BIN" place --slices "$T/s.tsv" --shards "$T/shards.tsv"
printf '%s\n' "$OUT" >"$T/placed.txt"
python3 - "$T/placed.txt" "$T/shards.tsv" "$T/single.txt" <<'PY' || fail "placement differs from the reference argmax"
import hashlib, math, sys
def score(x, s, w):
    h = int(hashlib.sha256(f"{x}:{s}".encode()).hexdigest()[:16], 16)
    return -w / math.log((h + 0.5) / 2**64)
shards = dict((l.split("\t")[0], float(l.split("\t")[1])) for l in open(sys.argv[2]))
single = set(l.strip() for l in open(sys.argv[3]))
checked = 0
for line in open(sys.argv[1]):
    tenant, split, shard = line.rstrip("\n").split("\t")
    if tenant not in single:
        continue
    x = f"{tenant}/split{split}"
    want = max(sorted(shards), key=lambda s: score(x, s, shards[s]))
    assert shard == want, (x, shard, want)
    checked += 1
assert checked >= 20, checked
PY
ok "place agrees with the reference argmax"

done_testing
