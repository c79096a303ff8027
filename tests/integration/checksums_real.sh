# `ferry part verify` against parts written by real ClickHouse: 26.7 (libchdb, through the plain
# tests/tools/chdb_exec driver) with wide, compact, projection, skip-index, NONE/LZ4/ZSTD codec
# parts, and Debian's clickhouse-server 18.16. Every intact part must verify; corruptions
# (a flipped byte in a .bin and in a mark file, a truncated file, a deleted file, an extra file,
# a damaged checksums.txt) must be named; ClickHouse's CHECK TABLE must agree on the flipped byte.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"

LIBCHDB=$FERRY_CACHE/chdb-26.7.3-stable.1/libchdb.so
CHDB_EXEC=$FERRY_BUILD_DIR/tests/chdb_exec
[ -f "$LIBCHDB" ] || fail "libchdb not found at $LIBCHDB (run scripts/setup.sh)"
[ -x "$CHDB_EXEC" ] || fail "$CHDB_EXEC not built"
ch26() { "$CHDB_EXEC" "$LIBCHDB" "$T/ch26" "$@"; }

# flip FILE OFFSET: xor one byte of FILE with 0xff.
flip() {
    python3 -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0xff]))' "$1" "$2"
}

# sum_sizes JSON: sum of expected_size over the files of the first part in --json --verbose output.
json_field() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

# ---- ClickHouse 26.7 ----
COLS="k UInt64, s String, d Date, a Array(UInt32), n Nullable(Int32), lc LowCardinality(String),
      raw UInt64 CODEC(NONE), z String CODEC(ZSTD(3))"
mkdir -p "$T/ch26"
ch26 "CREATE TABLE default.w ($COLS, INDEX ix s TYPE bloom_filter GRANULARITY 1,
        PROJECTION p (SELECT d, count() GROUP BY d))
      ENGINE = MergeTree ORDER BY k PARTITION BY d
      SETTINGS min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0" \
     "CREATE TABLE default.c (k UInt64, s String, raw UInt64 CODEC(NONE)) ENGINE = MergeTree ORDER BY k
      SETTINGS min_bytes_for_wide_part = 1000000000, min_rows_for_wide_part = 1000000000" \
     "CREATE TABLE default.w_good AS default.w" \
     "CREATE TABLE default.w_bad AS default.w" \
     "INSERT INTO default.w SELECT number, toString(number * 7), toDate('2026-01-01') + number % 2,
        range(number % 5), if(number % 3 = 0, NULL, number), toString(number % 10), number * 3,
        repeat('z', number % 20) FROM numbers(60000)" \
     "INSERT INTO default.w SELECT number + 60000, toString(number), toDate('2026-01-01'), [1, 2],
        NULL, 'x', number, 'q' FROM numbers(30000)" \
     "OPTIMIZE TABLE default.w FINAL" \
     "INSERT INTO default.c SELECT number, repeat('x', number % 50), number FROM numbers(50000)" \
     >/dev/null || fail "ClickHouse 26.7 could not create the parts"
ch26 "SELECT table, name, part_type, bytes_on_disk, path FROM system.parts
      WHERE database = 'default' AND active ORDER BY table, name" >"$T/parts26.tsv"
ch26 "SELECT name, data_paths[1] FROM system.tables WHERE database = 'default'" >"$T/tables26.tsv"
assert_eq 3 "$(wc -l <"$T/parts26.tsv")" "active parts in 26.7"
assert_contains "$(cut -f3 "$T/parts26.tsv" | sort -u | tr '\n' ' ')" "Compact Wide" "part types"

while IFS=$'\t' read -r table name type bytes path; do
    expect_exit 0 "$FERRY_BIN" part verify --json --verbose "$path"
    assert_eq True "$(json_field 'd["ok"]' <<<"$OUT")" "$table/$name verifies"
    # checksums.txt sizes add up to what ClickHouse reports as the part's size on disk.
    assert_eq "$bytes" "$(json_field 'sum(f["expected_size"] for f in d["parts"][0]["files_detail"])' \
        <<<"$OUT")" "$table/$name: sizes in checksums.txt vs bytes_on_disk"
    ok "26.7 $type part $table/$name verifies ($bytes bytes)"
done <"$T/parts26.tsv"

