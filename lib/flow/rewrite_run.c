/* A rewrite run (ferry_rewrite_run): opens the fleet, takes the "rewrite" lease, resumes the
 * unfinished rewrite jobs of the journal, finds the tenant's cold partitions on every server
 * (every replica of its slices holds its own), counts the rows the expression changes, and runs
 * a job for each partition with rows to change (rewrite.c has the job). A dry run counts and
 * shows a sample of the rows instead. */
#define _DEFAULT_SOURCE
#include "flow/rewrite_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"

static double now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec * 1000.0 + (double)tv.tv_usec / 1000.0;
}

static rw_job *job_new(rw_ctx *x, ferry_err *err)
{
    if (x->n_jobs == x->cap_jobs) {
        size_t cap = x->cap_jobs ? x->cap_jobs * 2 : 16;
        rw_job *n = realloc(x->jobs, cap * sizeof *n);
        if (!n) {
            ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            return NULL;
        }
        x->jobs = n;
        x->cap_jobs = cap;
    }
    rw_job *j = &x->jobs[x->n_jobs++];
    memset(j, 0, sizeof *j);
    ferry_record_init(&j->rec, FERRY_REC_JOB);
    return j;
}

/* The job's working fields (server, table definition, build table) from its state. */
static int job_bind(rw_ctx *x, rw_job *j, ferry_err *err)
{
    j->srv = ferry_fleet_server_find(x->fl, j->st.server);
    j->def = ferry_fleet_table_find(x->fl, j->st.catalog_table);
    if (!j->srv || !j->def)
        return ferry_err_set(err, FERRY_ENOTFOUND, "job %s: server %s or table %s is no longer "
                             "in the catalog", j->rec.u.job.id, j->st.server,
                             j->st.catalog_table);
    if (snprintf(j->build, sizeof j->build, "%s_ferry_rewrite", j->st.table) >=
        (int)sizeof j->build)
        return ferry_err_set(err, FERRY_EINVAL, "table %s: name too long for its build table",
                             j->st.table);
    return FERRY_OK;
}

static bool has_job(rw_ctx *x, const char *id)
{
    for (size_t i = 0; i < x->n_jobs; i++)
        if (!strcmp(x->jobs[i].rec.u.job.id, id))
            return true;
    return false;
}

/* Loads every unfinished rewrite job: they run with their journaled expressions. */
static int resume_jobs(rw_ctx *x, ferry_err *err)
{
    ferry_record_list l = {0};
    int rc = ferry_flow_list_unfinished(&x->journal, &l, err);
    for (size_t i = 0; !rc && i < l.n; i++) {
        ferry_job *jb = &l.items[i].u.job;
        rw_job *j = job_new(x, err);
        if (!j) {
            rc = FERRY_ENOMEM;
            break;
        }
        ferry_record_free(&j->rec);
        j->rec = l.items[i];
        ferry_record_init(&l.items[i], FERRY_REC_JOB); /* moved: j->rec owns its data now */
        jb = &j->rec.u.job;
        j->state = (enum ferry_rewrite_state)ferry_flow_job_state(&x->journal, &j->rec);
        j->resumed = true;
        ferry_err e = {0};
        /* a record whose data this version cannot read is left as it is, not run, and reported
         * with the key at fault */
        int brc = rw_state_decode(ferry_job_data(jb), &j->st, &e);
        if (brc)
            ferry_err_prefix(&e, "job %s: ", jb->id);
        else
            brc = job_bind(x, j, &e);
        if (brc) {
            j->rc = brc;
            j->err = e;
            j->out = true;
        }
    }
    ferry_record_list_free(&l);
    return rc;
}

/* The first rows (JSON objects) of the partitions pids of table matching the job's filter, for
 * the dry run; with --update the new value as ferry_new_value. */
