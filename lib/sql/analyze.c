/* SQL analysis for read routing: finds the SELECT levels, their clauses, the table references in
 * FROM / JOIN at every nesting level, GLOBAL subqueries, the statement's FORMAT and SETTINGS,
 * and the tenant filter of every managed reference. Conservative: whatever is not understood
 * yields "no tenant filter" (fan out) or understood = false, never a wrong restriction. */
#include "analyze_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>


/* Subqueries nested deeper than this are not understood (the parser recurses once per level:
 * 10,000 levels overflowed a thread's stack). ClickHouse's own max_parser_depth is 1000. */
#define MAX_QUERY_DEPTH 256

void not_understood(parser *p, size_t sig_index, const char *fmt, ...)
{
    ferry_sql_analysis *a = p->a;
    if (!a->understood)
        return;
    a->understood = false;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (sig_index < a->n_sig)
        snprintf(a->why, sizeof a->why, "%s (at byte %zu)", msg, sig_start(a, sig_index));
    else
        snprintf(a->why, sizeof a->why, "%s", msg);
}


/* Words after which a clause keyword cannot start (the expression is not complete). */
static const char *const continuing_kw[] = {
    "as",   "and",   "or",     "not",      "select", "distinct", "by",     "where",  "prewhere",
    "having", "from", "join",  "on",       "using",  "with",     "in",     "like",   "ilike",
    "is",   "between", "case", "when",     "then",   "else",     "interval", "all",  "any",
    "limit", "offset", "settings", "format", "qualify", "window", "top",   "global", "array",
    "except", "replace", "apply", "union", "intersect", "desc", "asc", "describe", "explain",
    NULL};

static bool ends_expression(const ferry_sql_analysis *a, size_t prev)
{
    switch (sig_kind(a, prev)) {
    case FERRY_TOK_WORD:
        return !kw_in(a, prev, continuing_kw) || sig_kw(a, prev, "desc") ||
               sig_kw(a, prev, "asc");
    case FERRY_TOK_QIDENT:
    case FERRY_TOK_STRING:
    case FERRY_TOK_NUMBER:
    case FERRY_TOK_HEREDOC:
    case FERRY_TOK_RPAREN:
    case FERRY_TOK_RBRACKET:
    case FERRY_TOK_RBRACE:
        return true;
    case FERRY_TOK_OP:
        return sig_is(a, prev, '*'); /* SELECT * FROM */
    default:
        return false;
    }
}

/* The clause that starts at significant token i (given the clause we are in), and the number of
 * keyword tokens; -1 when none. */
static int clause_at(const ferry_sql_analysis *a, size_t i, size_t lo, int current, size_t *nkw)
{
    *nkw = 1;
    if (i == lo) {
        if (sig_kw(a, i, "with"))
            return FERRY_CL_WITH;
        if (sig_kw(a, i, "select"))
            return FERRY_CL_SELECT;
        return -1;
    }
    if (current == FERRY_CL_WITH && sig_kw(a, i, "select"))
        return FERRY_CL_SELECT;
    if (!ends_expression(a, i - 1))
        return -1;
    if (sig_kw(a, i, "from"))
        return FERRY_CL_FROM;
    if (sig_kw(a, i, "prewhere"))
        return FERRY_CL_PREWHERE;
    if (sig_kw(a, i, "where"))
        return FERRY_CL_WHERE;
    if (sig_kw(a, i, "group") && sig_kw(a, i + 1, "by")) {
        *nkw = 2;
        return FERRY_CL_GROUP_BY;
    }
    if (sig_kw(a, i, "having"))
        return FERRY_CL_HAVING;
    if (sig_kw(a, i, "window"))
        return FERRY_CL_WINDOW;
    if (sig_kw(a, i, "qualify"))
        return FERRY_CL_QUALIFY;
    if (sig_kw(a, i, "order") && sig_kw(a, i + 1, "by")) {
        *nkw = 2;
        return FERRY_CL_ORDER_BY;
    }
    if (sig_kw(a, i, "limit"))
        return FERRY_CL_LIMIT;
    if (sig_kw(a, i, "offset") && current != FERRY_CL_LIMIT && current != FERRY_CL_FROM)
        return FERRY_CL_OFFSET;
    if (sig_kw(a, i, "settings"))
        return FERRY_CL_SETTINGS;
    if (sig_kw(a, i, "format"))
        return FERRY_CL_FORMAT;
    return -1;
}

