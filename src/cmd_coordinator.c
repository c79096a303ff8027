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
#include <unistd.h>

#include "cli.h"
#include "ferry/catalog.h"
#include "ferry/config.h"
#include "ferry/coordinator.h"
#include "ferry/httpd.h"
#include "ferry/log.h"
#include "ferry/stop.h"
#include "ferry/autopilot.h"
#include "ferry/strutil.h"

const char cmd_coordinator_usage[] =
    "usage: ferry coordinator [--config FILE | --catalog URL] [--listen ADDR:PORT]\n"
    "                         [--port-file FILE]\n"
    "\n"
    "Runs the cluster's coordinator until SIGTERM or SIGINT, then stops within 10 seconds: no\n"
    "more work starts, moves, tiering and repair stop at their next journaled step, and what is\n"
    "still running after that is abandoned (the journals resume it, as after a crash). SIGHUP\n"
    "reloads the config file (checked first: a bad file is refused, logged, and the running\n"
    "config kept). Only one\n"
    "runs at a time: it holds\n"
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
    "The autopilot ([autopilot] in the config, docs/config.md; docs/operations.md, \"Running\n"
    "unattended\") runs while this coordinator holds the lease, each action every\n"
    "*_interval (absent or 0: never):\n"
    "\n"
    "  rebalance_interval  the plan of 'ferry rebalance' when it is not empty (a shard added,\n"
    "                      drained or re-weighted), at most max_moves moves in flight\n"
    "                      (max_moves_per_shard per shard), bandwidth bytes/s in total, and\n"
    "                      starting moves only inside window = HH:MM-HH:MM (UTC)\n"
    "  splits_interval     'ferry splits' (raises the split counts of tenants that outgrew\n"
    "                      [splits])\n"
    "  tier_interval       'ferry tier'\n"
    "  repair_interval     'ferry repair' (every replicated slice, docs/replicas.md)\n"
    "  retention_interval  'ferry retention --keep KEEP' ([autopilot] keep = DURATION)\n"
    "  sweep_interval      'ferry sweep': a report, deleting orphans only with delete_orphans =\n"
    "                      true and min_age = DURATION\n"
    "  doctor_interval     'ferry doctor' ([autopilot] doctor_skip = CHECK,...), also while\n"
    "                      paused\n"
    "\n"
    "Outside window = HH:MM-HH:MM (UTC) no move, split raise, tiering, repair or retention\n"
    "starts and the sweep deletes nothing ([autopilot] window_actions narrows it); doctor\n"
    "always runs. bandwidth_per_shard caps the bytes per second each shard sends plus\n"
    "receives, all moves together.\n"
    "\n"
    "[cluster] tier_interval, splits_interval and repair_interval are older aliases of the\n"
    "[autopilot] keys. 'ferry pause' stops every action but doctor (no new move starts\n"
    "within one interval; moves in flight finish) until 'ferry resume'. Each run, its result\n"
    "and the reason that started it are logged and shown by 'ferry status' and the status\n"
    "page.\n";

/* After SIGTERM the flows stop at their next safe point (include/ferry/stop.h); one still busy
 * this long after (a long statement, a transfer) is abandoned: the process exits and the
 * journals resume its work, as after a kill -9, which every step of moves and tiering is made
 * and tested to survive. (Before, the coordinator finished its scheduled tiering and repair
 * first: 11 minutes under the chaos soak's load, docs/reliability.md.) */
#define COORD_STOP_GRACE_S 10

static void *stop_watchdog(void *arg)
{
    (void)arg;
    struct timespec ts = {.tv_sec = COORD_STOP_GRACE_S};
    while (nanosleep(&ts, &ts) != 0) {
    }
    FLOG_WARN("msg=\"coordinator: work still running %d s after the stop request; exiting "
              "without it, its journal resumes it\"", COORD_STOP_GRACE_S);
    fflush(NULL);
    _exit(0);
    return NULL;
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
    if (!ferry_parse_hostport(listen, addr, sizeof addr, &port))
        return cli_usage_error("coordinator", "--listen '%s' is not ADDR:PORT", listen);

    ferry_err err = {0};
    int status = 0;
    ferry_config cfg = {0};
    ferry_cluster_config cc = {0};
    bool have_cfg = false;
    ferry_coord *coord = NULL;
    ferry_autopilot *ap = NULL;
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
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    ferry_coord_options o = {.catalog_url = catalog, .bind_addr = addr, .port = port};
    ferry_httpd_options http;
    ferry_coord_http_defaults(&http);
    o.http = &http;
    ferry_coord_job jobs[FERRY_AP_ACTIONS];
    ferry_ap_window window;
    size_t n_jobs = 0;
    if (have_cfg) {
        ferry_autopilot_config ac;
        char host[64] = "localhost", owner[96];
        gethostname(host, sizeof host - 1);
        snprintf(owner, sizeof owner, "%.60s:%ld:coordinator", host, (long)getpid());
        if (ferry_autopilot_config_read(&cfg, &ac, &err) ||
            ferry_autopilot_new(&ac, &cfg, cli_config_path(config_opt), catalog, owner, &ap,
                                &err)) {
            status = cli_fail("coordinator", &err);
            goto out;
        }
        if (ac.notes[0])
            FLOG_INFO("msg=\"older config keys in use\" keys=\"%s\"", ac.notes);
        window = ac.window;
        o.window = &window;
        n_jobs = ferry_autopilot_jobs(ap, jobs, FERRY_AP_ACTIONS);
    }
    o.jobs = jobs;
    o.n_jobs = n_jobs;
    if (have_cfg && ferry_coord_config_read(&cfg, &o, &http, &err)) {
        status = cli_fail("coordinator", &err);
        goto out;
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
            ferry_stop_request();
            pthread_t wd;
            if (pthread_create(&wd, NULL, stop_watchdog, NULL) == 0)
                pthread_detach(wd);
            break;
        }
        if (sig == SIGHUP) {
            ferry_err rerr = {0};
            if (!ap)
                FLOG_WARN("msg=\"SIGHUP: nothing to reload (started with --catalog, no config "
                          "file)\"");
            else if (ferry_autopilot_reload(ap, cli_config_path(config_opt), &window, &rerr))
                FLOG_ERROR("msg=\"config reload refused; the running config is kept\" "
                           "err=\"%s\"", rerr.msg);
            else
                ferry_coord_set_window(coord, &window);
        }
        if (!ferry_coord_healthy(coord)) {
            ferry_err_set(&err, FERRY_ECONFLICT, "lost the coordinator lease; exiting so a "
                          "supervisor can restart it");
            status = cli_fail("coordinator", &err);
            break;
        }
    }
out:
    ferry_autopilot_stop(ap); /* no new move; the jobs' threads end with the coordinator */
    ferry_coord_stop(coord);
    ferry_autopilot_free(ap);
    if (have_cfg)
        ferry_cluster_config_free(&cc);
    ferry_config_free(&cfg);
    return status;
}
