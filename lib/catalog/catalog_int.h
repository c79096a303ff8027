/* The catalog's insides: the backend interface (a table of function pointers that the SQLite and
 * ZooKeeper backends fill) and the record codec shared by both. Backends store documents (JSON
 * text) at slash-separated paths ("shards/node1", "parts/events/p1/all_1_1_0") with a version
 * each; they know nothing of record types. */
#ifndef FERRY_CATALOG_INT_H
#define FERRY_CATALOG_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/catalog_scan.h"

enum cat_op_type { CAT_CREATE = 0, CAT_SET, CAT_DELETE, CAT_CHECK };

/* What a change of a move record does to its entry in the index of unfinished moves. */
enum cat_index_change {
    CAT_INDEX_NONE = 0, /* not a move record, or a check */
    CAT_INDEX_WANT,     /* the record is unfinished afterwards: the entry must exist */
    CAT_INDEX_DROP,     /* finished (DONE, FAILED) or deleted afterwards: no entry */
    CAT_INDEX_KEEP,     /* a compare-and-set update to an unfinished state: the record was
                         * unfinished (a finished move is never made unfinished again: the
                         * move flow kind, lib/flow/move_flow.c, declares no transition out of
                         * DONE or FAILED), so its entry exists: nothing to read or
                         * write (the common case: a move's progress) */
};

/* One queued change. path and doc are owned by the batch. */
typedef struct cat_op {
    enum cat_op_type type;
    char *path;
    char *doc;       /* CREATE and SET */
    size_t doc_len;
    int64_t version; /* expected (SET, DELETE, CHECK); FERRY_VERSION_ANY = any */
    /* SET with a version: the document at that version, when the caller has just read it
     * (borrowed; NULL: not known). A ZooKeeper batch of many chunks journals it as the undo
     * instead of reading it again: the set is conditioned on the version, so if it applies, this
     * was the text it replaced. */
    const char *prior;
    bool is_route;   /* changes the routing table */
    enum cat_index_change move_index;
} cat_op;

/* Appends an operation to *ops (n used, cap allocated; grown as needed): path and doc (NULL: none)
 * are copied and owned by the array. Any version (FERRY_VERSION_ANY). */
int cat_op_push(cat_op **ops, size_t *n, size_t *cap, enum cat_op_type type, const char *path,
                const char *doc, ferry_err *err);

struct ferry_batch {
    cat_op *ops;
    size_t n, cap;
};

/* A stored document. Owned by whoever holds the item (cat_items_free). */
typedef struct cat_item {
    char *path;
    char *doc;
    int64_t version;
} cat_item;

typedef struct cat_items {
    cat_item *v;
    size_t n, cap;
} cat_items;

int cat_items_push(cat_items *l, const char *path, const char *doc, size_t doc_len,
                   int64_t version);
void cat_items_free(cat_items *l);
void cat_item_free(cat_item *it);

/* A record as a backend's flat scan hands it over (scan_flat): pointers into the texts its
 * cat_flat owns, nothing allocated per record. The record's path is DIR/MID/NAME (MID: the
 * segments between the folder and the last one, empty at depth 1); doc is NUL-terminated and
 * lies in one of the flat's blocks (the holder may rewrite it in place). */
typedef struct cat_span {
    const char *mid, *name;
    char *doc;
    int64_t version;
    uint32_t mid_len, name_len;
    uint32_t doc_len; /* strlen(doc) */
} cat_span;

/* A folder's records from a flat scan: v[0..n) point into blocks[0..n_blocks), each malloc'ed
 * and owned by the cat_flat. Free with cat_flat_free. */
typedef struct cat_flat {
    cat_span *v;
    size_t n, cap;
    char **blocks;
    size_t n_blocks, cap_blocks;
    bool in_order; /* set by the backend when v is in the compact scans' key order (the middle
                    * segments bytewise, then the last as a number): nothing to check */
} cat_flat;

/* Appends a span (FERRY_ENOMEM). */
int cat_flat_span(cat_flat *f, const cat_span *s);
/* Takes block (malloc'ed) into f's ownership; when that fails (FERRY_ENOMEM) block is freed. */
int cat_flat_block(cat_flat *f, char *block);
/* Moves every item of items (paths dir/MID/NAME, dir_len bytes of dir) into f as spans; items
 * is emptied either way (its strings belong to f, or are freed on FERRY_ENOMEM). */
