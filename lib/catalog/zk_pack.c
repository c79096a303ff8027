/* The ZooKeeper backend's slice packs (docs/catalog.md, "Slice packs on ZooKeeper"): beside each
 * pair of tenant documents (slice_docs/T~B and route_docs/T~B) one znode slice_packs/T~B holds
 * the join of their entries by split, in the text of lib/catalog/slice_pack_format.c, so that a
 * scan of every slice row (the rebalancing plan, the status) reads one small document per tenant
 * instead of two large ones: ZooKeeper's cost is per document served and per byte
 * (docs/benchmarks.md, "Session 24"), and the packs are about a fifth of the documents' bytes.
 *
 * The packs are derived data, written in the same multi as every change of their documents:
 *
 *   commit   zk_tdoc.c reads a touched bucket's pack (its version only) before both documents,
 *            and sends the pack built from the documents' new texts (zp_build) conditioned on
 *            that version, or created when there was none. The read order makes it safe without
 *            a check of the untouched document: a writer that changed it after the pack was read
 *            changed the pack too, so the conditioned write fails and the commit reads again.
 *   reading  zp_scan lists and reads slice_packs/ between two looks at the write gate and hands
 *            every row over in key order (tenant bytewise, then split).
 *   layout   a catalog whose documents have packs is layout 3 (/layout). A layout-2 catalog is
 *            refused at open, or given its packs when the URL asks (convert_layout=1, every other
 *            process stopped: zp_build_all); an older ferry refuses layout 3, so nothing writes
 *            documents without their packs.
 *
 * The pack of a tenant's bucket 0 also carries its tenant record, as a first line
 * "=\tSPLITS\tRF\tVERSION\n" (ZooKeeper's packs only; the rows after it are the SQLite packs'
 * format), so that the plan and the status read the tenants and their slices in one read of
 * slice_packs/ instead of two folders (tenants/ alone cost ZooKeeper 0.12 s at 100,000 tenants):
 * a commit that writes tenants/T reads and writes T's bucket-0 pack the same way.
 *
 * Invariant: in a layout-3 catalog, for every bucket whose documents or tenant record exist,
 * slice_packs/T~B holds the tenant record's line (bucket 0, when it exists) and the join of the
 * documents' entries, or PACK_UNUSABLE when a row cannot be packed (a record the compact parse
 * and the decoder refuse, text with a control character, a pack over ZT_DOC_MAX); a scan that
 * meets PACK_UNUSABLE reads the folders instead (and reports what they hold). */
#include "catalog/zk_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PACK_DIR "slice_packs"
#define PACK_UNUSABLE "!"
#define PACK_REBUILD                                                                              \
    "derived data: stop every other ferry process and open the catalog once with "              \
    "convert_layout=1 in its URL, which builds every pack again"
#define BUILD_GROUP 512 /* buckets read and written together by zp_build_all */
#define TENANT_MARK '=' /* the first byte of a tenant record's line */

void zp_rel(const char *tenant, uint32_t bucket, char *out, size_t size)
{
    if (bucket)
        snprintf(out, size, PACK_DIR "/%s~%u", tenant, bucket);
    else
        snprintf(out, size, PACK_DIR "/%s", tenant);
}

/* A document's entries as spans of f, over a copy of text that f owns. 0, -1 (not a tenant
 * document) or FERRY_ENOMEM. */
static int doc_flat(const char *text, size_t len, const char *tenant, cat_flat *f)
{
    if (!text || !len)
        return 0;
    char *copy = malloc(len + 1);
    if (!copy)
        return FERRY_ENOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    if (cat_flat_block(f, copy))
        return FERRY_ENOMEM;
    return zdoc_spans(copy, len, tenant, strlen(tenant), f);
}

/* The tenant record's line into b (empty): FERRY_OK, -1 when the record is not one the line can
 * stand for (the decoder refuses it, or it names another tenant), FERRY_ENOMEM. */
static int tenant_line(const char *tenant, const char *doc, int64_t version, cat_pack_buf *b)
{
    ferry_record rec;
    ferry_err derr = {0};
    ferry_record_init(&rec, FERRY_REC_TENANT);
    int r = cat_record_decode(FERRY_REC_TENANT, doc, &rec, &derr);
    if (r == FERRY_ENOMEM)
        return FERRY_ENOMEM;
    bool ok = !r && !strcmp(rec.u.tenant.name, tenant) && version >= 0;
    uint32_t splits = rec.u.tenant.splits, rf = rec.u.tenant.rf;
    ferry_record_free(&rec);
    if (!ok)
        return -1;
    b->cap = 64;
    if (!(b->s = malloc(b->cap)))
        return FERRY_ENOMEM;
    int w = snprintf(b->s, b->cap, "%c\t%u\t%u\t%lld\n", TENANT_MARK, splits, rf,
                     (long long)version);
    assert(w > 0 && (size_t)w < b->cap);
    b->len = (size_t)w;
    return FERRY_OK;
}

