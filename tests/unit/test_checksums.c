/* Unit tests of the checksums module: CityHash v1.0.2 against values computed by real
 * ClickHouse (cityHash64() in SQL, and the hashes in a real part's checksums.txt, kept in
 * tests/unit/data/part_26_7, written by ClickHouse 26.7), the chained file hasher, ClickHouse
 * compressed blocks (LZ4 and NONE from that part), checksums.txt versions 2-4, and refusal of
 * truncated or corrupt input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/checksums.h"
#include "ferry/lines.h"
#include "ferry/part_verify.h"
#include "format/cityhash102.h"

static char *fixture_path(const char *name)
{
    const char *src = getenv("FERRY_SOURCE_DIR");
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/part_26_7/%s", src ? src : ".", name);
    return path;
}

static char *read_fixture(const char *name, size_t *len)
{
    char *data = NULL;
    ferry_err err = {0};
    if (ferry_read_file(fixture_path(name), &data, len, &err) != FERRY_OK)
        fail_msg("%s", err.msg);
    return data;
}

/* SELECT cityHash64(substring(repeat('The quick brown fox jumps over the lazy dog. ', 30), 1, n))
 * in ClickHouse 26.7: its cityHash64 is CityHash v1.0.2's CityHash64. */
static void test_cityhash64_vectors(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        uint64_t h;
    } v[] = {
        {0, 11160318154034397263ULL},    {1, 5570910369516329963ULL},
        {2, 1543931613479180149ULL},     {3, 9456065179546978676ULL},
        {4, 7426151758103449081ULL},     {5, 13426132771373433940ULL},
        {7, 12915914661088991145ULL},    {8, 8261970815632334399ULL},
        {9, 15693689613497209625ULL},    {15, 14516595473119768720ULL},
        {16, 3887581654433788716ULL},    {17, 17248679875317671279ULL},
        {31, 2921807510953238776ULL},    {32, 14343997730508542907ULL},
        {33, 4305124436332828171ULL},    {63, 9478221205505823002ULL},
        {64, 6345870380579539972ULL},    {65, 15207162842133252839ULL},
        {127, 845328721272364622ULL},    {128, 4133939211706148414ULL},
        {129, 6396544403935356846ULL},   {200, 3389940002427123551ULL},
        {255, 14285102243790657414ULL},  {256, 11396546545990856018ULL},
        {1000, 3670868610708815251ULL},
    };
    char text[2000];
    const char *fox = "The quick brown fox jumps over the lazy dog. ";
    text[0] = '\0';
    for (int i = 0; i < 30; i++)
        strcat(text, fox);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        /* Hash an exact-size heap copy so ASan sees any read past the end. */
        char *copy = malloc(v[i].n ? v[i].n : 1);
        memcpy(copy, text, v[i].n);
        uint64_t h = ferry_cityhash102_64(copy, v[i].n);
        free(copy);
        if (h != v[i].h)
            fail_msg("cityHash64 of %zu bytes: %llu, ClickHouse says %llu", v[i].n,
                     (unsigned long long)h, (unsigned long long)v[i].h);
    }
}

/* Every file of the real part hashes to what ClickHouse wrote in checksums.txt, whatever the
 * chunking: sizes from 2 bytes to 5.6 KB cover CityHash128WithSeed's short, medium and long
 * paths and the 2048-byte chaining. Compressed files also decompress to their listed
 * uncompressed size and hash. */
