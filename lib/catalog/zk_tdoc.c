/* The ZooKeeper backend's slice and route records, kept in tenant documents (docs/catalog.md,
 * "Tenant documents"): every slice of a tenant is an entry of one znode (slice_docs/TENANT),
 * every route of another (route_docs/TENANT), instead of a znode each. ZooKeeper's cost is per
 * znode written or read (about 34 us of its CPU per znode created, ~140,000 znodes a second read
 * by multiRead on the development machine), so a catalog of 100,000 tenants and 1,000,000 slices
 * is ~300,000 znodes instead of 2.3 million. The catalog layer above keeps seeing one record per
 * slice and route, each with its own version:
 *
 *   get      reads the document and hands back the entry (its document, its version);
 *   scan     lists the documents' folder (or reads one tenant's documents) and hands back every
 *            entry as an item of its own; the flat scan (the compact scans') hands the entries
 *            over as spans into the documents read, taken apart in place (zdoc_spans);
 *   commit   turns the batch's operations on entries into one operation per document: a
 *            setData conditioned on the document's znode version (create when it does not exist;
 *            a check when only checks touch it), after checking each entry's version as the
 *            caller gave it against the document it read. When the commit fails only because a
 *            document changed since it was read (another entry of the same tenant was written),
 *            it reads again, checks the entries again and retries; a real conflict on an entry
 *            is FERRY_ECONFLICT as before.
 *
 * Invariant: a document, once created, is never deleted (an empty one keeps its header), so its
 * znode version only grows and a setData conditioned on a version read can never apply to a
 * different document of the same name. (The one exception: a large batch that created it is
 * rolled back; nobody read it meanwhile, reads wait for the write gate.)
 *
 * The layout marker /layout (ZT_LAYOUT) says records are stored this way; a catalog of the older
 * layout (a znode per slice and route under /slices and /routes) is refused at open with what to
 * run, or converted in place when the URL asks for it (convert_layout=1), and /slices and /routes
 * of a new catalog each hold one znode an older ferry cannot decode, so that it fails rather
 * than reading a catalog without slices. */
#include "catalog/zk_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

static const char *const rec_dir[2] = {"slices", "routes"};
static const char *const doc_dir[2] = {"slice_docs", "route_docs"};
#define GUARD_NAME "layout-2-tenant-documents"

/* Which of the two folders path is in (0 slices, 1 routes; -1: neither); *rest: what follows
 * "slices/" (NULL for the folder itself). */
static int folder_of(const char *path, const char **rest)
{
    for (int k = 0; k < 2; k++) {
        size_t l = strlen(rec_dir[k]);
        if (strncmp(path, rec_dir[k], l))
            continue;
        if (!path[l]) {
            *rest = NULL;
            return k;
        }
        if (path[l] == '/') {
            *rest = path + l + 1;
            return k;
        }
    }
    return -1;
}

typedef struct zt_key {
    int kind;
    char tenant[FERRY_NAME_MAX];
    uint32_t split;
} zt_key;

/* 1: path is a record of a tenant document (k filled); 0: a path of another folder; -1: a path
 * under slices/ or routes/ that no record has (the catalog layer never makes one). */
static int entry_key(const char *path, zt_key *k)
{
    const char *rest;
    k->kind = folder_of(path, &rest);
    if (k->kind < 0)
        return 0;
    const char *slash = rest ? strchr(rest, '/') : NULL;
    if (!slash || (size_t)(slash - rest) >= sizeof k->tenant)
        return -1;
    memcpy(k->tenant, rest, (size_t)(slash - rest));
    k->tenant[slash - rest] = '\0';
    uint64_t v;
    const char *s = slash + 1;
    if (!cat_name_ok(k->tenant) || !ferry_parse_u64(s, &v) || v > UINT32_MAX ||
        (s[0] == '0' && s[1]) || s[0] < '0' || s[0] > '9')
        return -1;
    k->split = (uint32_t)v;
    return 1;
}

/* The document of a tenant's splits bucket*ZT_BUCKET.. : "slice_docs/acme", "slice_docs/acme~1". */
static void doc_rel(int kind, const char *tenant, uint32_t bucket, char *out, size_t size)
{
    if (bucket)
        snprintf(out, size, "%s/%s~%u", doc_dir[kind], tenant, bucket);
    else
        snprintf(out, size, "%s/%s", doc_dir[kind], tenant);
}

static int damaged(ferry_catalog *c, const char *rel, ferry_err *err)
{
    return ferry_err_set(err, FERRY_EREMOTE,
                         "zk://%s%s/%s is not a ferry tenant document (damaged, or written by "
                         "something else)",
                         c->be->hosts, c->be->root, rel);
}

/* Every entry of the document text (at rel, of tenant) as an item "slices/TENANT/SPLIT". */
static int expand(ferry_catalog *c, int kind, const char *tenant, size_t tlen, const char *rel,
                  const char *text, size_t len, cat_items *out, ferry_err *err)
{
    zdoc d;
    if (zdoc_decode(text, len, &d))
        return damaged(c, rel, err);
    int rc = FERRY_OK;
    /* "slices/TENANT/" once, then each split's digits: a million entries are a million paths,
     * and snprintf's parsing of its format was 6% of a scan's CPU */
    char path[PATH_MAX_LEN];
    size_t dl = strlen(rec_dir[kind]), pl = dl + 1 + tlen + 1;
    if (pl + 11 > sizeof path)
        return damaged(c, rel, err); /* names are at most 127 characters */
    memcpy(path, rec_dir[kind], dl);
    path[dl] = '/';
    memcpy(path + dl + 1, tenant, tlen);
    path[pl - 1] = '/';
    for (size_t i = 0; i < d.n && !rc; i++) {
        char digits[11];
        size_t nd = 0;
        uint32_t v = d.v[i].split;
        do
            digits[nd++] = (char)('0' + v % 10);
        while ((v /= 10));
        for (size_t k = 0; k < nd; k++)
            path[pl + k] = digits[nd - 1 - k];
        path[pl + nd] = '\0';
        if (cat_items_push(out, path, d.v[i].doc, d.v[i].doc_len, d.v[i].version))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading %s", rel);
    }
    zdoc_free(&d);
    return rc;
}

/* ---- reads ---- */

