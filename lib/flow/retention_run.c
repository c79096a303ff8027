/* Retention's I/O: plans the expired partitions from the live servers and the catalog, and runs
 * one journaled job per partition through SCAN, DETACH, REMOVE, DELETE (include/ferry/
 * retention.h). ClickHouse statements go through ferry_guarded_exec; files are removed by the
 * agents; objects are deleted only by the janitor, after the live check. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/agent_ops.h"
#include "ferry/fleet.h"
#include "ferry/log.h"
#include "ferry/retention.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"
#include "flow/partition_pointers.h"

#define CAS_TRIES 8

typedef struct rjob {
    ferry_record rec; /* the job record as last read or written (rec.version; stored or not:
                       * ferry_flow_job_stored) */
    char database[FERRY_NAME_MAX], table[FERRY_NAME_MAX], pid[FERRY_NAME_MAX];
    char tenant[FERRY_NAME_MAX];
    uint32_t day;
    char servers[FERRY_LIST_MAX];
    size_t deleted;
    uint64_t deleted_bytes;
    json_t *kept; /* [{key, blocker}] */
    bool skip;    /* another worker owns it, or it cannot go on in this run */
    bool rescan;  /* a resumed job found on a server it did not know: scan again */
} rjob;

typedef struct rctx {
    ferry_fleet *fl;
    const ferry_retention_options *opt;
    char owner[FERRY_NAME_MAX];
    ferry_flow_journal journal; /* the jobs' records (include/ferry/flow_journal.h) */
    rjob *jobs;
    size_t n_jobs, cap_jobs;
    json_t *problems;
    bool complete;
} rctx;

static void problem(rctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(rctx *x, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_array_append_new(x->problems, json_string(buf));
    x->complete = false;
}

/* ---- jobs ----------------------------------------------------------------------------------- */

static rjob *job_find(rctx *x, const char *table, const char *pid)
{
    for (size_t i = 0; i < x->n_jobs; i++)
        if (!strcmp(x->jobs[i].table, table) && !strcmp(x->jobs[i].pid, pid))
            return &x->jobs[i];
    return NULL;
}

static rjob *job_add(rctx *x, const char *database, const char *table, const char *pid,
                     ferry_err *err)
{
    if (x->n_jobs == x->cap_jobs) {
        size_t cap = x->cap_jobs ? x->cap_jobs * 2 : 16;
        rjob *n = realloc(x->jobs, cap * sizeof *n);
        if (!n) {
            ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            return NULL;
        }
        x->jobs = n;
        x->cap_jobs = cap;
    }
    rjob *j = &x->jobs[x->n_jobs++];
    memset(j, 0, sizeof *j);
    ferry_record_init(&j->rec, FERRY_REC_JOB);
    snprintf(j->database, sizeof j->database, "%s", database);
    snprintf(j->table, sizeof j->table, "%s", table);
    snprintf(j->pid, sizeof j->pid, "%s", pid);
    char id[sizeof j->rec.u.job.id];
    snprintf(id, sizeof id, "retention.%s.%s", table, pid);
    ferry_flow_job_init(&x->journal, &j->rec, id, NULL);
    j->kept = json_array();
    return j;
}

/* The job's data as JSON text (caller frees; NULL when out of memory). */
static char *job_encode(const rjob *j)
{
    json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "database", j->database, "table",
                          j->table, "partition_id", j->pid, "tenant", j->tenant, "day",
                          (json_int_t)j->day, "servers", j->servers);
    char *s = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(d);
    return s;
}

static void job_decode(rjob *j)
{
    json_t *d = json_loads(ferry_job_data(&j->rec.u.job), 0, NULL);
    const char *s;
#define GET(k, dst)                                                                              \
    if ((s = json_string_value(json_object_get(d, k))))                                          \
        snprintf(dst, sizeof dst, "%s", s);
    GET("database", j->database);
    GET("table", j->table);
    GET("partition_id", j->pid);
    GET("tenant", j->tenant);
    GET("servers", j->servers);
#undef GET
    j->day = (uint32_t)json_integer_value(json_object_get(d, "day"));
    json_decref(d);
}

