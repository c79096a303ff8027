/* Compact scans of slices (joined with their routes), tenants and partitions
 * (include/ferry/catalog_scan.h). A cursor walks one folder's stored documents in key order:
 * on SQLite a prepared SELECT on the primary key that streams the rows (the text SQLite hands
 * over is read in place, nothing is copied per row), on another backend (ZooKeeper) the
 * backend's flat scan (spans into the texts it read, nothing allocated per record), checked for
 * key order unless the backend vouches for it, and sorted here when it is not. Slices and routes are two cursors merged by key, so the join
 * costs one pass; on SQLite each cursor is stepped by a thread of its own when it can be (the
 * calling thread merges), and the join is read from the tenants' slice packs instead whenever
 * they are complete (slice_pack.c, which builds them with the same join one tenant at a time). The partition counts come from a table SQLite's triggers keep
 * (lib/catalog/sqlite.c), or from the partition scan on another backend. A document in the canonical form ferry writes (the keys of its kind in
 * sorted order, plain strings and integers) is read by flat_parse; anything else goes through
 * the record decoder (cat_record_decode), so a row never says something ferry_catalog_list
 * would not. */
#include "catalog/catalog_int.h"
#include "ferry/catalog_scan.h"

#include <assert.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- canonical documents ---------------------------------------------------------------------- */

typedef struct flat_val {
    const char *s; /* strings: the text between the quotes (not NUL-terminated) */
    size_t len;
    uint64_t num; /* integers */
    bool is_str;
} flat_val;

/* Whether doc is {"K1":V1,"K2":V2,...} with exactly the keys keys[0..n) in that order, every
 * value a string of printable ASCII without quote or backslash (nothing to unescape) or an
 * integer from 0 to INT64_MAX without a leading zero; out[i] gets the value of keys[i]. This is
 * the form cat_record_encode gives every record of the kinds scanned here. */
static bool flat_parse(const char *doc, const char *const *keys, size_t n, flat_val *out)
{
    const char *p = doc;
    if (*p++ != '{')
        return false;
    for (size_t i = 0; i < n; i++) {
        /* the key, a byte at a time (no strlen and strncmp per key of a million records) */
        const char *kp = keys[i];
        if (*p++ != '"')
            return false;
        while (*kp && *p == *kp) {
            p++;
            kp++;
        }
        if (*kp || p[0] != '"' || p[1] != ':')
            return false;
        p += 2;
        flat_val *v = &out[i];
        if (*p == '"') {
            const char *s = ++p;
            while (*p >= 0x20 && *p <= 0x7e && *p != '"' && *p != '\\')
                p++;
            if (*p != '"')
                return false;
            v->is_str = true;
            v->s = s;
            v->len = (size_t)(p - s);
            p++;
        } else if (*p >= '0' && *p <= '9') {
            if (*p == '0' && p[1] >= '0' && p[1] <= '9')
                return false;
            uint64_t x = 0;
            for (; *p >= '0' && *p <= '9'; p++) {
                if (x > (UINT64_C(9223372036854775807) - (uint64_t)(*p - '0')) / 10)
                    return false;
                x = x * 10 + (uint64_t)(*p - '0');
            }
            v->is_str = false;
            v->num = x;
        } else {
            return false;
        }
        if (*p != (i + 1 < n ? ',' : '}'))
            return false;
        p++;
    }
    return *p == '\0';
}

/* The string value v into dst (size bytes); false when it does not fit (the decoder then says
 * why) or is not a string. */
static bool flat_str(const flat_val *v, char *dst, size_t size)
{
    if (!v->is_str || v->len >= size)
        return false;
    memcpy(dst, v->s, v->len);
    dst[v->len] = '\0';
    return true;
}

static bool flat_num(const flat_val *v, uint64_t max, uint64_t *dst)
{
    if (v->is_str || v->num > max)
        return false;
    *dst = v->num;
    return true;
}

/* ---- a cursor over one folder ------------------------------------------------------------------ */

typedef struct cursor {
    ferry_catalog *c;
    sqlite3 *db;       /* SQLite: the scan's own connection */
    const char *dir;   /* "slices" */
    int depth;         /* key segments below dir */
    bool numeric_name; /* the last segment orders as a number (splits) */
    sqlite3_stmt *st;  /* SQLite */
    bool borrowed;     /* st is the caller's: reset, not finalized, at the end */
    cat_flat flat;     /* another backend: the folder's documents as spans, sorted */
    size_t next;
    bool done;
    /* the current document */
    const char *mid;   /* the key segments before the last one ("acme"), not NUL-terminated */
    size_t mid_len;
    const char *name;  /* the last segment */
    size_t name_len;
    int64_t version;
    const char *doc;
} cursor;

/* Bytewise, a shorter segment first when one is the other's start. A loop rather than memcmp:
 * segments are short (names, split numbers) and compared once or twice per record. */
static int seg_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
    return (al > bl) - (al < bl);
}

/* The cursors' order: the middle segments bytewise (as SQLite compares the parent column), then
 * the last segment bytewise, or as a number when numeric_name (split keys have no leading
 * zeros: the shorter number is the smaller). */
