/* The catalog's ZooKeeper backend (Apache ZooKeeper 3.5+ and ClickHouse Keeper: it uses only
 * create, delete, set, get, exists, getChildren, check, multi, ephemeral nodes and one-shot
 * watches). Documents are znode data; a record's version is the znode's data version.
 *
 * Atomic batches larger than one multi go through the write gate (docs/catalog.md):
 *   ROOT/gate            "" when open, or the id of the batch that holds it
 *   ROOT/batches/ID      "applying" | "committed": the batch's journal
 *   ROOT/batches/ID/owner     ephemeral: the writer's session is alive
 *   ROOT/batches/ID/u-NNNNNN  undo records of chunk NNNNNN, written in the chunk's own multi
 * Every write multi checks the gate's version, so while a batch holds the gate nothing else is
 * written; readers check the gate before and after reading (a sequence lock), so nobody sees a
 * batch half-applied. The last chunk's multi commits: it marks the journal committed and opens
 * the gate. A batch whose owner died before that is rolled back from its undo records by the
 * next reader, writer or ferry_catalog_recover. */
#include "catalog/zk_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "ferry/clock.h"
#include "ferry/strutil.h"


typedef struct zk_lease {
    char path[PATH_MAX_LEN];
} zk_lease;

/* ---- plumbing ---- */

static void on_event(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)path;
    cat_backend *be = ctx;
    pthread_mutex_lock(&be->mu);
    if (type == ZOO_SESSION_EVENT)
        be->state = state;
    be->events++;
    pthread_cond_broadcast(&be->cv);
    pthread_mutex_unlock(&be->mu);
}

static uint64_t events_now(cat_backend *be)
{
    pthread_mutex_lock(&be->mu);
    uint64_t e = be->events;
    pthread_mutex_unlock(&be->mu);
    return e;
}

/* Waits until an event arrives after `seen` or the deadline passes; false on timeout. */
static bool wait_event(cat_backend *be, uint64_t seen, int64_t deadline_ms)
{
    bool got = true;
    pthread_mutex_lock(&be->mu);
    while (be->events == seen) {
        int64_t left = deadline_ms - (int64_t)ferry_clock_ms_u64();
        if (left <= 0) {
            got = false;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + (left > 200 ? 200 : left) * 1000000L;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&be->cv, &be->mu, &ts);
    }
    pthread_mutex_unlock(&be->mu);
    return got;
}

static int zk_code(int zrc)
{
    switch (zrc) {
    case ZOK:
        return FERRY_OK;
    case ZNONODE:
        return FERRY_ENOTFOUND;
    case ZNODEEXISTS:
    case ZBADVERSION:
    case ZNOTEMPTY:
        return FERRY_ECONFLICT;
    case ZOPERATIONTIMEOUT:
        return FERRY_ETIMEOUT;
    case ZCONNECTIONLOSS:
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
    case ZCLOSING:
        return FERRY_ECONNECT;
    case ZNOAUTH:
    case ZAUTHFAILED:
        return FERRY_EAUTH;
    default:
        return FERRY_EREMOTE;
    }
}

int zfail(cat_backend *be, int zrc, const char *what, const char *rel, ferry_err *err)
{
    const char *hint = "";
    if (zrc == ZSESSIONEXPIRED || zrc == ZINVALIDSTATE)
        hint = " (the ZooKeeper session expired; reopen the catalog)";
    else if (zrc == ZCONNECTIONLOSS)
        hint = " (connection lost; the outcome of a write is unknown until it is read back)";
    return ferry_err_set(err, zk_code(zrc), "zk://%s%s: %s %s: %s%s", be->hosts, be->root, what,
                         rel, zerror(zrc), hint);
}

/* Names are validated to 127 characters, so paths fit; a path that does not is left empty, which
 * ZooKeeper rejects as a bad argument rather than acting on a truncated path. */
/* Without snprintf: a scan builds one per znode it reads (its format parsing was 3% of a plan's
 * CPU on ZooKeeper). Too long for size: "". */
