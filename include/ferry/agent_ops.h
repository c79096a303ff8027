/* The typed agent client: one C function per operation of the node agent (docs/agent.md), with
 * C types in and out, over a ferry_agent_client (ferry/agent.h). The flows call these instead of
 * packing JSON requests and reading answers field by field.
 *
 * Answers are decoded once, here: strings in an answer struct are borrowed from the answer the
 * struct keeps (its `raw`), so they live until the struct's _free function, which the caller
 * calls on success and failure alike (a zeroed struct frees to nothing).
 *
 * Errors are ferry_agent_call's (the code follows the HTTP status, the message is the agent's
 * text); when the client has a name (ferry_agent_client_set_name: the shard's) the message is
 * prefixed "agent of NAME (OP): ". The HTTP status of the client's last request is
 * ferry_agent_client_last_status (0: no answer).
 *
 * Many-part forms (API 2) fall back to one request per item when the agent answers 400 to them
 * (an agent of API 1); the client remembers that per operation, so the later calls of its life go
 * one at a time at once. Not thread-safe: one client per thread, as ferry_agent_client. */
#ifndef FERRY_AGENT_OPS_H
#define FERRY_AGENT_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/agent.h"
#include "ferry/err.h"

/* ---- the client's name and counters --------------------------------------------------------- */

/* Names the client's agent (a shard's name, copied) in the typed operations' error messages and
 * in the slow-call log line. NULL: unnamed (messages as ferry_agent_call gives them). */
void ferry_agent_client_set_name(ferry_agent_client *c, const char *name);

/* A request that takes at least this long is logged at info with its operation and time. */
#define FERRY_AGENT_SLOW_MS 500

typedef struct ferry_agent_client_stats {
    unsigned long requests; /* every request the client made: JSON operations and part streams */
    unsigned long slow;     /* those that took FERRY_AGENT_SLOW_MS or longer */
    double ms;              /* the time all of them took */
} ferry_agent_client_stats;

void ferry_agent_client_stats_get(const ferry_agent_client *c, ferry_agent_client_stats *out);
/* The HTTP status of the client's last answer (0: none, the agent was not reached). */
long ferry_agent_client_last_status(const ferry_agent_client *c);

/* ---- status --------------------------------------------------------------------------------- */

typedef struct ferry_agent_disk {
    const char *name, *path;
    bool remote;
    bool has_bytes;  /* free_bytes and total_bytes were reported (local disks) */
    uint64_t free_bytes, total_bytes;
    bool has_inodes; /* free_inodes was reported (a file system with an inode limit) */
    uint64_t free_inodes;
} ferry_agent_disk;

typedef struct ferry_agent_status_info {
    int api;                        /* FERRY_AGENT_API_VERSION of the agent; 1 when not said */
    const char *clickhouse_version; /* NULL when missing */
    const char *data_path;
    int pointer_format;             /* -1: not reported (no --config, or its error below) */
    const char *pointer_format_error;
    const char *object_store;       /* NULL without --config */
    ferry_agent_disk *disks;
    size_t n_disks;
    json_t *raw;
} ferry_agent_status_info;

/* GET status. */
int ferry_agent_status(ferry_agent_client *c, ferry_agent_status_info *out, ferry_err *err);
void ferry_agent_status_info_free(ferry_agent_status_info *s);

/* ---- parts ---------------------------------------------------------------------------------- */

typedef struct ferry_agent_part {
    const char *name, *partition_id, *partition, *disk, *path, *hash_of_all_files;
    uint64_t rows, bytes_on_disk;
} ferry_agent_part;

typedef struct ferry_agent_detached {
    const char *name;         /* never NULL (entries without a name are left out) */
    const char *partition_id; /* NULL for a folder that is not a part (tmp-ferry-..., broken) */
    const char *partition, *disk, *path, *reason;
    uint64_t bytes_on_disk;
    bool has_rows; /* rows read from count.txt (a local disk) */
    uint64_t rows;
} ferry_agent_detached;

typedef struct ferry_agent_data_path {
    const char *disk, *path; /* NULL when the answer lacks them */
    bool remote;             /* a disk on object storage */
} ferry_agent_data_path;

typedef struct ferry_agent_part_list {
    ferry_agent_data_path *data_paths; /* the table's directories, one per disk */
    size_t n_data_paths;
    ferry_agent_part *parts;
    size_t n_parts;
    ferry_agent_detached *detached;
    size_t n_detached;
    json_t *raw;
} ferry_agent_part_list;