static int key_cmp(bool numeric, const char *am, size_t aml, const char *an, size_t anl,
                   const char *bm, size_t bml, const char *bn, size_t bnl)
{
    int d = seg_cmp(am, aml, bm, bml);
    if (d)
        return d;
    if (numeric && anl != bnl)
        return anl < bnl ? -1 : 1;
    return seg_cmp(an, anl, bn, bnl);
}

static bool sort_numeric;

/* Two spans in the cursors' order (key_cmp); the entries of one tenant document share their
 * middle segment's pointer. */
static int span_cmp(const void *x, const void *y)
{
    const cat_span *a = x, *b = y;
    if (a->mid != b->mid || a->mid_len != b->mid_len) {
        int d = seg_cmp(a->mid, a->mid_len, b->mid, b->mid_len);
        if (d)
            return d;
    }
    if (sort_numeric && a->name_len != b->name_len)
        return a->name_len < b->name_len ? -1 : 1;
    return seg_cmp(a->name, a->name_len, b->name, b->name_len);
}

static int cursor_fail(cursor *k, ferry_err *err)
{
    sqlite3 *db = k->db;
    return ferry_err_set(err, sqlite3_errcode(db) == SQLITE_BUSY ? FERRY_ETIMEOUT : FERRY_EIO,
                         "catalog: listing %s: %s", k->dir, sqlite3_errmsg(db));
}

/* A connection of the scan's own to the catalog's SQLite file, read-only and without the
 * per-call mutex of the catalog's shared connection (which every sqlite3_column_* call takes:
 * tens of millions of times for a million slices); NULL when c is not SQLite or the file cannot
 * be opened so (the shared connection is used then). The caller closes it. */
static sqlite3 *scan_db(ferry_catalog *c)
{
    sqlite3 *shared = cat_sqlite_handle(c), *db = NULL;
    const char *file = shared ? sqlite3_db_filename(shared, "main") : NULL;
    if (!file || !*file)
        return NULL;
    if (sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 10000);
    /* pages read in place from the file's mapping, not copied by a read() each */
    sqlite3_exec(db, "PRAGMA mmap_size = 2147418112", NULL, NULL, NULL);
    return db;
}

/* One folder's documents (depth 1: parent = ?1) in key order, on the primary key. */
#define FOLDER_SQL                                                                                \
    "SELECT parent, name, version, doc FROM records WHERE parent = ?1 ORDER BY parent, name"

