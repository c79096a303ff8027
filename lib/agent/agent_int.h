/* The node agent's private pieces: the agent object, the per-request environment (ClickHouse
 * client, config, allowed roots, disks), the operations, file helpers and the part-stream
 * parser shared by the sender and the receiver. */
#ifndef FERRY_AGENT_INT_H
#define FERRY_AGENT_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "ferry/agent.h"
#include "ferry/metrics.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/objstore.h"
#include "ferry/pathsafe.h"

/* What the agent did since it started, for GET /agent/metrics (server.c). The operations are
 * the table's (OPS) plus receive, by index. */
#define AGENT_METRIC_OPS 16
typedef struct agent_metrics {
    pthread_mutex_t mu;
    uint64_t ok[AGENT_METRIC_OPS], failed[AGENT_METRIC_OPS];
    ferry_histogram seconds[AGENT_METRIC_OPS];
    uint64_t bytes_sent, bytes_received, bytes_uploaded;
    uint64_t parts_received, parts_refused; /* receives placed / refused by their checks */
    uint64_t auth_failures; /* requests refused for a missing or wrong bearer token */
    ferry_httpd *httpd;     /* the server the routes run in (ferry_agent_set_httpd), or NULL */
} agent_metrics;

/* The trash's reaper (trash.c): the trash folders it empties and its thread. */
#define AGENT_TRASH_DIRS 64
typedef struct agent_trash {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running, stopping, pending;
    char **dirs; /* AGENT_TRASH_DIRS slots, n_dirs used; entries never change once set */
    size_t n_dirs;
} agent_trash;

/* What the agent's part transfers (send, receive) keep between requests for a moment
 * (AGENT_CACHE_MS): ClickHouse's disks, its version and a few tables' data paths. A batch of
 * moves sends tens of parts of one table one after another, and looking them up again for each
 * part cost five statements on each side (docs/moves.md, "Batches"); the version alone, asked
 * by every pointer part received, 2-4 ms of a 12 ms receive on two cores (docs/benchmarks.md,
 * "Session 31"). */
#define AGENT_CACHE_MS 2000
#define AGENT_CACHE_TABLES 16
typedef struct agent_cached_table {
    char *db, *table;
    ferry_ch_data_path *paths;
    size_t n;
    double at_ms; /* CLOCK_MONOTONIC; 0: empty slot */
} agent_cached_table;
typedef struct agent_cache {
    pthread_mutex_t mu;   /* the fields below */
    pthread_mutex_t fill; /* held by the one request that looks up what is missing, so that
                           * transfers arriving together at a cold cache ask ClickHouse once;
                           * taken before mu, never while holding it */
    struct agent_disk *disks; /* system.disks as agent_env_roots reads it */
    size_t n_disks;
    double disks_at_ms; /* 0: none */
    ferry_ch_version version; /* SELECT version(), as agent_env_server_version read it */
    double version_at_ms;     /* 0: none */
    agent_cached_table tables[AGENT_CACHE_TABLES];
} agent_cache;

struct ferry_agent {
    char *ch_url, *ch_user, *ch_password;
    char *data_path; /* ends with '/' */
    char *token;
    char *config_path;
    unsigned long (*refused_deletes)(void); /* may be NULL (ferry_agent_options) */
    agent_metrics metrics;
    agent_trash trash;
    agent_cache cache;
};

typedef struct agent_disk {
    char *name;
    char *path;     /* as system.disks gives it, ending with '/' (metadata path for object disks) */
    bool is_remote; /* an object-storage disk: its files are pointer files */
    /* a cache disk (ClickHouse's type cache) wrapping another object-storage disk: it shares
     * that disk's metadata path, and parts on it name it, not the wrapped disk */
    bool is_cache;
} agent_disk;

/* The object store as the config describes it, for turning keys around. */
typedef struct agent_store_info {
    bool local;
    char *root;            /* local: the blob directory as configured, ending with '/' */
    char *prefix;          /* [object_store] prefix for uploaded parts ("" when none) */
    char *disk_key_prefix; /* ClickHouse's key prefix for pointer versions 1..4 */
} agent_store_info;

