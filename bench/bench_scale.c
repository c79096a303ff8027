/* Scale benchmark (issue 22): a cluster of 100 shards with the real catalog (SQLite, or ZooKeeper
 * when CATALOG is a zk:// URL), driven through the real `ferry` commands where there is one, with
 * ClickHouse faked: one small HTTP server per shard answering the system.parts queries of the
 * inventory sync and the split manager from a made-up inventory (3 days per slice). Phases, each
 * printing one JSON line:
 *   register   `ferry tenant add --splits K NAME...` for every tenant (10,000 names per command),
 *              in the mix 50% 1 split, 40% 10 splits, 10% 55 splits (10 slices per tenant)
 *   one_more   `ferry tenant add` of one more tenant, and ferry_split_set in this process
 *   raise      `ferry tenant set-splits` of one tenant (1 -> 2 splits), and in this process; the
 *              split manager (`ferry splits`) raising 20 tenants, its run minus its dry run
 *   size       SQLite file size / ZooKeeper znodes and bytes (the server's mntr)
 *   router     the write router's initial load of the routing table, how long a routing change
 *              takes to reach it, and what a reload spends in the catalog and in the router
 *              (bench_router_load, run in a process of its own)
 *   dry_run    `ferry rebalance --dry-run` (inventory sync from the fake servers, then the plan)
 *   plan       the plan after `ferry shard add` of a 101st shard (ferry_rebalance_plan_compute,
 *              and the same plan from every record decoded, the way before the compact scans,
 *              compared move by move) and its schedule under per-shard limits
 *              (ferry_sched_simulate)
 *   capacity   one more tenant once every shard has a capacity (the loads are read then)
 *   status     `ferry status` (median of 3), ferry_cluster_status_read in this process (median of
 *              3), and the coordinator's status page and /metrics, 6 s apart (each finds the
 *              cached status over 5 s old), from `ferry coordinator` started here
 * usage: bench_scale DIR CATALOG FERRY_BIN [TENANTS [PHASES [MIX]]]
 *   PHASES: comma-separated subset of the above (default all). DIR must be empty or absent.
 *   MIX: "mix" (default, above) or "one" (every tenant 1 split). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/catalog.h"
#include "ferry/cluster_status.h"
#include "ferry/http_call.h"
#include "ferry/httpd.h"
#include "ferry/move.h"
#include "ferry/schedule.h"
#include "ferry/split.h"
#include "flow/move_int.h"

extern char **environ;

#define SHARDS 100
#define DAYS 3

static const char *dir, *catalog_url, *ferry_bin;
static char conf[1024];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const ferry_err *err)
{
    fprintf(stderr, "bench_scale: %s: %s\n", what, err ? err->msg : strerror(errno));
    exit(1);
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, dbl_cmp);
    return v[n / 2];
}

/* CPU seconds of the calling thread: on a loaded machine a steadier figure than the wall clock
 * (the fake servers run in threads of their own). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double last_cpu_s; /* user + system CPU of the last run_ferry's process */

/* Runs ferry with args (NULL-terminated), output to DIR/cmd.log; exits on failure. */
static double run_ferry(char **args)
{
    char log[1200];
    snprintf(log, sizeof log, "%s/cmd.log", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    double t0 = now_s();
    if (posix_spawn(&pid, ferry_bin, &fa, NULL, args, environ) != 0)
        die("spawn ferry", NULL);
    int st;
    struct rusage ru;
    wait4(pid, &st, 0, &ru);
    double dt = now_s() - t0;
    last_cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_scale: ferry %s %s failed; see %s\n", args[1],
                args[2] ? args[2] : "", log);
        exit(1);
    }
    return dt;
}

/* ---- the fake ClickHouse: one server per shard ---------------------------------------------- */

typedef struct fake_shard {
    ferry_httpd *srv;
    char *parts;  /* the sync's answer: partition, bytes, rows */
    char *splits; /* the split manager's: database, table, partition, bytes, rows */
    size_t parts_len, splits_len;
    unsigned long queries;
} fake_shard;

static fake_shard fakes[SHARDS + 1]; /* the last one: the shard added by the plan phase */

