/* The catalog side of `ferry init`, shared by `ferry init` and `ferry demo`: creates the cluster
 * a config file describes (fixed settings, shards, tables) in the catalog it names, or adds the
 * shards and tables that are new in the file. A shard added to an existing cluster is new until
 * its first rebalance ends (ferry_shards_settle). */
#ifndef FERRY_INIT_H
#define FERRY_INIT_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/err.h"

typedef struct ferry_init_result {
    char cluster[128];
    char backend[16]; /* "sqlite" or "zk" */
    bool created;     /* the catalog held no cluster before */
    size_t shards_added, tables_added;
} ferry_init_result;

/* Reads the config at path and writes its cluster into its catalog, in one batch.
 * FERRY_EINVAL: a bad config, or fixed settings that differ from the catalog's;
 * FERRY_ECONFLICT: another init committed at the same time. */
int ferry_init_cluster(const char *path, ferry_init_result *res, ferry_err *err);

#endif
