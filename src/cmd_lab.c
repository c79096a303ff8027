/* ferry lab: start, inspect, grow and stop a lab of ClickHouse nodes on this machine (one
 * ferry-node process per simulated server; see docs/lab.md). */
#include "cli.h"
#include "ferry/lab.h"
#include "ferry/strutil.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_lab_usage[] =
    "usage: ferry lab up --dir DIR [--nodes N] [--object-store local|s3] [--timeout SECS]\n"
    "                    [--s3-endpoint URL --s3-bucket B --s3-access-key-file F\n"
    "                     --s3-secret-key-file F [--s3-prefix P]\n"
    "                     [--s3-uploader-access-key-file F --s3-uploader-secret-key-file F]\n"
    "                     [--s3-janitor-access-key-file F --s3-janitor-secret-key-file F]]\n"
    "                    [--libchdb PATH] [--cold-cache SIZE] [--version 26.7|26.5]\n"
    "       ferry lab status --dir DIR [--json]\n"
    "       ferry lab add-node --dir DIR [--timeout SECS] [--version 26.7|26.5]\n"
    "       ferry lab restart-node --dir DIR --node NAME [--version 26.7|26.5] [--timeout SECS]\n"
    "       ferry lab down --dir DIR\n"
    "\n"
    "Runs ClickHouse 26.7 servers on this machine, one ferry-node process each, with its own\n"
    "data path and a loopback HTTP port speaking ClickHouse's HTTP interface. Cold data goes to\n"
    "a shared object store: a blob directory under DIR (default) or an S3 bucket.\n"
    "\n"
    "  up         starts what is not running: new nodes up to N (default 3 for a new lab), and\n"
    "             recorded nodes that died. Running nodes stay. Waits until each answers\n"
    "             (--timeout, default 60 s). Writes DIR/ferry.conf for --config.\n"
    "  status     lists the nodes (alive or not) and the object store.\n"
    "  add-node   adds one node to a lab and starts it.\n"
    "  restart-node  stops one node and starts it again on the same data (a rolling upgrade:\n"
    "             --version gives the ClickHouse it comes back with).\n"
    "  down       stops the lab's nodes (only processes the lab started). Data stays in DIR.\n"
    "\n"
    "The embedded ClickHouse is libchdb.so: --libchdb, else $FERRY_LIBCHDB, else the cache\n"
    "filled by 'make deps'. ferry-node is found next to ferry, or at $FERRY_NODE_BIN.\n"
    "--cold-cache SIZE (new lab only, e.g. 512M) puts ClickHouse's filesystem cache in front\n"
    "of every node's cold disk: disk cold_cache (type cache over cold), on the cold volume.\n"
    "--version picks a cached build per node: 26.7 (26.7.3-stable.1) or 26.5 (26.5.3, fetched by\n"
    "'scripts/setup.sh --chdb 26.5'); a new lab pins its version in DIR/ferry.conf.\n"
    "The --s3-access-key-file/--s3-secret-key-file key is the clickhouse role's (the cold\n"
    "disk's); the uploader and janitor roles use it too unless given their own.\n"
    "Users: 'default' without password, 'ferry' with the password in DIR/ferry.password.\n";