/* parts of db.table (partition pid; NULL: every partition). */
int ferry_agent_parts(ferry_agent_client *c, const char *db, const char *table, const char *pid,
                      ferry_agent_part_list *out, ferry_err *err);
void ferry_agent_part_list_free(ferry_agent_part_list *l);
/* Whether disk is one of the table's disks on object storage in l (its data_paths). */
bool ferry_agent_part_list_remote(const ferry_agent_part_list *l, const char *disk);

/* ---- freeze, frozen ------------------------------------------------------------------------- */

/* One item's outcome in a many-item call: OK, or the error it would have had alone (code from
 * ferry_agent_code_for_status of its status, the agent's message). With an agent of API 1 each
 * item has a request of its own: then a failed item's error is that request's whole error
 * message, the client's name included (alone true). */
typedef struct ferry_agent_item {
    int code;
    long status;       /* its HTTP status (200 when OK, 0 when the agent was not reached) */
    const char *error; /* NULL when OK */
    bool alone;        /* error is the whole message of the item's own request (API 1) */
} ferry_agent_item;


typedef struct ferry_agent_frozen_part {
    const char *name, *disk, *kind, *path;
    const char *freeze;       /* the freeze name it is under */
    const char *partition_id; /* from the answer, else from the part's name */
    bool pointer;             /* kind "pointer": its files are pointer files */
    uint64_t bytes;
    const json_t *files;      /* borrowed: the answer's "files" of the part */
} ferry_agent_frozen_part;

typedef struct ferry_agent_frozen {
    ferry_agent_frozen_part *parts;
    size_t n;
    bool existing; /* (some of) it was frozen by an earlier request */
    ferry_agent_item *items; /* ferry_agent_freeze_each: one per partition asked (else NULL) */
    size_t n_items;
    json_t *raw;   /* an array of the answers it was decoded from (and of items' errors) */
} ferry_agent_frozen;

/* freeze of one partition under name; FERRY_ENOTFOUND (404) when it has no active part. */
int ferry_agent_freeze(ferry_agent_client *c, const char *db, const char *table,
                       const char *pid, const char *name, ferry_agent_frozen *out,
                       ferry_err *err);
/* freeze of the partitions pids[0..n) under one name by one request ("partition_ids");
 * partitions without parts freeze nothing. API 1: one request per partition, one without parts
 * (404) skipped. */
int ferry_agent_freeze_ids(ferry_agent_client *c, const char *db, const char *table,
                           const char *name, const char *const *pids, size_t n,
                           ferry_agent_frozen *out, ferry_err *err);
typedef struct ferry_agent_freeze_item {
    const char *pid, *name; /* the partition and the freeze name it gets */
} ferry_agent_freeze_item;

/* freeze of each partition items[i].pid under its own name items[i].name by one request
 * ("partitions": a tiering job keeps its own freeze); partitions without parts freeze nothing.
 * API 1: one request per partition, and a partition whose own request is refused (404: it has
 * no active part; 400: the agent will not freeze it) fails alone: out->items[i] says so and the
 * others go on. Any other failure (the agent or ClickHouse unreachable) fails the call.
 * out->items has n entries (all OK when the one request succeeded); n 0 does nothing. */
int ferry_agent_freeze_each(ferry_agent_client *c, const char *db, const char *table,
                            const ferry_agent_freeze_item *items, size_t n,
                            ferry_agent_frozen *out, ferry_err *err);
/* frozen: the listing of what is frozen under name (pid NULL: every partition) without
 * freezing; FERRY_ENOTFOUND when nothing is. */
int ferry_agent_frozen_list(ferry_agent_client *c, const char *db, const char *table,
                            const char *name, const char *pid, ferry_agent_frozen *out,
                            ferry_err *err);
void ferry_agent_frozen_free(ferry_agent_frozen *f);
/* The frozen parts of partition pid in f (parts named "PID_..."): up to max pointers into
 * f->parts in out, their number returned. */
size_t ferry_agent_frozen_of(const ferry_agent_frozen *f, const char *pid,
                             const ferry_agent_frozen_part **out, size_t max);

/* ---- send ----------------------------------------------------------------------------------- */