int cat_flat_take_items(cat_flat *f, cat_items *items, size_t dir_len);
void cat_flat_free(cat_flat *f);

enum cat_routing_change { CAT_ROUTING_KEEP = 0, CAT_ROUTING_BUMP, CAT_ROUTING_SET };

typedef struct cat_commit_req {
    const cat_op *ops;
    size_t n;
    enum cat_routing_change routing;
    uint64_t routing_value;  /* CAT_ROUTING_SET */
    int64_t *new_versions;   /* n slots filled on success (-1 for DELETE and CHECK) */
    /* CAT_ROUTING_BUMP: the routing change log's entry for the new version (routing_delta.c),
     * written in the same commit at CAT_ROUTING_LOG_DIR/<new version>; NULL: none */
    const char *routing_log;
} cat_commit_req;

typedef struct cat_backend cat_backend; /* each backend defines it */

typedef struct cat_backend_ops {
    const char *name;
    /* FERRY_ENOTFOUND when nothing is stored at path. */
    int (*get)(ferry_catalog *c, const char *path, cat_item *out, ferry_err *err);
    /* Every document exactly depth levels below prefix ("parts", 3), in any order. */
    int (*scan)(ferry_catalog *c, const char *prefix, int depth, cat_items *out, ferry_err *err);
    /* Optional (NULL: scan, then cat_flat_take_items): the same documents as scan, handed
     * over as spans into texts out owns, without an allocation per record (the compact scans,
     * lib/catalog/scan.c). */
    int (*scan_flat)(ferry_catalog *c, const char *prefix, int depth, cat_flat *out,
                     ferry_err *err);
    /* Optional: from the backend's own compact copy, every tenant row to tenant_fn (unless NULL,
     * as ferry_catalog_scan_tenants gives them), then every slice row to slice_fn (unless NULL,
     * as ferry_catalog_scan_slices), and *used; or nothing called and *used false (the scans
     * read the records). */
    int (*scan_rows)(ferry_catalog *c, ferry_tenant_row_fn tenant_fn, ferry_slice_row_fn slice_fn,
                     void *arg, bool *used, ferry_err *err);
    /* All of req or nothing. FERRY_ECONFLICT / FERRY_ENOTFOUND name the failing path. */
    int (*commit)(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info,
                  ferry_err *err);
    int (*routing_version)(ferry_catalog *c, uint64_t *v, ferry_err *err);
    int (*routing_wait)(ferry_catalog *c, uint64_t known, int timeout_ms, uint64_t *now,
                        ferry_err *err);
    int (*lease_acquire)(ferry_catalog *c, const char *name, const char *owner, void **token,
                         ferry_err *err);
    bool (*lease_valid)(ferry_catalog *c, void *token);
    void (*lease_release)(ferry_catalog *c, void *token);
    int (*recover)(ferry_catalog *c, size_t *recovered, ferry_err *err);
    void (*close)(ferry_catalog *c);
} cat_backend_ops;

struct ferry_catalog {
    const cat_backend_ops *ops;
    cat_backend *be;
    size_t chunk_ops;
    ferry_catalog_progress_fn progress;
    void *progress_arg;
};

/* The SQLite connection of a "sqlite:" catalog, NULL for another backend: for tests that check
 * the connection's settings (journal mode, synchronous). */
struct sqlite3 *cat_sqlite_handle(const ferry_catalog *c);

/* ---- a slice pack's text (lib/catalog/slice_pack_format.c, docs/catalog.md) ---- */

/* A pack being built for one tenant: cat_pack_row appends one row's line to s (malloc'ed,
 * len bytes, not NUL-terminated; the caller frees s), or sets refused for a row the format
 * cannot carry (the caller keeps the records' join for that tenant). */
typedef struct cat_pack_buf {
    const char *tenant; /* the tenant of the records' path (borrowed) */
    char *s;
    size_t len, cap;
    bool refused;
} cat_pack_buf;
/* A ferry_slice_row_fn: arg is a cat_pack_buf. FERRY_ENOMEM only. */
int cat_pack_row(const ferry_slice_row *row, void *arg, ferry_err *err);