int zt_get(ferry_catalog *c, const char *path, cat_item *out, ferry_err *err)
{
    zt_key k;
    int t = entry_key(path, &k);
    if (t < 0 || (t == 0 && k.kind >= 0)) /* the folders themselves, or no record's path */
        return ferry_err_set(err, FERRY_ENOTFOUND, "%s does not exist", path);
    if (t == 0)
        return zk_phys_get(c, path, out, err);
    char rel[PATH_MAX_LEN];
    doc_rel(k.kind, k.tenant, k.split / ZT_BUCKET, rel, sizeof rel);
    cat_item it = {0};
    zdoc d = {0};
    int rc = zk_phys_get(c, rel, &it, err);
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s does not exist", path);
    }
    if (rc)
        goto out;
    if (zdoc_decode(it.doc, strlen(it.doc), &d)) {
        rc = damaged(c, rel, err);
        goto out;
    }
    zdoc_entry *e = zdoc_find(&d, k.split);
    if (!e) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s does not exist", path);
        goto out;
    }
    out->path = strdup(path);
    out->doc = ferry_strndup(e->doc, e->doc_len);
    out->version = e->version;
    if (!out->path || !out->doc) {
        cat_item_free(out);
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading %s", path);
    }
out:
    zdoc_free(&d);
    cat_item_free(&it);
    return rc;
}

/* The first 8 bytes of a tenant name as a number that orders as the bytes do (names have no
 * NUL, so the padding sorts first): most comparisons of a sort end here, without memcmp. */
static uint64_t doc_ref_head(const char *name, size_t tlen)
{
    uint64_t h = 0;
    for (size_t i = 0; i < 8; i++)
        h = h << 8 | (i < tlen ? (unsigned char)name[i] : 0);
    return h;
}

void zt_doc_ref_init(zt_doc_ref *r, const char *name, size_t name_len, size_t idx)
{
    const char *tilde = memchr(name, '~', name_len);
    *r = (zt_doc_ref){NULL, name, tilde ? (size_t)(tilde - name) : name_len,
                      tilde ? (unsigned)strtoul(tilde + 1, NULL, 10) : 0, idx, 0};
    r->head = doc_ref_head(name, r->tlen);
}

/* Tenants bytewise (a shorter name first: as the catalog's key order compares the segment),
 * then buckets: the entries then come out in key order (tenant, split as a number), which the
 * compact scans check in one pass instead of sorting a million items (lib/catalog/scan.c). */
int zt_doc_ref_cmp(const void *x, const void *y)
{
    const zt_doc_ref *a = x, *b = y;
    if (a->head != b->head)
        return a->head < b->head ? -1 : 1;
    int d = memcmp(a->name, b->name, a->tlen < b->tlen ? a->tlen : b->tlen);
    if (d)
        return d;
    if (a->tlen != b->tlen)
        return a->tlen < b->tlen ? -1 : 1;
    return (a->bucket > b->bucket) - (a->bucket < b->bucket);
}