WIDE=$(awk -F'\t' '$1 == "w" && $2 ~ /^20260101/ {print $5}' "$T/parts26.tsv")
WNAME=$(basename "$WIDE")
COMPACT=$(awk -F'\t' '$1 == "c" {print $5}' "$T/parts26.tsv")
[ -f "$WIDE/p.proj/checksums.txt" ] || fail "the wide part has no projection folder"
expect_exit 0 "$FERRY_BIN" part verify --verbose "$WIDE"
assert_contains "$OUT" "p.proj/d.bin" "projection files are checked"
ok "projection checked against its own checksums.txt"

# Corruptions, each on a fresh copy of the wide part.
fresh() { rm -rf "$T/copy"; cp -a "$WIDE" "$T/copy"; }

fresh; flip "$T/copy/k.bin" 1000
expect_exit 1 "$FERRY_BIN" part verify "$T/copy"
assert_contains "$OUT" "hash mismatch  k.bin" "flipped .bin byte"
assert_contains "$OUT" "DAMAGED (1 of" "only one file damaged"
ok "a flipped byte in k.bin is named"

fresh; MRK=$(cd "$T/copy" && ls s.*mrk* | head -1); flip "$T/copy/$MRK" 20
expect_exit 1 "$FERRY_BIN" part verify --json "$T/copy"
assert_eq "$MRK hash mismatch" "$(json_field '" ".join((d["parts"][0]["problems"][0]["name"], d["parts"][0]["problems"][0]["status"]))' <<<"$OUT")" "flipped mark byte"
ok "a flipped byte in the mark file $MRK is named"

fresh; truncate -s -1 "$T/copy/s.bin"
expect_exit 1 "$FERRY_BIN" part verify "$T/copy"
assert_contains "$OUT" "size mismatch  s.bin" "truncated file"
ok "a truncated file is named"

fresh; rm "$T/copy/primary.cidx"
expect_exit 1 "$FERRY_BIN" part verify "$T/copy"
assert_contains "$OUT" "missing        primary.cidx" "deleted file"
ok "a deleted file is reported missing"

fresh; echo junk >"$T/copy/stray.bin"; rm -f "$T/copy/p.proj/d.bin"
expect_exit 1 "$FERRY_BIN" part verify "$T/copy"
assert_contains "$OUT" "unexpected     stray.bin" "extra file"
assert_contains "$OUT" "missing        p.proj/d.bin" "file missing inside the projection"
ok "an extra file and a file missing in a projection are reported"

fresh; flip "$T/copy/checksums.txt" 40
expect_exit 1 "$FERRY_BIN" part verify "$T/copy"
assert_contains "$OUT" "DAMAGED" "damaged checksums.txt"
assert_contains "$OUT" "checksum" "damaged checksums.txt names the block checksum"
ok "a damaged checksums.txt is reported"

cp -a "$COMPACT" "$T/compact"; flip "$T/compact/data.bin" 5000
expect_exit 1 "$FERRY_BIN" part verify "$T/compact"
assert_contains "$OUT" "hash mismatch  data.bin" "compact part data.bin"
ok "a flipped byte in a compact part's data.bin is named"

expect_exit 2 "$FERRY_BIN" part verify "$T/no-such-part"
assert_eq "" "$OUT" "nothing on stdout for a missing folder"
assert_contains "$ERR" "is not a folder" "missing folder message"
expect_exit 2 "$FERRY_BIN" part verify "$T/ch26"
assert_contains "$ERR" "no checksums.txt" "not a part folder"
ok "bad input exits 2"

# The receiver's flow: the verified part attaches and serves the same rows; ClickHouse's own
# CHECK TABLE flags the byte ferry flagged.
GOOD_DETACHED=$(awk -F'\t' '$1 == "w_good" {print $2}' "$T/tables26.tsv")detached
BAD_DETACHED=$(awk -F'\t' '$1 == "w_bad" {print $2}' "$T/tables26.tsv")detached
cp -a "$WIDE" "$GOOD_DETACHED/$WNAME"
cp -a "$WIDE" "$BAD_DETACHED/$WNAME"; flip "$BAD_DETACHED/$WNAME/k.bin" 1000
expect_exit 0 "$FERRY_BIN" part verify "$GOOD_DETACHED/$WNAME"
expect_exit 1 "$FERRY_BIN" part verify "$BAD_DETACHED/$WNAME"
RES=$(ch26 "ALTER TABLE default.w_good ATTACH PART '$WNAME'" \
           "ALTER TABLE default.w_bad ATTACH PART '$WNAME'" \
           "SELECT count(), sum(k), uniqExact(s) FROM default.w WHERE d = '2026-01-01'" \
           "SELECT count(), sum(k), uniqExact(s) FROM default.w_good" \
           "CHECK TABLE default.w_good SETTINGS check_query_single_value_result = 1" \
           "CHECK TABLE default.w_bad SETTINGS check_query_single_value_result = 1") \
    || fail "attach/check in 26.7 failed"