static void test_real_part_hashes(void **state)
{
    (void)state;
    size_t len;
    char *text = read_fixture("checksums.txt", &len);
    ferry_checksums sums;
    ferry_err err = {0};
    assert_int_equal(ferry_checksums_parse(text, len, &sums, &err), FERRY_OK);
    assert_int_equal(sums.format_version, 4);
    assert_int_equal(sums.count, 15);
    assert_non_null(ferry_checksums_find(&sums, "raw.bin"));
    assert_null(ferry_checksums_find(&sums, "columns.txt"));
    static const size_t chunks[] = {1, 7, 2047, 2048, 2049, 100000};
    int compressed_seen = 0;
    for (size_t i = 0; i < sums.count; i++) {
        const ferry_checksum_entry *e = &sums.entries[i];
        if (i)
            assert_true(strcmp(sums.entries[i - 1].name, e->name) < 0);
        size_t flen;
        char *data = read_fixture(e->name, &flen);
        assert_int_equal(flen, e->file_size);
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            ferry_part_hasher h;
            ferry_part_hasher_init(&h);
            for (size_t off = 0; off < flen; off += chunks[c])
                ferry_part_hasher_update(&h, data + off,
                                         flen - off < chunks[c] ? flen - off : chunks[c]);
            uint64_t got[2];
            ferry_part_hasher_final(&h, got);
            if (got[0] != e->file_hash[0] || got[1] != e->file_hash[1])
                fail_msg("%s (%zu bytes) in chunks of %zu: hash differs from checksums.txt",
                         e->name, flen, chunks[c]);
        }
        if (e->is_compressed && (unsigned char)data[16] == FERRY_CH_METHOD_ZSTD) {
            /* 26.7 compresses marks and the primary index with ZSTD(3): refused by name. */
            ferry_buf plain = FERRY_BUF_INIT;
            assert_int_equal(ferry_ch_decompress(data, flen, &plain, &err), FERRY_EUNSUPPORTED);
            assert_non_null(strstr(err.msg, "ZSTD"));
            ferry_buf_free(&plain);
        } else if (e->is_compressed) {
            compressed_seen++;
            ferry_buf plain = FERRY_BUF_INIT;
            assert_int_equal(ferry_ch_decompress(data, flen, &plain, &err), FERRY_OK);
            assert_int_equal(plain.len, e->uncompressed_size);
            ferry_part_hasher h;
            ferry_part_hasher_init(&h);
            ferry_part_hasher_update(&h, plain.data, plain.len);
            uint64_t got[2];
            ferry_part_hasher_final(&h, got);
            assert_true(got[0] == e->uncompressed_hash[0] && got[1] == e->uncompressed_hash[1]);
            ferry_buf_free(&plain);
        }
        free(data);
    }
    assert_int_equal(compressed_seen, 5); /* d, k, raw (NONE), s, s.size */
    ferry_checksums_free(&sums);
    free(text);
}

/* raw.bin is CODEC(NONE) and k.bin LZ4: the values are the rows inserted
 * (number * 1000003 as UInt64, number as UInt32, 700 rows). */
static void test_real_blocks(void **state)
{
    (void)state;
    ferry_err err = {0};
    size_t len;
    char *raw = read_fixture("raw.bin", &len);
    assert_int_equal((unsigned char)raw[16], FERRY_CH_METHOD_NONE);
    ferry_buf plain = FERRY_BUF_INIT;
    assert_int_equal(ferry_ch_decompress(raw, len, &plain, &err), FERRY_OK);
    assert_int_equal(plain.len, 700 * 8);
    for (uint64_t i = 0; i < 700; i++) {
        uint64_t v;
        memcpy(&v, plain.data + i * 8, 8);
        assert_true(v == i * 1000003);
    }
    /* A flipped payload byte is caught by the block checksum. */
    raw[100] ^= 1;
    ferry_buf_reset(&plain);
    assert_int_equal(ferry_ch_decompress(raw, len, &plain, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "damaged"));
    assert_int_equal(plain.len, 0);
    free(raw);

    char *k = read_fixture("k.bin", &len);
    assert_int_equal((unsigned char)k[16], FERRY_CH_METHOD_LZ4);
    ferry_buf_reset(&plain);
    assert_int_equal(ferry_ch_decompress(k, len, &plain, &err), FERRY_OK);
    assert_int_equal(plain.len, 700 * 4);
    for (uint32_t i = 0; i < 700; i++) {
        uint32_t v;
        memcpy(&v, plain.data + i * 4, 4);
        assert_int_equal(v, i);
    }
    /* Truncated stream. */
    ferry_buf_reset(&plain);
    assert_int_equal(ferry_ch_decompress(k, len - 1, &plain, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "truncated"));
    free(k);
    ferry_buf_free(&plain);
}

