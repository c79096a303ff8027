/* Private to the catalog's ZooKeeper backend (zk.c: plumbing, small writes, routing, leases,
 * open; zk_read.c: gets and scans between two looks at the gate; zk_batch.c: batches larger
 * than one multi, under the write gate, and their recovery; zk_auth.c: digest ACLs). */
#ifndef FERRY_CATALOG_ZK_INT_H
#define FERRY_CATALOG_ZK_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#include "catalog/catalog_int.h"

#define PATH_MAX_LEN 1024
#define CHUNK_BYTES (512 * 1024) /* well under ZooKeeper's 1 MB request limit */
#define SCAN_WINDOW 4096         /* asynchronous requests in flight while scanning */

struct cat_backend {
    zhandle_t *zh;
    char hosts[1024];
    char root[512]; /* "/ferry"; never ends with '/' */
    int timeout_ms; /* session timeout asked for */
    int wait_ms;    /* how long readers and writers wait for a batch in progress */
    char auth_file[512];     /* "": no authentication, open ACLs (zk_auth.c) */
    bool convert_layout;     /* URL convert_layout=1: convert an older layout at open
                              * (zk_tdoc.c) instead of refusing it */
    struct ACL_vector *acl;  /* for every znode created: creator-only once authenticated */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;       /* last session state */
    uint64_t events; /* bumped on every watch or session event */
    int64_t gate_version; /* cached version of an open gate; -1 unknown */
    char **parents;  /* container nodes known to exist */
    size_t n_parents, cap_parents;
    unsigned batch_seq;
    atomic_bool no_bulk; /* the server refused multiRead (zk_bulk.c): scans read one znode a
                          * request (atomic: threads may scan on one handle) */
    const cat_op *failed_op; /* the operation zk_user_op_error last reported (zk_tdoc.c tells
                              * a changed tenant document from a failed record) */
};

/* One multi's worth of operations with the storage they point into. */
typedef struct zmulti {
    zoo_op_t *ops;
    zoo_op_result_t *res;
    struct Stat *stats;
    char (*paths)[PATH_MAX_LEN];
    int *src; /* index into the request's ops, or -1 for bookkeeping operations */
    int n, cap;
} zmulti;

/* One asynchronous request of a pipelined batch: a getChildren (kids) or a get (doc). */
typedef struct scan_slot {
    struct scan_wait *w;
    int rc;
    char *doc;       /* the holder's (free), unless borrowed */
    size_t doc_len;  /* strlen(doc) */
    bool borrowed;   /* doc lies in a reply that zk_bulk_read's keep owns: not to be freed */
    int64_t version;
    struct String_vector kids;
} scan_slot;

typedef struct scan_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;
} scan_wait;

/* zk_bulk.c: a session of its own for a scan's reads by ZooKeeper's multiRead (many gets or
 * getChildren per request). Each returns ZOK or a ZooKeeper code; ZUNIMPLEMENTED when the server
 * has no multiRead (ZooKeeper 3.5): the caller then reads one znode per request. */
typedef struct zk_bulk zk_bulk;
int zk_bulk_open(cat_backend *be, zk_bulk **out);
/* One request per path in slots[i] (children when kids, else the document), as zk_read.c's pipelined
 * reads fill them; on failure some slots may hold results (the caller frees them). With keep
 * (documents only) every reply becomes a block of keep and the slots' documents point into it
 * (borrowed), NUL-terminated in place: no copy per document. */
int zk_bulk_read(zk_bulk *b, cat_backend *be, char *const *paths, size_t n, bool kids,
                 scan_slot *slots, cat_flat *keep);
void zk_bulk_close(zk_bulk *b);

/* The completion of a pipelined get into its scan_slot (the data pointer). */
void zk_scan_done(int rc, const char *value, int len, const struct Stat *st, const void *data);

/* ---- zk.c: plumbing ---- */
/* A ZooKeeper error as ferry's: what failed, on which path (rel). */
int zfail(cat_backend *be, int zrc, const char *what, const char *rel, ferry_err *err);
void zk_abspath(const cat_backend *be, const char *rel, char *out, size_t size);
/* Reads the znode at abs (an absolute path); *data is the caller's (free). */
int zget(cat_backend *be, const char *abs, bool watch, char **data, int *len, struct Stat *st);
/* The write gate: waits until it is open (rolling back a batch whose owner died); the cached
 * version of an open gate. */
int zk_gate_wait_open(ferry_catalog *c, int64_t *gv, ferry_err *err);
int zk_cached_gate(ferry_catalog *c, int64_t *gv, ferry_err *err);
/* After a read: *same is true when the gate is still open at version gv seen before it (else
 * the cached version is dropped and the caller reads again). */