void zk_abspath(const cat_backend *be, const char *rel, char *out, size_t size)
{
    const char *root = be->root[0] || (rel && *rel) ? be->root : "/";
    size_t a = strlen(root), b = rel && *rel ? strlen(rel) : 0;
    size_t n = a + (b ? 1 + b : 0);
    if (n >= size) {
        if (size)
            out[0] = '\0';
        return;
    }
    memcpy(out, root, a);
    if (b) {
        out[a] = '/';
        memcpy(out + a + 1, rel, b);
    }
    out[n] = '\0';
}

/* Reads a node's data (NUL-terminated, caller frees) and stat; watch != 0 leaves a watch. */
int zget(cat_backend *be, const char *abs, bool watch, char **data, int *len,
                struct Stat *st)
{
    int cap = 4096;
    for (;;) {
        char *buf = malloc((size_t)cap + 1);
        if (!buf)
            return ZSYSTEMERROR;
        int n = cap;
        int zrc = watch ? zoo_wget(be->zh, abs, on_event, be, buf, &n, st)
                        : zoo_get(be->zh, abs, 0, buf, &n, st);
        if (zrc != ZOK) {
            free(buf);
            return zrc;
        }
        if (st->dataLength > cap) {
            free(buf);
            cap = st->dataLength;
            continue;
        }
        if (n < 0)
            n = 0;
        buf[n] = '\0';
        *data = buf;
        if (len)
            *len = n;
        return ZOK;
    }
}

static int zcreate_if_missing(cat_backend *be, const char *abs, const char *data)
{
    int zrc = zoo_create(be->zh, abs, data, data ? (int)strlen(data) : -1, be->acl,
                         0, NULL, 0);
    return zrc == ZNODEEXISTS ? ZOK : zrc;
}

/* ---- the gate and batch recovery ---- */


/* Waits until no batch holds the gate (rolling back batches whose writer is gone); stores the
 * open gate's version. */
int zk_gate_wait_open(ferry_catalog *c, int64_t *gv, ferry_err *err)
{
    cat_backend *be = c->be;
    int64_t deadline = (int64_t)ferry_clock_ms_u64() + be->wait_ms;
    char abs[PATH_MAX_LEN];
    zk_abspath(be, "gate", abs, sizeof abs);
    for (;;) {
        uint64_t seen = events_now(be);
        char *data = NULL;
        struct Stat st;
        int zrc = zget(be, abs, true, &data, NULL, &st);
        if (zrc != ZOK)
            return zfail(be, zrc, "reading", "gate", err);
        if (!data[0]) {
            free(data);
            *gv = st.version;
            be->gate_version = st.version;
            return FERRY_OK;
        }
        char id[256];
        snprintf(id, sizeof id, "%s", data);
        free(data);
        char owner[PATH_MAX_LEN], rel[PATH_MAX_LEN];
        snprintf(rel, sizeof rel, "batches/%s/owner", id);
        zk_abspath(be, rel, owner, sizeof owner);
        struct Stat ost;
        zrc = zoo_wexists(be->zh, owner, on_event, be, &ost);
        if (zrc == ZNONODE) { /* its writer is gone: undo what it wrote */
            int rc = zk_rollback_batch(c, id, err);
            if (rc)
                return rc;
            continue;
        }
        if (zrc != ZOK)
            return zfail(be, zrc, "reading", rel, err);
        if (!wait_event(be, seen, deadline))
            return ferry_err_set(err, FERRY_ETIMEOUT,
                                 "zk://%s%s: batch %s is being written by another process and "
                                 "did not finish within %d ms",
                                 be->hosts, be->root, id, be->wait_ms);
    }
}

/* zk_int.h. */
int zk_gate_unchanged(cat_backend *be, int64_t gv, bool *same, ferry_err *err)
{
    char abs[PATH_MAX_LEN];
    zk_abspath(be, "gate", abs, sizeof abs);
    struct Stat st;
    int zrc = zoo_exists(be->zh, abs, 0, &st);
    if (zrc != ZOK)
        return zfail(be, zrc, "reading", "gate", err);
    *same = st.version == gv;
    if (!*same)
        be->gate_version = -1;
    return FERRY_OK;
}