/* Every prefix and every single-byte change of the real checksums.txt is refused, never
 * crashes. */
static void test_real_corruptions_refused(void **state)
{
    (void)state;
    size_t len;
    char *text = read_fixture("checksums.txt", &len);
    char *copy = malloc(len);
    for (size_t n = 0; n < len; n++) {
        memcpy(copy, text, n); /* exact-size prefix in a larger heap buffer */
        char *exact = malloc(n ? n : 1);
        memcpy(exact, text, n);
        ferry_checksums s;
        ferry_err err = {0};
        int rc = ferry_checksums_parse(exact, n, &s, &err);
        if (rc == FERRY_OK)
            fail_msg("a %zu-byte prefix of checksums.txt parsed", n);
        assert_true(err.msg[0] != '\0');
        assert_int_equal(s.count, 0);
        free(exact);
    }
    for (size_t i = 0; i < len; i++) {
        memcpy(copy, text, len);
        copy[i] ^= 0x20;
        ferry_checksums s;
        ferry_err err = {0};
        if (ferry_checksums_parse(copy, len, &s, &err) == FERRY_OK)
            fail_msg("checksums.txt with byte %zu changed parsed", i);
    }
    free(copy);
    free(text);
}

/* ---- hand-built versions 2, 3 and 4 ---- */

static void put_var(ferry_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        ferry_buf_putc(b, (char)(v | 0x80));
        v >>= 7;
    }
    ferry_buf_putc(b, (char)v);
}

static void put_u64(ferry_buf *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        ferry_buf_putc(b, (char)(v >> (8 * i)));
}

/* The v3 body for two files, written out of name order on purpose. */
static void v3_body(ferry_buf *b)
{
    put_var(b, 2);
    put_var(b, 5);
    ferry_buf_puts(b, "z.bin");
    put_var(b, 300);
    put_u64(b, 11);
    put_u64(b, 12);
    ferry_buf_putc(b, 1);
    put_var(b, 1ULL << 40);
    put_u64(b, 13);
    put_u64(b, 14);
    put_var(b, 9);
    ferry_buf_puts(b, "count.txt");
    put_var(b, 3);
    put_u64(b, 21);
    put_u64(b, 22);
    ferry_buf_putc(b, 0);
}

static void check_two(const ferry_checksums *s)
{
    assert_int_equal(s->count, 2);
    assert_string_equal(s->entries[0].name, "count.txt");
    assert_false(s->entries[0].is_compressed);
    assert_true(s->entries[0].file_size == 3 && s->entries[0].file_hash[0] == 21 &&
                s->entries[0].file_hash[1] == 22);
    const ferry_checksum_entry *z = ferry_checksums_find(s, "z.bin");
    assert_non_null(z);
    assert_true(z->is_compressed && z->file_size == 300 && z->uncompressed_size == 1ULL << 40);
    assert_true(z->file_hash[0] == 11 && z->file_hash[1] == 12);
    assert_true(z->uncompressed_hash[0] == 13 && z->uncompressed_hash[1] == 14);
}

/* Wraps body in one compressed block with a correct checksum. */
static void block(ferry_buf *out, const char *body, size_t len, int method)
{
    char payload[4096];
    int plen;
    if (method == FERRY_CH_METHOD_LZ4)
        plen = LZ4_compress_default(body, payload, (int)len, sizeof payload);
    else {
        memcpy(payload, body, len);
        plen = (int)len;
    }
    unsigned char hdr[9] = {(unsigned char)method};
    uint32_t csize = (uint32_t)plen + 9, dsize = (uint32_t)len;
    for (int i = 0; i < 4; i++) {
        hdr[1 + i] = (unsigned char)(csize >> (8 * i));
        hdr[5 + i] = (unsigned char)(dsize >> (8 * i));
    }
    char whole[4200];
    memcpy(whole, hdr, 9);
    memcpy(whole + 9, payload, (size_t)plen);
    ferry_city128 h = ferry_cityhash102_128(whole, csize);
    put_u64(out, h.lo);
    put_u64(out, h.hi);
    ferry_buf_append(out, whole, csize);
}