int zk_gate_unchanged(cat_backend *be, int64_t gv, bool *same, ferry_err *err);

/* ---- zk.c: one multi and its operations ---- */
int zmulti_init(zmulti *m, int cap);
void zmulti_free(zmulti *m);
void zm_create(zmulti *m, const cat_backend *be, const char *rel, const char *data, int len,
               int flags, int src);
void zm_set(zmulti *m, const cat_backend *be, const char *rel, const char *data, int len,
            int64_t version, int src);
void zm_delete(zmulti *m, const cat_backend *be, const char *rel, int64_t version, int src);
void zm_check(zmulti *m, const cat_backend *be, const char *rel, int64_t version, int src);
void zm_user_op(zmulti *m, const cat_backend *be, const cat_op *op, int i);
int zm_failed(const zmulti *m);
int zk_user_op_error(cat_backend *be, const cat_op *op, int zrc, ferry_err *err);
int zk_read_routing(cat_backend *be, uint64_t *value, int64_t *version, ferry_err *err);
int zk_parents_for(ferry_catalog *c, const cat_commit_req *req, size_t *rt, ferry_err *err);
/* A batch that fits one multi. */
int zk_commit_small(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info,
                    ferry_err *err);

/* ---- zk_read.c ---- */
/* Reads the znodes at rels[0..n) (relative paths) into slots (doc, version, rc: ZNONODE for a
 * missing one; with kids, their children instead) between two reads of the write gate, again
 * until no batch ran meanwhile; by multiRead when there are many. The caller frees
 * slots[i].doc and slots[i].kids (deallocate_String_vector). */
int zk_read_docs(ferry_catalog *c, char *const *rels, size_t n, bool kids, scan_slot *slots,
                 ferry_err *err);
/* The same (documents only) without looking at the gate: for the holder of the write gate
 * (a rollback), whose reads no other batch can interleave with. */
int zk_read_docs_gate_held(ferry_catalog *c, char *const *rels, size_t n, scan_slot *slots,
                           ferry_err *err);
/* The backend's get and scan of znodes as they are (zk_tdoc.c maps records onto them). */
int zk_phys_get(ferry_catalog *c, const char *path, cat_item *out, ferry_err *err);
int zk_phys_scan(ferry_catalog *c, const char *prefix, int depth, cat_items *out,
                 ferry_err *err);
/* The same into out without copies (the texts and paths read become its blocks). */
int zk_phys_scan_flat(ferry_catalog *c, const char *prefix, int depth, cat_flat *out,
                      ferry_err *err);

/* ---- tenant documents (zk_doc.c: the format; zk_tdoc.c: records in them) ----
 * Every slice record of a tenant (slices/T/S) is an entry of the document slice_docs/T, every
 * route (routes/T/S) of route_docs/T; splits ZT_BUCKET and above go to slice_docs/T~1,
 * T~2, ... (ZT_BUCKET splits each). An entry keeps its own version (what callers see and
 * compare); the document's znode version guards the read-modify-write of a commit. */
#define ZT_BUCKET 1024
#define ZT_BUCKETS 4                /* FERRY_SPLITS_MAX / ZT_BUCKET: splits 0..4095 */
#define ZT_DOC_MAX (384 * 1024)     /* a document, and its undo record in a large batch's
                                     * chunk, stay under ZooKeeper's 1 MB jute.maxbuffer */
#define ZT_LAYOUT "3"               /* /layout: the catalog's records are in tenant documents,
                                     * with a slice pack beside each pair (zk_pack.c); "2": no
                                     * packs yet */

typedef struct zdoc_entry {
    uint32_t split;
    int64_t version;
    const char *doc; /* borrowed: the decoded text, or an operation's document */
    size_t doc_len;
} zdoc_entry;

typedef struct zdoc {
    zdoc_entry *v; /* sorted by split */
    size_t n, cap;
} zdoc;

/* 0, or -1 when text is not a tenant document; d borrows text (zdoc_free: the array only). */
int zdoc_decode(const char *text, size_t len, zdoc *d);
/* The document's text (malloc'ed, NUL-terminated, caller frees) and its length; NULL: no
 * memory. */
char *zdoc_encode(const zdoc *d, size_t *len);
zdoc_entry *zdoc_find(zdoc *d, uint32_t split);
/* Adds or replaces split's entry (doc borrowed). FERRY_ENOMEM. */
int zdoc_put(zdoc *d, uint32_t split, const char *doc, size_t doc_len, int64_t version);
void zdoc_remove(zdoc *d, uint32_t split);
void zdoc_free(zdoc *d);
/* Takes the document text (len bytes) apart in place for a scan, as zdoc_decode checks it:
 * every entry becomes a span of out (mid: the tenant given; name: the split's digits in the
 * text; doc: the entry's document, NUL-terminated where the newline after it was), so the text
 * is no longer a document afterwards. 0; -1 when text is not a tenant document; FERRY_ENOMEM.
 * On failure out may hold some of its spans (the caller drops the scan). */