/* The strings of the row being handed over (the rows fn sees point into it). */
typedef struct cat_unpack {
    char tenant[FERRY_NAME_MAX], placement[FERRY_SHARDS_TEXT_MAX], shards[FERRY_SHARDS_TEXT_MAX];
} cat_unpack;
/* The rows of key's pack (text, len bytes) to fn, in the pack's order; fn's error stops it.
 * FERRY_EIO naming the tenant and the line when text is not a pack ferry wrote, with rebuild
 * (what builds it again) in the message. */
int cat_unpack_rows(const char *key, const char *text, size_t len, cat_unpack *u,
                    ferry_slice_row_fn fn, void *arg, const char *rebuild, ferry_err *err);

/* The join of one tenant's slice entries and route entries (spans in key order, middle segment
 * the tenant and name the split's digits, as zdoc_spans gives a tenant document's; the flats stay
 * the caller's) by split, every row to fn as ferry_catalog_scan_slices gives it. Documents the
 * compact parse does not take go through the record decoder; one it refuses is an error naming
 * its key. The ZooKeeper backend builds its slice packs with it (lib/catalog/zk_pack.c). */
int cat_join_flats(ferry_catalog *c, cat_flat *slices, cat_flat *routes, ferry_slice_row_fn fn,
                   void *arg, ferry_err *err);

/* ---- the SQLite backend's slice packs (lib/catalog/slice_pack.c, docs/catalog.md) ---- */

/* Every slice record and route of one tenant (the folders slices/TENANT and routes/TENANT),
 * joined by key as ferry_catalog_scan_slices gives them, read on the catalog's own SQLite
 * connection (inside a commit: with the commit's writes). SQLite catalogs only (scan.c); the
 * statements are prepared once for many tenants (open, then scan each, then close). */
typedef struct cat_tenant_scan cat_tenant_scan;
int cat_tenant_scan_open(ferry_catalog *c, cat_tenant_scan **out, ferry_err *err);
int cat_scan_tenant_slices(cat_tenant_scan *ts, const char *tenant, ferry_slice_row_fn fn,
                           void *arg, ferry_err *err);
void cat_tenant_scan_close(cat_tenant_scan *ts); /* NULL: nothing */

/* In the caller's write transaction on the catalog's connection: the pack of every tenant the
 * triggers marked changed, built again from its records and the mark removed. A tenant that
 * cannot be packed (a record the decoder refuses, text with control characters) keeps its mark,
 * and the scans read records for as long as it does. Fails only when SQLite does. */
int cat_slice_pack_refresh(ferry_catalog *c, ferry_err *err);

/* On db (a read-only connection of the scan's own, in no transaction): when the packs are
 * complete (no tenant marked changed), every slice row from them in one read transaction, fn
 * called for each as ferry_catalog_scan_slices would, and *used set; else nothing called and
 * *used false (the caller joins the records instead). */
int cat_slice_pack_scan(struct sqlite3 *db, ferry_slice_row_fn fn, void *arg, bool *used,
                        ferry_err *err);

/* Backend constructors: rest is the URL after "sqlite:" / "zk://". */
int cat_sqlite_open(ferry_catalog *c, const char *rest, ferry_err *err);
int cat_zk_open(ferry_catalog *c, const char *rest, ferry_err *err);
/* zk_auth.c: adds the digest identity "user:password" read from the secret file at path to the
 * session zh (void * here: catalog_int.h does not include ZooKeeper's header). */
int cat_zk_add_auth(void *zh, const char *path, int timeout_ms, ferry_err *err);

/* ---- record codec (records.c) ---- */

/* Top-level folder of a kind ("shards") and how many key segments its records have. */
const char *cat_kind_dir(enum ferry_record_kind k);
int cat_kind_depth(enum ferry_record_kind k);
/* The kind whose folder is dir; -1 if none. */
int cat_kind_from_dir(const char *dir);
/* Whether s is a valid key segment. */
bool cat_name_ok(const char *s);
/* The record's path; FERRY_EINVAL naming the bad key field. */
int cat_record_path(const ferry_record *r, char *path, size_t size, ferry_err *err);
/* JSON object for a record (new reference) and back. */
json_t *cat_record_to_json(const ferry_record *r);
int cat_record_from_json(enum ferry_record_kind kind, const json_t *o, ferry_record *r,
                         ferry_err *err);