static bool is_union_kw(const ferry_sql_analysis *a, size_t i)
{
    if (sig_kw(a, i, "union") || sig_kw(a, i, "intersect"))
        return true;
    /* SELECT * EXCEPT (a) is a column transformer, not a set operation */
    return sig_kw(a, i, "except") && i > 0 && !sig_is(a, i - 1, '*') &&
           !sig_is(a, i - 1, ',') && !sig_kw(a, i - 1, "select");
}



static size_t new_level(parser *p, size_t parent, bool in_global)
{
    ferry_sql_analysis *a = p->a;
    ferry_sql_level *v = realloc(a->levels, (a->n_levels + 1) * sizeof *v);
    if (!v) {
        p->oom = 1;
        return NONE;
    }
    a->levels = v;
    memset(&v[a->n_levels], 0, sizeof v[0]);
    v[a->n_levels].parent = parent;
    v[a->n_levels].in_global = in_global;
    return a->n_levels++;
}

static void parse_query(parser *p, size_t lo, size_t hi, size_t parent, bool in_global);
static void scan_expr(parser *p, size_t lo, size_t hi, size_t level, bool in_global);

static void add_global(parser *p, size_t lparen, bool join, bool nested)
{
    ferry_sql_analysis *a = p->a;
    ferry_sql_global *v = realloc(a->globals, (a->n_globals + 1) * sizeof *v);
    if (!v) {
        p->oom = 1;
        return;
    }
    a->globals = v;
    ferry_sql_global *g = &v[a->n_globals++];
    memset(g, 0, sizeof *g);
    size_t rparen = a->match[lparen];
    g->paren = (ferry_span){sig_start(a, lparen), sig_end(a, rparen)};
    g->inner = (ferry_span){sig_end(a, lparen), sig_start(a, rparen)};
    if (lparen + 1 < rparen)
        g->inner = (ferry_span){sig_start(a, lparen + 1), sig_end(a, rparen - 1)};
    g->join = join;
    g->nested = nested;
    /* hash the significant tokens, so whitespace and comments do not matter */
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        p->oom = 1;
        return;
    }
    XXH3_64bits_reset(st);
    for (size_t i = lparen + 1; i < rparen; i++) {
        const ferry_tok *t = sig_tok(a, i);
        XXH3_64bits_update(st, a->toks.text + t->start, t->len);
        XXH3_64bits_update(st, " ", 1);
    }
    unsigned long long h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    snprintf(g->name, sizeof g->name, "_data_%016llx", h);
}

/* A subquery in parentheses at lparen: parse it as a child level. */
static void subquery(parser *p, size_t lparen, size_t level, bool in_global)
{
    parse_query(p, lparen + 1, p->a->match[lparen], level, in_global);
}


/* Walks an expression range at every depth, parsing the subqueries it contains. */
static void scan_expr(parser *p, size_t lo, size_t hi, size_t level, bool in_global)
{
    ferry_sql_analysis *a = p->a;
    for (size_t i = lo; i < hi; i++) {
        if (sig_kind(a, i) == FERRY_TOK_LPAREN && starts_query(a, i + 1)) {
            bool global = false;
            if (i >= 2 && sig_kw(a, i - 1, "in")) {
                size_t g = i - 2;
                if (sig_kw(a, g, "not") && g > 0)
                    g--;
                global = sig_kw(a, g, "global");
            }
            if (global)
                add_global(p, i, false, in_global);
            subquery(p, i, level, in_global || global);
            i = a->match[i];
            continue;
        }
        /* x IN table: reads a whole table; fine unless it is a managed one */
        if (sig_kw(a, i, "in") && is_ident(a, i + 1) && !sig_is(a, i + 2, '(')) {
            char *name = sig_value(a, sig_is(a, i + 2, '.') && is_ident(a, i + 3) ? i + 3 : i + 1);
            for (size_t t = 0; name && t < p->n_tables; t++)
                if (p->tables[t].name && !strcmp(name, p->tables[t].name))
                    not_understood(p, i + 1, "IN with a managed table as its right-hand side");
            free(name);
        }
    }
}

static const char *const join_words[] = {"global", "local", "any",   "all",   "asof",
                                         "semi",   "anti",  "inner", "left",  "right",
                                         "full",   "cross", "outer", "paste", "array",
                                         "join",   NULL};
static const char *const not_alias[] = {
    "final", "sample", "on",     "using",  "where", "prewhere", "group",  "order",    "having",
    "limit", "settings", "format", "window", "qualify", "union", "except", "intersect", "into",
    "offset", NULL};