int zp_build(ferry_catalog *c, const char *tenant, const char *tenant_doc,
             int64_t tenant_version, const char *slice_doc, size_t slice_len,
             const char *route_doc, size_t route_len, char **out, size_t *out_len,
             ferry_err *err)
{
    cat_flat f[2] = {{0}, {0}};
    cat_pack_buf b = {.tenant = tenant};
    bool usable = true;
    int rc = FERRY_OK;
    *out = NULL;
    *out_len = 0;
    if (tenant_doc) {
        int r = tenant_line(tenant, tenant_doc, tenant_version, &b);
        if (r == FERRY_ENOMEM)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        else if (r)
            usable = false; /* the scans read the tenants' folder and say what is wrong */
    }
    for (int k = 0; k < 2 && !rc && usable; k++) {
        int r = doc_flat(k ? route_doc : slice_doc, k ? route_len : slice_len, tenant, &f[k]);
        if (r == FERRY_ENOMEM)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        else if (r)
            usable = false; /* a damaged document: the scans read it and say so */
    }
    if (!rc && usable) {
        ferry_err jerr = {0};
        int r = cat_join_flats(c, &f[0], &f[1], cat_pack_row, &b, &jerr);
        if (r == FERRY_ENOMEM)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        else if (r || b.refused || b.len > ZT_DOC_MAX)
            usable = false;
    }
    if (!rc) {
        if (!usable) {
            b.len = strlen(PACK_UNUSABLE);
            free(b.s);
            b.s = strdup(PACK_UNUSABLE);
        } else if (!b.s) {
            b.s = malloc(1); /* a bucket with no entry left: an empty pack */
        }
        if (!b.s)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    if (!rc) {
        *out = b.s;
        *out_len = b.len;
    } else {
        free(b.s);
    }
    cat_flat_free(&f[0]);
    cat_flat_free(&f[1]);
    return rc;
}

/* ---- reading ------------------------------------------------------------------------------------ */

/* A number of the tenant line up to stop, *p moved past it. */
static bool line_num(const char **p, const char *end, char stop, uint64_t max, uint64_t *out)
{
    const char *q = *p;
    uint64_t x = 0;
    if (q == end || *q < '0' || *q > '9')
        return false;
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        if (x > (max - (uint64_t)(*q - '0')) / 10)
            return false;
        x = x * 10 + (uint64_t)(*q - '0');
    }
    if (q == end || *q != stop)
        return false;
    *out = x;
    *p = q + 1;
    return true;
}

/* The tenant line at the head of a bucket-0 pack, if any: *row filled (has set), *p moved past
 * it. False when the line is damaged. */
static bool take_tenant(const char **p, const char *end, ferry_tenant_row *row, bool *has)
{
    *has = false;
    if (*p == end || **p != TENANT_MARK)
        return true;
    const char *q = *p + 1;
    uint64_t splits, rf, version;
    if (q == end || *q++ != '\t' || !line_num(&q, end, '\t', UINT32_MAX, &splits) ||
        !line_num(&q, end, '\t', UINT32_MAX, &rf) ||
        !line_num(&q, end, '\n', INT64_MAX, &version))
        return false;
    row->splits = (uint32_t)splits;
    row->rf = (uint32_t)rf;
    row->version = (int64_t)version;
    *has = true;
    *p = q;
    return true;
}

