/* The sweep: compares what every server's pointer files name with what the object store holds
 * and what the catalog records, and reports
 *   orphans     objects under ferry's prefix that no pointer file on any server and no catalog
 *               part names (candidates for deletion, once older than a grace period)
 *   dangling    pointer files naming an object that is missing or has another size
 *   drift       the catalog says a server references a part it does not (catalog_only), or a
 *               server's live part references a catalog part the catalog does not list it for
 *               (server_only)
 *
 * Two layers: the set computation (ferry_sweep_compute, ferry_refset_*) is pure and works on
 * inputs in memory; ferry_sweep_run (lib/flow/sweep_run.c) gathers those inputs from the agents,
 * the bucket listing and the catalog, and deletes orphans when asked. Retention
 * (ferry/retention.h) uses the same gathering and reference index for its live check. */
#ifndef FERRY_SWEEP_H
#define FERRY_SWEEP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/objstore.h"

struct ferry_config;
struct ferry_fleet;

/* ---- pure ----------------------------------------------------------------------------------- */

/* One object named by one pointer file on one server. Strings are owned by the array's owner
 * (ferry_sweep_refs_free). */
typedef struct ferry_sweep_ref {
    char *server;
    char *disk;
    char *path;   /* the pointer file, relative to the disk's metadata path */
    char *key;    /* the object's key in ferry's store; NULL when outside it */
    uint64_t size;
    bool outdated; /* the file's part is no longer active (merged away, moved, detached) but
                    * its folder is not removed yet: a reference, not where the server reads */
} ferry_sweep_ref;

typedef struct ferry_sweep_refs {
    ferry_sweep_ref *items;
    size_t n, cap;
} ferry_sweep_refs;

int ferry_sweep_refs_add(ferry_sweep_refs *r, const char *server, const char *disk,
                         const char *path, const char *key, uint64_t size, ferry_err *err);
void ferry_sweep_refs_free(ferry_sweep_refs *r);

/* A sorted index of object keys to the first reference found for each, for membership tests. */
typedef struct ferry_refset {
    const ferry_sweep_ref **by_key; /* borrowed pointers into a ferry_sweep_refs, sorted by key */
    size_t n;
} ferry_refset;

/* Builds the index over refs (which must outlive it); refs without a key are left out. */
int ferry_refset_build(const ferry_sweep_refs *refs, ferry_refset *out, ferry_err *err);
/* The first reference to key, or NULL. */
const ferry_sweep_ref *ferry_refset_find(const ferry_refset *s, const char *key);
/* Every reference to key: returns their count and sets *first to the index of the first in
 * s->by_key (they are consecutive, sorted by server then path). */
size_t ferry_refset_range(const ferry_refset *s, const char *key, size_t *first);
void ferry_refset_free(ferry_refset *s);

/* true when a pointer file at path (relative to the disk's metadata path) belongs to an active
 * part, not to a frozen copy (shadow/...) or a detached folder (.../detached/...). */
bool ferry_sweep_path_is_live(const char *path);

/* When path lies inside a part folder ClickHouse set aside as broken
 * (`.../detached/broken...` or `detached/broken...`, e.g. broken-on-start_<part> after a crash
 * left a pointer file empty): the length of the folder's path (up to, not including, the '/'
 * after the folder's name); else 0. */
size_t ferry_sweep_broken_folder(const char *path);

typedef struct ferry_sweep_input {
    const ferry_sweep_refs *refs;     /* every pointer file of every server read */
    const char *const *servers;       /* the servers whose pointer files were read */
    size_t n_servers;
    const ferry_object_info *objects; /* the bucket listing under scope_prefix (any order) */
    size_t n_objects;
    const char *scope_prefix;         /* what the listing covers ("" = everything) */
    const ferry_record *parts;        /* catalog FERRY_REC_PART records */
    size_t n_parts;
    time_t now;
    uint64_t min_age_s;               /* orphans younger than this are never deletable */
} ferry_sweep_input;

typedef struct ferry_sweep_orphan {
    char *key;
    uint64_t size;
    time_t mtime;
    bool old_enough; /* now - mtime >= min_age_s */
} ferry_sweep_orphan;

typedef struct ferry_sweep_dangling {
    char *server, *disk, *path, *key;
    uint64_t want_size;  /* what the pointer file says */
    bool missing;        /* the object is not in the listing */
    uint64_t have_size;  /* when not missing: the listed size */
} ferry_sweep_dangling;