/* Match a table name against the managed tables; -1 when none. tenant gets the per_tenant
 * tenant (owned). */
int match_table(parser *p, const char *db, const char *tbl, char **tenant, bool *cte)
{
    *tenant = NULL;
    if (cte)
        *cte = false;
    if (!db)
        for (size_t c = 0; c < p->n_ctes; c++)
            if (!strcmp(p->ctes[c], tbl)) {
                if (cte)
                    *cte = true;
                return -1;
            }
    for (size_t t = 0; t < p->n_tables; t++) {
        const ferry_sql_table *s = &p->tables[t];
        if (db && s->database && *s->database && strcmp(db, s->database))
            continue;
        if (s->layout == FERRY_LAYOUT_SHARED) {
            if (s->name && !strcmp(tbl, s->name))
                return (int)t;
            continue;
        }
        const char *pat = s->tenant_pattern;
        const char *mark = pat ? strstr(pat, "{tenant}") : NULL;
        if (!mark)
            continue;
        size_t pre = (size_t)(mark - pat), post = strlen(mark + 8), n = strlen(tbl);
        if (n > pre + post && !strncmp(tbl, pat, pre) && !strcmp(tbl + n - post, mark + 8)) {
            *tenant = strndup(tbl + pre, n - pre - post);
            if (!*tenant)
                p->oom = 1;
            return (int)t;
        }
    }
    return -1;
}

static void add_ref(parser *p, size_t level, size_t name_lo, size_t name_hi, size_t alias_tok,
                    size_t mod_lo, size_t mod_hi, size_t expr_hi, bool first)
{
    ferry_sql_analysis *a = p->a;
    char *db = NULL, *tbl = NULL, *tenant = NULL;
    if (name_hi - name_lo == 3) {
        db = sig_value(a, name_lo);
        tbl = sig_value(a, name_lo + 2);
    } else {
        tbl = sig_value(a, name_lo);
    }
    if (!tbl || (name_hi - name_lo == 3 && !db)) {
        p->oom = 1;
        goto out;
    }
    ferry_sql_ref *v = realloc(a->refs, (a->n_refs + 1) * sizeof *v);
    if (!v) {
        p->oom = 1;
        goto out;
    }
    a->refs = v;
    ferry_sql_ref *r = &v[a->n_refs++];
    memset(r, 0, sizeof *r);
    r->level = level;
    r->table = match_table(p, db, tbl, &tenant, &r->cte);
    r->tenant = tenant;
    r->first_source = first;
    r->name = (ferry_span){sig_start(a, name_lo), sig_end(a, name_hi - 1)};
    r->expr = (ferry_span){sig_start(a, name_lo), sig_end(a, expr_hi - 1)};
    if (alias_tok != NONE) {
        r->alias = (ferry_span){sig_start(a, alias_tok), sig_end(a, alias_tok)};
        r->qualifier = sig_value(a, alias_tok);
    } else {
        r->qualifier = strdup(tbl);
    }
    if (!r->qualifier)
        p->oom = 1;
    if (mod_lo < mod_hi)
        r->modifiers = (ferry_span){sig_start(a, mod_lo), sig_end(a, mod_hi - 1)};
out:
    free(db);
    free(tbl);
}