static void fake_answer(ferry_http_req *req, void *ctx)
{
    fake_shard *f = ctx;
    size_t len;
    const char *sql = ferry_http_body(req, &len);
    const char *q = ferry_http_arg(req, "query");
    if (q && *q)
        sql = q;
    __atomic_add_fetch(&f->queries, 1, __ATOMIC_RELAXED);
    if (strstr(sql, "system.parts") && strstr(sql, "(database, table) IN"))
        ferry_http_respond(req, 200, "text/tab-separated-values", f->splits ? f->splits : "",
                           f->splits_len);
    else if (strstr(sql, "system.parts") && strstr(sql, "GROUP BY partition"))
        ferry_http_respond(req, 200, "text/tab-separated-values", f->parts ? f->parts : "",
                           f->parts_len);
    else
        ferry_http_respond(req, 200, "text/tab-separated-values", "", 0);
}

static void fakes_start(void)
{
    ferry_err err = {0};
    for (int s = 0; s <= SHARDS; s++) {
        ferry_http_route routes[] = {{NULL, "/", NULL, NULL, fake_answer, NULL, &fakes[s], 0}};
        ferry_httpd_options o = {.bind_addr = "127.0.0.1", .threads = 1};
        if (ferry_httpd_start(&o, routes, 1, &fakes[s].srv, &err))
            die("fake ClickHouse", &err);
    }
}

/* A slice's bytes: a tenant's size is Zipf-like over its index, split evenly. */
static uint64_t slice_bytes(unsigned tenant, uint32_t splits)
{
    uint64_t t = 200ULL << 30; /* the biggest tenant: 200 GiB */
    uint64_t b = (uint64_t)((double)t / (1.0 + tenant)) + (64ULL << 20);
    return b / (splits ? splits : 1);
}

static bool one_split; /* MIX "one": every tenant 1 split (`ferry tenant add`'s default) */

static uint32_t splits_of(unsigned t)
{
    return one_split ? 1 : t % 10 < 5 ? 1 : t % 10 < 9 ? 10 : 55;
}

typedef struct inv_build {
    ferry_buf parts[SHARDS], splits[SHARDS];
    const char *only_prefix; /* routes of tenants with this prefix only (NULL: all) */
    size_t slices;
} inv_build;

static int shard_no(const char *name)
{
    return atoi(name + 3); /* "ch-042" */
}

static int add_route(const ferry_record *rec, void *arg, ferry_err *err)
{
    (void)err;
    inv_build *b = arg;
    const ferry_route *r = &rec->u.route;
    int s = ferry_shard_set_count(&r->shards) ? shard_no(ferry_shard_set_at(&r->shards, 0)) : -1;
    if (s < 0 || s >= SHARDS)
        return FERRY_OK;
    unsigned tn = (unsigned)atoi(r->tenant + 1);
    uint32_t splits = splits_of(tn);
    uint64_t bytes = slice_bytes(tn, splits) / DAYS;
    for (int d = 0; d < DAYS; d++) {
        ferry_buf_printf(&b->parts[s], "('%s',2026110%d,%u)\t%llu\t%llu\n", r->tenant, d + 1,
                         r->split, (unsigned long long)bytes, (unsigned long long)(bytes / 40));
        ferry_buf_printf(&b->splits[s], "default\tevents\t('%s',2026110%d,%u)\t%llu\t%llu\n",
                         r->tenant, d + 1, r->split, (unsigned long long)bytes,
                         (unsigned long long)(bytes / 40));
    }
    b->slices++;
    return FERRY_OK;
}

/* The fake servers hold, from now on, DAYS partitions of every slice where its route says. */
static size_t fakes_fill(ferry_catalog *cat)
{
    ferry_err err = {0};
    static inv_build b;
    memset(&b, 0, sizeof b);
    if (ferry_catalog_each(cat, FERRY_REC_ROUTE, NULL, 0, add_route, &b, &err))
        die("reading routes", &err);
    for (int s = 0; s < SHARDS; s++) {
        free(fakes[s].parts);
        free(fakes[s].splits);
        fakes[s].parts_len = b.parts[s].len;
        fakes[s].splits_len = b.splits[s].len;
        fakes[s].parts = ferry_buf_detach(&b.parts[s]);
        fakes[s].splits = ferry_buf_detach(&b.splits[s]);
    }
    return b.slices;
}

