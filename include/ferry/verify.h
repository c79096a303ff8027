/* Verifying data after tiering or a move: a fingerprint of one partition of a table on one
 * server, compared between before and after (tiering) or between source and target (moves).
 *
 * The fingerprint is count(), sum and xor of cityHash64 over every column of every row (equal
 * multisets of rows give equal values, whatever the parts, their order or merges), uniqExact of
 * the row hashes (catches a row counted twice where another went missing), and the number of
 * active parts and their bytes (informational: parts may legitimately differ). */
#ifndef FERRY_VERIFY_H
#define FERRY_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "ferry/clickhouse.h"
#include "ferry/err.h"

typedef struct ferry_fingerprint {
    uint64_t rows;
    uint64_t hash_sum;   /* sum(cityHash64(*)), wrapping */
    uint64_t hash_xor;   /* groupBitXor(cityHash64(*)) */
    uint64_t distinct;   /* uniqExact(cityHash64(*)) */
    uint64_t parts;      /* active parts of the partition */
    uint64_t bytes;      /* their bytes_on_disk */
} ferry_fingerprint;

/* The row fingerprints (rows, sum, xor, distinct; not parts and bytes) of several partitions of
 * db.table in one query: out[i] for ids[i], all zero for a partition without rows. */
int ferry_fingerprint_partitions(ferry_ch_client *c, const char *db, const char *table,
                                 const char *const *ids, size_t n, ferry_fingerprint *out,
                                 ferry_err *err);
/* Reads the fingerprint of partition partition_id of db.table through c. */
int ferry_fingerprint_partition(ferry_ch_client *c, const char *db, const char *table,
                                const char *partition_id, ferry_fingerprint *out, ferry_err *err);

/* true when the data is the same (rows and the three row hashes); parts and bytes are ignored.
 * When not, fills why with what differs. */
bool ferry_fingerprint_same(const ferry_fingerprint *a, const ferry_fingerprint *b, char *why,
                            size_t whysz);

#endif
