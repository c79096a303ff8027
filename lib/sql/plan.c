/* Distributed read plans (pure): decides how a query over several servers is answered and
 * writes the per-server queries and the initiator's query. Classification (docs/routing.md):
 *   SINGLE     one server serves everything the query reads: its rewritten query, forwarded
 *   ROWS       no aggregation, one managed table, no joins: union of per-server rows (ORDER BY
 *              keys added as columns, LIMIT pushed as offset+n), initiator sorts and limits
 *   AGGREGATE  mergeable aggregates grouped by plain keys: per-server -State columns, the
 *              initiator -Merge's them, then HAVING / ORDER BY / LIMIT
 *   GATHER     anything else: per-server rows of each managed reference (restricted to its
 *              slices), the initiator runs the original query over them
 * When unsure, GATHER. */
#include "sql_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Aggregate functions (base names, without combinators). Used to detect aggregation: a query
 * calling one of these is never answered as plain rows. */
static const char *const aggregate_names[] = {
    "count", "sum", "min", "max", "avg", "any", "anyLast", "anyHeavy", "argMin", "argMax",
    "uniq", "uniqExact", "uniqCombined", "uniqCombined64", "uniqHLL12", "uniqTheta", "uniqUpTo",
    "groupArray", "groupUniqArray", "groupArraySample", "groupArrayInsertAt", "groupArrayMovingSum",
    "groupArrayMovingAvg", "groupArraySorted", "groupArrayLast", "groupBitAnd", "groupBitOr",
    "groupBitXor", "groupBitmap", "groupBitmapAnd", "groupBitmapOr", "groupBitmapXor",
    "groupConcat", "quantile", "quantiles", "quantileExact", "quantilesExact", "quantileTiming",
    "quantilesTiming", "quantileTDigest", "quantilesTDigest", "quantileDeterministic",
    "quantileExactWeighted", "quantileBFloat16", "quantileDD", "quantileGK", "quantileExactLow",
    "quantileExactHigh", "quantileInterpolatedWeighted", "quantileTimingWeighted",
    "quantileTDigestWeighted", "quantilesExactWeighted", "median", "medianExact", "medianTiming",
    "medianTDigest", "medianDeterministic", "medianBFloat16", "stddevPop", "stddevSamp",
    "varPop", "varSamp", "covarPop", "covarSamp", "corr", "skewPop", "skewSamp", "kurtPop",
    "kurtSamp", "topK", "topKWeighted", "sumWithOverflow", "sumKahan", "sumMap", "minMap",
    "maxMap", "avgWeighted", "entropy", "simpleLinearRegression", "stochasticLinearRegression",
    "stochasticLogisticRegression", "histogram", "windowFunnel", "retention", "sequenceMatch",
    "sequenceCount", "uniqArray", "countEqual_never", "boundingRatio", "rankCorr",
    "mannWhitneyUTest", "studentTTest", "welchTTest", "meanZTest", "cramersV", "theilsU",
    "contingency", "maxIntersections", "maxIntersectionsPosition", "deltaSum",
    "deltaSumTimestamp", "exponentialMovingAverage", "intervalLengthSum", "sparkbar",
    "largestTriangleThreeBuckets", "first_value", "last_value", "any_value", "anyRespectNulls",
    "singleValueOrNull", "categoricalInformationValue", "approx_top_k", "approx_top_sum",
    "nothing", "flameGraph", "analysisOfVariance", "kolmogorovSmirnovTest", "distinctDynamicTypes",
    "distinctJSONPaths", "distinctJSONPathsAndTypes", "estimateCompressionRatio", "timeSeriesGroupArray",
    "row_number", "rank", "dense_rank", "lag", "lead", "lagInFrame", "leadInFrame", "nth_value",
    "ntile", "percent_rank", "cume_dist", NULL};

/* Aggregates whose -State / -Merge give the same answer as on one server. */
static const char *const mergeable_names[] = {
    "count", "sum", "min", "max", "avg", "any", "anyLast", "argMin", "argMax", "uniq",
    "uniqExact", "uniqCombined", "uniqCombined64", "uniqHLL12", "groupArray", "groupUniqArray",
    "groupBitAnd", "groupBitOr", "groupBitXor", "quantile", "quantiles", "quantileExact",
    "quantilesExact", "quantileTiming", "quantileTDigest", "quantileDeterministic",
    "quantileExactWeighted", "median", "medianExact", "stddevPop", "stddevSamp", "varPop",
    "varSamp", "covarPop", "covarSamp", "corr", "topK", "sumMap", "minMap", "maxMap",
    "avgWeighted", NULL};

static const char *const combinators[] = {"If", "Array", "Map", "ForEach", "OrNull",
                                          "OrDefault", "Distinct", "State", "Merge",
                                          "MergeState", "Resample", "ArgMin", "ArgMax", NULL};

static bool in_list(const char *s, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (strlen(*list) == n && !strncmp(*list, s, n))
            return true;
    return false;
}

static bool in_list_ci(const char *s, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (strlen(*list) == n && !strncasecmp(*list, s, n))
            return true;
    return false;
}

/* Whether name[0..n) is an aggregate; *plain_if: only the If combinator (or none) and the base
 * is mergeable. */
static bool aggregate_name(const char *name, size_t n, bool *mergeable)
{
    *mergeable = false;
    if (in_list(name, n, aggregate_names) || in_list_ci(name, n, aggregate_names)) {
        *mergeable = in_list(name, n, mergeable_names);
        return true;
    }
    /* strip combinators from the end */
    size_t len = n;
    bool only_if = true;
    for (int guard = 0; guard < 4; guard++) {
        bool stripped = false;
        for (const char *const *c = combinators; *c; c++) {
            size_t cl = strlen(*c);
            if (len > cl && !strncmp(name + len - cl, *c, cl)) {
                len -= cl;
                stripped = true;
                if (strcmp(*c, "If"))
                    only_if = false;
                break;
            }
        }
        if (!stripped)
            break;
        if (in_list(name, len, aggregate_names)) {
            *mergeable = only_if && len + 2 == n && in_list(name, len, mergeable_names);
            return true;
        }
    }
    return false;
}

