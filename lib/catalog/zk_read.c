/* The ZooKeeper backend's reads (zk.c holds its plumbing, writes, lease and open): one znode
 * or a subtree, level by level, with pipelined async gets or multiRead (zk_bulk.c), between two
 * looks at the write gate so a reader never sees a batch half-applied (docs/catalog.md). */
#include "catalog/zk_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zookeeper/zookeeper.h>

#include "ferry/strutil.h"

/* ---- reads ---- */

int zk_phys_get(ferry_catalog *c, const char *path, cat_item *out, ferry_err *err)
{
    cat_backend *be = c->be;
    char abs[PATH_MAX_LEN];
    zk_abspath(be, path, abs, sizeof abs);
    for (int attempt = 0;; attempt++) {
        int64_t gv;
        int rc = attempt ? zk_gate_wait_open(c, &gv, err) : zk_cached_gate(c, &gv, err);
        if (rc)
            return rc;
        char *data = NULL;
        struct Stat st;
        int zrc = zget(be, abs, false, &data, NULL, &st);
        bool same = false;
        rc = zk_gate_unchanged(be, gv, &same, err);
        if (rc) {
            free(data);
            return rc;
        }
        if (!same) {
            free(data);
            continue;
        }
        if (zrc == ZNONODE || (zrc == ZOK && !data[0])) {
            free(data);
            return ferry_err_set(err, FERRY_ENOTFOUND, "%s does not exist", path);
        }
        if (zrc != ZOK)
            return zfail(be, zrc, "reading", path, err);
        out->path = strdup(path);
        out->doc = data;
        out->version = st.version;
        if (!out->path) {
            cat_item_free(out);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        return FERRY_OK;
    }
}

/* Paths relative to the root: a scan's frontier. */
typedef struct rel_list {
    char **v;
    size_t n, cap;
} rel_list;

static int rel_push(rel_list *l, const char *parent, const char *child)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return FERRY_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    size_t a = strlen(parent), b = child ? strlen(child) : 0;
    char *p = malloc(a + b + 2);
    if (!p)
        return FERRY_ENOMEM;
    memcpy(p, parent, a);
    if (child) {
        p[a] = '/';
        memcpy(p + a + 1, child, b);
    }
    p[a + (child ? b + 1 : 0)] = '\0';
    l->v[l->n++] = p;
    return FERRY_OK;
}

static void rel_free(rel_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void slot_done(scan_slot *s)
{
    pthread_mutex_lock(&s->w->mu);
    s->w->pending--;
    pthread_cond_broadcast(&s->w->cv);
    pthread_mutex_unlock(&s->w->mu);
}

void zk_scan_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    scan_slot *s = (scan_slot *)data;
    s->rc = rc;
    if (rc == ZOK) {
        s->doc = ferry_strndup(value ? value : "", value && len > 0 ? (size_t)len : 0);
        s->version = st ? st->version : -1;
        if (!s->doc)
            s->rc = ZSYSTEMERROR;
        else
            s->doc_len = strlen(s->doc);
    }
    slot_done(s);
}

static void kids_done(int rc, const struct String_vector *strings, const void *data)
{
    scan_slot *s = (scan_slot *)data;
    s->rc = rc;
    if (rc == ZOK && strings && strings->count > 0) {
        s->kids.data = calloc((size_t)strings->count, sizeof *s->kids.data);
        for (int i = 0; s->kids.data && i < strings->count; i++)
            if ((s->kids.data[s->kids.count] = strdup(strings->data[i])))
                s->kids.count++;
        if (!s->kids.data || s->kids.count != strings->count)
            s->rc = ZSYSTEMERROR;
    }
    slot_done(s);
}

/* Runs one request per path (children when kids, else the document), SCAN_WINDOW in flight at
 * once: the scan costs about paths / SCAN_WINDOW round trips, not one per path or per parent. */
static int pipelined(cat_backend *be, const rel_list *paths, bool kids, scan_slot *slots)
{
    scan_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    size_t issued = 0, n = paths->n;
    while (issued < n || w.pending) {
        pthread_mutex_lock(&w.mu);
        while (w.pending >= SCAN_WINDOW || (issued == n && w.pending))
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        while (issued < n && w.pending < SCAN_WINDOW) {
            char abs[PATH_MAX_LEN];
            zk_abspath(be, paths->v[issued], abs, sizeof abs);
            scan_slot *s = &slots[issued++];
            s->w = &w;
            pthread_mutex_lock(&w.mu);
            w.pending++;
            pthread_mutex_unlock(&w.mu);
            int zrc = kids ? zoo_aget_children(be->zh, abs, 0, kids_done, s)
                           : zoo_aget(be->zh, abs, 0, zk_scan_done, s);
            if (zrc != ZOK) {
                pthread_mutex_lock(&w.mu);
                w.pending--;
                pthread_mutex_unlock(&w.mu);
                s->rc = zrc;
            }
        }
    }
    return FERRY_OK;
}