/* Every entry of every document in the folder of kind, in key order. */
static int scan_all(ferry_catalog *c, int kind, cat_items *out, ferry_err *err)
{
    cat_items docs = {0};
    zt_doc_ref *refs = NULL;
    int rc = zk_phys_scan(c, doc_dir[kind], 1, &docs, err);
    size_t dl = strlen(doc_dir[kind]) + 1;
    if (!rc && !(refs = malloc((docs.n ? docs.n : 1) * sizeof *refs)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading %s", doc_dir[kind]);
    for (size_t i = 0; i < docs.n && !rc; i++) {
        const char *name = docs.v[i].path + dl;
        zt_doc_ref_init(&refs[i], name, strlen(name), i);
        refs[i].it = &docs.v[i];
    }
    if (!rc && docs.n > 1)
        qsort(refs, docs.n, sizeof *refs, zt_doc_ref_cmp);
    for (size_t i = 0; i < docs.n && !rc; i++) {
        cat_item *it = refs[i].it;
        rc = expand(c, kind, refs[i].name, refs[i].tlen, it->path, it->doc, strlen(it->doc), out,
                    err);
        cat_item_free(it); /* as soon as it is taken apart: the peak is one copy */
    }
    free(refs);
    cat_items_free(&docs);
    return rc;
}

/* Every entry of one tenant's documents (its ZT_BUCKETS buckets, read side by side). */
static int scan_tenant(ferry_catalog *c, int kind, const char *tenant, cat_items *out,
                       ferry_err *err)
{
    char rels[ZT_BUCKETS][PATH_MAX_LEN], *paths[ZT_BUCKETS];
    scan_slot slots[ZT_BUCKETS];
    for (uint32_t b = 0; b < ZT_BUCKETS; b++) {
        doc_rel(kind, tenant, b, rels[b], sizeof rels[b]);
        paths[b] = rels[b];
    }
    int rc = zk_read_docs(c, paths, ZT_BUCKETS, false, slots, err);
    for (int b = 0; b < ZT_BUCKETS; b++) {
        if (!rc && slots[b].rc == ZOK && slots[b].doc[0])
            rc = expand(c, kind, tenant, strlen(tenant), rels[b], slots[b].doc,
                        strlen(slots[b].doc), out, err);
        free(slots[b].doc);
    }
    return rc;
}

/* scan_all for the compact scans: the documents read become out's blocks and are taken apart
 * in place, so nothing is allocated or copied per entry (that was about 40% of a plan's CPU on
 * ZooKeeper: a path and a copy of the document per record, docs/benchmarks.md). */
static int scan_all_flat(ferry_catalog *c, int kind, cat_flat *out, ferry_err *err)
{
    cat_flat docs = {0};
    zt_doc_ref *refs = NULL;
    int rc = zk_phys_scan_flat(c, doc_dir[kind], 1, &docs, err);
    if (!rc && !(refs = malloc((docs.n ? docs.n : 1) * sizeof *refs)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading %s", doc_dir[kind]);
    for (size_t i = 0; i < docs.n && !rc; i++)
        zt_doc_ref_init(&refs[i], docs.v[i].name, docs.v[i].name_len, i);
    if (!rc && docs.n > 1)
        qsort(refs, docs.n, sizeof *refs, zt_doc_ref_cmp);
    /* the entries come out in key order when each document's first split follows the last
     * one of the tenant's document before it (a document's own splits are checked increasing;
     * a damaged catalog could have a split in another's bucket: then the scan sorts) */
    bool in_order = true;
    for (size_t i = 0; i < docs.n && !rc; i++) {
        const cat_span *sp = &docs.v[refs[i].idx];
        size_t before = out->n;
        int r = zdoc_spans(sp->doc, sp->doc_len, refs[i].name, refs[i].tlen, out);
        if (!r && i && before && out->n > before && refs[i - 1].tlen == refs[i].tlen &&
            !memcmp(refs[i - 1].name, refs[i].name, refs[i].tlen)) {
            const cat_span *a = &out->v[before - 1], *b = &out->v[before];
            if (a->name_len > b->name_len ||
                (a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) >= 0))
                in_order = false;
        }
        if (r == FERRY_ENOMEM)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading %s", doc_dir[kind]);
        else if (r) {
            char rel[PATH_MAX_LEN];
            snprintf(rel, sizeof rel, "%s/%.*s", doc_dir[kind], (int)sp->name_len, sp->name);
            rc = damaged(c, rel, err);
        }
    }
    out->in_order = in_order;
    /* the texts and names the entries point into are out's now */
    for (size_t i = 0; i < docs.n_blocks && !rc; i++) {
        rc = cat_flat_block(out, docs.blocks[i]) ? FERRY_ENOMEM : FERRY_OK;
        docs.blocks[i] = NULL;
        if (rc) {
            for (size_t k = i + 1; k < docs.n_blocks; k++) {
                free(docs.blocks[k]);
                docs.blocks[k] = NULL;
            }
            ferry_err_set(err, FERRY_ENOMEM, "out of memory reading %s", doc_dir[kind]);
        }
    }
    free(refs);
    cat_flat_free(&docs);
    return rc;
}

int zt_scan_flat(ferry_catalog *c, const char *prefix, int depth, cat_flat *out,
                 ferry_err *err)
{
    const char *rest;
    int kind = folder_of(prefix, &rest);
    if (kind < 0)
        return zk_phys_scan_flat(c, prefix, depth, out, err);
    if (!rest && depth == 2)
        return scan_all_flat(c, kind, out, err);
    cat_items items = {0};
    int rc = zt_scan(c, prefix, depth, &items, err);
    if (!rc && cat_flat_take_items(out, &items, strlen(prefix)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading %s", prefix);
    cat_items_free(&items);
    return rc;
}

int zt_scan(ferry_catalog *c, const char *prefix, int depth, cat_items *out, ferry_err *err)
{
    const char *rest;
    int kind = folder_of(prefix, &rest);
    if (kind < 0)
        return zk_phys_scan(c, prefix, depth, out, err);
    if (!rest && depth == 2)
        return scan_all(c, kind, out, err);
    if (rest && depth == 1 && cat_name_ok(rest))
        return scan_tenant(c, kind, rest, out, err);
    return FERRY_OK; /* nothing is stored at another depth (the levels above were containers) */
}

/* ---- commits ---- */

void (*zt_test_between)(void *arg);
void *zt_test_between_arg;

typedef struct zt_doc {
    char rel[PATH_MAX_LEN];
    zdoc d;
    char *read;   /* the text read (d borrows it) */
    int64_t zv;   /* its znode version; -1: no such document yet */
    bool dirty;   /* an entry was created, changed or deleted */
    bool laid;    /* its operation is in the plan's sent operations */
    char *text;   /* the new text */
    size_t text_len;
} zt_doc;

/* A bucket of a tenant the batch touches: its two documents (both read, whichever the batch
 * writes) and its slice pack (zk_pack.c), read first and written when a document changes. */
typedef struct zt_group {
    char tenant[FERRY_NAME_MAX];
    uint32_t bucket;
    int doc[2];          /* its slices' and routes' documents in the plan's docs */
    char rel[PATH_MAX_LEN];
    int64_t zv;          /* the pack's znode version read; -1: none yet */
    char *pread;         /* the pack as read (NULL: none) */
    char *text;          /* the new pack */
    size_t text_len;
    /* bucket 0: the tenant record (tenants/T), read after the pack, whose line the pack keeps */
    char trel[PATH_MAX_LEN];
    char *tread;         /* its document as read (NULL: none) */
    const char *tdoc;    /* its document after the batch's operations (tread's, or an
                          * operation's; NULL: none) */
    int64_t tver;        /* its znode version after them (-1: none) */
    bool tdirty;         /* the batch creates, sets or deletes it */
} zt_group;

typedef struct zt_plan {
    size_t n;            /* the request's operations */
    int *doc_of;         /* per operation: its document's index, -1 for another record */
    int *tgroup_of;      /* per operation on a tenant record: its group (-1: another) */
    zt_key *keys;
    zt_group *groups;
    size_t ng;
    zt_doc *docs;        /* 2 per group: groups[g].doc[k] */
    size_t nd;
    cat_op *pops;        /* the operations sent: others as they are, one per document */
    bool *is_doc;        /* per sent operation */
    int *phys_of;        /* per operation: its sent operation (-1: folded into its document's) */
    size_t np;
    int64_t *pvers;      /* new versions of the sent operations */
    int64_t *evers;      /* new versions of the entries (-1 after delete and check) */
} zt_plan;

static void plan_reset_docs(zt_plan *p)
{
    for (size_t i = 0; i < p->nd; i++) {
        zdoc_free(&p->docs[i].d);
        free(p->docs[i].read);
        free(p->docs[i].text);
        p->docs[i].read = p->docs[i].text = NULL;
        p->docs[i].dirty = p->docs[i].laid = false;
        p->docs[i].zv = -1;
    }
    for (size_t g = 0; g < p->ng; g++) {
        zt_group *gr = &p->groups[g];
        free(gr->text);
        free(gr->tread);
        free(gr->pread);
        gr->text = gr->tread = gr->pread = NULL;
        gr->tdoc = NULL;
        gr->zv = gr->tver = -1;
        gr->tdirty = false;
    }
}

static void plan_free(zt_plan *p)
{
    plan_reset_docs(p);
    free(p->doc_of);
    free(p->tgroup_of);
    free(p->keys);
    free(p->groups);
    free(p->docs);
    free(p->pops);
    free(p->is_doc);
    free(p->phys_of);
    free(p->pvers);
    free(p->evers);
}

/* The tenant of a tenant record's path ("tenants/acme"), NULL for another path. */
static const char *tenant_record(const char *path)
{
    static const char dir[] = "tenants/";
    if (strncmp(path, dir, sizeof dir - 1))
        return NULL;
    const char *name = path + sizeof dir - 1;
    return cat_name_ok(name) ? name : NULL;
}

/* The group of (tenant, bucket), made (with its two documents) when new: the hash (hcap slots,
 * -1 empty) finds it by its pack's name. */
static int group_of(zt_plan *p, int *hash, size_t hcap, const char *tenant, uint32_t bucket)
{
    char rel[PATH_MAX_LEN];
    zp_rel(tenant, bucket, rel, sizeof rel);
    uint64_t h = 1469598103934665603ull;
    for (const char *s = rel; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    size_t slot = (size_t)h & (hcap - 1);
    while (hash[slot] >= 0 && strcmp(p->groups[hash[slot]].rel, rel))
        slot = (slot + 1) & (hcap - 1);
    if (hash[slot] >= 0)
        return hash[slot];
    assert(p->ng < (p->n ? p->n : 1));
    zt_group *g = &p->groups[p->ng];
    hash[slot] = (int)p->ng++;
    snprintf(g->rel, sizeof g->rel, "%s", rel);
    snprintf(g->tenant, sizeof g->tenant, "%s", tenant);
    if (bucket) /* no record has this name: read as not found, and the rels stay in step */
        snprintf(g->trel, sizeof g->trel, "tenants/%s~%u", tenant, bucket);
    else
        snprintf(g->trel, sizeof g->trel, "tenants/%s", tenant);
    g->bucket = bucket;
    g->zv = g->tver = -1;
    for (int k = 0; k < 2; k++) {
        g->doc[k] = (int)p->nd;
        doc_rel(k, g->tenant, bucket, p->docs[p->nd].rel, sizeof p->docs[p->nd].rel);
        p->docs[p->nd++].zv = -1;
    }
    return hash[slot];
}

/* Groups the request's entry operations by document, and its slice and route documents and
 * tenant records by pack. FERRY_OK with p->ng == 0: none. */
static int plan_init(ferry_catalog *c, const cat_commit_req *req, zt_plan *p, ferry_err *err)
{
    (void)c;
    size_t n = req->n;
    p->n = n;
    /* at most a group per operation, two documents per group, and a sent operation per
     * operation and per group (its pack) */
    size_t n1 = n ? n : 1;
    p->doc_of = malloc(n1 * sizeof *p->doc_of);
    p->tgroup_of = malloc(n1 * sizeof *p->tgroup_of);
    p->keys = calloc(n1, sizeof *p->keys);
    p->groups = calloc(n1, sizeof *p->groups);
    p->docs = calloc(2 * n1, sizeof *p->docs);
    p->pops = calloc(2 * n1, sizeof *p->pops);
    p->is_doc = calloc(2 * n1, sizeof *p->is_doc);
    p->phys_of = calloc(n1, sizeof *p->phys_of);
    p->pvers = calloc(2 * n1, sizeof *p->pvers);
    p->evers = calloc(n1, sizeof *p->evers);
    if (!p->doc_of || !p->tgroup_of || !p->keys || !p->groups || !p->docs || !p->pops ||
        !p->is_doc || !p->phys_of || !p->pvers || !p->evers)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* most batches touch few documents, but a registration touches thousands: the last one
     * looked up is tried first (a tenant's operations come together), then a hash of names */
    size_t hcap = 64;
    while (hcap < 2 * n)
        hcap *= 2;
    int *hash = malloc(hcap * sizeof *hash);
    if (!hash)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memset(hash, -1, hcap * sizeof *hash);
    int rc = FERRY_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        p->doc_of[i] = p->tgroup_of[i] = -1;
        const char *tname = tenant_record(req->ops[i].path);
        if (tname) { /* a tenant record: its line is in its bucket-0 pack */
            p->tgroup_of[i] = group_of(p, hash, hcap, tname, 0);
            continue;
        }
        int t = entry_key(req->ops[i].path, &p->keys[i]);
        if (t < 0) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "%s is not a slice or route key (slices/TENANT/SPLIT)",
                               req->ops[i].path);
            break;
        }
        if (t == 0)
            continue;
        if (p->keys[i].split >= (uint32_t)ZT_BUCKET * ZT_BUCKETS) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "%s: split %u is beyond the %d splits a tenant may have",
                               req->ops[i].path, p->keys[i].split, ZT_BUCKET * ZT_BUCKETS);
            break;
        }
        int g = group_of(p, hash, hcap, p->keys[i].tenant, p->keys[i].split / ZT_BUCKET);
        p->doc_of[i] = p->groups[g].doc[p->keys[i].kind];
    }
    free(hash);
    return rc;
}

/* Reads the documents and applies the request's entry operations to them, in order, checking
 * each entry's version as the caller gave it; then lays out the operations to send. A failed
 * check is the caller's conflict (or missing record) and is returned as such. */
static int plan_build(ferry_catalog *c, const cat_commit_req *req, zt_plan *p, ferry_err *err)
{
    cat_backend *be = c->be;
    size_t nr = 2 * p->ng + p->nd;
    char **rels = malloc(nr * sizeof *rels);
    scan_slot *slots = calloc(nr, sizeof *slots);
    int rc = FERRY_OK;
    if (!rels || !slots) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    /* the packs before their documents, in one session's order: a writer that changes a
     * document after its pack was read has changed the pack too, and the pack's conditioned
     * write below fails (zk_pack.c) */
    /* (then the tenant records of the bucket-0 groups, then the documents) */
    for (size_t g = 0; g < p->ng; g++) {
        rels[g] = p->groups[g].rel;
        rels[p->ng + g] = p->groups[g].trel;
    }
    for (size_t d = 0; d < p->nd; d++)
        rels[2 * p->ng + d] = p->docs[d].rel;
    rc = zk_read_docs(c, rels, nr, false, slots, err);
    if (rc)
        goto out;
    for (size_t g = 0; g < p->ng; g++) {
        zt_group *gr = &p->groups[g];
        scan_slot *ts = &slots[p->ng + g];
        gr->zv = slots[g].rc == ZOK ? slots[g].version : -1;
        if (slots[g].rc == ZOK) {
            gr->pread = slots[g].doc;
            slots[g].doc = NULL;
        }
        if (gr->bucket == 0 && ts->rc == ZOK && ts->doc) {
            gr->tdoc = gr->tread = ts->doc;
            ts->doc = NULL;
            gr->tver = ts->version;
        }
    }
    for (size_t d = 0; d < p->nd && !rc; d++) {
        zt_doc *z = &p->docs[d];
        scan_slot *sl = &slots[2 * p->ng + d];
        z->read = sl->doc;
        sl->doc = NULL;
        if (sl->rc == ZNONODE || !z->read || !z->read[0])
            continue; /* no document yet: every entry is missing */
        z->zv = sl->version;
        if (zdoc_decode(z->read, strlen(z->read), &z->d))
            rc = damaged(c, z->rel, err);
    }
    for (size_t i = 0; i < p->n && !rc; i++) {
        if (p->tgroup_of[i] >= 0) { /* the tenant record as this operation leaves it, if it
                                      * applies (one that does not fails the multi) */
            const cat_op *op = &req->ops[i];
            zt_group *gr = &p->groups[p->tgroup_of[i]];
            if (op->type == CAT_CREATE || op->type == CAT_SET) {
                gr->tdoc = op->doc;
                gr->tver = op->type == CAT_CREATE ? 0 : gr->tver + 1;
                gr->tdirty = true;
            } else if (op->type == CAT_DELETE) {
                gr->tdoc = NULL;
                gr->tver = -1;
                gr->tdirty = true;
            }
            continue;
        }
        if (p->doc_of[i] < 0)
            continue;
        const cat_op *op = &req->ops[i];
        zt_doc *z = &p->docs[p->doc_of[i]];
        zdoc_entry *e = zdoc_find(&z->d, p->keys[i].split);
        p->evers[i] = -1;
        if (op->type == CAT_CREATE) {
            if (e) {
                rc = zk_user_op_error(be, op, ZNODEEXISTS, err);
                break;
            }
            p->evers[i] = 0;
        } else if (!e) {
            rc = zk_user_op_error(be, op, ZNONODE, err);
            break;
        } else if (op->version != FERRY_VERSION_ANY && op->version != e->version) {
            rc = zk_user_op_error(be, op, ZBADVERSION, err);
            break;
        } else if (op->type == CAT_SET) {
            p->evers[i] = e->version + 1;
        }
        if (op->type == CAT_CREATE || op->type == CAT_SET) {
            if (zdoc_put(&z->d, p->keys[i].split, op->doc, op->doc_len, p->evers[i]))
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            z->dirty = true;
        } else if (op->type == CAT_DELETE) {
            zdoc_remove(&z->d, p->keys[i].split);
            z->dirty = true;
        }
    }
    /* the operations to send, in the request's order: a document's where its first entry was */
    p->np = 0;
    for (size_t i = 0; i < p->n && !rc; i++) {
        p->phys_of[i] = -1;
        if (p->doc_of[i] < 0) {
            p->is_doc[p->np] = false;
            p->pops[p->np] = req->ops[i]; /* shallow: the batch owns path and doc */
            p->phys_of[i] = (int)p->np++;
            continue;
        }
        zt_doc *z = &p->docs[p->doc_of[i]];
        if (z->laid)
            continue;
        z->laid = true;
        cat_op *po = &p->pops[p->np];
        memset(po, 0, sizeof *po);
        po->path = z->rel;
        po->version = z->zv;
        if (!z->dirty) {
            po->type = CAT_CHECK; /* only checks: the document must be as it was read */
        } else {
            if (!(z->text = zdoc_encode(&z->d, &z->text_len))) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                break;
            }
            if (z->text_len > ZT_DOC_MAX) {
                rc = ferry_err_set(err, FERRY_EINVAL,
                                   "%s: the tenant's document %s would be %zu bytes, over the "
                                   "%d KiB a ZooKeeper catalog keeps one document under (it "
                                   "and its undo record must fit ZooKeeper's 1 MB "
                                   "jute.maxbuffer; docs/catalog.md \"Limits\"): use shorter "
                                   "tenant or shard names, or fewer splits",
                                   req->ops[i].path, z->rel, z->text_len, ZT_DOC_MAX / 1024);
                break;
            }
            po->type = z->zv < 0 ? CAT_CREATE : CAT_SET;
            po->doc = z->text;
            po->doc_len = z->text_len;
            po->prior = z->zv < 0 ? NULL : z->read; /* the undo of a batch of many chunks */
        }
        p->is_doc[p->np++] = true;
    }
    /* then the pack of every group whose documents change, built from their new texts */
    for (size_t g = 0; g < p->ng && !rc; g++) {
        zt_group *gr = &p->groups[g];
        const zt_doc *sd = &p->docs[gr->doc[0]], *rd = &p->docs[gr->doc[1]];
        if (!sd->dirty && !rd->dirty && !gr->tdirty)
            continue;
        rc = zp_build(c, gr->tenant, gr->tdoc, gr->tver, sd->dirty ? sd->text : sd->read,
                      sd->dirty ? sd->text_len : sd->read ? strlen(sd->read) : 0,
                      rd->dirty ? rd->text : rd->read,
                      rd->dirty ? rd->text_len : rd->read ? strlen(rd->read) : 0, &gr->text,
                      &gr->text_len, err);
        if (rc)
            break;
        cat_op *po = &p->pops[p->np];
        memset(po, 0, sizeof *po);
        po->path = gr->rel;
        po->type = gr->zv < 0 ? CAT_CREATE : CAT_SET;
        po->version = gr->zv;
        po->prior = gr->zv < 0 ? NULL : gr->pread;
        po->doc = gr->text;
        po->doc_len = gr->text_len;
        p->is_doc[p->np++] = true; /* a race lost on it is retried as a document's */
    }
out:
    for (size_t d = 0; slots && d < nr; d++)
        free(slots[d].doc);
    free(slots);
    free(rels);
    return rc;
}

int zt_commit(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info, ferry_err *err)
{
    zt_plan p = {0};
    int rc = plan_init(c, req, &p, err);
    if (!rc && p.ng == 0) { /* no slice, route or tenant: as it is */
        plan_free(&p);
        return zk_commit(c, req, info, err);
    }
    for (int attempt = 0; !rc; attempt++) {
        if (attempt == 50) {
            rc = ferry_err_set(err, FERRY_ETIMEOUT,
                               "zk://%s%s: the batch lost 50 races in a row for tenant documents "
                               "other writers changed meanwhile; try again",
                               c->be->hosts, c->be->root);
            break;
        }
        plan_reset_docs(&p);
        rc = plan_build(c, req, &p, err);
        if (rc)
            break;
        if (zt_test_between)
            zt_test_between(zt_test_between_arg);
        cat_commit_req preq = {p.pops, p.np, req->routing, req->routing_value, p.pvers,
                               req->routing_log};
        c->be->failed_op = NULL;
        info->ops = info->chunks = 0;
        rc = zk_commit(c, &preq, info, err);
        const cat_op *f = c->be->failed_op;
        if ((rc == FERRY_ECONFLICT || rc == FERRY_ENOTFOUND) && f >= p.pops &&
            f < p.pops + p.np && p.is_doc[f - p.pops]) {
            /* a document changed since it was read: another entry of the tenant was written
             * (the entries the caller named are checked again against what is read now) */
            ferry_err_clear(err);
            rc = FERRY_OK;
            continue;
        }
        if (rc)
            break;
        for (size_t i = 0; i < req->n; i++)
            req->new_versions[i] = p.doc_of[i] < 0 ? p.pvers[p.phys_of[i]] : p.evers[i];
        info->ops = req->n;
        break;
    }
    plan_free(&p);
    return rc;
}

/* ---- the layout ---- */

/* The children of /slices and /routes other than the guard: an older ferry's records. */
static int old_records(cat_backend *be, int kind, int *count, ferry_err *err)
{
    char abs[PATH_MAX_LEN];
    zk_abspath(be, rec_dir[kind], abs, sizeof abs);
    struct Stat st;
    int zrc = zoo_exists(be->zh, abs, 0, &st);
    *count = 0;
    if (zrc == ZNONODE)
        return FERRY_OK;
    if (zrc != ZOK)
        return zfail(be, zrc, "reading", rec_dir[kind], err);
    *count = st.numChildren;
    if (st.numChildren == 1) { /* the guard alone, or an older catalog of one tenant */
        struct String_vector kids = {0, NULL};
        zrc = zoo_get_children(be->zh, abs, 0, &kids);
        if (zrc != ZOK)
            return zfail(be, zrc, "listing", rec_dir[kind], err);
        if (kids.count == 1 && !strcmp(kids.data[0], GUARD_NAME))
            *count = 0;
        deallocate_String_vector(&kids);
    } else if (st.numChildren > 1) {
        char rel[96], guard[PATH_MAX_LEN];
        snprintf(rel, sizeof rel, "%s/" GUARD_NAME, rec_dir[kind]);
        zk_abspath(be, rel, guard, sizeof guard);
        struct Stat gst;
        if (zoo_exists(be->zh, guard, 0, &gst) == ZOK)
            *count = st.numChildren - 1; /* the count is for the message */
    }
    return FERRY_OK;
}

/* ---- converting the older layout (URL convert_layout=1) ----
 * Tenant folders are converted CONV_GROUP at a time: their children listed and their records
 * and documents read by multiRead, every tenant's documents written (each record's znode version
 * kept as its entry's version; merged with a document an interrupted earlier run wrote), and
 * only then the old znodes deleted, up to CONV_OPS a multi (children before their folder). So
 * running the conversion again after a crash loses nothing, and the cost is about one write per
 * old znode, few requests. Every other ferry process must be stopped (docs/catalog.md, "Tenant
 * documents"). */
#define CONV_GROUP 512
#define CONV_OPS 1000

/* Sends the multi when it holds CONV_OPS operations, or when force and it holds any. */
int zt_conv_flush(cat_backend *be, zmulti *m, bool force, const char *what, ferry_err *err)
{
    if (!m->n || (!force && m->n < CONV_OPS))
        return FERRY_OK;
    int zrc = zoo_multi(be->zh, m->n, m->ops, m->res);
    int f = zm_failed(m);
    const char *path = f >= 0 ? m->paths[f] : m->paths[0];
    m->n = 0;
    return zrc == ZOK ? FERRY_OK : zfail(be, zrc, what, path, err);
}

static int convert_group(ferry_catalog *c, int kind, char *const *folders, size_t nt,
                         ferry_err *err)
{
    cat_backend *be = c->be;
    scan_slot *lists = calloc(nt ? nt : 1, sizeof *lists), *slots = NULL;
    size_t *first = calloc(nt + 1, sizeof *first), total = 0;
    char **rels = NULL;
    zdoc docs[ZT_BUCKETS] = {{0}};
    char **texts = NULL;
    zmulti m = {0};
    int rc = FERRY_OK;
    if (!lists || !first || zmulti_init(&m, CONV_OPS + 1)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory converting the layout");
        goto out;
    }
    rc = zk_read_docs(c, folders, nt, true, lists, err);
    for (size_t t = 0; t < nt && !rc; t++) { /* per tenant: its records, then its 4 documents */
        first[t] = total;
        total += (size_t)(lists[t].rc == ZOK ? lists[t].kids.count : 0) + ZT_BUCKETS;
    }
    first[nt] = total;
    if (!rc && (!(rels = calloc(total ? total : 1, sizeof *rels)) ||
                !(slots = calloc(total ? total : 1, sizeof *slots)) ||
                !(texts = calloc(nt * ZT_BUCKETS + 1, sizeof *texts))))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory converting the layout");
    for (size_t t = 0; t < nt && !rc; t++) {
        const char *tenant = folders[t] + strlen(rec_dir[kind]) + 1;
        size_t nk = first[t + 1] - first[t] - ZT_BUCKETS;
        for (size_t i = 0; i < first[t + 1] - first[t] && !rc; i++) {
            char *r = rels[first[t] + i] = malloc(PATH_MAX_LEN);
            if (!r)
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory converting the layout");
            else if (i < nk && snprintf(r, PATH_MAX_LEN, "%s/%s", folders[t],
                                        lists[t].kids.data[i]) >= PATH_MAX_LEN)
                rc = ferry_err_set(err, FERRY_EREMOTE, "%s/%s: the path is too long",
                                   folders[t], lists[t].kids.data[i]);
            else if (i >= nk)
                doc_rel(kind, tenant, (uint32_t)(i - nk), r, PATH_MAX_LEN);
        }
    }
    if (!rc)
        rc = zk_read_docs(c, rels, total, false, slots, err);
    /* 1. every tenant's documents */
    size_t pending = 0; /* bytes of documents in the multi */
    for (size_t t = 0; t < nt && !rc; t++) {
        size_t nk = first[t + 1] - first[t] - ZT_BUCKETS, d0 = first[t] + nk;
        bool any[ZT_BUCKETS] = {false};
        for (int b = 0; b < ZT_BUCKETS && !rc; b++) {
            zdoc_free(&docs[b]);
            scan_slot *s = &slots[d0 + (size_t)b];
            if (s->rc == ZOK && zdoc_decode(s->doc, strlen(s->doc), &docs[b]))
                rc = damaged(c, rels[d0 + (size_t)b], err);
        }
        for (size_t i = 0; i < nk && !rc; i++) {
            zt_key k;
            scan_slot *s = &slots[first[t] + i];
            if (entry_key(rels[first[t] + i], &k) != 1 ||
                k.split >= (uint32_t)ZT_BUCKET * ZT_BUCKETS) {
                rc = ferry_err_set(err, FERRY_EREMOTE,
                                   "zk://%s%s/%s is not a %s record of the older layout; move "
                                   "it away and convert again",
                                   be->hosts, be->root, rels[first[t] + i], rec_dir[kind]);
                break;
            }
            if (s->rc != ZOK || !s->doc[0])
                continue;
            uint32_t b = k.split / ZT_BUCKET;
            if (zdoc_put(&docs[b], k.split, s->doc, strlen(s->doc), s->version))
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory converting the layout");
            any[b] = true;
        }
        for (int b = 0; b < ZT_BUCKETS && !rc; b++) {
            if (!any[b])
                continue;
            size_t len = 0;
            char **text = &texts[t * ZT_BUCKETS + (size_t)b]; /* kept until the multi is sent */
            if (!(*text = zdoc_encode(&docs[b], &len))) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory converting the layout");
                break;
            }
            if (len > ZT_DOC_MAX) {
                rc = ferry_err_set(err, FERRY_EINVAL,
                                   "%s: the tenant's document would be %zu bytes, over the %d "
                                   "KiB a ZooKeeper catalog keeps one document under; this "
                                   "tenant cannot be converted (shorter names, fewer splits)",
                                   folders[t], len, ZT_DOC_MAX / 1024);
                break;
            }
            scan_slot *s = &slots[d0 + (size_t)b];
            if (m.n >= 90 || (m.n && pending + len > CHUNK_BYTES)) { /* one request < 1 MB */
                rc = zt_conv_flush(be, &m, true, "writing the document", err);
                pending = 0;
            }
            pending += len;
            if (s->rc == ZOK)
                zm_set(&m, be, rels[d0 + (size_t)b], *text, (int)len, s->version, -1);
            else
                zm_create(&m, be, rels[d0 + (size_t)b], *text, (int)len, 0, -1);
        }
    }
    if (!rc)
        rc = zt_conv_flush(be, &m, true, "writing the document", err);
    /* 2. then the old znodes: a tenant's records, then its folder */
    for (size_t t = 0; t < nt && !rc; t++) {
        if (lists[t].rc != ZOK)
            continue;
        size_t nk = first[t + 1] - first[t] - ZT_BUCKETS;
        for (size_t i = 0; i < nk && !rc; i++) {
            zm_delete(&m, be, rels[first[t] + i], -1, -1);
            rc = zt_conv_flush(be, &m, false, "deleting the older record", err);
        }
        if (!rc) {
            zm_delete(&m, be, folders[t], -1, -1);
            rc = zt_conv_flush(be, &m, false, "deleting the older record", err);
        }
    }
    if (!rc)
        rc = zt_conv_flush(be, &m, true, "deleting the older record", err);
out:
    for (int b = 0; b < ZT_BUCKETS; b++)
        zdoc_free(&docs[b]);
    for (size_t i = 0; texts && i < nt * ZT_BUCKETS; i++)
        free(texts[i]);
    for (size_t i = 0; i < total; i++) {
        if (slots)
            free(slots[i].doc);
        if (rels)
            free(rels[i]);
    }
    for (size_t t = 0; lists && t < nt; t++)
        deallocate_String_vector(&lists[t].kids);
    free(texts);
    free(slots);
    free(rels);
    free(first);
    free(lists);
    zmulti_free(&m);
    return rc;
}