static void sample_rows(rw_ctx *x, ferry_fleet_server *srv, const ferry_table_def *def,
                        const char *table, const char *in_list, const char *mode,
                        const char *expr, const char *where)
{
    json_t *sample = json_object_get(x->report, "sample");
    size_t want = x->opt->sample ? x->opt->sample : 5;
    if (json_array_size(sample) >= want)
        return;
    ferry_buf sql = FERRY_BUF_INIT, out = FERRY_BUF_INIT;
    ferry_err err = {0};
    ferry_buf_puts(&sql, "SELECT *");
    if (!strcmp(mode, "update"))
        ferry_buf_printf(&sql, ", (%s) AS ferry_new_value", expr);
    ferry_buf_puts(&sql, " FROM ");
    rw_qualified(&sql, def->database, table);
    ferry_buf_printf(&sql, " WHERE _partition_id IN (%s) AND ", in_list);
    rw_match_sql(&sql, mode, expr, where);
    ferry_buf_printf(&sql, " LIMIT %zu FORMAT JSONEachRow", want - json_array_size(sample));
    if (!ferry_guarded_exec(srv->ch, ferry_buf_cstr(&sql), &out, &err) && out.len) {
        char *line = out.data, *end = out.data + out.len;
        while (line < end) {
            char *nl = memchr(line, '\n', (size_t)(end - line));
            if (!nl)
                nl = end;
            json_t *o = json_loadb(line, (size_t)(nl - line), 0, NULL);
            if (o) {
                json_object_set_new(o, "ferry_server", json_string(srv->name));
                json_array_append_new(sample, o);
            }
            line = nl + 1;
        }
    }
    ferry_buf_free(&sql);
    ferry_buf_free(&out);
}

typedef struct cand {
    char pid[FERRY_NAME_MAX];
    ferry_partition_key key;
    uint64_t rows, matched;
} cand;

/* A new job (PLANNED, written by rw_journal) for one partition, or a finished record of the same
 * id taken back. */
static int plan_job(rw_ctx *x, ferry_fleet_server *srv, const ferry_table_def *def,
                    const char *table, const cand *c, ferry_err *err)
{
    char id[3 * FERRY_NAME_MAX + 16];
    if (snprintf(id, sizeof id, "rewrite.%s.%s.%s", srv->name, table, c->pid) >=
        (int)sizeof ((ferry_job *)0)->id)
        return ferry_err_set(err, FERRY_EINVAL, "job id for %s/%s/%s too long", srv->name, table,
                             c->pid);
    if (has_job(x, id))
        return FERRY_OK; /* resumed: it carries its own expression */
    rw_job *j = job_new(x, err);
    if (!j)
        return FERRY_ENOMEM;
    ferry_flow_job_init(&x->journal, &j->rec, id, NULL); /* checked above: it fits */
    const ferry_rewrite_options *o = x->opt;
    bool upd = o->update_col != NULL;
    rw_state *st = &j->st;
    int rc = rw_state_plan(st, srv->name, def->database, table, def->name, c->pid, c->key.tenant,
                           c->key.day, c->key.split, err);
    if (!rc)
        rc = rw_state_set_change(st, o->update_col, upd ? o->update_expr : o->delete_where,
                                 o->where, err);
    st->rows_before = c->rows;
    st->rows_matched = c->matched;
    st->has_rows_before = st->has_rows_matched = true;
    j->state = FERRY_REWRITE_PLANNED;
    if (!rc)
        rc = job_bind(x, j, err);
    if (!rc) /* created, or a finished record of the same id taken back (unfinished ones were
              * resumed) */
        rc = rw_journal(x, j, FERRY_REWRITE_PLANNED, NULL, err);
    if (rc) {
        rw_state_free(st);
        ferry_record_free(&j->rec);
        x->n_jobs--;
    }
    return rc;
}

static void skip(rw_ctx *x, const char *server, const char *table, const char *pid,
                 const char *reason)
{
    json_array_append_new(x->skipped, json_pack("{s:s, s:s, s:s, s:s}", "server", server,
                                                "table", table, "partition_id", pid, "reason",
                                                reason));
}