/* One level of a scan into slots: by multiRead on the scan's bulk session (zk_bulk.c), opened
 * by the first level of at least BULK_MIN paths (a session costs a few round trips and a
 * logged create and close on the server: not worth it for the small folders that routers and
 * flows list often), else (or when that fails: the slots are emptied and read again) one
 * pipelined request per path. A server without multiRead is remembered: later scans skip it. */
#define BULK_MIN 256
/* keep: zk_bulk_read's (documents read by multiRead stay in replies keep owns); NULL: none. */
static void read_level(cat_backend *be, zk_bulk **bulk, const rel_list *paths, bool kids,
                       scan_slot *slots, cat_flat *keep)
{
    if (!*bulk && !be->no_bulk && paths->n >= BULK_MIN) {
        int zrc = zk_bulk_open(be, bulk);
        if (zrc == ZUNIMPLEMENTED)
            be->no_bulk = true;
        if (zrc != ZOK)
            *bulk = NULL;
    }
    if (*bulk) {
        int zrc = zk_bulk_read(*bulk, be, paths->v, paths->n, kids, slots, keep);
        if (zrc == ZOK)
            return;
        if (zrc == ZUNIMPLEMENTED)
            be->no_bulk = true;
        zk_bulk_close(*bulk);
        *bulk = NULL;
        for (size_t i = 0; i < paths->n; i++) { /* (replies kept meanwhile stay in keep) */
            if (!slots[i].borrowed)
                free(slots[i].doc);
            deallocate_String_vector(&slots[i].kids);
            memset(&slots[i], 0, sizeof slots[i]);
        }
    }
    pipelined(be, paths, kids, slots);
}

/* A document read by a scan into flat: its path (malloc'ed) and its text (unless borrowed: it
 * lies in a reply flat holds already), both taken here whatever happens, become blocks of flat,
 * and a span points into them (rel: the scan's folder, the start of path). */
static int flat_leaf(cat_flat *flat, const char *rel, char *path, scan_slot *s)
{
    char *doc = s->doc;
    bool own = !s->borrowed;
    s->doc = NULL;
    if (cat_flat_block(flat, path)) {
        if (own)
            free(doc);
        return FERRY_ENOMEM;
    }
    if (own && cat_flat_block(flat, doc))
        return FERRY_ENOMEM;
    size_t rl = strlen(rel);
    const char *m = path + rl + (path[rl] == '/');
    const char *slash = strrchr(m, '/');
    cat_span sp = {.mid = m, .mid_len = slash ? (uint32_t)(slash - m) : 0,
                   .name = slash ? slash + 1 : m, .doc = doc, .version = s->version,
                   .doc_len = (uint32_t)s->doc_len};
    sp.name_len = (uint32_t)strlen(sp.name);
    return cat_flat_span(flat, &sp);
}

/* Every document exactly depth levels below rel: the levels above the documents are listed
 * level by level, each level's getChildren pipelined, then every document is read pipelined.
 * Into out (copies), or into flat when out is NULL (each text and path moved, not copied). */