/* Writes the job's state `to` (and data) through the flow engine: a job not in the catalog is
 * created in SCAN (or a finished record of the partition taken back), its own state is a note,
 * any other state a declared transition, each by CAS. ECONFLICT: someone else advanced it. */
static int job_set(rctx *x, rjob *j, enum ferry_retention_state to, const char *detail,
                   ferry_err *err)
{
    char *data = job_encode(j);
    int rc;
    if (!data)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    else if (!ferry_flow_job_stored(&j->rec))
        rc = ferry_flow_create(&x->journal, &j->rec, data, err); /* to is SCAN */
    else if ((int)to == ferry_flow_job_state(&x->journal, &j->rec))
        rc = ferry_flow_note(&x->journal, &j->rec, detail, data, err);
    else
        rc = ferry_flow_advance(&x->journal, &j->rec, (int)to, detail, data, err);
    free(data);
    if (rc == FERRY_ECONFLICT) {
        j->skip = true;
        problem(x, "job %s: another worker changed it; left to that worker", j->rec.u.job.id);
    }
    return rc;
}

/* Notes why a job stops in its state for this run (kept in the journal's detail). */
static void job_stall(rctx *x, rjob *j, const char *why)
{
    ferry_err e = {0};
    problem(x, "job %s stays in %s: %s", j->rec.u.job.id, j->rec.u.job.state, why);
    j->skip = true;
    int s = ferry_flow_job_state(&x->journal, &j->rec);
    if (s >= 0 && job_set(x, j, (enum ferry_retention_state)s, why, &e) &&
        e.code != FERRY_ECONFLICT)
        problem(x, "job %s: cannot record its detail: %s", j->rec.u.job.id, e.msg);
}

/* ---- planning ------------------------------------------------------------------------------- */

static int load_unfinished(rctx *x, ferry_err *err)
{
    ferry_record_list l = {0};
    int rc = ferry_flow_list_unfinished(&x->journal, &l, err);
    for (size_t i = 0; i < l.n && !rc; i++) {
        rjob *j = job_add(x, "", "", "", err);
        if (!j) {
            rc = FERRY_ENOMEM;
            break;
        }
        ferry_record_free(&j->rec);
        j->rec = l.items[i];
        ferry_record_init(&l.items[i], FERRY_REC_JOB); /* moved: j->rec owns its data now */
        job_decode(j);
    }
    ferry_record_list_free(&l);
    return rc;
}

/* Adds (table, pid) held by server to the plan, when selected. */
static int plan_partition(rctx *x, const ferry_table_def *t, const char *pid, const char *literal,
                          const ferry_partition_key *known, const char *server,
                          const ferry_retention_select *sel, ferry_err *err)
{
    ferry_partition_key key;
    if (known) {
        key = *known;
    } else {
        ferry_err perr = {0};
        if (ferry_partition_parse(t->layout, literal, &key, &perr)) {
            problem(x, "server %s: %s partition %s (%s) is not a ferry partition: %s", server,
                    t->name, pid, literal, perr.msg);
            return FERRY_OK;
        }
    }
    if (!ferry_retention_selects(sel, &key))
        return FERRY_OK;
    rjob *j = job_find(x, t->name, pid);
    if (!j && !(j = job_add(x, t->database, t->name, pid, err)))
        return err->code;
    snprintf(j->tenant, sizeof j->tenant, "%.127s", key.tenant);
    j->day = key.day;
    if (ferry_flow_job_stored(&j->rec) && !ferry_list_has(j->servers, server))
        j->rescan = true;
    if (!ferry_list_add(j->servers, sizeof j->servers, server))
        return ferry_err_set(err, FERRY_EINVAL, "partition %s of %s: too many servers", pid,
                             t->name);
    return FERRY_OK;
}