/* The tenant's partitions of one ClickHouse table on one server that the options select. */
static int scan_table(rw_ctx *x, ferry_fleet_server *srv, const ferry_table_def *def,
                      const char *table, size_t *found, ferry_err *err)
{
    const ferry_rewrite_options *o = x->opt;
    ferry_buf sql = FERRY_BUF_INIT, in = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    cand *cs = NULL;
    size_t nc = 0;
    if (o->update_col && (!strcmp(o->update_col, def->tenant_column) ||
                          !strcmp(o->update_col, def->day_column) ||
                          !strcmp(o->update_col, def->split_column)))
        return ferry_err_set(err, FERRY_EINVAL, "--update: %s is a partition column of table %s "
                             "(tenant, day or split): changing it would move rows out of their "
                             "partition; only other columns can be rewritten in place",
                             o->update_col, def->name);
    ferry_buf_puts(&sql, "SELECT partition_id, any(partition), countIf(NOT remote) FROM (SELECT "
                         "partition_id, partition, disk_name IN (SELECT name FROM system.disks "
                         "WHERE is_remote) AS remote FROM system.parts WHERE active AND rows > 0 "
                         "AND database = ");
    ferry_sql_quote(def->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, ") GROUP BY partition_id ORDER BY partition_id FORMAT TabSeparated");
    int rc = rw_sql(srv, ferry_buf_cstr(&sql), &rows, err);
    if (rc || !rows.n_rows)
        goto out;
    if (!(cs = calloc(rows.n_rows, sizeof *cs))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < rows.n_rows && rows.n_cols == 3; i++) {
        const char *pid = ferry_ch_rows_get(&rows, i, 0);
        ferry_partition_key key;
        ferry_err perr = {0};
        if (ferry_partition_parse(def->layout, ferry_ch_rows_get(&rows, i, 1), &key, &perr))
            continue;
        if (def->layout != FERRY_LAYOUT_SHARED)
            snprintf(key.tenant, sizeof key.tenant, "%s", o->tenant);
        if (strcmp(key.tenant, o->tenant) || (o->split >= 0 && key.split != (uint32_t)o->split) ||
            (o->partition_id && strcmp(o->partition_id, pid)) ||
            (o->day_from && (key.day < o->day_from || key.day > o->day_to)))
            continue;
        (*found)++;
        char id[3 * FERRY_NAME_MAX + 16];
        snprintf(id, sizeof id, "rewrite.%s.%s.%s", srv->name, table, pid);
        if (has_job(x, id))
            continue; /* resumed (it may be hot between its swap and its tiering) */
        if (strcmp(ferry_ch_rows_get(&rows, i, 2), "0")) {
            skip(x, srv->name, table, pid, "hot parts: not cold (yet), or late rows since it was "
                 "tiered; run ferry tier first");
            continue;
        }
        snprintf(cs[nc].pid, sizeof cs[nc].pid, "%s", pid);
        cs[nc++].key = key;
        if (in.len)
            ferry_buf_puts(&in, ", ");
        ferry_sql_quote(pid, &in);
    }
    if (!nc)
        goto out;
    /* how many rows the expression changes, per partition (also its first check by ClickHouse) */
    bool upd = o->update_col != NULL;
    const char *mode = upd ? "update" : "delete", *expr = upd ? o->update_expr : o->delete_where;
    ferry_ch_rows cnt = {0};
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "SELECT _partition_id, count(), countIf(");
    rw_match_sql(&sql, mode, expr, o->where);
    ferry_buf_puts(&sql, ")");
    if (upd) /* the new value must be computable (and its column exist) */
        ferry_buf_printf(&sql, ", count(if(coalesce((%s), 0), (%s), `%s`))", o->where, expr,
                         o->update_col);
    ferry_buf_puts(&sql, " FROM ");
    rw_qualified(&sql, def->database, table);
    ferry_buf_printf(&sql, " WHERE _partition_id IN (%s) GROUP BY _partition_id FORMAT "
                     "TabSeparated", ferry_buf_cstr(&in));
    if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), &cnt, err))) {
        ferry_err_prefix(err, "checking the expression on %s.%s: ", def->database, table);
        goto out;
    }
    for (size_t r = 0; r < cnt.n_rows; r++)
        for (size_t k = 0; k < nc; k++)
            if (!strcmp(cs[k].pid, ferry_ch_rows_get(&cnt, r, 0))) {
                ferry_parse_u64(ferry_ch_rows_get(&cnt, r, 1), &cs[k].rows);
                ferry_parse_u64(ferry_ch_rows_get(&cnt, r, 2), &cs[k].matched);
            }
    ferry_ch_rows_free(&cnt);
    bool sampled = false;
    for (size_t k = 0; k < nc && !rc; k++) {
        if (!cs[k].matched) {
            skip(x, srv->name, table, cs[k].pid, "no row matches");
            continue;
        }
        if (!o->dry_run) {
            rc = plan_job(x, srv, def, table, &cs[k], err);
            continue;
        }
        json_array_append_new(json_object_get(x->report, "planned"),
                              json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "server", srv->name,
                                        "table", table, "partition_id", cs[k].pid, "day",
                                        (json_int_t)cs[k].key.day, "rows_before",
                                        (json_int_t)cs[k].rows, "rows_matched",
                                        (json_int_t)cs[k].matched));
        if (!sampled) {
            sample_rows(x, srv, def, table, ferry_buf_cstr(&in), mode, expr, o->where);
            sampled = true;
        }
    }
