/* `ferry route-query`: shows how a SELECT becomes one query per server (and the initiator's
 * query) for a routing table given as TSV. The core is ferry_route_query (lib/sql/route.c),
 * which the router will call with the catalog's routes. */
#include "cli.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/router_explain.h"
#include "ferry/sqlrw.h"
#include "ferry/strutil.h"

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

#define MAX_TABLES 64

typedef struct tables_in {
    ferry_sql_table t[MAX_TABLES];
    const char *local[MAX_TABLES];
    char *owned[MAX_TABLES * 4];
    size_t n, n_owned;
} tables_in;

static char *keep(tables_in *ti, char *s)
{
    if (s && ti->n_owned < sizeof ti->owned / sizeof ti->owned[0])
        ti->owned[ti->n_owned++] = s;
    return s;
}

static int parse_table_spec(tables_in *ti, const char *spec, ferry_err *err)
{
    if (ti->n == MAX_TABLES)
        return ferry_err_set(err, FERRY_EINVAL, "--tables: at most %d tables", MAX_TABLES);
    char *copy = keep(ti, strdup(spec));
    if (!copy)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    char *f[5];
    size_t n = ferry_split(copy, ':', f, 5);
    ferry_sql_table *t = &ti->t[ti->n];
    memset(t, 0, sizeof *t);
    if (n < 2 || n > 4 || !*f[0])
        return ferry_err_set(err, FERRY_EINVAL,
                             "--tables '%s': expected NAME:shared[:TENANT[:SPLIT]] or "
                             "NAME:per_tenant:PATTERN[:SPLIT]", spec);
    t->name = f[0];
    if (ferry_layout_parse(f[1], &t->layout, err))
        return ferry_err_prefix(err, "--tables '%s': ", spec);
    if (t->layout == FERRY_LAYOUT_SHARED) {
        t->tenant_column = n > 2 && *f[2] ? f[2] : "tenant";
        t->split_column = n > 3 && *f[3] ? f[3] : "split";
    } else {
        if (n < 3 || !strstr(f[2], "{tenant}"))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "--tables '%s': a per_tenant table needs a name pattern with "
                                 "{tenant}, e.g. %s:per_tenant:%s_{tenant}", spec, f[0], f[0]);
        t->tenant_pattern = f[2];
        t->split_column = n > 3 && *f[3] ? f[3] : "split";
    }
    ti->n++;
    return FERRY_OK;
}

static int tables_from_config(tables_in *ti, ferry_config *cfg, ferry_err *err)
{
    const char *names[MAX_TABLES];
    size_t n = ferry_config_subsections(cfg, "table", names, MAX_TABLES);
    if (n > MAX_TABLES)
        return ferry_err_set(err, FERRY_EINVAL, "%s: at most %d [table] sections", cfg->path,
                             MAX_TABLES);
    for (size_t k = 0; k < n; k++) {
        ferry_sql_table *t = &ti->t[ti->n];
        memset(t, 0, sizeof *t);
        t->name = names[k];
        const char *layout = ferry_config_get(cfg, "table", names[k], "layout");
        if (ferry_layout_parse(layout ? layout : "shared", &t->layout, err)) {
            const ferry_config_entry *e = ferry_config_find(cfg, "table", names[k], "layout");
            return ferry_err_prefix(err, "%s:%d: ", cfg->path, e ? e->line : 0);
        }
        t->database = ferry_config_get(cfg, "table", names[k], "database");
        t->tenant_column = ferry_config_get(cfg, "table", names[k], "tenant_column");
        if (!t->tenant_column)
            t->tenant_column = "tenant";
        t->split_column = ferry_config_get(cfg, "table", names[k], "split_column");
        if (!t->split_column)
            t->split_column = "split";
        if (t->layout == FERRY_LAYOUT_PER_TENANT) {
            const char *pat = ferry_config_get(cfg, "table", names[k], "tenant_table");
            if (!pat) {
                char *def = malloc(strlen(names[k]) + sizeof "_{tenant}");
                if (!def)
                    return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                sprintf(def, "%s_{tenant}", names[k]);
                pat = keep(ti, def);
            }
            if (!strstr(pat, "{tenant}"))
                return ferry_err_set(err, FERRY_EINVAL,
                                     "%s: table.%s.tenant_table must contain {tenant}",
                                     cfg->path, names[k]);
            t->tenant_pattern = pat;
        }
        ti->n++;
    }
    return FERRY_OK;
}

