/* Warming a moved slice's filesystem cache (docs/operations.md, "A filesystem cache in front of
 * the cold disk"). A move carries pointer files only, so a target whose cold disk has a cache
 * (ClickHouse's `cache` disk) starts with none of the slice's cold data cached, and its first
 * queries read from the object store. The hot-list is what the other servers hold in their
 * caches of the managed tables: per table, the cold partitions and the column files with cached
 * data (system.remote_data_paths.cache_paths, joined to system.parts). Warming reads those
 * columns of the slice's rows in those partitions on the target (SELECT ... FORMAT Null), which
 * fills the target's cache with what the source's queries had found worth keeping.
 *
 * Read-only on every server; servers without a cache disk contribute nothing. */
#ifndef FERRY_CACHE_WARM_H
#define FERRY_CACHE_WARM_H

#include <jansson.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/fleet.h"

/* The hot-list of every server of the fleet but skip (may be NULL), before a move:
 *   {"<db>.<table>": {"partitions": [pid, ...], "columns": [col, ...] | "*"}}
 * ("*": a compact part's data.bin, which holds every column, was cached). A server that does
 * not answer is skipped with a warning: the hot-list is a hint. Caller decrefs *out. */
int ferry_cache_hotlist(ferry_fleet *fl, const char *skip, json_t **out, ferry_err *err);

/* Reads, on server, the hot-list's columns of tenant's split in the hot-list's partitions of
 * each managed table (its tenant and split columns). *report (caller decrefs):
 *   {"server", "tables": N, "partitions": N, "columns": N, "ms": ms,
 *    "read_from_store_bytes": N, "read_from_cache_bytes": N}
 * (the server's CachedReadBuffer ProfileEvents around the reads). */
int ferry_cache_warm(ferry_fleet *fl, const char *server, const char *tenant, uint32_t split,
                     json_t *hotlist, json_t **report, ferry_err *err);

#endif