static int plan(rctx *x, const ferry_retention_select *sel, ferry_err *err)
{
    ferry_fleet *fl = x->fl;
    int rc = FERRY_OK;
    for (size_t s = 0; s < fl->n_servers && !rc; s++) {
        for (size_t t = 0; t < fl->n_tables && !rc; t++) {
            const ferry_table_def *td = &fl->tables[t];
            ferry_ch_partition *parts = NULL;
            size_t n = 0;
            ferry_err lerr = {0};
            if (ferry_ch_list_partitions(fl->servers[s].ch, td->database, td->name, &parts, &n,
                                         &lerr)) {
                problem(x, "server %s: cannot list the partitions of %s.%s: %s",
                        fl->servers[s].name, td->database, td->name, lerr.msg);
                continue;
            }
            for (size_t i = 0; i < n && !rc; i++)
                if (i == 0 || strcmp(parts[i].partition_id, parts[i - 1].partition_id))
                    rc = plan_partition(x, td, parts[i].partition_id, parts[i].partition, NULL,
                                        fl->servers[s].name, sel, err);
            ferry_ch_partitions_free(parts, n);
        }
    }
    /* the catalog's partition records: servers the live listing could not show (down, or the
     * partition only detached there) */
    ferry_record_list l = {0};
    if (!rc)
        rc = ferry_catalog_list(fl->cat, FERRY_REC_PARTITION, NULL, 0, &l, err);
    for (size_t i = 0; i < l.n && !rc; i++) {
        const ferry_partition *p = &l.items[i].u.partition;
        const ferry_table_def *td = ferry_fleet_table_find(fl, p->table);
        if (!td)
            continue;
        ferry_partition_key key = {0};
        snprintf(key.tenant, sizeof key.tenant, "%s", p->tenant);
        key.day = p->day;
        key.split = p->split;
        rc = plan_partition(x, td, p->partition_id, "", &key, p->server, sel, err);
    }
    ferry_record_list_free(&l);
    return rc;
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* The agent's `parts` answer for the job's partition on s (caller frees with
 * ferry_agent_part_list_free); FERRY_ENOTFOUND when the table does not exist there. */
static int agent_parts(rjob *j, ferry_fleet_server *s, ferry_agent_part_list *out,
                       ferry_err *err)
{
    return ferry_agent_parts(s->agent, j->database, j->table, j->pid, out, err);
}

/* The origin of a part's objects (ferry_part): the freeze segment of keys ferry laid out
 * (<db>/<table>/<pid>/<freeze>/<part>/<file>), else "native": ClickHouse wrote them under keys
 * of its own, unique per object, and pointer copies on other servers share them, so one record
 * per part name holds the union of every server's objects. */
static void part_origin(const ferry_agent_pointer_list *files, const char *part, char *out,
                        size_t outsz)
{
    for (size_t i = 0; i < files->n_files; i++)
        for (size_t k = 0; k < files->files[i].n_objects; k++) {
            const char *key = files->files[i].objects[k].store_key;
            size_t pl = strlen(part);
            for (const char *at = key ? strstr(key, part) : NULL; at; at = strstr(at + 1, part)) {
                if (at == key || at[-1] != '/' || at[pl] != '/')
                    continue;
                const char *end = at - 1, *start = end;
                while (start > key && start[-1] != '/')
                    start--;
                if (end - start > 0 && (size_t)(end - start) < outsz &&
                    ferry_starts_with(start, "ferry_")) {
                    snprintf(out, outsz, "%.*s", (int)(end - start), start);
                    return;
                }
            }
        }
    snprintf(out, outsz, "native");
}

/* Records, in the catalog part record (table, pid, origin, part), the objects and the server. */
static int record_part(rctx *x, rjob *j, const char *part, const char *server,
                       const ferry_agent_pointer_list *files, ferry_err *err)
{
    for (int attempt = 0; attempt < CAS_TRIES; attempt++) {
        ferry_record r;
        ferry_record_init(&r, FERRY_REC_PART);
        snprintf(r.u.part.table, sizeof r.u.part.table, "%s", j->table);
        snprintf(r.u.part.partition_id, sizeof r.u.part.partition_id, "%s", j->pid);
        part_origin(files, part, r.u.part.origin, sizeof r.u.part.origin);
        snprintf(r.u.part.name, sizeof r.u.part.name, "%s", part);
        int rc = ferry_catalog_get(x->fl->cat, &r, err);
        bool exists = rc == FERRY_OK;
        if (rc == FERRY_ENOTFOUND) {
            ferry_err_clear(err);
            rc = FERRY_OK;
        }
        if (rc)
            return rc;
        for (size_t i = 0; !rc && i < files->n_files; i++) {
            const ferry_agent_pointer_file *f = &files->files[i];
            for (size_t k = 0; k < f->n_objects; k++) {
                const char *key = f->objects[k].store_key;
                if (!key)
                    continue; /* outside ferry's store: not ferry's to delete */
                bool have = false;
                for (size_t q = 0; q < r.u.part.n_objects && !have; q++)
                    have = !strcmp(r.u.part.objects[q].key, key);
                int64_t size = f->objects[k].size; /* -1: the answer had none */
                if (!have && (rc = ferry_part_add_object(&r.u.part, key,
                                                         size > 0 ? (uint64_t)size : 0, "",
                                                         err)))
                    break;
            }
        }
        if (!rc && !ferry_list_add(r.u.part.servers, sizeof r.u.part.servers, server))
            rc = ferry_err_set(err, FERRY_EINVAL, "part %s: too many servers", part);
        if (!rc && r.u.part.n_objects == 0 && !exists) {
            ferry_record_free(&r);
            return FERRY_OK; /* a part without objects in ferry's store */
        }
        if (!rc)
            rc = exists ? ferry_catalog_update(x->fl->cat, &r, err)
                        : ferry_catalog_create(x->fl->cat, &r, err);
        ferry_record_free(&r);
        if (rc != FERRY_ECONFLICT)
            return rc;
        ferry_err_clear(err);
    }
    return ferry_err_set(err, FERRY_ECONFLICT, "part %s/%s/%s: catalog kept changing", j->table,
                         j->pid, part);
}

typedef struct scan_arg {
    rctx *x;
    rjob *j;
    const char *server;
} scan_arg;

static int scan_part(void *arg, const char *part, bool active, const ferry_agent_pointer_list *files,
                     ferry_err *err)
{
    (void)active; /* a detached folder's pointer files are references too */
    scan_arg *a = arg;
    return record_part(a->x, a->j, part, a->server, files, err);
}

/* SCAN on one server: the pointer files of the partition's parts (active and detached). */
static int scan_server(rctx *x, rjob *j, ferry_fleet_server *s, ferry_err *err)
{
    scan_arg a = {.x = x, .j = j, .server = s->name};
    int rc = ferry_partition_pointers_each(s->agent, s->name, j->database, j->table, j->pid,
                                           scan_part, &a, err);
    if (rc == FERRY_ENOTFOUND) { /* the table is not on this server */
        ferry_err_clear(err);
        return FERRY_OK;
    }
    return rc;
}

static int detach_server(rjob *j, ferry_fleet_server *s, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    ferry_sql_ident(j->database, &sql);
    ferry_buf_puts(&sql, ".");
    ferry_sql_ident(j->table, &sql);
    ferry_buf_puts(&sql, " DETACH PARTITION ID ");
    ferry_sql_quote(j->pid, &sql);
    int rc = ferry_guarded_exec(s->ch, sql.data, NULL, err);
    if (rc == FERRY_EREMOTE && (strstr(err->msg, "UNKNOWN_TABLE") ||
                                strstr(err->msg, "UNKNOWN_DATABASE"))) {
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    ferry_buf_free(&sql);
    return rc;
}

/* REMOVE on one server: every detached folder of the partition; then the catalog forgets that
 * the server holds it. Parts that appeared since DETACH (a late insert) are detached first. */
static int remove_server(rctx *x, rjob *j, ferry_fleet_server *s, ferry_err *err)
{
    ferry_agent_part_list pl = {0};
    int rc = agent_parts(j, s, &pl, err);
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        rc = FERRY_OK;
    } else if (!rc && pl.n_parts) {
        ferry_agent_part_list_free(&pl);
        if (!(rc = detach_server(j, s, err)))
            rc = agent_parts(j, s, &pl, err);
    }
    /* one request per folder (a tmp-ferry-* folder still being written is a conflict) */
    for (size_t i = 0; !rc && i < pl.n_detached; i++)
        rc = ferry_agent_remove_detached(s->agent, j->database, j->table, pl.detached[i].name,
                                         NULL, NULL, err);
    ferry_agent_part_list_free(&pl);
    if (rc)
        return rc;
    /* the catalog: the server no longer references the partition's parts */
    const char *prefix[2] = {j->table, j->pid};
    for (int attempt = 0; attempt < CAS_TRIES; attempt++) {
        ferry_record_list l = {0};
        if ((rc = ferry_catalog_list(x->fl->cat, FERRY_REC_PART, prefix, 2, &l, err)))
            return rc;
        ferry_batch *b = ferry_batch_new();
        for (size_t k = 0; k < l.n && !rc; k++)
            if (ferry_list_has(l.items[k].u.part.servers, s->name)) {
                ferry_list_remove(l.items[k].u.part.servers, s->name);
                rc = ferry_batch_update(b, &l.items[k], err);
            }
        ferry_record pr;
        ferry_record_init(&pr, FERRY_REC_PARTITION);
        snprintf(pr.u.partition.server, sizeof pr.u.partition.server, "%s", s->name);
        snprintf(pr.u.partition.table, sizeof pr.u.partition.table, "%s", j->table);
        snprintf(pr.u.partition.partition_id, sizeof pr.u.partition.partition_id, "%s", j->pid);
        int g = rc ? rc : ferry_catalog_get(x->fl->cat, &pr, err);
        if (g == FERRY_ENOTFOUND)
            ferry_err_clear(err);
        else if (!g)
            rc = ferry_batch_delete(b, &pr, err);
        else
            rc = g;
        if (!rc && ferry_batch_size(b))
            rc = ferry_catalog_commit(x->fl->cat, b, NULL, err);
        ferry_batch_free(b);
        ferry_record_list_free(&l);
        if (rc != FERRY_ECONFLICT)
            return rc;
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    return ferry_err_set(err, FERRY_ECONFLICT, "catalog kept changing under %s", j->table);
}

typedef int (*server_step)(rctx *x, rjob *j, ferry_fleet_server *s, ferry_err *err);

static int detach_step(rctx *x, rjob *j, ferry_fleet_server *s, ferry_err *err)
{
    (void)x;
    return detach_server(j, s, err);
}

/* Runs step on every server of the job; a server the fleet does not know is a problem (its
 * references stay in the catalog, so nothing it may read gets deleted). */
static bool each_server(rctx *x, rjob *j, server_step step, const char *what)
{
    char list[FERRY_LIST_MAX];
    snprintf(list, sizeof list, "%s", j->servers);
    char *names[256];
    size_t n = list[0] ? ferry_split(list, ',', names, 256) : 0;
    for (size_t i = 0; i < n; i++) {
        ferry_fleet_server *s = ferry_fleet_server_find(x->fl, names[i]);
        if (!s) {
            problem(x, "job %s: server %s is not an active shard; its references stay in the "
                    "catalog", j->rec.u.job.id, names[i]);
            continue;
        }
        ferry_err e = {0};
        if (step(x, j, s, &e)) {
            char why[256];
            snprintf(why, sizeof why, "%s on %.60s failed: %.150s", what, s->name, e.msg);
            job_stall(x, j, why);
            return false;
        }
    }
    return true;
}

/* ---- delete --------------------------------------------------------------------------------- */

/* Whether a move of tenant (any tenant when empty) is unfinished: its flow may still need the
 * objects. Finished moves (DONE, or FAILED and rolled back) need nothing, so the catalog's index
 * of unfinished moves is enough. */
static bool move_in_flight(rctx *x, const char *tenant, char *why, size_t whysz)
{
    ferry_record_list l = {0};
    ferry_err e = {0};
    if (ferry_catalog_list_unfinished_moves(x->fl->cat, &l, &e)) {
        snprintf(why, whysz, "cannot read the move journal: %.150s", e.msg);
        return true;
    }
    bool busy = false;
    for (size_t i = 0; i < l.n && !busy; i++) {
        const ferry_move *m = &l.items[i].u.move;
        if (!tenant[0] || !strcmp(m->tenant, tenant)) {
            busy = true;
            snprintf(why, whysz, "move %s of tenant %s is in flight", m->id, m->tenant);
        }
    }
    ferry_record_list_free(&l);
    return busy;
}

static int delete_job(rctx *x, rjob *j, const ferry_refset *live, ferry_objstore *janitor,
                      ferry_err *err)
{
    ferry_record_list all = {0}, mine = {0};
    const char *prefix[2] = {j->table, j->pid};
    int rc = ferry_catalog_list(x->fl->cat, FERRY_REC_PART, NULL, 0, &all, err);
    if (!rc)
        rc = ferry_catalog_list(x->fl->cat, FERRY_REC_PART, prefix, 2, &mine, err);
    size_t n = 0;
    for (size_t i = 0; i < mine.n; i++)
        n += mine.items[i].u.part.n_objects;
    const char **keys = calloc(n + 1, sizeof *keys);
    ferry_retention_verdict *v = calloc(n + 1, sizeof *v);
    if (!rc && (!keys || !v))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc)
        goto out;
    n = 0;
    for (size_t i = 0; i < mine.n; i++)
        for (size_t k = 0; k < mine.items[i].u.part.n_objects; k++)
            keys[n++] = mine.items[i].u.part.objects[k].key;
    ferry_retention_decide(keys, n, live, all.items, all.n, v);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (!v[i].deletable) {
            kept++;
            json_array_append_new(j->kept, json_pack("{s:s, s:s}", "key", v[i].key, "blocker",
                                                     v[i].blocker));
            continue;
        }
        ferry_err derr = {0};
        if (ferry_objstore_delete(janitor, v[i].key, &derr)) {
            kept++;
            json_array_append_new(j->kept, json_pack("{s:s, s:s}", "key", v[i].key, "blocker",
                                                     derr.msg));
            v[i].deletable = false;
            continue;
        }
        j->deleted++;
        FLOG_INFO("retention: deleted object job=%s key=%s", j->rec.u.job.id, v[i].key);
    }
    /* the part records keep only what is still there */
    ferry_batch *b = ferry_batch_new();
    size_t at = 0;
    for (size_t i = 0; i < mine.n && !rc; i++) {
        ferry_part *p = &mine.items[i].u.part;
        size_t w = 0;
        for (size_t k = 0; k < p->n_objects; k++, at++) {
            if (v[at].deletable) {
                j->deleted_bytes += p->objects[k].size;
                continue;
            }
            p->objects[w++] = p->objects[k];
        }
        bool changed = w != p->n_objects;
        p->n_objects = w;
        if (!w && !p->servers[0])
            rc = ferry_batch_delete(b, &mine.items[i], err);
        else if (changed)
            rc = ferry_batch_update(b, &mine.items[i], err);
    }
    if (!rc && ferry_batch_size(b))
        rc = ferry_catalog_commit(x->fl->cat, b, NULL, err);
    ferry_batch_free(b);
    if (rc)
        goto out;
    if (kept) {
        char why[256];
        snprintf(why, sizeof why, "%zu objects still referenced (first: %s by %s); run again "
                 "when they are free", kept, v[0].deletable ? "" : v[0].key,
                 json_string_value(json_object_get(json_array_get(j->kept, 0), "blocker")));
        job_stall(x, j, why);
    } else {
        char d[128];
        snprintf(d, sizeof d, "deleted %zu objects", j->deleted);
        rc = job_set(x, j, FERRY_RETENTION_DONE, d, err);
    }
out:
    free(keys);
    free(v);
    ferry_record_list_free(&all);
    ferry_record_list_free(&mine);
    return rc;
}

