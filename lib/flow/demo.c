/* `ferry demo`'s story (include/ferry/demo.h): the lab, the tenants, the ingest, tiering, a
 * fourth node and the rebalance, phase by phase; the model and the final checks are in
 * demo_check.c. */
#define _DEFAULT_SOURCE
#include "flow/demo_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/chdb.h"
#include "ferry/clock.h"
#include "ferry/init.h"
#include "ferry/config.h"
#include "ferry/lab.h"
#include "ferry/log.h"
#include "ferry/move.h"
#include "ferry/plan_run.h"
#include "ferry/split.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"
#include "ferry/tier.h"

/* ---- small helpers ------------------------------------------------------------------------- */

double demo_elapsed(const demo *d)
{
    return ferry_clock_s() - d->t0;
}

void demo_progress(const demo *d, const char *fmt, ...)
{
    if (!d->o.progress)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    d->o.progress(demo_elapsed(d), line, d->o.progress_arg);
}

/* CPU seconds (user + system) used so far by the demo's own process (*self) and by its nodes'
 * processes (*nodes: ClickHouse and the agent run in each ferry-node): what a phase costs the
 * machine, whatever the wall time. On 2 cores a phase cannot finish in less than its CPU
 * seconds / 2. A node whose /proc entry cannot be read counts 0 (it stopped). */