out:
    free(cs);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    ferry_buf_free(&in);
    return rc;
}

static int scan(rw_ctx *x, ferry_err *err)
{
    size_t found = 0;
    int rc = FERRY_OK;
    for (size_t s = 0; s < x->fl->n_servers && !rc; s++) {
        ferry_fleet_server *srv = &x->fl->servers[s];
        for (size_t t = 0; t < x->fl->n_tables && !rc; t++) {
            const ferry_table_def *def = &x->fl->tables[t];
            char table[FERRY_NAME_MAX];
            if (def->layout == FERRY_LAYOUT_SHARED)
                snprintf(table, sizeof table, "%s", def->name);
            else if (snprintf(table, sizeof table, "%s_%s", def->name, x->opt->tenant) >=
                     (int)sizeof table)
                continue;
            rc = scan_table(x, srv, def, table, &found, err);
        }
    }
    if (!rc && !found && !x->n_jobs)
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "no partition of tenant %s%s%s on any server "
                           "(check the tenant name, --partition or --days)", x->opt->tenant,
                           x->opt->partition_id ? " with id " : "",
                           x->opt->partition_id ? x->opt->partition_id : "");
    return rc;
}

/* Tells the caller that job j ended this run (DONE, failed, or left in its state). */
static void job_ended(rw_ctx *x, rw_job *j, size_t *done, size_t *failed, uint64_t *rows_read,
                      uint64_t *rows_changed, uint64_t rows_total, double t0)
{
    (*done)++;
    *rows_read += j->st.rows_before;
    if (j->rc || j->state != FERRY_REWRITE_DONE)
        (*failed)++;
    else
        *rows_changed += j->st.rows_matched;
    if (!x->opt->progress)
        return;
    ferry_rewrite_progress p = {.done = *done, .total = x->n_jobs, .failed = *failed,
                                .rows_read = *rows_read, .rows_total = rows_total,
                                .rows_changed = *rows_changed,
                                .elapsed_s = (now_ms() - t0) / 1000.0, .eta_s = -1,
                                .job = j->rec.u.job.id, .server = j->st.server,
                                .partition_id = j->st.pid,
                                .state = ferry_rewrite_state_name(j->state)};
    /* by rows: partitions of one tenant differ in size far more than in count */
    double frac = rows_total ? (double)*rows_read / (double)rows_total
                             : (double)*done / (double)x->n_jobs;
    if (frac > 0)
        p.eta_s = frac >= 1 ? 0 : p.elapsed_s * (1 - frac) / frac;
    x->opt->progress(&p, x->opt->progress_arg);
}