static void test_versions(void **state)
{
    (void)state;
    ferry_err err = {0};
    ferry_checksums s;
    ferry_buf body = FERRY_BUF_INIT, file = FERRY_BUF_INIT;
    v3_body(&body);

    ferry_buf_puts(&file, "checksums format version: 3\n");
    ferry_buf_append(&file, body.data, body.len);
    assert_int_equal(ferry_checksums_parse(file.data, file.len, &s, &err), FERRY_OK);
    assert_int_equal(s.format_version, 3);
    check_two(&s);
    ferry_checksums_free(&s);

    /* v4 over two blocks, one LZ4 and one NONE: the stream is split anywhere. */
    ferry_buf_reset(&file);
    ferry_buf_puts(&file, "checksums format version: 4\n");
    block(&file, body.data, 10, FERRY_CH_METHOD_LZ4);
    block(&file, body.data + 10, body.len - 10, FERRY_CH_METHOD_NONE);
    assert_int_equal(ferry_checksums_parse(file.data, file.len, &s, &err), FERRY_OK);
    assert_int_equal(s.format_version, 4);
    check_two(&s);
    ferry_checksums_free(&s);

    /* Trailing garbage after the listed files is refused. */
    ferry_buf_reset(&file);
    ferry_buf_puts(&file, "checksums format version: 3\n");
    ferry_buf_append(&file, body.data, body.len);
    ferry_buf_putc(&file, 0);
    assert_int_equal(ferry_checksums_parse(file.data, file.len, &s, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "unexpected bytes"));

    const char *v2 = "checksums format version: 2\n"
                     "2 files:\n"
                     "count.txt\n\tsize: 3\n\thash: 21 22\n\tcompressed: 0\n"
                     "z.bin\n\tsize: 300\n\thash: 11 12\n\tcompressed: 1\n"
                     "\tuncompressed size: 1099511627776\n\tuncompressed hash: 13 14\n";
    assert_int_equal(ferry_checksums_parse(v2, strlen(v2), &s, &err), FERRY_OK);
    assert_int_equal(s.format_version, 2);
    check_two(&s);
    ferry_checksums_free(&s);
    ferry_buf_free(&body);
    ferry_buf_free(&file);
}

static int parse_rc(const void *d, size_t n, ferry_err *err)
{
    ferry_checksums s;
    int rc = ferry_checksums_parse(d, n, &s, err);
    ferry_checksums_free(&s);
    return rc;
}