typedef struct ferry_agent_send_req {
    const char *db, *table, *freeze, *part; /* the frozen part on the client's agent */
    bool live; /* API 3, freeze unused: part is an active part of the table on an object-storage
                * disk, sent from the table's folder (410 when it is no longer there) */
    const char *const *parts; /* API 5, with live (part unused): n_parts live pointer parts in */
    size_t n_parts;           /* receives of several parts each; the gone ones are answered */
    const char *target_url, *target_token;  /* the receiving agent */
    const char *target_db, *target_table;
    const char *target_disk;                /* NULL: the receiver's choice */
} ferry_agent_send_req;

typedef struct ferry_agent_sent {
    const char *kind; /* "hot" or "pointer" */
    bool pointer;
    uint64_t bytes_sent;
    const json_t *target; /* borrowed: the receiver's answer (one part) */
    const json_t *gone;   /* borrowed, a batch: the names of the parts no longer in the table */
    json_t *raw;
} ferry_agent_sent;

/* send: the client's agent streams a frozen part (or live ones) to the target agent. A refusal
 * by the target comes back with its status (ferry_agent_client_last_status: 507 no room, 422
 * failed checks, 409 conflict). A batch (r->n_parts) answers the parts that were no longer in
 * the table under out->gone and sends the others. */
int ferry_agent_send(ferry_agent_client *c, const ferry_agent_send_req *r, ferry_agent_sent *out,
                     ferry_err *err);
void ferry_agent_sent_free(ferry_agent_sent *s);

/* ---- removals ------------------------------------------------------------------------------- */

/* remove-detached of one folder (disk NULL: every disk of the table); *existed (may be NULL)
 * whether there was one. A tmp-ferry-* folder whose writer still runs is FERRY_ECONFLICT (409). */
int ferry_agent_remove_detached(ferry_agent_client *c, const char *db, const char *table,
                                const char *part, const char *disk, bool *existed,
                                ferry_err *err);
/* remove-detached of parts[0..n) by one request ("parts"), stopping at the first error; API 1:
 * one request per part. n 0 does nothing. */
int ferry_agent_remove_detached_n(ferry_agent_client *c, const char *db, const char *table,
                                  const char *const *parts, size_t n, const char *disk,
                                  ferry_err *err);
/* remove-freeze of shadow/<name>/ on every disk. */
int ferry_agent_remove_freeze(ferry_agent_client *c, const char *name, ferry_err *err);
/* remove-freeze of names[0..n) by one request ("names"), stopping at the first error; API 1:
 * one request per name. */
int ferry_agent_remove_freeze_n(ferry_agent_client *c, const char *const *names, size_t n,
                                ferry_err *err);

/* ---- place-parts ---------------------------------------------------------------------------- */

typedef struct ferry_agent_place {
    const char *disk, *name, *to;
} ferry_agent_place;

/* place-parts: renames detached/<name> of from_table (NULL: table) to <table's path>/<to> for
 * each entry, table DETACHed, data_paths[0..n_paths) its paths. *placed (may be NULL) the number
 * renamed now, *already (may be NULL) those an earlier request placed. */
int ferry_agent_place_parts(ferry_agent_client *c, const char *db, const char *table,
                            const char *from_table, const char *const *data_paths,
                            size_t n_paths, const ferry_agent_place *parts, size_t n,
                            size_t *placed, size_t *already, ferry_err *err);

/* ---- upload, write-pointers (per-part results) ---------------------------------------------- */

typedef struct ferry_agent_part_ref {
    const char *freeze, *part;
} ferry_agent_part_ref;

typedef struct ferry_agent_object {
    const char *file, *key, *clickhouse_key;
    uint64_t size;
    bool uploaded;                  /* false: the object was there with the same bytes */
    const char *file_hash, *sha256; /* NULL when not reported */
} ferry_agent_object;

typedef struct ferry_agent_uploaded {
    ferry_agent_item item; /* the rest is set when item.code is FERRY_OK */
    const char *part, *freeze, *partition_id;
    ferry_agent_object *objects;
    size_t n_objects;
    const json_t *objects_json; /* the same, as write-pointers takes them (borrowed) */
    const json_t *answer;       /* the part's whole answer (borrowed; fields as docs/agent.md) */
    bool verified; /* every file checksums.txt lists was there and matched */
    bool has_rows;
    uint64_t rows, uploaded, skipped, bytes_uploaded;
    double check_ms; /* the agent's time reading and hashing the part's files */
} ferry_agent_uploaded;

