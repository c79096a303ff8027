/* The index of unfinished moves: moves_active/ID exists exactly while the move record moves/ID
 * is neither DONE nor FAILED (docs/catalog.md). Readers that only care about moves in flight (the
 * router's routing reload) list the index and read those records, instead of every move the
 * cluster ever made. The index is generic documents at paths, like everything the backends
 * store, so both backends keep it the same way: every commit that creates, updates or deletes a
 * move record also creates or deletes its entry, in the same atomic commit. */
#include "catalog/catalog_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INDEX_DOC "{}"

/* "moves/ID" -> "moves_active/ID"; false for any other path. */
static bool index_path(const char *record_path, char *out, size_t size)
{
    const char *dir = cat_kind_dir(FERRY_REC_MOVE);
    size_t n = strlen(dir);
    if (strncmp(record_path, dir, n) || record_path[n] != '/')
        return false;
    return (size_t)snprintf(out, size, "%s/%s", CAT_MOVE_INDEX_DIR, record_path + n + 1) < size;
}

/* Whether a document is stored at path. */
static int exists(ferry_catalog *c, const char *path, bool *out, ferry_err *err)
{
    cat_item it = {0};
    int rc = c->ops->get(c, path, &it, err);
    cat_item_free(&it);
    *out = rc == FERRY_OK;
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    return rc;
}

/* Appends an index operation: CREATE with the index's document, else none. */
static int push_op(cat_op **ops, size_t *n, size_t *cap, enum cat_op_type type, const char *path,
                   ferry_err *err)
{
    return cat_op_push(ops, n, cap, type, path, type == CAT_CREATE ? INDEX_DOC : NULL, err);
}

int cat_move_index_ops(ferry_catalog *c, const cat_op *ops, size_t n, cat_op **all,
                       size_t *n_all, ferry_err *err)
{
    *all = NULL;
    *n_all = n;
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += ops[i].move_index == CAT_INDEX_WANT || ops[i].move_index == CAT_INDEX_DROP;
    if (!want)
        return FERRY_OK;
    size_t cap = n + want, m = n;
    cat_op *out = calloc(cap, sizeof *out);
    if (!out)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memcpy(out, ops, n * sizeof *out);
    /* whether an entry exists: one read each for a move or two (the usual batch), else one
     * listing of the whole index (two round trips on ZooKeeper, whatever the batch's size) */
    cat_items entries = {0};
    bool listed = want > 2;
    int rc = listed ? c->ops->scan(c, CAT_MOVE_INDEX_DIR, 1, &entries, err) : FERRY_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        char ipath[1024];
        if ((ops[i].move_index != CAT_INDEX_WANT && ops[i].move_index != CAT_INDEX_DROP) ||
            !index_path(ops[i].path, ipath, sizeof ipath))
            continue;
        /* a later op on the same move decides; the entry follows the batch's last word */
        bool later = false;
        for (size_t j = i + 1; j < n && !later; j++)
            later = (ops[j].move_index == CAT_INDEX_WANT || ops[j].move_index == CAT_INDEX_DROP) &&
                    !strcmp(ops[j].path, ops[i].path);
        if (later)
            continue;
        bool have = false;
        if (listed)
            for (size_t k = 0; k < entries.n && !have; k++)
                have = !strcmp(entries.v[k].path, ipath);
        else
            rc = exists(c, ipath, &have, err);
        if (!rc && ops[i].move_index == CAT_INDEX_WANT && !have)
            rc = push_op(&out, &m, &cap, CAT_CREATE, ipath, err);
        else if (!rc && ops[i].move_index == CAT_INDEX_DROP && have)
            rc = push_op(&out, &m, &cap, CAT_DELETE, ipath, err);
    }
    cat_items_free(&entries);
    if (rc || m == n) {
        cat_move_index_ops_free(out, n, m);
        return rc;
    }
    *all = out;
    *n_all = m;
    return FERRY_OK;
}

void cat_move_index_ops_free(cat_op *all, size_t n, size_t n_all)
{
    if (!all)
        return;
    for (size_t i = n; i < n_all; i++) {
        free(all[i].path);
        free(all[i].doc);
    }
    free(all);
}

static int item_cmp(const void *x, const void *y)
{
    return cat_path_cmp(((const cat_item *)x)->path, ((const cat_item *)y)->path);
}

/* Makes the index agree with the move records and writes the marker, in one commit. Every entry
 * it adds comes with a check of its record's version, so a move that changed meanwhile fails the
 * commit (FERRY_ECONFLICT) instead of leaving a wrong entry; so does a second builder (the
 * marker exists). */