int zp_scan(ferry_catalog *c, ferry_tenant_row_fn tenant_fn, ferry_slice_row_fn slice_fn,
            void *arg, bool *used, ferry_err *err)
{
    cat_flat packs = {0};
    zt_doc_ref *refs = NULL;
    cat_unpack *u = NULL;
    *used = false;
    int rc = zk_phys_scan_flat(c, PACK_DIR, 1, &packs, err);
    if (rc)
        goto out;
    for (size_t i = 0; i < packs.n; i++)
        if (packs.v[i].doc_len == strlen(PACK_UNUSABLE) &&
            !memcmp(packs.v[i].doc, PACK_UNUSABLE, strlen(PACK_UNUSABLE)))
            goto out; /* a bucket the packs cannot carry: the folders are read instead */
    if (!(refs = malloc((packs.n ? packs.n : 1) * sizeof *refs)) || !(u = malloc(sizeof *u))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading the slice packs");
        goto out;
    }
    for (size_t i = 0; i < packs.n; i++)
        zt_doc_ref_init(&refs[i], packs.v[i].name, packs.v[i].name_len, i);
    if (packs.n > 1)
        qsort(refs, packs.n, sizeof *refs, zt_doc_ref_cmp);
    *used = true;
    /* every tenant first (the status places slices under tenants it has seen), then every
     * slice row: two passes over the packs read once */
    for (int pass = tenant_fn ? 0 : 1; pass < (slice_fn ? 2 : 1) && !rc; pass++)
        for (size_t i = 0; i < packs.n && !rc; i++) {
            const cat_span *sp = &packs.v[refs[i].idx];
            char tenant[FERRY_NAME_MAX];
            if (refs[i].tlen >= sizeof tenant) {
                rc = ferry_err_set(err, FERRY_EIO, "catalog: zk://%s%s/" PACK_DIR "/%.*s is "
                                   "not a slice pack (%s)", c->be->hosts, c->be->root,
                                   (int)sp->name_len, sp->name, PACK_REBUILD);
                break;
            }
            memcpy(tenant, sp->name, refs[i].tlen);
            tenant[refs[i].tlen] = '\0';
            const char *p = sp->doc, *end = sp->doc + sp->doc_len;
            ferry_tenant_row row = {.name = tenant};
            bool has = false;
            if (refs[i].bucket == 0 && !take_tenant(&p, end, &row, &has)) {
                rc = ferry_err_set(err, FERRY_EIO, "catalog: the slice pack of tenant %s is "
                                   "damaged at line 1 (%s)", tenant, PACK_REBUILD);
                break;
            }
            if (pass == 0 && has)
                rc = tenant_fn(&row, arg, err);
            else if (pass == 1)
                rc = cat_unpack_rows(tenant, p, (size_t)(end - p), u, slice_fn, arg,
                                     PACK_REBUILD, err);
        }
out:
    free(u);
    free(refs);
    cat_flat_free(&packs);
    return rc;
}

/* ---- every pack built again (convert_layout=1) -------------------------------------------------- */

/* Appends the names of the documents in folder (relative) to *names. */
static int list_docs(cat_backend *be, const char *folder, char ***names, size_t *n, size_t *cap,
                     ferry_err *err)
{
    char abs[PATH_MAX_LEN];
    zk_abspath(be, folder, abs, sizeof abs);
    struct String_vector kids = {0, NULL};
    int zrc = zoo_get_children(be->zh, abs, 0, &kids);
    if (zrc == ZNONODE)
        return FERRY_OK;
    if (zrc != ZOK)
        return zfail(be, zrc, "listing", folder, err);
    int rc = FERRY_OK;
    for (int i = 0; i < kids.count && !rc; i++) {
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 1024;
            char **q = realloc(*names, nc * sizeof *q);
            if (!q) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                break;
            }
            *names = q;
            *cap = nc;
        }
        if (!((*names)[*n] = strdup(kids.data[i])))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        else
            (*n)++;
    }
    deallocate_String_vector(&kids);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The packs of buckets names[0..n) ("acme", "acme~1"): their documents read (gate_held: without
 * looking at the gate, which the caller holds), packs built and written (created, or set
 * whatever they held). */