static int print_status(json_t *st, bool as_json)
{
    if (as_json) {
        char *s = json_dumps(st, JSON_INDENT(2));
        if (!s)
            return 1;
        puts(s);
        free(s);
        return 0;
    }
    json_t *os = json_object_get(st, "object_store");
    printf("lab %s\n", json_string_value(json_object_get(st, "dir")));
    if (!strcmp(json_string_value(json_object_get(os, "type")), "local"))
        printf("object store: local %s\n", json_string_value(json_object_get(os, "path")));
    else
        printf("object store: s3 %s bucket %s\n",
               json_string_value(json_object_get(os, "endpoint")),
               json_string_value(json_object_get(os, "bucket")));
    if (json_integer_value(json_object_get(os, "cold_cache_bytes")))
        printf("cold cache: %lld bytes per node (disk cold_cache)\n",
               (long long)json_integer_value(json_object_get(os, "cold_cache_bytes")));
    printf("clickhouse_version pinned: %s\n",
           json_string_value(json_object_get(st, "clickhouse_version")));
    printf("%-8s %-24s %-8s %-6s %-10s %-9s %s\n", "NAME", "HTTP", "PID", "ALIVE", "CLICKHOUSE",
           "INSERTS", "DATA");
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(st, "nodes"), i, n)
    {
        json_t *pid = json_object_get(n, "pid");
        char pidbuf[32] = "-";
        if (json_is_integer(pid))
            snprintf(pidbuf, sizeof pidbuf, "%lld", (long long)json_integer_value(pid));
        const char *ch = json_string_value(json_object_get(n, "clickhouse"));
        const char *im = json_string_value(json_object_get(n, "insert_mode"));
        printf("%-8s %-24s %-8s %-6s %-10s %-9s %s\n",
               json_string_value(json_object_get(n, "name")),
               json_string_value(json_object_get(n, "http")), pidbuf,
               json_is_true(json_object_get(n, "alive")) ? "yes" : "no", ch ? ch : "-",
               im ? im : "-", json_string_value(json_object_get(n, "data_path")));
    }
    return 0;
}

