/* ClickHouse MergeTree part checksums: parsing a part's checksums.txt, hashing part files the way
 * ClickHouse does (so a receiver can hash while it writes), and reading ClickHouse's compressed
 * block stream. Everything here is pure: no file I/O (see ferry/part_verify.h for the directory
 * check). The format is described in docs/formats.md, section "checksums.txt". */
#ifndef FERRY_CHECKSUMS_H
#define FERRY_CHECKSUMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/err.h"

/* One file of a part as checksums.txt lists it. A hash is CityHash v1.0.2's 128-bit value:
 * [0] is its low 64 bits (the half ClickHouse writes first), [1] its high 64 bits. */
typedef struct ferry_checksum_entry {
    char *name;                /* owned by the ferry_checksums; relative to the part folder */
    uint64_t file_size;        /* bytes on disk */
    uint64_t file_hash[2];     /* ClickHouse's file hash of the bytes on disk */
    bool is_compressed;        /* a compressed .bin-like file: the two fields below are set */
    uint64_t uncompressed_size;
    uint64_t uncompressed_hash[2];
} ferry_checksum_entry;

typedef struct ferry_checksums {
    int format_version;           /* 2, 3 or 4 as read from the header */
    size_t count;
    ferry_checksum_entry *entries; /* owned; sorted by name (byte order), names unique */
} ferry_checksums;

/* Parses the bytes of a checksums.txt (format versions 2, 3 and 4; version 1 carries no
 * checksums and version 5 is ZooKeeper's summary form: both are refused). On success *out owns
 * its entries (free with ferry_checksums_free). Malformed or truncated input gives FERRY_EINVAL,
 * an unsupported version or block codec FERRY_EUNSUPPORTED, and *out is left empty. */
int ferry_checksums_parse(const void *data, size_t len, ferry_checksums *out, ferry_err *err);

void ferry_checksums_free(ferry_checksums *c);

/* The entry for a file name, or NULL. Binary search: entries are sorted. */
const ferry_checksum_entry *ferry_checksums_find(const ferry_checksums *c, const char *name);

/* True for the files a part folder may hold that checksums.txt never lists (checksums.txt
 * itself, columns.txt, metadata_version.txt, ...). */
bool ferry_checksums_unlisted_file_ok(const char *name);

/* Writes a hash as 32 lowercase hex digits, high half first (as ClickHouse prints a UInt128).
 * out needs 33 bytes. */
void ferry_checksum_hex(const uint64_t hash[2], char out[33]);

/* ClickHouse's file hash (IHashingBuffer): CityHash128WithSeed v1.0.2 chained over 2048-byte
 * blocks, starting from {0, 0}; a non-empty last block is hashed with its own length. Feed the
 * bytes in any chunks; the result does not depend on how they were split. */
#define FERRY_PART_HASH_BLOCK 2048
typedef struct ferry_part_hasher {
    uint64_t state[2];
    uint64_t total;          /* bytes fed so far */
    size_t pending;          /* bytes waiting in block */
    unsigned char block[FERRY_PART_HASH_BLOCK];
} ferry_part_hasher;

void ferry_part_hasher_init(ferry_part_hasher *h);
void ferry_part_hasher_update(ferry_part_hasher *h, const void *data, size_t len);
/* The hash of everything fed so far; h stays usable (more updates may follow). */
void ferry_part_hasher_final(const ferry_part_hasher *h, uint64_t hash[2]);

/* Decompresses a whole ClickHouse compressed stream (a sequence of blocks, each with its
 * CityHash128 checksum, checked here) and appends the data to out. Codecs NONE and LZ4 are
 * read; others give FERRY_EUNSUPPORTED naming the method byte. A damaged block gives
 * FERRY_EINVAL with its offset. */
int ferry_ch_decompress(const void *data, size_t len, ferry_buf *out, ferry_err *err);

/* ClickHouse's method bytes for the block codecs ferry knows by name. */
enum ferry_ch_method {
    FERRY_CH_METHOD_NONE = 0x02,
    FERRY_CH_METHOD_LZ4 = 0x82,
    FERRY_CH_METHOD_ZSTD = 0x90,
    FERRY_CH_METHOD_MULTIPLE = 0x91
};

#endif