typedef struct routes_in {
    ferry_sql_route *v;
    size_t n, cap;
    char **lines; /* owned line copies */
    const char ***shards;
    size_t n_lines;
} routes_in;

static void routes_free(routes_in *r)
{
    for (size_t k = 0; k < r->n_lines; k++) {
        free(r->lines[k]);
        free(r->shards[k]);
    }
    free(r->lines);
    free(r->shards);
    free(r->v);
}

static int read_routes(const char *path, routes_in *out, ferry_err *err)
{
    ferry_lines lr;
    int rc = ferry_lines_open(&lr, path, true, err);
    if (rc)
        return rc;
    int got;
    while ((got = ferry_lines_next(&lr, err)) == 1) {
        char *line = strdup(lr.line);
        char **nl = realloc(out->lines, (out->n_lines + 1) * sizeof *nl);
        const char ***ns = nl ? realloc(out->shards, (out->n_lines + 1) * sizeof *ns) : NULL;
        ferry_sql_route *nv = ns ? realloc(out->v, (out->n + 1) * sizeof *nv) : NULL;
        if (nl)
            out->lines = nl;
        if (ns)
            out->shards = ns;
        if (nv)
            out->v = nv;
        if (!line || !nv) {
            free(line);
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        out->lines[out->n_lines] = line;
        out->shards[out->n_lines] = NULL;
        out->n_lines++;
        char *f[4];
        size_t n = ferry_split(line, '\t', f, 4);
        uint64_t split;
        if (n != 3 || !*f[0] || !ferry_parse_u64(f[1], &split) || split > UINT32_MAX || !*f[2]) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "%s:%ld: expected tenant<TAB>split<TAB>shard[,shard...] "
                               "(split a number below 2^32)", path, lr.lineno);
            goto out;
        }
        size_t ns_count = 1;
        for (const char *c = f[2]; *c; c++)
            ns_count += *c == ',';
        const char **sh = calloc(ns_count, sizeof *sh);
        if (!sh) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        out->shards[out->n_lines - 1] = sh;
        size_t got_shards = ferry_split(f[2], ',', (char **)sh, ns_count);
        for (size_t k = 0; k < got_shards; k++)
            if (!*sh[k]) {
                rc = ferry_err_set(err, FERRY_EINVAL, "%s:%ld: empty shard name", path,
                                   lr.lineno);
                goto out;
            }
        for (size_t k = 0; k < out->n; k++)
            if (!strcmp(out->v[k].tenant, f[0]) && out->v[k].split == split) {
                rc = ferry_err_set(err, FERRY_EINVAL, "%s:%ld: slice %s/%s listed twice", path,
                                   lr.lineno, f[0], f[1]);
                goto out;
            }
        out->v[out->n++] = (ferry_sql_route){f[0], (uint32_t)split, sh, got_shards};
    }
    if (got < 0)
        rc = err->code;
out:
    ferry_lines_close(&lr);
    return rc;
}