static void demo_cpu_seconds(const demo *d, double *self, double *nodes)
{
    struct timespec ts;
    *self = *nodes = 0;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
        *self = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    long tick = sysconf(_SC_CLK_TCK);
    for (size_t i = 0; i < d->n_nodes && tick > 0; i++) {
        char path[64], line[1024];
        snprintf(path, sizeof path, "/proc/%ld/stat", d->nodes[i].pid);
        FILE *f = d->nodes[i].pid > 0 ? fopen(path, "r") : NULL;
        if (!f)
            continue;
        size_t n = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[n] = '\0';
        /* fields after the command (which may hold spaces, so after its closing parenthesis):
         * state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
        const char *p = strrchr(line, ')');
        unsigned long ut = 0, st = 0;
        if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
            *nodes += (double)(ut + st) / (double)tick;
    }
}

static void phase_done(demo *d, const char *name, double since)
{
    json_object_set_new(d->r->phases, name, json_real(round((demo_elapsed(d) - since) * 10) / 10));
    double self, nodes;
    demo_cpu_seconds(d, &self, &nodes);
    json_object_set_new(d->r->phase_cpu, name,
                        json_pack("{s:f, s:f}", "ferry", round((self - d->cpu_self) * 10) / 10,
                                  "nodes", round((nodes - d->cpu_nodes) * 10) / 10));
    d->cpu_self = self;
    d->cpu_nodes = nodes;
}

void demo_verify_fail(demo *d, const char *fmt, ...)
{
    if (!d->r->verify_failures++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->r->first_failure, sizeof d->r->first_failure, fmt, ap);
        va_end(ap);
    }
}

static int sql_exec(demo_node *n, const char *sql, ferry_err *err)
{
    int rc = ferry_guarded_exec(n->ch, sql, NULL, err);
    if (rc)
        ferry_err_prefix(err, "%s: ", n->name);
    return rc;
}

int demo_sql_rows(demo_node *n, const char *sql, ferry_ch_rows *rows, ferry_err *err)
{
    int rc = ferry_guarded_rows(n->ch, sql, rows, err);
    if (rc)
        ferry_err_prefix(err, "%s: ", n->name);
    return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* ---- phases ----------------------------------------------------------------------------------- */

static const char demo_table_conf[] =
    "\n# added by ferry demo: the demo's table (docs/demo.md)\n"
    "[table \"" DEMO_TABLE "\"]\ndatabase = default\nlayout = shared\ntenant_column = tenant\n"
    "day_column = day\nsplit_column = split\nsplit_key = user\n";

static const char demo_ddl[] =
    "CREATE TABLE IF NOT EXISTS default." DEMO_TABLE " (tenant String, day UInt32, split UInt8, "
    "user UInt64, v UInt64, w FixedString(64)) ENGINE = MergeTree PARTITION BY (tenant, day, split) "
    "ORDER BY user SETTINGS storage_policy = 'tiered'";

/* The lab rewrites ferry.conf on add-node: the table section goes back at the end. */
static int append_table_conf(demo *d, ferry_err *err)
{
    FILE *f = fopen(d->r->conf, "a");
    if (!f)
        return ferry_err_set(err, FERRY_EIO, "%s: %s", d->r->conf, strerror(errno));
    int bad = fputs(demo_table_conf, f) < 0;
    bad |= fclose(f) != 0;
    return bad ? ferry_err_set(err, FERRY_EIO, "%s: write failed", d->r->conf) : FERRY_OK;
}

/* Reads the lab's nodes and opens a ClickHouse client for each new one; creates the table. */
static int open_nodes(demo *d, ferry_err *err)
{
    json_t *st = NULL;
    int rc = ferry_lab_status(d->r->dir, &st, err);
    if (rc)
        return rc;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(st, "nodes"), i, n)
    {
        if (i < d->n_nodes || i >= FERRY_DEMO_NODES)
            continue;
        demo_node *dn = &d->nodes[d->n_nodes];
        snprintf(dn->name, sizeof dn->name, "%s", json_string_value(json_object_get(n, "name")));
        snprintf(dn->url, sizeof dn->url, "%s", json_string_value(json_object_get(n, "http")));
        dn->pid = (long)json_integer_value(json_object_get(n, "pid"));
        ferry_ch_options co = {.url = dn->url, .user = "default", .max_attempts = 3};
        if ((rc = ferry_ch_client_new(&co, &dn->ch, err)))
            break;
        snprintf(d->r->node_urls[d->n_nodes], sizeof d->r->node_urls[0], "%s", dn->url);
        d->r->n_nodes = ++d->n_nodes;
        if ((rc = sql_exec(dn, demo_ddl, err)))
            break;
    }
    json_decref(st);
    return rc;
}

static demo_node *node_named(demo *d, const char *name)
{
    for (size_t i = 0; i < d->n_nodes; i++)
        if (!strcmp(d->nodes[i].name, name))
            return &d->nodes[i];
    return NULL;
}

/* Registers every tenant with its split count (ferry_split_set: slices placed on the active
 * shards and routed there, as `ferry tenant add --splits K`), then reads the routes. */
static int register_tenants(demo *d, ferry_err *err)
{
    ferry_catalog *cat = NULL;
    ferry_config cfg = {0};
    const char *url = NULL;
    ferry_record_list routes = {0};
    int rc = ferry_config_load(d->r->conf, &cfg, err);
    if (!rc)
        rc = ferry_config_require(&cfg, "cluster", NULL, "catalog", &url, err);
    if (!rc)
        rc = ferry_catalog_open(url, &cat, err);
    for (unsigned k = 0; !rc && k < d->o.tenants; k++) {
        ferry_split_change ch;
        rc = ferry_split_set(cat, d->tenants[k].name, d->tenants[k].splits, true, false, &ch,
                             err);
    }
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, NULL, 0, &routes, err);
    for (size_t i = 0; !rc && i < routes.n; i++) {
        const ferry_route *r = &routes.items[i].u.route;
        char text[FERRY_SHARDS_TEXT_MAX];
        unsigned k;
        if (sscanf(r->tenant, "t%u", &k) != 1 || k < 1 || k > d->o.tenants ||
            r->split >= d->tenants[k - 1].splits)
            continue;
        snprintf(d->slices[d->tenants[k - 1].first_slice + r->split].route, FERRY_LIST_MAX, "%s",
                 ferry_shard_set_str(&r->shards, text));
    }
    for (size_t i = 0; !rc && i < d->n_slices; i++)
        if (!d->slices[i].route[0] || !node_named(d, d->slices[i].route))
            rc = ferry_err_set(err, FERRY_EIO, "slice %s/%u has no route to a lab node",
                               d->tenants[d->slices[i].tenant].name, d->slices[i].split);
    ferry_record_list_free(&routes);
    ferry_catalog_close(cat);
    ferry_config_free(&cfg);
    return rc;
}

/* The rows of tenant t: for each day and n < rows_per_day, user = cityHash64(tenant, day, n),
 * split = xxh3(toString(user)) % splits (ferry's split function on the split key user, split.h),
 * v derived from user (the checked sum), w 64 random bytes (payload that does not compress, so
 * parts have a realistic size for their row count). Each node inserts the rows of the slices it serves; every row lands
 * once, on the shard its slice is routed to. */