static void test_bad_input(void **state)
{
    (void)state;
    ferry_err err = {0};
    assert_int_equal(parse_rc("", 0, &err), FERRY_EINVAL);
    assert_int_equal(parse_rc("hello", 5, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "not a ClickHouse part checksums file"));
    const char *v1 = "checksums format version: 1\n";
    assert_int_equal(parse_rc(v1, strlen(v1), &err), FERRY_EUNSUPPORTED);
    const char *v5 = "checksums format version: 5\n";
    assert_int_equal(parse_rc(v5, strlen(v5), &err), FERRY_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "ZooKeeper"));
    const char *v9 = "checksums format version: 99999999999999999999999\n";
    assert_int_equal(parse_rc(v9, strlen(v9), &err), FERRY_EINVAL);

    /* A count far beyond what the bytes can hold is refused before allocating. */
    char huge[] = "checksums format version: 3\n\xff\xff\xff\xff\xff\xff\xff\xff\x7f";
    assert_int_equal(parse_rc(huge, sizeof huge - 1, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "claims"));
    /* An 11-byte varint. */
    char longvar[] = "checksums format version: 3\n\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01";
    assert_int_equal(parse_rc(longvar, sizeof longvar - 1, &err), FERRY_EINVAL);

    /* Names that would leave the part folder, and duplicates. */
    static const char *bad_names[] = {"../x", "/etc/passwd", "a/../b", ".", "a//b", "a/"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        ferry_buf b = FERRY_BUF_INIT;
        ferry_buf_puts(&b, "checksums format version: 3\n");
        put_var(&b, 1);
        put_var(&b, strlen(bad_names[i]));
        ferry_buf_puts(&b, bad_names[i]);
        put_var(&b, 1);
        put_u64(&b, 0);
        put_u64(&b, 0);
        ferry_buf_putc(&b, 0);
        assert_int_equal(parse_rc(b.data, b.len, &err), FERRY_EINVAL);
        ferry_buf_free(&b);
    }
    ferry_buf b = FERRY_BUF_INIT;
    ferry_buf_puts(&b, "checksums format version: 3\n");
    put_var(&b, 2);
    for (int i = 0; i < 2; i++) {
        put_var(&b, 5);
        ferry_buf_puts(&b, "a.bin");
        put_var(&b, 1);
        put_u64(&b, 0);
        put_u64(&b, 0);
        ferry_buf_putc(&b, 0);
    }
    assert_int_equal(parse_rc(b.data, b.len, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "twice"));

    /* A ZSTD block is refused by name. */
    ferry_buf_reset(&b);
    ferry_buf_puts(&b, "checksums format version: 4\n");
    block(&b, "\0", 1, FERRY_CH_METHOD_NONE);
    b.data[28 + 16] = (char)FERRY_CH_METHOD_ZSTD;
    ferry_city128 h = ferry_cityhash102_128(b.data + 28 + 16, b.len - 28 - 16);
    for (int i = 0; i < 8; i++) {
        b.data[28 + i] = (char)(h.lo >> (8 * i));
        b.data[36 + i] = (char)(h.hi >> (8 * i));
    }
    assert_int_equal(parse_rc(b.data, b.len, &err), FERRY_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "ZSTD"));
    ferry_buf_free(&b);
}

static void test_hasher_edges(void **state)
{
    (void)state;
    ferry_part_hasher h;
    uint64_t got[2];
    ferry_part_hasher_init(&h);
    ferry_part_hasher_final(&h, got);
    assert_true(got[0] == 0 && got[1] == 0); /* an empty file hashes to {0, 0} */
    /* Exactly one block: the final state is one CityHash128WithSeed over 2048 bytes. */
    unsigned char block2k[2048];
    for (int i = 0; i < 2048; i++)
        block2k[i] = (unsigned char)(i * 31);
    ferry_part_hasher_update(&h, block2k, 2048);
    ferry_part_hasher_final(&h, got);
    ferry_city128 want = ferry_cityhash102_128_seed(block2k, 2048, (ferry_city128){0, 0});
    assert_true(got[0] == want.lo && got[1] == want.hi);
    assert_int_equal(h.total, 2048);
    char hex[33];
    uint64_t v[2] = {0x1122334455667788ULL, 0x99aabbccddeeff00ULL};
    ferry_checksum_hex(v, hex);
    assert_string_equal(hex, "99aabbccddeeff001122334455667788");
}

/* The folder check on the fixture part: intact, then one flipped byte. */
static void test_verify_fixture(void **state)
{
    (void)state;
    ferry_part_verify_report rep;
    ferry_err err = {0};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", fixture_path(""));
    assert_int_equal(ferry_part_verify_dir(dir, &rep, &err), FERRY_OK);
    assert_int_equal(rep.n_bad, 0);
    assert_int_equal(rep.n_files, 15);
    ferry_part_verify_report_free(&rep);
    assert_int_equal(ferry_part_verify_dir("/nonexistent/part", &rep, &err), FERRY_ENOTFOUND);
    ferry_part_verify_report_free(&rep);
    assert_true(ferry_checksums_unlisted_file_ok("columns.txt"));
    assert_false(ferry_checksums_unlisted_file_ok("k.bin"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cityhash64_vectors),
        cmocka_unit_test(test_real_part_hashes),
        cmocka_unit_test(test_real_blocks),
        cmocka_unit_test(test_real_corruptions_refused),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_hasher_edges),
        cmocka_unit_test(test_verify_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
