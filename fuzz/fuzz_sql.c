/* libFuzzer target for the SQL layer: tokenizer, analysis, per-server rewrite and read plans,
 * and the tenant scope of a bound reader. Any bytes must be accepted without crashing; tokens
 * must cover the input exactly; every query the rewrite or the plan produces must tokenize
 * again with balanced brackets (a rewrite never splices text into a string, identifier or
 * comment); and a scoped rewrite never names a tenant outside the scope. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/sqlrw.h"
#include "ferry/sqltok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ferry_sql_table tables[] = {
    {"events", NULL, FERRY_LAYOUT_SHARED, "tenant", "split", NULL, false},
    {"logs", NULL, FERRY_LAYOUT_PER_TENANT, NULL, "split", "logs_{tenant}", false},
};
static const ferry_sql_slice s1[] = {{"acme", 0}, {"beta", 1}, {"a'b", 2}};
static const ferry_sql_slice s2[] = {{"acme", 1}, {"x", 0}};
static const ferry_sql_served v1[] = {{s1, 3}, {s1, 3}};
static const ferry_sql_served v2[] = {{s2, 2}, {s2, 2}};
static const char *const locals[] = {"db.events_local", "logs_{tenant}_x"};
/* split counts (sorted): server 2 serves x whole, so its x references go unrestricted */
static const ferry_sql_tenant_splits counts[] = {{"a'b", 3}, {"acme", 2}, {"beta", 2}, {"x", 1}};
static const ferry_sql_target servers[] = {{v1, locals, false, counts, 4, NULL}, {v2, NULL, true, counts, 4, NULL}};
static const char *const scope_tenants[] = {"acme"};
static const char *const scope_tables[] = {"default.dim"};
static const ferry_sql_param scope_params[] = {{"t", "acme"}};
static const ferry_sql_scope scope = {scope_tenants, 1, scope_tables, 1, "default",
                                      scope_params, 1};

static void must_reparse(const char *sql)
{
    ferry_sql_analysis a;
    ferry_err err = {0};
    if (ferry_sql_analyze(sql, strlen(sql), tables, 2, &a, &err) == FERRY_EINVAL)
        abort(); /* an unterminated token or unbalanced bracket we introduced */
    ferry_sql_analysis_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *sql = (const char *)data;
    ferry_toks t = {0};
    ferry_err err = {0};
    if (ferry_sql_tokenize(sql, size, &t, NULL, &err) == FERRY_OK) {
        size_t pos = 0;
        for (size_t i = 0; i < t.n; i++) {
            if (t.v[i].start != pos || !t.v[i].len)
                abort();
            pos += t.v[i].len;
            free(ferry_tok_value(&t, &t.v[i], NULL));
        }
        if (pos != size)
            abort();
    }
    ferry_toks_free(&t);

    ferry_sql_analysis a;
    ferry_sql_rewritten rw_scoped = {0};
    if (ferry_sql_analyze(sql, size, tables, 2, &a, &err) == FERRY_OK && a.understood) {
        for (size_t s = 0; s < 2; s++) {
            ferry_sql_rewritten rw;
            if (ferry_sql_rewrite(&a, tables, &servers[s], &rw, &err) == FERRY_OK)
                must_reparse(rw.sql);
            ferry_sql_rewritten_free(&rw);
        }
        ferry_read_plan p;
        if (ferry_sql_plan(&a, tables, servers, 2, &p, &err) == FERRY_OK) {
            for (size_t q = 0; q < p.n_queries; q++)
                must_reparse(p.queries[q].sql);
            if (p.initiator_sql)
                must_reparse(p.initiator_sql);
            for (size_t g = 0; g < p.n_globals; g++)
                must_reparse(p.global_sql[g]);
        }
        ferry_read_plan_free(&p);
        /* a bound reader: whatever the check says, its restriction names acme only */
        (void)ferry_sql_scope_check(&a, tables, 2, &scope, &err);
        ferry_sql_target bound = servers[0];
        bound.scope = &scope;
        if (ferry_sql_rewrite(&a, tables, &bound, &rw_scoped, &err) == FERRY_OK) {
            must_reparse(rw_scoped.sql);
            /* the served beta slice must not appear unless the input itself wrote it */
            if (!memmem(data, size, "beta", 4) && strstr(rw_scoped.sql, "'beta'"))
                abort();
        }
        ferry_sql_rewritten_free(&rw_scoped);
    }
    ferry_sql_analysis_free(&a);
    return 0;
}