/* Runs jobs [from, to) to DONE (or to where they stop): BUILD and SWAP job by job, TIER as one
 * tiering run per (server, table), RECORD job by job. */
static void run_batch(rw_ctx *x, size_t from, size_t to, rw_job **group)
{
    ferry_err err = {0};
    for (size_t i = from; i < to; i++) {
        rw_job *j = &x->jobs[i];
        while (!j->out && j->state <= FERRY_REWRITE_SWAP) {
            int rc = j->state == FERRY_REWRITE_SWAP ? rw_step_swap(x, j, &err)
                                                    : rw_step_build(x, j, &err);
            if (rc)
                rw_job_fail(x, j, rc, &err);
        }
    }
    for (size_t i = from; i < to; i++) {
        rw_job *a = &x->jobs[i];
        if (a->out || a->state != FERRY_REWRITE_TIER)
            continue;
        size_t n = 0;
        for (size_t k = i; k < to; k++) {
            rw_job *b = &x->jobs[k];
            if (!b->out && b->state == FERRY_REWRITE_TIER && b->srv == a->srv &&
                !strcmp(a->st.catalog_table, b->st.catalog_table))
                group[n++] = b;
        }
        rw_step_tier(x, group, n, &err);
    }
    for (size_t i = from; i < to; i++) {
        rw_job *j = &x->jobs[i];
        if (!j->out && j->state == FERRY_REWRITE_RECORD) {
            int rc = rw_step_record(x, j, &err);
            if (rc)
                rw_job_fail(x, j, rc, &err);
        }
    }
}

/* Runs every job in batches of FERRY_REWRITE_BATCH: a tenant-wide erasure holds at most one
 * batch of rebuilt partitions on the hot disks at a time, and progress is reported as each
 * batch's jobs end. */
static void run_jobs(rw_ctx *x, double t0)
{
    rw_job **group = calloc(x->n_jobs + 1, sizeof *group);
    if (!group)
        return;
    uint64_t rows_total = 0, rows_read = 0, rows_changed = 0;
    size_t done = 0, failed = 0;
    for (size_t i = 0; i < x->n_jobs; i++)
        rows_total += x->jobs[i].st.rows_before;
    for (size_t from = 0; from < x->n_jobs; from += FERRY_REWRITE_BATCH) {
        size_t to = from + FERRY_REWRITE_BATCH < x->n_jobs ? from + FERRY_REWRITE_BATCH
                                                           : x->n_jobs;
        run_batch(x, from, to, group);
        for (size_t i = from; i < to; i++)
            job_ended(x, &x->jobs[i], &done, &failed, &rows_read, &rows_changed, rows_total, t0);
    }
    free(group);
}

