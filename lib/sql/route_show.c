/* A routed query shown to a person or a program (include/ferry/route_input.h): the references
 * and their tenants, the format and settings, and the plan (each server's query, the
 * initiator's, the globals), as one JSON object or as text. Used by `ferry route-query`. */
#include <string.h>

#include "ferry/route_input.h"

static const char *table_name(const ferry_sql_table *t)
{
    return t->name ? t->name : t->tenant_pattern;
}

static json_t *refs_json(const ferry_sql_analysis *a, const ferry_sql_table *tables)
{
    json_t *arr = json_array();
    for (size_t k = 0; arr && k < a->n_refs; k++) {
        const ferry_sql_ref *r = &a->refs[k];
        if (r->table < 0)
            continue;
        json_t *o = json_pack("{s:I, s:s, s:s%, s:s, s:I, s:b}", "ref", (json_int_t)k, "table",
                              table_name(&tables[r->table]), "name",
                              a->toks.text + r->name.start, r->name.end - r->name.start,
                              "qualifier", r->qualifier, "level", (json_int_t)r->level,
                              "wrapped", r->wrap);
        json_t *tn = json_null();
        if (r->tenant || r->has_filter) {
            tn = json_array();
            if (r->tenant)
                json_array_append_new(tn, json_string(r->tenant));
            for (size_t t = 0; !r->tenant && t < r->n_tenants; t++)
                json_array_append_new(tn, json_string(r->tenants[t]));
        }
        json_object_set_new(o, "tenants", tn);
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *plan_json(json_t *root, const ferry_routed *rt)
{
    const ferry_read_plan *p = &rt->plan;
    json_object_set_new(root, "kind", json_string(ferry_plan_kind_name(p->kind)));
    json_object_set_new(root, "why", json_string(p->why));
    json_t *q = json_array();
    for (size_t k = 0; q && k < p->n_queries; k++) {
        json_t *o = json_pack("{s:s, s:s}", "server", rt->servers[p->queries[k].server], "sql",
                              p->queries[k].sql);
        json_object_set_new(o, "ref",
                            p->queries[k].ref >= 0 ? json_integer(p->queries[k].ref)
                                                   : json_null());
        json_array_append_new(q, o);
    }
    json_object_set_new(root, "queries", q);
    json_object_set_new(root, "initiator",
                        p->initiator_sql ? json_string(p->initiator_sql) : json_null());
    json_t *g = json_array();
    for (size_t k = 0; g && k < p->n_globals; k++)
        json_array_append_new(g, json_pack("{s:s, s:s, s:b}", "name", p->globals[k].name, "sql",
                                           p->global_sql[k], "join", p->globals[k].join));
    json_object_set_new(root, "globals", g);
    return root;
}

json_t *ferry_routed_json(const ferry_routed *rt, const ferry_sql_table *tables, bool planned)
{
    const ferry_sql_analysis *a = &rt->analysis;
    json_t *root = json_object();
    if (!root)
        return NULL;
    json_object_set_new(root, "statement", json_string(ferry_stmt_kind_name(a->kind)));
    json_object_set_new(root, "refs", refs_json(a, tables));
    json_object_set_new(root, "format", a->format ? json_string(a->format) : json_null());
    json_t *settings = json_array();
    for (size_t k = 0; settings && k < a->n_settings; k++)
        json_array_append_new(settings,
                              json_pack("{s:s, s:s, s:b}", "name", a->settings[k].name, "value",
                                        a->settings[k].value, "initiator_only",
                                        ferry_sql_setting_initiator_only(a->settings[k].name)));
    json_object_set_new(root, "settings", settings);
    return planned ? plan_json(root, rt) : root;
}

static int refs_text(const ferry_sql_analysis *a, const ferry_sql_table *tables, ferry_buf *b)
{
    int rc = 0;
    for (size_t k = 0; k < a->n_refs; k++) {
        const ferry_sql_ref *r = &a->refs[k];
        if (r->table < 0)
            continue;
        rc |= ferry_buf_printf(b, "ref %zu: %.*s (table %s, level %zu%s): ", k,
                               (int)(r->name.end - r->name.start), a->toks.text + r->name.start,
                               table_name(&tables[r->table]), r->level,
                               r->wrap ? ", restricted in a subquery" : "");
        if (r->tenant) {
            rc |= ferry_buf_printf(b, "tenant %s\n", r->tenant);
        } else if (r->has_filter) {
            rc |= ferry_buf_puts(b, "tenants");
            for (size_t t = 0; t < r->n_tenants; t++)
                rc |= ferry_buf_printf(b, " %s", r->tenants[t]);
            rc |= ferry_buf_putc(b, '\n');
        } else {
            rc |= ferry_buf_puts(b, "no tenant filter (fan out)\n");
        }
    }
    return rc;
}

int ferry_routed_text(const ferry_routed *rt, const ferry_sql_table *tables, bool planned,
                      ferry_buf *b)
{
    const ferry_read_plan *p = &rt->plan;
    const ferry_sql_analysis *a = &rt->analysis;
    int rc = ferry_buf_printf(b, "statement: %s\n", ferry_stmt_kind_name(a->kind));
    rc |= refs_text(a, tables, b);
    if (a->format)
        rc |= ferry_buf_printf(b, "format: %s (applied by the router)\n", a->format);
    for (size_t k = 0; k < a->n_settings; k++)
        rc |= ferry_buf_printf(b, "setting: %s = %s (%s)\n", a->settings[k].name,
                               a->settings[k].value,
                               ferry_sql_setting_initiator_only(a->settings[k].name)
                                   ? "initiator only"
                                   : "applied by the router");
    if (planned) {
        rc |= ferry_buf_printf(b, "plan: %s (%s)\n", ferry_plan_kind_name(p->kind), p->why);
        for (size_t k = 0; k < p->n_globals; k++)
            rc |= ferry_buf_printf(b, "global %s (computed once, sent as external data):\n  %s\n",
                                   p->globals[k].name, p->global_sql[k]);
        for (size_t k = 0; k < p->n_queries; k++) {
            rc |= ferry_buf_printf(b, "server %s", rt->servers[p->queries[k].server]);
            if (p->queries[k].ref >= 0)
                rc |= ferry_buf_printf(b, " (rows of ref %d)", p->queries[k].ref);
            rc |= ferry_buf_printf(b, ":\n  %s\n", p->queries[k].sql);
        }
        if (p->initiator_sql)
            rc |= ferry_buf_printf(b, "initiator:\n  %s\n", p->initiator_sql);
    }
    return rc ? FERRY_ENOMEM : FERRY_OK;
}
