# `ferry part verify`: usage errors, and the real 26.7 part kept in tests/unit/data checked in
# text and JSON, intact and with one flipped byte.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

FIX=$FERRY_SOURCE_DIR/tests/unit/data/part_26_7

expect_exit 0 "$FERRY_BIN" help part
assert_contains "$OUT" "usage: ferry part verify" "help part"
expect_exit 2 "$FERRY_BIN" part
assert_eq "" "$OUT" "nothing on stdout without a subcommand"
expect_exit 2 "$FERRY_BIN" part frobnicate
assert_contains "$ERR" "unknown subcommand 'frobnicate'" "unknown subcommand"
expect_exit 2 "$FERRY_BIN" part verify
assert_contains "$ERR" "give at least one part folder" "no folder"
expect_exit 2 "$FERRY_BIN" part verify --bogus "$FIX"
assert_eq "" "$OUT" "nothing on stdout for a bad option"
ok "usage errors exit 2 with nothing on stdout"

expect_exit 0 "$FERRY_BIN" part verify "$FIX"
assert_contains "$OUT" "ok (15 files" "fixture verifies"
expect_exit 0 "$FERRY_BIN" part verify --json "$FIX"
assert_eq "True 15 []" "$(python3 -c 'import json,sys; d=json.load(sys.stdin); p=d["parts"][0]; print(d["ok"], p["files"], p["problems"])' <<<"$OUT")" "json"
ok "intact part: text and JSON"

cp -a "$FIX" "$T/p"
python3 -c 'import sys; f=open(sys.argv[1],"r+b"); f.seek(3000); b=f.read(1); f.seek(3000); f.write(bytes([b[0]^1]))' "$T/p/raw.bin"
expect_exit 1 "$FERRY_BIN" part verify --json "$FIX" "$T/p"
assert_eq "False True False raw.bin hash mismatch" "$(python3 -c 'import json,sys; d=json.load(sys.stdin); a,b=d["parts"]; print(d["ok"], a["ok"], b["ok"], b["problems"][0]["name"], b["problems"][0]["status"])' <<<"$OUT")" "json damaged"
ok "one damaged part among two: exit 1, named in JSON"

done_testing