static int build_group(ferry_catalog *c, char *const *names, size_t n, bool gate_held,
                       ferry_err *err)
{
    cat_backend *be = c->be;
    char **rels = calloc(4 * n, sizeof *rels), **texts = calloc(n, sizeof *texts);
    size_t *lens = calloc(n, sizeof *lens);
    scan_slot *slots = calloc(4 * n, sizeof *slots);
    zmulti m = {0};
    int rc = FERRY_OK;
    /* a group's packs in as few multis as their bytes allow: each is a round trip and a sync
     * of ZooKeeper's log (90 a multi took 50 s for 100,000 tenants) */
    if (!rels || !texts || !lens || !slots || zmulti_init(&m, BUILD_GROUP)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    /* the packs, then the slices' documents, the routes' and the tenant records (a bucket's
     * name is no tenant's: not found) */
    static const char *const dirs[4] = {PACK_DIR, "slice_docs", "route_docs", "tenants"};
    for (size_t k = 0; k < 4 && !rc; k++)
        for (size_t i = 0; i < n && !rc; i++) {
            size_t l = strlen(dirs[k]) + strlen(names[i]) + 2;
            if (!(rels[k * n + i] = malloc(l)))
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            else
                snprintf(rels[k * n + i], l, "%s/%s", dirs[k], names[i]);
        }
    if (!rc)
        rc = gate_held ? zk_read_docs_gate_held(c, rels, 4 * n, slots, err)
                       : zk_read_docs(c, rels, 4 * n, false, slots, err);
    size_t pending = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char tenant[FERRY_NAME_MAX];
        const char *tilde = strchr(names[i], '~');
        size_t tl = tilde ? (size_t)(tilde - names[i]) : strlen(names[i]);
        if (tl >= sizeof tenant) {
            rc = ferry_err_set(err, FERRY_EREMOTE, "zk://%s%s/slice_docs/%s is not a tenant "
                               "document", be->hosts, be->root, names[i]);
            break;
        }
        memcpy(tenant, names[i], tl);
        tenant[tl] = '\0';
        const scan_slot *s = &slots[n + i], *r = &slots[2 * n + i], *t = &slots[3 * n + i];
        bool has_t = !tilde && t->rc == ZOK && t->doc;
        if (!has_t && s->rc != ZOK && r->rc != ZOK && slots[i].rc != ZOK)
            continue; /* nothing there (a tenant a rollback removed again): no pack either */
        rc = zp_build(c, tenant, has_t ? t->doc : NULL, has_t ? t->version : -1,
                      s->rc == ZOK ? s->doc : NULL, s->rc == ZOK ? s->doc_len : 0,
                      r->rc == ZOK ? r->doc : NULL, r->rc == ZOK ? r->doc_len : 0, &texts[i],
                      &lens[i], err);
        if (rc)
            break;
        if (m.n && pending + lens[i] > CHUNK_BYTES) { /* one request < 1 MB */
            rc = zt_conv_flush(be, &m, true, "writing the slice pack", err);
            pending = 0;
        }
        pending += lens[i];
        if (!rc && slots[i].rc == ZOK)
            zm_set(&m, be, rels[i], texts[i], (int)lens[i], -1, -1);
        else if (!rc)
            zm_create(&m, be, rels[i], texts[i], (int)lens[i], 0, -1);
    }
    if (!rc)
        rc = zt_conv_flush(be, &m, true, "writing the slice pack", err);
out:
    for (size_t i = 0; i < 4 * n; i++) {
        if (slots)
            free(slots[i].doc);
        if (rels)
            free(rels[i]);
    }
    for (size_t i = 0; texts && i < n; i++)
        free(texts[i]);
    free(rels);
    free(texts);
    free(lens);
    free(slots);
    zmulti_free(&m);
    return rc;
}

int zp_build_all(ferry_catalog *c, ferry_err *err)
{
    cat_backend *be = c->be;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = list_docs(be, "slice_docs", &names, &n, &cap, err);
    if (!rc)
        rc = list_docs(be, "route_docs", &names, &n, &cap, err);
    if (!rc) /* tenants without slices or routes get the pack of their record */
        rc = list_docs(be, "tenants", &names, &n, &cap, err);
    if (!rc && n > 1) { /* a bucket with both documents once */
        qsort(names, n, sizeof *names, name_cmp);
        size_t w = 1;
        for (size_t i = 1; i < n; i++) {
            if (!strcmp(names[i], names[w - 1]))
                free(names[i]);
            else
                names[w++] = names[i];
        }
        n = w;
    }
    for (size_t i = 0; i < n && !rc; i += BUILD_GROUP) {
        rc = build_group(c, names + i, n - i < BUILD_GROUP ? n - i : BUILD_GROUP, false, err);
        if (!rc && n > 10000 && (i / BUILD_GROUP) % 20 == 19)
            fprintf(stderr, "ferry: building the catalog's slice packs: %zu of %zu\n",
                    i + BUILD_GROUP, n);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc)
        ferry_err_prefix(err, "building the slice packs of zk://%s%s (open it with "
                              "convert_layout=1 again: it starts over): ",
                         be->hosts, be->root);
    return rc;
}

int zp_repack(ferry_catalog *c, char *const *names, size_t n, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; i < n && !rc; i += BUILD_GROUP)
        rc = build_group(c, names + i, n - i < BUILD_GROUP ? n - i : BUILD_GROUP, true, err);
    if (rc)
        ferry_err_prefix(err, "building the slice packs of the tenants a rollback restored: ");
    return rc;
}