static void report_jobs(rw_ctx *x, int *first_rc, ferry_err *first_err)
{
    json_t *jobs = json_object_get(x->report, "jobs");
    size_t failed = 0, resumed = 0, done = 0;
    uint64_t changed = 0;
    for (size_t i = 0; i < x->n_jobs; i++) {
        rw_job *j = &x->jobs[i];
        const rw_state *st = &j->st;
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:b}", "id",
                              j->rec.u.job.id, "server", st->server, "table", st->table,
                              "partition_id", st->pid, "day", (json_int_t)st->day, "state",
                              ferry_rewrite_state_name(j->state), "rows_before",
                              (json_int_t)st->rows_before, "rows_matched",
                              (json_int_t)st->rows_matched, "rows_after",
                              (json_int_t)st->rows_after, "resumed", j->resumed);
        if (j->rc) {
            json_object_set_new(o, "detail", json_string(j->err.msg));
            failed++;
            if (!*first_rc) {
                *first_rc = j->rc;
                *first_err = j->err;
            }
        } else if (j->state != FERRY_REWRITE_DONE) {
            failed++;
            if (!*first_rc)
                *first_rc = ferry_err_set(first_err, FERRY_EINTERNAL, "job %s stopped in %s",
                                          j->rec.u.job.id, ferry_rewrite_state_name(j->state));
        } else {
            done++;
            changed += j->st.rows_matched;
        }
        resumed += j->resumed;
        json_array_append_new(jobs, o);
    }
    json_object_set_new(x->report, "partitions", json_integer((json_int_t)done));
    json_object_set_new(x->report, "rows_changed", json_integer((json_int_t)changed));
    json_object_set_new(x->report, "jobs_resumed", json_integer((json_int_t)resumed));
    json_object_set_new(x->report, "jobs_failed", json_integer((json_int_t)failed));
}

int ferry_rewrite_run(const ferry_rewrite_options *opt, json_t **report, ferry_err *err)
{
    rw_ctx x = {0};
    ferry_lease *lease = NULL;
    double t0 = now_ms();
    int rc;
    *report = NULL;
    x.opt = opt;
    if (opt->owner) {
        snprintf(x.owner, sizeof x.owner, "%s", opt->owner);
    } else {
        char host[64] = "localhost";
        gethostname(host, sizeof host - 1);
        snprintf(x.owner, sizeof x.owner, "%s:%d", host, (int)getpid());
    }
    if ((rc = ferry_fleet_open(opt->config_path, &x.fl, err)))
        goto out;
    ferry_flow_journal_init(&x.journal, x.fl->cat, &ferry_rewrite_flow, x.owner);
    x.skipped = json_array();
    bool upd = opt->update_col != NULL;
    x.report = json_pack("{s:b, s:s, s:s, s:[], s:[], s:[], s:O}", "dry_run", opt->dry_run,
                         "tenant", opt->tenant, "mode", upd ? "update" : "delete", "jobs",
                         "planned", "sample", "skipped", x.skipped);
    if (!opt->dry_run) {
        if ((rc = ferry_catalog_lease_acquire(x.fl->cat, "rewrite", x.owner, &lease, err))) {
            if (rc == FERRY_ECONFLICT)
                ferry_err_prefix(err, "another rewrite run is in progress: ");
            goto out;
        }
        if ((rc = resume_jobs(&x, err)))
            goto out;
    }
    if ((rc = scan(&x, err)))
        goto out;
    if (!opt->dry_run)
        run_jobs(&x, t0);
    int first = FERRY_OK;
    ferry_err first_err = {0};
    report_jobs(&x, &first, &first_err);
    json_object_set_new(x.report, "wall_ms", json_real(now_ms() - t0));
    if (opt->dry_run) {
        uint64_t m = 0;
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(x.report, "planned"), i, p)
            m += (uint64_t)json_integer_value(json_object_get(p, "rows_matched"));
        json_object_set_new(x.report, "rows_changed", json_integer((json_int_t)m));
        json_object_set_new(x.report, "partitions",
                            json_integer((json_int_t)json_array_size(json_object_get(x.report,
                                                                                     "planned"))));
    }
    *report = x.report;
    x.report = NULL;
    if (first) {
        rc = first;
        *err = first_err;
    }
out:
    if (lease)
        ferry_catalog_lease_release(x.fl->cat, lease);
    for (size_t i = 0; i < x.n_jobs; i++) {
        rw_state_free(&x.jobs[i].st);
        ferry_record_free(&x.jobs[i].rec);
    }
    free(x.jobs);
    json_decref(x.skipped);
    json_decref(x.report);
    ferry_fleet_close(x.fl);
    return rc;
}
