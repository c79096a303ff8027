/* The catalog's ZooKeeper backend: atomic batches larger than one multi (docs/catalog.md).
 * The batch takes the write gate, writes its journal (ROOT/batches/ID, an ephemeral owner node
 * and one undo record per chunk, each written in its chunk's own multi), applies its chunks, and
 * its last multi marks it committed and opens the gate. A batch whose owner died before that is
 * rolled back from its undo records by whoever meets the closed gate next, or by
 * ferry_catalog_recover (zk_recover). */
#include "catalog/zk_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/strutil.h"

static int batch_rel(char *out, size_t size, const char *id, const char *child)
{
    return snprintf(out, size, child ? "batches/%s/%s" : "batches/%s", id, child);
}

/* Reads the journal's child of batch id into *data (malloc'ed, the caller frees; NULL unless
 * ZOK), its relative path into rel; the ZooKeeper code. */
static int read_child(cat_backend *be, const char *id, const char *child,
                      char rel[PATH_MAX_LEN], char **data, struct Stat *st)
{
    char abs[PATH_MAX_LEN];
    batch_rel(rel, PATH_MAX_LEN, id, child);
    zk_abspath(be, rel, abs, sizeof abs);
    *data = NULL;
    return zget(be, abs, false, data, NULL, st);
}

/* Lists the children of batch id's journal into kids (the caller deallocates), its relative
 * path into rel; the ZooKeeper code. */
static int list_journal(cat_backend *be, const char *id, char rel[PATH_MAX_LEN],
                        struct String_vector *kids)
{
    char abs[PATH_MAX_LEN];
    batch_rel(rel, PATH_MAX_LEN, id, NULL);
    zk_abspath(be, rel, abs, sizeof abs);
    *kids = (struct String_vector){0, NULL};
    return zoo_get_children(be->zh, abs, 0, kids);
}

/* Removes a batch's journal: its children, then itself (several multis if needed). */
static void drop_journal(ferry_catalog *c, const char *id, size_t *rt)
{
    cat_backend *be = c->be;
    char rel[PATH_MAX_LEN];
    struct String_vector kids;
    if (list_journal(be, id, rel, &kids) != ZOK)
        return;
    zmulti m;
    if (zmulti_init(&m, (int)c->chunk_ops + 1) == FERRY_OK) {
        for (int i = 0; i <= kids.count;) {
            m.n = 0;
            while (i < kids.count && m.n < m.cap - 1) {
                char crel[PATH_MAX_LEN];
                batch_rel(crel, sizeof crel, id, kids.data[i++]);
                zm_delete(&m, be, crel, -1, -1);
            }
            if (i == kids.count) {
                zm_delete(&m, be, rel, -1, -1);
                i++;
            }
            zoo_multi(be->zh, m.n, m.ops, m.res);
            if (rt)
                (*rt)++;
        }
    }
    zmulti_free(&m);
    deallocate_String_vector(&kids);
}

