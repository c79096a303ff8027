/* Splits: which split a row belongs to, the policy that raises a tenant's split count as it
 * grows, and the catalog operation that records a new count with its new slices placed and
 * routed (docs/routing.md, "Splits").
 *
 * A row's split is a pure function of its split key's canonical text and the tenant's split count
 * at the time the row is written:
 *
 *   split = splits <= 1 ? 0 : XXH3_64bits(canon(key)) % splits      (xxHash 0.8, seed 0)
 *
 * canon(key) is the key's value as text (strings unquoted and unescaped, numbers as written),
 * with one normalisation: a text that is an integer ([+-]?[0-9]+) is written in canonical decimal
 * (no '+', no leading zeros, "-0" is "0"), so 42, "42", +042 and RowBinary's UInt64 42 all give
 * the same split whatever the input format.
 *
 * Split counts only grow: rows already written keep the split they were written with (their
 * partitions are never rewritten), new rows are spread over the new count.
 *
 * Everything above the "catalog" heading is pure. This header declares no type of catalog.h or
 * placement.h; ferry_split_place takes the catalog's shard records as they are. */
#ifndef FERRY_SPLIT_H
#define FERRY_SPLIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/err.h"
#include "ferry/names.h"
#include "ferry/shard_set.h"

/* The highest split count ferry accepts for a tenant. */
#define FERRY_SPLITS_MAX 4096

/* ---- the split function (pure) --------------------------------------------------------------- */

/* Appends canon(text) to out (see above). */
int ferry_split_canon(const char *text, size_t len, ferry_buf *out);
/* The split of a key whose canonical text is canon/len. */
uint32_t ferry_split_of_canon(const char *canon, size_t len, uint32_t splits);
/* canon + split in one call, without allocating for keys up to 255 bytes. */
uint32_t ferry_split_of(const char *text, size_t len, uint32_t splits);

/* ---- the policy (pure) ------------------------------------------------------------------------ */

typedef struct ferry_split_policy {
    uint64_t target_slice_bytes;    /* bytes one slice should hold ([splits] target_slice_bytes) */
    double target_slice_rows_per_s; /* ingest rate one slice should take; 0: rate is ignored */
    double hysteresis;              /* raise only when a slice is this fraction over a target */
    uint32_t max_splits;            /* never more than this */
} ferry_split_policy;

/* Defaults: 10 GiB per slice, 50,000 rows/s per slice, hysteresis 0.25, at most 64 splits. */
void ferry_split_policy_default(ferry_split_policy *p);

typedef struct ferry_split_load {
    uint32_t splits;   /* current count, >= 1 */
    uint64_t bytes;    /* the tenant's bytes on disk (one copy: summed over servers / rf) */
    double rows_per_s; /* the tenant's recent ingest rate */
} ferry_split_load;

typedef struct ferry_split_decision {
    uint32_t splits;   /* the new count (== load->splits when nothing changes) */
    bool raise;
    char reason[160];  /* why, for people: "bytes per slice 14.2 GiB > 12.5 GiB (target ...)" */
} ferry_split_decision;

/* The policy (docs/routing.md):
 *   want_bytes = ceil(bytes / target_slice_bytes)
 *   want_rate  = ceil(rows_per_s / target_slice_rows_per_s)            (0 when the rate target is 0)
 *   want       = min(max_splits, max(1, want_bytes, want_rate))
 *   raise when want > splits and some per-slice load with the current count is above its target
 *   by more than the hysteresis: bytes / splits > target_slice_bytes * (1 + hysteresis), or
 *   rows_per_s / splits > target_slice_rows_per_s * (1 + hysteresis); the new count is then want.
 * The count never goes down. */
void ferry_split_decide(const ferry_split_policy *p, const ferry_split_load *load,
                        ferry_split_decision *out);

struct ferry_config;
/* Reads [splits] (target_slice_bytes, target_slice_rows_per_s, hysteresis, max_splits) over the
 * defaults; unknown keys and bad values are FERRY_EINVAL with FILE:LINE. */
int ferry_split_policy_read(const struct ferry_config *cfg, ferry_split_policy *p,
                            ferry_err *err);

/* ---- placing new slices (pure; wraps the placement library) ---------------------------------- */

struct ferry_shard; /* the catalog's shard record (ferry/catalog.h): name, weight, capacity, zone */

typedef struct ferry_split_slice_in {
    const char *tenant;
    uint32_t split;
    uint64_t bytes;
    const ferry_shard_set *shards; /* the shards holding it now (its route); NULL or empty: a
                                      new slice, placed by ferry_split_place */
} ferry_split_slice_in;

