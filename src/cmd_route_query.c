/* `ferry route-query`: shows how a SELECT becomes one query per server (and the initiator's
 * query) for a routing table given as TSV, or asks a running router for its plan. The tables,
 * the routes and the output are lib/sql/route_input.c and route_show.c around
 * ferry_route_query (lib/sql/route.c); the router's answer is lib/router_client/explain.c. */
#include "cli.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/route_input.h"
#include "ferry/router_explain.h"
#include "ferry/sqlrw.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_route_query_usage[] =
    "usage: ferry route-query [--config FILE | --tables SPEC]... [--local NAME=LOCAL]...\n"
    "                         [--routes ROUTES.tsv] [--json] \"SQL\"\n"
    "       ferry route-query --router URL [--user NAME --password-file F] [--json] \"SQL\"\n"
    "\n"
    "Shows what the router does with a SELECT: the managed tables it reads and their tenant\n"
    "filters, then, with --routes, the plan: one query per server and the initiator's query\n"
    "(see docs/routing.md). Nothing is executed.\n"
    "\n"
    "  --config FILE   managed tables from the [table \"NAME\"] sections (layout, tenant_column,\n"
    "                  split_column, database; per_tenant tables: tenant_table = NAME_{tenant})\n"
    "  --tables SPEC   a managed table, instead of a config; repeatable:\n"
    "                    NAME:shared[:TENANT_COLUMN[:SPLIT_COLUMN]]   (default tenant, split)\n"
    "                    NAME:per_tenant:PATTERN[:SPLIT_COLUMN]       PATTERN like events_{tenant}\n"
    "  --local NAME=LOCAL  the table's name on the servers (default: the name as written);\n"
    "                  for per_tenant tables a pattern with {tenant}\n"
    "  --routes FILE   tenant<TAB>split<TAB>shard[,shard...] per line ('#' starts a comment);\n"
    "                  the first shard serves reads, the others hold copies (a move in flight)\n"
    "  --router URL    ask a running `ferry router` (its URL) for the plan it would run now:\n"
    "                  the current routing version, moves in flight (a slice read from source\n"
    "                  and target, or held while a move publishes it), the replica picked per\n"
    "                  slice for this request; nothing is run on any server\n"
    "  --user NAME     with --router: explain as this user (its password is the first line of\n"
    "  --password-file F  F); a user bound to tenants sees the restriction its queries get\n"
    "  --json          one JSON object: kind, why, queries [{server, ref, sql}], initiator,\n"
    "                  format, settings [{name, value, initiator_only}], globals [{name, sql}],\n"
    "                  refs [{table, name, qualifier, tenants|null}]\n"
    "\n"
    "Exit status: 0 planned; 2 bad options, a bad routes file, or SQL that is certainly invalid\n"
    "(unterminated string or comment, unbalanced brackets: the message gives the byte offset);\n"
    "1 a query the router cannot plan (not a SELECT, or not understood: the message says why).\n";

static int out_of_memory(const char *prog)
{
    ferry_err err = {0};
    ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
    return cli_fail(prog, &err);
}

/* Prints o as one line of JSON, or the text in b (rc: how filling it went). */
static int print_json(const char *prog, json_t *o)
{
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (!t)
        return out_of_memory(prog);
    printf("%s\n", t);
    free(t);
    return 0;
}

static int print_text(const char *prog, const ferry_buf *b, int rc)
{
    if (rc)
        return out_of_memory(prog);
    fputs(ferry_buf_cstr(b), stdout);
    return 0;
}

/* --router: the router plans the statement as it would run it now (X-Ferry-Explain) and answers
 * with the plan as JSON; printed as is (--json) or as text. */
static int explain_at_router(const char *prog, const char *url, const char *sql, bool json,
                             const char *user, const char *pwfile)
{
    ferry_err err = {0};
    json_t *o = NULL;
    char *password = NULL;
    ferry_buf b = FERRY_BUF_INIT;
    int status;
    if (ferry_ch_statement_kind(sql) != FERRY_CH_STMT_READ)
        return cli_usage_error(prog, "--router explains SELECT-like statements only");
    if (pwfile && ferry_read_secret_line(pwfile, &password, &err)) {
        ferry_err_prefix(&err, "--password-file: ");
        status = cli_fail(prog, &err);
    } else if (ferry_router_explain(url, user, password, sql, &o, &err))
        status = cli_fail(prog, &err);
    else if (json)
        status = print_json(prog, o);
    else
        status = print_text(prog, &b, ferry_router_explain_text(o, &b));
    if (password) {
        explicit_bzero(password, strlen(password));
        free(password);
    }
    json_decref(o);
    ferry_buf_free(&b);
    return status;
}