static void generator_sql(const demo *d, const demo_node *node, ferry_buf *sql)
{
    ferry_buf_puts(sql, "SELECT t.1 AS tenant, d AS day, toUInt8(xxh3(toString(u)) % t.2) AS split, "
                        "u AS user, cityHash64(u, 1) AS v, randomFixedString(64) AS w FROM (SELECT t, "
                        "d, cityHash64(t.1, d, n) AS u FROM (SELECT arrayJoin([");
    bool first = true;
    for (unsigned k = 0; k < d->o.tenants; k++) {
        const demo_tenant *t = &d->tenants[k];
        ferry_buf splits = FERRY_BUF_INIT;
        for (uint32_t s = 0; s < t->splits; s++)
            if (!node || !strcmp(d->slices[t->first_slice + s].route, node->name))
                ferry_buf_printf(&splits, "%s%u", splits.len ? "," : "", s);
        if (splits.len) {
            ferry_buf_printf(sql, "%s('%s', %u, [%s]::Array(UInt8), %llu)", first ? "" : ",",
                             t->name, t->splits, splits.data,
                             (unsigned long long)t->rows_per_day);
            first = false;
        }
        ferry_buf_free(&splits);
    }
    ferry_buf_puts(sql, "]) AS t) ARRAY JOIN [");
    for (unsigned i = 0; i < d->o.days; i++)
        ferry_buf_printf(sql, "%s%u", i ? "," : "", d->days[i]);
    ferry_buf_puts(sql, "]::Array(UInt32) AS d ARRAY JOIN range(t.4) AS n) WHERE "
                        "has(t.3, toUInt8(xxh3(toString(u)) % t.2))");
}

typedef struct ingest_job {
    demo *d;
    demo_node *node;
    int rc;
    ferry_err err;
} ingest_job;

static void *ingest_node(void *arg)
{
    ingest_job *j = arg;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "INSERT INTO default." DEMO_TABLE " ");
    generator_sql(j->d, j->node, &sql);
    ferry_buf_puts(&sql, " SETTINGS max_partitions_per_insert_block = 0, "
                         "max_insert_threads = 1");
    j->rc = sql_exec(j->node, sql.data, &j->err);
    ferry_buf_free(&sql);
    return NULL;
}

/* Every node at once (each is its own process); returns the first failure. */
static int ingest(demo *d, ferry_err *err)
{
    ingest_job jobs[FERRY_DEMO_NODES];
    pthread_t th[FERRY_DEMO_NODES];
    size_t n = d->n_nodes;
    for (size_t i = 0; i < n; i++) {
        jobs[i] = (ingest_job){d, &d->nodes[i], 0, {0, ""}};
        if (pthread_create(&th[i], NULL, ingest_node, &jobs[i]))
            ingest_node(&jobs[i]), th[i] = 0;
    }
    int rc = FERRY_OK;
    for (size_t i = 0; i < n; i++) {
        if (th[i])
            pthread_join(th[i], NULL);
        if (jobs[i].rc && !rc) {
            rc = jobs[i].rc;
            *err = jobs[i].err;
        }
    }
    return rc;
}

typedef struct tier_job {
    demo *d;
    const char *server;
    json_t *report;
    int rc;
    ferry_err err;
} tier_job;

static void *tier_server(void *arg)
{
    tier_job *j = arg;
    ferry_tier_options to = {.config_path = j->d->r->conf,
                             .older_than = (uint64_t)(j->d->o.days - j->d->o.cold_days) * 86400,
                             .server = j->server,
                             .now = j->d->now};
    j->rc = ferry_tier_run(&to, &j->report, &j->err);
    return NULL;
}

/* Progress of the tiering runs: counts the finished tier jobs in the catalog every few seconds
 * (the runs themselves report only at the end). */
typedef struct tier_ticker {
    demo *d;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
} tier_ticker;

static void *tier_tick(void *arg)
{
    tier_ticker *tk = arg;
    ferry_config cfg = {0};
    ferry_catalog *cat = NULL;
    const char *url = NULL;
    ferry_err err = {0, ""};
    if (ferry_config_load(tk->d->r->conf, &cfg, &err) ||
        ferry_config_require(&cfg, "cluster", NULL, "catalog", &url, &err) ||
        ferry_catalog_open(url, &cat, &err))
        goto out;
    size_t want = tk->d->n_slices * tk->d->o.cold_days;
    pthread_mutex_lock(&tk->lock);
    while (!tk->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        pthread_cond_timedwait(&tk->cond, &tk->lock, &until);
        if (tk->stop)
            break;
        ferry_record_list jobs = {0};
        size_t done = 0, started = 0;
        if (ferry_catalog_list(cat, FERRY_REC_JOB, NULL, 0, &jobs, &err) == FERRY_OK)
            for (size_t i = 0; i < jobs.n; i++) {
                const ferry_job *j = &jobs.items[i].u.job;
                if (strcmp(j->kind, "tier"))
                    continue;
                done += !strcmp(j->state, "DONE");
                started += strcmp(j->state, "DONE") && strcmp(j->state, "FAILED");
            }
        ferry_record_list_free(&jobs);
        /* a wave's jobs finish together: the ones on their way are worth showing */
        demo_progress(tk->d, "tier: %zu of %zu partitions tiered, %zu on their way", done, want,
                 started);
    }
    pthread_mutex_unlock(&tk->lock);
out:
    ferry_catalog_close(cat);
    ferry_config_free(&cfg);
    return NULL;
}