enum ferry_drift_kind {
    FERRY_DRIFT_CATALOG_ONLY, /* the catalog lists the server for a part it does not hold */
    FERRY_DRIFT_SERVER_ONLY   /* the server's live part names a catalog part's objects, but the
                                 catalog does not list the server */
};

typedef struct ferry_sweep_drift {
    enum ferry_drift_kind kind;
    char *server, *table, *partition_id, *part;
    char *path; /* server_only: one pointer file; catalog_only: NULL */
} ferry_sweep_drift;

typedef struct ferry_sweep_report {
    ferry_sweep_orphan *orphans;
    size_t n_orphans;
    ferry_sweep_dangling *dangling;
    size_t n_dangling;
    ferry_sweep_drift *drift;
    size_t n_drift;
    char **catalog_only_keys; /* objects only the catalog names (no pointer file): not orphans */
    size_t n_catalog_only_keys;
    size_t n_pointer_files;   /* distinct (server, disk, path) read */
    size_t n_referenced;      /* listed objects some pointer file names */
    size_t n_outside;         /* references to keys outside ferry's store or scope */
    uint64_t orphan_bytes;
} ferry_sweep_report;

/* Computes the report. Everything in *out is owned by it (ferry_sweep_report_free). Lists are
 * sorted (orphans by key, dangling by server then path, drift by server then part). */
int ferry_sweep_compute(const ferry_sweep_input *in, ferry_sweep_report *out, ferry_err *err);
void ferry_sweep_report_free(ferry_sweep_report *r);

/* ---- I/O -------------------------------------------------------------------------------------- */

/* Reads the pointer files of every replica of every server through its agent into refs
 * (appended; each under the server's name). A replica that cannot be read (no agent for it,
 * an agent error, no object-storage disk, an answer that lacks what it should hold), or a file
 * under its cold disk that the agent could not read or that is not a readable pointer file,
 * adds a line to problems (a JSON array of strings) and counts in *failed: what it names is
 * unknown, and an incomplete read must never lead to a delete. Errors only for memory. */
int ferry_sweep_read_pointers(struct ferry_fleet *fl, ferry_sweep_refs *refs, json_t *problems,
                              size_t *failed, ferry_err *err);
/* Every object under prefix (all pages). *out owned by the caller (ferry_sweep_objects_free). */
int ferry_sweep_list_store(ferry_objstore *st, const char *prefix, ferry_object_info **out,
                           size_t *n, ferry_err *err);
void ferry_sweep_objects_free(ferry_object_info *o, size_t n);

typedef struct ferry_sweep_options {
    bool delete_orphans;
    uint64_t min_age_s;  /* grace period; required (> 0) with delete_orphans */
    time_t now;          /* 0: time(NULL) */
} ferry_sweep_options;

typedef struct ferry_sweep_result {
    ferry_sweep_report report;
    bool complete;        /* every server's pointer files and the whole listing were read */
    json_t *problems;     /* array of strings: what could not be read, why nothing was deleted */
    size_t deleted;       /* orphans deleted */
    uint64_t deleted_bytes;
    size_t delete_failed;
    bool deletion_skipped; /* asked to delete, but refused (incomplete, jobs in flight, ...) */
} ferry_sweep_result;

/* Gathers every server's pointer files (agents), the listing of the store under its prefix
 * (clickhouse role) and the catalog's parts, computes the report, and, with delete_orphans,
 * deletes the orphans older than min_age_s with the janitor role. Nothing is deleted when the
 * report is incomplete, when a move or job is in flight, or when a second read of the pointer
 * files just before deleting finds a reference. *res is owned by the caller
 * (ferry_sweep_result_free). Returns FERRY_OK also for an incomplete report (res->complete says
 * so); errors are for what stops the sweep itself (config, catalog). */
int ferry_sweep_run(struct ferry_fleet *fl, const ferry_sweep_options *opt,
                    ferry_sweep_result *res, ferry_err *err);
void ferry_sweep_result_free(ferry_sweep_result *res);

/* The report as JSON: {complete, orphans: [key...], orphan_details: [{key,size,mtime,
 * old_enough}], dangling: [path...], dangling_details: [...], drift: [...], catalog_only: [...],
 * counts..., problems: [...]}. "dangling" lists "server:disk:path". Caller decrefs. */
json_t *ferry_sweep_result_json(const ferry_sweep_result *res);

#endif