/* Everything one request works with. Filled lazily; freed by agent_env_free. */
typedef struct agent_env {
    ferry_agent *a;
    ferry_ch_client *ch;
    bool cfg_loaded;
    ferry_config cfg;
    bool store_loaded;
    agent_store_info store;
    bool roots_loaded;
    ferry_roots roots;
    agent_disk *disks;
    size_t n_disks;
    unsigned status; /* HTTP status to answer an error with; 0: from the error code */
    bool cached; /* a part transfer: disks and table paths may come from the agent's cache */
    bool cache_fill; /* table paths looked up afresh are kept for the transfers that follow
                      * (a freeze, whose sends come next), though not read from the cache */
} agent_env;

void agent_env_init(agent_env *env, ferry_agent *a);
void agent_env_free(agent_env *env);
int agent_env_ch(agent_env *env, ferry_err *err);
int agent_env_config(agent_env *env, ferry_err *err);
int agent_env_store(agent_env *env, ferry_err *err);
/* False when another remote disk with the same metadata path stands for d's pointer files: a
 * cache disk wrapping d (the one parts name), or for two alike, the first by name. A walk of
 * every remote disk visits each pointer file once this way. */
bool agent_disk_walks(const agent_env *env, const agent_disk *d);
/* Loads system.disks and the allowed roots (data path + every disk path). */
int agent_env_roots(agent_env *env, ferry_err *err);
const agent_disk *agent_env_disk(const agent_env *env, const char *name);
/* The local server's version; a part transfer (env->cached) takes the one read in the last
 * AGENT_CACHE_MS. */
int agent_env_server_version(agent_env *env, ferry_ch_version *out, ferry_err *err);
/* The pinned pointer format ([cluster] pointer_format, default 5), checked against the server. */
int agent_env_pointer_version(agent_env *env, int *version, ferry_err *err);
/* Opens the object store with role (never the janitor's). */
int agent_env_open_store(agent_env *env, ferry_objstore_role role, ferry_objstore **out,
                         ferry_err *err);
/* ClickHouse's full object key for a store key, and back (NULL when the key is not ferry's
 * store's: outside the local root). Caller frees. */
char *agent_store_ch_key(const agent_store_info *s, const char *store_key);
char *agent_store_key_of(const agent_store_info *s, const char *ch_key);

/* The table's data directory on each of its disks. */
typedef struct agent_table_dir {
    const agent_disk *disk;
    char *path; /* canonical, inside the roots, ending with '/' */
    char *rel;  /* relative to the disk's path (for shadow/<name>/<rel>) */
} agent_table_dir;

/* Looks the table up (FERRY_ENOTFOUND naming it when it does not exist) and returns its data
 * directories, each checked against the roots. */
int agent_table_dirs(agent_env *env, const char *db, const char *table, agent_table_dir **out,
                     size_t *n, ferry_err *err);
void agent_table_dirs_free(agent_table_dir *d, size_t n);
void agent_cache_init(agent_cache *c);
void agent_cache_free(agent_cache *c);
/* The directory on disk `disk` (NULL: the only remote one when want_remote, else the first
 * local one). FERRY_EINVAL naming what is missing. */
int agent_pick_dir(const agent_table_dir *d, size_t n, const char *disk, bool want_remote,
                   const agent_table_dir **out, ferry_err *err);

/* Finds a frozen part: shadow/<freeze>/<rel>/<part>/ on any disk of the table. *dir (caller
 * frees) is its canonical path; *disk is the disk. FERRY_ENOTFOUND when absent. */
int agent_find_frozen_part(agent_env *env, const agent_table_dir *dirs, size_t n,
                           const char *freeze, const char *part, char **dir,
                           const agent_disk **disk, ferry_err *err);
/* Finds an active part in the table's own folder, <path>/<part>/, for a live send: only on an
 * object-storage disk (FERRY_EINVAL for a local one: its files are the data, and a merge may
 * remove them under the send; freeze it instead). *dir (caller frees), *disk as above;
 * FERRY_ENOTFOUND when no folder of the table holds it. */
