/* `ferry agent`: the node agent as a daemon beside a real ClickHouse server (lab nodes mount the
 * same handlers themselves). Serves the API of docs/agent.md until SIGTERM or SIGINT. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ferry/agent.h"
#include "ferry/httpd.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

const char cmd_agent_usage[] =
    "usage: ferry agent --clickhouse URL --data-path DIR --listen ADDR:PORT --token-file FILE\n"
    "                   [--config FILE] [--clickhouse-user USER]\n"
    "                   [--clickhouse-password-file FILE]\n"
    "\n"
    "Runs the node agent for the ClickHouse server at URL (its HTTP interface) whose data\n"
    "directory is DIR, serving the API of docs/agent.md on ADDR:PORT until SIGTERM or SIGINT.\n"
    "\n"
    "  --clickhouse URL       the local server, http://127.0.0.1:8123\n"
    "  --data-path DIR        ClickHouse's <path>; the agent only touches files under it and\n"
    "                         under the disk paths system.disks names\n"
    "  --listen ADDR:PORT     IPv4 address and port to serve on (port 0: any free port)\n"
    "  --token-file FILE      the bearer token callers must send (one line, 16+ characters)\n"
    "  --config FILE          ferry config (or $FERRY_CONFIG): [object_store] with the uploader\n"
    "                         and clickhouse credentials, [cluster] pointer_format, [agent]\n"
    "                         bounds of this server (docs/config.md)\n"
    "  --clickhouse-user USER, --clickhouse-password-file FILE   credentials for the server\n"
    "\n"
    "Exits 2 on bad options or config, 1 when it cannot serve.\n";

int cmd_agent(int argc, char **argv)
{
    static const struct option opts[] = {
        {"clickhouse", required_argument, NULL, 'c'},
        {"data-path", required_argument, NULL, 'd'},
        {"listen", required_argument, NULL, 'l'},
        {"token-file", required_argument, NULL, 't'},
        {"config", required_argument, NULL, 'C'},
        {"clickhouse-user", required_argument, NULL, 'u'},
        {"clickhouse-password-file", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *url = NULL, *data = NULL, *listen = NULL, *token_file = NULL, *config = NULL,
               *user = NULL, *pwfile = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': url = optarg; break;
        case 'd': data = optarg; break;
        case 'l': listen = optarg; break;
        case 't': token_file = optarg; break;
        case 'C': config = optarg; break;
        case 'u': user = optarg; break;
        case 'p': pwfile = optarg; break;
        case 'h': fputs(cmd_agent_usage, stdout); return 0;
        default: return cli_usage_error("agent", "unknown option");
        }
    }
    if (optind != argc)
        return cli_usage_error("agent", "unexpected argument '%s'", argv[optind]);
    if (!url || !data || !listen || !token_file)
        return cli_usage_error("agent", "--clickhouse, --data-path, --listen and --token-file "
                               "are required");
    char host[64];
    uint16_t port = 0;
    if (!ferry_parse_hostport(listen, host, sizeof host, &port))
        return cli_usage_error("agent", "--listen must be ADDR:PORT, e.g. 127.0.0.1:9123");
    if (data[0] != '/' || access(data, R_OK | X_OK) != 0)
        return cli_usage_error("agent", "--data-path %s must be an existing absolute directory",
                               data);
    config = cli_config_path(config);

    ferry_err err = {0};
    char *token = NULL, *password = NULL;
    ferry_agent *agent = NULL;
    ferry_httpd *srv = NULL;
    int status = 0, rc;
    if ((rc = ferry_agent_read_token_file(token_file, &token, &err)))
        goto fail;
    if (pwfile) {
        size_t len;
        if ((rc = ferry_read_file(pwfile, &password, &len, &err)))
            goto fail;
        ferry_chomp(password);
    }
    ferry_agent_options o = {.clickhouse_url = url,
                             .clickhouse_user = user,
                             .clickhouse_password = password,
                             .data_path = data,
                             .token = token,
                             .config_path = config};
    if ((rc = ferry_agent_new(&o, &agent, &err)) || (rc = ferry_agent_check_config(agent, &err)))
        goto fail;

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    ferry_http_route routes[FERRY_AGENT_N_ROUTES];
    size_t nr = ferry_agent_routes(agent, routes, FERRY_AGENT_N_ROUTES);
    ferry_agent_bounds bounds;
    if ((rc = ferry_agent_bounds_read(config, &bounds, &err)))
        goto fail;
    ferry_agent_bounds_apply(&bounds, routes, nr);
    ferry_httpd_options hopt = bounds.http;
    hopt.bind_addr = host;
    hopt.port = port;
    if ((rc = ferry_httpd_start(&hopt, routes, nr, &srv, &err)))
        goto fail;
    ferry_agent_set_httpd(agent, srv);
    char safe[512];
    FLOG_INFO("agent ready listen=http://%s:%u clickhouse=%s data=%s config=%s", host,
              ferry_httpd_port(srv), ferry_redact_url(url, safe, sizeof safe), data,
              config ? config : "none");
    int sig = 0;
    sigwait(&sigs, &sig);
    FLOG_INFO("agent stopping signal=%d", sig);
    /* Leave at once, like ferry-node: waiting for kept-alive connections could take minutes,
     * and every operation is idempotent, so one cut short is simply retried (a temporary
     * folder it leaves is never taken for a part). */
    fflush(NULL);
    _exit(0);
fail:
    status = cli_fail("agent", &err);
    ferry_httpd_stop(srv);
    ferry_agent_free(agent);
    if (token) {
        memset(token, 0, strlen(token));
        free(token);
    }
    if (password) {
        memset(password, 0, strlen(password));
        free(password);
    }
    return status;
}