typedef struct agg_call {
    size_t name_tok;     /* significant index of the function name */
    size_t params_lp;    /* '(' of parameters, or SIZE_MAX */
    size_t args_lp;      /* '(' of arguments */
    bool mergeable;
    int state;           /* index of the state column */
} agg_call;

typedef struct agg_calls {
    agg_call *v;
    size_t n;
} agg_calls;

typedef struct planner {
    const ferry_sql_analysis *a;
    const ferry_sql_level *L;
    char why[200];
    bool gather;
} planner;

static void to_gather(planner *p, const char *why)
{
    if (!p->gather) {
        p->gather = true;
        snprintf(p->why, sizeof p->why, "%s", why);
    }
}

/* Finds aggregate calls in [lo, hi) (outside subqueries). */
static int find_aggs(planner *p, size_t lo, size_t hi, agg_calls *out, bool *any_agg)
{
    const ferry_sql_analysis *a = p->a;
    for (size_t i = lo; i < hi; i++) {
        if (sig_kind(a, i) == FERRY_TOK_LPAREN &&
            (sig_kw(a, i + 1, "select") || sig_kw(a, i + 1, "with"))) {
            i = a->match[i];
            continue;
        }
        if (sig_kw(a, i, "over"))
            to_gather(p, "window function");
        if (sig_kind(a, i) != FERRY_TOK_WORD || !sig_is(a, i + 1, '(') ||
            (i > 0 && sig_kind(a, i - 1) == FERRY_TOK_DOT))
            continue;
        bool mergeable;
        const ferry_tok *t = sig_tok(a, i);
        if (!aggregate_name(a->toks.text + t->start, t->len, &mergeable))
            continue;
        *any_agg = true;
        agg_call c = {i, SIZE_MAX, i + 1, mergeable, -1};
        if (sig_is(a, a->match[i + 1] + 1, '(')) {
            c.params_lp = i + 1;
            c.args_lp = a->match[i + 1] + 1;
        }
        size_t args_end = a->match[c.args_lp];
        /* nested aggregates, DISTINCT, or a window over it: not mergeable here */
        bool inner = false;
        agg_calls none = {0};
        planner sub = *p;
        find_aggs(&sub, c.args_lp + 1, args_end, &none, &inner);
        free(none.v);
        if (inner || sig_kw(a, c.args_lp + 1, "distinct") || sig_kw(a, args_end + 1, "over"))
            c.mergeable = false;
        if (sig_kw(a, args_end + 1, "over"))
            to_gather(p, "window function");
        agg_call *v = realloc(out->v, (out->n + 1) * sizeof *v);
        if (!v)
            return FERRY_ENOMEM;
        out->v = v;
        out->v[out->n++] = c;
        i = args_end;
    }
    return FERRY_OK;
}

/* ---- text helpers ---- */

static int put_range(const ferry_sql_analysis *a, size_t lo, size_t hi, ferry_buf *out)
{
    if (lo >= hi)
        return FERRY_OK;
    return ferry_buf_append(out, a->toks.text + sig_start(a, lo), sig_end(a, hi - 1) - sig_start(a, lo));
}

/* Splits [lo, hi) at depth-0 commas: returns the count, items in starts/ends. */
static size_t split_commas(const ferry_sql_analysis *a, size_t lo, size_t hi, size_t *starts,
                           size_t *ends, size_t max)
{
    size_t n = 0, s = lo;
    for (size_t i = lo; i <= hi; i++) {
        if (i < hi && !sig_is(a, i, ',')) {
            enum ferry_tok_kind k = sig_kind(a, i);
            if (k == FERRY_TOK_LPAREN || k == FERRY_TOK_LBRACKET || k == FERRY_TOK_LBRACE)
                i = a->match[i];
            continue;
        }
        if (n < max) {
            starts[n] = s;
            ends[n] = i;
        }
        n++;
        s = i + 1;
    }
    return n;
}

#define MAX_ITEMS 256

/* ---- AGGREGATE ---- */

typedef struct agg_ctx {
    planner *p;
    const ferry_sql_analysis *a;
    char *keys[MAX_ITEMS];      /* GROUP BY identifiers */
    size_t n_keys;
    char *aliases[MAX_ITEMS];   /* SELECT item aliases */
    bool alias_is_key[MAX_ITEMS];
    size_t n_aliases;
    agg_calls calls;
    char **state_text;          /* per distinct aggregate call: its text, for dedup */
    size_t n_states;
} agg_ctx;

static const char *const expr_words[] = {
    "and", "or", "not", "in", "is", "null", "like", "ilike", "asc", "desc", "ascending",
    "descending", "nulls", "first", "last", "collate", "between", "case", "when", "then", "else",
    "end", "true", "false", "as", "interval", "second", "minute", "hour", "day", "week", "month",
    "quarter", "year", NULL};

static bool name_in(char *const *v, size_t n, const char *s)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(v[k], s))
            return true;
    return false;
}