/* ---- the run -------------------------------------------------------------------------------- */

static json_t *report_json(rctx *x, uint32_t cutoff)
{
    json_t *jobs = json_array();
    for (size_t i = 0; i < x->n_jobs; i++) {
        rjob *j = &x->jobs[i];
        json_t *servers = json_array();
        char list[FERRY_LIST_MAX];
        snprintf(list, sizeof list, "%s", j->servers);
        char *names[256];
        size_t n = list[0] ? ferry_split(list, ',', names, 256) : 0;
        for (size_t k = 0; k < n; k++)
            json_array_append_new(servers, json_string(names[k]));
        json_array_append_new(
            jobs, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:s, s:s, s:I, s:I, s:O}", "id",
                            j->rec.u.job.id, "database", j->database, "table", j->table,
                            "partition_id", j->pid, "tenant", j->tenant, "day",
                            (json_int_t)j->day, "servers", servers, "state",
                            j->rec.u.job.state[0] ? j->rec.u.job.state : "PLANNED", "detail",
                            j->rec.u.job.detail, "deleted", (json_int_t)j->deleted,
                            "deleted_bytes", (json_int_t)j->deleted_bytes, "kept", j->kept));
    }
    return json_pack("{s:I, s:s?, s:b, s:b, s:b, s:o, s:O}", "cutoff", (json_int_t)cutoff,
                     "tenant", x->opt->tenant, "all", x->opt->all, "dry_run", x->opt->dry_run,
                     "complete", x->complete, "jobs", jobs, "problems", x->problems);
}