/* with_added: also [shard "ch-100"] (for `ferry shard add`; `ferry init` takes every shard) */
static void write_config(bool with_added)
{
    snprintf(conf, sizeof conf, "%s/ferry.conf", dir);
    char tok[1100];
    snprintf(tok, sizeof tok, "%s/agent.token", dir);
    FILE *t = fopen(tok, "w");
    FILE *f = fopen(conf, "w");
    if (!t || !f)
        die(conf, NULL);
    fputs("bench-token-0123456789abcdef\n", t);
    fclose(t);
    fprintf(f, "[cluster]\nname = scale\ncatalog = %s\nrf = 1\n", catalog_url);
    for (int s = 0; s < SHARDS + with_added; s++)
        fprintf(f, "[shard \"ch-%03d\"]\nreplicas = http://127.0.0.1:%u\nagent = "
                   "http://127.0.0.1:1\nagent_token_file = %s\n",
                s, ferry_httpd_port(fakes[s].srv), tok);
    fprintf(f, "[table \"events\"]\ndatabase = default\nlayout = shared\ntenant_column = "
               "tenant\nsplit_column = split\nday_column = day\n");
    fprintf(f, "[router]\nlisten = 127.0.0.1:0\npassthrough = http://127.0.0.1:1\n");
    fprintf(f, "[splits]\ntarget_slice_bytes = 1T\ntarget_slice_rows_per_s = 0\n");
    fclose(f);
}

/* ---- phases ------------------------------------------------------------------------------------ */

static void phase_register(unsigned tenants)
{
    double total = 0;
    size_t slices = 0, commands = 0;
    static const uint32_t kinds[] = {1, 10, 55};
    int n_kinds = one_split ? 1 : 3;
    enum { PER_COMMAND = 10000 };
    char **args = calloc(PER_COMMAND + 8, sizeof *args);
    char(*names)[16] = calloc(PER_COMMAND, sizeof *names);
    for (int k = 0; k < n_kinds; k++) {
        char splits[16];
        snprintf(splits, sizeof splits, "%u", kinds[k]);
        unsigned t = 0;
        while (t < tenants) {
            size_t n = 0;
            args[n++] = "ferry";
            args[n++] = "tenant";
            args[n++] = "add";
            args[n++] = "--config";
            args[n++] = conf;
            args[n++] = "--splits";
            args[n++] = splits;
            size_t first = n;
            for (; t < tenants && n - first < PER_COMMAND; t++)
                if (splits_of(t) == kinds[k]) {
                    snprintf(names[n - first], sizeof names[0], "t%06u", t);
                    args[n] = names[n - first];
                    n++;
                    slices += kinds[k];
                }
            args[n] = NULL;
            if (n > first) {
                total += run_ferry(args);
                commands++;
            }
        }
    }
    printf("{\"phase\":\"register\",\"backend\":\"%s\",\"tenants\":%u,\"slices\":%zu,"
           "\"commands\":%zu,\"seconds\":%.2f,\"per_tenant_ms\":%.3f}\n",
           strncmp(catalog_url, "zk:", 3) ? "sqlite" : "zk", tenants, slices, commands, total,
           total * 1000 / tenants);
    fflush(stdout);
    free(args);
    free(names);
}

/* The floor of every command: starting the ferry process (`ferry version`), median of 5. */
static double process_floor(void)
{
    double t[5];
    char *args[] = {"ferry", "version", NULL};
    for (int i = 0; i < 5; i++)
        t[i] = run_ferry(args);
    return median(t, 5);
}

static void phase_one_more(ferry_catalog *cat)
{
    double cli[5], lib[5];
    ferry_err err = {0};
    double floor_s = process_floor();
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "extra%d", i);
        char *args[] = {"ferry", "tenant", "add", "--config", conf, name, NULL};
        cli[i] = run_ferry(args);
        snprintf(name, sizeof name, "libextra%d", i);
        ferry_split_change ch;
        double t0 = now_s();
        if (ferry_split_set(cat, name, 4, true, false, &ch, &err))
            die("ferry_split_set", &err);
        lib[i] = now_s() - t0;
    }
    double cm = median(cli, 5), lm = median(lib, 5);
    printf("{\"phase\":\"one_more\",\"cli_ms_median\":%.1f,\"cli_ms_min\":%.1f,"
           "\"library_ms_median\":%.2f,\"library_ms_min\":%.2f,\"ferry_version_ms\":%.1f}\n",
           cm * 1000, cli[0] * 1000, lm * 1000, lib[0] * 1000, floor_s * 1000);
    fflush(stdout);
}