/* db: the scan's connection (scan_db), NULL for another backend or the shared one. */
static int cursor_open(ferry_catalog *c, sqlite3 *db, const char *dir, int depth,
                       bool numeric_name, bool sorted, cursor *k, ferry_err *err)
{
    memset(k, 0, sizeof *k);
    k->c = c;
    k->dir = dir;
    k->depth = depth;
    k->numeric_name = numeric_name;
    if (!db)
        db = cat_sqlite_handle(c);
    k->db = db;
    if (db) {
        const char *sql = depth == 1 ? FOLDER_SQL
                                     : "SELECT parent, name, version, doc FROM records"
                                       " WHERE parent > ?1 || '/' AND parent < ?1 || '0'"
                                       " ORDER BY parent, name";
        if (sqlite3_prepare_v2(db, sql, -1, &k->st, NULL) != SQLITE_OK)
            return cursor_fail(k, err);
        sqlite3_bind_text(k->st, 1, dir, -1, SQLITE_STATIC);
        return FERRY_OK;
    }
    /* the backend's documents as spans into texts the cursor holds: nothing is copied or
     * allocated per record (a backend without scan_flat: its items moved into spans) */
    int rc;
    if (c->ops->scan_flat) {
        rc = c->ops->scan_flat(c, dir, depth, &k->flat, err);
    } else {
        cat_items items = {0};
        rc = c->ops->scan(c, dir, depth, &items, err);
        if (!rc && cat_flat_take_items(&k->flat, &items, strlen(dir)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory listing %s", dir);
        cat_items_free(&items);
    }
    if (!rc && sorted && k->flat.n > 1 && !(numeric_name && k->flat.in_order)) {
        sort_numeric = numeric_name;
        /* the ZooKeeper backend hands slices and routes over in this order already (tenant
         * documents, lib/catalog/zk_tdoc.c): one pass to see it instead of a sort (the sort of a
         * million items was a third of a scan's CPU) */
        size_t i = 1;
        while (i < k->flat.n && span_cmp(&k->flat.v[i - 1], &k->flat.v[i]) <= 0)
            i++;
        if (i < k->flat.n)
            qsort(k->flat.v, k->flat.n, sizeof *k->flat.v, span_cmp);
    }
    return rc;
}

/* The next document into k (k->done at the end). */
static int cursor_next(cursor *k, ferry_err *err)
{
    if (k->done)
        return FERRY_OK;
    if (k->st) {
        size_t dl = strlen(k->dir);
        for (;;) {
            int s = sqlite3_step(k->st);
            if (s == SQLITE_DONE) {
                k->done = true;
                return FERRY_OK;
            }
            if (s != SQLITE_ROW)
                return cursor_fail(k, err);
            const char *parent = (const char *)sqlite3_column_text(k->st, 0);
            size_t pl = (size_t)sqlite3_column_bytes(k->st, 0);
            int slashes = 0;
            for (size_t i = dl; i < pl; i++)
                slashes += parent[i] == '/';
            if (slashes != k->depth - 1)
                continue; /* not exactly depth levels below dir */
            k->mid = pl > dl ? parent + dl + 1 : parent + pl;
            k->mid_len = pl > dl ? pl - dl - 1 : 0;
            k->name = (const char *)sqlite3_column_text(k->st, 1);
            k->name_len = (size_t)sqlite3_column_bytes(k->st, 1);
            k->version = sqlite3_column_int64(k->st, 2);
            k->doc = (const char *)sqlite3_column_text(k->st, 3);
            if (!k->name || !k->doc)
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory listing %s", k->dir);
            return FERRY_OK;
        }
    }
    if (k->next == k->flat.n) {
        k->done = true;
        return FERRY_OK;
    }
    const cat_span *sp = &k->flat.v[k->next++];
    k->mid = sp->mid;
    k->mid_len = sp->mid_len;
    k->name = sp->name;
    k->name_len = sp->name_len;
    k->version = sp->version;
    k->doc = sp->doc;
    return FERRY_OK;
}

static void cursor_close(cursor *k)
{
    if (k->borrowed)
        sqlite3_reset(k->st);
    else
        sqlite3_finalize(k->st);
    cat_flat_free(&k->flat);
    memset(k, 0, sizeof *k);
}

/* The end of every scan: its cursor closed, its connection (scan_db; NULL: none) closed, the
 * slow path's record freed (NULL: none) and the scan's own memory (mem, which may hold rec)
 * released. */
static void scan_end(cursor *k, sqlite3 *db, ferry_record *rec, void *mem)
{
    cursor_close(k);
    sqlite3_close(db);
    if (rec)
        ferry_record_free(rec);
    free(mem);
}

/* Decodes the current document the slow way (not canonical); err names its path. */
static int cursor_decode(const cursor *k, enum ferry_record_kind kind, ferry_record *r,
                         ferry_err *err)
{
    int rc = cat_record_decode(kind, k->doc, r, err);
    if (rc)
        ferry_err_prefix(err, "%s/%.*s%s%.*s: ", k->dir, (int)k->mid_len, k->mid,
                         k->mid_len ? "/" : "", (int)k->name_len, k->name);
    return rc;
}

/* ---- slices and routes -------------------------------------------------------------------------- */

typedef struct slice_scan {
    ferry_record rec; /* the slow path's record */
    char tenant[FERRY_NAME_MAX], route_tenant[FERRY_NAME_MAX];
    char placement[FERRY_SHARDS_TEXT_MAX], shards[FERRY_SHARDS_TEXT_MAX];
} slice_scan;

/* One slice or route document as the merge needs it: its key (the path's segments) and its
 * fields; text is the slice's placement or the route's shards. */
typedef struct row_at {
    const char *mid, *name, *tenant, *text;
    size_t mid_len, name_len;
    uint32_t split;
    uint64_t bytes, rows;
    int64_t version;
} row_at;

typedef int (*parse_fn)(slice_scan *x, const cursor *k, row_at *out, ferry_err *err);

static void key_of(const cursor *k, row_at *out)
{
    out->mid = k->mid;
    out->mid_len = k->mid_len;
    out->name = k->name;
    out->name_len = k->name_len;
    out->version = k->version;
}

/* The slice at k into out (strings in x's buffers, or k's). */
static int slice_parse(slice_scan *x, const cursor *k, row_at *out, ferry_err *err)
{
    static const char *const keys[] = {"bytes", "placement", "rows", "split", "tenant"};
    flat_val v[5];
    uint64_t split;
    if (flat_parse(k->doc, keys, 5, v) && flat_num(&v[0], INT64_MAX, &out->bytes) &&
        flat_str(&v[1], x->placement, sizeof x->placement) &&
        flat_num(&v[2], INT64_MAX, &out->rows) && flat_num(&v[3], UINT32_MAX, &split) &&
        flat_str(&v[4], x->tenant, sizeof x->tenant)) {
        out->split = (uint32_t)split;
    } else {
        int rc = cursor_decode(k, FERRY_REC_SLICE, &x->rec, err);
        if (rc)
            return rc;
        const ferry_slice *s = &x->rec.u.slice;
        memcpy(x->tenant, s->tenant, sizeof x->tenant);
        ferry_shard_set_str(&s->placement, x->placement);
        out->split = s->split;
        out->bytes = s->bytes;
        out->rows = s->rows;
    }
    out->tenant = x->tenant;
    out->text = x->placement;
    key_of(k, out);
    return FERRY_OK;
}

/* The route at k into out (strings in x's buffers, or k's). */
static int route_parse(slice_scan *x, const cursor *k, row_at *out, ferry_err *err)
{
    static const char *const keys[] = {"shards", "split", "tenant"};
    flat_val v[3];
    uint64_t split;
    if (flat_parse(k->doc, keys, 3, v) && flat_str(&v[0], x->shards, sizeof x->shards) &&
        flat_num(&v[1], UINT32_MAX, &split) &&
        flat_str(&v[2], x->route_tenant, sizeof x->route_tenant)) {
        out->split = (uint32_t)split;
    } else {
        int rc = cursor_decode(k, FERRY_REC_ROUTE, &x->rec, err);
        if (rc)
            return rc;
        ferry_shard_set_str(&x->rec.u.route.shards, x->shards);
        memcpy(x->route_tenant, x->rec.u.route.tenant, sizeof x->route_tenant);
        out->split = x->rec.u.route.split;
    }
    out->tenant = x->route_tenant;
    out->text = x->shards;
    out->bytes = out->rows = 0;
    key_of(k, out);
    return FERRY_OK;
}

/* ---- a folder read by a thread of its own (SQLite) --------------------------------------------
 * Each of the join's two statements is stepped, and its documents taken apart, by a thread of
 * its own on a connection of its own, while the calling thread merges the two streams and runs
 * the callback: the three parts of the work run side by side. A thread hands over chunks of
 * parsed rows (strings copied into the chunk) through a ring of FEED_CHUNKS; the merge takes a
 * lock once per chunk. */

#define FEED_ROWS 512 /* a lock taken per 512 rows; the test catalog spans several rounds */
#define FEED_CHUNKS 4

typedef struct feed_item {
    uint32_t mid, mid_len, name, name_len, tenant, text; /* strings: offsets into the text */
    uint32_t split;
    uint64_t bytes, rows;
    int64_t version;
} feed_item;

typedef struct feed_chunk {
    feed_item items[FEED_ROWS];
    size_t n;
    char *text;
    size_t len, cap;
} feed_chunk;

typedef struct row_feed {
    cursor *k;     /* the thread's: on its first document when the thread starts */
    parse_fn parse;
    slice_scan px; /* the thread's buffers */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    feed_chunk chunks[FEED_CHUNKS];
    size_t head, tail; /* chunks [head, tail) are filled, in ring order */
    bool ended;        /* the thread has handed over its last chunk; rc and err say how */
    bool stop;         /* the merge gave up: the thread stops after its chunk */
    int rc;
    ferry_err err;
    feed_chunk *cur;   /* the merge's chunk and its position in it */
    size_t pos;
} row_feed;

static bool chunk_put(feed_chunk *ch, const char *s, size_t len, uint32_t *off)
{
    if (ch->len + len + 1 > ch->cap) {
        size_t nc = ch->cap ? ch->cap : 64 * 1024;
        while (nc < ch->len + len + 1)
            nc *= 2;
        char *q = realloc(ch->text, nc);
        if (!q)
            return false;
        ch->text = q;
        ch->cap = nc;
    }
    memcpy(ch->text + ch->len, s, len);
    ch->text[ch->len + len] = '\0';
    *off = (uint32_t)ch->len;
    ch->len += len + 1;
    return true;
}

static void *feed_thread(void *arg)
{
    row_feed *f = arg;
    int rc = FERRY_OK;
    ferry_err err = {0};
    for (bool last = false; !last;) {
        pthread_mutex_lock(&f->mu);
        while (f->tail - f->head == FEED_CHUNKS && !f->stop)
            pthread_cond_wait(&f->cv, &f->mu);
        bool stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop)
            break;
        feed_chunk *ch = &f->chunks[f->tail % FEED_CHUNKS];
        ch->n = 0;
        ch->len = 0;
        while (!rc && !f->k->done && ch->n < FEED_ROWS) {
            row_at a;
            feed_item *it = &ch->items[ch->n];
            rc = f->parse(&f->px, f->k, &a, &err);
            if (!rc && !(chunk_put(ch, a.mid, a.mid_len, &it->mid) &&
                         chunk_put(ch, a.name, a.name_len, &it->name) &&
                         chunk_put(ch, a.tenant, strlen(a.tenant), &it->tenant) &&
                         chunk_put(ch, a.text, strlen(a.text), &it->text)))
                rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory listing %s", f->k->dir);
            if (rc)
                break;
            it->mid_len = (uint32_t)a.mid_len;
            it->name_len = (uint32_t)a.name_len;
            it->split = a.split;
            it->bytes = a.bytes;
            it->rows = a.rows;
            it->version = a.version;
            ch->n++;
            rc = cursor_next(f->k, &err);
        }
        last = rc || f->k->done;
        pthread_mutex_lock(&f->mu);
        f->tail++;
        if (last) {
            f->ended = true;
            f->rc = rc;
            f->err = err;
        }
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
    }
    return NULL;
}

/* The next row into *a, or *done; the thread's error when it stopped on one. */
static int feed_next(row_feed *f, row_at *a, bool *done, ferry_err *err)
{
    if (f->cur && ++f->pos < f->cur->n)
        goto found;
    pthread_mutex_lock(&f->mu);
    if (f->cur) {
        f->head++;
        f->cur = NULL;
        pthread_cond_broadcast(&f->cv);
    }
    for (;;) {
        while (f->head == f->tail && !f->ended)
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->head == f->tail) {
            int rc = f->rc;
            if (rc)
                *err = f->err;
            *done = true;
            pthread_mutex_unlock(&f->mu);
            return rc;
        }
        if (f->chunks[f->head % FEED_CHUNKS].n)
            break;
        f->head++; /* the empty last chunk */
        pthread_cond_broadcast(&f->cv);
    }
    f->cur = &f->chunks[f->head % FEED_CHUNKS];
    f->pos = 0;
    pthread_mutex_unlock(&f->mu);
found:;
    const feed_item *it = &f->cur->items[f->pos];
    const char *t = f->cur->text;
    *a = (row_at){t + it->mid, t + it->name, t + it->tenant, t + it->text, it->mid_len,
                  it->name_len, it->split, it->bytes, it->rows, it->version};
    return FERRY_OK;
}