static json_t *refs_json(const ferry_sql_analysis *a, const ferry_sql_table *tables)
{
    json_t *arr = json_array();
    for (size_t k = 0; k < a->n_refs; k++) {
        const ferry_sql_ref *r = &a->refs[k];
        if (r->table < 0)
            continue;
        json_t *o = json_pack("{s:I, s:s, s:s%, s:s, s:I, s:b}", "ref", (json_int_t)k, "table",
                              tables[r->table].name ? tables[r->table].name
                                                    : tables[r->table].tenant_pattern,
                              "name", a->toks.text + r->name.start,
                              r->name.end - r->name.start, "qualifier", r->qualifier, "level",
                              (json_int_t)r->level, "wrapped", r->wrap);
        json_t *tn;
        if (r->tenant) {
            tn = json_array();
            json_array_append_new(tn, json_string(r->tenant));
        } else if (r->has_filter) {
            tn = json_array();
            for (size_t t = 0; t < r->n_tenants; t++)
                json_array_append_new(tn, json_string(r->tenants[t]));
        } else {
            tn = json_null();
        }
        json_object_set_new(o, "tenants", tn);
        json_array_append_new(arr, o);
    }
    return arr;
}

static void print_json(const ferry_routed *rt, const ferry_sql_table *tables, bool planned)
{
    const ferry_read_plan *p = &rt->plan;
    const ferry_sql_analysis *a = &rt->analysis;
    json_t *root = json_object();
    json_object_set_new(root, "statement", json_string(ferry_stmt_kind_name(a->kind)));
    json_object_set_new(root, "refs", refs_json(a, tables));
    json_object_set_new(root, "format", a->format ? json_string(a->format) : json_null());
    json_t *settings = json_array();
    for (size_t k = 0; k < a->n_settings; k++)
        json_array_append_new(settings,
                              json_pack("{s:s, s:s, s:b}", "name", a->settings[k].name, "value",
                                        a->settings[k].value, "initiator_only",
                                        ferry_sql_setting_initiator_only(a->settings[k].name)));
    json_object_set_new(root, "settings", settings);
    if (planned) {
        json_object_set_new(root, "kind", json_string(ferry_plan_kind_name(p->kind)));
        json_object_set_new(root, "why", json_string(p->why));
        json_t *q = json_array();
        for (size_t k = 0; k < p->n_queries; k++) {
            json_t *o = json_pack("{s:s, s:s}", "server", rt->servers[p->queries[k].server],
                                  "sql", p->queries[k].sql);
            json_object_set_new(o, "ref", p->queries[k].ref >= 0
                                              ? json_integer(p->queries[k].ref)
                                              : json_null());
            json_array_append_new(q, o);
        }
        json_object_set_new(root, "queries", q);
        json_object_set_new(root, "initiator",
                            p->initiator_sql ? json_string(p->initiator_sql) : json_null());
        json_t *g = json_array();
        for (size_t k = 0; k < p->n_globals; k++)
            json_array_append_new(g, json_pack("{s:s, s:s, s:b}", "name", p->globals[k].name,
                                               "sql", p->global_sql[k], "join",
                                               p->globals[k].join));
        json_object_set_new(root, "globals", g);
    }
    char *s = json_dumps(root, JSON_COMPACT);
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(root);
}

static void print_text(const ferry_routed *rt, const ferry_sql_table *tables, bool planned)
{
    const ferry_read_plan *p = &rt->plan;
    const ferry_sql_analysis *a = &rt->analysis;
    printf("statement: %s\n", ferry_stmt_kind_name(a->kind));
    for (size_t k = 0; k < a->n_refs; k++) {
        const ferry_sql_ref *r = &a->refs[k];
        if (r->table < 0)
            continue;
        printf("ref %zu: %.*s (table %s, level %zu%s): ", k, (int)(r->name.end - r->name.start),
               a->toks.text + r->name.start,
               tables[r->table].name ? tables[r->table].name : tables[r->table].tenant_pattern,
               r->level, r->wrap ? ", restricted in a subquery" : "");
        if (r->tenant)
            printf("tenant %s\n", r->tenant);
        else if (r->has_filter) {
            printf("tenants");
            for (size_t t = 0; t < r->n_tenants; t++)
                printf(" %s", r->tenants[t]);
            printf("\n");
        } else {
            printf("no tenant filter (fan out)\n");
        }
    }
    if (a->format)
        printf("format: %s (applied by the router)\n", a->format);
    for (size_t k = 0; k < a->n_settings; k++)
        printf("setting: %s = %s (%s)\n", a->settings[k].name, a->settings[k].value,
               ferry_sql_setting_initiator_only(a->settings[k].name)
                   ? "initiator only"
                   : "applied by the router");
    if (!planned)
        return;
    printf("plan: %s (%s)\n", ferry_plan_kind_name(p->kind), p->why);
    for (size_t k = 0; k < p->n_globals; k++)
        printf("global %s (computed once, sent as external data):\n  %s\n", p->globals[k].name,
               p->global_sql[k]);
    for (size_t k = 0; k < p->n_queries; k++) {
        printf("server %s", rt->servers[p->queries[k].server]);
        if (p->queries[k].ref >= 0)
            printf(" (rows of ref %d)", p->queries[k].ref);
        printf(":\n  %s\n", p->queries[k].sql);
    }
    if (p->initiator_sql)
        printf("initiator:\n  %s\n", p->initiator_sql);
}