static void phase_raise(ferry_catalog *cat)
{
    double cli[5], lib[5];
    ferry_err err = {0};
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%06u", 10 * i); /* 1 split each */
        char *args[] = {"ferry", "tenant", "set-splits", "--config", conf, name, "2", NULL};
        cli[i] = run_ferry(args);
        snprintf(name, sizeof name, "t%06u", 10 * i + 1);
        ferry_split_change ch;
        double t0 = now_s();
        if (ferry_split_set(cat, name, 2, false, false, &ch, &err))
            die("ferry_split_set", &err);
        lib[i] = now_s() - t0;
    }
    double cm = median(cli, 5), lm = median(lib, 5);
    printf("{\"phase\":\"raise\",\"cli_ms_median\":%.1f,\"cli_ms_min\":%.1f,"
           "\"library_ms_median\":%.2f,\"library_ms_min\":%.2f}\n",
           cm * 1000, cli[0] * 1000, lm * 1000, lib[0] * 1000);
    fflush(stdout);
}

/* The split manager (`ferry splits`, ferry_splits_run): one run that raises K one-split tenants
 * the fake servers report over the target, then the same run again, which measures the same and
 * raises nothing; the difference is what the raises cost. */
static void phase_split_manager(ferry_catalog *cat, unsigned tenants)
{
    fakes_fill(cat);
    /* one-split tenants t000100, t000110, ... grown to 1.6 TiB: over the 1 TiB target by more
     * than the hysteresis, so the manager raises each to 2 splits (shard 0 reports it) */
    ferry_buf extra = FERRY_BUF_INIT;
    unsigned want = tenants / 20 < 1000 ? tenants / 20 : 1000;
    for (unsigned t = 100, k = 0; t < tenants && k < want; t += 10, k++)
        ferry_buf_printf(&extra, "default\tevents\t('t%06u',20261101,0)\t%llu\t1\n", t,
                         (16ULL << 40) / 10);
    ferry_buf_append(&extra, fakes[0].splits, fakes[0].splits_len);
    free(fakes[0].splits);
    fakes[0].splits_len = extra.len;
    fakes[0].splits = ferry_buf_detach(&extra);
    ferry_splits_options o = {.config_path = conf};
    json_t *rep = NULL;
    ferry_err err = {0};
    double t0 = now_s();
    if (ferry_splits_run(&o, &rep, &err))
        die("ferry_splits_run", &err);
    double run = now_s() - t0;
    long n = (long)json_integer_value(json_object_get(rep, "raised"));
    json_decref(rep);
    t0 = now_s();
    if (ferry_splits_run(&o, &rep, &err))
        die("ferry_splits_run (again)", &err);
    double again = now_s() - t0;
    long n2 = (long)json_integer_value(json_object_get(rep, "raised"));
    json_decref(rep);
    printf("{\"phase\":\"split_manager\",\"tenants_measured\":%u,\"raised\":%ld,"
           "\"run_s\":%.3f,\"run_without_raises_s\":%.3f,\"raised_then\":%ld,"
           "\"per_raise_ms\":%.2f}\n",
           tenants, n, run, again, n2, n ? (run - again) * 1000 / (double)n : 0);
    fflush(stdout);
}

/* Registration when the shards have capacities: the fill target needs every shard's load, so
 * a registration reads every slice and route (once per command). */
static void phase_capacity(ferry_catalog *cat)
{
    ferry_err err = {0};
    ferry_record_list shards = {0};
    if (ferry_catalog_list(cat, FERRY_REC_SHARD, NULL, 0, &shards, &err))
        die("shards", &err);
    ferry_batch *b = ferry_batch_new();
    for (size_t i = 0; i < shards.n; i++) {
        shards.items[i].u.shard.capacity = 100ULL << 40; /* 100 TiB: room everywhere */
        if (ferry_batch_update(b, &shards.items[i], &err))
            die("shard", &err);
    }
    if (ferry_catalog_commit(cat, b, NULL, &err))
        die("capacities", &err);
    ferry_batch_free(b);
    ferry_record_list_free(&shards);
    double cli[3], lib[3];
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "cap%d-%d", (int)getpid(), i);
        char *args[] = {"ferry", "tenant", "add", "--config", conf, name, NULL};
        cli[i] = run_ferry(args);
        snprintf(name, sizeof name, "libcap%d-%d", (int)getpid(), i);
        ferry_split_change ch;
        double t0 = now_s();
        if (ferry_split_set(cat, name, 1, true, false, &ch, &err))
            die("ferry_split_set", &err);
        lib[i] = now_s() - t0;
    }
    double cm = median(cli, 3), lm = median(lib, 3);
    printf("{\"phase\":\"capacity\",\"one_more_cli_s_median\":%.3f,"
           "\"one_more_library_s_median\":%.3f}\n", cm, lm);
    fflush(stdout);
}