int cmd_lab(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("lab", "missing subcommand (up, status, add-node, restart-node, "
                               "down)");
    const char *sub = argv[1];
    if (strcmp(sub, "up") && strcmp(sub, "status") && strcmp(sub, "add-node") &&
        strcmp(sub, "down") && strcmp(sub, "restart-node"))
        return cli_usage_error("lab", "unknown subcommand '%s'", sub);
    enum { O_NODES = 256, O_STORE, O_ENDPOINT, O_BUCKET, O_PREFIX, O_AKF, O_SKF, O_TIMEOUT,
           O_LIB, O_JSON, O_DIR, O_UAKF, O_USKF, O_JAKF, O_JSKF, O_CACHE, O_VERSION, O_NODE };
    static const struct option opts[] = {
        {"dir", required_argument, NULL, O_DIR},
        {"nodes", required_argument, NULL, O_NODES},
        {"object-store", required_argument, NULL, O_STORE},
        {"s3-endpoint", required_argument, NULL, O_ENDPOINT},
        {"s3-bucket", required_argument, NULL, O_BUCKET},
        {"s3-prefix", required_argument, NULL, O_PREFIX},
        {"s3-access-key-file", required_argument, NULL, O_AKF},
        {"s3-secret-key-file", required_argument, NULL, O_SKF},
        {"s3-uploader-access-key-file", required_argument, NULL, O_UAKF},
        {"s3-uploader-secret-key-file", required_argument, NULL, O_USKF},
        {"s3-janitor-access-key-file", required_argument, NULL, O_JAKF},
        {"s3-janitor-secret-key-file", required_argument, NULL, O_JSKF},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"libchdb", required_argument, NULL, O_LIB},
        {"cold-cache", required_argument, NULL, O_CACHE},
        {"json", no_argument, NULL, O_JSON},
        {"version", required_argument, NULL, O_VERSION},
        {"node", required_argument, NULL, O_NODE},
        {NULL, 0, NULL, 0}};
    ferry_lab_options o = {0};
    bool as_json = false;
    uint64_t v;
    int ch;
    optind = 2;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case O_DIR: o.dir = optarg; break;
        case O_NODES:
            if (!ferry_parse_u64(optarg, &v) || v == 0 || v > 64)
                return cli_usage_error("lab", "--nodes wants a number from 1 to 64, not '%s'",
                                       optarg);
            o.nodes = (unsigned)v;
            break;
        case O_TIMEOUT:
            if (!ferry_parse_duration(optarg, &v) || v == 0 || v > 3600)
                return cli_usage_error("lab", "--timeout wants 1..3600 seconds, not '%s'",
                                       optarg);
            o.timeout_s = (unsigned)v;
            break;
        case O_STORE: o.object_store = optarg; break;
        case O_ENDPOINT: o.s3_endpoint = optarg; break;
        case O_BUCKET: o.s3_bucket = optarg; break;
        case O_PREFIX: o.s3_prefix = optarg; break;
        case O_AKF: o.s3_access_key_file = optarg; break;
        case O_SKF: o.s3_secret_key_file = optarg; break;
        case O_UAKF: o.s3_uploader_access_key_file = optarg; break;
        case O_USKF: o.s3_uploader_secret_key_file = optarg; break;
        case O_JAKF: o.s3_janitor_access_key_file = optarg; break;
        case O_JSKF: o.s3_janitor_secret_key_file = optarg; break;
        case O_LIB: o.libchdb = optarg; break;
        case O_CACHE:
            /* below a few MB ClickHouse's 4 MB reservations cannot work; beyond 1T a typo */
            if (!ferry_parse_bytes(optarg, &v) || v < (8u << 20) || v > (1ull << 40))
                return cli_usage_error("lab", "--cold-cache wants a size from 8M to 1T (e.g. "
                                       "512M), not '%s'", optarg);
            o.cold_cache_bytes = v;
            break;
        case O_JSON: as_json = true; break;
        case O_VERSION: o.version = optarg; break;
        case O_NODE: o.node = optarg; break;
        default:
            return cli_usage_error("lab", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc)
        return cli_usage_error("lab", "unexpected argument '%s'", argv[optind]);
    if (!o.dir)
        return cli_usage_error("lab", "--dir DIR is required");
    bool is_up = !strcmp(sub, "up"), is_add = !strcmp(sub, "add-node");
    bool is_restart = !strcmp(sub, "restart-node");
    if (o.version && !is_up && !is_add && !is_restart)
        return cli_usage_error("lab", "--version goes with 'lab up', 'lab add-node' and "
                               "'lab restart-node'");
    if (is_restart != (o.node != NULL))
        return cli_usage_error("lab", is_restart ? "'lab restart-node' needs --node NAME"
                                                 : "--node goes with 'lab restart-node'");
    if (!is_up && (o.nodes || o.object_store || o.s3_endpoint || o.s3_bucket || o.s3_prefix ||
                   o.s3_access_key_file || o.s3_secret_key_file || o.libchdb ||
                   o.s3_uploader_access_key_file || o.s3_uploader_secret_key_file ||
                   o.s3_janitor_access_key_file || o.s3_janitor_secret_key_file ||
                   o.cold_cache_bytes))
        return cli_usage_error("lab", "'%s' takes only --dir%s", sub,
                               is_add || is_restart ? ", --version and --timeout" : "");
    if (as_json && strcmp(sub, "status"))
        return cli_usage_error("lab", "--json goes with 'lab status'");
    ferry_err err = {0};
    char cmdname[32];
    snprintf(cmdname, sizeof cmdname, "lab %s", sub);
    if (is_up || is_add || is_restart) {
        int rc = is_up    ? ferry_lab_up(&o, &err)
                 : is_add ? ferry_lab_add_node(&o, &err)
                          : ferry_lab_restart_node(&o, &err);
        if (rc != 0)
            return cli_fail(cmdname, &err);
        json_t *st = NULL;
        if (ferry_lab_status(o.dir, &st, &err) != 0)
            return cli_fail(cmdname, &err);
        int out = print_status(st, false);
        printf("config: %s\n", json_string_value(json_object_get(st, "config")));
        json_decref(st);
        return out;
    }
    if (!strcmp(sub, "down")) {
        if (ferry_lab_down(o.dir, &err) != 0)
            return cli_fail(cmdname, &err);
        printf("lab %s stopped\n", o.dir);
        return 0;
    }
    json_t *st = NULL;
    if (ferry_lab_status(o.dir, &st, &err) != 0)
        return cli_fail(cmdname, &err);
    int out = print_status(st, as_json);
    json_decref(st);
    return out;
}