/* A feed of k's rows (k on its first document) by a thread started here; NULL when the thread
 * could not be started (the caller reads k itself then). Free with feed_end. */
static row_feed *feed_start(cursor *k, parse_fn parse)
{
    row_feed *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->k = k;
    f->parse = parse;
    if (pthread_mutex_init(&f->mu, NULL)) {
        free(f);
        return NULL;
    }
    if (pthread_cond_init(&f->cv, NULL) || pthread_create(&f->th, NULL, feed_thread, f)) {
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
        free(f);
        return NULL;
    }
    return f;
}

/* Stops the thread (after the chunk it is filling), waits for it and frees the feed. */
static void feed_end(row_feed *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    for (size_t i = 0; i < FEED_CHUNKS; i++)
        free(f->chunks[i].text);
    ferry_record_free(&f->px.rec);
    free(f);
}

/* One side of the join: a cursor read here (parsed into x) or by a feed. */
typedef struct side {
    cursor k;
    parse_fn parse;
    row_feed *feed;
    row_at at; /* the current row, unless done */
    bool done;
} side;

/* The side's next row (first: its first, the cursor not stepped yet). */
static int side_next(side *d, slice_scan *x, bool first, ferry_err *err)
{
    if (d->feed)
        return feed_next(d->feed, &d->at, &d->done, err);
    int rc = first ? FERRY_OK : cursor_next(&d->k, err);
    if (!rc && !(d->done = d->k.done))
        rc = d->parse(x, &d->k, &d->at, err);
    return rc;
}