/* The server's mntr output, value of one key. */
static long zk_mntr(const char *hostport, const char *key)
{
    char host[64];
    int port = 0;
    if (sscanf(hostport, "%63[^:]:%d", host, &port) != 2)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        return -1;
    if (write(fd, "mntr", 4) != 4) {
        close(fd);
        return -1;
    }
    char buf[16384];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    buf[n] = '\0';
    const char *p = strstr(buf, key);
    return p ? atol(p + strlen(key) + 1) : -1;
}

static void phase_size(void)
{
    if (!strncmp(catalog_url, "sqlite:", 7)) {
        const char *path = catalog_url + 7;
        char wal[1100];
        snprintf(wal, sizeof wal, "%s-wal", path);
        struct stat a, b;
        long long db = stat(path, &a) == 0 ? (long long)a.st_size : -1;
        long long w = stat(wal, &b) == 0 ? (long long)b.st_size : 0;
        printf("{\"phase\":\"size\",\"backend\":\"sqlite\",\"file_bytes\":%lld,\"wal_bytes\":%lld}\n",
               db, w);
    } else {
        char hp[128];
        sscanf(catalog_url + 5, "%127[^/]", hp);
        printf("{\"phase\":\"size\",\"backend\":\"zk\",\"znodes\":%ld,\"data_bytes\":%ld}\n",
               zk_mntr(hp, "zk_znode_count"), zk_mntr(hp, "zk_approximate_data_size"));
    }
    fflush(stdout);
}

/* The router measured in a process of its own (bench_router_load, beside this program), so its
 * peak memory is the router's. */
static void phase_router(void)
{
    fflush(stdout);
    char self[1100];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
    if (n <= 0)
        die("/proc/self/exe", NULL);
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    snprintf(slash + 1, sizeof self - (size_t)(slash + 1 - self), "bench_router_load");
    char *args[] = {"bench_router_load", conf, (char *)catalog_url, NULL};
    pid_t pid;
    if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
        die("spawn bench_router_load", NULL);
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        die("router phase failed", NULL);
}

static void phase_dry_run(ferry_catalog *cat)
{
    size_t slices = fakes_fill(cat);
    char *args[] = {"ferry", "rebalance", "--dry-run", "--config", conf, NULL};
    double t[3], cpu[3];
    for (int i = 0; i < 3; i++) {
        t[i] = run_ferry(args); /* the first one also records the slice sizes */
        cpu[i] = last_cpu_s;
    }
    unsigned long q = 0;
    for (int s = 0; s < SHARDS; s++)
        q += fakes[s].queries;
    printf("{\"phase\":\"dry_run\",\"slices\":%zu,\"partitions\":%zu,\"first_s\":%.3f,"
           "\"then_s\":[%.3f,%.3f],\"cpu_s\":[%.3f,%.3f,%.3f],\"fake_queries\":%lu}\n",
           slices, slices * DAYS, t[0], t[1], t[2], cpu[0], cpu[1], cpu[2], q);
    fflush(stdout);
}

/* A move's expected seconds, the cost model of bench_schedule.c (docs/benchmarks.md, "Scale"):
 * 1 s, 0.55 s per part (one per daily partition here: DAYS), the hot day's bytes at 100 MB/s. */
static double move_seconds(uint64_t bytes)
{
    return 1.0 + 0.55 * DAYS + (double)bytes / DAYS / 100e6;
}

