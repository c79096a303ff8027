/* libFuzzer target for the checksums.txt parser, the compressed block reader and the part
 * hasher. Block checksums would stop almost every mutation at the first block, so when the
 * input's first byte is odd the harness rewrites each block checksum of the stream to the
 * right value first, letting the fuzzer reach the decompressors and the binary list parser.
 *   make fuzz && build-fuzz/fuzz/fuzz_checksums -max_total_time=60 CORPUS_DIR */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/checksums.h"
#include "format/cityhash102.h"

static void repair_block_checksums(unsigned char *p, size_t len)
{
    const char *nl = memchr(p, '\n', len < 64 ? len : 64);
    size_t off = nl ? (size_t)(nl - (const char *)p) + 1 : 0;
    while (len - off >= 25) {
        unsigned char *blk = p + off + 16;
        uint32_t csize = (uint32_t)blk[1] | (uint32_t)blk[2] << 8 | (uint32_t)blk[3] << 16 |
                         (uint32_t)blk[4] << 24;
        if (csize < 9 || csize > len - off - 16)
            return;
        ferry_city128 h = ferry_cityhash102_128(blk, csize);
        for (int i = 0; i < 8; i++) {
            p[off + i] = (unsigned char)(h.lo >> (8 * i));
            p[off + 8 + i] = (unsigned char)(h.hi >> (8 * i));
        }
        off += 16 + (size_t)csize;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int repair = data[0] & 1;
    size_t len = size - 1;
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy)
        return 0;
    memcpy(copy, data + 1, len);
    if (repair)
        repair_block_checksums(copy, len);

    ferry_checksums sums;
    ferry_err err = {0};
    if (ferry_checksums_parse(copy, len, &sums, &err) == FERRY_OK) {
        for (size_t i = 0; i < sums.count; i++)
            if (ferry_checksums_find(&sums, sums.entries[i].name) != &sums.entries[i])
                abort();
        ferry_checksums_free(&sums);
    } else if (!err.msg[0]) {
        abort(); /* every failure explains itself */
    }

    /* The same bytes as a bare compressed stream (a .bin file). */
    ferry_buf plain = FERRY_BUF_INIT;
    if (ferry_ch_decompress(copy, len, &plain, &err) != FERRY_OK && plain.len != 0)
        abort(); /* a failed decompression leaves the output as it was */
    ferry_buf_free(&plain);

    /* The hasher does not depend on chunking. */
    ferry_part_hasher a, b;
    ferry_part_hasher_init(&a);
    ferry_part_hasher_init(&b);
    ferry_part_hasher_update(&a, copy, len);
    size_t step = (size_t)data[0] * 13 + 1;
    for (size_t off = 0; off < len; off += step)
        ferry_part_hasher_update(&b, copy + off, len - off < step ? len - off : step);
    uint64_t ha[2], hb[2];
    ferry_part_hasher_final(&a, ha);
    ferry_part_hasher_final(&b, hb);
    if (ha[0] != hb[0] || ha[1] != hb[1])
        abort();
    free(copy);
    return 0;
}
