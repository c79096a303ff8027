/* `ferry coordinator`: the cluster's one active coordinator. It takes the catalog lease and
 * serves the routing table over HTTP (see include/ferry/coordinator.h); scheduled jobs attach
 * here as they are built. */
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ferry/catalog.h"
#include "ferry/config.h"
#include "ferry/coordinator.h"
#include "ferry/log.h"
#include "ferry/replica.h"
#include "ferry/strutil.h"
#include "ferry/split.h"
#include "ferry/tier.h"

const char cmd_coordinator_usage[] =
    "usage: ferry coordinator [--config FILE | --catalog URL] [--listen ADDR:PORT]\n"
    "                         [--port-file FILE]\n"
    "\n"
    "Runs the cluster's coordinator until SIGTERM or SIGINT. Only one runs at a time: it holds\n"
    "the catalog's lease \"coordinator\" (a ZooKeeper ephemeral node, or a lock on the SQLite\n"
    "file) and exits with status 1 if it loses it. It serves the routing table:\n"
    "\n"
    "  GET /routing[?tenant=T[&split=K]]  the routing table as JSON with its version\n"
    "  GET /routing?known=N&wait=S        long poll until the version differs from N (304 after\n"
    "                                     S seconds, at most 60, when it did not change)\n"
    "  GET /health                        lease and routing version\n"
    "\n"
    "  --config FILE       the cluster's config (default: $FERRY_CONFIG)\n"
    "  --catalog URL       a catalog URL instead of the config's\n"
    "  --listen ADDR:PORT  where to serve (default 127.0.0.1:0, any free port)\n"
    "  --port-file FILE    write the port being served to FILE once listening\n"
    "\n"
    "With [cluster] tier_interval = DURATION in the config (e.g. 1h), the coordinator also runs\n"
    "tiering (as 'ferry tier --config FILE' does) every DURATION; absent or 0: never.\n"
    "With [cluster] splits_interval = DURATION it runs the split manager (as 'ferry splits\n"
    "--config FILE' does: raises the split counts of tenants that outgrew [splits]) every\n"
    "DURATION; absent or 0: never.\n"
    "With [cluster] repair_interval = DURATION, it runs 'ferry repair' (every replicated slice,\n"
    "docs/replicas.md) every DURATION; absent or 0: never. All of them run only while this\n"
    "coordinator holds the lease.\n";

/* The scheduled tiering run: one ferry_tier_run, its summary logged. */
static void scheduled_tier(void *arg)
{
    ferry_tier_options o = {.config_path = arg};
    ferry_err err = {0};
    json_t *report = NULL;
    int rc = ferry_tier_run(&o, &report, &err);
    if (report)
        FLOG_INFO("msg=\"scheduled tiering\" partitions_tiered=%lld jobs_failed=%lld "
                  "bytes_uploaded=%lld",
                  (long long)json_integer_value(json_object_get(report, "partitions_tiered")),
                  (long long)json_integer_value(json_object_get(report, "jobs_failed")),
                  (long long)json_integer_value(json_object_get(report, "bytes_uploaded")));
    if (rc)
        FLOG_WARN("msg=\"scheduled tiering failed\" err=\"%s\"", err.msg);
    json_decref(report);
}

/* The scheduled split manager run: one ferry_splits_run, its summary logged. */
static void scheduled_splits(void *arg)
{
    ferry_splits_options o = {.config_path = arg};
    ferry_err err = {0};
    json_t *report = NULL;
    int rc = ferry_splits_run(&o, &report, &err);
    if (report)
        FLOG_INFO("msg=\"scheduled splits\" tenants=%lld raised=%lld routing_version=%lld",
                  (long long)json_integer_value(json_object_get(report, "tenants_total")),
                  (long long)json_integer_value(json_object_get(report, "raised")),
                  (long long)json_integer_value(json_object_get(report, "routing_version")));
    if (rc)
        FLOG_WARN("msg=\"scheduled splits failed\" err=\"%s\"", err.msg);
    json_decref(report);
}