static int cmp_asc(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_desc(const void *a, const void *b)
{
    return strcmp(*(const char *const *)b, *(const char *const *)a);
}

/* ---- the tenants whose slice packs a rollback builds again ----
 * A rollback restores every record and slice pack the batch changed to its document from
 * before, but a tenant record restored by setData gets a new znode version (its record version),
 * while its bucket-0 pack, restored too, names the version from before (zk_pack.c). So before
 * the first undo is applied the batch's journal gets the names of the tenants its undo records
 * touch (children r-NNNNNN, written in one multi: the first process to write them saw every
 * undo record, since none is applied before they exist), and after the last one their packs are
 * built again from the records, the gate still held. A rollback cut short and run again by
 * ferry_catalog_recover finds the names there. */
#define REPACK_BYTES (256 * 1024)

/* The tenant names (malloc'ed, one per line) the batch's undo records (children kids) touch. */
static int repack_names(ferry_catalog *c, const char *id, const struct String_vector *kids,
                        ferry_buf *names, ferry_err *err)
{
    cat_backend *be = c->be;
    for (int i = 0; i < kids->count; i++) {
        if (strncmp(kids->data[i], "u-", 2))
            continue;
        char urel[PATH_MAX_LEN], *data;
        struct Stat st;
        int zrc = read_child(be, id, kids->data[i], urel, &data, &st);
        if (zrc == ZNONODE)
            continue; /* applied by another process: it wrote the names first */
        if (zrc != ZOK)
            return zfail(be, zrc, "reading", urel, err);
        json_t *undo = json_loads(data, 0, NULL);
        free(data);
        for (size_t k = 0; json_is_array(undo) && k < json_array_size(undo); k++) {
            const char *p = json_string_value(json_array_get(json_array_get(undo, k), 1));
            if (p && !strncmp(p, "tenants/", 8) && cat_name_ok(p + 8) &&
                (ferry_buf_append(names, p + 8, strlen(p + 8)) ||
                 ferry_buf_append(names, "\n", 1))) {
                json_decref(undo);
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            }
        }
        json_decref(undo);
    }
    return FERRY_OK;
}

/* Writes the names as r-* children of the batch's journal, all in one multi (ZNODEEXISTS: another
 * process did; nothing to do). */
static int repack_note(ferry_catalog *c, const char *id, const ferry_buf *names, ferry_err *err)
{
    cat_backend *be = c->be;
    size_t parts = names->len / REPACK_BYTES + 1;
    zmulti m = {0};
    if (zmulti_init(&m, (int)parts))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t at = 0;
    for (size_t i = 0; i < parts; i++) {
        size_t end = at + REPACK_BYTES < names->len ? at + REPACK_BYTES : names->len;
        while (end < names->len && end > at && names->data[end - 1] != '\n')
            end--; /* whole names in each part */
        char crel[64], rel[PATH_MAX_LEN];
        snprintf(crel, sizeof crel, "r-%06zu", i);
        batch_rel(rel, sizeof rel, id, crel);
        zm_create(&m, be, rel, names->data ? names->data + at : "", (int)(end - at), 0, -1);
        at = end;
    }
    int zrc = zoo_multi(be->zh, m.n, m.ops, m.res);
    int rc = zrc == ZOK || zrc == ZNODEEXISTS ? FERRY_OK
                                               : zfail(be, zrc, "writing the repack list of", id,
                                                       err);
    zmulti_free(&m);
    return rc;
}

/* The names the r-* children hold, then their tenants' bucket-0 packs built again. */
static int repack(ferry_catalog *c, const char *id, ferry_err *err)
{
    cat_backend *be = c->be;
    char rel[PATH_MAX_LEN];
    struct String_vector kids;
    int zrc = list_journal(be, id, rel, &kids);
    if (zrc != ZOK)
        return zfail(be, zrc, "listing", rel, err);
    ferry_buf all = {0};
    char **names = NULL;
    size_t n = 0;
    int rc = FERRY_OK;
    for (int i = 0; i < kids.count && !rc; i++) {
        if (strncmp(kids.data[i], "r-", 2))
            continue;
        char crel[PATH_MAX_LEN], *data;
        struct Stat st;
        zrc = read_child(be, id, kids.data[i], crel, &data, &st);
        if (zrc != ZOK)
            rc = zfail(be, zrc, "reading", crel, err);
        else if (ferry_buf_append(&all, data, strlen(data)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        free(data);
    }
    for (size_t i = 0; !rc && i < all.len; i++)
        n += all.data[i] == '\n';
    if (!rc && n && !(names = malloc(n * sizeof *names)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc && n) {
        size_t k = 0;
        for (char *s = all.data, *e; k < n && (e = memchr(s, '\n', all.len - (size_t)(s - all.data)));
             s = e + 1) {
            *e = '\0';
            names[k++] = s;
        }
        n = k;
        /* each tenant once: a multi may not create one pack twice */
        qsort(names, n, sizeof *names, cmp_asc);
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (!w || strcmp(names[w - 1], names[i]))
                names[w++] = names[i];
        rc = zp_repack(c, names, w, err);
    }
    free(names);
    ferry_buf_free(&all);
    deallocate_String_vector(&kids);
    return rc;
}

/* Undoes what batch id applied (its u-* records, newest first), builds the slice packs of the
 * tenants they touched again, then opens the gate. Safe to run by several processes at once:
 * each undo multi also deletes its undo record, so it applies once, and a pack built twice is the
 * same. */
int zk_rollback_batch(ferry_catalog *c, const char *id, ferry_err *err)
{
    cat_backend *be = c->be;
    char rel[PATH_MAX_LEN];
    struct String_vector kids;
    int zrc = list_journal(be, id, rel, &kids);
    int rc = FERRY_OK;
    zmulti m = {0};
    if (zrc != ZOK && zrc != ZNONODE)
        return zfail(be, zrc, "listing", rel, err);
    bool journal = zrc == ZOK; /* (zrc is reused by the undo loop below) */
    if (kids.count > 1)
        qsort(kids.data, (size_t)kids.count, sizeof *kids.data, cmp_desc);
    bool noted = false;
    for (int i = 0; i < kids.count; i++)
        noted |= !strncmp(kids.data[i], "r-", 2);
    if (journal && !noted) {
        ferry_buf names = {0};
        rc = repack_names(c, id, &kids, &names, err);
        if (!rc)
            rc = repack_note(c, id, &names, err);
        ferry_buf_free(&names);
        if (rc)
            goto out;
    }
    if (zmulti_init(&m, (int)c->chunk_ops + 2)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < kids.count && !rc; i++) {
        if (strncmp(kids.data[i], "u-", 2))
            continue;
        char urel[PATH_MAX_LEN], *data;
        struct Stat st;
        zrc = read_child(be, id, kids.data[i], urel, &data, &st);
        if (zrc == ZNONODE)
            continue; /* another process undid this chunk */
        if (zrc != ZOK) {
            rc = zfail(be, zrc, "reading", urel, err);
            break;
        }
        json_t *undo = json_loads(data, 0, NULL);
        free(data);
        if (!json_is_array(undo) || json_array_size(undo) + 1 > (size_t)m.cap) {
            json_decref(undo);
            rc = ferry_err_set(err, FERRY_EREMOTE, "batch journal %s is damaged", urel);
            break;
        }
        m.n = 0;
        for (size_t k = json_array_size(undo); k-- > 0;) {
            json_t *u = json_array_get(undo, k);
            const char *kind = json_string_value(json_array_get(u, 0));
            const char *p = json_string_value(json_array_get(u, 1));
            const char *d = json_string_value(json_array_get(u, 2));
            if (!kind || !p)
                continue;
            if (!strcmp(kind, "delete"))
                zm_delete(&m, be, p, -1, -1);
            else if (!strcmp(kind, "set") && d)
                zm_set(&m, be, p, d, (int)strlen(d), -1, -1);
            else if (!strcmp(kind, "create") && d)
                zm_create(&m, be, p, d, (int)strlen(d), 0, -1);
        }
        zm_delete(&m, be, urel, st.version, -1);
        zrc = zoo_multi(be->zh, m.n, m.ops, m.res);
        json_decref(undo);
        if (zrc != ZOK && zrc != ZNONODE && zrc != ZBADVERSION)
            rc = zfail(be, zrc, "rolling back", urel, err);
    }
    if (!rc && journal) /* the tenants' packs, the gate still held */
        rc = repack(c, id, err);
    if (!rc) {
        /* Open the gate if this batch still holds it, and drop the journal. */
        char gabs[PATH_MAX_LEN], *g = NULL;
        struct Stat gst;
        zk_abspath(be, "gate", gabs, sizeof gabs);
        zrc = zget(be, gabs, false, &g, NULL, &gst);
        if (zrc == ZOK && !strcmp(g, id)) {
            m.n = 0;
            zm_set(&m, be, "gate", "", 0, gst.version, -1);
            zrc = zoo_multi(be->zh, m.n, m.ops, m.res);
            if (zrc != ZOK && zrc != ZBADVERSION)
                rc = zfail(be, zrc, "opening", "gate", err);
        } else if (zrc != ZOK) {
            rc = zfail(be, zrc, "reading", "gate", err);
        }
        free(g);
        be->gate_version = -1;
        if (!rc)
            drop_journal(c, id, NULL);
    }
out:
    zmulti_free(&m);
    deallocate_String_vector(&kids);
    return rc;
}

int zk_recover(ferry_catalog *c, size_t *recovered, ferry_err *err)
{
    cat_backend *be = c->be;
    char abs[PATH_MAX_LEN];
    zk_abspath(be, "batches", abs, sizeof abs);
    struct String_vector kids = {0, NULL};
    int zrc = zoo_get_children(be->zh, abs, 0, &kids);
    if (zrc != ZOK)
        return zfail(be, zrc, "listing", "batches", err);
    int rc = FERRY_OK;
    *recovered = 0;
    for (int i = 0; i < kids.count && !rc; i++) {
        const char *id = kids.data[i];
        char rel[PATH_MAX_LEN], babs[PATH_MAX_LEN], *state = NULL;
        batch_rel(rel, sizeof rel, id, NULL);
        zk_abspath(be, rel, babs, sizeof babs);
        struct Stat st;
        if (zget(be, babs, false, &state, NULL, &st) != ZOK)
            continue;
        bool committed = !strcmp(state, "committed");
        free(state);
        batch_rel(rel, sizeof rel, id, "owner");
        zk_abspath(be, rel, babs, sizeof babs);
        if (committed) {
            drop_journal(c, id, NULL);
        } else if (zoo_exists(be->zh, babs, 0, &st) == ZNONODE) {
            rc = zk_rollback_batch(c, id, err);
            if (!rc)
                (*recovered)++;
        }
    }
    deallocate_String_vector(&kids);
    return rc;
}

/* Whether op's undo is the text its caller read (cat_op.prior), not one read again. */
static bool known_prior(const cat_op *op)
{
    return op->type == CAT_SET && op->prior && op->version >= 0;
}

/* The undo records of ops[first..next), as [kind, path, doc]: a create is undone by a delete; a
 * set or delete by restoring the document read now (the reads are pipelined: one round trip for
 * the whole chunk), or, for a set whose caller read the document at the version it conditions
 * the set on (op->prior), by restoring that text: if the set applies, it is what it replaced.
 * Holding the gate, nothing else changes these records until we commit. */
static int chunk_undo(cat_backend *be, const cat_op *ops, size_t first, size_t next, json_t *undo,
                      size_t *rt, ferry_err *err)
{
    size_t n = next - first;
    scan_slot *slots = calloc(n ? n : 1, sizeof *slots);
    scan_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int rc = FERRY_OK;
    bool any = false;
    if (!slots)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const cat_op *op = &ops[first + i];
        if ((op->type != CAT_SET && op->type != CAT_DELETE) || known_prior(op))
            continue;
        char abs[PATH_MAX_LEN];
        zk_abspath(be, op->path, abs, sizeof abs);
        slots[i].w = &w;
        pthread_mutex_lock(&w.mu);
        w.pending++;
        pthread_mutex_unlock(&w.mu);
        int zrc = zoo_aget(be->zh, abs, 0, zk_scan_done, &slots[i]);
        if (zrc != ZOK) {
            pthread_mutex_lock(&w.mu);
            w.pending--;
            pthread_mutex_unlock(&w.mu);
            slots[i].rc = zrc;
        }
        any = true;
    }
    pthread_mutex_lock(&w.mu);
    while (w.pending)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    if (any)
        (*rt)++;
    for (size_t i = 0; i < n && !rc; i++) {
        const cat_op *op = &ops[first + i];
        if (op->type == CAT_CHECK)
            continue;
        if (op->type == CAT_CREATE) {
            json_array_append_new(undo, json_pack("[ss]", "delete", op->path));
            continue;
        }
        if (known_prior(op)) {
            json_array_append_new(undo, json_pack("[sss]", "set", op->path, op->prior));
            continue;
        }
        if (slots[i].rc == ZNONODE)
            continue; /* created earlier in this batch (its own undo deletes it), or missing:
                       * then the operation fails and the batch rolls back */
        if (slots[i].rc != ZOK) {
            rc = zfail(be, slots[i].rc, "reading", op->path, err);
            break;
        }
        if (op->version >= 0 && slots[i].version != op->version) {
            rc = zk_user_op_error(be, op, ZBADVERSION, err);
            break;
        }
        json_array_append_new(undo, json_pack("[sss]", op->type == CAT_SET ? "set" : "create",
                                              op->path, slots[i].doc));
    }
    for (size_t i = 0; i < n; i++)
        free(slots[i].doc);
    free(slots);
    return rc;
}

static int commit_large(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info,
                        ferry_err *err)
{
    cat_backend *be = c->be;
    const clientid_t *cid = zoo_client_id(be->zh);
    char id[96], brel[PATH_MAX_LEN], orel[PATH_MAX_LEN];
    snprintf(id, sizeof id, "b-%llx-%d-%u", (unsigned long long)cid->client_id, (int)getpid(),
             ++be->batch_seq);
    batch_rel(brel, sizeof brel, id, NULL);
    batch_rel(orel, sizeof orel, id, "owner");
    size_t per_chunk = c->chunk_ops > 8 ? c->chunk_ops - 6 : 2; /* room for bookkeeping ops */
    zmulti m;
    int rc = zmulti_init(&m, (int)per_chunk + 7);
    json_t *undo = NULL;
    char *undo_text = NULL;
    bool holding = false;
    if (rc) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    /* 1. Take the gate and open the journal, in one multi. */
    int64_t gv = -1;
    uint64_t rv = 0;
    int64_t rver = -1;
    for (int attempt = 0;; attempt++) {
        rc = attempt ? zk_gate_wait_open(c, &gv, err) : zk_cached_gate(c, &gv, err);
        if (rc)
            goto out;
        m.n = 0;
        zm_set(&m, be, "gate", id, (int)strlen(id), gv, -1);
        zm_create(&m, be, brel, "applying", 8, 0, -1);
        zm_create(&m, be, orel, "", 0, ZOO_EPHEMERAL, -1);
        int zrc = zoo_multi(be->zh, m.n, m.ops, m.res);
        info->round_trips++;
        if (zrc == ZOK)
            break;
        if (zrc != ZBADVERSION || attempt > 50) {
            rc = zfail(be, zrc, "starting batch", brel, err);
            goto out;
        }
    }
    holding = true;
    int64_t held_gv = gv + 1;
    be->gate_version = -1;
    if (req->routing != CAT_ROUTING_KEEP) {
        rc = zk_read_routing(be, &rv, &rver, err);
        info->round_trips++;
        if (rc)
            goto out;
        rv = req->routing == CAT_ROUTING_BUMP ? rv + 1 : req->routing_value;
        if (req->routing == CAT_ROUTING_BUMP && req->routing_log) {
            /* an entry left from before an import set the version back would fail the commit:
             * it is stale (we hold the gate, no other writer can be writing it) */
            char lrel[64], abs[PATH_MAX_LEN];
            snprintf(lrel, sizeof lrel, CAT_ROUTING_LOG_DIR "/%llu", (unsigned long long)rv);
            zk_abspath(be, lrel, abs, sizeof abs);
            zoo_delete(be->zh, abs, -1);
            info->round_trips++;
        }
    }
    /* 2. Chunks: each multi applies its operations and records how to undo them. */
    size_t total = 0;
    for (size_t i = 0, bytes = 0, in = 0; i < req->n; i++) {
        if (in == per_chunk || (in > 0 && bytes + req->ops[i].doc_len > CHUNK_BYTES / 2)) {
            total++;
            in = bytes = 0;
        }
        in++;
        bytes += req->ops[i].doc_len + strlen(req->ops[i].path);
    }
    total++;
    size_t done = 0, next = 0;
    char rbuf[32], lrel[64];
    while (next < req->n || done < total) {
        size_t first = next, bytes = 0;
        undo = json_array();
        while (next < req->n && next - first < per_chunk &&
               (next == first || bytes + req->ops[next].doc_len <= CHUNK_BYTES / 2)) {
            bytes += req->ops[next].doc_len + strlen(req->ops[next].path);
            next++;
        }
        rc = chunk_undo(be, req->ops, first, next, undo, &info->round_trips, err);
        if (rc)
            goto out;
        undo_text = json_dumps(undo, JSON_COMPACT);
        if (!undo_text) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        char urel[PATH_MAX_LEN], uname[32];
        snprintf(uname, sizeof uname, "u-%06zu", done);
        batch_rel(urel, sizeof urel, id, uname);
        bool last = next >= req->n;
        m.n = 0;
        zm_check(&m, be, orel, 0, -1); /* our session still owns the batch */
        zm_check(&m, be, "gate", held_gv, -1);
        for (size_t i = first; i < next; i++)
            zm_user_op(&m, be, &req->ops[i], (int)i);
        zm_create(&m, be, urel, undo_text, (int)strlen(undo_text), 0, -1);
        if (last) { /* the commit point */
            if (req->routing != CAT_ROUTING_KEEP) {
                snprintf(rbuf, sizeof rbuf, "%llu", (unsigned long long)rv);
                zm_set(&m, be, "routing", rbuf, (int)strlen(rbuf), rver, -1);
                if (req->routing == CAT_ROUTING_BUMP && req->routing_log) {
                    snprintf(lrel, sizeof lrel, CAT_ROUTING_LOG_DIR "/%llu",
                             (unsigned long long)rv);
                    zm_create(&m, be, lrel, req->routing_log, (int)strlen(req->routing_log), 0,
                              -1);
                }
            }
            zm_set(&m, be, brel, "committed", 9, -1, -1);
            zm_set(&m, be, "gate", "", 0, held_gv, -1);
        }
        int zrc = zoo_multi(be->zh, m.n, m.ops, m.res);
        info->round_trips++;
        if (zrc != ZOK) {
            int f = zm_failed(&m);
            if (f >= 0 && m.src[f] >= 0)
                rc = zk_user_op_error(be, &req->ops[m.src[f]], m.res[f].err, err);
            else
                rc = zfail(be, zrc, "writing chunk", urel, err);
            goto out;
        }
        for (int i = 0; i < m.n; i++)
            if (m.src[i] >= 0) {
                const cat_op *op = &req->ops[m.src[i]];
                req->new_versions[m.src[i]] =
                    op->type == CAT_CREATE ? 0 : op->type == CAT_SET ? m.stats[i].version : -1;
            }
        free(undo_text);
        undo_text = NULL;
        json_decref(undo);
        undo = NULL;
        done++;
        info->chunks++;
        if (last)
            holding = false; /* committed: the gate is open again */
        if (c->progress)
            c->progress(done, total, c->progress_arg);
        if (last)
            break;
    }
    info->ops = req->n;
    info->routing_version = rv; /* 0 when no route changed */
    drop_journal(c, id, &info->round_trips);
out:
    if (holding) {
        /* Failed before the commit point: undo everything we wrote. The rollback is idempotent,
         * so a connection lost meanwhile is retried while the session lives (the client
         * reconnects by itself); if it cannot finish, the batch stays invisible behind the gate
         * and whoever finds it after our session ends rolls it back. */
        ferry_err e2 = {0};
        int rb = FERRY_OK;
        for (int attempt = 0; attempt < 20; attempt++) {
            rb = zk_rollback_batch(c, id, &e2);
            if (rb != FERRY_ECONNECT && rb != FERRY_ETIMEOUT)
                break;
            struct timespec ts = {0, 250 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (rb)
            ferry_err_prefix(err, "(rollback of batch %s also failed: %s; it stays invisible and "
                                  "is rolled back once this session ends) ",
                             id, e2.msg);
    }
    free(undo_text);
    json_decref(undo);
    zmulti_free(&m);
    return rc;
}

int zk_commit(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info,
                     ferry_err *err)
{
    int rc = zk_parents_for(c, req, &info->round_trips, err);
    if (rc)
        return rc;
    size_t bytes = 0;
    for (size_t i = 0; i < req->n; i++)
        bytes += req->ops[i].doc_len + strlen(req->ops[i].path) + 64;
    if (req->routing_log)
        bytes += strlen(req->routing_log) + 64;
    if (req->n + 2 <= c->chunk_ops && bytes <= CHUNK_BYTES)
        rc = zk_commit_small(c, req, info, err);
    else
        rc = commit_large(c, req, info, err);
    if (!rc && req->routing == CAT_ROUTING_BUMP && info->routing_version > CAT_ROUTING_LOG_KEEP) {
        /* the routing change log keeps the last CAT_ROUTING_LOG_KEEP entries: drop the one that
         * fell out (best effort: a leftover entry is never read, routers only ask for recent
         * ones) */
        char rel[64], abs[PATH_MAX_LEN];
        snprintf(rel, sizeof rel, CAT_ROUTING_LOG_DIR "/%llu",
                 (unsigned long long)(info->routing_version - CAT_ROUTING_LOG_KEEP));
        zk_abspath(c->be, rel, abs, sizeof abs);
        zoo_delete(c->be->zh, abs, -1);
        info->round_trips++;
    }
    return rc;
}