/* The merge of the two sides (each on its first row) by key: fn gets each key once, with its
 * slice record, its route or both. numeric: split names compare as numbers (not SQLite). */
static int join_run(side *s, side *r, bool numeric, slice_scan *x, ferry_slice_row_fn fn,
                    void *arg, ferry_err *err)
{
    int rc = FERRY_OK;
    while (!rc && (!s->done || !r->done)) {
        int d = s->done   ? 1
                : r->done ? -1
                         : key_cmp(numeric, s->at.mid, s->at.mid_len, s->at.name, s->at.name_len,
                                   r->at.mid, r->at.mid_len, r->at.name, r->at.name_len);
        ferry_slice_row row = {.version = -1, .route_version = -1};
        if (d <= 0) {
            row.tenant = s->at.tenant;
            row.split = s->at.split;
            row.placement = s->at.text;
            row.bytes = s->at.bytes;
            row.rows = s->at.rows;
            row.version = s->at.version;
        } else {
            row.tenant = r->at.tenant;
            row.split = r->at.split;
        }
        if (d >= 0) {
            row.shards = r->at.text;
            row.route_version = r->at.version;
        }
        rc = fn(&row, arg, err);
        if (!rc && d <= 0)
            rc = side_next(s, x, false, err);
        if (!rc && d >= 0)
            rc = side_next(r, x, false, err);
    }
    return rc;
}

/* Holds the catalog's writers back (a write transaction on a connection of its own, taken and
 * given back without writing: release with writers_let_go) while the scan's two connections
 * start their read transactions, so that both read the same state of the catalog. NULL when it
 * cannot be had at once (another writer's transaction, a file this process may only read):
 * then both statements run on one connection in the calling thread, as a reader never waits
 * for a writer. */