/* The identifiers of [lo, hi) outside aggregate calls must be keys or SELECT aliases. */
static bool only_keys_outside(agg_ctx *c, size_t lo, size_t hi, bool allow_aliases)
{
    const ferry_sql_analysis *a = c->a;
    for (size_t i = lo; i < hi; i++) {
        bool skip = false;
        for (size_t k = 0; k < c->calls.n; k++)
            if (c->calls.v[k].name_tok == i) {
                i = a->match[c->calls.v[k].args_lp];
                skip = true;
                break;
            }
        if (skip)
            continue;
        enum ferry_tok_kind kind = sig_kind(a, i);
        if (kind == FERRY_TOK_LPAREN && (sig_kw(a, i + 1, "select") || sig_kw(a, i + 1, "with")))
            return false;
        if (kind == FERRY_TOK_DOT)
            return false;
        if (kind != FERRY_TOK_WORD && kind != FERRY_TOK_QIDENT)
            continue;
        if (kind == FERRY_TOK_WORD && sig_is(a, i + 1, '('))
            continue; /* a function name */
        if (kind == FERRY_TOK_WORD) {
            const ferry_tok *t = sig_tok(a, i);
            if (in_list_ci(a->toks.text + t->start, t->len, expr_words))
                continue;
        }
        if (i > lo && sig_kw(a, i - 1, "as"))
            continue; /* the item's alias */
        char *v = ferry_tok_value(&a->toks, sig_tok(a, i), NULL);
        bool ok = v && (name_in(c->keys, c->n_keys, v) ||
                        (allow_aliases && name_in(c->aliases, c->n_aliases, v)));
        free(v);
        if (!ok)
            return false;
    }
    return true;
}

/* Writes [lo, hi) with aggregate calls replaced by their -Merge over the state columns. */
static int put_merged(agg_ctx *c, size_t lo, size_t hi, ferry_buf *out)
{
    const ferry_sql_analysis *a = c->a;
    size_t pos = lo;
    for (size_t k = 0; k < c->calls.n; k++) {
        agg_call *call = &c->calls.v[k];
        if (call->name_tok < lo || call->name_tok >= hi)
            continue;
        if (put_range(a, pos, call->name_tok, out))
            return FERRY_ENOMEM;
        if (pos < call->name_tok && sig_end(a, call->name_tok - 1) < sig_start(a, call->name_tok))
            ferry_buf_putc(out, ' ');
        const ferry_tok *t = sig_tok(a, call->name_tok);
        if (ferry_buf_append(out, a->toks.text + t->start, t->len) ||
            ferry_buf_puts(out, "Merge"))
            return FERRY_ENOMEM;
        if (call->params_lp != SIZE_MAX && put_range(a, call->params_lp, a->match[call->params_lp] + 1, out))
            return FERRY_ENOMEM;
        if (ferry_buf_printf(out, "(__ferry_a%d)", call->state))
            return FERRY_ENOMEM;
        pos = a->match[call->args_lp] + 1;
        if (pos < hi && sig_start(a, pos) > sig_end(a, pos - 1))
            ferry_buf_putc(out, ' ');
    }
    return put_range(a, pos, hi, out);
}

/* The text of an aggregate call, normalised (significant tokens joined by one space). */
static char *call_text(const ferry_sql_analysis *a, const agg_call *call)
{
    ferry_buf b = FERRY_BUF_INIT;
    size_t end = a->match[call->args_lp];
    for (size_t i = call->name_tok; i <= end; i++) {
        const ferry_tok *t = sig_tok(a, i);
        if (ferry_buf_append(&b, a->toks.text + t->start, t->len) || ferry_buf_putc(&b, ' ')) {
            ferry_buf_free(&b);
            return NULL;
        }
    }
    return ferry_buf_detach(&b);
}

static void agg_ctx_free(agg_ctx *c)
{
    for (size_t k = 0; k < c->n_keys; k++)
        free(c->keys[k]);
    for (size_t k = 0; k < c->n_aliases; k++)
        free(c->aliases[k]);
    for (size_t k = 0; k < c->n_states; k++)
        free(c->state_text[k]);
    free(c->state_text);
    free(c->calls.v);
}

/* The alias of a SELECT item [lo, hi): `expr AS name` -> index of name, else SIZE_MAX. */
static size_t item_alias(const ferry_sql_analysis *a, size_t lo, size_t hi)
{
    if (hi >= lo + 3 && sig_kw(a, hi - 2, "as") &&
        (sig_kind(a, hi - 1) == FERRY_TOK_WORD || sig_kind(a, hi - 1) == FERRY_TOK_QIDENT))
        return hi - 1;
    return SIZE_MAX;
}

/* Builds the AGGREGATE plan's per-server edits (on top of the server edits) and the initiator
 * query; returns false (with p->gather) when the query does not fit. */
