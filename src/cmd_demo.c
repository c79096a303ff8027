/* `ferry demo`: the whole story in a lab on this machine, with the real flows (docs/demo.md).
 * A lab of 3 ferry-node processes (the same code as `ferry lab up`), the catalog set up as
 * `ferry init` does, hundreds of tenants of Zipf-skewed sizes with 1..8 splits registered and
 * placed as `ferry tenant add` does, several days of rows generated server-side on the shard
 * that serves each slice (each row in the split its key gives), the older days tiered into the
 * object store by the tiering flow (one run per server, side by side), a 4th node added, the
 * rebalancing plan run by the move flow (several moves at a time), every tenant's rows and sums
 * checked against what was ingested, a table like the blog's, and the lab stopped.
 * Progress goes to stderr; the table (or with --json one JSON object) to stdout; the components'
 * own log lines to ferry.log in the lab's directory. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_init.h"
#include "demo.h"
#include "ferry/buf.h"
#include "ferry/catalog.h"
#include "ferry/chdb.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/lab.h"
#include "ferry/log.h"
#include "ferry/move.h"
#include "ferry/plan_run.h"
#include "ferry/split.h"
#include "ferry/strutil.h"
#include "ferry/tier.h"

const char cmd_demo_usage[] =
    "usage: ferry demo [--json] [--dir DIR [--keep]] [--tenants N] [--days D] [--cold-days C]\n"
    "                  [--rows-per-day R] [--max-parallel P] [--libchdb PATH]\n"
    "                  [--object-store local|s3 --s3-endpoint URL --s3-bucket B\n"
    "                   --s3-access-key-file F --s3-secret-key-file F [--s3-prefix P]]\n"
    "       ferry demo --placement-only [--hash sha256|xxh3] [--json]\n"
    "\n"
    "Runs ferry's main job in a lab on this machine (docs/demo.md): starts 3 ClickHouse nodes,\n"
    "sets up the catalog, registers N tenants of very different sizes (Zipf-skewed, 1 to 8\n"
    "splits, placed by weighted rendezvous hashing), ingests D days of rows on the node that\n"
    "serves each slice, tiers the oldest C days into the object store, adds a 4th node,\n"
    "rebalances with the move flow, checks every tenant's row count and sums against what was\n"
    "ingested, prints what moved (real size vs bytes actually copied) and stops the lab.\n"
    "Progress goes to stderr, the table (or with --json one JSON object) to stdout, the\n"
    "components' log lines to DIR/ferry.log (kept with --keep or when the demo fails).\n"
    "\n"
    "  --tenants N        tenants (default 200; 2..2000)\n"
    "  --days D           days of rows, ending yesterday (default 4; 2..30)\n"
    "  --cold-days C      the oldest C days are tiered (default D - 2, at least 1; < D)\n"
    "  --rows-per-day R   rows a day of the largest tenant (default 200000); tenant k gets\n"
    "                     about R / k^0.9, at least R / 200 and 20\n"
    "  --max-parallel P   moves at a time (default 8; 1..16)\n"
    "  --dir DIR          the lab's directory (must be new or empty; default a temporary one,\n"
    "                     removed at the end)\n"
    "  --keep             leave the lab running in DIR (needs --dir); prints how to stop it\n"
    "  --libchdb PATH     the embedded ClickHouse library (default: $FERRY_LIBCHDB or the cache)\n"
    "  --object-store s3 ...   the cold disk on S3 instead of a local blob directory (the\n"
    "                     options of `ferry lab up`)\n"
    "  --placement-only   only the in-memory placement experiment (1,000 tenants, 3 shards + 1)\n"
    "  --json             one JSON object on stdout instead of the table\n";

#define DEMO_TABLE "events"
#define DEMO_MAX_SPLITS 8
#define DEMO_GRACE_MS 100 /* nothing writes during the demo's moves (docs/demo.md) */

typedef struct demo_opts {
    bool json, keep;
    const char *dir;
    unsigned tenants, days, cold_days, parallel;
    uint64_t rows_per_day;
    ferry_lab_options lab;
} demo_opts;

/* One tenant of the model: rows a day (over all its splits) and its split count. */
typedef struct demo_tenant {
    char name[16];
    uint64_t rows_per_day;
    uint32_t splits;
    uint32_t first_slice; /* index of its split 0 in demo.slices */
    /* what was ingested, and what the lab holds at the end (over every node) */
    uint64_t want_rows, got_rows;
    char want_sum[32], got_sum[32];
} demo_tenant;

typedef struct demo_slice {
    uint32_t tenant, split;
    char route[FERRY_LIST_MAX]; /* the serving shard */
    char holder[FERRY_NAME_MAX]; /* where rows were found at the end ("" none, "*" several) */
} demo_slice;

typedef struct demo_node {
    char name[FERRY_NAME_MAX];
    char url[FERRY_URL_MAX];
    ferry_ch_client *ch;
} demo_node;