static sqlite3 *writers_hold(ferry_catalog *c)
{
    sqlite3 *shared = cat_sqlite_handle(c), *db = NULL;
    const char *file = shared ? sqlite3_db_filename(shared, "main") : NULL;
    if (!file || !*file ||
        sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 20);
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static void writers_let_go(sqlite3 *db)
{
    if (!db)
        return;
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
}

int ferry_catalog_scan_slices(ferry_catalog *c, ferry_slice_row_fn fn, void *arg, ferry_err *err)
{
    bool sqlite = cat_sqlite_handle(c) != NULL;
    sqlite3 *db = scan_db(c);
    /* SQLite: the tenants' slice packs when none is marked changed (slice_pack.c) */
    if (db) {
        bool used;
        int prc = cat_slice_pack_scan(db, fn, arg, &used, err);
        if (used || prc) {
            sqlite3_close(db);
            return prc;
        }
    }
    /* another backend's compact copy of the rows, when it keeps one (ZooKeeper's packs) */
    if (!db && c->ops->scan_rows) {
        bool used;
        int prc = c->ops->scan_rows(c, NULL, fn, arg, &used, err);
        if (used || prc)
            return prc;
    }
    side s = {.parse = slice_parse}, r = {.parse = route_parse};
    slice_scan *x = calloc(1, sizeof *x);
    int rc = x ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* SQLite: the two statements on connections of their own, each read by a thread, when both
     * connections can start reading the same state (writers held back meanwhile); else both on
     * one connection, stepped before either ends, so they share one read transaction. Either
     * way the join is of one state of the catalog. */
    sqlite3 *hold = db ? writers_hold(c) : NULL;
    sqlite3 *rdb = hold ? scan_db(c) : NULL;
    if (!rdb)
        rdb = db;
    if (!rc)
        rc = cursor_open(c, db, cat_kind_dir(FERRY_REC_SLICE), 2, !sqlite, true, &s.k, err);
    if (!rc)
        rc = cursor_open(c, rdb, cat_kind_dir(FERRY_REC_ROUTE), 2, !sqlite, true, &r.k, err);
    if (!rc)
        rc = cursor_next(&s.k, err);
    if (!rc)
        rc = cursor_next(&r.k, err);
    writers_let_go(hold);
    if (!rc && rdb != db) {
        if (!s.k.done)
            s.feed = feed_start(&s.k, slice_parse);
        if (!r.k.done)
            r.feed = feed_start(&r.k, route_parse);
    }
    if (!rc)
        rc = side_next(&s, x, true, err);
    if (!rc)
        rc = side_next(&r, x, true, err);
    if (!rc)
        rc = join_run(&s, &r, !sqlite, x, fn, arg, err);
    feed_end(s.feed);
    feed_end(r.feed);
    cursor_close(&r.k); /* before its connection */
    if (rdb != db)
        sqlite3_close(rdb);
    scan_end(&s.k, db, x ? &x->rec : NULL, x);
    return rc;
}

int cat_join_flats(ferry_catalog *c, cat_flat *slices, cat_flat *routes, ferry_slice_row_fn fn,
                   void *arg, ferry_err *err)
{
    side s = {.parse = slice_parse}, r = {.parse = route_parse};
    slice_scan *x = calloc(1, sizeof *x);
    int rc = x ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* cursors over the caller's spans, as a flat scan's (cursor_open without the read): handed
     * back before the cursors close, which would free them */
    cursor *k[2] = {&s.k, &r.k};
    cat_flat *f[2] = {slices, routes};
    for (int i = 0; i < 2; i++) {
        k[i]->c = c;
        k[i]->dir = cat_kind_dir(i ? FERRY_REC_ROUTE : FERRY_REC_SLICE);
        k[i]->depth = 2;
        k[i]->numeric_name = true;
        k[i]->flat = *f[i];
    }
    if (!rc)
        rc = cursor_next(&s.k, err);
    if (!rc)
        rc = cursor_next(&r.k, err);
    if (!rc)
        rc = side_next(&s, x, true, err);
    if (!rc)
        rc = side_next(&r, x, true, err);
    if (!rc)
        rc = join_run(&s, &r, true, x, fn, arg, err);
    for (int i = 0; i < 2; i++) {
        *f[i] = k[i]->flat;
        memset(&k[i]->flat, 0, sizeof k[i]->flat);
    }
    cursor_close(&r.k);
    scan_end(&s.k, NULL, x ? &x->rec : NULL, x);
    return rc;
}

/* What cat_scan_tenant_slices keeps between tenants: its two statements and its buffers. */
struct cat_tenant_scan {
    ferry_catalog *c;
    sqlite3_stmt *st[2]; /* slices, routes: one tenant's folder */
    slice_scan x;
};

int cat_tenant_scan_open(ferry_catalog *c, cat_tenant_scan **out, ferry_err *err)
{
    sqlite3 *db = cat_sqlite_handle(c);
    assert(db);
    cat_tenant_scan *ts = calloc(1, sizeof *ts);
    if (!ts)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    ts->c = c;
    ferry_record_init(&ts->x.rec, FERRY_REC_SLICE);
    for (int i = 0; i < 2; i++)
        if (sqlite3_prepare_v2(db, FOLDER_SQL, -1, &ts->st[i], NULL) != SQLITE_OK) {
            int rc = ferry_err_set(err, FERRY_EIO, "catalog: listing a tenant's slices: %s",
                                   sqlite3_errmsg(db));
            cat_tenant_scan_close(ts);
            return rc;
        }
    *out = ts;
    return FERRY_OK;
}

void cat_tenant_scan_close(cat_tenant_scan *ts)
{
    if (!ts)
        return;
    for (int i = 0; i < 2; i++)
        sqlite3_finalize(ts->st[i]);
    ferry_record_free(&ts->x.rec);
    free(ts);
}

/* A cursor over one tenant's folder dir (depth 1) on the scan's statement st. */
static void cursor_borrow(ferry_catalog *c, sqlite3_stmt *st, const char *dir, cursor *k)
{
    memset(k, 0, sizeof *k);
    k->c = c;
    k->db = cat_sqlite_handle(c);
    k->dir = dir;
    k->depth = 1;
    k->st = st;
    k->borrowed = true;
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, dir, -1, SQLITE_STATIC);
}

int cat_scan_tenant_slices(cat_tenant_scan *ts, const char *tenant, ferry_slice_row_fn fn,
                           void *arg, ferry_err *err)
{
    char sdir[FERRY_NAME_MAX + 16], rdir[FERRY_NAME_MAX + 16];
    if ((size_t)snprintf(sdir, sizeof sdir, "%s/%s", cat_kind_dir(FERRY_REC_SLICE), tenant) >=
            sizeof sdir ||
        (size_t)snprintf(rdir, sizeof rdir, "%s/%s", cat_kind_dir(FERRY_REC_ROUTE), tenant) >=
            sizeof rdir)
        return ferry_err_set(err, FERRY_EINVAL, "tenant name too long: %.64s...", tenant);
    side s = {.parse = slice_parse}, r = {.parse = route_parse};
    /* the catalog's own connection: inside a commit, the scan sees the commit's writes */
    cursor_borrow(ts->c, ts->st[0], sdir, &s.k);
    cursor_borrow(ts->c, ts->st[1], rdir, &r.k);
    int rc = cursor_next(&s.k, err);
    if (!rc)
        rc = cursor_next(&r.k, err);
    if (!rc)
        rc = side_next(&s, &ts->x, true, err);
    if (!rc)
        rc = side_next(&r, &ts->x, true, err);
    if (!rc)
        rc = join_run(&s, &r, false, &ts->x, fn, arg, err);
    cursor_close(&s.k);
    cursor_close(&r.k);
    return rc;
}