/* Parses one table expression from i; returns the index after it. */
static size_t table_expr(parser *p, size_t i, size_t hi, size_t level, bool global_join,
                         bool first, bool in_global)
{
    ferry_sql_analysis *a = p->a;
    size_t name_lo = NONE, name_hi = NONE;
    if (i >= hi) {
        not_understood(p, i, "a table expression was expected");
        return hi;
    }
    if (sig_kind(a, i) == FERRY_TOK_LPAREN) {
        if (starts_query(a, i + 1) || sig_kind(a, i + 1) == FERRY_TOK_LPAREN) {
            if (global_join)
                add_global(p, i, true, in_global);
            subquery(p, i, level, in_global || global_join);
        } else {
            not_understood(p, i, "parenthesised table expression");
        }
        i = a->match[i] + 1;
    } else if (is_ident(a, i)) {
        name_lo = i;
        i++;
        if (sig_is(a, i, '.') && is_ident(a, i + 1))
            i += 2;
        name_hi = i;
        if (i < hi && sig_kind(a, i) == FERRY_TOK_LPAREN) { /* table function */
            ferry_span *tf = realloc(a->table_functions,
                                     (a->n_table_functions + 1) * sizeof *tf);
            if (!tf) {
                p->oom = 1;
                return hi;
            }
            a->table_functions = tf;
            tf[a->n_table_functions++] = (ferry_span){sig_start(a, name_lo),
                                                      sig_end(a, name_hi - 1)};
            scan_expr(p, i + 1, a->match[i], level, in_global);
            i = a->match[i] + 1;
            name_lo = NONE;
        }
    } else {
        not_understood(p, i, "a table expression was expected");
        return hi;
    }
    size_t alias = NONE;
    if (i < hi && sig_kw(a, i, "as") && is_ident(a, i + 1)) {
        alias = i + 1;
        i += 2;
    } else if (i < hi && is_ident(a, i) && !kw_in(a, i, join_words) && !kw_in(a, i, not_alias)) {
        alias = i;
        i++;
    }
    size_t mod_lo = i;
    while (i < hi && !sig_is(a, i, ',') && !kw_in(a, i, join_words) && !sig_kw(a, i, "on") &&
           !sig_kw(a, i, "using")) {
        if (sig_open(a, i))
            i = a->match[i];
        i++;
    }
    if (mod_lo < i && !sig_kw(a, mod_lo, "final") && !sig_kw(a, mod_lo, "sample"))
        not_understood(p, mod_lo, "unexpected words after a table expression");
    a->levels[level].n_sources++;
    if (name_lo != NONE)
        add_ref(p, level, name_lo, name_hi, alias, mod_lo, i, i, first);
    return i;
}

/* The FROM section: tables, JOINs (with ON / USING), ARRAY JOINs, comma joins. */
static void parse_from(parser *p, size_t lo, size_t hi, size_t level, bool in_global)
{
    ferry_sql_analysis *a = p->a;
    ferry_sql_level *L;
    size_t first_ref = a->n_refs;
    size_t i = table_expr(p, lo, hi, level, false, true, in_global);
    /* per source after the first: whether its join lets a WHERE restriction stay exact */
    bool all_left_preserving = true;
    size_t n_joined = 0;
    bool right_ok[64];
    size_t ref_source[64];
    while (i < hi && p->a->understood) {
        if (sig_is(a, i, ',')) {
            size_t before = a->n_refs;
            i = table_expr(p, i + 1, hi, level, false, false, in_global);
            if (n_joined < 64) {
                right_ok[n_joined] = true;
                ref_source[n_joined] = before;
            }
            n_joined++;
            continue;
        }
        if (sig_kw(a, i, "on") || sig_kw(a, i, "using")) {
            size_t j = i + 1;
            while (j < hi && !sig_is(a, j, ',') &&
                   !(kw_in(a, j, join_words) && !sig_is(a, j + 1, '(') &&
                     sig_kind(a, j - 1) != FERRY_TOK_DOT)) {
                if (sig_open(a, j))
                    j = a->match[j];
                j++;
            }
            scan_expr(p, i + 1, j, level, in_global);
            i = j;
            continue;
        }
        if (!kw_in(a, i, join_words)) {
            not_understood(p, i, "unexpected token in FROM");
            break;
        }
        /* join modifiers up to JOIN */
        size_t j = i;
        bool global = false, array = false, inner_plain = true, left_ok = true;
        while (j < hi && kw_in(a, j, join_words) && !sig_kw(a, j, "join")) {
            if (sig_kw(a, j, "global"))
                global = true;
            else if (sig_kw(a, j, "array"))
                array = true;
            else if (sig_kw(a, j, "right") || sig_kw(a, j, "full") || sig_kw(a, j, "paste"))
                left_ok = false, inner_plain = false;
            else if (!sig_kw(a, j, "inner") && !sig_kw(a, j, "cross") && !sig_kw(a, j, "all") &&
                     !sig_kw(a, j, "local"))
                inner_plain = false;
            j++;
        }
        if (!sig_kw(a, j, "join")) {
            not_understood(p, j, "JOIN expected");
            break;
        }
        L = &a->levels[level];
        if (array) {
            L->has_array_join = true;
            size_t k = j + 1;
            while (k < hi && !(kw_in(a, k, join_words) && !sig_is(a, k + 1, '(') &&
                               sig_kind(a, k - 1) != FERRY_TOK_DOT)) {
                if (sig_open(a, k))
                    k = a->match[k];
                k++;
            }
            scan_expr(p, j + 1, k, level, in_global);
            i = k;
            continue;
        }
        L->has_join = true;
        if (!left_ok)
            all_left_preserving = false;
        size_t before = a->n_refs;
        i = table_expr(p, j + 1, hi, level, global, false, in_global);
        if (n_joined < 64) {
            right_ok[n_joined] = inner_plain;
            ref_source[n_joined] = before;
        }
        n_joined++;
        /* a later join that does not preserve its left side makes earlier sources unsafe */
        if (!left_ok)
            for (size_t k = 0; k + 1 < n_joined && k < 64; k++)
                right_ok[k] = false;
    }
    L = &a->levels[level];
    if (n_joined > 64) {
        not_understood(p, lo, "more than 64 joins");
        return;
    }
    for (size_t r = first_ref; r < a->n_refs; r++) {
        if (a->refs[r].level != level)
            continue;
        bool safe;
        if (a->refs[r].first_source) {
            safe = all_left_preserving;
        } else {
            safe = false;
            for (size_t k = 0; k < n_joined; k++)
                if (ref_source[k] == r)
                    safe = right_ok[k];
        }
        a->refs[r].wrap = !safe;
        if (!safe)
            L->unsafe_joins = true;
    }
}