int zk_cached_gate(ferry_catalog *c, int64_t *gv, ferry_err *err)
{
    if (c->be->gate_version >= 0) {
        *gv = c->be->gate_version;
        return FERRY_OK;
    }
    return zk_gate_wait_open(c, gv, err);
}

/* ---- writes ---- */


int zmulti_init(zmulti *m, int cap)
{
    memset(m, 0, sizeof *m);
    m->ops = calloc((size_t)cap, sizeof *m->ops);
    m->res = calloc((size_t)cap, sizeof *m->res);
    m->stats = calloc((size_t)cap, sizeof *m->stats);
    m->paths = calloc((size_t)cap, sizeof *m->paths);
    m->src = calloc((size_t)cap, sizeof *m->src);
    m->cap = cap;
    return m->ops && m->res && m->stats && m->paths && m->src ? FERRY_OK : FERRY_ENOMEM;
}

void zmulti_free(zmulti *m)
{
    free(m->ops);
    free(m->res);
    free(m->stats);
    free(m->paths);
    free(m->src);
}

static char *zm_path(zmulti *m, const cat_backend *be, const char *rel)
{
    zk_abspath(be, rel, m->paths[m->n], sizeof m->paths[m->n]);
    return m->paths[m->n];
}

void zm_create(zmulti *m, const cat_backend *be, const char *rel, const char *data,
                      int len, int flags, int src)
{
    zoo_create_op_init(&m->ops[m->n], zm_path(m, be, rel), data, len, be->acl, flags,
                       NULL, 0);
    m->src[m->n++] = src;
}
void zm_set(zmulti *m, const cat_backend *be, const char *rel, const char *data, int len,
                   int64_t version, int src)
{
    zoo_set_op_init(&m->ops[m->n], zm_path(m, be, rel), data, len, (int)version,
                    &m->stats[m->n]);
    m->src[m->n++] = src;
}
void zm_delete(zmulti *m, const cat_backend *be, const char *rel, int64_t version, int src)
{
    zoo_delete_op_init(&m->ops[m->n], zm_path(m, be, rel), (int)version);
    m->src[m->n++] = src;
}
void zm_check(zmulti *m, const cat_backend *be, const char *rel, int64_t version, int src)
{
    zoo_check_op_init(&m->ops[m->n], zm_path(m, be, rel), (int)version);
    m->src[m->n++] = src;
}

/* Adds the request's operation i. */
void zm_user_op(zmulti *m, const cat_backend *be, const cat_op *op, int i)
{
    switch (op->type) {
    case CAT_CREATE:
        zm_create(m, be, op->path, op->doc, (int)op->doc_len, 0, i);
        break;
    case CAT_SET:
        zm_set(m, be, op->path, op->doc, (int)op->doc_len, op->version, i);
        break;
    case CAT_DELETE:
        zm_delete(m, be, op->path, op->version, i);
        break;
    case CAT_CHECK:
        zm_check(m, be, op->path, op->version, i);
        break;
    }
}

/* The first failing operation of a failed multi (-1 if none is marked). */
int zm_failed(const zmulti *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->res[i].err != ZOK && m->res[i].err != ZRUNTIMEINCONSISTENCY)
            return i;
    return -1;
}

int zk_user_op_error(cat_backend *be, const cat_op *op, int zrc, ferry_err *err)
{
    be->failed_op = op;
    switch (zrc) {
    case ZNODEEXISTS:
        return ferry_err_set(err, FERRY_ECONFLICT, "%s already exists", op->path);
    case ZBADVERSION:
        return ferry_err_set(err, FERRY_ECONFLICT, "%s changed: it is no longer at version %lld",
                             op->path, (long long)op->version);
    case ZNONODE:
        return ferry_err_set(err, FERRY_ENOTFOUND, "%s does not exist", op->path);
    default:
        return zfail(be, zrc, "writing", op->path, err);
    }
}

int zk_read_routing(cat_backend *be, uint64_t *value, int64_t *version, ferry_err *err)
{
    char abs[PATH_MAX_LEN], *data = NULL;
    struct Stat st;
    zk_abspath(be, "routing", abs, sizeof abs);
    int zrc = zget(be, abs, false, &data, NULL, &st);
    if (zrc != ZOK)
        return zfail(be, zrc, "reading", "routing", err);
    bool ok = ferry_parse_u64(data, value);
    free(data);
    if (!ok)
        return ferry_err_set(err, FERRY_EREMOTE, "zk://%s%s/routing does not hold a number",
                             be->hosts, be->root);
    *version = st.version;
    return FERRY_OK;
}