/* Places the new slices among slices[] (those without shards) on shards[0..n_shards) (the
 * catalog's records of the shards that take new slices, borrowed) with the cluster's rules
 * (hash "sha256"|"xxh3", rf, fill; non-strict, so a full cluster still places), around the
 * existing ones, which stay where they are and count for the tenant spread; base_load[i] (NULL:
 * none) is what shards[i] holds of every slice not in slices[]. Only the new slices are scored,
 * so slices[] need hold only the tenants concerned (ferry_pl_place_more: the result is the one a
 * placement of the whole cluster gives them when the existing slices sit where it puts them).
 * Writes the shards of slice i, in order, as indexes into shards[], into placements[i * rf ..
 * i * rf + rf) (n_slices * rf of them; FERRY_SPLIT_NO_SHARD in the slots left empty): for an
 * existing slice, the shards of the cluster it keeps. */
#define FERRY_SPLIT_NO_SHARD UINT32_MAX
int ferry_split_place(const struct ferry_shard *const *shards, size_t n_shards,
                      const uint64_t *base_load, const ferry_split_slice_in *slices,
                      size_t n_slices, const char *hash, unsigned rf, double fill,
                      uint32_t *placements, ferry_err *err);

/* ---- catalog ----------------------------------------------------------------------------------- */

struct ferry_catalog;

typedef struct ferry_split_change {
    char tenant[FERRY_NAME_MAX];
    uint32_t from, to;      /* from 0: the tenant is created */
    uint64_t routing_version; /* after the commit */
} ferry_split_change;

/* Sets tenant's split count to `splits` in one atomic batch: the tenant record (created when
 * create is true and it does not exist; otherwise compare-and-set on the version read), one slice
 * record per new split placed with ferry_split_place next to the tenant's own slices (where its
 * routes serve them) and the shards' loads, and one route per new slice serving it on its
 * placement (so the routing version goes up by one). Reads the settings, the shards and the
 * tenant's own records, and when a shard has a capacity the shards' loads as the last inventory
 * sync stored them (ferry_catalog_loads_get; before any sync, every slice and route), so its
 * cost does not grow with the cluster. Existing slices and routes are not touched;
 * slice or route records of new splits left over (a tenant removed by hand) are replaced. A
 * count lower than the current one is refused (FERRY_EINVAL: split counts only grow); the same
 * count changes nothing (change->to == from). dry_run: computes and fills change, writes
 * nothing. A concurrent change of the tenant gives FERRY_ECONFLICT. */
int ferry_split_set(struct ferry_catalog *cat, const char *tenant, uint32_t splits, bool create,
                    bool dry_run, ferry_split_change *change, ferry_err *err);

/* A tenant's replication factor: sets (rf >= 1) or clears (rf 0: the cluster's default) its
 * override, by CAS on the tenant record. *before / *after are the effective rf. FERRY_EINVAL:
 * an unknown tenant, or rf above the number of shards a slice may be placed on (replicas are
 * on distinct shards); FERRY_ECONFLICT: the tenant changed meanwhile. dry_run writes nothing.
 * The replicas follow at the next rebalance. */
int ferry_tenant_set_rf(struct ferry_catalog *cat, const char *tenant, uint32_t rf,
                        bool dry_run, uint32_t *before, uint32_t *after, ferry_err *err);

/* Called by ferry_split_add for each tenant registered, in order. */
typedef void (*ferry_split_added_fn)(const ferry_split_change *change, void *arg);

/* Registers new tenants names[0..n) with `splits` splits each, as ferry_split_set(create) would
 * one by one, but reading the settings, shards and loads once and committing up to
 * FERRY_SPLIT_ADD_GROUP tenants per atomic batch. A name that exists already (or a group that
 * meets left-over records or a concurrent writer) makes that group go one name at a time through
 * ferry_split_set, so the result is the same as registering them in order: every name before the
 * first failing one is registered, the error names that one, and nothing after it is written.
 * added (may be NULL) is called per tenant registered. dry_run goes one name at a time. */
#define FERRY_SPLIT_ADD_GROUP 1000
int ferry_split_add(struct ferry_catalog *cat, const char *const *names, size_t n,
                    uint32_t splits, bool dry_run, ferry_split_added_fn added, void *arg,
                    ferry_err *err);

/* ---- the split manager's run ------------------------------------------------------------------- */

typedef struct ferry_splits_options {
    const char *config_path;
    bool dry_run;
    const char *const *only; /* tenant names to decide for; n_only 0: every tenant */
    size_t n_only;
} ferry_splits_options;

/* Measures every registered tenant on every shard (one system.parts query per shard covering
 * every managed table), applies [splits] (ferry_split_decide) and, unless dry_run, raises each
 * count with ferry_split_set. *report (caller-owned): {"tenants":[{tenant, splits, new_splits,
 * bytes, rows_per_s, raise, reason}], "raised", "tenants_total", "dry_run",
 * "routing_version"}. Used by `ferry splits` and the coordinator's splits_interval. */
int ferry_splits_run(const ferry_splits_options *opt, json_t **report, ferry_err *err);

#endif