static void add_cte(parser *p, size_t i)
{
    char *name = sig_value(p->a, i);
    char **v = realloc(p->ctes, (p->n_ctes + 1) * sizeof *v);
    if (!name || !v) {
        free(name);
        if (v)
            p->ctes = v;
        p->oom = 1;
        return;
    }
    p->ctes = v;
    p->ctes[p->n_ctes++] = name;
}

static void parse_select(parser *p, size_t lo, size_t hi, size_t parent, bool in_global)
{
    ferry_sql_analysis *a = p->a;
    size_t level = new_level(p, parent, in_global);
    if (level == NONE)
        return;
    a->levels[level].sig_start = lo;
    a->levels[level].sig_end = hi;
    a->levels[level].span = (ferry_span){sig_start(a, lo), sig_end(a, hi - 1)};
    int current = -1, last = -1;
    for (size_t i = lo; i < hi; i++) {
        size_t nkw;
        int cl = clause_at(a, i, lo, current, &nkw);
        if (cl >= 0) {
            if (cl <= last && !(cl == FERRY_CL_LIMIT && last == FERRY_CL_LIMIT)) {
                not_understood(p, i, "clause %s out of place", ferry_clause_name(cl));
                return;
            }
            if (current >= 0)
                a->levels[level].cl[current].tok_end = i;
            if (cl == FERRY_CL_LIMIT && last == FERRY_CL_LIMIT) {
                /* the first LIMIT was a LIMIT BY */
                ferry_sql_clause *c = &a->levels[level].cl[FERRY_CL_LIMIT];
                a->levels[level].cl[FERRY_CL_LIMIT_BY] = *c;
                memset(c, 0, sizeof *c);
            }
            ferry_sql_clause *c = &a->levels[level].cl[cl];
            c->present = true;
            c->tok_kw = i;
            c->tok_body = i + nkw;
            current = last = cl;
            i += nkw - 1;
        } else if (i == lo) {
            not_understood(p, i, "SELECT expected");
            return;
        } else if (sig_kw(a, i, "into") && sig_kw(a, i + 1, "outfile")) {
            not_understood(p, i, "INTO OUTFILE");
            return;
        }
        if (sig_open(a, i))
            i = a->match[i];
    }
    if (current >= 0)
        a->levels[level].cl[current].tok_end = hi;
    /* a LIMIT with BY at depth 0 is a LIMIT BY */
    ferry_sql_clause *lim = &a->levels[level].cl[FERRY_CL_LIMIT];
    if (lim->present && !a->levels[level].cl[FERRY_CL_LIMIT_BY].present) {
        for (size_t i = lim->tok_body; i < lim->tok_end; i++) {
            if (sig_kw(a, i, "by")) {
                a->levels[level].cl[FERRY_CL_LIMIT_BY] = *lim;
                memset(lim, 0, sizeof *lim);
                break;
            }
            if (sig_open(a, i))
                i = a->match[i];
        }
    }
    for (int cl = 0; cl < FERRY_CL_COUNT; cl++) {
        ferry_sql_clause *c = &a->levels[level].cl[cl];
        if (!c->present)
            continue;
        c->kw = (ferry_span){sig_start(a, c->tok_kw), sig_end(a, c->tok_body - 1)};
        if (c->tok_body < c->tok_end)
            c->body = (ferry_span){sig_start(a, c->tok_body), sig_end(a, c->tok_end - 1)};
        else
            c->body = (ferry_span){c->kw.end, c->kw.end};
    }
    if (!a->levels[level].cl[FERRY_CL_SELECT].present) {
        not_understood(p, lo, "SELECT expected");
        return;
    }
    /* WITH: CTE names, then subqueries */
    ferry_sql_clause *w = &a->levels[level].cl[FERRY_CL_WITH];
    if (w->present)
        for (size_t i = w->tok_body; i < w->tok_end; i++) {
            if (is_ident(a, i) && sig_kw(a, i + 1, "as") && sig_is(a, i + 2, '(') &&
                (i == w->tok_body || sig_is(a, i - 1, ',')))
                add_cte(p, i);
            if (sig_open(a, i))
                i = a->match[i];
        }
    for (int cl = 0; cl < FERRY_CL_COUNT && a->understood; cl++) {
        ferry_sql_clause *c = &a->levels[level].cl[cl];
        if (!c->present)
            continue;
        if (cl == FERRY_CL_FROM)
            parse_from(p, c->tok_body, c->tok_end, level, in_global);
        else
            scan_expr(p, c->tok_body, c->tok_end, level, in_global);
    }
}