/* Every tenant folder of the older layout under /slices and /routes, converted. */
static int convert_all(ferry_catalog *c, ferry_err *err)
{
    cat_backend *be = c->be;
    int rc = FERRY_OK;
    size_t done = 0, reported = 0;
    char *folders[CONV_GROUP];
    for (int k = 0; k < 2 && !rc; k++) {
        char abs[PATH_MAX_LEN];
        zk_abspath(be, rec_dir[k], abs, sizeof abs);
        struct String_vector kids = {0, NULL};
        int zrc = zoo_get_children(be->zh, abs, 0, &kids);
        if (zrc != ZOK && zrc != ZNONODE)
            rc = zfail(be, zrc, "listing", rec_dir[k], err);
        size_t nf = 0;
        for (int i = 0; i <= kids.count && !rc; i++) {
            if (i < kids.count && !strcmp(kids.data[i], GUARD_NAME))
                continue;
            if (i < kids.count && !cat_name_ok(kids.data[i])) {
                rc = ferry_err_set(err, FERRY_EREMOTE,
                                   "zk://%s%s/%s/%s is not a tenant folder of the older layout; "
                                   "move it away and convert again",
                                   be->hosts, be->root, rec_dir[k], kids.data[i]);
                break;
            }
            if (i < kids.count) {
                size_t len = strlen(rec_dir[k]) + strlen(kids.data[i]) + 2;
                if (!(folders[nf] = malloc(len))) {
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory converting the layout");
                    break;
                }
                snprintf(folders[nf++], len, "%s/%s", rec_dir[k], kids.data[i]);
            }
            if (nf == CONV_GROUP || (i == kids.count && nf)) {
                rc = convert_group(c, k, folders, nf, err);
                done += nf;
                while (nf)
                    free(folders[--nf]);
                if (!rc && done >= reported + 10000) {
                    reported = done;
                    fprintf(stderr, "ferry: converting the catalog's layout: %zu tenant "
                                    "folders\n", done);
                }
            }
        }
        while (nf)
            free(folders[--nf]);
        deallocate_String_vector(&kids);
    }
    if (rc)
        ferry_err_prefix(err, "converting zk://%s%s to tenant documents (run it again: it goes "
                              "on where it stopped): ",
                         be->hosts, be->root);
    return rc;
}