typedef struct create_slot {
    struct scan_wait *w;
    int rc;
} create_slot;

static void create_done(int rc, const char *value, const void *data)
{
    (void)value;
    create_slot *s = (create_slot *)data;
    s->rc = rc;
    pthread_mutex_lock(&s->w->mu);
    s->w->pending--;
    pthread_cond_broadcast(&s->w->cv);
    pthread_mutex_unlock(&s->w->mu);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int slashes(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '/';
    return n;
}

static bool parent_known(const cat_backend *be, const char *p)
{
    for (size_t i = 0; i < be->n_parents; i++)
        if (!strcmp(be->parents[i], p))
            return true;
    return false;
}

/* Makes sure the containers above every created record exist, creating the missing ones level by
 * level with pipelined asynchronous creates (one round trip per level, whatever their number). */
int zk_parents_for(ferry_catalog *c, const cat_commit_req *req, size_t *rt, ferry_err *err)
{
    cat_backend *be = c->be;
    char **want = NULL; /* every container level, e.g. "parts/events" and "parts/events/p1" */
    size_t n = 0, cap = 0;
    int rc = FERRY_OK, max_level = 0;
    create_slot *slots = NULL;
    char prev[PATH_MAX_LEN] = "";
    for (size_t i = 0; i < req->n && !rc; i++) {
        if (req->ops[i].type != CAT_CREATE)
            continue;
        char parent[PATH_MAX_LEN];
        snprintf(parent, sizeof parent, "%s", req->ops[i].path);
        char *last = strrchr(parent, '/');
        if (!last)
            continue;
        *last = '\0';
        if (!strchr(parent, '/') || !strcmp(parent, prev) || parent_known(be, parent))
            continue; /* a kind folder (made at open), the previous record's, or known */
        memcpy(prev, parent, sizeof prev);
        /* every level below the kind folder: "parts/events", then "parts/events/p1" */
        for (const char *p = strchr(strchr(parent, '/') + 1, '/');; p = strchr(p + 1, '/')) {
            size_t len = p ? (size_t)(p - parent) : strlen(parent);
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                char **v = realloc(want, cap * sizeof *v);
                if (!v) {
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                    break;
                }
                want = v;
            }
            if (!(want[n] = ferry_strndup(parent, len))) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                break;
            }
            n++;
            if (!p)
                break;
        }
    }
    if (rc || n == 0)
        goto out;
    qsort(want, n, sizeof *want, str_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u && !strcmp(want[u - 1], want[i])) {
            free(want[i]);
            continue;
        }
        want[u++] = want[i];
        if (slashes(want[i]) > max_level)
            max_level = slashes(want[i]);
    }
    n = u;
    slots = calloc(n, sizeof *slots);
    if (!slots) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (int level = 1; level <= max_level && !rc; level++) {
        scan_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        for (size_t i = 0; i < n; i++) {
            if (slashes(want[i]) != level)
                continue;
            char abs[PATH_MAX_LEN];
            zk_abspath(be, want[i], abs, sizeof abs);
            slots[i].w = &w;
            pthread_mutex_lock(&w.mu);
            w.pending++;
            pthread_mutex_unlock(&w.mu);
            int zrc = zoo_acreate(be->zh, abs, NULL, -1, be->acl, 0, create_done,
                                  &slots[i]);
            if (zrc != ZOK) {
                pthread_mutex_lock(&w.mu);
                w.pending--;
                pthread_mutex_unlock(&w.mu);
                slots[i].rc = zrc;
            }
        }
        pthread_mutex_lock(&w.mu);
        while (w.pending)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        (*rt)++;
        for (size_t i = 0; i < n && !rc; i++)
            if (slashes(want[i]) == level && slots[i].rc != ZOK && slots[i].rc != ZNODEEXISTS)
                rc = zfail(be, slots[i].rc, "creating", want[i], err);
    }
    /* Remember the deepest ones (the records' parents). */
    for (size_t i = 0; i < n && !rc; i++) {
        if (slashes(want[i]) != max_level && i + 1 < n && ferry_starts_with(want[i + 1], want[i]))
            continue;
        if (be->n_parents == be->cap_parents) {
            if (be->cap_parents >= 4096) { /* bounded: forget and relearn */
                for (size_t k = 0; k < be->n_parents; k++)
                    free(be->parents[k]);
                be->n_parents = 0;
            } else {
                size_t ncap = be->cap_parents ? be->cap_parents * 2 : 32;
                char **v = realloc(be->parents, ncap * sizeof *v);
                if (!v)
                    break; /* only a cache */
                be->parents = v;
                be->cap_parents = ncap;
            }
        }
        be->parents[be->n_parents++] = want[i];
        want[i] = NULL;
    }