static int plan_aggregate(planner *p, agg_ctx *c, sql_edits *server_extra, ferry_buf *init)
{
    const ferry_sql_analysis *a = p->a;
    const ferry_sql_level *L = p->L;
    size_t starts[MAX_ITEMS], ends[MAX_ITEMS];
    int rc = FERRY_OK;
    /* keys */
    const ferry_sql_clause *gb = &L->cl[FERRY_CL_GROUP_BY];
    if (gb->present) {
        size_t n = split_commas(a, gb->tok_body, gb->tok_end, starts, ends, MAX_ITEMS);
        if (n > MAX_ITEMS) {
            to_gather(p, "too many GROUP BY keys");
            return FERRY_OK;
        }
        for (size_t k = 0; k < n; k++) {
            if (ends[k] != starts[k] + 1 || (sig_kind(a, starts[k]) != FERRY_TOK_WORD &&
                                             sig_kind(a, starts[k]) != FERRY_TOK_QIDENT)) {
                to_gather(p, "GROUP BY key is not a plain column or alias");
                return FERRY_OK;
            }
            c->keys[c->n_keys] = ferry_tok_value(&a->toks, sig_tok(a, starts[k]), NULL);
            if (!c->keys[c->n_keys++])
                return FERRY_ENOMEM;
        }
    }
    /* SELECT items */
    const ferry_sql_clause *sel = &L->cl[FERRY_CL_SELECT];
    size_t n_items = split_commas(a, sel->tok_body, sel->tok_end, starts, ends, MAX_ITEMS);
    if (n_items > MAX_ITEMS) {
        to_gather(p, "too many SELECT items");
        return FERRY_OK;
    }
    for (size_t k = 0; k < n_items; k++) {
        size_t al = item_alias(a, starts[k], ends[k]);
        if (al == SIZE_MAX)
            continue;
        char *v = ferry_tok_value(&a->toks, sig_tok(a, al), NULL);
        if (!v)
            return FERRY_ENOMEM;
        c->alias_is_key[c->n_aliases] = name_in(c->keys, c->n_keys, v);
        c->aliases[c->n_aliases++] = v;
    }
    /* aggregates in SELECT, HAVING, ORDER BY, LIMIT BY */
    static const int agg_clauses[] = {FERRY_CL_SELECT, FERRY_CL_HAVING, FERRY_CL_ORDER_BY,
                                      FERRY_CL_LIMIT_BY};
    bool any = false;
    for (size_t k = 0; k < sizeof agg_clauses / sizeof agg_clauses[0]; k++)
        if (L->cl[agg_clauses[k]].present &&
            (rc = find_aggs(p, L->cl[agg_clauses[k]].tok_body, L->cl[agg_clauses[k]].tok_end,
                            &c->calls, &any)))
            return rc;
    for (size_t k = 0; k < c->calls.n; k++)
        if (!c->calls.v[k].mergeable) {
            to_gather(p, "an aggregate without an exact -State/-Merge split");
            return FERRY_OK;
        }
    /* the non-key aliases must not be used by WHERE / PREWHERE / aggregate arguments (the
     * servers' SELECT no longer defines them) */
    for (int cl = FERRY_CL_PREWHERE; cl <= FERRY_CL_WHERE; cl++)
        if (L->cl[cl].present)
            for (size_t i = L->cl[cl].tok_body; i < L->cl[cl].tok_end; i++)
                if (sig_kind(a, i) == FERRY_TOK_WORD || sig_kind(a, i) == FERRY_TOK_QIDENT) {
                    char *v = ferry_tok_value(&a->toks, sig_tok(a, i), NULL);
                    for (size_t x = 0; v && x < c->n_aliases; x++)
                        if (!c->alias_is_key[x] && !strcmp(v, c->aliases[x]))
                            to_gather(p, "WHERE uses a SELECT alias");
                    free(v);
                }
    for (size_t k = 0; k < c->calls.n; k++) {
        agg_call *call = &c->calls.v[k];
        for (size_t i = call->args_lp; i < a->match[call->args_lp]; i++)
            if (sig_kind(a, i) == FERRY_TOK_WORD || sig_kind(a, i) == FERRY_TOK_QIDENT) {
                char *v = ferry_tok_value(&a->toks, sig_tok(a, i), NULL);
                for (size_t x = 0; v && x < c->n_aliases; x++)
                    if (!strcmp(v, c->aliases[x]))
                        to_gather(p, "an aggregate argument uses a SELECT alias");
                free(v);
            }
    }
    /* every item: a key, a key alias definition, or an expression of aggregates and keys */
    for (size_t k = 0; k < n_items; k++) {
        size_t al = item_alias(a, starts[k], ends[k]);
        size_t expr_end = al == SIZE_MAX ? ends[k] : al - 1;
        if (al != SIZE_MAX) {
            char *v = ferry_tok_value(&a->toks, sig_tok(a, al), NULL);
            bool key = v && name_in(c->keys, c->n_keys, v);
            free(v);
            if (key)
                continue; /* computed on the servers */
        }
        if (sig_is(a, starts[k], '*') || !only_keys_outside(c, starts[k], expr_end, false)) {
            to_gather(p, "a SELECT item is not made of GROUP BY keys and aggregates");
            return FERRY_OK;
        }
    }
    for (int cl = FERRY_CL_HAVING; cl <= FERRY_CL_LIMIT_BY; cl++) {
        if (cl == FERRY_CL_WINDOW || cl == FERRY_CL_QUALIFY || !L->cl[cl].present)
            continue;
        if (!only_keys_outside(c, L->cl[cl].tok_body, L->cl[cl].tok_end, true)) {
            to_gather(p, "HAVING / ORDER BY / LIMIT BY use more than keys and aggregates");
            return FERRY_OK;
        }
    }
    for (size_t g = 0; g < a->n_globals; g++)
        if (a->globals[g].paren.start >= sel->body.start &&
            a->globals[g].paren.end <= sel->body.end) {
            to_gather(p, "GLOBAL subquery in the SELECT list");
            return FERRY_OK;
        }
    if (p->gather)
        return FERRY_OK;
    /* states, deduplicated */
    c->state_text = calloc(c->calls.n + 1, sizeof *c->state_text);
    if (!c->state_text)
        return FERRY_ENOMEM;
    for (size_t k = 0; k < c->calls.n; k++) {
        char *t = call_text(a, &c->calls.v[k]);
        if (!t)
            return FERRY_ENOMEM;
        int found = -1;
        for (size_t s = 0; s < c->n_states; s++)
            if (!strcmp(c->state_text[s], t))
                found = (int)s;
        if (found >= 0) {
            free(t);
            c->calls.v[k].state = found;
        } else {
            c->calls.v[k].state = (int)c->n_states;
            c->state_text[c->n_states++] = t;
        }
    }
    /* per-server SELECT list: keys (as the SELECT defines them), then the states */
    ferry_buf list = FERRY_BUF_INIT;
    size_t written = 0;
    for (size_t q = 0; q < c->n_keys && !rc; q++) {
        bool done = false;
        for (size_t k = 0; k < n_items && !done && !rc; k++) {
            size_t al = item_alias(a, starts[k], ends[k]);
            if (al == SIZE_MAX)
                continue;
            char *v = ferry_tok_value(&a->toks, sig_tok(a, al), NULL);
            if (v && !strcmp(v, c->keys[q])) {
                rc = (written++ && ferry_buf_puts(&list, ", ")) ||
                     put_range(a, starts[k], ends[k], &list);
                done = true;
            }
            free(v);
        }
        if (!done && !rc)
            rc = (written++ && ferry_buf_puts(&list, ", ")) ||
                 ferry_sql_append_ident(c->keys[q], &list);
    }
    for (size_t s = 0; s < c->n_states && !rc; s++) {
        agg_call *call = NULL;
        for (size_t k = 0; k < c->calls.n; k++)
            if (c->calls.v[k].state == (int)s) {
                call = &c->calls.v[k];
                break;
            }
        const ferry_tok *t = sig_tok(a, call->name_tok);
        size_t args_end = a->match[call->args_lp];
        rc = (written++ && ferry_buf_puts(&list, ", ")) ||
             ferry_buf_append(&list, a->toks.text + t->start, t->len) ||
             ferry_buf_puts(&list, "State");
        if (!rc && call->params_lp != SIZE_MAX)
            rc = put_range(a, call->params_lp, a->match[call->params_lp] + 1, &list);
        if (!rc) {
            bool star = args_end == call->args_lp + 2 && sig_is(a, call->args_lp + 1, '*');
            rc = star ? ferry_buf_puts(&list, "()") : put_range(a, call->args_lp, args_end + 1, &list);
        }
        if (!rc)
            rc = ferry_buf_printf(&list, " AS __ferry_a%zu", s);
    }
    if (!rc)
        rc = sql_edits_add_owned(server_extra, sel->body.start, sel->body.end,
                                 ferry_buf_detach(&list));
    ferry_buf_free(&list);
    /* the servers stop after GROUP BY */
    for (int cl = FERRY_CL_HAVING; cl <= FERRY_CL_OFFSET && !rc; cl++)
        if (L->cl[cl].present)
            rc = sql_edits_add(server_extra, sig_end(a, L->cl[cl].tok_kw - 1),
                               L->cl[cl].body.end, "");
    if (rc)
        return FERRY_ENOMEM;
    /* the initiator */
    rc = ferry_buf_puts(init, "SELECT ");
    for (size_t k = 0; k < n_items && !rc; k++) {
        if (k)
            rc = ferry_buf_puts(init, ", ");
        size_t al = item_alias(a, starts[k], ends[k]);
        if (al != SIZE_MAX) {
            char *v = ferry_tok_value(&a->toks, sig_tok(a, al), NULL);
            bool key = v && name_in(c->keys, c->n_keys, v);
            free(v);
            if (key) {
                rc = put_range(a, al, al + 1, init);
                continue;
            }
            rc = put_merged(c, starts[k], ends[k], init);
            continue;
        }
        bool has_call = false;
        for (size_t q = 0; q < c->calls.n; q++)
            has_call |= c->calls.v[q].name_tok >= starts[k] && c->calls.v[q].name_tok < ends[k];
        rc = put_merged(c, starts[k], ends[k], init);
        if (!rc && has_call) {
            /* keep the column name the original expression would have had */
            char *orig = strndup(a->toks.text + sig_start(a, starts[k]),
                                 sig_end(a, ends[k] - 1) - sig_start(a, starts[k]));
            rc = !orig || ferry_buf_puts(init, " AS ") || ferry_sql_ident(orig, init);
            free(orig);
        }
    }
    if (!rc)
        rc = ferry_buf_puts(init, " FROM " FERRY_PLAN_PARTIAL);
    if (!rc && gb->present)
        rc = ferry_buf_puts(init, " GROUP BY ") || put_range(a, gb->tok_body, gb->tok_end, init);
    static const int tail[] = {FERRY_CL_HAVING, FERRY_CL_ORDER_BY, FERRY_CL_LIMIT_BY,
                               FERRY_CL_LIMIT, FERRY_CL_OFFSET};
    for (size_t k = 0; k < sizeof tail / sizeof tail[0] && !rc; k++) {
        const ferry_sql_clause *cl = &L->cl[tail[k]];
        if (!cl->present)
            continue;
        rc = ferry_buf_putc(init, ' ') || put_range(a, cl->tok_kw, cl->tok_body, init) ||
             ferry_buf_putc(init, ' ') || put_merged(c, cl->tok_body, cl->tok_end, init);
    }
    return rc ? FERRY_ENOMEM : FERRY_OK;
}

