/* Per-server rewriting: renames managed tables to the server's local tables, prunes tenant IN
 * lists, adds the slice restriction that makes every slice read exactly once, materialises
 * GLOBAL subqueries by name, and drops FORMAT / SETTINGS. Everything is a splice of the
 * original text. */
#include "sql_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- edits ---- */

int sql_edits_add_owned(sql_edits *e, size_t start, size_t end, char *repl)
{
    if (!repl)
        return FERRY_ENOMEM;
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        sql_edit *v = realloc(e->v, cap * sizeof *v);
        if (!v) {
            free(repl);
            return FERRY_ENOMEM;
        }
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n] = (sql_edit){start, end, repl, e->n};
    e->n++;
    return FERRY_OK;
}

int sql_edits_add(sql_edits *e, size_t start, size_t end, const char *repl)
{
    return sql_edits_add_owned(e, start, end, strdup(repl));
}

void sql_edits_free(sql_edits *e)
{
    for (size_t k = 0; k < e->n; k++)
        free(e->v[k].repl);
    free(e->v);
    memset(e, 0, sizeof *e);
}

static int cmp_edit(const void *x, const void *y)
{
    const sql_edit *a = x, *b = y;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int sql_edits_apply(const sql_edits *e, const char *text, size_t from, size_t to, ferry_buf *out)
{
    sql_edit *v = NULL;
    if (e->n) {
        v = malloc(e->n * sizeof *v);
        if (!v)
            return FERRY_ENOMEM;
        memcpy(v, e->v, e->n * sizeof *v);
        qsort(v, e->n, sizeof *v, cmp_edit);
    }
    size_t pos = from;
    int rc = FERRY_OK;
    for (size_t k = 0; k < e->n && !rc; k++) {
        if (v[k].start < from || v[k].end > to || v[k].start < pos)
            continue; /* outside the range, or inside a span already replaced */
        rc = ferry_buf_append(out, text + pos, v[k].start - pos);
        if (!rc)
            rc = ferry_buf_puts(out, v[k].repl);
        pos = v[k].end;
    }
    if (!rc)
        rc = ferry_buf_append(out, text + pos, to - pos);
    free(v);
    return rc;
}

/* ---- identifiers and literals ---- */

static bool plain_word(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

int ferry_sql_append_ident(const char *s, ferry_buf *out)
{
    if (plain_word(s))
        return ferry_buf_puts(out, s);
    return ferry_sql_ident(s, out);
}

/* "db.table" or "table": each part as an identifier. */
static int append_qualified(const char *name, ferry_buf *out)
{
    const char *dot = strchr(name, '.');
    if (!dot)
        return ferry_sql_append_ident(name, out);
    char *db = strndup(name, (size_t)(dot - name));
    if (!db)
        return FERRY_ENOMEM;
    int rc = ferry_sql_append_ident(db, out);
    free(db);
    if (!rc)
        rc = ferry_buf_putc(out, '.');
    if (!rc)
        rc = ferry_sql_append_ident(dot + 1, out);
    return rc;
}

static int append_tenant(const ferry_sql_table *t, const char *tenant, ferry_buf *out)
{
    bool digits = *tenant != 0;
    for (const char *c = tenant; *c; c++)
        digits = digits && *c >= '0' && *c <= '9';
    if (t->tenant_numeric && digits)
        return ferry_buf_puts(out, tenant);
    return ferry_sql_quote(tenant, out);
}

/* ---- what a reference reads on a server ---- */

bool sql_ref_in_global(const ferry_sql_analysis *a, size_t ref)
{
    return a->levels[a->refs[ref].level].in_global;
}

static bool ref_reads(const ferry_sql_analysis *a, size_t ref, const char *tenant)
{
    const ferry_sql_ref *r = &a->refs[ref];
    if (r->tenant)
        return !strcmp(r->tenant, tenant);
    if (!r->has_filter)
        return true;
    for (size_t k = 0; k < r->n_tenants; k++)
        if (!strcmp(r->tenants[k], tenant))
            return true;
    return false;
}

static int cmp_slice(const void *x, const void *y)
{
    const ferry_sql_slice *a = *(const ferry_sql_slice *const *)x,
                          *b = *(const ferry_sql_slice *const *)y;
    int c = strcmp(a->tenant, b->tenant);
    if (c)
        return c;
    return a->split < b->split ? -1 : a->split > b->split;
}

/* The served slices the reference reads, sorted (array of pointers, caller frees). */
static int read_set(const ferry_sql_analysis *a, const ferry_sql_target *target, size_t ref,
                    const ferry_sql_slice ***out, size_t *n)
{
    const ferry_sql_served *sv = &target->served[a->refs[ref].table];
    *n = 0;
    *out = malloc((sv->n + 1) * sizeof **out);
    if (!*out)
        return FERRY_ENOMEM;
    for (size_t k = 0; k < sv->n; k++)
        if (ref_reads(a, ref, sv->slices[k].tenant) &&
            (!target->scope || ferry_sql_scope_has(target->scope, sv->slices[k].tenant)))
            (*out)[(*n)++] = &sv->slices[k];
    qsort(*out, *n, sizeof **out, cmp_slice);
    return FERRY_OK;
}

static int cmp_tenant_splits(const void *key, const void *elem)
{
    return strcmp(key, ((const ferry_sql_tenant_splits *)elem)->tenant);
}

/* Whether ref needs no slice restriction on this server: it has a tenant filter (or is a
 * per-tenant table) and the server serves every split of every tenant it reads there (see
 * ferry_sql_target.tenant_splits). set/n: the reference's read set, sorted. */
static bool reads_whole_tenants(const ferry_sql_analysis *a, const ferry_sql_target *target,
                                size_t ref, const ferry_sql_slice *const *set, size_t n)
{
    const ferry_sql_ref *r = &a->refs[ref];
    /* a scoped reader always gets the explicit restriction: its rows must not depend on how
     * well the analysis understood the query's own tenant filter */
    if (target->scope || !target->tenant_splits || !n || r->wrap || !(r->has_filter || r->tenant))
        return false;
    for (size_t i = 0; i < n;) {
        const ferry_sql_tenant_splits *ts =
            bsearch(set[i]->tenant, target->tenant_splits, target->n_tenant_splits,
                    sizeof *target->tenant_splits, cmp_tenant_splits);
        /* distinct splits below the count (the set is sorted by tenant, then split) */
        uint32_t have = 0;
        size_t j = i;
        for (; j < n && !strcmp(set[j]->tenant, set[i]->tenant); j++)
            if (ts && set[j]->split < ts->splits && (j == i || set[j]->split != set[j - 1]->split))
                have++;
        if (!ts || !ts->splits || have != ts->splits)
            return false;
        i = j;
    }
    return true;
}

/* A column of the reference, qualified when qualify. */
static int append_col(const ferry_sql_ref *r, const char *col, bool qualify, ferry_buf *out)
{
    if (qualify && (ferry_sql_append_ident(r->qualifier, out) || ferry_buf_putc(out, '.')))
        return FERRY_ENOMEM;
    return ferry_sql_append_ident(col, out);
}

int sql_restriction(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                    const ferry_sql_target *target, size_t ref, bool qualify, ferry_buf *out,
                    bool *empty)
{
    return sql_restriction_ex(a, tables, target, ref, qualify, out, empty, NULL);
}

int sql_restriction_ex(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                       const ferry_sql_target *target, size_t ref, bool qualify, ferry_buf *out,
                       bool *empty, bool *whole)
{
    const ferry_sql_ref *r = &a->refs[ref];
    const ferry_sql_table *t = &tables[r->table];
    const ferry_sql_slice **set;
    size_t n;
    int rc = read_set(a, target, ref, &set, &n);
    if (rc)
        return rc;
    *empty = n == 0;
    if (whole)
        *whole = reads_whole_tenants(a, target, ref, set, n);
    if (!n) {
        rc = ferry_buf_puts(out, "0");
        goto out;
    }
    if (t->layout == FERRY_LAYOUT_PER_TENANT) {
        rc = append_col(r, t->split_column, qualify, out) || ferry_buf_puts(out, " IN (");
        for (size_t k = 0; k < n && !rc; k++)
            rc = ferry_buf_printf(out, "%s%u", k ? ", " : "", set[k]->split);
        if (!rc)
            rc = ferry_buf_putc(out, ')');
    } else {
        /* One `tenant = 'T' AND split IN (..)` per tenant, OR-ed: the same rows as
         * `(tenant, split) IN (('T', 0), ..)`, which ClickHouse 26.7 evaluates as a set of
         * tuples per row: 14 ms against 2.5 ms for this form on 334,000 rows (docs/benchmarks.md,
         * "Read router", session 4). Exact on its own: it does not rely on the query's filter. */
        size_t tenants = 0;
        for (size_t k = 0; k < n; k++)
            tenants += k == 0 || strcmp(set[k]->tenant, set[k - 1]->tenant) != 0;
        rc = tenants > 1 && ferry_buf_putc(out, '(');
        for (size_t k = 0; k < n && !rc; k++) {
            bool first = k == 0 || strcmp(set[k]->tenant, set[k - 1]->tenant) != 0;
            bool last = k + 1 == n || strcmp(set[k]->tenant, set[k + 1]->tenant) != 0;
            if (first)
                rc = ferry_buf_puts(out, k ? " OR (" : "(") ||
                     append_col(r, t->tenant_column, qualify, out) ||
                     ferry_buf_puts(out, " = ") || append_tenant(t, set[k]->tenant, out) ||
                     ferry_buf_puts(out, " AND ") ||
                     append_col(r, t->split_column, qualify, out) || ferry_buf_puts(out, " IN (");
            if (!rc)
                rc = ferry_buf_printf(out, "%s%u", first ? "" : ", ", set[k]->split);
            if (!rc && last)
                rc = ferry_buf_puts(out, "))");
        }
        if (!rc && tenants > 1)
            rc = ferry_buf_putc(out, ')');
    }
out:
    free(set);
    return rc ? FERRY_ENOMEM : FERRY_OK;
}

int sql_local_name(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                   const ferry_sql_target *target, size_t ref, ferry_buf *out)
{
    const ferry_sql_ref *r = &a->refs[ref];
    const char *local = target->local_names ? target->local_names[r->table] : NULL;
    (void)tables;
    if (!local)
        return ferry_buf_append(out, a->toks.text + r->name.start, r->name.end - r->name.start);
    const char *mark = r->tenant ? strstr(local, "{tenant}") : NULL;
    if (!mark)
        return append_qualified(local, out);
    ferry_buf name = FERRY_BUF_INIT;
    int rc = ferry_buf_append(&name, local, (size_t)(mark - local)) ||
             ferry_buf_puts(&name, r->tenant) || ferry_buf_puts(&name, mark + 8);
    if (!rc)
        rc = append_qualified(ferry_buf_cstr(&name), out);
    ferry_buf_free(&name);
    return rc ? FERRY_ENOMEM : FERRY_OK;
}

/* The tenants of the read set, for pruning an IN list: keeps the list's literals whose value
 * the server serves. */
static int pruned_list(const ferry_sql_analysis *a, const ferry_sql_target *target, size_t ref,
                       ferry_span list, ferry_buf *out, bool *all_kept)
{
    size_t seen = 0;
    const ferry_sql_served *sv = &target->served[a->refs[ref].table];
    int rc = ferry_buf_putc(out, '(');
    size_t kept = 0;
    for (size_t i = 0; i < a->n_sig && !rc; i++) {
        const ferry_tok *t = sig_tok(a, i);
        if (t->start <= list.start || t->start + t->len >= list.end)
            continue;
        if (t->kind != FERRY_TOK_STRING && t->kind != FERRY_TOK_NUMBER)
            continue;
        seen++;
        char *v = t->kind == FERRY_TOK_NUMBER ? strndup(a->toks.text + t->start, t->len)
                                              : ferry_tok_value(&a->toks, t, NULL);
        if (!v)
            return FERRY_ENOMEM;
        bool served = false;
        for (size_t k = 0; k < sv->n && !served; k++)
            served = !strcmp(sv->slices[k].tenant, v);
        free(v);
        if (!served)
            continue;
        if (kept++)
            rc = ferry_buf_puts(out, ", ");
        if (!rc)
            rc = ferry_buf_append(out, a->toks.text + t->start, t->len);
    }
    if (!rc)
        rc = ferry_buf_putc(out, ')');
    *all_kept = kept == seen;
    return rc ? FERRY_ENOMEM : FERRY_OK;
}

static char *buf_take(ferry_buf *b)
{
    return ferry_buf_detach(b);
}

int sql_server_edits(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                     const ferry_sql_target *target, sql_edits *edits, bool *skip, ferry_err *err)
{
    int rc = FERRY_OK;
    size_t n_levels = a->n_levels;
    ferry_buf *where = calloc(n_levels + 1, sizeof *where);
    ferry_buf b = FERRY_BUF_INIT, restr = FERRY_BUF_INIT;
    if (!where)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory rewriting SQL");
    size_t managed = 0, reading = 0;
    for (size_t k = 0; k < a->n_refs && !rc; k++) {
        const ferry_sql_ref *r = &a->refs[k];
        if (r->table < 0)
            continue;
        if (target->materialize_globals && sql_ref_in_global(a, k))
            continue; /* the whole subquery is replaced */
        managed++;
        bool empty, whole;
        ferry_buf_reset(&restr);
        rc = sql_restriction_ex(a, tables, target, k, !r->wrap, &restr, &empty, &whole);
        if (rc)
            break;
        if (!empty)
            reading++;
        ferry_buf_reset(&b);
        rc = sql_local_name(a, tables, target, k, &b);
        if (rc)
            break;
        bool renamed = b.len != r->name.end - r->name.start ||
                       memcmp(b.data, a->toks.text + r->name.start, b.len);
        if (r->wrap) {
            ferry_buf w = FERRY_BUF_INIT;
            rc = ferry_buf_puts(&w, "(SELECT * FROM ") || ferry_buf_append(&w, b.data, b.len);
            if (!rc && r->modifiers.end > r->modifiers.start)
                rc = ferry_buf_putc(&w, ' ') ||
                     ferry_buf_append(&w, a->toks.text + r->modifiers.start,
                                      r->modifiers.end - r->modifiers.start);
            if (!rc)
                rc = ferry_buf_puts(&w, " WHERE ") || ferry_buf_puts(&w, ferry_buf_cstr(&restr)) ||
                     ferry_buf_puts(&w, ") AS ") || ferry_sql_append_ident(r->qualifier, &w);
            if (!rc)
                rc = sql_edits_add_owned(edits, r->expr.start, r->expr.end, buf_take(&w));
            ferry_buf_free(&w);
            if (rc)
                break;
        } else {
            if (renamed) {
                if (r->alias.end == r->alias.start) {
                    rc = ferry_buf_puts(&b, " AS ") || ferry_sql_append_ident(r->qualifier, &b);
                    if (rc)
                        break;
                }
                rc = sql_edits_add_owned(edits, r->name.start, r->name.end, buf_take(&b));
                if (rc)
                    break;
            }
            ferry_buf *wb = &where[r->level];
            if (!whole)
                rc = ferry_buf_puts(wb, " AND ") || ferry_buf_puts(wb, ferry_buf_cstr(&restr));
            if (rc)
                break;
        }
        if (!empty)
            for (size_t l = 0; l < r->n_in_lists && !rc; l++) {
                ferry_buf_reset(&b);
                bool all_kept;
                rc = pruned_list(a, target, k, r->in_lists[l], &b, &all_kept);
                if (!rc && !all_kept)
                    rc = sql_edits_add_owned(edits, r->in_lists[l].start, r->in_lists[l].end,
                                             buf_take(&b));
            }
    }
    /* restrictions into each level's WHERE */
    for (size_t l = 0; l < n_levels && !rc; l++) {
        if (!where[l].len)
            continue;
        const ferry_sql_level *L = &a->levels[l];
        const char *conds = ferry_buf_cstr(&where[l]) + 5; /* past " AND " */
        const ferry_sql_clause *w = &L->cl[FERRY_CL_WHERE];
        if (w->present && w->body.end > w->body.start) {
            rc = sql_edits_add(edits, w->body.start, w->body.start, "(");
            ferry_buf_reset(&b);
            if (!rc)
                rc = ferry_buf_puts(&b, ")") || ferry_buf_puts(&b, ferry_buf_cstr(&where[l]));
            if (!rc)
                rc = sql_edits_add_owned(edits, w->body.end, w->body.end, buf_take(&b));
        } else {
            const ferry_sql_clause *after = L->cl[FERRY_CL_PREWHERE].present
                                                ? &L->cl[FERRY_CL_PREWHERE]
                                                : &L->cl[FERRY_CL_FROM];
            ferry_buf_reset(&b);
            rc = ferry_buf_puts(&b, " WHERE ") || ferry_buf_puts(&b, conds);
            if (!rc)
                rc = sql_edits_add_owned(edits, after->body.end, after->body.end, buf_take(&b));
        }
    }
    if (!rc && target->materialize_globals)
        for (size_t g = 0; g < a->n_globals && !rc; g++)
            if (!a->globals[g].nested)
                rc = sql_edits_add(edits, a->globals[g].paren.start, a->globals[g].paren.end,
                                   a->globals[g].name);
    *skip = managed > 0 && reading == 0;
    for (size_t l = 0; l < n_levels; l++)
        ferry_buf_free(&where[l]);
    free(where);
    ferry_buf_free(&b);
    ferry_buf_free(&restr);
    if (rc)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory rewriting SQL");
    return FERRY_OK;
}

int ferry_sql_rewrite(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                      const ferry_sql_target *target, ferry_sql_rewritten *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    if (!a->understood)
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "cannot route this query: %s", a->why);
    sql_edits edits = {0};
    ferry_buf sql = FERRY_BUF_INIT;
    int rc = sql_server_edits(a, tables, target, &edits, &out->skip, err);
    if (!rc && sql_edits_apply(&edits, a->toks.text, a->body.start, a->body.end, &sql))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory rewriting SQL");
    if (!rc)
        out->sql = ferry_buf_detach(&sql);
    sql_edits_free(&edits);
    ferry_buf_free(&sql);
    return rc;
}

void ferry_sql_rewritten_free(ferry_sql_rewritten *r)
{
    free(r->sql);
    r->sql = NULL;
}