typedef struct ferry_agent_upload_list {
    ferry_agent_uploaded *parts; /* one per requested part, in request order */
    size_t n;
    json_t *raw;
} ferry_agent_upload_list;

/* upload of the frozen hot parts parts[0..n) by one request ("parts"; API 1: one request per
 * part). Fails only when the request as a whole did; each part's own outcome, a failure of its
 * own request included, is out->parts[i].item, so one bad part fails only its own job. */
int ferry_agent_upload(ferry_agent_client *c, const char *db, const char *table,
                       const ferry_agent_part_ref *parts, size_t n, ferry_agent_upload_list *out,
                       ferry_err *err);
void ferry_agent_upload_list_free(ferry_agent_upload_list *l);

typedef struct ferry_agent_pointer_part {
    const char *part;
    const json_t *objects; /* the part's upload objects (ferry_agent_uploaded.objects_json) */
} ferry_agent_pointer_part;

typedef struct ferry_agent_written {
    ferry_agent_item item;
    const char *part, *disk, *path;
    bool existing; /* detached/<part> was there with the same files */
} ferry_agent_written;

typedef struct ferry_agent_written_list {
    ferry_agent_written *parts; /* one per requested part, in request order */
    size_t n;
    json_t *raw;
} ferry_agent_written_list;

/* write-pointers of parts[0..n) into detached/ of db.table on disk (NULL: the table's
 * object-storage disk) by one request (API 1: one per part); outcomes as ferry_agent_upload. */
int ferry_agent_write_pointers(ferry_agent_client *c, const char *db, const char *table,
                               const char *disk, const ferry_agent_pointer_part *parts, size_t n,
                               ferry_agent_written_list *out, ferry_err *err);
void ferry_agent_written_list_free(ferry_agent_written_list *l);

/* ---- pointers ------------------------------------------------------------------------------- */

typedef struct ferry_agent_pointer_object {
    const char *key, *store_key; /* store_key NULL: outside the store */
    int64_t size;                /* -1 when the answer has none */
} ferry_agent_pointer_object;

typedef struct ferry_agent_pointer_file {
    const char *disk, *path;     /* NULL when the answer lacks them */
    bool has_objects;            /* the answer had an "objects" list */
    ferry_agent_pointer_object *objects;
    size_t n_objects;
    bool outdated;               /* of a part ClickHouse no longer counts as active */
    int64_t version, ref_count, links, size;
    bool read_only;
} ferry_agent_pointer_file;

typedef struct ferry_agent_unreadable {
    const char *path, *error; /* NULL when the answer lacks them */
} ferry_agent_unreadable;

typedef struct ferry_agent_pointer_list {
    ferry_agent_pointer_file *files;
    size_t n_files;
    ferry_agent_unreadable *invalid;
    size_t n_invalid;
    json_t *raw;
} ferry_agent_pointer_list;

/* pointers: every pointer file under the object-storage disks' metadata paths (disk, under:
 * NULL for all). An answer without its "files" or "invalid" list is FERRY_EUNSUPPORTED (an
 * agent of another version). */
int ferry_agent_pointers(ferry_agent_client *c, const char *disk, const char *under,
                         ferry_agent_pointer_list *out, ferry_err *err);
void ferry_agent_pointer_list_free(ferry_agent_pointer_list *l);

/* ---- pin (API 4) ---------------------------------------------------------------------------- */

typedef struct ferry_agent_pin_part {
    const char *name;  /* NULL when the answer lacks it */
    bool held;         /* every file's ref_count is at least its links, read after the sync */
    const char *error; /* why not held (NULL when held) */
} ferry_agent_pin_part;

typedef struct ferry_agent_pinned {
    ferry_agent_pin_part *parts; /* one per requested part, in request order */
    size_t n_parts;
    int64_t raised; /* files whose count the agent raised */
    json_t *raw;
} ferry_agent_pinned;

/* pin: raises the ref_count of every pointer file of parts[0..n) (active parts in the table
 * folder `under` of remote disk `disk`) to its count of hard links, synced, so that the server's
 * removal of those parts deletes no object (docs/agent.md). An answer that does not list one
 * result per part is FERRY_EUNSUPPORTED. */
int ferry_agent_pin(ferry_agent_client *c, const char *disk, const char *under,
                    const char *const *parts, size_t n, ferry_agent_pinned *out, ferry_err *err);
void ferry_agent_pinned_free(ferry_agent_pinned *p);

#endif
