/* The tenant filters of a SELECT's managed references (analyze_int.h): for each reference, the
 * tenants its level's WHERE / PREWHERE conjuncts pin it to (col = 'x', col IN ('x', 'y'),
 * intersected over the conjuncts), or none (fan out) when anything is not understood; and the
 * sources (table functions, unknown tables) that make the whole analysis not understood. */
#include "analyze_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool literal_tok(const ferry_sql_analysis *a, size_t i)
{
    if (i >= a->n_sig)
        return false;
    const ferry_tok *t = sig_tok(a, i);
    if (t->kind == FERRY_TOK_STRING)
        return a->toks.text[t->start] == '\'';
    if (t->kind != FERRY_TOK_NUMBER)
        return false;
    for (size_t k = 0; k < t->len; k++)
        if (a->toks.text[t->start + k] < '0' || a->toks.text[t->start + k] > '9')
            return false;
    return true;
}

static char *literal_value(const ferry_sql_analysis *a, size_t i)
{
    const ferry_tok *t = sig_tok(a, i);
    if (t->kind == FERRY_TOK_NUMBER)
        return strndup(a->toks.text + t->start, t->len);
    size_t n;
    char *v = ferry_tok_value(&a->toks, t, &n);
    if (v && strlen(v) != n) { /* a NUL inside: never a tenant we route */
        free(v);
        return strdup("\x01");
    }
    return v;
}

/* A column reference to the ref's tenant column at [i, i+n): returns n (1 or 3) or 0. */
static size_t tenant_col(const ferry_sql_analysis *a, size_t i, size_t hi, const ferry_sql_ref *r,
                         const char *col, bool single_source)
{
    size_t n = 0;
    char *q = NULL, *c = NULL;
    if (!is_ident(a, i) || i >= hi)
        return 0;
    if (sig_is(a, i + 1, '.') && i + 2 < hi && is_ident(a, i + 2)) {
        q = sig_value(a, i);
        c = sig_value(a, i + 2);
        if (q && c && !strcmp(q, r->qualifier) && !strcmp(c, col))
            n = 3;
    } else {
        c = sig_value(a, i);
        if (c && single_source && !strcmp(c, col) && sig_kind(a, i) == FERRY_TOK_WORD)
            n = 1;
        if (c && single_source && !strcmp(c, col) && sig_kind(a, i) == FERRY_TOK_QIDENT)
            n = 1;
    }
    free(q);
    free(c);
    return n;
}

typedef struct tenant_set {
    bool any;     /* a conjunct restricted the tenant */
    char **v;
    size_t n;
} tenant_set;

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Intersects set with the values (owned, consumed). */
static void set_intersect(tenant_set *set, char **vals, size_t n)
{
    qsort(vals, n, sizeof *vals, cmp_str);
    size_t u = 0;
    for (size_t k = 0; k < n; k++) {
        if (u && !strcmp(vals[u - 1], vals[k]))
            free(vals[k]);
        else
            vals[u++] = vals[k];
    }
    n = u;
    if (!set->any) {
        set->any = true;
        set->v = vals;
        set->n = n;
        return;
    }
    size_t keep = 0;
    for (size_t k = 0; k < set->n; k++) {
        if (bsearch(&set->v[k], vals, n, sizeof *vals, cmp_str))
            set->v[keep++] = set->v[k];
        else
            free(set->v[k]);
    }
    set->n = keep;
    for (size_t k = 0; k < n; k++)
        free(vals[k]);
    free(vals);
}

static const char *const no_split_words[] = {"or", "case", "between", "as", "xor", NULL};

/* Collects the conjuncts of [lo, hi) that restrict the ref's tenant column. */
static void conjuncts(parser *p, size_t lo, size_t hi, const ferry_sql_ref *r, const char *col,
                      bool single, tenant_set *set, ferry_span **lists, size_t *n_lists)
{
    ferry_sql_analysis *a = p->a;
    for (size_t i = lo; i < hi; i++) {
        if (kw_in(a, i, no_split_words) || sig_is(a, i, '?') || sig_is(a, i, ':') ||
            (sig_kind(a, i) == FERRY_TOK_OP && a->toks.text[sig_tok(a, i)->start] == '-' &&
             sig_tok(a, i)->len == 2))
            return; /* lower precedence than AND, or AND that is not a conjunction */
        if (sig_open(a, i))
            i = a->match[i];
    }
    size_t c = lo;
    for (size_t i = lo; i <= hi; i++) {
        if (i < hi && !sig_kw(a, i, "and")) {
            if (sig_open(a, i))
                i = a->match[i];
            continue;
        }
        size_t e = i; /* conjunct [c, e) */
        if (e > c && sig_kind(a, c) == FERRY_TOK_LPAREN && a->match[c] == e - 1 &&
            !starts_query(a, c + 1)) {
            conjuncts(p, c + 1, e - 1, r, col, single, set, lists, n_lists);
        } else if (e > c) {
            size_t n = tenant_col(a, c, e, r, col, single);
            char **vals = NULL;
            size_t nv = 0;
            if (n && c + n + 2 == e && (sig_is(a, c + n, '=') ||
                                        (sig_kind(a, c + n) == FERRY_TOK_OP &&
                                         sig_tok(a, c + n)->len == 2 &&
                                         a->toks.text[sig_tok(a, c + n)->start] == '=')) &&
                literal_tok(a, c + n + 1)) {
                vals = malloc(sizeof *vals);
                if (vals && (vals[0] = literal_value(a, c + n + 1)))
                    nv = 1;
            } else if (e - c >= 3 && literal_tok(a, c) &&
                       (sig_is(a, c + 1, '=') || (sig_tok(a, c + 1)->len == 2 &&
                                                  sig_kind(a, c + 1) == FERRY_TOK_OP &&
                                                  a->toks.text[sig_tok(a, c + 1)->start] == '=')) &&
                       tenant_col(a, c + 2, e, r, col, single) == e - c - 2) {
                vals = malloc(sizeof *vals);
                if (vals && (vals[0] = literal_value(a, c)))
                    nv = 1;
            } else if (n && sig_kw(a, c + n, "in") && sig_is(a, c + n + 1, '(') &&
                       a->match[c + n + 1] == e - 1) {
                size_t lp = c + n + 1, rp = e - 1;
                bool ok = rp > lp + 1;
                for (size_t k = lp + 1; k < rp && ok; k += 2)
                    ok = literal_tok(a, k) && (k + 1 == rp || sig_is(a, k + 1, ','));
                if (ok) {
                    vals = calloc(rp - lp, sizeof *vals);
                    for (size_t k = lp + 1; vals && k < rp; k += 2)
                        if ((vals[nv] = literal_value(a, k)))
                            nv++;
                    ferry_span *l = realloc(*lists, (*n_lists + 1) * sizeof *l);
                    if (l) {
                        *lists = l;
                        l[(*n_lists)++] = (ferry_span){sig_start(a, lp), sig_end(a, rp)};
                    } else {
                        p->oom = 1;
                    }
                }
            }
            if (nv)
                set_intersect(set, vals, nv);
            else
                free(vals);
        }
        c = i + 1;
    }
}