/* ---- tenants ------------------------------------------------------------------------------------ */

int ferry_catalog_scan_tenants(ferry_catalog *c, ferry_tenant_row_fn fn, void *arg,
                               ferry_err *err)
{
    static const char *const keys[] = {"name", "splits"}, *const keys_rf[] = {"name", "rf",
                                                                              "splits"};
    cursor k;
    sqlite3 *db = scan_db(c);
    ferry_record *rec = malloc(sizeof *rec);
    char name[FERRY_NAME_MAX];
    int rc = rec ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memset(&k, 0, sizeof k);
    if (rec)
        ferry_record_init(rec, FERRY_REC_TENANT);
    if (!rc)
        rc = cursor_open(c, db, cat_kind_dir(FERRY_REC_TENANT), 1, false, true, &k, err);
    if (!rc)
        rc = cursor_next(&k, err);
    while (!rc && !k.done) {
        ferry_tenant_row row = {.name = name, .version = k.version};
        flat_val v[3];
        uint64_t splits, rf = 0;
        if ((flat_parse(k.doc, keys, 2, v) && flat_str(&v[0], name, sizeof name) &&
             flat_num(&v[1], UINT32_MAX, &splits)) ||
            (flat_parse(k.doc, keys_rf, 3, v) && flat_str(&v[0], name, sizeof name) &&
             flat_num(&v[1], UINT32_MAX, &rf) && flat_num(&v[2], UINT32_MAX, &splits))) {
            row.splits = (uint32_t)splits;
            row.rf = (uint32_t)rf;
        } else {
            if ((rc = cursor_decode(&k, FERRY_REC_TENANT, rec, err)))
                break;
            memcpy(name, rec->u.tenant.name, sizeof name);
            row.splits = rec->u.tenant.splits;
            row.rf = rec->u.tenant.rf;
        }
        rc = fn(&row, arg, err);
        if (!rc)
            rc = cursor_next(&k, err);
    }
    scan_end(&k, db, rec, rec);
    return rc;
}

int ferry_catalog_scan_tenants_slices(ferry_catalog *c, ferry_tenant_row_fn tenant_fn,
                                      ferry_slice_row_fn slice_fn, void *arg, ferry_err *err)
{
    /* ZooKeeper's packs carry both: one read of one folder */
    if (!cat_sqlite_handle(c) && c->ops->scan_rows) {
        bool used;
        int rc = c->ops->scan_rows(c, tenant_fn, slice_fn, arg, &used, err);
        if (used || rc)
            return rc;
    }
    int rc = ferry_catalog_scan_tenants(c, tenant_fn, arg, err);
    return rc ? rc : ferry_catalog_scan_slices(c, slice_fn, arg, err);
}

/* ---- partitions --------------------------------------------------------------------------------- */

int ferry_catalog_scan_partitions(ferry_catalog *c, ferry_partition_row_fn fn, void *arg,
                                  ferry_err *err)
{
    static const char *const keys[] = {"bytes", "day",   "partition_id", "rows", "server",
                                       "split", "table", "tenant",       "tier"};
    typedef struct part_strs {
        char server[FERRY_NAME_MAX], table[FERRY_NAME_MAX], partition_id[FERRY_NAME_MAX],
            tenant[FERRY_NAME_MAX], tier[8];
    } part_strs;
    cursor k;
    sqlite3 *db = scan_db(c);
    ferry_record *rec = malloc(sizeof *rec);
    part_strs *ps = malloc(sizeof *ps);
    int rc = rec && ps ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memset(&k, 0, sizeof k);
    if (rec)
        ferry_record_init(rec, FERRY_REC_PARTITION);
    if (!rc)
        rc = cursor_open(c, db, cat_kind_dir(FERRY_REC_PARTITION), 3, false, false, &k, err);
    if (!rc)
        rc = cursor_next(&k, err);
    while (!rc && !k.done) {
        ferry_partition_row row = {.server = ps->server, .table = ps->table,
                                   .partition_id = ps->partition_id, .tenant = ps->tenant,
                                   .version = k.version};
        flat_val v[9];
        uint64_t day, split;
        if (flat_parse(k.doc, keys, 9, v) && flat_num(&v[0], INT64_MAX, &row.bytes) &&
            flat_num(&v[1], UINT32_MAX, &day) &&
            flat_str(&v[2], ps->partition_id, sizeof ps->partition_id) &&
            flat_num(&v[3], INT64_MAX, &row.rows) &&
            flat_str(&v[4], ps->server, sizeof ps->server) &&
            flat_num(&v[5], UINT32_MAX, &split) && flat_str(&v[6], ps->table, sizeof ps->table) &&
            flat_str(&v[7], ps->tenant, sizeof ps->tenant) &&
            flat_str(&v[8], ps->tier, sizeof ps->tier) &&
            (!strcmp(ps->tier, ferry_tier_name(FERRY_TIER_HOT)) ||
             !strcmp(ps->tier, ferry_tier_name(FERRY_TIER_COLD)))) {
            row.day = (uint32_t)day;
            row.split = (uint32_t)split;
            row.tier = strcmp(ps->tier, ferry_tier_name(FERRY_TIER_COLD)) ? FERRY_TIER_HOT
                                                                            : FERRY_TIER_COLD;
        } else {
            if ((rc = cursor_decode(&k, FERRY_REC_PARTITION, rec, err)))
                break;
            const ferry_partition *p = &rec->u.partition;
            memcpy(ps->server, p->server, sizeof ps->server);
            memcpy(ps->table, p->table, sizeof ps->table);
            memcpy(ps->partition_id, p->partition_id, sizeof ps->partition_id);
            memcpy(ps->tenant, p->tenant, sizeof ps->tenant);
            row.day = p->day;
            row.split = p->split;
            row.tier = p->tier;
            row.bytes = p->bytes;
            row.rows = p->rows;
        }
        rc = fn(&row, arg, err);
        if (!rc)
            rc = cursor_next(&k, err);
    }
    scan_end(&k, db, rec, rec);
    free(ps);
    return rc;
}