int zdoc_spans(char *text, size_t len, const char *mid, size_t mid_len, cat_flat *out);

/* The backend's get, scan and commit: records of tenant documents mapped, others as they are. */
int zt_get(ferry_catalog *c, const char *path, cat_item *out, ferry_err *err);
int zt_scan(ferry_catalog *c, const char *prefix, int depth, cat_items *out, ferry_err *err);
/* The backend's scan_flat: a full scan of slices or routes takes the tenant documents apart in
 * place (zdoc_spans), in key order (tenant bytewise, then split as a number). */
int zt_scan_flat(ferry_catalog *c, const char *prefix, int depth, cat_flat *out,
                 ferry_err *err);
int zt_commit(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info, ferry_err *err);
/* Test only (tests/unit/test_catalog_entries.c): when set, called in every commit attempt that
 * touches tenant documents, after they were read and before the multi is sent, so that a test
 * can write meanwhile. Library code never sets it. */
extern void (*zt_test_between)(void *arg);
extern void *zt_test_between_arg;
/* At open: makes the documents' folders, marks a new catalog's layout and refuses a catalog
 * whose slices and routes are one znode each (an older ferry's layout). */
int zt_layout_open(ferry_catalog *c, ferry_err *err);

/* A tenant document (or pack) of a full scan: where its name is ("acme", "acme~1"), the
 * tenant's length, the bucket, its index in the scan and a prefix of the tenant for sorting. */
typedef struct zt_doc_ref {
    cat_item *it;     /* scan_all's document; NULL in the flat scans */
    const char *name;
    size_t tlen;
    unsigned bucket;
    size_t idx;
    uint64_t head;    /* the tenant's first 8 bytes, big-endian, zero-padded */
} zt_doc_ref;
void zt_doc_ref_init(zt_doc_ref *r, const char *name, size_t name_len, size_t idx);
/* qsort order: tenants bytewise (a shorter name first), then buckets: the order of keys. */
int zt_doc_ref_cmp(const void *x, const void *y);
/* The conversion's multi sent when it holds its share of operations (or any, when force). */
int zt_conv_flush(cat_backend *be, zmulti *m, bool force, const char *what, ferry_err *err);

/* ---- zk_pack.c: the slice packs beside the tenant documents ---- */
/* slice_packs/TENANT or slice_packs/TENANT~BUCKET. */
void zp_rel(const char *tenant, uint32_t bucket, char *out, size_t size);
/* The pack of one bucket of tenant from its tenant record (bucket 0; NULL: none) and its
 * documents' texts (NULL or length 0: none): *out
 * malloc'ed (the caller frees), *out_len bytes, not NUL-terminated; the unusable marker when a
 * row cannot be packed. FERRY_ENOMEM only. */
int zp_build(ferry_catalog *c, const char *tenant, const char *tenant_doc,
             int64_t tenant_version, const char *slice_doc, size_t slice_len,
             const char *route_doc, size_t route_len, char **out, size_t *out_len,
             ferry_err *err);
/* The backend's scan_rows: from the packs (*used), every tenant row to tenant_fn (unless NULL),
 * then every slice row to slice_fn (unless NULL); or nothing called and *used false when a pack
 * is the unusable marker (the caller reads the folders). */
int zp_scan(ferry_catalog *c, ferry_tenant_row_fn tenant_fn, ferry_slice_row_fn slice_fn,
            void *arg, bool *used, ferry_err *err);
/* Every bucket's pack built again from its documents (convert_layout=1; every other process
 * stopped). */
int zp_build_all(ferry_catalog *c, ferry_err *err);
/* The bucket-0 packs of tenants names[0..n) built again from their records, by the holder of
 * the write gate (a rollback, zk_batch.c). */
int zp_repack(ferry_catalog *c, char *const *names, size_t n, ferry_err *err);

/* ---- zk_batch.c ---- */
/* Undoes batch id from its undo records, drops its journal, opens the gate. */
int zk_rollback_batch(ferry_catalog *c, const char *id, ferry_err *err);
/* ferry_catalog_recover: rolls back every batch whose owner died. */
int zk_recover(ferry_catalog *c, size_t *recovered, ferry_err *err);
/* The backend's commit: one multi when the batch fits, else the gated large batch. */
int zk_commit(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info, ferry_err *err);

#endif