/* What the scheduled repair needs: the config (shard credentials) and the catalog. */
typedef struct repair_ctx {
    const ferry_config *cfg;
    const char *catalog_url;
    char owner[96];
} repair_ctx;

/* The scheduled repair run: one ferry_repair_run over every replicated slice, summary logged. */
static void scheduled_repair(void *arg)
{
    repair_ctx *r = arg;
    ferry_move_opts o = {.catalog_url = r->catalog_url, .cfg = r->cfg, .owner = r->owner};
    ferry_repair_summary sum = {0};
    ferry_err err = {0};
    int rc = ferry_repair_run(&o, NULL, false, NULL, NULL, &sum, &err);
    FLOG_INFO("msg=\"scheduled repair\" slices=%zu partitions=%zu in_sync=%zu repaired=%zu "
              "failed=%zu unreachable=%zu hot_copied=%llu cold_copied=%llu",
              sum.slices, sum.partitions, sum.in_sync, sum.repaired, sum.failed, sum.unreachable,
              (unsigned long long)sum.hot_copied, (unsigned long long)sum.cold_copied);
    if (rc)
        FLOG_WARN("msg=\"scheduled repair did not finish everything\" err=\"%s\"", err.msg);
}

/* [cluster] KEY = DURATION -> seconds (0: off); FERRY_EINVAL naming FILE:LINE. */
static int interval_of(const ferry_config *cfg, const char *key, uint64_t *secs, ferry_err *err)
{
    *secs = 0;
    const char *v = ferry_config_get(cfg, "cluster", NULL, key);
    if (!v || !*v)
        return FERRY_OK;
    if (!ferry_parse_duration(v, secs) || *secs > 365 * 86400) {
        const ferry_config_entry *e = ferry_config_find(cfg, "cluster", NULL, key);
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [cluster] %s = '%s': expected a "
                             "duration such as 1h (0: off)", cfg->path, e ? e->line : 0, key, v);
    }
    return FERRY_OK;
}

static int parse_listen(const char *s, char *addr, size_t addrsz, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    uint64_t p;
    if (!colon || colon == s || (size_t)(colon - s) >= addrsz || !ferry_parse_u64(colon + 1, &p) ||
        p > 65535)
        return -1;
    memcpy(addr, s, (size_t)(colon - s));
    addr[colon - s] = '\0';
    *port = (uint16_t)p;
    return 0;
}