/* --router: the router plans the statement as it would run it now (X-Ferry-Explain) and answers
 * with the plan as JSON; printed as is (--json) or as text. */
static int explain_at_router(const char *prog, const char *url, const char *sql, bool json,
                             const char *user, const char *password)
{
    ferry_err err = {0};
    json_t *o = NULL;
    int status = 0;
    if (ferry_ch_statement_kind(sql) != FERRY_CH_STMT_READ)
        return cli_usage_error(prog, "--router explains SELECT-like statements only");
    if (ferry_router_explain(url, user, password, sql, &o, &err))
        return cli_fail(prog, &err);
    if (json) {
        char *t = json_dumps(o, JSON_COMPACT);
        if (t)
            printf("%s\n", t);
        free(t);
        goto out;
    }
    json_t *v = json_object_get(o, "routing_version");
    if (v)
        printf("routing version: %lld\n", (long long)json_integer_value(v));
    json_t *only = json_object_get(o, "restricted_to_tenants");
    if (json_is_array(only)) {
        printf("restricted to tenants:");
        size_t k;
        json_t *t;
        json_array_foreach(only, k, t) printf("%s%s", k ? ", " : " ", json_string_value(t));
        printf(" (every managed reference, whatever the query says)\n");
    }
    if (json_is_true(json_object_get(o, "held"))) {
        printf("held: %s\n", json_string_value(json_object_get(o, "why")));
        goto out;
    }
    printf("plan: %s (%s)\n", json_string_value(json_object_get(o, "plan")),
           json_string_value(json_object_get(o, "why")));
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(o, "globals"), i, q)
        printf("global (computed once):\n  %s\n", json_string_value(q));
    json_array_foreach(json_object_get(o, "queries"), i, q)
        printf("server %s:\n  %s\n", json_string_value(json_object_get(q, "server")),
               json_string_value(json_object_get(q, "sql")));
    json_t *ini = json_object_get(o, "initiator");
    if (json_is_string(ini))
        printf("initiator:\n  %s\n", json_string_value(ini));