/* ---- ROWS ---- */

static bool parse_uint(const ferry_sql_analysis *a, size_t i, unsigned long long *v)
{
    if (sig_kind(a, i) != FERRY_TOK_NUMBER)
        return false;
    const ferry_tok *t = sig_tok(a, i);
    unsigned long long x = 0;
    for (size_t k = 0; k < t->len; k++) {
        char ch = a->toks.text[t->start + k];
        if (ch < '0' || ch > '9' || x > 1000000000000ULL)
            return false;
        x = x * 10 + (unsigned)(ch - '0');
    }
    *v = x;
    return true;
}

static int plan_rows(planner *p, sql_edits *server_extra, ferry_buf *init)
{
    const ferry_sql_analysis *a = p->a;
    const ferry_sql_level *L = p->L;
    int rc = FERRY_OK;
    if (L->cl[FERRY_CL_LIMIT_BY].present || L->cl[FERRY_CL_OFFSET].present) {
        to_gather(p, "LIMIT BY / OFFSET clause");
        return FERRY_OK;
    }
    if (sig_kw(a, L->cl[FERRY_CL_SELECT].tok_body, "distinct") ||
        sig_kw(a, L->cl[FERRY_CL_SELECT].tok_body, "top")) {
        to_gather(p, "SELECT DISTINCT / TOP");
        return FERRY_OK;
    }
    unsigned long long limit = 0, offset = 0;
    bool has_limit = false;
    const ferry_sql_clause *lim = &L->cl[FERRY_CL_LIMIT];
    if (lim->present) {
        size_t b = lim->tok_body, n = lim->tok_end - lim->tok_body;
        has_limit = true;
        bool ok = (n == 1 && parse_uint(a, b, &limit)) ||
                  (n == 3 && sig_is(a, b + 1, ',') && parse_uint(a, b, &offset) &&
                   parse_uint(a, b + 2, &limit)) ||
                  (n == 3 && sig_kw(a, b + 1, "offset") && parse_uint(a, b, &limit) &&
                   parse_uint(a, b + 2, &offset));
        if (!ok) {
            to_gather(p, "LIMIT is not a plain number");
            return FERRY_OK;
        }
    }
    /* ORDER BY keys as extra columns */
    ferry_buf extra = FERRY_BUF_INIT, order = FERRY_BUF_INIT, except = FERRY_BUF_INIT;
    const ferry_sql_clause *ob = &L->cl[FERRY_CL_ORDER_BY];
    size_t n_keys = 0;
    if (ob->present) {
        size_t starts[MAX_ITEMS], ends[MAX_ITEMS];
        n_keys = split_commas(a, ob->tok_body, ob->tok_end, starts, ends, MAX_ITEMS);
        if (n_keys > MAX_ITEMS) {
            to_gather(p, "too many ORDER BY keys");
            goto out;
        }
        for (size_t k = 0; k < n_keys && !rc; k++) {
            size_t e = ends[k];
            /* trailing modifiers */
            for (;;) {
                if (e > starts[k] + 1 &&
                    (sig_kw(a, e - 1, "asc") || sig_kw(a, e - 1, "desc") ||
                     sig_kw(a, e - 1, "ascending") || sig_kw(a, e - 1, "descending")))
                    e--;
                else if (e > starts[k] + 2 && sig_kw(a, e - 2, "nulls") &&
                         (sig_kw(a, e - 1, "first") || sig_kw(a, e - 1, "last")))
                    e -= 2;
                else if (e > starts[k] + 2 && sig_kw(a, e - 2, "collate") &&
                         sig_kind(a, e - 1) == FERRY_TOK_STRING)
                    e -= 2;
                else
                    break;
            }
            for (size_t i = starts[k]; i < ends[k]; i++)
                if (sig_kw(a, i, "with") || sig_kw(a, i, "interpolate")) {
                    to_gather(p, "ORDER BY ... WITH FILL / TIES");
                    goto out;
                }
            if (e == starts[k] + 1 && sig_kind(a, starts[k]) == FERRY_TOK_NUMBER) {
                to_gather(p, "positional ORDER BY");
                goto out;
            }
            rc = ferry_buf_puts(&extra, ", ") || put_range(a, starts[k], e, &extra) ||
                 ferry_buf_printf(&extra, " AS __ferry_o%zu", k + 1) ||
                 ferry_buf_printf(&order, "%s__ferry_o%zu", k ? ", " : "", k + 1) ||
                 ferry_buf_printf(&except, "%s__ferry_o%zu", k ? ", " : "", k + 1);
            if (!rc && e < ends[k])
                rc = ferry_buf_putc(&order, ' ') || put_range(a, e, ends[k], &order);
        }
        if (!rc)
            rc = sql_edits_add(server_extra, L->cl[FERRY_CL_SELECT].body.end,
                               L->cl[FERRY_CL_SELECT].body.end, ferry_buf_cstr(&extra));
    }
    if (!rc && has_limit) {
        char num[32];
        snprintf(num, sizeof num, "%llu", limit + offset);
        rc = sql_edits_add(server_extra, lim->body.start, lim->body.end, num);
    }
    if (!rc)
        rc = ferry_buf_puts(init, "SELECT *");
    if (!rc && n_keys)
        rc = ferry_buf_printf(init, " EXCEPT (%s)", ferry_buf_cstr(&except));
    if (!rc)
        rc = ferry_buf_puts(init, " FROM " FERRY_PLAN_PARTIAL);
    if (!rc && n_keys)
        rc = ferry_buf_printf(init, " ORDER BY %s", ferry_buf_cstr(&order));
    if (!rc && has_limit)
        rc = ferry_buf_printf(init, " LIMIT %llu", limit);
    if (!rc && offset)
        rc = ferry_buf_printf(init, " OFFSET %llu", offset);
out:
    ferry_buf_free(&extra);
    ferry_buf_free(&order);
    ferry_buf_free(&except);
    return rc ? FERRY_ENOMEM : FERRY_OK;
}