int cmd_route_query(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"tables", required_argument, NULL, 't'},
                                         {"local", required_argument, NULL, 'l'},
                                         {"routes", required_argument, NULL, 'r'},
                                         {"router", required_argument, NULL, 'R'},
                                         {"user", required_argument, NULL, 'u'},
                                         {"password-file", required_argument, NULL, 'p'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL, *routes_path = NULL, *router = NULL, *user = NULL,
               *pwfile = NULL;
    const char *specs[FERRY_SQL_MAX_TABLES], *locals[FERRY_SQL_MAX_TABLES];
    size_t n_specs = 0, n_locals = 0;
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 't':
            if (n_specs == FERRY_SQL_MAX_TABLES)
                return cli_usage_error(argv[0], "at most %d --tables", FERRY_SQL_MAX_TABLES);
            specs[n_specs++] = optarg;
            break;
        case 'l':
            if (n_locals == FERRY_SQL_MAX_TABLES)
                return cli_usage_error(argv[0], "at most %d --local", FERRY_SQL_MAX_TABLES);
            locals[n_locals++] = optarg;
            break;
        case 'r': routes_path = optarg; break;
        case 'R': router = optarg; break;
        case 'u': user = optarg; break;
        case 'p': pwfile = optarg; break;
        case 'j': json = true; break;
        case 'h': fputs(cmd_route_query_usage, stdout); return 0;
        default: return cli_usage_error(argv[0], "unknown option");
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(argv[0], "expected exactly one SQL statement");
    const char *sql = argv[optind];
    if (router) {
        if (config || n_specs || routes_path || n_locals)
            return cli_usage_error(argv[0], "--router asks the router, which knows its tables "
                                   "and routes: give no --config, --tables, --local or --routes");
        if (!user != !pwfile)
            return cli_usage_error(argv[0], "give --user and --password-file together");
        return explain_at_router(argv[0], router, sql, json, user, pwfile);
    }
    if (user || pwfile)
        return cli_usage_error(argv[0], "--user and --password-file go with --router");
    if (config && n_specs)
        return cli_usage_error(argv[0], "give --config or --tables, not both");
    config = n_specs ? NULL : cli_config_path(config);
    if (!config && !n_specs)
        return cli_usage_error(argv[0], "no managed tables: give --tables or --config");

    ferry_sql_tables ts = {0};
    ferry_config cfg = {0};
    ferry_sql_routes routes = {0};
    ferry_routed rt = {0};
    ferry_buf b = FERRY_BUF_INIT;
    ferry_err err = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = FERRY_OK;
    for (size_t k = 0; !rc && k < n_specs; k++)
        rc = ferry_sql_tables_add_spec(&ts, specs[k], &err);
    if (!rc && config && !(rc = ferry_config_load(config, &cfg, &err)))
        rc = ferry_sql_tables_from_config(&ts, &cfg, &err);
    if (!rc && !ts.n)
        rc = ferry_err_set(&err, FERRY_EINVAL, "%s: no [table] section", config);
    for (size_t k = 0; !rc && k < n_locals; k++)
        rc = ferry_sql_tables_set_local(&ts, locals[k], &err);
    if (!rc && routes_path && !(rc = ferry_read_file(routes_path, &text, &len, &err)))
        rc = ferry_sql_routes_parse(text, len, routes_path, &routes, &err);
    if (rc) {
        /* nothing planned */
    } else if (routes_path) {
        rc = ferry_route_query(sql, strlen(sql), ts.t, ts.n, ts.local, routes.v, routes.n, &rt,
                               &err);
    } else {
        rc = ferry_sql_analyze(sql, strlen(sql), ts.t, ts.n, &rt.analysis, &err);
        if (!rc && !rt.analysis.understood)
            rc = ferry_err_set(&err, FERRY_EUNSUPPORTED, "cannot route this query: %s",
                               rt.analysis.why);
    }
    int status;
    if (rc) {
        status = cli_fail(argv[0], &err);
    } else if (json) {
        json_t *o = ferry_routed_json(&rt, ts.t, routes_path != NULL);
        status = print_json(argv[0], o);
        json_decref(o);
    } else {
        status = print_text(argv[0], &b, ferry_routed_text(&rt, ts.t, routes_path != NULL, &b));
    }
    ferry_buf_free(&b);
    ferry_routed_free(&rt);
    ferry_sql_routes_free(&routes);
    free(text);
    ferry_sql_tables_free(&ts);
    ferry_config_free(&cfg);
    return status;
}