/* ---- partition counts ----------------------------------------------------------------------------- */

typedef struct count_set {
    ferry_partition_count *v; /* by tier, then day */
    size_t n, cap;
} count_set;

static int count_cmp(enum ferry_tier ta, uint32_t da, enum ferry_tier tb, uint32_t db)
{
    if (ta != tb)
        return ta < tb ? -1 : 1;
    return (da > db) - (da < db);
}

/* Adds n to the count of (tier, day), inserting it in order when new. */
static int count_add(count_set *s, enum ferry_tier tier, uint32_t day, uint64_t n,
                     ferry_err *err)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = count_cmp(s->v[mid].tier, s->v[mid].day, tier, day);
        if (d == 0) {
            s->v[mid].n += n;
            return FERRY_OK;
        }
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        ferry_partition_count *q = realloc(s->v, nc * sizeof *q);
        if (!q)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        s->v = q;
        s->cap = nc;
    }
    memmove(&s->v[lo + 1], &s->v[lo], (s->n - lo) * sizeof *s->v);
    s->v[lo] = (ferry_partition_count){tier, day, n};
    s->n++;
    return FERRY_OK;
}

static int count_row(const ferry_partition_row *row, void *arg, ferry_err *err)
{
    return count_add(arg, row->tier, row->day, 1, err);
}

/* SQLite: the table the triggers of the schema keep (lib/catalog/sqlite.c). */
static int counts_sqlite(sqlite3 *db, count_set *s, ferry_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = FERRY_OK, step;
    if (sqlite3_prepare_v2(db, "SELECT tier, day, n FROM partition_counts WHERE n <> 0", -1, &st,
                           NULL) != SQLITE_OK)
        return ferry_err_set(err, FERRY_EIO, "catalog: reading the partition counts: %s",
                             sqlite3_errmsg(db));
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *tier = (const char *)sqlite3_column_text(st, 0);
        sqlite3_int64 day = sqlite3_column_int64(st, 1), n = sqlite3_column_int64(st, 2);
        enum ferry_tier t = FERRY_TIER_HOT;
        if (tier && !strcmp(tier, ferry_tier_name(FERRY_TIER_COLD)))
            t = FERRY_TIER_COLD;
        else if (!tier || strcmp(tier, ferry_tier_name(FERRY_TIER_HOT)))
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "catalog: %lld partition record(s) with tier '%s' (expected hot "
                               "or cold)", (long long)n, tier ? tier : "");
        else if (day < 0 || day > UINT32_MAX || n < 0)
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "catalog: %lld partition record(s) of day %lld (or a count below "
                               "zero)", (long long)n, (long long)day);
        if (!rc)
            rc = count_add(s, t, (uint32_t)day, (uint64_t)n, err);
    }
    if (!rc && step != SQLITE_DONE)
        rc = ferry_err_set(err, sqlite3_errcode(db) == SQLITE_BUSY ? FERRY_ETIMEOUT : FERRY_EIO,
                           "catalog: reading the partition counts: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc;
}

int ferry_catalog_partition_counts(ferry_catalog *c, ferry_partition_count **out, size_t *n,
                                   ferry_err *err)
{
    count_set s = {0};
    sqlite3 *db = cat_sqlite_handle(c);
    /* SQLite without the table: a catalog an older ferry laid out, which this process could
     * not add the counts to when it opened it (cat_sqlite_open): count by scanning */
    bool table = false;
    sqlite3_stmt *st = NULL;
    if (db && sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND"
                                     " name = 'partition_counts'", -1, &st, NULL) == SQLITE_OK)
        table = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    int rc = table ? counts_sqlite(db, &s, err)
                   : ferry_catalog_scan_partitions(c, count_row, &s, err);
    if (!rc && !s.v && !(s.v = malloc(sizeof *s.v)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc) {
        free(s.v);
        *out = NULL;
        *n = 0;
        return rc;
    }
    *out = s.v;
    *n = s.n;
    return FERRY_OK;
}