mapfile -t L <<<"$RES"
assert_eq "${L[0]}" "${L[1]}" "attached part serves the source's rows"
assert_eq "1 0" "${L[2]} ${L[3]}" "CHECK TABLE: intact part passes, flipped byte fails"
ok "verified part attaches with identical data; ClickHouse's CHECK TABLE agrees (${L[0]})"

# ---- ClickHouse 18.16 (Debian's clickhouse-server) ----
CH18=/usr/sbin/clickhouse-server
[ -x "$CH18" ] || fail "$CH18 missing (Debian package clickhouse-server)"
HP=$(free_port); TP=$(free_port); IP=$(free_port)
mkdir -p "$T/ch18"
cat >"$T/ch18/config.xml" <<XML
<yandex>
  <logger><level>warning</level><log>$T/ch18/server.log</log><errorlog>$T/ch18/err.log</errorlog></logger>
  <http_port>$HP</http_port><tcp_port>$TP</tcp_port><interserver_http_port>$IP</interserver_http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$T/ch18/data/</path><tmp_path>$T/ch18/tmp/</tmp_path>
  <users_config>$T/ch18/users.xml</users_config>
  <default_profile>default</default_profile><default_database>default</default_database>
  <mark_cache_size>5368709</mark_cache_size>
</yandex>
XML
cat >"$T/ch18/users.xml" <<'XML'
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
XML
bg_start "$T/ch18/stdout.log" "$CH18" --config-file="$T/ch18/config.xml"
ch18() { curl -sS --fail-with-body "http://127.0.0.1:$HP/" --data-binary "$1"; }
wait_for 30 ch18 "SELECT 1" || fail "clickhouse-server 18.16 did not start: $(tail -3 "$T/ch18/err.log" 2>/dev/null)"
assert_eq "18.16.1" "$(ch18 'SELECT version()')" "18.16 version"
ch18 "CREATE TABLE t (k UInt64, s String, d Date, a Array(UInt32)) ENGINE = MergeTree PARTITION BY d ORDER BY k" >/dev/null
ch18 "INSERT INTO t SELECT number, toString(number), toDate('2018-01-01') + number % 2, range(number % 4) FROM numbers(100000)" >/dev/null
ch18 "SELECT name, bytes_on_disk, path FROM system.parts WHERE table = 't' AND active ORDER BY name" >"$T/parts18.tsv"
assert_eq 2 "$(wc -l <"$T/parts18.tsv")" "active parts in 18.16"
while IFS=$'\t' read -r name bytes path; do
    expect_exit 0 "$FERRY_BIN" part verify --json --verbose "$path"
    # 18.16 counts the whole folder, the two unlisted files included.
    listed=$(json_field 'sum(f["expected_size"] for f in d["parts"][0]["files_detail"])' <<<"$OUT")
    unlisted=$(( $(stat -c %s "$path/checksums.txt") + $(stat -c %s "$path/columns.txt") ))
    assert_eq "$bytes" "$((listed + unlisted))" "18.16 $name: sizes vs bytes_on_disk"
    ok "18.16 part $name verifies ($bytes bytes)"
done <"$T/parts18.tsv"
P18=$(head -1 "$T/parts18.tsv" | cut -f3)
cp -a "$P18" "$T/p18"; flip "$T/p18/k.mrk" 10
expect_exit 1 "$FERRY_BIN" part verify "$T/p18"
assert_contains "$OUT" "hash mismatch  k.mrk" "18.16 flipped mark byte"
ok "a flipped byte in an 18.16 .mrk file is named"

done_testing