/* ---- GATHER ---- */

static int plan_gather(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                       const ferry_sql_target *servers, size_t n_servers, ferry_read_plan *out,
                       ferry_err *err)
{
    sql_edits edits = {0};
    ferry_buf b = FERRY_BUF_INIT, restr = FERRY_BUF_INIT;
    int rc = FERRY_OK;
    for (size_t k = 0; k < a->n_refs && !rc; k++) {
        const ferry_sql_ref *r = &a->refs[k];
        if (r->table < 0)
            continue;
        ferry_buf_reset(&b);
        rc = ferry_buf_printf(&b, "{{ferry.rows.%zu}} AS ", k) ||
             ferry_sql_append_ident(r->qualifier, &b);
        if (!rc)
            rc = sql_edits_add(&edits, r->expr.start, r->expr.end, ferry_buf_cstr(&b));
        size_t used = 0;
        for (size_t s = 0; s < n_servers && !rc; s++) {
            bool empty;
            ferry_buf_reset(&restr);
            ferry_buf_reset(&b);
            rc = sql_restriction(a, tables, &servers[s], k, false, &restr, &empty);
            if (rc || empty)
                continue;
            rc = ferry_buf_puts(&b, "SELECT * FROM ") ||
                 sql_local_name(a, tables, &servers[s], k, &b);
            if (!rc && r->modifiers.end > r->modifiers.start)
                rc = ferry_buf_putc(&b, ' ') ||
                     ferry_buf_append(&b, a->toks.text + r->modifiers.start,
                                      r->modifiers.end - r->modifiers.start);
            if (!rc)
                rc = ferry_buf_puts(&b, " WHERE ") || ferry_buf_puts(&b, ferry_buf_cstr(&restr));
            if (rc)
                break;
            ferry_plan_server_query *v =
                realloc(out->queries, (out->n_queries + 1) * sizeof *v);
            if (!v) {
                rc = FERRY_ENOMEM;
                break;
            }
            out->queries = v;
            v[out->n_queries++] = (ferry_plan_server_query){s, (int)k, ferry_buf_detach(&b)};
            used++;
        }
        if (!rc && !used && n_servers) {
            /* nobody serves it: one query that reads nothing, for the shape */
            size_t s = 0;
            ferry_buf_reset(&b);
            rc = ferry_buf_puts(&b, "SELECT * FROM ") ||
                 sql_local_name(a, tables, &servers[s], k, &b) || ferry_buf_puts(&b, " WHERE 0");
            ferry_plan_server_query *v =
                rc ? NULL : realloc(out->queries, (out->n_queries + 1) * sizeof *v);
            if (!v) {
                rc = FERRY_ENOMEM;
                break;
            }
            out->queries = v;
            v[out->n_queries++] = (ferry_plan_server_query){s, (int)k, ferry_buf_detach(&b)};
        }
    }
    ferry_buf_reset(&b);
    if (!rc)
        rc = sql_edits_apply(&edits, a->toks.text, a->body.start, a->body.end, &b);
    if (!rc)
        out->initiator_sql = ferry_buf_detach(&b);
    sql_edits_free(&edits);
    ferry_buf_free(&b);
    ferry_buf_free(&restr);
    if (rc)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory planning the query");
    return FERRY_OK;
}