out:
    for (size_t i = 0; i < n; i++)
        free(want[i]);
    free(want);
    free(slots);
    return rc;
}

/* A batch that fits one multi: [check gate] ops [set routing]. */
int zk_commit_small(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info,
                        ferry_err *err)
{
    cat_backend *be = c->be;
    zmulti m;
    int rc = zmulti_init(&m, (int)req->n + 3);
    if (rc) {
        zmulti_free(&m);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    char rbuf[32], lrel[64];
    bool settled = false; /* committed, or failed for good */
    for (int attempt = 0; attempt < 50 && !settled; attempt++) {
        int64_t gv;
        rc = attempt ? zk_gate_wait_open(c, &gv, err) : zk_cached_gate(c, &gv, err);
        if (rc)
            break;
        uint64_t rv = 0;
        int64_t rver = -1;
        if (req->routing != CAT_ROUTING_KEEP) {
            rc = zk_read_routing(be, &rv, &rver, err);
            info->round_trips++;
            if (rc)
                break;
            rv = req->routing == CAT_ROUTING_BUMP ? rv + 1 : req->routing_value;
        }
        m.n = 0;
        zm_check(&m, be, "gate", gv, -1);
        for (size_t i = 0; i < req->n; i++)
            zm_user_op(&m, be, &req->ops[i], (int)i);
        if (req->routing != CAT_ROUTING_KEEP) {
            snprintf(rbuf, sizeof rbuf, "%llu", (unsigned long long)rv);
            zm_set(&m, be, "routing", rbuf, (int)strlen(rbuf), rver, -2);
            if (req->routing == CAT_ROUTING_BUMP && req->routing_log) {
                snprintf(lrel, sizeof lrel, CAT_ROUTING_LOG_DIR "/%llu", (unsigned long long)rv);
                zm_create(&m, be, lrel, req->routing_log, (int)strlen(req->routing_log), 0, -3);
            }
        }
        int zrc = zoo_multi(be->zh, m.n, m.ops, m.res);
        info->round_trips++;
        if (zrc == ZOK) {
            for (int i = 0; i < m.n; i++)
                if (m.src[i] >= 0) {
                    const cat_op *op = &req->ops[m.src[i]];
                    req->new_versions[m.src[i]] =
                        op->type == CAT_CREATE ? 0 : op->type == CAT_SET ? m.stats[i].version : -1;
                }
            info->ops = req->n;
            info->chunks = 1;
            info->routing_version = rv; /* 0 when no route changed */
            settled = true;
            break;
        }
        settled = true;
        int f = zm_failed(&m);
        if (f < 0) {
            rc = zfail(be, zrc, "committing a batch at", req->n ? req->ops[0].path : "routing", err);
            break;
        }
        if (m.src[f] == -1 || m.src[f] == -2) {
            settled = false; /* the gate moved or another switch bumped the routing version */
            continue;
        }
        if (m.src[f] == -3 && m.res[f].err == ZNODEEXISTS) {
            /* an entry left from before an import set the version back: it is stale */
            char abs[PATH_MAX_LEN];
            zk_abspath(be, lrel, abs, sizeof abs);
            zoo_delete(be->zh, abs, -1);
            info->round_trips++;
            settled = false;
            continue;
        }
        if (m.src[f] < 0) {
            rc = zfail(be, m.res[f].err, "writing", lrel, err);
            break;
        }
        rc = zk_user_op_error(be, &req->ops[m.src[f]], m.res[f].err, err);
        break;
    }
    if (!rc && !settled)
        rc = ferry_err_set(err, FERRY_ETIMEOUT,
                           "zk://%s%s: the batch lost 50 races for the gate or the routing "
                           "version in a row; try again",
                           be->hosts, be->root);
    zmulti_free(&m);
    return rc;
}

/* ---- routing ---- */

static int zk_routing_version(ferry_catalog *c, uint64_t *v, ferry_err *err)
{
    int64_t ver;
    return zk_read_routing(c->be, v, &ver, err);
}

static int zk_routing_wait(ferry_catalog *c, uint64_t known, int timeout_ms, uint64_t *now,
                           ferry_err *err)
{
    cat_backend *be = c->be;
    int64_t deadline = (int64_t)ferry_clock_ms_u64() + timeout_ms;
    char abs[PATH_MAX_LEN];
    zk_abspath(be, "routing", abs, sizeof abs);
    for (;;) {
        uint64_t seen = events_now(be);
        char *data = NULL;
        struct Stat st;
        int zrc = zget(be, abs, true, &data, NULL, &st); /* leaves a watch */
        if (zrc != ZOK)
            return zfail(be, zrc, "reading", "routing", err);
        bool ok = ferry_parse_u64(data, now);
        free(data);
        if (!ok)
            return ferry_err_set(err, FERRY_EREMOTE, "routing node does not hold a number");
        if (*now != known)
            return FERRY_OK;
        if (!wait_event(be, seen, deadline))
            return ferry_err_set(err, FERRY_ETIMEOUT,
                                 "routing version stayed at %llu for %d ms",
                                 (unsigned long long)known, timeout_ms);
    }
}

/* ---- lease ---- */

static int zk_lease_acquire(ferry_catalog *c, const char *name, const char *owner, void **token,
                            ferry_err *err)
{
    cat_backend *be = c->be;
    zk_lease *l = calloc(1, sizeof *l);
    if (!l)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    char rel[PATH_MAX_LEN];
    snprintf(rel, sizeof rel, "leases/%s", name);
    zk_abspath(be, rel, l->path, sizeof l->path);
    int zrc = zoo_create(be->zh, l->path, owner, (int)strlen(owner), be->acl,
                         ZOO_EPHEMERAL, NULL, 0);
    if (zrc == ZOK) {
        *token = l;
        return FERRY_OK;
    }
    free(l);
    if (zrc == ZNODEEXISTS) {
        char *holder = NULL, abs[PATH_MAX_LEN];
        struct Stat st;
        zk_abspath(be, rel, abs, sizeof abs);
        int rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "lease '%s' is held by %s (it ends when that holder's session "
                               "ends)",
                               name,
                               zget(be, abs, false, &holder, NULL, &st) == ZOK && holder[0]
                                   ? holder
                                   : "another session");
        free(holder);
        return rc;
    }
    return zfail(be, zrc, "creating", rel, err);
}