static void parse_query_at(parser *p, size_t lo, size_t hi, size_t parent, bool in_global);

static void parse_query(parser *p, size_t lo, size_t hi, size_t parent, bool in_global)
{
    if (p->depth >= MAX_QUERY_DEPTH) {
        not_understood(p, lo, "subqueries nested deeper than %d levels", MAX_QUERY_DEPTH);
        return;
    }
    p->depth++;
    parse_query_at(p, lo, hi, parent, in_global);
    p->depth--;
}

static void parse_query_at(parser *p, size_t lo, size_t hi, size_t parent, bool in_global)
{
    ferry_sql_analysis *a = p->a;
    if (lo >= hi) {
        not_understood(p, lo, "empty query");
        return;
    }
    size_t part = lo, parts = 0;
    for (size_t i = lo; i <= hi && a->understood && !p->oom; i++) {
        if (i < hi && !is_union_kw(a, i)) {
            if (sig_open(a, i))
                i = a->match[i];
            continue;
        }
        /* one part: [part, i) */
        parts++;
        if (part >= i) {
            not_understood(p, part, "empty part of a UNION");
            return;
        }
        if (sig_kind(a, part) == FERRY_TOK_LPAREN && a->match[part] == i - 1)
            parse_query(p, part + 1, i - 1, parent, in_global);
        else if (starts_query(a, part))
            parse_select(p, part, i, parent, in_global);
        else
            not_understood(p, part, "SELECT expected");
        if (i < hi) {
            i++;
            if (sig_kw(a, i, "all") || sig_kw(a, i, "distinct"))
                i++;
            part = i;
            i--;
        }
    }
    if (parts > 1 && parent == NONE)
        a->top_union = true;
}

/* ---- statement tail: FORMAT, SETTINGS ---- */

static int parse_settings(parser *p, size_t lo, size_t hi)
{
    ferry_sql_analysis *a = p->a;
    size_t i = lo;
    while (i < hi) {
        size_t j = i;
        while (j < hi && !sig_is(a, j, ',')) {
            if (sig_open(a, j))
                j = a->match[j];
            j++;
        }
        /* [i, j): name = value */
        if (!(is_ident(a, i) && sig_is(a, i + 1, '=') && i + 2 < j)) {
            not_understood(p, i, "SETTINGS expects name = value");
            return 0;
        }
        ferry_sql_setting *v = realloc(a->settings, (a->n_settings + 1) * sizeof *v);
        if (!v)
            return p->oom = 1;
        a->settings = v;
        ferry_sql_setting *s = &v[a->n_settings++];
        s->name = sig_value(a, i);
        s->value = strndup(a->toks.text + sig_start(a, i + 2), sig_end(a, j - 1) - sig_start(a, i + 2));
        if (!s->name || !s->value)
            return p->oom = 1;
        i = j + 1;
    }
    return 0;
}