/* ---- entry ---- */

static int add_query(ferry_read_plan *out, size_t server, char *sql)
{
    if (!sql)
        return FERRY_ENOMEM;
    ferry_plan_server_query *v = realloc(out->queries, (out->n_queries + 1) * sizeof *v);
    if (!v) {
        free(sql);
        return FERRY_ENOMEM;
    }
    out->queries = v;
    v[out->n_queries++] = (ferry_plan_server_query){server, -1, sql};
    return FERRY_OK;
}

static int copy_statement_parts(const ferry_sql_analysis *a, ferry_read_plan *out)
{
    if (a->format && !(out->format = strdup(a->format)))
        return FERRY_ENOMEM;
    if (a->n_settings) {
        out->settings = calloc(a->n_settings, sizeof *out->settings);
        if (!out->settings)
            return FERRY_ENOMEM;
        for (size_t k = 0; k < a->n_settings; k++) {
            out->settings[k].name = strdup(a->settings[k].name);
            out->settings[k].value = strdup(a->settings[k].value);
            out->n_settings++;
            if (!out->settings[k].name || !out->settings[k].value)
                return FERRY_ENOMEM;
        }
    }
    return FERRY_OK;
}

static int copy_globals(const ferry_sql_analysis *a, ferry_read_plan *out)
{
    size_t n = 0;
    for (size_t g = 0; g < a->n_globals; g++)
        n += !a->globals[g].nested;
    if (!n)
        return FERRY_OK;
    out->globals = calloc(n, sizeof *out->globals);
    out->global_sql = calloc(n, sizeof *out->global_sql);
    if (!out->globals || !out->global_sql)
        return FERRY_ENOMEM;
    for (size_t g = 0; g < a->n_globals; g++) {
        if (a->globals[g].nested)
            continue;
        /* the same subquery twice is computed once */
        bool dup = false;
        for (size_t k = 0; k < out->n_globals; k++)
            dup |= !strcmp(out->globals[k].name, a->globals[g].name);
        if (dup)
            continue;
        out->globals[out->n_globals] = a->globals[g];
        out->global_sql[out->n_globals] =
            strndup(a->toks.text + a->globals[g].inner.start,
                    a->globals[g].inner.end - a->globals[g].inner.start);
        if (!out->global_sql[out->n_globals++])
            return FERRY_ENOMEM;
    }
    return FERRY_OK;
}