/* The guard: a slice (route) record an older ferry finds when it scans and cannot decode. */
static void guard_ops(zmulti *m, cat_backend *be, int kind)
{
    /* static: the multi points at its data until it is sent (paths are copied) */
    static const char text[] = "this catalog keeps slices and routes in tenant documents "
                               "(/slice_docs, /route_docs; layout " ZT_LAYOUT "): upgrade ferry";
    char rel[96];
    snprintf(rel, sizeof rel, "%s/" GUARD_NAME, rec_dir[kind]);
    zm_create(m, be, rel, NULL, -1, 0, -1);
    snprintf(rel, sizeof rel, "%s/" GUARD_NAME "/0", rec_dir[kind]);
    zm_create(m, be, rel, text, (int)strlen(text), 0, -1);
}

int zt_layout_open(ferry_catalog *c, ferry_err *err)
{
    cat_backend *be = c->be;
    char abs[PATH_MAX_LEN];
    zmulti m = {0};
    int rc = FERRY_OK;
    /* the documents' and packs' folders (empty ones harm nothing in a catalog refused below) */
    static const char *const folders[3] = {"slice_docs", "route_docs", "slice_packs"};
    for (int k = 0; k < 3 && !rc; k++) {
        zk_abspath(be, folders[k], abs, sizeof abs);
        int zrc = zoo_create(be->zh, abs, NULL, -1, be->acl, 0, NULL, 0);
        if (zrc != ZOK && zrc != ZNODEEXISTS)
            rc = zfail(be, zrc, "creating", folders[k], err);
    }
    bool packs_built = false;
    for (int attempt = 0; attempt < 3 && !rc; attempt++) {
        char *layout = NULL;
        struct Stat st;
        zk_abspath(be, "layout", abs, sizeof abs);
        int zrc = zget(be, abs, false, &layout, NULL, &st);
        if (zrc != ZOK && zrc != ZNONODE) {
            rc = zfail(be, zrc, "reading", "layout", err);
            break;
        }
        bool no_packs = zrc == ZOK && !strcmp(layout, "2"); /* documents, no packs yet */
        if (zrc == ZOK && strcmp(layout, ZT_LAYOUT) && !no_packs) {
            rc = ferry_err_set(err, FERRY_EUNSUPPORTED,
                               "zk://%s%s has catalog layout '%s', which this ferry does not "
                               "know (it reads layout " ZT_LAYOUT "): it was written by a newer "
                               "ferry; use that version",
                               be->hosts, be->root, layout);
            free(layout);
            break;
        }
        free(layout);
        int old[2];
        for (int k = 0; k < 2 && !rc; k++)
            rc = old_records(be, k, &old[k], err);
        if (rc)
            break;
        if ((old[0] || old[1]) && be->convert_layout && attempt == 0) {
            rc = convert_all(c, err);
            continue; /* then check again, and mark it */
        }
        if (old[0] || old[1]) {
            rc = ferry_err_set(
                err, FERRY_EUNSUPPORTED,
                "zk://%s%s holds slices and routes in the older layout, one znode each (%d "
                "tenant folders under /slices, %d under /routes%s); this ferry keeps each "
                "tenant's slices and routes in one document (docs/catalog.md, \"Tenant "
                "documents\") and does not read that layout. Convert it in place: stop every "
                "ferry process (coordinator, routers, agents, commands), then run `ferry catalog "
                "export --catalog 'zk://%s%s?convert_layout=1' > dump.json` (it converts the "
                "catalog when it opens it, keeping every record and its version, then exports "
                "it; it can be run again after an interruption). Or move it to a new chroot: "
                "`ferry catalog export` with the ferry that wrote it, `ferry catalog import "
                "--catalog zk://%s/NEW_CHROOT dump.json` with this one",
                be->hosts, be->root, old[0], old[1],
                zrc == ZOK ? "; written by an older ferry after this one marked it" : "",
                be->hosts, be->root, be->hosts);
            break;
        }
        /* convert_layout=1: every pack built again from the documents (after a conversion of
         * the older records above, or to mend a catalog written around ferry) */
        if (be->convert_layout && !packs_built) {
            packs_built = true;
            if ((rc = zp_build_all(c, err)))
                break;
        }
        if (no_packs && !packs_built) {
            rc = ferry_err_set(
                err, FERRY_EUNSUPPORTED,
                "zk://%s%s has catalog layout 2 (tenant documents without slice packs), written "
                "by an older ferry; this ferry keeps a slice pack beside each tenant's documents "
                "(docs/catalog.md, \"Slice packs on ZooKeeper\") and does not write a catalog "
                "without them. Build them in place: stop every ferry process (coordinator, "
                "routers, agents, commands), then run `ferry catalog export --catalog "
                "'zk://%s%s?convert_layout=1' > dump.json` (it builds the packs when it opens "
                "the catalog, then exports it; it can be run again after an interruption)",
                be->hosts, be->root, be->hosts, be->root);
            break;
        }
        if (no_packs) { /* packs built: marked as having them, unless another process did */
            zk_abspath(be, "layout", abs, sizeof abs);
            zrc = zoo_set(be->zh, abs, ZT_LAYOUT, (int)strlen(ZT_LAYOUT), st.version);
            if (zrc == ZBADVERSION)
                continue;
            if (zrc != ZOK)
                rc = zfail(be, zrc, "writing", "layout", err);
            break;
        }
        if (zrc == ZOK)
            break; /* marked, guards in place */
        /* a new catalog (no slice or route yet): the documents' folders, the guards and the
         * marker in one multi, so that a catalog marked always has its guards */
        if (!m.ops && zmulti_init(&m, 8)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
        m.n = 0;
        for (int k = 0; k < 2; k++)
            guard_ops(&m, be, k);
        zm_create(&m, be, "layout", ZT_LAYOUT, (int)strlen(ZT_LAYOUT), 0, -1);
        zrc = zoo_multi(be->zh, m.n, m.ops, m.res);
        if (zrc == ZNODEEXISTS)
            continue; /* another process marked it meanwhile: check again */
        if (zrc != ZOK)
            rc = zfail(be, zrc, "creating", "layout", err);
        break;
    }
    if (m.ops)
        zmulti_free(&m);
    return rc;
}