static bool state_is(const rjob *j, const char *s) { return !strcmp(j->rec.u.job.state, s); }

int ferry_retention_run(ferry_fleet *fl, const ferry_retention_options *opt, json_t **report,
                        ferry_err *err)
{
    *report = NULL;
    rctx x = {.fl = fl, .opt = opt, .problems = json_array(), .complete = true};
    ferry_sweep_refs live = {0};
    ferry_refset liveset = {0};
    ferry_objstore *janitor = NULL;
    uint32_t cutoff = 0;
    int rc = FERRY_OK;
    time_t now = opt->now ? opt->now : time(NULL);
    if (opt->owner)
        snprintf(x.owner, sizeof x.owner, "%s", opt->owner);
    else {
        char host[64] = "host";
        gethostname(host, sizeof host - 1);
        snprintf(x.owner, sizeof x.owner, "retention@%.60s:%ld", host, (long)getpid());
    }
    ferry_flow_journal_init(&x.journal, fl->cat, &ferry_retention_flow, x.owner);

    /* input */
    if (opt->all && !opt->tenant) {
        rc = ferry_err_set(err, FERRY_EINVAL, "--all removes all of one tenant's data: it needs "
                           "--tenant T");
        goto out;
    }
    if (!opt->all && !opt->keep_s) {
        rc = ferry_err_set(err, FERRY_EINVAL, "--keep DURATION is required (e.g. --keep 90d), "
                           "or --tenant T --all");
        goto out;
    }
    if (opt->all && opt->keep_s) {
        rc = ferry_err_set(err, FERRY_EINVAL, "--all removes everything of the tenant: drop "
                           "--keep");
        goto out;
    }
    if (!opt->all && (rc = ferry_retention_cutoff(now, opt->keep_s, fl->settings.hot_days,
                                                  &cutoff, err)))
        goto out;
    if (opt->tenant) {
        ferry_record t;
        ferry_record_init(&t, FERRY_REC_TENANT);
        snprintf(t.u.tenant.name, sizeof t.u.tenant.name, "%s", opt->tenant);
        rc = strlen(opt->tenant) >= sizeof t.u.tenant.name ? FERRY_ENOTFOUND
                                                            : ferry_catalog_get(fl->cat, &t, err);
        if (rc == FERRY_ENOTFOUND) {
            ferry_err_clear(err);
            rc = ferry_err_set(err, FERRY_EINVAL, "unknown tenant '%s': the catalog has no such "
                               "tenant ('ferry status' lists them)", opt->tenant);
        }
        if (rc)
            goto out;
    }

    /* plan: unfinished jobs first, then what the servers and the catalog hold */
    if ((rc = load_unfinished(&x, err)))
        goto out;
    ferry_retention_select sel = {.tenant = opt->tenant, .all = opt->all, .cutoff = cutoff};
    if ((rc = plan(&x, &sel, err)))
        goto out;
    if (opt->dry_run)
        goto done;

    /* record every job; a finished record of the same partition starts over */
    for (size_t i = 0; i < x.n_jobs; i++) {
        rjob *j = &x.jobs[i];
        ferry_err e = {0};
        if (ferry_flow_job_stored(&j->rec)) { /* unfinished: resumed */
            if (j->rescan && !state_is(j, "SCAN") &&
                job_set(&x, j, FERRY_RETENTION_SCAN, "found on another server", &e) &&
                e.code != FERRY_ECONFLICT) {
                rc = ferry_err_set(err, e.code, "%s", e.msg);
                goto out;
            }
            continue;
        }
        /* created, or a finished record of the partition taken back to SCAN */
        if (job_set(&x, j, FERRY_RETENTION_SCAN, "", &e) && e.code != FERRY_ECONFLICT) {
            rc = ferry_err_set(err, e.code, "%s", e.msg);
            goto out;
        }
    }

    /* SCAN, DETACH, REMOVE per job */
    for (size_t i = 0; i < x.n_jobs; i++) {
        rjob *j = &x.jobs[i];
        ferry_err e = {0};
        if (!j->skip && state_is(j, "SCAN") && each_server(&x, j, scan_server, "scan") &&
            job_set(&x, j, FERRY_RETENTION_DETACH, "", &e))
            j->skip = true;
        if (!j->skip && state_is(j, "DETACH") && each_server(&x, j, detach_step, "DETACH") &&
            job_set(&x, j, FERRY_RETENTION_REMOVE, "", &e))
            j->skip = true;
        if (!j->skip && state_is(j, "REMOVE") &&
            each_server(&x, j, remove_server, "removing detached folders") &&
            job_set(&x, j, FERRY_RETENTION_DELETE, "", &e))
            j->skip = true;
        if (e.code && e.code != FERRY_ECONFLICT)
            problem(&x, "job %s: %s", j->rec.u.job.id, e.msg);
    }

    /* DELETE: one live read of every server for all jobs */
    bool any = false;
    for (size_t i = 0; i < x.n_jobs; i++)
        any |= !x.jobs[i].skip && state_is(&x.jobs[i], "DELETE");
    if (any) {
        size_t failed = 0;
        json_t *probs = json_array();
        if ((rc = ferry_sweep_read_pointers(fl, &live, probs, &failed, err))) {
            json_decref(probs);
            goto out;
        }
        size_t k;
        json_t *p;
        json_array_foreach(probs, k, p) problem(&x, "live check: %s", json_string_value(p));
        json_decref(probs);
        ferry_err jerr = {0};
        if (failed) {
            for (size_t i = 0; i < x.n_jobs; i++)
                if (!x.jobs[i].skip && state_is(&x.jobs[i], "DELETE"))
                    job_stall(&x, &x.jobs[i], "the live check could not read every server's "
                              "pointer files; nothing deleted");
        } else if (ferry_fleet_store(fl, FERRY_ROLE_JANITOR, &janitor, &jerr)) {
            rc = ferry_err_set(err, jerr.code, "cannot open the store as janitor: %s", jerr.msg);
            goto out;
        } else if (!(rc = ferry_refset_build(&live, &liveset, err))) {
            for (size_t i = 0; i < x.n_jobs && !rc; i++) {
                rjob *j = &x.jobs[i];
                if (j->skip || !state_is(j, "DELETE"))
                    continue;
                char why[256];
                if (move_in_flight(&x, j->tenant, why, sizeof why)) {
                    job_stall(&x, j, why);
                    continue;
                }
                rc = delete_job(&x, j, &liveset, janitor, err);
            }
            if (rc)
                goto out;
        }
    }
done:
    for (size_t i = 0; i < x.n_jobs; i++)
        if (!state_is(&x.jobs[i], "DONE"))
            x.complete = false;
    *report = report_json(&x, cutoff);
out:
    for (size_t i = 0; i < x.n_jobs; i++) {
        ferry_record_free(&x.jobs[i].rec);
        json_decref(x.jobs[i].kept);
    }
    free(x.jobs);
    json_decref(x.problems);
    ferry_refset_free(&liveset);
    ferry_sweep_refs_free(&live);
    ferry_objstore_close(janitor);
    return rc;
}