static int scan_level(cat_backend *be, const char *rel, int depth, cat_items *out,
                      cat_flat *flat, ferry_err *err)
{
    rel_list level = {0}, next = {0};
    scan_slot *slots = NULL;
    zk_bulk *bulk = NULL; /* opened by the first level large enough (read_level) */
    int rc = rel_push(&level, rel, NULL) ? FERRY_ENOMEM : FERRY_OK;
    for (int d = 0; !rc && d <= depth; d++) {
        bool leaves = d == depth;
        free(slots);
        slots = calloc(level.n ? level.n : 1, sizeof *slots);
        if (!slots) {
            rc = FERRY_ENOMEM;
            break;
        }
        read_level(be, &bulk, &level, !leaves, slots, leaves ? flat : NULL);
        for (size_t i = 0; i < level.n && !rc; i++) {
            scan_slot *s = &slots[i];
            if (s->rc == ZNONODE)
                continue; /* deleted since its parent was listed (or no such folder) */
            if (s->rc != ZOK) {
                rc = zfail(be, s->rc, leaves ? "reading" : "listing", level.v[i], err);
                break;
            }
            if (!leaves) {
                for (int k = 0; k < s->kids.count && !rc; k++)
                    if (rel_push(&next, level.v[i], s->kids.data[k]))
                        rc = FERRY_ENOMEM;
            } else if (!s->doc[0]) {
                continue; /* an empty document is a container, not a record */
            } else if (!out) {
                rc = flat_leaf(flat, rel, level.v[i], s);
                level.v[i] = NULL;
            } else if (cat_items_push(out, level.v[i], s->doc, strlen(s->doc), s->version)) {
                rc = FERRY_ENOMEM;
            }
        }
        for (size_t i = 0; i < level.n; i++) {
            if (!slots[i].borrowed)
                free(slots[i].doc);
            deallocate_String_vector(&slots[i].kids);
        }
        rel_free(&level);
        level = next;
        memset(&next, 0, sizeof next);
    }
    if (rc == FERRY_ENOMEM)
        ferry_err_set(err, FERRY_ENOMEM, "out of memory listing %s", rel);
    free(slots);
    rel_free(&level);
    rel_free(&next);
    zk_bulk_close(bulk);
    return rc;
}

/* scan_level into items or flat (exactly one of them), read again while a batch ran meanwhile
 * (the gate's version moved) */
static int gated_scan(ferry_catalog *c, const char *prefix, int depth, cat_items *items,
                      cat_flat *flat, ferry_err *err)
{
    for (int attempt = 0;; attempt++) {
        int64_t gv;
        int rc = attempt ? zk_gate_wait_open(c, &gv, err) : zk_cached_gate(c, &gv, err);
        if (rc)
            return rc;
        rc = scan_level(c->be, prefix, depth, items, flat, err);
        bool same = false;
        if (!rc)
            rc = zk_gate_unchanged(c->be, gv, &same, err);
        if (rc || same)
            return rc;
        if (items) /* a batch ran while we read: read again */
            cat_items_free(items);
        else
            cat_flat_free(flat);
    }
}

int zk_phys_scan(ferry_catalog *c, const char *prefix, int depth, cat_items *out,
                 ferry_err *err)
{
    return gated_scan(c, prefix, depth, out, NULL, err);
}

int zk_phys_scan_flat(ferry_catalog *c, const char *prefix, int depth, cat_flat *out,
                      ferry_err *err)
{
    return gated_scan(c, prefix, depth, NULL, out, err);
}

int zk_read_docs_gate_held(ferry_catalog *c, char *const *rels, size_t n, scan_slot *slots,
                           ferry_err *err)
{
    rel_list paths = {(char **)rels, n, n};
    zk_bulk *bulk = NULL;
    memset(slots, 0, n * sizeof *slots);
    read_level(c->be, &bulk, &paths, false, slots, NULL);
    zk_bulk_close(bulk);
    int rc = FERRY_OK;
    for (size_t i = 0; i < n && !rc; i++)
        if (slots[i].rc != ZOK && slots[i].rc != ZNONODE)
            rc = zfail(c->be, slots[i].rc, "reading", rels[i], err);
    if (rc)
        for (size_t i = 0; i < n; i++) {
            free(slots[i].doc);
            slots[i].doc = NULL;
        }
    return rc;
}

int zk_read_docs(ferry_catalog *c, char *const *rels, size_t n, bool kids, scan_slot *slots,
                 ferry_err *err)
{
    rel_list paths = {(char **)rels, n, n};
    for (int attempt = 0;; attempt++) {
        int64_t gv;
        int rc = attempt ? zk_gate_wait_open(c, &gv, err) : zk_cached_gate(c, &gv, err);
        if (rc)
            return rc;
        zk_bulk *bulk = NULL;
        memset(slots, 0, n * sizeof *slots);
        read_level(c->be, &bulk, &paths, kids, slots, NULL);
        zk_bulk_close(bulk);
        bool same = false;
        rc = zk_gate_unchanged(c->be, gv, &same, err);
        for (size_t i = 0; !rc && same && i < n; i++)
            if (slots[i].rc != ZOK && slots[i].rc != ZNONODE)
                rc = zfail(c->be, slots[i].rc, kids ? "listing" : "reading", rels[i], err);
        if (rc || !same)
            for (size_t i = 0; i < n; i++) {
                free(slots[i].doc);
                slots[i].doc = NULL;
                deallocate_String_vector(&slots[i].kids);
            }
        if (rc || same)
            return rc;
    }
}