typedef struct demo {
    demo_opts o;
    char dir[4096];
    bool made_dir, lab_started;
    char conf[4200];
    struct timespec t0;
    demo_tenant *tenants;
    demo_slice *slices;
    size_t n_slices;
    demo_node nodes[4];
    size_t n_nodes;
    uint32_t days[31];       /* YYYYMMDD, days[0] is yesterday */
    int64_t now;
    uint64_t total_rows;
    /* results */
    json_t *phases;          /* {"lab": s, ...} */
    json_t *tier_step_ms;    /* tiering: ms per step, summed over the runs */
    size_t tiered, tier_failed;
    uint64_t tier_uploaded, tier_pointer_bytes;
    size_t moves_planned, moves_done, moves_failed, moved_tenants;
    int log_fd;              /* the components' log: DIR/ferry.log (-1: stderr) */
    uint64_t hot_bytes, hot_copied, cold_bytes, cold_copied;
    size_t hot_parts, cold_parts, cold_partitions_moved, hot_partitions_moved;
    double rebalance_s;
    double move_p50_s, move_p99_s; /* the moves' wall times */
    size_t verify_failures, split_checked;
    char first_failure[512];
} demo;

/* ---- small helpers ------------------------------------------------------------------------- */

static double elapsed(const demo *d)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - d->t0.tv_sec) + (double)(t.tv_nsec - d->t0.tv_nsec) / 1e9;
}

static void progress(const demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const demo *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%6.1fs] ", elapsed(d));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void phase_done(demo *d, const char *name, double since)
{
    json_object_set_new(d->phases, name, json_real(round((elapsed(d) - since) * 10) / 10));
}

static void verify_fail(demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verify_fail(demo *d, const char *fmt, ...)
{
    if (!d->verify_failures++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->first_failure, sizeof d->first_failure, fmt, ap);
        va_end(ap);
    }
}

static int sql_exec(demo_node *n, const char *sql, ferry_err *err)
{
    ferry_buf out = FERRY_BUF_INIT;
    int rc = ferry_ch_query_buf(n->ch, sql, NULL, &out, NULL, err);
    ferry_buf_free(&out);
    if (rc)
        ferry_err_prefix(err, "%s: ", n->name);
    return rc;
}