/* One tiering run per server, side by side (each holds only its server's lease). */
static int tier_all(demo *d, ferry_err *err)
{
    tier_job jobs[FERRY_DEMO_NODES];
    pthread_t th[FERRY_DEMO_NODES], tick;
    size_t n = d->n_nodes;
    tier_ticker tk = {.d = d, .stop = false};
    pthread_mutex_init(&tk.lock, NULL);
    pthread_cond_init(&tk.cond, NULL);
    bool ticking = pthread_create(&tick, NULL, tier_tick, &tk) == 0;
    for (size_t i = 0; i < n; i++) {
        jobs[i] = (tier_job){d, d->nodes[i].name, NULL, 0, {0, ""}};
        if (pthread_create(&th[i], NULL, tier_server, &jobs[i]))
            tier_server(&jobs[i]), th[i] = 0;
    }
    int rc = FERRY_OK;
    for (size_t i = 0; i < n; i++) {
        if (th[i])
            pthread_join(th[i], NULL);
        json_t *r = jobs[i].report;
        d->r->tiered += (size_t)json_integer_value(json_object_get(r, "partitions_tiered"));
        d->r->tier_failed += (size_t)json_integer_value(json_object_get(r, "jobs_failed"));
        d->r->tier_uploaded += (uint64_t)json_integer_value(json_object_get(r, "bytes_uploaded"));
        d->r->tier_pointer_bytes += (uint64_t)json_integer_value(json_object_get(r, "pointer_bytes"));
        const char *step;
        json_t *ms;
        json_object_foreach(json_object_get(r, "step_ms"), step, ms)
        {
            double sum = json_number_value(json_object_get(d->r->tier_step_ms, step));
            json_object_set_new(d->r->tier_step_ms, step, json_real(round(sum + json_number_value(ms))));
        }
        json_decref(r);
        if (jobs[i].rc && !rc) {
            rc = jobs[i].rc;
            *err = jobs[i].err;
        }
    }
    if (ticking) {
        pthread_mutex_lock(&tk.lock);
        tk.stop = true;
        pthread_cond_signal(&tk.cond);
        pthread_mutex_unlock(&tk.lock);
        pthread_join(tick, NULL);
    }
    pthread_cond_destroy(&tk.cond);
    pthread_mutex_destroy(&tk.lock);
    return rc;
}

/* ---- the rebalance: the plan's moves, P at a time ------------------------------------------ */

typedef struct mover {
    demo *d;
    const ferry_rebalance_plan *plan;
    size_t finished;
    bool *tenant_moved;
    double last_note;
    double *wall; /* each finished move's seconds, for the percentiles */
} mover;

