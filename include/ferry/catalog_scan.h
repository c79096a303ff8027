/* Compact scans of the catalog's largest folders, for the flows that read all of a cluster's
 * slices, routes, tenants or partitions at once (the rebalancing plan, the inventory sync,
 * `ferry status` and the coordinator's status page). Where ferry_catalog_each decodes every
 * stored document into a 3.4 KB ferry_record through a JSON parser, these give each row's few
 * fields straight from the stored text: on SQLite a streaming SELECT of the folder in key order
 * (no copy of the documents), on ZooKeeper the backend's scan; canonical documents (what ferry
 * writes) are taken apart without a JSON parser, any other document through the record decoder,
 * so a row holds exactly what ferry_catalog_list would have given (docs/catalog.md, "Compact
 * scans").
 *
 * Strings in a row are borrowed: valid during the callback only. A callback returns FERRY_OK to
 * go on; anything else stops the scan and is returned (the callback sets err). */
#ifndef FERRY_CATALOG_SCAN_H
#define FERRY_CATALOG_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"

/* One slice key (tenant, split): its slice record, its route, or both. */
typedef struct ferry_slice_row {
    const char *tenant;
    uint32_t split;
    const char *placement; /* the slice record's placement; NULL without a slice record */
    uint64_t bytes, rows;  /* the slice record's; 0 without one */
    int64_t version;       /* the slice record's version; -1 without one */
    const char *shards;    /* the route's shards (comma-separated); NULL without a route */
    int64_t route_version; /* -1 without a route */
} ferry_slice_row;

typedef int (*ferry_slice_row_fn)(const ferry_slice_row *row, void *arg, ferry_err *err);

/* Every slice record and route, joined by key, in one consistent read on SQLite (the tenants'
 * slice packs when none is marked changed, docs/catalog.md "Slice packs"; else the two
 * folders read by two threads on two connections started on one state of the catalog, or side
 * by side in one read transaction when writers cannot be held back that moment; on ZooKeeper
 * one after the other, as ferry_catalog_list would). fn runs in the calling thread. Tenants come in bytewise order of their names, each tenant's rows
 * together; within a tenant the splits are in key order on ZooKeeper and in text order ("10"
 * before "2") on SQLite: a caller that needs numeric order sorts each tenant's rows. */
int ferry_catalog_scan_slices(ferry_catalog *c, ferry_slice_row_fn fn, void *arg,
                              ferry_err *err);

typedef struct ferry_tenant_row {
    const char *name;
    uint32_t splits, rf; /* rf 0: the cluster's */
    int64_t version;
} ferry_tenant_row;

typedef int (*ferry_tenant_row_fn)(const ferry_tenant_row *row, void *arg, ferry_err *err);

/* Every tenant record, in bytewise order of the names. */
int ferry_catalog_scan_tenants(ferry_catalog *c, ferry_tenant_row_fn fn, void *arg,
                               ferry_err *err);

/* Every tenant row as ferry_catalog_scan_tenants gives them, then every slice row as
 * ferry_catalog_scan_slices gives them, to the same arg: on ZooKeeper one read of the slice packs
 * (docs/catalog.md, "Slice packs on ZooKeeper") instead of two folders. */
int ferry_catalog_scan_tenants_slices(ferry_catalog *c, ferry_tenant_row_fn tenant_fn,
                                      ferry_slice_row_fn slice_fn, void *arg, ferry_err *err);

typedef struct ferry_partition_row {
    const char *server, *table, *partition_id, *tenant;
    uint32_t day, split;
    enum ferry_tier tier;
    uint64_t bytes, rows;
    int64_t version;
} ferry_partition_row;

typedef int (*ferry_partition_row_fn)(const ferry_partition_row *row, void *arg,
                                      ferry_err *err);

/* Every partition record, in no particular order. */
int ferry_catalog_scan_partitions(ferry_catalog *c, ferry_partition_row_fn fn, void *arg,
                                  ferry_err *err);

/* The number of partition records of one tier and day. */
typedef struct ferry_partition_count {
    enum ferry_tier tier;
    uint32_t day; /* YYYYMMDD; 0: the record has none */
    uint64_t n;
} ferry_partition_count;

/* How many partition records there are of each tier and day (*out malloc'ed, ordered by tier
 * then day, caller frees; *n 0 for none), without reading the records on SQLite: there the
 * counts are a table kept by triggers on the records table, in the transaction of every write
 * (docs/catalog.md, "Partition counts"). On ZooKeeper they are counted by
 * ferry_catalog_scan_partitions. FERRY_EINVAL when a partition record's tier is neither hot nor
 * cold (as decoding it would say). */
int ferry_catalog_partition_counts(ferry_catalog *c, ferry_partition_count **out, size_t *n,
                                   ferry_err *err);

#endif