static int sql_rows(demo_node *n, const char *sql, ferry_ch_rows *rows, ferry_err *err)
{
    int rc = ferry_ch_query_rows(n->ch, sql, rows, NULL, err);
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

/* ---- the model: tenant sizes and splits (pure) ---------------------------------------------- */

/* Tenant k (1-based) writes about R / k^0.9 rows a day (at least R / 200 and 20): a few large
 * tenants and a long tail of small ones. Its split count grows with its size, 8 for the largest
 * (the split policy's idea: about R / 8 rows a day per slice), at least 1. */
static int build_model(demo *d, ferry_err *err)
{
    unsigned n = d->o.tenants;
    d->tenants = calloc(n, sizeof *d->tenants);
    d->slices = calloc((size_t)n * DEMO_MAX_SPLITS, sizeof *d->slices);
    if (!d->tenants || !d->slices)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int width = n >= 1000 ? 4 : 3;
    double r = (double)d->o.rows_per_day, floor_rows = fmax(20, r / 200);
    double per_slice = r / DEMO_MAX_SPLITS;
    for (unsigned k = 1; k <= n; k++) {
        demo_tenant *t = &d->tenants[k - 1];
        snprintf(t->name, sizeof t->name, "t%0*u", width, k);
        double rows = fmax(floor_rows, r / pow((double)k, 0.9));
        t->rows_per_day = (uint64_t)llround(rows);
        uint32_t s = (uint32_t)ceil(rows / per_slice - 1e-9);
        t->splits = s < 1 ? 1 : s > DEMO_MAX_SPLITS ? DEMO_MAX_SPLITS : s;
        t->first_slice = (uint32_t)d->n_slices;
        for (uint32_t i = 0; i < t->splits; i++) {
            d->slices[d->n_slices].tenant = k - 1;
            d->slices[d->n_slices++].split = i;
        }
        t->want_rows = t->rows_per_day * d->o.days;
        d->total_rows += t->want_rows;
    }
    /* the days: yesterday back to D days ago (UTC) */
    for (unsigned i = 0; i < d->o.days; i++) {
        time_t day = (time_t)(d->now - (int64_t)(i + 1) * 86400);
        struct tm tm;
        gmtime_r(&day, &tm);
        d->days[i] = (uint32_t)((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
    }
    return FERRY_OK;
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
    FILE *f = fopen(d->conf, "a");
    if (!f)
        return ferry_err_set(err, FERRY_EIO, "%s: %s", d->conf, strerror(errno));
    int bad = fputs(demo_table_conf, f) < 0;
    bad |= fclose(f) != 0;
    return bad ? ferry_err_set(err, FERRY_EIO, "%s: write failed", d->conf) : FERRY_OK;
}

/* Reads the lab's nodes and opens a ClickHouse client for each new one; creates the table. */
static int open_nodes(demo *d, ferry_err *err)
{
    json_t *st = NULL;
    int rc = ferry_lab_status(d->dir, &st, err);
    if (rc)
        return rc;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(st, "nodes"), i, n)
    {
        if (i < d->n_nodes || i >= 4)
            continue;
        demo_node *dn = &d->nodes[d->n_nodes];
        snprintf(dn->name, sizeof dn->name, "%s", json_string_value(json_object_get(n, "name")));
        snprintf(dn->url, sizeof dn->url, "%s", json_string_value(json_object_get(n, "http")));
        ferry_ch_options co = {.url = dn->url, .user = "default", .max_attempts = 3};
        if ((rc = ferry_ch_client_new(&co, &dn->ch, err)))
            break;
        d->n_nodes++;
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
    int rc = ferry_config_load(d->conf, &cfg, err);
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
        unsigned k;
        if (sscanf(r->tenant, "t%u", &k) != 1 || k < 1 || k > d->o.tenants ||
            r->split >= d->tenants[k - 1].splits)
            continue;
        snprintf(d->slices[d->tenants[k - 1].first_slice + r->split].route, FERRY_LIST_MAX, "%s",
                 r->shards);
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
    ingest_job jobs[4];
    pthread_t th[4];
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

static demo_tenant *tenant_named(demo *d, const char *name)
{
    unsigned k;
    if (sscanf(name, "t%u", &k) != 1 || k < 1 || k > d->o.tenants ||
        strcmp(d->tenants[k - 1].name, name))
        return NULL;
    return &d->tenants[k - 1];
}

/* Per tenant and split over every node: rows, sum(v) (wrapping UInt64, as ClickHouse sums) and
 * where the rows are. before: records what was ingested; else fills got_* and holders. */
static int measure(demo *d, bool before, ferry_err *err)
{
    for (size_t i = 0; i < d->n_slices; i++)
        d->slices[i].holder[0] = 0;
    uint64_t *rows = calloc(d->o.tenants, sizeof *rows), *sums = calloc(d->o.tenants, sizeof *sums);
    if (!rows || !sums) {
        free(rows);
        free(sums);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    int rc = FERRY_OK;
    for (size_t ni = 0; !rc && ni < d->n_nodes; ni++) {
        ferry_ch_rows r = {0};
        rc = sql_rows(&d->nodes[ni],
                      "SELECT tenant, split, count(), sum(v) FROM default." DEMO_TABLE
                      " GROUP BY tenant, split", &r, err);
        for (size_t i = 0; !rc && i < r.n_rows; i++) {
            demo_tenant *t = tenant_named(d, ferry_ch_rows_get(&r, i, 0));
            uint64_t split = 0, c = 0, s = 0;
            if (!t || !ferry_parse_u64(ferry_ch_rows_get(&r, i, 1), &split) ||
                split >= t->splits || !ferry_parse_u64(ferry_ch_rows_get(&r, i, 2), &c) ||
                !ferry_parse_u64(ferry_ch_rows_get(&r, i, 3), &s)) {
                verify_fail(d, "%s holds rows of an unknown slice %s/%s", d->nodes[ni].name,
                            ferry_ch_rows_get(&r, i, 0), ferry_ch_rows_get(&r, i, 1));
                continue;
            }
            size_t k = (size_t)(t - d->tenants);
            rows[k] += c;
            sums[k] += s;
            demo_slice *sl = &d->slices[t->first_slice + split];
            snprintf(sl->holder, sizeof sl->holder, "%s", sl->holder[0] ? "*" : d->nodes[ni].name);
        }
        ferry_ch_rows_free(&r);
    }
    for (unsigned k = 0; !rc && k < d->o.tenants; k++) {
        demo_tenant *t = &d->tenants[k];
        char *sum = before ? t->want_sum : t->got_sum;
        snprintf(sum, sizeof t->want_sum, "%llu", (unsigned long long)sums[k]);
        if (before && rows[k] != t->want_rows)
            verify_fail(d, "ingest: tenant %s has %llu rows, %llu were generated", t->name,
                        (unsigned long long)rows[k], (unsigned long long)t->want_rows);
        if (!before)
            t->got_rows = rows[k];
    }
    free(rows);
    free(sums);
    return rc;
}

/* Rows are in the split ferry's split function gives for their key: a sample from every node
 * checked against ferry_split_of. */
static int check_splits(demo *d, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t ni = 0; !rc && ni < d->n_nodes; ni++) {
        ferry_ch_rows r = {0};
        rc = sql_rows(&d->nodes[ni],
                      "SELECT tenant, split, toString(user) FROM default." DEMO_TABLE
                      " ORDER BY cityHash64(user) LIMIT 2000", &r, err);
        for (size_t i = 0; !rc && i < r.n_rows; i++) {
            demo_tenant *t = tenant_named(d, ferry_ch_rows_get(&r, i, 0));
            const char *key = ferry_ch_rows_get(&r, i, 2);
            uint64_t split = 0;
            if (!t || !ferry_parse_u64(ferry_ch_rows_get(&r, i, 1), &split))
                continue;
            d->split_checked++;
            uint32_t want = ferry_split_of(key, strlen(key), t->splits);
            if (want != split)
                verify_fail(d, "%s: a row of %s with user %s is in split %llu, its key says %u",
                            d->nodes[ni].name, t->name, key, (unsigned long long)split, want);
        }
        ferry_ch_rows_free(&r);
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
    ferry_tier_options to = {.config_path = j->d->conf,
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
    if (ferry_config_load(tk->d->conf, &cfg, &err) ||
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
        progress(tk->d, "tier: %zu of %zu partitions tiered, %zu on their way", done, want,
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
    tier_job jobs[4];
    pthread_t th[4], tick;
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
        d->tiered += (size_t)json_integer_value(json_object_get(r, "partitions_tiered"));
        d->tier_failed += (size_t)json_integer_value(json_object_get(r, "jobs_failed"));
        d->tier_uploaded += (uint64_t)json_integer_value(json_object_get(r, "bytes_uploaded"));
        d->tier_pointer_bytes += (uint64_t)json_integer_value(json_object_get(r, "pointer_bytes"));
        const char *step;
        json_t *ms;
        json_object_foreach(json_object_get(r, "step_ms"), step, ms)
        {
            double sum = json_number_value(json_object_get(d->tier_step_ms, step));
            json_object_set_new(d->tier_step_ms, step, json_real(round(sum + json_number_value(ms))));
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
        d->moves_failed++;
    } else {
        m->wall[d->moves_done++] = res->seconds;
        d->hot_bytes += res->hot_bytes;
        d->hot_copied += res->hot_copied;
        d->cold_bytes += res->cold_bytes;
        d->cold_copied += res->cold_copied;
        d->hot_parts += res->hot_parts;
        d->cold_parts += res->cold_parts;
        demo_tenant *t = tenant_named(d, pm->tenant);
        if (t)
            m->tenant_moved[t - d->tenants] = true;
    }
    double now = elapsed(d);
    if (now - m->last_note >= 5 || m->finished == m->plan->n_moves) {
        m->last_note = now;
        progress(d, "rebalance: %zu of %zu moves done%s", m->finished, m->plan->n_moves,
                 d->moves_failed ? " (some failed)" : "");
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
    int rc = ferry_config_load(d->conf, &cfg, err);
    if (!rc)
        rc = ferry_config_require(&cfg, "cluster", NULL, "catalog", &url, err);
    ferry_move_opts mo = {.catalog_url = url, .cfg = &cfg, .owner = owner,
                          .grace_ms = DEMO_GRACE_MS};
    if (!rc)
        rc = ferry_catalog_open(url, &cat, err);
    if (!rc)
        rc = ferry_inventory_sync(cat, &mo, NULL, err);
    if (!rc)
        rc = ferry_rebalance_plan_compute(cat, &plan, err);
    ferry_catalog_close(cat);
    if (rc)
        goto out;
    d->moves_planned = plan.n_moves;
    progress(d, "rebalance: the plan moves %zu of %zu slices to their new shard, %u at a time",
             plan.n_moves, plan.slices, d->o.parallel);
    mover m;
    memset(&m, 0, sizeof m);
    m.d = d;
    m.plan = &plan;
    m.tenant_moved = moved;
    m.last_note = elapsed(d);
    if (!(m.wall = calloc(plan.n_moves + 1, sizeof *m.wall))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    ferry_plan_run_opts po = {.max_parallel = d->o.parallel, .max_per_shard = d->o.parallel,
                              .on_step = on_move, .arg = &m};
    ferry_plan_run_result pr;
    rc = ferry_plan_run(&mo, &plan, &po, &pr, err);
    d->rebalance_s = pr.seconds;
    for (unsigned k = 0; k < d->o.tenants; k++)
        d->moved_tenants += moved[k];
    if (d->moves_done) {
        qsort(m.wall, d->moves_done, sizeof *m.wall, cmp_double);
        d->move_p50_s = m.wall[(d->moves_done - 1) / 2];
        d->move_p99_s = m.wall[(size_t)((double)(d->moves_done - 1) * 0.99 + 0.5)];
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

/* After the rebalance: every tenant's rows and sum as ingested; every slice only on the shard
 * its route names (read again from the catalog). */
static int verify(demo *d, ferry_err *err)
{
    ferry_config cfg = {0};
    ferry_catalog *cat = NULL;
    ferry_record_list routes = {0};
    const char *url = NULL;
    int rc = measure(d, false, err);
    if (!rc)
        rc = ferry_config_load(d->conf, &cfg, err);
    if (!rc)
        rc = ferry_config_require(&cfg, "cluster", NULL, "catalog", &url, err);
    if (!rc)
        rc = ferry_catalog_open(url, &cat, err);
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, NULL, 0, &routes, err);
    for (size_t i = 0; !rc && i < routes.n; i++) {
        const ferry_route *r = &routes.items[i].u.route;
        demo_tenant *t = tenant_named(d, r->tenant);
        if (t && r->split < t->splits)
            snprintf(d->slices[t->first_slice + r->split].route, FERRY_LIST_MAX, "%s",
                     r->shards);
    }
    for (unsigned k = 0; !rc && k < d->o.tenants; k++) {
        demo_tenant *t = &d->tenants[k];
        if (t->got_rows != t->want_rows || strcmp(t->got_sum, t->want_sum))
            verify_fail(d, "tenant %s: %llu rows, sum(v) %s; ingested %llu rows, sum(v) %s",
                        t->name, (unsigned long long)t->got_rows, t->got_sum,
                        (unsigned long long)t->want_rows, t->want_sum);
    }
    for (size_t i = 0; !rc && i < d->n_slices; i++) {
        const demo_slice *s = &d->slices[i];
        if (strcmp(s->holder, s->route))
            verify_fail(d, "slice %s/%u is routed to %s but its rows are on %s",
                        d->tenants[s->tenant].name, s->split, s->route,
                        !s->holder[0] ? "no node" : !strcmp(s->holder, "*") ? "several nodes"
                                                                           : s->holder);
    }
    if (!rc)
        rc = check_splits(d, err);
    ferry_record_list_free(&routes);
    ferry_catalog_close(cat);
    ferry_config_free(&cfg);
    return rc;
}

/* ---- output ------------------------------------------------------------------------------- */

static json_t *result_json(const demo *d, double wall)
{
    json_t *o = json_object();
    json_object_set_new(o, "tenants", json_integer(d->o.tenants));
    json_object_set_new(o, "slices", json_integer((json_int_t)d->n_slices));
    json_object_set_new(o, "rows", json_integer((json_int_t)d->total_rows));
    json_object_set_new(o, "days", json_integer(d->o.days));
    json_object_set_new(o, "cold_days", json_integer(d->o.cold_days));
    json_object_set_new(o, "object_store",
                        json_string(d->o.lab.object_store ? d->o.lab.object_store : "local"));
    json_object_set_new(o, "partitions_tiered", json_integer((json_int_t)d->tiered));
    json_object_set_new(o, "tier_bytes_uploaded", json_integer((json_int_t)d->tier_uploaded));
    json_object_set_new(o, "tier_pointer_bytes", json_integer((json_int_t)d->tier_pointer_bytes));
    json_object_set_new(o, "tier_step_ms", json_incref(d->tier_step_ms));
    json_object_set_new(o, "moves_planned", json_integer((json_int_t)d->moves_planned));
    json_object_set_new(o, "moves", json_integer((json_int_t)d->moves_done));
    json_object_set_new(o, "moves_failed", json_integer((json_int_t)d->moves_failed));
    json_object_set_new(o, "tenants_moved", json_integer((json_int_t)d->moved_tenants));
    json_object_set_new(o, "max_parallel", json_integer(d->o.parallel));
    json_object_set_new(o, "cold_parts", json_integer((json_int_t)d->cold_parts));
    json_object_set_new(o, "cold_bytes", json_integer((json_int_t)d->cold_bytes));
    json_object_set_new(o, "cold_copied_bytes", json_integer((json_int_t)d->cold_copied));
    json_object_set_new(o, "hot_parts", json_integer((json_int_t)d->hot_parts));
    json_object_set_new(o, "hot_bytes", json_integer((json_int_t)d->hot_bytes));
    json_object_set_new(o, "hot_copied_bytes", json_integer((json_int_t)d->hot_copied));
    json_object_set_new(o, "rebalance_seconds", json_real(round(d->rebalance_s * 10) / 10));
    json_object_set_new(o, "move_p50_seconds", json_real(round(d->move_p50_s * 1000) / 1000));
    json_object_set_new(o, "move_p99_seconds", json_real(round(d->move_p99_s * 1000) / 1000));
    json_object_set_new(o, "verify_failures", json_integer((json_int_t)d->verify_failures));
    if (d->verify_failures)
        json_object_set_new(o, "first_verify_failure", json_string(d->first_failure));
    json_object_set_new(o, "phase_seconds", json_incref(d->phases));
    json_object_set_new(o, "wall_seconds", json_real(round(wall * 10) / 10));
    if (d->o.keep)
        json_object_set_new(o, "config", json_string(d->conf));
    return o;
}

static void print_table(const demo *d, double wall)
{
    char a[32], b[32], c[32], e[32];
    printf("ferry demo: %u tenants (1 to %u splits, %zu slices), %u days of rows (%llu rows), "
           "the oldest %u tiered, then node4 added\n\n",
           d->o.tenants, d->tenants[0].splits, d->n_slices, d->o.days,
           (unsigned long long)d->total_rows, d->o.cold_days);
    printf("rebalance: %zu slices of %zu tenants moved, %u at a time, in %.1f s\n\n",
           d->moves_done, d->moved_tenants, d->o.parallel, d->rebalance_s);
    char cold_what[64], hot_what[64], cold_size[64], hot_size[64], cold_copy[96], hot_copy[96];
    snprintf(cold_what, sizeof cold_what, "%zu cold parts (%u oldest days)", d->cold_parts,
             d->o.cold_days);
    snprintf(hot_what, sizeof hot_what, "%zu hot parts (%u newest days)", d->hot_parts,
             d->o.days - d->o.cold_days);
    snprintf(cold_size, sizeof cold_size, "%s in object storage",
             ferry_fmt_bytes(d->cold_bytes, a, sizeof a));
    snprintf(hot_size, sizeof hot_size, "%s on local disk",
             ferry_fmt_bytes(d->hot_bytes, b, sizeof b));
    snprintf(cold_copy, sizeof cold_copy, "%s of pointer files (%.2f%%)",
             ferry_fmt_bytes(d->cold_copied, c, sizeof c),
             d->cold_bytes ? 100.0 * (double)d->cold_copied / (double)d->cold_bytes : 0.0);
    snprintf(hot_copy, sizeof hot_copy, "%s, copied as-is",
             ferry_fmt_bytes(d->hot_copied, e, sizeof e));
    printf("%-34s %-28s %s\n", "What moved", "Real data size", "What was actually copied");
    printf("%-34s %-28s %s\n", cold_what, cold_size, cold_copy);
    printf("%-34s %-28s %s\n", hot_what, hot_size, hot_copy);
    printf("\nverified: %u tenants' rows and sum(v) as ingested, every slice only on its routed "
           "shard, %zu sampled rows in their key's split: %zu failure%s\n",
           d->o.tenants, d->split_checked, d->verify_failures,
           d->verify_failures == 1 ? "" : "s");
    if (d->verify_failures)
        printf("first failure: %s\n", d->first_failure);
    printf("tiering: %zu partitions, %s uploaded, %s of pointer files written\n", d->tiered,
           ferry_fmt_bytes(d->tier_uploaded, a, sizeof a),
           ferry_fmt_bytes(d->tier_pointer_bytes, b, sizeof b));
    printf("wall time: %.1f s\n", wall);
}

/* ---- options ------------------------------------------------------------------------------ */

static int parse_uint(const char *opt, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
    uint64_t x;
    if (!ferry_parse_u64(v, &x) || x < lo || x > hi)
        return cli_usage_error("demo", "%s wants a number from %u to %u, not '%s'", opt, lo, hi,
                               v);
    *out = (unsigned)x;
    return 0;
}

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

/* The story, phase by phase. Returns 0, or 1 after printing the failure. */
static int run(demo *d)
{
    ferry_err err = {0, ""};
    int rc = FERRY_OK;
    double t;
    clock_gettime(CLOCK_MONOTONIC, &d->t0);
    d->now = (int64_t)time(NULL);
    d->phases = json_object();
    d->tier_step_ms = json_object();
    if (d->o.dir) {
        snprintf(d->dir, sizeof d->dir, "%s", d->o.dir);
        if (mkdir(d->dir, 0755) != 0 && errno != EEXIST) {
            rc = ferry_err_set(&err, FERRY_EIO, "--dir %s: %s", d->dir, strerror(errno));
            goto out;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(d->dir, sizeof d->dir, "%s/ferry-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(d->dir)) {
            rc = ferry_err_set(&err, FERRY_EIO, "cannot make a temporary directory %s: %s",
                               d->dir, strerror(errno));
            goto out;
        }
        d->made_dir = true;
    }
    char real[4096];
    if (realpath(d->dir, real))
        snprintf(d->dir, sizeof d->dir, "%s", real);
    snprintf(d->conf, sizeof d->conf, "%s/ferry.conf", d->dir);
    /* the components' own log lines (lab, tiering, moves, agents' clients) go to a file in the
     * lab's directory: the console keeps the progress lines and the result */
    char logpath[4200];
    snprintf(logpath, sizeof logpath, "%s/ferry.log", d->dir);
    d->log_fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (d->log_fd >= 0)
        ferry_log_set_fd(d->log_fd);
    if ((rc = build_model(d, &err)))
        goto out;

    /* 1. the lab */
    t = elapsed(d);
    progress(d, "lab: starting 3 nodes in %s (object store: %s)", d->dir,
             d->o.lab.object_store ? d->o.lab.object_store : "local");
    d->o.lab.dir = d->dir;
    d->o.lab.nodes = 3;
    d->o.lab.timeout_s = 120;
    d->lab_started = true;
    if ((rc = ferry_lab_up(&d->o.lab, &err)) || (rc = append_table_conf(d, &err)) ||
        (rc = open_nodes(d, &err)))
        goto out;
    cli_init_result ir;
    if ((rc = cli_init_cluster(d->conf, &ir, &err)))
        goto out;
    phase_done(d, "lab", t);
    progress(d, "lab: nodes up, catalog initialized (cluster %s, %s catalog, table %s)",
             ir.cluster, ir.backend, DEMO_TABLE);

    /* 2. tenants */
    t = elapsed(d);
    if ((rc = register_tenants(d, &err)))
        goto out;
    phase_done(d, "tenants", t);
    progress(d, "tenants: %u registered, %zu slices placed and routed (largest %llu rows a day "
             "in %u splits, smallest %llu)", d->o.tenants, d->n_slices,
             (unsigned long long)d->tenants[0].rows_per_day, d->tenants[0].splits,
             (unsigned long long)d->tenants[d->o.tenants - 1].rows_per_day);

    /* 3. ingest */
    t = elapsed(d);
    progress(d, "ingest: %llu rows over %u days, generated on the node serving each slice",
             (unsigned long long)d->total_rows, d->o.days);
    if ((rc = ingest(d, &err)) || (rc = measure(d, true, &err)))
        goto out;
    phase_done(d, "ingest", t);
    progress(d, "ingest: done%s", d->verify_failures ? " (row counts differ: see the end)" : "");

    /* 4. tiering */
    t = elapsed(d);
    progress(d, "tier: the oldest %u days into the object store, one run per node", d->o.cold_days);
    if ((rc = tier_all(d, &err)))
        goto out;
    phase_done(d, "tier", t);
    char a[32];
    progress(d, "tier: %zu partitions tiered, %s uploaded", d->tiered,
             ferry_fmt_bytes(d->tier_uploaded, a, sizeof a));

    /* 5. a fourth node */
    t = elapsed(d);
    if ((rc = ferry_lab_add_node(&d->o.lab, &err)) || (rc = append_table_conf(d, &err)) ||
        (rc = open_nodes(d, &err)) || (rc = cli_init_cluster(d->conf, &ir, &err)))
        goto out;
    phase_done(d, "add_node", t);
    progress(d, "add node: %s up and active in the catalog", d->nodes[d->n_nodes - 1].name);

    /* 6. rebalance */
    t = elapsed(d);
    rc = rebalance(d, &err);
    phase_done(d, "rebalance", t);
    if (rc)
        goto out;

    /* 7. verify */
    t = elapsed(d);
    if ((rc = verify(d, &err)))
        goto out;
    phase_done(d, "verify", t);
    progress(d, "verify: %zu failure%s", d->verify_failures, d->verify_failures == 1 ? "" : "s");
out:
    if (rc) {
        cli_fail("demo", &err);
        if (d->lab_started || d->log_fd >= 0)
            fprintf(stderr, "ferry demo: the logs are in %s (ferry.log, node*/node.log)\n",
                    d->dir);
    }
    double wall = elapsed(d);
    if (!rc) {
        if (d->o.json) {
            json_t *o = result_json(d, wall);
            json_dumpf(o, stdout, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
            putchar('\n');
            json_decref(o);
        } else {
            print_table(d, wall);
        }
        fflush(stdout);
    }
    if (d->lab_started && (d->o.keep && !rc)) {
        fprintf(stderr,
                "ferry demo: the lab keeps running in %s\n"
                "  ferry status --config %s\n"
                "  ferry rebalance --config %s --dry-run\n"
                "  ferry lab status --dir %s\n",
                d->dir, d->conf, d->conf, d->dir);
        for (size_t i = 0; i < d->n_nodes; i++)
            fprintf(stderr, "  ferry query --url %s 'SELECT tenant, count() FROM %s GROUP BY "
                    "tenant'\n", d->nodes[i].url, DEMO_TABLE);
        fprintf(stderr, "  stop it: ferry lab down --dir %s\n", d->dir);
    } else if (d->lab_started) {
        ferry_err derr = {0, ""};
        progress(d, "lab: stopping");
        if (ferry_lab_down(d->dir, &derr)) {
            cli_fail("demo", &derr);
            rc = rc ? rc : derr.code;
        }
    }
    if (d->log_fd >= 0) {
        ferry_log_set_fd(2);
        close(d->log_fd);
        d->log_fd = -1;
    }
    if (d->made_dir && !rc)
        nftw(d->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    else if (d->made_dir)
        fprintf(stderr, "ferry demo: %s kept for inspection\n", d->dir);
    for (size_t i = 0; i < d->n_nodes; i++)
        ferry_ch_client_free(d->nodes[i].ch);
    json_decref(d->phases);
    json_decref(d->tier_step_ms);
    free(d->tenants);
    free(d->slices);
    if (!rc && d->verify_failures)
        return 1;
    return rc ? 1 : 0;
}

int cmd_demo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--placement-only")) {
            for (int j = i; j + 1 < argc; j++)
                argv[j] = argv[j + 1];
            return demo_placement_run(argc - 1, argv);
        }
    enum { O_JSON = 256, O_DIR, O_KEEP, O_TENANTS, O_DAYS, O_COLD, O_ROWS, O_PAR, O_LIB, O_STORE,
           O_ENDPOINT, O_BUCKET, O_PREFIX, O_AKF, O_SKF };
    static const struct option opts[] = {{"json", no_argument, NULL, O_JSON},
                                         {"dir", required_argument, NULL, O_DIR},
                                         {"keep", no_argument, NULL, O_KEEP},
                                         {"tenants", required_argument, NULL, O_TENANTS},
                                         {"days", required_argument, NULL, O_DAYS},
                                         {"cold-days", required_argument, NULL, O_COLD},
                                         {"rows-per-day", required_argument, NULL, O_ROWS},
                                         {"max-parallel", required_argument, NULL, O_PAR},
                                         {"libchdb", required_argument, NULL, O_LIB},
                                         {"object-store", required_argument, NULL, O_STORE},
                                         {"s3-endpoint", required_argument, NULL, O_ENDPOINT},
                                         {"s3-bucket", required_argument, NULL, O_BUCKET},
                                         {"s3-prefix", required_argument, NULL, O_PREFIX},
                                         {"s3-access-key-file", required_argument, NULL, O_AKF},
                                         {"s3-secret-key-file", required_argument, NULL, O_SKF},
                                         {NULL, 0, NULL, 0}};
    demo d;
    memset(&d, 0, sizeof d);
    d.log_fd = -1;
    d.o.tenants = 200;
    d.o.days = 4;
    d.o.parallel = 8;
    d.o.rows_per_day = 200000;
    bool cold_given = false;
    int ch, bad;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case O_JSON: d.o.json = true; break;
        case O_DIR: d.o.dir = optarg; break;
        case O_KEEP: d.o.keep = true; break;
        case O_TENANTS:
            if ((bad = parse_uint("--tenants", optarg, 2, 2000, &d.o.tenants)))
                return bad;
            break;
        case O_DAYS:
            if ((bad = parse_uint("--days", optarg, 2, 30, &d.o.days)))
                return bad;
            break;
        case O_COLD:
            if ((bad = parse_uint("--cold-days", optarg, 1, 29, &d.o.cold_days)))
                return bad;
            cold_given = true;
            break;
        case O_PAR:
            if ((bad = parse_uint("--max-parallel", optarg, 1, 16, &d.o.parallel)))
                return bad;
            break;
        case O_ROWS:
            if (!ferry_parse_u64(optarg, &d.o.rows_per_day) || d.o.rows_per_day < 100 ||
                d.o.rows_per_day > 100000000)
                return cli_usage_error("demo", "--rows-per-day wants a number from 100 to "
                                               "100000000, not '%s'", optarg);
            break;
        case O_LIB: d.o.lab.libchdb = optarg; break;
        case O_STORE: d.o.lab.object_store = optarg; break;
        case O_ENDPOINT: d.o.lab.s3_endpoint = optarg; break;
        case O_BUCKET: d.o.lab.s3_bucket = optarg; break;
        case O_PREFIX: d.o.lab.s3_prefix = optarg; break;
        case O_AKF: d.o.lab.s3_access_key_file = optarg; break;
        case O_SKF: d.o.lab.s3_secret_key_file = optarg; break;
        default:
            return cli_usage_error("demo", "unknown option or missing value: %s",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("demo", "unexpected argument '%s'", argv[optind]);
    if (!cold_given)
        d.o.cold_days = d.o.days > 2 ? d.o.days - 2 : 1;
    if (d.o.cold_days >= d.o.days)
        return cli_usage_error("demo", "--cold-days %u must be less than --days %u (the newest "
                               "day stays hot)", d.o.cold_days, d.o.days);
    if (d.o.keep && !d.o.dir)
        return cli_usage_error("demo", "--keep needs --dir DIR (the lab is left running there)");
    const char *store = d.o.lab.object_store;
    if (store && strcmp(store, "local") && strcmp(store, "s3"))
        return cli_usage_error("demo", "--object-store is local or s3, not '%s'", store);
    bool s3 = store && !strcmp(store, "s3");
    if (s3 && (!d.o.lab.s3_endpoint || !d.o.lab.s3_bucket || !d.o.lab.s3_access_key_file ||
               !d.o.lab.s3_secret_key_file))
        return cli_usage_error("demo", "--object-store s3 needs --s3-endpoint, --s3-bucket, "
                               "--s3-access-key-file and --s3-secret-key-file");
    if (!s3 && (d.o.lab.s3_endpoint || d.o.lab.s3_bucket || d.o.lab.s3_prefix ||
                d.o.lab.s3_access_key_file || d.o.lab.s3_secret_key_file))
        return cli_usage_error("demo", "the --s3-* options go with --object-store s3");
    char lib[4096];
    const char *libpath = d.o.lab.libchdb && *d.o.lab.libchdb
                              ? d.o.lab.libchdb
                              : ferry_chdb_default_path(lib, sizeof lib);
    if (access(libpath, R_OK) != 0)
        return cli_usage_error("demo", "the embedded ClickHouse library %s is missing (%s): run "
                               "'make deps' or pass --libchdb PATH", libpath, strerror(errno));
    if (d.o.dir) {
        char why[600] = "";
        if (!dir_usable(d.o.dir, why, sizeof why))
            return cli_usage_error("demo", "%s", why);
    }
    return run(&d);
}