static void statement_tail(parser *p, size_t *hi)
{
    ferry_sql_analysis *a = p->a;
    size_t end = *hi;
    while (end > 0 && sig_is(a, end - 1, ';'))
        end--;
    size_t after_union = 0;
    for (size_t i = 0; i < end; i++) {
        if (sig_open(a, i))
            i = a->match[i];
        else if (is_union_kw(a, i))
            after_union = i + 1;
    }
    size_t fmt = NONE, set = NONE;
    for (size_t i = after_union; i < end; i++) {
        if (sig_open(a, i)) {
            i = a->match[i];
            continue;
        }
        if (i == 0 || !ends_expression(a, i - 1))
            continue;
        if (sig_kw(a, i, "format") && fmt == NONE)
            fmt = i;
        if (sig_kw(a, i, "settings") && set == NONE && (fmt == NONE || fmt + 2 == i))
            set = i;
    }
    size_t body_end = fmt < set ? fmt : set;
    if (body_end == NONE)
        body_end = end;
    if (fmt != NONE) {
        size_t fend = set != NONE && set > fmt ? set : end;
        if (fend != fmt + 2 || !is_ident(a, fmt + 1)) {
            not_understood(p, fmt, "FORMAT expects one format name");
        } else {
            a->format = sig_value(a, fmt + 1);
            a->format_clause = (ferry_span){sig_start(a, fmt), sig_end(a, fmt + 1)};
            if (!a->format)
                p->oom = 1;
        }
    }
    if (set != NONE) {
        size_t send = fmt != NONE && fmt > set ? fmt : end;
        a->settings_clause = (ferry_span){sig_start(a, set), sig_end(a, send - 1)};
        parse_settings(p, set + 1, send);
    }
    *hi = body_end;
}

/* ---- entry ---- */

static int match_brackets(ferry_sql_analysis *a, ferry_err *err)
{
    size_t *stack = malloc((a->n_sig + 1) * sizeof *stack);
    if (!stack)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory analysing SQL");
    size_t depth = 0;
    int rc = FERRY_OK;
    for (size_t i = 0; i < a->n_sig; i++) {
        a->match[i] = NONE;
        enum ferry_tok_kind k = sig_kind(a, i);
        if (k == FERRY_TOK_LPAREN || k == FERRY_TOK_LBRACKET || k == FERRY_TOK_LBRACE) {
            stack[depth++] = i;
        } else if (k == FERRY_TOK_RPAREN || k == FERRY_TOK_RBRACKET || k == FERRY_TOK_RBRACE) {
            enum ferry_tok_kind want = k == FERRY_TOK_RPAREN     ? FERRY_TOK_LPAREN
                                       : k == FERRY_TOK_RBRACKET ? FERRY_TOK_LBRACKET
                                                                 : FERRY_TOK_LBRACE;
            if (!depth || sig_kind(a, stack[depth - 1]) != want) {
                rc = ferry_err_set(err, FERRY_EINVAL,
                                   "unbalanced '%c' at byte %zu", a->toks.text[sig_start(a, i)],
                                   sig_start(a, i));
                goto out;
            }
            size_t o = stack[--depth];
            a->match[o] = i;
            a->match[i] = o;
        }
    }
    if (depth)
        rc = ferry_err_set(err, FERRY_EINVAL, "'%c' at byte %zu is not closed",
                           a->toks.text[sig_start(a, stack[depth - 1])],
                           sig_start(a, stack[depth - 1]));
out:
    free(stack);
    return rc;
}