static int index_build(ferry_catalog *c, ferry_err *err)
{
    ferry_record_list moves = {0};
    cat_items entries = {0};
    cat_op *ops = NULL;
    size_t n = 0, cap = 0;
    int64_t *versions = NULL;
    int rc = ferry_catalog_list(c, FERRY_REC_MOVE, NULL, 0, &moves, err);
    if (!rc)
        rc = c->ops->scan(c, CAT_MOVE_INDEX_DIR, 1, &entries, err);
    for (size_t i = 0; !rc && i < moves.n; i++) {
        const ferry_move *m = &moves.items[i].u.move;
        char rpath[1024], ipath[1024];
        snprintf(rpath, sizeof rpath, "%s/%s", cat_kind_dir(FERRY_REC_MOVE), m->id);
        if (ferry_move_finished(m->state) || !index_path(rpath, ipath, sizeof ipath))
            continue;
        bool have = false;
        for (size_t k = 0; k < entries.n && !have; k++)
            have = !strcmp(entries.v[k].path, ipath);
        if (have)
            continue;
        rc = push_op(&ops, &n, &cap, CAT_CHECK, rpath, err);
        if (!rc) {
            ops[n - 1].version = moves.items[i].version;
            rc = push_op(&ops, &n, &cap, CAT_CREATE, ipath, err);
        }
    }
    for (size_t k = 0; !rc && k < entries.n; k++) {
        const char *id = entries.v[k].path + strlen(CAT_MOVE_INDEX_DIR) + 1;
        bool unfinished = false;
        for (size_t i = 0; i < moves.n && !unfinished; i++)
            unfinished = !strcmp(moves.items[i].u.move.id, id) &&
                         !ferry_move_finished(moves.items[i].u.move.state);
        if (!unfinished)
            rc = push_op(&ops, &n, &cap, CAT_DELETE, entries.v[k].path, err);
    }
    if (!rc)
        rc = push_op(&ops, &n, &cap, CAT_CREATE, CAT_MOVE_INDEX_MARKER, err);
    if (!rc) {
        char doc[64];
        snprintf(doc, sizeof doc, "{\"built\":%lld}", (long long)time(NULL));
        free(ops[n - 1].doc);
        ops[n - 1].doc = strdup(doc);
        ops[n - 1].doc_len = strlen(doc);
        versions = calloc(n, sizeof *versions);
        if (!ops[n - 1].doc || !versions)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    if (!rc) {
        cat_commit_req req = {ops, n, CAT_ROUTING_KEEP, 0, versions, NULL};
        ferry_commit_info info = {0};
        rc = c->ops->commit(c, &req, &info, err);
    }
    free(versions);
    cat_move_index_ops_free(ops, 0, n);
    cat_items_free(&entries);
    ferry_record_list_free(&moves);
    return rc;
}

/* Every move record with the finished ones left out (a catalog whose index is not built). */
static int list_unfinished_by_scan(ferry_catalog *c, ferry_record_list *out, ferry_err *err)
{
    int rc = ferry_catalog_list(c, FERRY_REC_MOVE, NULL, 0, out, err);
    size_t kept = 0;
    for (size_t i = 0; !rc && i < out->n; i++) {
        if (ferry_move_finished(out->items[i].u.move.state))
            ferry_record_free(&out->items[i]);
        else
            out->items[kept++] = out->items[i];
    }
    out->n = rc ? out->n : kept;
    return rc;
}

int ferry_catalog_list_unfinished_moves(ferry_catalog *c, ferry_record_list *out,
                                        ferry_err *err)
{
    out->items = NULL;
    out->n = 0;
    bool built = false;
    int rc = exists(c, CAT_MOVE_INDEX_MARKER, &built, err);
    if (rc)
        return rc;
    if (!built) {
        if (index_build(c, err)) {
            /* a move changed, or another process built it, meanwhile (FERRY_ECONFLICT), or this
             * process may not write: this once, read every record; the next call finds the
             * marker or builds again */
            ferry_err_clear(err);
            return list_unfinished_by_scan(c, out, err);
        }
    }
    cat_items entries = {0};
    rc = c->ops->scan(c, CAT_MOVE_INDEX_DIR, 1, &entries, err);
    if (!rc && entries.n > 1)
        qsort(entries.v, entries.n, sizeof *entries.v, item_cmp);
    if (!rc && entries.n) {
        out->items = calloc(entries.n, sizeof *out->items);
        if (!out->items)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t k = 0; !rc && k < entries.n; k++) {
        ferry_record *r = &out->items[out->n];
        ferry_record_init(r, FERRY_REC_MOVE);
        snprintf(r->u.move.id, sizeof r->u.move.id, "%s",
                 entries.v[k].path + strlen(CAT_MOVE_INDEX_DIR) + 1);
        rc = ferry_catalog_get(c, r, err);
        if (rc == FERRY_ENOTFOUND) { /* deleted since the index was read */
            ferry_err_clear(err);
            rc = FERRY_OK;
            continue;
        }
        if (!rc && ferry_move_finished(r->u.move.state)) { /* finished since */
            ferry_record_free(r);
            continue;
        }
        if (!rc)
            out->n++;
    }
    cat_items_free(&entries);
    if (rc)
        ferry_record_list_free(out);
    return rc;
}