int agent_find_live_part(agent_env *env, const agent_table_dir *dirs, size_t n, const char *part,
                         char **dir, const agent_disk **disk, ferry_err *err);

/* ---- the trash (trash.c) ---- */

/* Starts the reaper (0), or -1 when no thread could be made: removals then run in place. */
int agent_trash_init(agent_trash *t);
/* Stops the reaper after a last round. */
void agent_trash_destroy(agent_trash *t);
/* Removes the folder canon (checked against the roots by the caller) of the disk at disk_path:
 * renamed into the disk's trash and deleted in the background, or removed in place when it
 * cannot be renamed there. */
int agent_trash_remove(agent_env *env, const char *disk_path, const char *canon, ferry_err *err);
/* Has the reaper empty disk_path's trash if it exists (what a killed agent left behind). */
void agent_trash_register_disk(agent_env *env, const char *disk_path);
/* true for the trash's path relative to a disk: the pointer walk skips it. */
bool agent_trash_skip(const char *rel);

/* ---- file helpers (files.c) ---- */

/* The largest pointer file the agent reads (they are a few hundred bytes). */
#define AGENT_POINTER_FILE_MAX (1u << 20)

typedef struct agent_file {
    char *name;
    uint64_t size;
} agent_file;

/* The regular files of a part folder, sorted by name. A symlink, a subdirectory (projection)
 * or another kind of entry is refused with FERRY_EUNSUPPORTED naming it. */
int agent_list_part_files(const char *dir, agent_file **out, size_t *n, ferry_err *err);
void agent_files_free(agent_file *f, size_t n);
/* Removes path and everything below (no symlink is followed). Missing: FERRY_OK. */
int agent_rmtree(const char *path, ferry_err *err);
/* mkdir that accepts an existing directory. */
int agent_mkdir(const char *path, ferry_err *err);
/* Writes a whole file in dirfd (O_EXCL, fsync). ENOSPC gives FERRY_EIO with "no space left". */
int agent_write_file_at(int dirfd, const char *name, const void *data, size_t len, ferry_err *err);
int agent_fsync_dir(const char *path, ferry_err *err);
/* The same as agent_write_file_at without the fsync: the writeback is only started, and
 * agent_fsync_files on the folder makes the files durable later (writing a part's files first
 * and syncing them after costs about one journal commit instead of one per file). */
int agent_write_file_nosync_at(int dirfd, const char *name, const void *data, size_t len,
                               ferry_err *err);
/* fsync of every file in the folder open on dirfd and of the folder itself (its entries), several
 * at once (one journal commit for them); on failure errno holds the first failing fsync's
 * error. */
int agent_fsync_files(int dirfd, ferry_err *err);
/* fsync of names[0..n) (relative to dirfd, the last component not followed), several at once
 * as above; on failure errno holds the first failing fsync's error. */
int agent_fsync_names(int dirfd, char *const *names, size_t n, ferry_err *err);
/* true when every file of dir a has the same name set and bytes as dir b. */
bool agent_dirs_equal(const char *a, const char *b);
/* Reads a small file whole (max bytes); caller frees. */
int agent_read_small(const char *path, size_t max, char **data, size_t *len, ferry_err *err);
/* A fresh temporary folder name "tmp-ferry-<pid>-<hex>" (no '_', so ClickHouse never takes it for a
 * part). */
void agent_tmp_name(char *out, size_t outsz);
/* Whether a detached/ entry named `name` is a temporary folder (agent_tmp_name) whose writer
 * process still runs: such a folder is a receive in progress and must not be removed. */
bool agent_tmp_in_use(const char *name);
/* Creates detached/ under the table directory if needed and a fresh temporary folder in it.
 * *detached and *tmp: canonical paths, caller frees. */
int agent_make_tmp(agent_env *env, const agent_table_dir *td, char **detached, char **tmp,
                   ferry_err *err);
