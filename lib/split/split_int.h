/* Private pieces of the split module shared between its files: what registering tenants and
 * raising split counts read once (the settings, the active shards and their loads), so that the
 * split manager raising many tenants in one run reads them once too. */
#ifndef FERRY_SPLIT_INT_H
#define FERRY_SPLIT_INT_H

#include "ferry/catalog.h"
#include "ferry/split.h"

typedef struct split_env {
    ferry_record settings;
    ferry_record_list shards;
    const ferry_shard **active; /* the active shards: records of shards, borrowed */
    size_t ns;
    uint64_t *load; /* [ns] bytes the routes put on each; NULL when no active shard has a
                       capacity (then no placement needs them) */
} split_env;

/* Reads the settings and the shards, and the loads when an active shard has a capacity: those the
 * last inventory sync stored, else (none stored) every slice and route, one at a time. Release
 * with split_env_close, also after a failure. */
int split_env_open(struct ferry_catalog *cat, split_env *e, ferry_err *err);
void split_env_close(split_env *e);

/* ferry_split_set over an opened env (its change is filled from `from` on; the caller sets the
 * tenant name). The loads are not updated: new slices hold 0 bytes. */
int split_set_one(struct ferry_catalog *cat, split_env *e, const char *tenant, uint32_t splits,
                  bool create, bool dry_run, ferry_split_change *change, ferry_err *err);

#endif