/* Canonical document text (compact, sorted keys). Caller frees. NULL on allocation failure. */
char *cat_record_encode(const ferry_record *r);
int cat_record_decode(enum ferry_record_kind kind, const char *doc, ferry_record *r,
                      ferry_err *err);

/* Path order, segment by segment, numbers compared as numbers (split 2 before split 10). */
int cat_path_cmp(const char *a, const char *b);

/* ---- the index of unfinished moves (move_index.c, docs/catalog.md) ----
 * An empty document at moves_active/ID for every move record whose state is neither DONE nor
 * FAILED, created and deleted in the same commit as the record's change, so that listing the
 * unfinished moves costs O(unfinished) and not O(history). The marker document says the index is
 * complete: a catalog written before the index existed has none until the first listing of
 * unfinished moves builds the index (and the marker) in one commit. */
#define CAT_MOVE_INDEX_DIR "moves_active"
#define CAT_INDEXES_DIR "indexes" /* markers of complete indexes; derived documents (loads.c) */
#define CAT_MOVE_INDEX_MARKER CAT_INDEXES_DIR "/moves_active"

/* The backend operations for ops[0..n) with the index entries their move records need
 * (CAT_INDEX_WANT: created when missing; CAT_INDEX_DROP: deleted when present; whether an entry
 * exists is read now; CAT_INDEX_KEEP: nothing). *all is NULL when nothing is added; else a new array of *n_all ops: the n
 * given ops (shallow copies, still owned by the batch) followed by the added ones (owned by the
 * array): release it with cat_move_index_ops_free(*all, n, *n_all). */
int cat_move_index_ops(ferry_catalog *c, const cat_op *ops, size_t n, cat_op **all,
                       size_t *n_all, ferry_err *err);
void cat_move_index_ops_free(cat_op *all, size_t n, size_t n_all);

/* ---- the routing change log (routing_delta.c, docs/catalog.md "The routing change log") ----
 * Every commit that raises the routing version by one writes, in the same commit, a document at
 * routing_log/<new version> naming the tenants whose record or routes it changed
 * ({"tenants":[...]}, or {"all":true} when there were too many to list), and removes the entry
 * CAT_ROUTING_LOG_KEEP versions older (SQLite: in the same transaction; ZooKeeper: right after,
 * best effort). A router at version V reads the entries V+1..now to learn which tenants to read
 * again; a missing entry (pruned, or a version set by an import) means a full read. */
#define CAT_ROUTING_LOG_DIR "routing_log"
#define CAT_ROUTING_LOG_KEEP 1000
/* The log entry for ops[0..n) (malloc'ed text, caller frees); NULL when out of memory. */
char *cat_routing_log_doc(const cat_op *ops, size_t n);
/* The index of open repair needs (routing_delta.c, docs/catalog.md "The routing change log"):
 * a copy of each repair-need record (jobs/repair-need.*) at indexes/repair_needs/ID, written and
 * deleted in the same commit as the record, so that a router's full load lists the open needs
 * without reading every job record (tier jobs are kept, one per partition tiered). The marker
 * says the index is complete (a catalog written before it existed has none until the first full
 * load builds it). Same contract as cat_move_index_ops: *all NULL when nothing is added, else
 * the n ops (shallow copies) followed by the added ones; free with cat_need_index_ops_free. */
#define CAT_NEED_INDEX_DIR CAT_INDEXES_DIR "/repair_needs"
#define CAT_NEED_INDEX_MARKER CAT_INDEXES_DIR "/repair_needs_built"
int cat_need_index_ops(ferry_catalog *c, const cat_op *ops, size_t n, cat_op **all,
                       size_t *n_all, ferry_err *err);
void cat_need_index_ops_free(cat_op *all, size_t n, size_t n_all);

/* A route document in the canonical encoding taken apart without a JSON parser (catalog.c);
 * false: anything else (decode it). The strings point into doc. */
bool cat_route_fast(const char *doc, const char **shards, size_t *n_shards, uint32_t *split,
                    const char **tenant, size_t *n_tenant);

#endif
