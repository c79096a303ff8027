/* The catalog side of `ferry init`, shared by `ferry init` and `ferry demo`: creates the cluster
 * a config file describes (fixed settings, shards, tables) in the catalog it names, or adds the
 * shards and tables that are new in the file. */
#ifndef FERRY_CLI_INIT_H
#define FERRY_CLI_INIT_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/err.h"

typedef struct cli_init_result {
    char cluster[128];
    char backend[16]; /* "sqlite" or "zk" */
    bool created;     /* the catalog held no cluster before */
    size_t shards_added, tables_added;
} cli_init_result;

/* Reads the config at path and writes its cluster into its catalog (see cmd_init_usage).
 * FERRY_EINVAL: a bad config, or fixed settings that differ from the catalog's. */
int cli_init_cluster(const char *path, cli_init_result *res, ferry_err *err);

#endif