static bool zk_lease_valid(ferry_catalog *c, void *token)
{
    cat_backend *be = c->be;
    zk_lease *l = token;
    if (!l)
        return false;
    /* Disconnected is not lost: ZooKeeper keeps the session, and the lease's ephemeral znode,
     * until the session timeout passes without the client (a server restarted gives every
     * session a full timeout to come back). Wait for the connection that long; an expired
     * session, or no connection by then, is a lost lease. */
    int waited = 0, timeout = zoo_recv_timeout(be->zh);
    for (;;) {
        int zs = zoo_state(be->zh);
        if (zs == ZOO_EXPIRED_SESSION_STATE || zs == ZOO_AUTH_FAILED_STATE)
            return false;
        if (zs == ZOO_CONNECTED_STATE) {
            struct Stat st;
            int zrc = zoo_exists(be->zh, l->path, 0, &st);
            if (zrc == ZOK)
                return st.ephemeralOwner == zoo_client_id(be->zh)->client_id;
            /* the connection went while asking: wait for it like above */
            if (zrc != ZCONNECTIONLOSS && zrc != ZOPERATIONTIMEOUT)
                return false;
        }
        if (waited >= timeout)
            return false;
        usleep(100 * 1000);
        waited += 100;
    }
}

static void zk_lease_release(ferry_catalog *c, void *token)
{
    zk_lease *l = token;
    if (!l)
        return;
    if (zk_lease_valid(c, l))
        zoo_delete(c->be->zh, l->path, -1);
    free(l);
}