/* Moves the complete temporary folder, synced with agent_fsync_files, to detached/<part> and,
 * with sync_detached, syncs detached/ (without: the caller does, once for several renames).
 * When detached/<part> exists already
 * with the same files, the temporary folder is dropped and *existing set; with other content
 * the call fails with FERRY_ECONFLICT (nothing is overwritten). *final_out: caller frees. */
int agent_place_tmp(agent_env *env, const char *detached, const char *tmp, const char *part,
                    bool sync_detached, char **final_out, bool *existing, ferry_err *err);
/* Sets env->status to 507 when the last error was a full disk. */
void agent_note_errno(agent_env *env, int e);

/* ---- operations (ops.c, transfer.c): req is the JSON body; *resp the answer ---- */
typedef int (*agent_op_fn)(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_status(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_parts(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_freeze(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_frozen(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_upload(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_write_pointers(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_send(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_remove_detached(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_remove_freeze(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_pointers(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_place_parts(agent_env *env, json_t *req, json_t **resp, ferry_err *err);
int agent_op_pin(agent_env *env, json_t *req, json_t **resp, ferry_err *err); /* pin.c */

/* The HTTP status an operation's error answers with (server.c): 400 bad input, 404 not found,
 * 409 conflict, 422 unsupported, 502 a server behind the agent, ... */
unsigned agent_status_for(int code);

/* JSON request fields: a required string (FERRY_EINVAL naming the field when missing). */
int agent_req_str(json_t *req, const char *field, const char **out, ferry_err *err);
/* Same, and it must be a safe path component. */
int agent_req_name(json_t *req, const char *field, const char **out, ferry_err *err);
const char *agent_req_opt(json_t *req, const char *field);

/* ---- the receiving side of a part stream (transfer.c) ---- */
typedef struct agent_recv agent_recv;
/* Starts a receive (from the request's arguments); on failure env->status/err tell why. */
/* part NULL: a batch of pointer parts (kind "pointer"), each named by the stream's P lines. */
int agent_recv_begin(agent_env *env, const char *db, const char *table, const char *part,
                     const char *kind, const char *disk, agent_recv **out, ferry_err *err);
int agent_recv_feed(agent_recv *r, const char *data, size_t len, ferry_err *err);
/* Verifies and renames into place; *resp is the answer. */
int agent_recv_finish(agent_recv *r, json_t **resp, ferry_err *err);
/* Removes the temporary folder if the part was not placed; frees r. */
void agent_recv_free(agent_recv *r);

/* ---- part stream format (stream.c), pure ----
 *   "ferry-part 1\n"
 *   in a batch (API 5), before each part's files: "P <part>\n"
 *   per file: "F <size> <name>\n" <size bytes> "H <xxh3-64 hex>\n"
 *   "E <file count>\n" (all the stream's files) and nothing after. */
#define AGENT_STREAM_MAGIC "ferry-part 1\n"
#define AGENT_STREAM_LINE_MAX 512

typedef struct agent_stream_cb {
    /* a batch's "P <part>" line: the files that follow are that part's; NULL for the stream of
     * one part, where such a line is refused (and a batch refuses a file before its first P) */
    int (*part_begin)(void *ud, const char *part, ferry_err *err);
    int (*file_begin)(void *ud, const char *name, uint64_t size, ferry_err *err);
    int (*file_data)(void *ud, const char *data, size_t len, ferry_err *err);
    int (*file_end)(void *ud, ferry_err *err);
} agent_stream_cb;

typedef struct agent_stream {
    agent_stream_cb cb;
    void *ud;
    int state; /* internal */
    char line[AGENT_STREAM_LINE_MAX + 1];
    size_t line_len;
    uint64_t remaining;
    uint64_t files;
    uint64_t parts; /* P lines seen */
    void *xxh; /* XXH3_state_t */
    char name[256];
    bool done;
} agent_stream;

int agent_stream_init(agent_stream *s, const agent_stream_cb *cb, void *ud, ferry_err *err);
int agent_stream_feed(agent_stream *s, const char *data, size_t len, ferry_err *err);
/* FERRY_EINVAL when the stream ended early. */
int agent_stream_finish(agent_stream *s, ferry_err *err);
void agent_stream_free(agent_stream *s);

#endif