int ferry_sql_plan(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                   const ferry_sql_target *servers, size_t n_servers, ferry_read_plan *out,
                   ferry_err *err)
{
    memset(out, 0, sizeof *out);
    if (!a->understood)
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "cannot route this query: %s", a->why);
    if (!n_servers)
        return ferry_err_set(err, FERRY_EINVAL, "no servers to route the query to");
    int rc = copy_statement_parts(a, out);
    if (rc)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory planning the query");
    /* which servers serve something the query reads (all references, GLOBAL ones included) */
    size_t serving = 0, the_one = 0;
    for (size_t s = 0; s < n_servers; s++) {
        ferry_sql_target t = servers[s];
        t.materialize_globals = false;
        sql_edits e = {0};
        bool skip;
        rc = sql_server_edits(a, tables, &t, &e, &skip, err);
        sql_edits_free(&e);
        if (rc)
            return rc;
        if (!skip) {
            if (!serving)
                the_one = s;
            serving++;
        }
    }
    if (serving <= 1) {
        out->kind = FERRY_PLAN_SINGLE;
        snprintf(out->why, sizeof out->why, "%s",
                 serving ? "one server serves every slice the query reads"
                         : "no server serves a slice the query reads (the answer is empty)");
        ferry_sql_target t = servers[the_one];
        t.materialize_globals = false;
        sql_edits e = {0};
        ferry_buf b = FERRY_BUF_INIT;
        bool skip;
        rc = sql_server_edits(a, tables, &t, &e, &skip, err);
        if (!rc && sql_edits_apply(&e, a->toks.text, a->body.start, a->body.end, &b))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory planning the query");
        if (!rc && add_query(out, the_one, ferry_buf_detach(&b)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory planning the query");
        sql_edits_free(&e);
        ferry_buf_free(&b);
        return rc;
    }
    /* several servers: classify */
    planner p = {a, &a->levels[0], "", false};
    size_t managed = 0, managed_top = SIZE_MAX;
    for (size_t k = 0; k < a->n_refs; k++)
        if (a->refs[k].table >= 0 && !sql_ref_in_global(a, k)) {
            managed++;
            if (a->refs[k].level == 0 && a->refs[k].first_source)
                managed_top = k;
        }
    const ferry_sql_level *L = p.L;
    if (a->top_union)
        to_gather(&p, "UNION / EXCEPT / INTERSECT at the top");
    else if (managed != 1 || managed_top == SIZE_MAX)
        to_gather(&p, "the managed table is not the only source of the outer SELECT");
    else if (L->n_sources != 1 || L->has_join)
        to_gather(&p, "JOIN");
    else if (L->cl[FERRY_CL_WITH].present)
        to_gather(&p, "WITH clause");
    else if (L->cl[FERRY_CL_WINDOW].present || L->cl[FERRY_CL_QUALIFY].present)
        to_gather(&p, "window functions");
    else if (sig_kw(a, L->cl[FERRY_CL_SELECT].tok_body, "distinct"))
        to_gather(&p, "SELECT DISTINCT");
    for (size_t i = L->sig_start; i < L->sig_end && !p.gather; i++) {
        if (sig_kind(a, i) == FERRY_TOK_LPAREN) {
            if (sig_kw(a, i + 1, "select") || sig_kw(a, i + 1, "with"))
                i = a->match[i];
            continue;
        }
        if ((sig_kw(a, i, "with") && (sig_kw(a, i + 1, "totals") || sig_kw(a, i + 1, "rollup") ||
                                      sig_kw(a, i + 1, "cube"))) ||
            sig_kw(a, i, "grouping") || sig_kw(a, i, "rollup") || sig_kw(a, i, "cube"))
            to_gather(&p, "WITH TOTALS / ROLLUP / CUBE / GROUPING SETS");
        if (sig_kw(a, i, "over"))
            to_gather(&p, "window function");
        if (sig_kw(a, i, "arrayJoin"))
            to_gather(&p, "arrayJoin in an expression");
    }
    sql_edits extra = {0};
    ferry_buf init = FERRY_BUF_INIT;
    agg_ctx ctx = {0};
    ctx.p = &p;
    ctx.a = a;
    if (!p.gather) {
        bool aggregated = L->cl[FERRY_CL_GROUP_BY].present || L->cl[FERRY_CL_HAVING].present;
        agg_calls probe = {0};
        static const int clauses[] = {FERRY_CL_SELECT, FERRY_CL_HAVING, FERRY_CL_ORDER_BY,
                                      FERRY_CL_LIMIT_BY};
        for (size_t k = 0; k < 4 && !rc; k++)
            if (L->cl[clauses[k]].present)
                rc = find_aggs(&p, L->cl[clauses[k]].tok_body, L->cl[clauses[k]].tok_end, &probe,
                               &aggregated);
        free(probe.v);
        if (!rc && !p.gather) {
            if (aggregated) {
                rc = plan_aggregate(&p, &ctx, &extra, &init);
                out->kind = FERRY_PLAN_AGGREGATE;
                snprintf(out->why, sizeof out->why,
                         "aggregates with -State/-Merge forms, grouped by plain keys");
            } else {
                rc = plan_rows(&p, &extra, &init);
                out->kind = FERRY_PLAN_ROWS;
                snprintf(out->why, sizeof out->why, "plain rows from one managed table");
            }
        }
    }
    if (!rc && !p.gather) {
        for (size_t s = 0; s < n_servers && !rc; s++) {
            ferry_sql_target t = servers[s];
            t.materialize_globals = true;
            sql_edits e = {0};
            ferry_buf b = FERRY_BUF_INIT;
            bool skip;
            rc = sql_server_edits(a, tables, &t, &e, &skip, err);
            for (size_t k = 0; k < extra.n && !rc; k++)
                rc = sql_edits_add(&e, extra.v[k].start, extra.v[k].end, extra.v[k].repl);
            if (!rc && !skip) {
                rc = sql_edits_apply(&e, a->toks.text, a->body.start, a->body.end, &b);
                if (!rc)
                    rc = add_query(out, s, ferry_buf_detach(&b));
            }
            sql_edits_free(&e);
            ferry_buf_free(&b);
        }
        if (!rc) {
            out->initiator_sql = ferry_buf_detach(&init);
            rc = copy_globals(a, out);
        }
    } else if (!rc) {
        out->kind = FERRY_PLAN_GATHER;
        snprintf(out->why, sizeof out->why, "%s", p.why);
        rc = plan_gather(a, tables, servers, n_servers, out, err);
    }
    sql_edits_free(&extra);
    ferry_buf_free(&init);
    agg_ctx_free(&ctx);
    if (rc && !err->code)
        ferry_err_set(err, FERRY_ENOMEM, "out of memory planning the query");
    return rc;
}

void ferry_read_plan_free(ferry_read_plan *p)
{
    for (size_t k = 0; k < p->n_queries; k++)
        free(p->queries[k].sql);
    free(p->queries);
    free(p->initiator_sql);
    free(p->format);
    for (size_t k = 0; k < p->n_settings; k++) {
        free(p->settings[k].name);
        free(p->settings[k].value);
    }
    free(p->settings);
    for (size_t k = 0; k < p->n_globals; k++)
        free(p->global_sql[k]);
    free(p->global_sql);
    free(p->globals);
    memset(p, 0, sizeof *p);
}

const char *ferry_plan_kind_name(enum ferry_plan_kind kind)
{
    switch (kind) {
    case FERRY_PLAN_SINGLE: return "single";
    case FERRY_PLAN_ROWS: return "rows";
    case FERRY_PLAN_AGGREGATE: return "aggregate";
    default: return "gather";
    }
}