static void phase_plan(ferry_catalog *cat)
{
    ferry_err err = {0};
    char *args[] = {"ferry", "shard", "add", "--config", conf, "ch-100", NULL};
    write_config(true);
    double add_cli = run_ferry(args); /* prints the plan: includes a sync and the plan */
    double add_cpu = last_cpu_s;
    ferry_rebalance_plan p;
    double t0 = now_s(), c0 = thread_cpu_s();
    if (ferry_rebalance_plan_compute(cat, &p, &err))
        die("plan", &err);
    double plan_s = now_s() - t0, plan_cpu = thread_cpu_s() - c0;
    ferry_rebalance_plan q;
    t0 = now_s();
    c0 = thread_cpu_s();
    if (mv_plan_compute_records(cat, &q, &err))
        die("plan from records", &err);
    double plan_records_s = now_s() - t0, plan_records_cpu = thread_cpu_s() - c0;
    bool same = p.n_moves == q.n_moves && p.moved_bytes == q.moved_bytes;
    for (size_t i = 0; same && i < p.n_moves; i++)
        same = p.moves[i].kind == q.moves[i].kind && !strcmp(p.moves[i].tenant, q.moves[i].tenant) &&
               p.moves[i].split == q.moves[i].split && !strcmp(p.moves[i].from, q.moves[i].from) &&
               !strcmp(p.moves[i].to, q.moves[i].to) && p.moves[i].bytes == q.moves[i].bytes;
    ferry_rebalance_plan_free(&q);
    ferry_sched_move *sm = calloc(p.n_moves + 1, sizeof *sm);
    double *secs = calloc(p.n_moves + 1, sizeof *secs);
    size_t n_shards;
    if (ferry_rebalance_sched_moves(&p, sm, &n_shards, &err))
        die("sched moves", &err);
    for (size_t i = 0; i < p.n_moves; i++)
        secs[i] = move_seconds(p.moves[i].bytes);
    double makespan;
    size_t peak;
    t0 = now_s();
    if (ferry_sched_simulate(sm, p.n_moves, n_shards, 4, 0, secs, NULL, &makespan, &peak, &err))
        die("simulate", &err);
    double sched_s = now_s() - t0;
    printf("{\"phase\":\"plan\",\"change\":\"add ch-100\",\"shard_add_cli_s\":%.3f,"
           "\"shard_add_cli_cpu_s\":%.3f,\"plan_s\":%.3f,\"plan_cpu_s\":%.3f,"
           "\"plan_records_s\":%.3f,\"plan_records_cpu_s\":%.3f,\"plans_identical\":%s,"
           "\"moves\":%zu,\"moved_bytes\":%llu,\"schedule_s\":%.3f,"
           "\"per_shard\":4,\"simulated_hours\":%.2f,\"peak_running\":%zu}\n",
           add_cli, add_cpu, plan_s, plan_cpu, plan_records_s, plan_records_cpu,
           same ? "true" : "false", p.n_moves,
           (unsigned long long)p.moved_bytes, sched_s, makespan / 3600, peak);
    fflush(stdout);
    ferry_rebalance_plan_free(&p);
    free(sm);
    free(secs);
}

/* GET url, timed; exits unless it answers 200. */
static double http_get_s(const char *url, size_t *bytes)
{
    ferry_err err = {0};
    ferry_http_call call = {.url = url, .timeout_ms = 120000, .max_answer = 64 << 20};
    ferry_http_answer a;
    double t0 = now_s();
    int rc = ferry_http_do(&call, &a, &err);
    double dt = now_s() - t0;
    if (rc || a.status != 200) {
        fprintf(stderr, "bench_scale: GET %s: %s (status %ld)\n", url, rc ? err.msg : "",
                a.status);
        exit(1);
    }
    *bytes = a.body.len;
    ferry_http_answer_free(&a);
    return dt;
}

