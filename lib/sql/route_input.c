/* The inputs of a routed query (include/ferry/route_input.h): managed tables from a spec string
 * or a config's [table "NAME"] sections, their names on the servers, and a routing table from
 * TSV text. Pure: the caller reads the files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/partition.h"
#include "ferry/route_input.h"
#include "ferry/strutil.h"

static char *keep(ferry_sql_tables *ts, char *s)
{
    if (!s)
        return NULL;
    if (ts->n_owned == sizeof ts->owned / sizeof ts->owned[0]) {
        free(s);
        return NULL;
    }
    return ts->owned[ts->n_owned++] = s;
}

int ferry_sql_tables_add_spec(ferry_sql_tables *ts, const char *spec, ferry_err *err)
{
    if (ts->n == FERRY_SQL_MAX_TABLES)
        return ferry_err_set(err, FERRY_EINVAL, "--tables: at most %d tables",
                             FERRY_SQL_MAX_TABLES);
    char *copy = keep(ts, strdup(spec));
    if (!copy)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    char *f[5];
    size_t n = ferry_split(copy, ':', f, 5);
    ferry_sql_table *t = &ts->t[ts->n];
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
    } else {
        if (n < 3 || !strstr(f[2], "{tenant}"))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "--tables '%s': a per_tenant table needs a name pattern with "
                                 "{tenant}, e.g. %s:per_tenant:%s_{tenant}", spec, f[0], f[0]);
        t->tenant_pattern = f[2];
    }
    t->split_column = n > 3 && *f[3] ? f[3] : "split";
    ts->n++;
    return FERRY_OK;
}

int ferry_sql_tables_from_config(ferry_sql_tables *ts, const ferry_config *cfg, ferry_err *err)
{
    const char *names[FERRY_SQL_MAX_TABLES];
    size_t n = ferry_config_subsections(cfg, "table", names, FERRY_SQL_MAX_TABLES);
    if (ts->n + n > FERRY_SQL_MAX_TABLES)
        return ferry_err_set(err, FERRY_EINVAL, "%s: at most %d [table] sections", cfg->path,
                             FERRY_SQL_MAX_TABLES);
    for (size_t k = 0; k < n; k++) {
        ferry_sql_table *t = &ts->t[ts->n];
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
                size_t sz = strlen(names[k]) + sizeof "_{tenant}";
                char *def = keep(ts, malloc(sz));
                if (!def)
                    return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                snprintf(def, sz, "%s_{tenant}", names[k]);
                pat = def;
            }
            if (!strstr(pat, "{tenant}"))
                return ferry_err_set(err, FERRY_EINVAL,
                                     "%s: table.%s.tenant_table must contain {tenant}",
                                     cfg->path, names[k]);
            t->tenant_pattern = pat;
        }
        ts->n++;
    }
    return FERRY_OK;
}

int ferry_sql_tables_set_local(ferry_sql_tables *ts, const char *name_eq_local, ferry_err *err)
{
    const char *eq = strchr(name_eq_local, '=');
    if (!eq || !eq[1])
        return ferry_err_set(err, FERRY_EINVAL, "--local '%s': expected NAME=LOCAL",
                             name_eq_local);
    size_t nl = (size_t)(eq - name_eq_local);
    size_t t = 0;
    while (t < ts->n && !(ts->t[t].name && strlen(ts->t[t].name) == nl &&
                          !strncmp(ts->t[t].name, name_eq_local, nl)))
        t++;
    if (t == ts->n)
        return ferry_err_set(err, FERRY_EINVAL, "--local '%s': %.*s is not a managed table",
                             name_eq_local, (int)nl, name_eq_local);
    const char *local = keep(ts, strdup(eq + 1));
    if (!local)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    ts->local[t] = local;
    return FERRY_OK;
}

void ferry_sql_tables_free(ferry_sql_tables *ts)
{
    for (size_t k = 0; k < ts->n_owned; k++)
        free(ts->owned[k]);
    memset(ts, 0, sizeof *ts);
}

void ferry_sql_routes_free(ferry_sql_routes *r)
{
    free(r->v);
    free(r->text);
    free(r->shards);
    memset(r, 0, sizeof *r);
}

/* One line (NUL-terminated, in the owned copy) into out->v[out->n], its shards from *next_shard
 * on. */
static int route_line(ferry_sql_routes *out, char *line, const char **next_shard,
                      size_t *n_shards_used, const char *source, long lineno, ferry_err *err)
{
    char *f[4];
    size_t n = ferry_split(line, '\t', f, 4);
    uint64_t split;
    if (n != 3 || !*f[0] || !ferry_parse_u64(f[1], &split) || split > UINT32_MAX || !*f[2])
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s:%ld: expected tenant<TAB>split<TAB>shard[,shard...] "
                             "(split a number below 2^32)", source, lineno);
    size_t got = ferry_split(f[2], ',', (char **)next_shard, SIZE_MAX);
    for (size_t k = 0; k < got; k++)
        if (!*next_shard[k])
            return ferry_err_set(err, FERRY_EINVAL, "%s:%ld: empty shard name", source, lineno);
    for (size_t k = 0; k < out->n; k++)
        if (!strcmp(out->v[k].tenant, f[0]) && out->v[k].split == split)
            return ferry_err_set(err, FERRY_EINVAL, "%s:%ld: slice %s/%s listed twice", source,
                                 lineno, f[0], f[1]);
    out->v[out->n++] = (ferry_sql_route){f[0], (uint32_t)split, next_shard, got};
    *n_shards_used += got;
    return FERRY_OK;
}

int ferry_sql_routes_parse(const char *text, size_t len, const char *source,
                           ferry_sql_routes *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    if (memchr(text, '\0', len))
        return ferry_err_set(err, FERRY_EINVAL, "%s: contains a NUL byte", source);
    /* at most a route a line and a shard a line or comma: one allocation each */
    size_t lines = 1, shards = 1;
    for (size_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
        shards += text[i] == '\n' || text[i] == ',';
    }
    int rc = FERRY_OK;
    out->text = ferry_strndup(text, len);
    out->v = calloc(lines, sizeof *out->v);
    out->shards = calloc(shards, sizeof *out->shards);
    if (!out->text || !out->v || !out->shards) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t used = 0;
    long lineno = 0;
    for (char *line = out->text; line; ) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        lineno++;
        ferry_chomp(line);
        const char *p = line + strspn(line, " \t");
        if (*p && *p != '#' &&
            (rc = route_line(out, line, out->shards + used, &used, source, lineno, err)))
            goto out;
        line = nl ? nl + 1 : NULL;
    }
    if (!out->n)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: no routes", source);
out:
    if (rc)
        ferry_sql_routes_free(out);
    return rc;
}