out:
    json_decref(o);
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
    char *password = NULL;
    bool json = false;
    tables_in ti = {0};
    routes_in routes = {0};
    ferry_config cfg = {0};
    bool have_cfg = false;
    char *locals[MAX_TABLES * 2];
    size_t n_locals = 0;
    ferry_err err = {0};
    ferry_routed rt = {0};
    int status = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 't':
            if (parse_table_spec(&ti, optarg, &err)) {
                status = cli_fail(argv[0], &err);
                goto out;
            }
            break;
        case 'l':
            if (n_locals == MAX_TABLES * 2 || !strchr(optarg, '=')) {
                status = cli_usage_error(argv[0], "--local expects NAME=LOCAL");
                goto out;
            }
            locals[n_locals++] = optarg;
            break;
        case 'r': routes_path = optarg; break;
        case 'R': router = optarg; break;
        case 'u': user = optarg; break;
        case 'p': pwfile = optarg; break;
        case 'j': json = true; break;
        case 'h': fputs(cmd_route_query_usage, stdout); return 0;
        default: status = cli_usage_error(argv[0], "unknown option"); goto out;
        }
    }
    if (optind != argc - 1) {
        status = cli_usage_error(argv[0], "expected exactly one SQL statement");
        goto out;
    }
    if (router) {
        if (config || ti.n || routes_path || n_locals) {
            status = cli_usage_error(argv[0], "--router asks the router, which knows its tables "
                                     "and routes: give no --config, --tables, --local or --routes");
            goto out;
        }
        if (!user != !pwfile) {
            status = cli_usage_error(argv[0], "give --user and --password-file together");
            goto out;
        }
        if (pwfile) {
            size_t len = 0;
            if (ferry_read_file(pwfile, &password, &len, &err)) {
                ferry_err_prefix(&err, "--password-file: ");
                status = cli_fail(argv[0], &err);
                goto out;
            }
            password[strcspn(password, "\r\n")] = '\0';
        }
        status = explain_at_router(argv[0], router, argv[optind], json, user, password);
        goto out;
    }
    if (user || pwfile) {
        status = cli_usage_error(argv[0], "--user and --password-file go with --router");
        goto out;
    }
    if (config && ti.n) {
        status = cli_usage_error(argv[0], "give --config or --tables, not both");
        goto out;
    }
    config = ti.n ? NULL : cli_config_path(config);
    if (config) {
        if (ferry_config_load(config, &cfg, &err)) {
            status = cli_fail(argv[0], &err);
            goto out;
        }
        have_cfg = true;
        if (tables_from_config(&ti, &cfg, &err)) {
            status = cli_fail(argv[0], &err);
            goto out;
        }
    }
    if (!ti.n) {
        status = cli_usage_error(argv[0], "no managed tables: give --tables or --config");
        goto out;
    }
    for (size_t k = 0; k < n_locals; k++) {
        char *eq = strchr(locals[k], '=');
        size_t nl = (size_t)(eq - locals[k]);
        size_t t = 0;
        while (t < ti.n && !(ti.t[t].name && strlen(ti.t[t].name) == nl &&
                             !strncmp(ti.t[t].name, locals[k], nl)))
            t++;
        if (t == ti.n || !eq[1]) {
            status = cli_usage_error(argv[0], "--local %s: not a managed table name, or no "
                                     "local name", locals[k]);
            goto out;
        }
        ti.local[t] = eq + 1;
    }
    if (routes_path && read_routes(routes_path, &routes, &err)) {
        status = cli_fail(argv[0], &err);
        goto out;
    }
    const char *sql = argv[optind];
    bool planned = routes_path != NULL;
    int rc;
    if (planned) {
        if (!routes.n) {
            ferry_err_set(&err, FERRY_EINVAL, "%s: no routes", routes_path);
            status = cli_fail(argv[0], &err);
            goto out;
        }
        rc = ferry_route_query(sql, strlen(sql), ti.t, ti.n, ti.local, routes.v, routes.n, &rt,
                               &err);
    } else {
        rc = ferry_sql_analyze(sql, strlen(sql), ti.t, ti.n, &rt.analysis, &err);
        if (!rc && !rt.analysis.understood)
            rc = ferry_err_set(&err, FERRY_EUNSUPPORTED, "cannot route this query: %s",
                               rt.analysis.why);
    }
    if (rc) {
        status = cli_fail(argv[0], &err);
        goto out;
    }
    if (json)
        print_json(&rt, ti.t, planned);
    else
        print_text(&rt, ti.t, planned);
out:
    ferry_routed_free(&rt);
    routes_free(&routes);
    if (have_cfg)
        ferry_config_free(&cfg);
    for (size_t k = 0; k < ti.n_owned; k++)
        free(ti.owned[k]);
    if (password) {
        memset(password, 0, strlen(password));
        free(password);
    }
    return status;
}