/* Each finished step of the rebalance (ferry_plan_run serialises the calls). */
static void on_move(const ferry_planned_move *pm, const ferry_move_result *res, int rc,
                    const ferry_err *err, void *arg)
{
    mover *m = arg;
    demo *d = m->d;
    (void)err;
    m->finished++;
    if (rc) {
        d->r->moves_failed++;
    } else {
        m->wall[d->r->moves_done++] = res->seconds;
        d->r->hot_bytes += res->hot_bytes;
        d->r->hot_copied += res->hot_copied;
        d->r->cold_bytes += res->cold_bytes;
        d->r->cold_copied += res->cold_copied;
        d->r->hot_parts += res->hot_parts;
        d->r->cold_parts += res->cold_parts;
        for (int st = 0; st < FERRY_MOVE_STATES; st++)
            d->r->move_state_ms[st] += res->state_ms[st];
        d->r->move_statements += res->statements;
        d->r->move_agent_requests += res->agent_requests;
        d->r->move_catalog_writes += res->catalog_writes;
        demo_tenant *t = demo_tenant_named(d, pm->tenant);
        if (t)
            m->tenant_moved[t - d->tenants] = true;
    }
    double now = demo_elapsed(d);
    if (now - m->last_note >= 5 || m->finished == m->plan->n_moves) {
        m->last_note = now;
        demo_progress(d, "rebalance: %zu of %zu moves done%s", m->finished, m->plan->n_moves,
                 d->r->moves_failed ? " (some failed)" : "");
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int rebalance(demo *d, ferry_err *err)
{
    ferry_config cfg = {0};
    ferry_catalog *cat = NULL;
    ferry_rebalance_plan plan = {0};
    const char *url = NULL;
    bool *moved = calloc(d->o.tenants, sizeof *moved);
    if (!moved)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    char owner[FERRY_NAME_MAX];
    snprintf(owner, sizeof owner, "ferry-demo:%ld", (long)getpid());
    int rc = ferry_config_load(d->r->conf, &cfg, err);
    if (!rc)
        rc = ferry_config_require(&cfg, "cluster", NULL, "catalog", &url, err);
    ferry_move_opts mo = {.catalog_url = url, .cfg = &cfg, .owner = owner,
                          .grace_ms = DEMO_GRACE_MS, .grace_given = true};
    if (!rc)
        rc = ferry_catalog_open(url, &cat, err);
    if (!rc)
        rc = ferry_inventory_sync(cat, &mo, NULL, err);
    if (!rc)
        rc = ferry_rebalance_plan_compute(cat, &plan, err);
    ferry_catalog_close(cat);
    if (rc)
        goto out;
    d->r->moves_planned = plan.n_moves;
    demo_progress(d, "rebalance: the plan moves %zu of %zu slices to their new shard, %u at a time",
             plan.n_moves, plan.slices, d->o.parallel);
    mover m;
    memset(&m, 0, sizeof m);
    m.d = d;
    m.plan = &plan;
    m.tenant_moved = moved;
    m.last_note = demo_elapsed(d);
    if (!(m.wall = calloc(plan.n_moves + 1, sizeof *m.wall))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    ferry_plan_run_opts po = {.max_parallel = d->o.parallel, .max_per_shard = d->o.parallel,
                              .batch = d->o.batch ? d->o.batch : DEMO_BATCH, .on_step = on_move,
                              .arg = &m};
    ferry_plan_run_result pr;
    rc = ferry_plan_run(&mo, &plan, &po, &pr, err);
    d->r->rebalance_s = pr.seconds;
    d->r->move_grace_ms = ferry_move_grace(&mo);
    for (unsigned k = 0; k < d->o.tenants; k++)
        d->r->moved_tenants += moved[k];
    if (d->r->moves_done) {
        qsort(m.wall, d->r->moves_done, sizeof *m.wall, cmp_double);
        d->r->move_p50_s = m.wall[(d->r->moves_done - 1) / 2];
        d->r->move_p99_s = m.wall[(size_t)((double)(d->r->moves_done - 1) * 0.99 + 0.5)];
    }
    free(m.wall);
    if (!rc) { /* node4 is new until this, its first rebalance, is over */
        ferry_rebalance_plan again = {0};
        rc = ferry_catalog_open(url, &cat, err);
        if (!rc)
            rc = ferry_rebalance_plan_compute(cat, &again, err);
        if (!rc)
            rc = ferry_shards_settle(cat, &again, NULL, err);
        ferry_rebalance_plan_free(&again);
        ferry_catalog_close(cat);
    }
out:
    ferry_rebalance_plan_free(&plan);
    ferry_config_free(&cfg);
    free(moved);
    return rc;
}

/* ---- the result ---------------------------------------------------------------------------- */

json_t *ferry_demo_result_json(const ferry_demo_options *opt, const ferry_demo_result *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "tenants", json_integer(opt->tenants));
    json_object_set_new(o, "slices", json_integer((json_int_t)r->slices));
    json_object_set_new(o, "rows", json_integer((json_int_t)r->total_rows));
    json_object_set_new(o, "days", json_integer(opt->days));
    json_object_set_new(o, "cold_days", json_integer(opt->cold_days));
    json_object_set_new(o, "object_store",
                        json_string(opt->lab.object_store ? opt->lab.object_store : "local"));
    json_object_set_new(o, "partitions_tiered", json_integer((json_int_t)r->tiered));
    json_object_set_new(o, "tier_bytes_uploaded", json_integer((json_int_t)r->tier_uploaded));
    json_object_set_new(o, "tier_pointer_bytes", json_integer((json_int_t)r->tier_pointer_bytes));
    json_object_set_new(o, "tier_step_ms", json_incref(r->tier_step_ms));
    json_object_set_new(o, "moves_planned", json_integer((json_int_t)r->moves_planned));
    json_object_set_new(o, "moves", json_integer((json_int_t)r->moves_done));
    json_object_set_new(o, "moves_failed", json_integer((json_int_t)r->moves_failed));
    json_object_set_new(o, "tenants_moved", json_integer((json_int_t)r->moved_tenants));
    json_object_set_new(o, "max_parallel", json_integer(opt->parallel));
    json_object_set_new(o, "batch", json_integer(opt->batch ? opt->batch : DEMO_BATCH));
    json_object_set_new(o, "cold_parts", json_integer((json_int_t)r->cold_parts));
    json_object_set_new(o, "cold_bytes", json_integer((json_int_t)r->cold_bytes));
    json_object_set_new(o, "cold_copied_bytes", json_integer((json_int_t)r->cold_copied));
    json_object_set_new(o, "hot_parts", json_integer((json_int_t)r->hot_parts));
    json_object_set_new(o, "hot_bytes", json_integer((json_int_t)r->hot_bytes));
    json_object_set_new(o, "hot_copied_bytes", json_integer((json_int_t)r->hot_copied));
    json_object_set_new(o, "rebalance_seconds", json_real(round(r->rebalance_s * 10) / 10));
    json_object_set_new(o, "move_p50_seconds", json_real(round(r->move_p50_s * 1000) / 1000));
    json_object_set_new(o, "move_p99_seconds", json_real(round(r->move_p99_s * 1000) / 1000));
    json_object_set_new(o, "move_grace_ms", json_integer(r->move_grace_ms));
    json_t *st = json_object();
    for (int k = 0; st && k < FERRY_MOVE_STATES; k++)
        if (r->move_state_ms[k] > 0)
            json_object_set_new(st, ferry_move_state_name((enum ferry_move_state)k),
                                json_real(round(r->move_state_ms[k])));
    if (st)
        json_object_set_new(o, "move_state_ms", st);
    json_object_set_new(o, "move_statements", json_integer((json_int_t)r->move_statements));
    json_object_set_new(o, "move_agent_requests", json_integer((json_int_t)r->move_agent_requests));
    json_object_set_new(o, "move_catalog_writes", json_integer((json_int_t)r->move_catalog_writes));
    json_object_set_new(o, "verify_failures", json_integer((json_int_t)r->verify_failures));
    if (r->verify_failures)
        json_object_set_new(o, "first_verify_failure", json_string(r->first_failure));
    json_object_set_new(o, "phase_seconds", json_incref(r->phases));
    json_object_set_new(o, "phase_cpu_seconds", json_incref(r->phase_cpu));
    json_object_set_new(o, "wall_seconds", json_real(round(r->wall_s * 10) / 10));
    if (opt->keep)
        json_object_set_new(o, "config", json_string(r->conf));
    return o;
}

/* ---- the run ------------------------------------------------------------------------------- */

/* The story, phase by phase. */
static int run(demo *d, ferry_err *errp)
{
    ferry_err err = {0, ""};
    int rc = FERRY_OK;
    double t;
    d->t0 = ferry_clock_s();
    d->now = (int64_t)time(NULL);
    d->r->phases = json_object();
    d->r->phase_cpu = json_object();
    d->r->tier_step_ms = json_object();
    if (d->o.dir) {
        snprintf(d->r->dir, sizeof d->r->dir, "%s", d->o.dir);
        if (mkdir(d->r->dir, 0755) != 0 && errno != EEXIST) {
            rc = ferry_err_set(&err, FERRY_EIO, "--dir %s: %s", d->r->dir, strerror(errno));
            goto out;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(d->r->dir, sizeof d->r->dir, "%s/ferry-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(d->r->dir)) {
            rc = ferry_err_set(&err, FERRY_EIO, "cannot make a temporary directory %s: %s",
                               d->r->dir, strerror(errno));
            goto out;
        }
        d->made_dir = true;
    }
    char real[4096];
    if (realpath(d->r->dir, real))
        snprintf(d->r->dir, sizeof d->r->dir, "%s", real);
    snprintf(d->r->conf, sizeof d->r->conf, "%s/ferry.conf", d->r->dir);
    /* the components' own log lines (lab, tiering, moves, agents' clients) go to a file in the
     * lab's directory: the console keeps the progress lines and the result */
    char logpath[4200];
    snprintf(logpath, sizeof logpath, "%s/ferry.log", d->r->dir);
    d->log_fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (d->log_fd >= 0)
        ferry_log_set_fd(d->log_fd);
    if ((rc = demo_build_model(d, &err)))
        goto out;

    /* 1. the lab */
    t = demo_elapsed(d);
    demo_progress(d, "lab: starting 3 nodes in %s (object store: %s)", d->r->dir,
             d->o.lab.object_store ? d->o.lab.object_store : "local");
    d->o.lab.dir = d->r->dir;
    d->o.lab.nodes = 3;
    d->o.lab.timeout_s = 120;
    d->r->lab_started = true;
    if ((rc = ferry_lab_up(&d->o.lab, &err)) || (rc = append_table_conf(d, &err)) ||
        (rc = open_nodes(d, &err)))
        goto out;
    ferry_init_result ir;
    if ((rc = ferry_init_cluster(d->r->conf, &ir, &err)))
        goto out;
    phase_done(d, "lab", t);
    demo_progress(d, "lab: nodes up, catalog initialized (cluster %s, %s catalog, table %s)",
             ir.cluster, ir.backend, DEMO_TABLE);

    /* 2. tenants */
    t = demo_elapsed(d);
    if ((rc = register_tenants(d, &err)))
        goto out;
    phase_done(d, "tenants", t);
    demo_progress(d, "tenants: %u registered, %zu slices placed and routed (largest %llu rows a day "
             "in %u splits, smallest %llu)", d->o.tenants, d->n_slices,
             (unsigned long long)d->tenants[0].rows_per_day, d->tenants[0].splits,
             (unsigned long long)d->tenants[d->o.tenants - 1].rows_per_day);
    d->r->slices = d->n_slices;
    d->r->max_splits = d->tenants[0].splits;

    /* 3. ingest */
    t = demo_elapsed(d);
    demo_progress(d, "ingest: %llu rows over %u days, generated on the node serving each slice",
             (unsigned long long)d->r->total_rows, d->o.days);
    if ((rc = ingest(d, &err)) || (rc = demo_measure(d, true, &err)))
        goto out;
    phase_done(d, "ingest", t);
    demo_progress(d, "ingest: done%s", d->r->verify_failures ? " (row counts differ: see the end)" : "");

    /* 4. tiering */
    t = demo_elapsed(d);
    demo_progress(d, "tier: the oldest %u days into the object store, one run per node", d->o.cold_days);
    if ((rc = tier_all(d, &err)))
        goto out;
    phase_done(d, "tier", t);
    char a[32];
    demo_progress(d, "tier: %zu partitions tiered, %s uploaded", d->r->tiered,
             ferry_fmt_bytes(d->r->tier_uploaded, a, sizeof a));

    /* 5. a fourth node */
    t = demo_elapsed(d);
    if ((rc = ferry_lab_add_node(&d->o.lab, &err)) || (rc = append_table_conf(d, &err)) ||
        (rc = open_nodes(d, &err)) || (rc = ferry_init_cluster(d->r->conf, &ir, &err)))
        goto out;
    phase_done(d, "add_node", t);
    demo_progress(d, "add node: %s up and active in the catalog", d->nodes[d->n_nodes - 1].name);

    /* 6. rebalance */
    t = demo_elapsed(d);
    rc = rebalance(d, &err);
    phase_done(d, "rebalance", t);
    if (rc)
        goto out;

    /* 7. verify */
    t = demo_elapsed(d);
    if ((rc = demo_verify(d, &err)))
        goto out;
    phase_done(d, "verify", t);
    demo_progress(d, "verify: %zu failure%s", d->r->verify_failures, d->r->verify_failures == 1 ? "" : "s");
out:
    d->r->wall_s = demo_elapsed(d);
    if (d->r->lab_started && d->o.keep && !rc) {
        d->r->lab_kept = true;
    } else if (d->r->lab_started) {
        ferry_err derr = {0, ""};
        demo_progress(d, "lab: stopping");
        if (ferry_lab_down(d->r->dir, &derr)) {
            if (!rc) {
                rc = derr.code;
                err = derr;
            } else {
                demo_progress(d, "lab: stopping failed too: %s", derr.msg);
            }
        }
    }
    if (d->log_fd >= 0) {
        ferry_log_set_fd(2);
        close(d->log_fd);
        d->log_fd = -1;
    }
    if (d->made_dir && !rc)
        nftw(d->r->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    else if (d->made_dir)
        d->r->dir_kept = true;
    for (size_t i = 0; i < d->n_nodes; i++)
        ferry_ch_client_free(d->nodes[i].ch);
    free(d->tenants);
    free(d->slices);
    if (rc)
        *errp = err;
    return rc;
}

/* ---- the options -------------------------------------------------------------------------- */

/* DIR must be new or an empty directory: the demo never mixes its lab with other files. */
static bool dir_usable(const char *dir, char *why, size_t whysz)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return true; /* created by the lab */
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whysz, "--dir %s exists and is not a directory", dir);
        return false;
    }
    DIR *dh = opendir(dir);
    if (!dh) {
        snprintf(why, whysz, "--dir %s: %s", dir, strerror(errno));
        return false;
    }
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(dh)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(dh);
    if (!empty)
        snprintf(why, whysz, "--dir %s is not empty (give a new or empty directory; a lab that "
                 "is already there: ferry lab status --dir %s)", dir, dir);
    return empty;
}

int ferry_demo_check(const ferry_demo_options *o, ferry_err *err)
{
    if (o->tenants < 2 || o->tenants > 2000)
        return ferry_err_set(err, FERRY_EINVAL, "--tenants wants a number from 2 to 2000");
    if (o->days < 2 || o->days > 30)
        return ferry_err_set(err, FERRY_EINVAL, "--days wants a number from 2 to 30");
    if (o->cold_days < 1 || o->cold_days >= o->days)
        return ferry_err_set(err, FERRY_EINVAL, "--cold-days %u must be at least 1 and less than "
                             "--days %u (the newest day stays hot)", o->cold_days, o->days);
    if (o->parallel < 1 || o->parallel > 16)
        return ferry_err_set(err, FERRY_EINVAL, "--max-parallel wants a number from 1 to 16");
    if (o->batch > 64)
        return ferry_err_set(err, FERRY_EINVAL, "--batch wants a number from 1 to 64");
    if (o->rows_per_day < 100 || o->rows_per_day > 100000000)
        return ferry_err_set(err, FERRY_EINVAL, "--rows-per-day wants a number from 100 to "
                             "100000000");
    if (o->keep && !o->dir)
        return ferry_err_set(err, FERRY_EINVAL, "--keep needs --dir DIR (the lab is left "
                             "running there)");
    const ferry_lab_options *l = &o->lab;
    const char *store = l->object_store;
    if (store && strcmp(store, "local") && strcmp(store, "s3"))
        return ferry_err_set(err, FERRY_EINVAL, "--object-store is local or s3, not '%s'", store);
    bool s3 = store && !strcmp(store, "s3");
    if (s3 && (!l->s3_endpoint || !l->s3_bucket || !l->s3_access_key_file ||
               !l->s3_secret_key_file))
        return ferry_err_set(err, FERRY_EINVAL, "--object-store s3 needs --s3-endpoint, "
                             "--s3-bucket, --s3-access-key-file and --s3-secret-key-file");
    if (!s3 && (l->s3_endpoint || l->s3_bucket || l->s3_prefix || l->s3_access_key_file ||
                l->s3_secret_key_file))
        return ferry_err_set(err, FERRY_EINVAL, "the --s3-* options go with --object-store s3");
    char lib[4096];
    const char *libpath = l->libchdb && *l->libchdb ? l->libchdb
                                                     : ferry_chdb_default_path(lib, sizeof lib);
    if (access(libpath, R_OK) != 0)
        return ferry_err_set(err, FERRY_EINVAL, "the embedded ClickHouse library %s is missing "
                             "(%s): run 'make deps' or pass --libchdb PATH", libpath,
                             strerror(errno));
    char why[600] = "";
    if (o->dir && !dir_usable(o->dir, why, sizeof why))
        return ferry_err_set(err, FERRY_EINVAL, "%s", why);
    return FERRY_OK;
}

int ferry_demo_run(const ferry_demo_options *o, ferry_demo_result *res, ferry_err *err)
{
    memset(res, 0, sizeof *res);
    int rc = ferry_demo_check(o, err);
    if (rc)
        return rc;
    demo d;
    memset(&d, 0, sizeof d);
    d.o = *o;
    d.r = res;
    d.log_fd = -1;
    return run(&d, err);
}

void ferry_demo_result_free(ferry_demo_result *res)
{
    json_decref(res->phases);
    json_decref(res->phase_cpu);
    json_decref(res->tier_step_ms);
    res->phases = res->phase_cpu = res->tier_step_ms = NULL;
}