int ferry_sql_analyze(const char *sql, size_t len, const ferry_sql_table *tables,
                      size_t n_tables, ferry_sql_analysis *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    out->understood = true;
    parser p = {out, tables, n_tables, NULL, 0, 0, 0};
    size_t off;
    int rc = ferry_sql_tokenize(sql, len, &out->toks, &off, err);
    if (rc)
        return rc;
    size_t n_sig = 0; /* the arrays hold the significant tokens only (not white space) */
    for (size_t i = 0; i < out->toks.n; i++)
        n_sig += ferry_tok_significant(&out->toks.v[i]);
    out->sig = malloc((n_sig + 1) * sizeof *out->sig);
    out->match = malloc((n_sig + 1) * sizeof *out->match);
    if (!out->sig || !out->match)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory analysing SQL");
    for (size_t i = 0; i < out->toks.n; i++)
        if (ferry_tok_significant(&out->toks.v[i]))
            out->sig[out->n_sig++] = i;
    rc = match_brackets(out, err);
    if (rc)
        return rc;
    out->kind = FERRY_STMT_OTHER;
    if (memchr(sql, 0, len)) { /* rewritten queries are C strings */
        not_understood(&p, SIZE_MAX, "NUL byte in the query");
        return FERRY_OK;
    }
    if (!out->n_sig) {
        not_understood(&p, 0, "empty query");
        return FERRY_OK;
    }
    for (size_t i = 0; i < out->n_sig; i++) {
        if (sig_kind(out, i) == FERRY_TOK_ERROR) {
            not_understood(&p, i, "unrecognized token");
            break;
        }
        /* a '$' that did not open a complete heredoc could pair with a '$' in text a rewrite
         * adds and swallow it: such queries are not rewritten */
        if (sig_kind(out, i) != FERRY_TOK_HEREDOC && out->toks.text[sig_start(out, i)] == '$') {
            not_understood(&p, i, "'$' outside a heredoc");
            break;
        }
    }
    size_t first = 0;
    while (first < out->n_sig && sig_kind(out, first) == FERRY_TOK_LPAREN)
        first++;
    if (sig_kw(out, 0, "explain") || sig_kw(out, 0, "describe") || sig_kw(out, 0, "desc"))
        out->kind = FERRY_STMT_EXPLAIN;
    else if (sig_kw(out, 0, "insert"))
        out->kind = FERRY_STMT_INSERT;
    else if (sig_kw(out, 0, "with"))
        out->kind = FERRY_STMT_WITH_SELECT;
    else if (sig_kw(out, first, "select") || sig_kw(out, first, "with"))
        out->kind = FERRY_STMT_SELECT;
    if (out->kind != FERRY_STMT_SELECT && out->kind != FERRY_STMT_WITH_SELECT) {
        not_understood(&p, 0, "not a SELECT statement (%s)", ferry_stmt_kind_name(out->kind));
        return FERRY_OK;
    }
    if (!out->understood)
        return FERRY_OK;
    size_t hi = out->n_sig;
    statement_tail(&p, &hi);
    if (hi)
        out->body = (ferry_span){0, sig_end(out, hi - 1)};
    if (out->understood)
        parse_query(&p, 0, hi, NONE, false);
    if (out->understood && !p.oom)
        unrecognised_sources(&p);
    if (out->understood && !p.oom)
        tenant_filters(&p);
    for (size_t c = 0; c < p.n_ctes; c++)
        free(p.ctes[c]);
    free(p.ctes);
    if (p.oom)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory analysing SQL");
    return FERRY_OK;
}

void ferry_sql_analysis_free(ferry_sql_analysis *a)
{
    ferry_toks_free(&a->toks);
    free(a->sig);
    free(a->match);
    free(a->levels);
    for (size_t k = 0; k < a->n_refs; k++) {
        free(a->refs[k].qualifier);
        free(a->refs[k].tenant);
        for (size_t t = 0; t < a->refs[k].n_tenants; t++)
            free(a->refs[k].tenants[t]);
        free(a->refs[k].tenants);
        free(a->refs[k].in_lists);
    }
    free(a->refs);
    free(a->globals);
    free(a->table_functions);
    free(a->format);
    for (size_t k = 0; k < a->n_settings; k++) {
        free(a->settings[k].name);
        free(a->settings[k].value);
    }
    free(a->settings);
    memset(a, 0, sizeof *a);
}

const char *ferry_stmt_kind_name(enum ferry_stmt_kind kind)
{
    switch (kind) {
    case FERRY_STMT_SELECT: return "select";
    case FERRY_STMT_WITH_SELECT: return "with_select";
    case FERRY_STMT_INSERT: return "insert";
    case FERRY_STMT_EXPLAIN: return "explain";
    default: return "other";
    }
}

const char *ferry_clause_name(enum ferry_clause cl)
{
    static const char *const names[FERRY_CL_COUNT] = {
        "WITH",   "SELECT", "FROM",  "PREWHERE", "WHERE",    "GROUP BY", "HAVING", "WINDOW",
        "QUALIFY", "ORDER BY", "LIMIT BY", "LIMIT", "OFFSET", "SETTINGS", "FORMAT"};
    return (unsigned)cl < FERRY_CL_COUNT ? names[cl] : "?";
}

/* Settings that ClickHouse applies only at the initiator (they shape the final query or its
 * serialisation; see docs/routing.md). */
static const char *const initiator_only[] = {
    "select",  "order",         "sort",           "filter",        "limit",
    "offset",  "page",          "additional_result_filter",        "format",
    "output_format", "default_format", "compression", NULL};

const char *const *ferry_sql_initiator_only_settings(void)
{
    return initiator_only;
}

bool ferry_sql_setting_initiator_only(const char *name)
{
    for (const char *const *s = initiator_only; *s; s++)
        if (!strcmp(*s, name))
            return true;
    return false;
}
