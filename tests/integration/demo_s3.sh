# `ferry demo --object-store s3` against s3rver, small: the same story with the cold disk on S3.
# Every tenant verified, slices moved with their cold side as pointer files, the objects ferry
# uploaded are in the bucket (none removed by the moves), and the lab is stopped afterwards.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"

BUCKET=ferrydemo
s3rver_start "$T/s3" "$BUCKET" || fail "s3rver did not start"
printf 'S3RVER\n' >"$T/ak"; printf 'S3RVER\n' >"$T/sk"; chmod 600 "$T/sk"
keys() { (cd "$T/s3/data/$BUCKET" && find . -name '*._S3rver_object' | sed 's#^\./##; s#\._S3rver_object$##' | sort); }

L=$T/lab
_LAB_DIRS+=("$L")
"$FERRY_BIN" demo --json --dir "$L" --tenants 6 --days 2 --cold-days 1 --rows-per-day 100000 --max-parallel 4 \
    --object-store s3 --s3-endpoint "$S3RVER_ENDPOINT" --s3-bucket "$BUCKET" --s3-prefix demo/ \
    --s3-access-key-file "$T/ak" --s3-secret-key-file "$T/sk" >"$T/demo.out" 2>"$T/demo.err" ||
    fail "ferry demo on s3 failed: $(tail -20 "$T/demo.err")"
J=$(tail -n 1 "$T/demo.out")
assert_eq s3 "$(jq -r .object_store <<<"$J")" "object store"
assert_eq 0 "$(jq .verify_failures <<<"$J")" "verify failures ($(jq -r '.first_verify_failure // ""' <<<"$J"))"
assert_eq 0 "$(jq .moves_failed <<<"$J")" "no move failed"
[ "$(jq .moves <<<"$J")" -gt 0 ] || fail "no slice moved: $J"
assert_eq "$(jq '.slices * .cold_days' <<<"$J")" "$(jq .partitions_tiered <<<"$J")" "every slice's oldest day tiered"
jq -e '.cold_bytes > 0 and .cold_copied_bytes * 100 < .cold_bytes' >/dev/null <<<"$J" ||
    fail "cold side: $J (want < 1%)"
jq -e '.hot_copied_bytes >= .hot_bytes * 0.9 and .hot_copied_bytes <= .hot_bytes * 1.2' >/dev/null <<<"$J" ||
    fail "hot side: $J"
K=$(keys)
n=$(grep -c '^demo/default/events/' <<<"$K" || true)
[ "$n" -gt 0 ] || fail "no tiered object in the bucket"
assert_eq "$(jq .tier_bytes_uploaded <<<"$J")" "$(cd "$T/s3/data/$BUCKET" && find demo/default/events -name '*._S3rver_object' -printf '%s\n' | awk '{s += $1} END {print s + 0}')" "the bucket holds every byte ferry uploaded"
grep -q "lab: stopping" "$T/demo.err" || fail "the lab was not stopped"
assert_eq "" "$(pgrep -f "ferry-node --config $L/" || true)" "no node of the demo's lab left"
ok "s3: $(jq -c '{slices, moves, cold_bytes, cold_copied_bytes, hot_bytes, hot_copied_bytes}' <<<"$J"), $n objects in the bucket, lab stopped"
done_testing
