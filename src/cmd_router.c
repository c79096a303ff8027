/* `ferry router`: the router daemon (lib/router/). */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ferry/log.h"
#include "ferry/router.h"

const char cmd_router_usage[] =
    "usage: ferry router --config FILE [--listen ADDR:PORT] [--port-file FILE]\n"
    "                    [--retry-journal FILE]\n"
    "\n"
    "Runs the router until SIGTERM or SIGINT. It speaks ClickHouse's HTTP interface: an\n"
    "INSERT INTO <managed table> [(columns)] FORMAT F (JSONEachRow, TSV, TSVWithNames, CSV,\n"
    "CSVWithNames, RowBinary) has each row sent to the shard(s) serving its slice, with the\n"
    "split column set from the table's split_key and the tenant's split count, and a\n"
    "deduplication token per shard and chunk so a retried request is stored once; SELECTs over\n"
    "managed tables become one query per server. Every other statement goes unchanged to\n"
    "[router] passthrough. The routing table and the users are read from the catalog and\n"
    "re-read whenever the routing version changes. See docs/routing.md.\n"
    "\n"
    "Every request carries a user of the catalog (ferry user add), sent as ClickHouse takes it:\n"
    "HTTP Basic, X-ClickHouse-User / X-ClickHouse-Key, or user / password parameters. A user\n"
    "bound to tenants reads and writes only their rows; other statements need an admin\n"
    "([router] auth = none, loopback only, turns this off). See docs/security.md.\n"
    "\n"
    "  GET /ping          Ok.\n"
    "  GET /ferry/router  routing version, oldest routing version with writes in flight, counters\n"
    "                     (reads: per shard queries, errors, decayed error count; failovers;\n"
    "                     limits per user); an admin user or X-Ferry-Token\n"
    "\n"
    "  --config FILE       the cluster's config with [router] (default: $FERRY_CONFIG)\n"
    "  --listen ADDR:PORT  where to serve (default: [router] listen, else 127.0.0.1:8124;\n"
    "                      port 0 picks a free one)\n"
    "  --port-file FILE    write the port being served to FILE once listening\n"
    "  --retry-journal FILE\n"
    "                      keep the slices clients may retry writes to in FILE, so a restarted\n"
    "                      router still holds moves, tiering and repairs off them (overrides\n"
    "                      [router] retry_journal; one file per router)\n";

int cmd_router(int argc, char **argv)
{
    enum { O_LISTEN = CLI_O_LAST, O_PORT_FILE, O_RETRY_JOURNAL };
    static const struct option opts[] = {CLI_OPT_CONFIG,
                                         {"listen", required_argument, NULL, O_LISTEN},
                                         {"port-file", required_argument, NULL, O_PORT_FILE},
                                         {"retry-journal", required_argument, NULL, O_RETRY_JOURNAL},
                                         {NULL, 0, NULL, 0}};
    const char *listen = NULL, *port_file = NULL, *journal = NULL;
    cli_common c = {0};
    int ch, status;
    optind = 1;
    while ((ch = cli_next_option("router", argc, argv, opts, &c, &status))) {
        if (ch == O_LISTEN)
            listen = optarg;
        else if (ch == O_RETRY_JOURNAL)
            journal = optarg;
        else
            port_file = optarg;
    }
    if (status)
        return status;
    const char *path = cli_config_path(c.config);
    if (!path)
        return cli_usage_error("router", "needs --config FILE (or FERRY_CONFIG)");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    ferry_err err = {0};
    ferry_router *r = NULL;
    status = 0;
    ferry_router_options o = {.config_path = path, .listen = listen, .retry_journal = journal};
    if (ferry_router_start(&o, &r, &err))
        return cli_fail("router", &err);
    FLOG_INFO("msg=\"router serving\" port=%u", (unsigned)ferry_router_port(r));
    if (port_file) {
        FILE *fp = fopen(port_file, "w");
        if (!fp || fprintf(fp, "%u\n", (unsigned)ferry_router_port(r)) < 0 || fclose(fp)) {
            ferry_err_set(&err, FERRY_EIO, "cannot write %s", port_file);
            status = cli_fail("router", &err);
            goto out;
        }
    }
    for (;;) {
        int sig = sigwaitinfo(&set, NULL);
        if (sig == SIGTERM || sig == SIGINT) {
            FLOG_INFO("msg=\"router stopping\" signal=%d", sig);
            break;
        }
    }
out:
    ferry_router_stop(r);
    return status;
}