/* True when the query defines an alias with the tenant column's name (AS tenant, or
 * tenant AS (...)): then `tenant` in a WHERE may not be the column. */
static bool tenant_aliased(const ferry_sql_analysis *a, const char *col)
{
    for (size_t i = 0; i + 1 < a->n_sig; i++) {
        size_t at = NONE;
        if (sig_kw(a, i, "as") && is_ident(a, i + 1))
            at = i + 1;
        else if (is_ident(a, i) && sig_kw(a, i + 1, "as"))
            at = i;
        else if (sig_kind(a, i) == FERRY_TOK_OP && sig_tok(a, i)->len == 2 &&
                 !memcmp(a->toks.text + sig_tok(a, i)->start, "->", 2) && i > 0 &&
                 is_ident(a, i - 1))
            at = i - 1; /* lambda parameter */
        if (at == NONE)
            continue;
        char *v = sig_value(a, at);
        bool same = v && !strcmp(v, col);
        free(v);
        if (same)
            return true;
    }
    return false;
}

void tenant_filters(parser *p)
{
    ferry_sql_analysis *a = p->a;
    for (size_t k = 0; k < a->n_refs; k++) {
        ferry_sql_ref *r = &a->refs[k];
        if (r->table < 0)
            continue;
        const ferry_sql_table *t = &p->tables[r->table];
        if (t->layout != FERRY_LAYOUT_SHARED || !t->tenant_column ||
            tenant_aliased(a, t->tenant_column))
            continue;
        const ferry_sql_level *L = &a->levels[r->level];
        tenant_set set = {0};
        bool single = L->n_sources == 1;
        for (int cl = FERRY_CL_PREWHERE; cl <= FERRY_CL_WHERE; cl++)
            if (L->cl[cl].present)
                conjuncts(p, L->cl[cl].tok_body, L->cl[cl].tok_end, r, t->tenant_column, single,
                          &set, &r->in_lists, &r->n_in_lists);
        r->has_filter = set.any;
        r->tenants = set.v;
        r->n_tenants = set.n;
        if (!set.any) { /* IN lists are only pruned together with a filter */
            free(r->in_lists);
            r->in_lists = NULL;
            r->n_in_lists = 0;
        }
    }
}

/* A safety net: a managed table named right after FROM or JOIN that the clause analysis did
 * not see as a table reference (a column named like a keyword confused it) must not be sent
 * unrewritten. */
void unrecognised_sources(parser *p)
{
    ferry_sql_analysis *a = p->a;
    for (size_t i = 1; i < a->n_sig && a->understood; i++) {
        if (!is_ident(a, i) || !(sig_kw(a, i - 1, "from") || sig_kw(a, i - 1, "join")))
            continue;
        size_t name = sig_is(a, i + 1, '.') && is_ident(a, i + 2) ? i + 2 : i;
        if (sig_is(a, name + 1, '('))
            continue; /* table function */
        char *tbl = sig_value(a, name), *tenant = NULL;
        if (!tbl) {
            p->oom = 1;
            return;
        }
        bool managed = false;
        for (size_t t = 0; t < p->n_tables && !managed; t++) {
            const ferry_sql_table *s = &p->tables[t];
            if (s->layout == FERRY_LAYOUT_SHARED)
                managed = s->name && !strcmp(s->name, tbl);
        }
        if (!managed) {
            size_t saved = p->n_ctes;
            p->n_ctes = 0; /* a CTE of the same name does not excuse it here */
            managed = match_table(p, NULL, tbl, &tenant, NULL) >= 0;
            p->n_ctes = saved;
            free(tenant);
        }
        free(tbl);
        if (!managed)
            continue;
        bool seen = false;
        for (size_t r = 0; r < a->n_refs && !seen; r++)
            seen = a->refs[r].name.start == sig_start(a, i);
        bool cte = false;
        for (size_t c = 0; c < p->n_ctes && !cte; c++) {
            char *v = sig_value(a, i);
            cte = v && !strcmp(v, p->ctes[c]) && name == i;
            free(v);
        }
        if (!seen && !cte)
            not_understood(p, i, "a managed table after FROM/JOIN was not recognised as a table");
    }
}