int cmd_coordinator(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"catalog", required_argument, NULL, 'C'},
                                         {"listen", required_argument, NULL, 'l'},
                                         {"port-file", required_argument, NULL, 'p'},
                                         {NULL, 0, NULL, 0}};
    const char *config_opt = NULL, *catalog = NULL, *listen = "127.0.0.1:0", *port_file = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': config_opt = optarg; break;
        case 'C': catalog = optarg; break;
        case 'l': listen = optarg; break;
        case 'p': port_file = optarg; break;
        default: return cli_usage_error("coordinator", "unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error("coordinator", "unexpected argument '%s'", argv[optind]);
    char addr[64];
    uint16_t port;
    if (parse_listen(listen, addr, sizeof addr, &port))
        return cli_usage_error("coordinator", "--listen '%s' is not ADDR:PORT", listen);

    ferry_err err = {0};
    int status = 0;
    ferry_config cfg = {0};
    ferry_cluster_config cc = {0};
    bool have_cfg = false;
    ferry_coord *coord = NULL;
    if (!catalog) {
        const char *path = cli_config_path(config_opt);
        if (!path)
            return cli_usage_error("coordinator", "needs --config FILE, $FERRY_CONFIG or "
                                   "--catalog URL");
        if (ferry_config_load(path, &cfg, &err) || ferry_cluster_config_read(&cfg, &cc, &err)) {
            status = cli_fail("coordinator", &err);
            goto out;
        }
        have_cfg = true;
        catalog = cc.catalog;
    }

    /* Signals are taken synchronously in this thread; every other thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    ferry_coord_options o = {.catalog_url = catalog, .bind_addr = addr, .port = port};
    ferry_coord_job jobs[3];
    size_t n_jobs = 0;
    static repair_ctx repair; /* outlives the coordinator's job threads */
    if (have_cfg) {
        uint64_t tier_s = 0, splits_s = 0, repair_s = 0;
        if (interval_of(&cfg, "tier_interval", &tier_s, &err) ||
            interval_of(&cfg, "splits_interval", &splits_s, &err) ||
            interval_of(&cfg, "repair_interval", &repair_s, &err)) {
            status = cli_fail("coordinator", &err);
            goto out;
        }
        void *path = (void *)cli_config_path(config_opt);
        if (tier_s)
            jobs[n_jobs++] = (ferry_coord_job){"tier", scheduled_tier, path, (unsigned)tier_s};
        if (splits_s)
            jobs[n_jobs++] = (ferry_coord_job){"splits", scheduled_splits, path, (unsigned)splits_s};
        if (repair_s) {
            repair.cfg = &cfg;
            repair.catalog_url = catalog;
            char host[64] = "localhost";
            gethostname(host, sizeof host - 1);
            snprintf(repair.owner, sizeof repair.owner, "%.60s:%ld:coordinator", host,
                     (long)getpid());
            jobs[n_jobs++] = (ferry_coord_job){"repair", scheduled_repair, &repair,
                                               (unsigned)repair_s};
        }
    }
    o.jobs = jobs;
    o.n_jobs = n_jobs;
    if (have_cfg) {
        /* the status page's fill history ([coordinator] history_interval, history_file) */
        static const char *const keys[] = {"history_interval", "history_file", NULL};
        const char *hi = ferry_config_get(&cfg, "coordinator", NULL, "history_interval");
        uint64_t hs = 0;
        if (ferry_config_check_keys(&cfg, "coordinator", keys, &err)) {
            status = cli_fail("coordinator", &err);
            goto out;
        }
        if (hi && (!ferry_parse_duration(hi, &hs) || hs == 0 || hs > 86400)) {
            ferry_err_set(&err, FERRY_EINVAL, "%s: [coordinator] history_interval = '%s': "
                          "expected a duration from 1s to 24h, such as 5m", cfg.path, hi);
            status = cli_fail("coordinator", &err);
            goto out;
        }
        o.history_every_s = (unsigned)hs;
        o.history_file = ferry_config_get(&cfg, "coordinator", NULL, "history_file");
    }
    if (ferry_coord_start(&o, &coord, &err)) {
        status = cli_fail("coordinator", &err);
        goto out;
    }
    FLOG_INFO("msg=\"coordinator serving\" url=http://%s:%u/routing", addr,
              (unsigned)ferry_coord_port(coord));
    if (port_file) {
        FILE *fp = fopen(port_file, "w");
        if (!fp || fprintf(fp, "%u\n", (unsigned)ferry_coord_port(coord)) < 0 || fclose(fp)) {
            ferry_err_set(&err, FERRY_EIO, "cannot write %s", port_file);
            status = cli_fail("coordinator", &err);
            goto out;
        }
    }
    for (;;) {
        struct timespec ts = {.tv_sec = 1};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            FLOG_INFO("msg=\"coordinator stopping\" signal=%d", sig);
            break;
        }
        if (!ferry_coord_healthy(coord)) {
            ferry_err_set(&err, FERRY_ECONFLICT, "lost the coordinator lease; exiting so a "
                          "supervisor can restart it");
            status = cli_fail("coordinator", &err);
            break;
        }
    }
out:
    ferry_coord_stop(coord);
    if (have_cfg)
        ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);
    return status;
}