/* ---- open / close ---- */

static void zk_close(ferry_catalog *c)
{
    cat_backend *be = c->be;
    if (!be)
        return;
    if (be->zh)
        zookeeper_close(be->zh);
    for (size_t i = 0; i < be->n_parents; i++)
        free(be->parents[i]);
    free(be->parents);
    pthread_mutex_destroy(&be->mu);
    pthread_cond_destroy(&be->cv);
    free(be);
    c->be = NULL;
}

static const cat_backend_ops zk_ops = {
    .name = "zk",
    .get = zt_get,
    .scan = zt_scan,
    .scan_flat = zt_scan_flat,
    .scan_rows = zp_scan,
    .commit = zt_commit,
    .routing_version = zk_routing_version,
    .routing_wait = zk_routing_wait,
    .lease_acquire = zk_lease_acquire,
    .lease_valid = zk_lease_valid,
    .lease_release = zk_lease_release,
    .recover = zk_recover,
    .close = zk_close,
};

/* rest: "host:port[,host:port]/chroot[?timeout_ms=N&wait_ms=N&auth_file=/abs/path]" */
static int parse_url(cat_backend *be, const char *rest, ferry_err *err)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", rest);
    char *q = strchr(buf, '?');
    if (q)
        *q++ = '\0';
    char *slash = strchr(buf, '/');
    if (!slash || slash == buf || !slash[1])
        return ferry_err_set(err, FERRY_EINVAL,
                             "catalog URL zk://%s needs hosts and a chroot "
                             "(zk://host:port[,host:port]/chroot)",
                             rest);
    if ((size_t)snprintf(be->root, sizeof be->root, "%s", slash) >= sizeof be->root)
        return ferry_err_set(err, FERRY_EINVAL, "catalog URL chroot is too long");
    *slash = '\0';
    if ((size_t)snprintf(be->hosts, sizeof be->hosts, "%s", buf) >= sizeof be->hosts)
        return ferry_err_set(err, FERRY_EINVAL, "catalog URL host list is too long");
    size_t rl = strlen(be->root);
    while (rl > 1 && be->root[rl - 1] == '/')
        be->root[--rl] = '\0';
    for (char *p = be->root + 1; *p; p++)
        if (*p == '/' && p[1] == '/')
            return ferry_err_set(err, FERRY_EINVAL, "catalog URL chroot %s has an empty part",
                                 be->root);
    while (q && *q) {
        char *amp = strchr(q, '&');
        if (amp)
            *amp++ = '\0';
        char *eq = strchr(q, '=');
        uint64_t v = 0;
        if (eq && !strncmp(q, "auth_file=", 10)) {
            if (eq[1] != '/' ||
                (size_t)snprintf(be->auth_file, sizeof be->auth_file, "%s", eq + 1) >=
                    sizeof be->auth_file)
                return ferry_err_set(err, FERRY_EINVAL,
                                     "catalog URL auth_file must be an absolute path (of the "
                                     "file holding the ZooKeeper digest 'user:password')");
            q = amp;
            continue;
        }
        if (!eq || !ferry_parse_u64(eq + 1, &v) || v == 0 || v > 3600000)
            return ferry_err_set(err, FERRY_EINVAL,
                                 "catalog URL parameter '%s' is malformed (expected "
                                 "timeout_ms=N or wait_ms=N, milliseconds)",
                                 q);
        *eq = '\0';
        if (!strcmp(q, "timeout_ms"))
            be->timeout_ms = (int)v;
        else if (!strcmp(q, "convert_layout") && v == 1)
            be->convert_layout = true;
        else if (!strcmp(q, "wait_ms"))
            be->wait_ms = (int)v;
        else
            return ferry_err_set(err, FERRY_EINVAL,
                                 "catalog URL parameter '%s' is unknown (timeout_ms, wait_ms, "
                                 "auth_file, convert_layout=1)", q);
        q = amp;
    }
    return FERRY_OK;
}