static void phase_status(ferry_catalog *cat)
{
    ferry_err err = {0};
    double cli[3], lib[3], cli_cpu[3], lib_cpu[3];
    char *args[] = {"ferry", "status", "--config", conf, NULL};
    for (int i = 0; i < 3; i++) {
        cli[i] = run_ferry(args);
        cli_cpu[i] = last_cpu_s;
    }
    size_t slices = 0;
    for (int i = 0; i < 3; i++) {
        ferry_cluster_status cs;
        double t0 = now_s(), c0 = thread_cpu_s();
        if (ferry_cluster_status_read(cat, 10, &cs, &err))
            die("status", &err);
        lib[i] = now_s() - t0;
        lib_cpu[i] = thread_cpu_s() - c0;
        slices = cs.slices;
        ferry_cluster_status_free(&cs);
    }
    /* the coordinator, its status page and /metrics */
    char port_file[1200], log[1200];
    snprintf(port_file, sizeof port_file, "%s/coord.port", dir);
    snprintf(log, sizeof log, "%s/coord.log", dir);
    unlink(port_file);
    char *cargs[] = {"ferry", "coordinator", "--config", conf, "--listen", "127.0.0.1:0",
                     "--port-file", port_file, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    if (posix_spawn(&pid, ferry_bin, &fa, NULL, cargs, environ) != 0)
        die("spawn ferry coordinator", NULL);
    posix_spawn_file_actions_destroy(&fa);
    unsigned port = 0;
    for (int i = 0; i < 600 && !port; i++) {
        FILE *f = fopen(port_file, "r");
        if (!f || fscanf(f, "%u", &port) != 1)
            port = 0;
        if (f)
            fclose(f);
        if (!port)
            usleep(100 * 1000);
    }
    if (!port) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        die("the coordinator did not start (see coord.log)", NULL);
    }
    sleep(6); /* past its start (the routing table's first load) and the status cache's age */
    char page[64], metrics[64];
    snprintf(page, sizeof page, "http://127.0.0.1:%u/", port);
    snprintf(metrics, sizeof metrics, "http://127.0.0.1:%u/metrics", port);
    size_t page_bytes, metrics_bytes;
    double page_s[2], metrics_s;
    page_s[0] = http_get_s(page, &page_bytes);
    sleep(6);
    metrics_s = http_get_s(metrics, &metrics_bytes);
    sleep(6);
    page_s[1] = http_get_s(page, &page_bytes);
    double warm_s = http_get_s(page, &page_bytes); /* at once: the status just served */
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    double cli_med = median(cli, 3), lib_med = median(lib, 3); /* sorts: [0] is the least */
    double cli_cpu_med = median(cli_cpu, 3), lib_cpu_med = median(lib_cpu, 3);
    printf("{\"phase\":\"status\",\"slices\":%zu,\"cli_s_median\":%.3f,\"cli_s_min\":%.3f,"
           "\"cli_cpu_s_median\":%.3f,\"lib_s_median\":%.3f,\"lib_cpu_s_median\":%.3f,"
           "\"page_6s_apart_s\":[%.3f,%.3f],\"page_again_s\":%.3f,"
           "\"page_bytes\":%zu,\"metrics_6s_apart_s\":%.3f}\n",
           slices, cli_med, cli[0], cli_cpu_med, lib_med, lib_cpu_med, page_s[0], page_s[1],
           warm_s, page_bytes, metrics_s);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_scale DIR CATALOG FERRY_BIN [TENANTS [PHASES [MIX]]]\n");
        return 2;
    }
    dir = argv[1];
    catalog_url = argv[2];
    ferry_bin = argv[3];
    unsigned tenants = argc > 4 ? (unsigned)atoi(argv[4]) : 100000;
    const char *phases = argc > 5 ? argv[5] : "register,one_more,raise,split_manager,size,router,"
                                              "dry_run,plan,capacity,status";
    one_split = argc > 6 && !strcmp(argv[6], "one");
    signal(SIGPIPE, SIG_IGN);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        die(dir, NULL);
    fakes_start();
    write_config(false);
    char *init[] = {"ferry", "init", "--config", conf, NULL};
    run_ferry(init);
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    if (ferry_catalog_open(catalog_url, &cat, &err))
        die("catalog", &err);
    if (strstr(phases, "register"))
        phase_register(tenants);
    if (strstr(phases, "size"))
        phase_size();
    if (strstr(phases, "one_more"))
        phase_one_more(cat);
    if (strstr(phases, "raise"))
        phase_raise(cat);
    if (strstr(phases, "split_manager"))
        phase_split_manager(cat, tenants);
    if (strstr(phases, "router"))
        phase_router();
    if (strstr(phases, "dry_run"))
        phase_dry_run(cat);
    if (strstr(phases, "plan"))
        phase_plan(cat);
    if (strstr(phases, "capacity"))
        phase_capacity(cat);
    if (strstr(phases, "status"))
        phase_status(cat);
    ferry_catalog_close(cat);
    for (int s = 0; s <= SHARDS; s++) {
        ferry_httpd_stop(fakes[s].srv);
        free(fakes[s].parts);
        free(fakes[s].splits);
    }
    return 0;
}