int cat_zk_open(ferry_catalog *c, const char *rest, ferry_err *err)
{
    cat_backend *be = calloc(1, sizeof *be);
    if (!be)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    pthread_mutex_init(&be->mu, NULL);
    pthread_cond_init(&be->cv, NULL);
    be->timeout_ms = 10000;
    be->wait_ms = 30000;
    be->acl = &ZOO_OPEN_ACL_UNSAFE;
    be->gate_version = -1;
    c->ops = &zk_ops;
    c->be = be;
    int rc = parse_url(be, rest, err);
    if (rc)
        goto out;
    zoo_set_debug_level(getenv("FERRY_ZK_DEBUG") ? ZOO_LOG_LEVEL_DEBUG : (ZooLogLevel)0);
    be->zh = zookeeper_init(be->hosts, on_event, be->timeout_ms, NULL, be, 0);
    if (!be->zh) {
        rc = ferry_err_set(err, FERRY_ECONNECT, "zk://%s: cannot start a client: %s", be->hosts,
                           strerror(errno));
        goto out;
    }
    int64_t deadline =
        (int64_t)ferry_clock_ms_u64() + (be->timeout_ms > 15000 ? be->timeout_ms : 15000);
    for (;;) {
        uint64_t seen = events_now(be);
        pthread_mutex_lock(&be->mu);
        int st = be->state;
        pthread_mutex_unlock(&be->mu);
        if (st == ZOO_CONNECTED_STATE)
            break;
        if (st == ZOO_EXPIRED_SESSION_STATE || st == ZOO_AUTH_FAILED_STATE ||
            !wait_event(be, seen, deadline)) {
            pthread_mutex_lock(&be->mu);
            st = be->state;
            pthread_mutex_unlock(&be->mu);
            if (st == ZOO_CONNECTED_STATE)
                break;
            rc = ferry_err_set(err, FERRY_ECONNECT, "cannot connect to ZooKeeper at %s",
                               be->hosts);
            goto out;
        }
    }
    if (be->auth_file[0]) {
        rc = cat_zk_add_auth(be->zh, be->auth_file, be->timeout_ms, err);
        if (rc)
            goto out;
        be->acl = &ZOO_CREATOR_ALL_ACL;
    }
    /* The layout: the chroot path, then the fixed nodes under it. */
    char abs[PATH_MAX_LEN];
    for (char *p = be->root + 1;; p++) {
        p = strchr(p, '/');
        if (p)
            *p = '\0';
        int zrc = zcreate_if_missing(be, be->root, NULL);
        if (p)
            *p = '/';
        if (zrc != ZOK) {
            rc = zfail(be, zrc, "creating", be->root, err);
            goto out;
        }
        if (!p)
            break;
    }
    static const char *const fixed[][2] = {{"gate", ""},
                                           {"routing", "0"},
                                           {CAT_ROUTING_LOG_DIR, NULL},
                                           {"batches", NULL},
                                           {"leases", NULL},
                                           {CAT_MOVE_INDEX_DIR, NULL},
                                           {CAT_INDEXES_DIR, NULL}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        zk_abspath(be, fixed[i][0], abs, sizeof abs);
        int zrc = zcreate_if_missing(be, abs, fixed[i][1]);
        if (zrc != ZOK) {
            rc = zfail(be, zrc, "creating", fixed[i][0], err);
            goto out;
        }
    }
    for (int k = 0; k < FERRY_REC_KIND_COUNT; k++) {
        zk_abspath(be, cat_kind_dir((enum ferry_record_kind)k), abs, sizeof abs);
        int zrc = zcreate_if_missing(be, abs, NULL);
        if (zrc != ZOK) {
            rc = zfail(be, zrc, "creating", cat_kind_dir((enum ferry_record_kind)k), err);
            goto out;
        }
    }
    rc = zt_layout_open(c, err);
out:
    if (rc)
        zk_close(c);
    return rc;
}
