/* The tenant scope of a reader bound to tenants (include/ferry/sqlrw.h, ferry_sql_scope_check;
 * docs/security.md): what such a reader may name in a SELECT. Two layers keep other tenants'
 * rows out:
 *   1. this check refuses what could reach data outside the managed tables' slices (table
 *      functions, unmanaged tables, functions that read files, dictionaries or headers,
 *      settings) and every comparison of the tenant column naming a tenant outside the scope,
 *      so such a query gets ACCESS_DENIED rather than a silently empty answer;
 *   2. whatever passes is rewritten with every managed reference restricted to the scope's
 *      slices (rewrite.c, read_set), so even a predicate this check does not understand
 *      (tenant LIKE 'b%', lower(tenant) = ...) can only see the reader's own rows.
 * Pure: works on the analysis' tokens; no I/O. */
#include "sql_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NONE SIZE_MAX
#define FERRY_SQL_NAME_BUF 256 /* identifiers longer than this are never names we compare */

static int deny(ferry_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int deny(ferry_err *err, const char *fmt, ...)
{
    char msg[FERRY_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ferry_err_set(err, FERRY_EACCESS, "%s", msg);
}

static int cmp_str(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

bool ferry_sql_scope_has(const ferry_sql_scope *s, const char *tenant)
{
    return s->n_tenants &&
           bsearch(tenant, s->tenants, s->n_tenants, sizeof *s->tenants, cmp_str) != NULL;
}

/* Settings that would let a bound reader step outside its scope or reach other requests.
 * allow_get_client_http_header: getClientHTTPHeader() would show the router's own credentials
 * toward the shard; replace_running_query: another user's query with the same id would be
 * cancelled; the rest change what the shard allows or how names bind. */
static const char *const refused_settings[] = {
    "allow_get_client_http_header", "replace_running_query", "readonly", "allow_ddl",
    "allow_introspection_functions", "prefer_column_name_to_alias", "enable_analyzer",
    "allow_experimental_analyzer", "additional_result_filter", "log_comment",
    "allow_nondeterministic_mutations", NULL};

bool ferry_sql_setting_refused_scoped(const char *name)
{
    for (const char *const *s = refused_settings; *s; s++)
        if (!strcmp(*s, name))
            return true;
    return false;
}

/* Functions that read beyond the query's tables and the request's own data: files, URLs,
 * dictionaries, Join tables, other tables' metadata, the HTTP headers the shard received (the
 * router's credentials). Compared without case (some are registered case-insensitive). */
static const char *const refused_functions[] = {
    "file", "getClientHTTPHeader", "hasColumnInTable", "hasThreadFuzzer", "joinGet",
    "joinGetOrNull", "getServerSetting", "getMacro", "filesystemAvailable", "filesystemFree",
    "filesystemCapacity", "catboostEvaluate", "evalMLMethod", "modelEvaluate",
    "naiveBayesClassifier", "s3", "url", "remote", "remoteSecure", "input", NULL};

bool ferry_sql_function_refused_scoped(const char *name)
{
    if (!strncasecmp(name, "dict", 4)) /* dictGet*, dictHas, dictIsIn, dictGetHierarchy, ... */
        return true;
    for (const char *const *f = refused_functions; *f; f++)
        if (!strcasecmp(*f, name))
            return true;
    return false;
}

static bool is_ident(const ferry_sql_analysis *a, size_t i)
{
    return i < a->n_sig && (sig_kind(a, i) == FERRY_TOK_WORD || sig_kind(a, i) == FERRY_TOK_QIDENT);
}

/* The identifier's value (unquoted) into buf; "" when it does not fit or is not one. */
static const char *ident(const ferry_sql_analysis *a, size_t i, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!is_ident(a, i))
        return buf;
    size_t n = 0;
    char *v = ferry_tok_value(&a->toks, sig_tok(a, i), &n);
    if (v && n < size && strlen(v) == n)
        memcpy(buf, v, n + 1);
    free(v);
    return buf;
}

/* ---- WITH subqueries: visibility ---- */

/* One `name AS (subquery)` of a level's WITH clause. */
typedef struct cte_def {
    size_t level;
    char name[FERRY_SQL_NAME_BUF];
    size_t body_start, body_end; /* the subquery's bytes, parentheses included */
} cte_def;

typedef struct cte_defs {
    cte_def *v;
    size_t n;
} cte_defs;

/* Every WITH subquery of the statement, in one pass over the levels' WITH clauses. */
static int collect_ctes(const ferry_sql_analysis *a, cte_defs *out, ferry_err *err)
{
    char buf[FERRY_SQL_NAME_BUF];
    size_t cap = 0;
    for (size_t l = 0; l < a->n_levels; l++) {
        const ferry_sql_clause *w = &a->levels[l].cl[FERRY_CL_WITH];
        if (!w->present)
            continue;
        for (size_t i = w->tok_body; i < w->tok_end; i++) {
            if (is_ident(a, i) && sig_kw(a, i + 1, "as") && sig_is(a, i + 2, '(') &&
                a->match[i + 2] != NONE && (i == w->tok_body || sig_is(a, i - 1, ','))) {
                if (out->n == cap) {
                    cap = cap ? 2 * cap : 8;
                    cte_def *v = realloc(out->v, cap * sizeof *v);
                    if (!v)
                        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                    out->v = v;
                }
                cte_def *d = &out->v[out->n++];
                d->level = l;
                snprintf(d->name, sizeof d->name, "%s", ident(a, i, buf, sizeof buf));
                d->body_start = sig_start(a, i + 2);
                d->body_end = sig_end(a, a->match[i + 2]);
            }
            if (sig_open(a, i) && a->match[i] != NONE)
                i = a->match[i];
        }
    }
    return FERRY_OK;
}

/* Whether a WITH subquery called name is visible at byte `at` of level `level`: defined by the
 * level or an enclosing one, and `at` is not inside its own body (WITH is not recursive: there
 * the name is the table). */
static bool cte_visible(const ferry_sql_analysis *a, const cte_defs *defs, size_t level,
                        const char *name, size_t at)
{
    for (size_t k = 0; k < defs->n; k++) {
        const cte_def *d = &defs->v[k];
        if (strcmp(d->name, name) || (at >= d->body_start && at < d->body_end))
            continue;
        for (size_t l = level; l != NONE; l = a->levels[l].parent)
            if (l == d->level)
                return true;
    }
    return false;
}

/* ---- tables ---- */

static bool table_listed(const ferry_sql_scope *s, const char *db, const char *tbl)
{
    for (size_t i = 0; i < s->n_tables; i++) {
        const char *e = s->tables[i], *dot = strchr(e, '.');
        if (dot && (size_t)(dot - e) == strlen(db) && !strncmp(e, db, strlen(db)) &&
            !strcmp(dot + 1, tbl))
            return true;
    }
    return false;
}

/* The [db.]table of a reference: db is the request's database when not written. */
static void ref_names(const ferry_sql_analysis *a, const ferry_sql_ref *r, const char *defdb,
                      char *db, char *tbl, size_t size)
{
    size_t lo = 0, hi = a->n_sig; /* the first significant token at or after name.start */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sig_start(a, mid) < r->name.start)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t i = lo;
    if (sig_is(a, i + 1, '.') && is_ident(a, i + 2) && sig_end(a, i + 2) <= r->name.end) {
        ident(a, i, db, size);
        ident(a, i + 2, tbl, size);
    } else {
        snprintf(db, size, "%s", defdb);
        ident(a, i, tbl, size);
    }
}

/* ---- literals compared with the tenant column ---- */

/* Words that take a parenthesised expression without being a function call. */
static const char *const not_function[] = {
    "where", "prewhere", "and", "or", "not", "on", "having", "when", "then", "else", "select",
    "by", "in", "as", "qualify", "xor", "case", "from", "join", "using", "with", "distinct",
    "all", "any", "exists", "interval", "between", "like", "ilike", "is", "global", NULL};

/* Whether the bracket at open is a function call's argument list. */
static bool is_call(const ferry_sql_analysis *a, size_t open)
{
    if (!open || sig_kind(a, open) != FERRY_TOK_LPAREN || !is_ident(a, open - 1))
        return false;
    for (const char *const *w = not_function; *w; w++)
        if (sig_kw(a, open - 1, *w))
            return false;
    return true;
}

static bool comparison_op(const ferry_sql_analysis *a, size_t i);

/* Whether a significant token ends an operand: the statement's end, a closing bracket, a comma,
 * a semicolon, a word (AND, OR, THEN, a clause keyword ...) or a comparison (the left operand
 * of `'x' = tenant`; comparisons chain left to right). Another operator, an opening bracket, a
 * dot or a literal right after it means the operand is an expression. */
static bool operand_ends(const ferry_sql_analysis *a, size_t i)
{
    if (i >= a->n_sig)
        return true;
    if (comparison_op(a, i))
        return true;
    switch (sig_kind(a, i)) {
    case FERRY_TOK_RPAREN:
    case FERRY_TOK_RBRACKET:
    case FERRY_TOK_RBRACE:
    case FERRY_TOK_COMMA:
    case FERRY_TOK_SEMICOLON:
        return true;
    case FERRY_TOK_WORD:
        return !is_call(a, i + 1) && !sig_is(a, i + 1, '.');
    default:
        return false;
    }
}

/* Whether a significant token starts an operand after a boundary (the token before a literal
 * on the left of a comparison). */
static bool operand_starts(const ferry_sql_analysis *a, size_t prev)
{
    if (prev == NONE)
        return true;
    switch (sig_kind(a, prev)) {
    case FERRY_TOK_LPAREN:
    case FERRY_TOK_LBRACKET:
    case FERRY_TOK_COMMA:
        return true;
    case FERRY_TOK_WORD:
        return true; /* WHERE, AND, OR, NOT, ON, WHEN ... */
    default:
        return false;
    }
}

typedef struct checker {
    const ferry_sql_analysis *a;
    const ferry_sql_scope *s;
    ferry_err *err;
    char **aliases;   /* names defined with AS in the statement, sorted */
    size_t n_aliases;
    size_t *enclosing; /* per significant token: the bracket that encloses it, or NONE */
} checker;

static int cmp_strp(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static bool is_alias(const checker *c, const char *name)
{
    return c->n_aliases &&
           bsearch(name, c->aliases, c->n_aliases, sizeof *c->aliases, cmp_str) != NULL;
}

/* A value naming a tenant: in the scope, or refused. */
static int check_value(checker *c, const char *v, size_t n, const char *what)
{
    if (strlen(v) == n && ferry_sql_scope_has(c->s, v))
        return FERRY_OK;
    char shown[160];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < sizeof shown; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch >= 32 && ch < 127 && ch != '\'' && ch != '\\')
            shown[k++] = (char)ch;
        else
            k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", ch);
    }
    shown[k] = '\0';
    return deny(c->err, "tenant '%s' (%s compared with the tenant column) is not one of this "
                "user's tenants", shown, what);
}

/* The value of a literal token (string, heredoc, integer); NULL for other literals (x'..',
 * b'..', floats: they never name a tenant as written). Caller frees. */
static char *literal(const ferry_sql_analysis *a, size_t i, size_t *n)
{
    const ferry_tok *t = sig_tok(a, i);
    const char *p = a->toks.text + t->start;
    if (t->kind == FERRY_TOK_STRING && p[0] == '\'')
        return ferry_tok_value(&a->toks, t, n);
    if (t->kind == FERRY_TOK_NUMBER) {
        *n = t->len;
        return strndup(p, t->len);
    }
    if (t->kind == FERRY_TOK_HEREDOC) { /* $tag$ body $tag$ */
        const char *d = memchr(p + 1, '$', t->len - 1);
        size_t tag = d ? (size_t)(d - p) + 1 : 0;
        if (!tag || t->len < 2 * tag)
            return NULL;
        *n = t->len - 2 * tag;
        return strndup(p + tag, *n);
    }
    return NULL;
}

static bool is_literal(const ferry_sql_analysis *a, size_t i)
{
    enum ferry_tok_kind k = sig_kind(a, i);
    return k == FERRY_TOK_STRING || k == FERRY_TOK_NUMBER || k == FERRY_TOK_HEREDOC;
}

/* {name:Type} at i: its closing brace's index, or NONE. */
static size_t placeholder_end(const ferry_sql_analysis *a, size_t i)
{
    if (sig_kind(a, i) != FERRY_TOK_LBRACE || a->match[i] == NONE)
        return NONE;
    if (!is_ident(a, i + 1) || !sig_is(a, i + 2, ':'))
        return NONE;
    return a->match[i];
}

/* A query parameter's value naming tenants: a single name, or an array text ['a', 'b']. */
static int check_param(checker *c, size_t i)
{
    const ferry_sql_analysis *a = c->a;
    char name[FERRY_SQL_NAME_BUF];
    ident(a, i + 1, name, sizeof name);
    const char *v = NULL;
    for (size_t k = 0; k < c->s->n_params && !v; k++)
        if (!strcmp(c->s->params[k].name, name))
            v = c->s->params[k].value;
    if (!v)
        return deny(c->err, "query parameter {%s} compared with the tenant column has no value "
                    "(param_%s)", name, name);
    size_t n = strlen(v);
    if (!n || v[0] != '[')
        return check_value(c, v, n, "a query parameter");
    if (v[n - 1] != ']')
        return deny(c->err, "query parameter {%s}: expected a tenant name or an array of them",
                    name);
    /* ['acme', 'beta']: tenant names never hold quotes, commas or brackets */
    const char *p = v + 1, *end = v + n - 1;
    while (p < end) {
        size_t l = strcspn(p, ",");
        if (p + l > end)
            l = (size_t)(end - p);
        char item[FERRY_SQL_NAME_BUF];
        size_t a0 = 0, b0 = l;
        while (a0 < b0 && p[a0] == ' ')
            a0++;
        while (b0 > a0 && p[b0 - 1] == ' ')
            b0--;
        if (b0 - a0 >= 2 && p[a0] == '\'' && p[b0 - 1] == '\'') {
            a0++;
            b0--;
        }
        if (b0 - a0 >= sizeof item)
            return deny(c->err, "query parameter {%s}: a value is too long to be a tenant", name);
        memcpy(item, p + a0, b0 - a0);
        item[b0 - a0] = '\0';
        int rc = check_value(c, item, b0 - a0, "a query parameter");
        if (rc)
            return rc;
        p += l + 1;
    }
    return FERRY_OK;
}

/* Every literal and placeholder inside a bracket group [lo, hi] holding only literals,
 * placeholders, commas and brackets (and tuple/array calls); anything else is refused. */
static int check_group(checker *c, size_t lo, size_t hi)
{
    const ferry_sql_analysis *a = c->a;
    for (size_t i = lo + 1; i < hi; i++) {
        size_t pe = placeholder_end(a, i);
        if (pe != NONE) {
            int rc = check_param(c, i);
            if (rc)
                return rc;
            i = pe;
            continue;
        }
        if (is_literal(a, i)) {
            size_t n = 0;
            char *v = literal(a, i, &n);
            int rc = v ? check_value(c, v, n, "a literal")
                       : deny(c->err, "the tenant column is compared with a literal that is not "
                              "a plain string or integer");
            free(v);
            if (rc)
                return rc;
            continue;
        }
        enum ferry_tok_kind k = sig_kind(a, i);
        if (k == FERRY_TOK_COMMA || k == FERRY_TOK_LPAREN || k == FERRY_TOK_RPAREN ||
            k == FERRY_TOK_LBRACKET || k == FERRY_TOK_RBRACKET)
            continue;
        if ((sig_kw(a, i, "tuple") || sig_kw(a, i, "array")) && sig_is(a, i + 1, '('))
            continue;
        return deny(c->err, "the tenant column may only be compared with literals, query "
                    "parameters, columns or subqueries (at byte %zu)", sig_start(a, i));
    }
    return FERRY_OK;
}

/* The operand starting at i compared with the tenant column. */
static int check_operand(checker *c, size_t i)
{
    const ferry_sql_analysis *a = c->a;
    if (i >= a->n_sig)
        return FERRY_OK; /* not valid SQL; the server says so */
    size_t pe = placeholder_end(a, i);
    if (pe != NONE) {
        if (!operand_ends(a, pe + 1))
            goto complex;
        return check_param(c, i);
    }
    if (is_literal(a, i)) {
        if (!operand_ends(a, i + 1))
            goto complex;
        size_t n = 0;
        char *v = literal(a, i, &n);
        int rc = v ? check_value(c, v, n, "a literal")
                   : deny(c->err, "the tenant column is compared with a literal that is not a "
                          "plain string or integer");
        free(v);
        return rc;
    }
    if ((sig_kind(a, i) == FERRY_TOK_LPAREN || sig_kind(a, i) == FERRY_TOK_LBRACKET) &&
        a->match[i] != NONE) {
        if (!operand_ends(a, a->match[i] + 1))
            goto complex;
        if (sig_kw(a, i + 1, "select") || sig_kw(a, i + 1, "with"))
            return FERRY_OK; /* a subquery: restricted like every managed reference */
        return check_group(c, i, a->match[i]);
    }
    if ((sig_kw(a, i, "tuple") || sig_kw(a, i, "array")) && sig_is(a, i + 1, '(') &&
        a->match[i + 1] != NONE) {
        if (!operand_ends(a, a->match[i + 1] + 1))
            goto complex;
        return check_group(c, i + 1, a->match[i + 1]);
    }
    if (is_ident(a, i) && !sig_is(a, i + 1, '(')) {
        size_t j = i;
        while (sig_is(a, j + 1, '.') && is_ident(a, j + 2))
            j += 2;
        char name[FERRY_SQL_NAME_BUF];
        if (j == i && is_alias(c, ident(a, i, name, sizeof name)))
            return deny(c->err, "the tenant column is compared with the alias '%s'; compare it "
                        "with literals", name);
        if (operand_ends(a, j + 1))
            return FERRY_OK; /* another column (a join key) */
    }
complex:
    return deny(c->err, "the tenant column may only be compared with literals, query "
                "parameters, columns or subqueries (at byte %zu)", sig_start(a, i));
}

/* The operand that ends at i (the token before a comparison operator), for `'x' = tenant`. */
static int check_operand_before(checker *c, size_t i)
{
    const ferry_sql_analysis *a = c->a;
    size_t start = i;
    enum ferry_tok_kind k = sig_kind(a, i);
    if ((k == FERRY_TOK_RPAREN || k == FERRY_TOK_RBRACKET || k == FERRY_TOK_RBRACE) &&
        a->match[i] != NONE) {
        start = a->match[i];
        if (k == FERRY_TOK_RPAREN && start > 0 && is_ident(c->a, start - 1))
            start--; /* tuple(...) / array(...) / a function call */
    } else if (is_ident(a, i)) {
        while (start >= 2 && sig_is(a, start - 1, '.') && is_ident(a, start - 2))
            start -= 2;
    }
    if (!operand_starts(a, start ? start - 1 : NONE))
        return deny(c->err, "the tenant column may only be compared with literals, query "
                    "parameters, columns or subqueries (at byte %zu)", sig_start(a, start));
    return check_operand(c, start);
}

static bool comparison_op(const ferry_sql_analysis *a, size_t i)
{
    if (sig_kind(a, i) != FERRY_TOK_OP)
        return false;
    const ferry_tok *t = sig_tok(a, i);
    const char *p = a->toks.text + t->start;
    return (t->len == 1 && p[0] == '=') ||
           (t->len == 2 && (!memcmp(p, "==", 2) || !memcmp(p, "!=", 2) || !memcmp(p, "<>", 2)));
}

/* Functions comparing their arguments with values: every other top-level argument of a call
 * that has the tenant column as an argument is checked as an operand. */
static const char *const comparing_functions[] = {
    "equals", "notEquals", "in", "notIn", "globalIn", "globalNotIn", "has", "hasAny", "hasAll",
    "indexOf", "countEqual", "nullIn", "notNullIn", "globalNullIn", "globalNotNullIn", NULL};

static bool comparing_function(const char *name)
{
    for (const char *const *f = comparing_functions; *f; f++)
        if (!strcasecmp(*f, name))
            return true;
    return false;
}

/* The tenant column reference spanning [lo, hi) (col, or q.col, or db.t.col, or any of them
 * in parentheses). */
static int check_tenant_use(checker *c, size_t lo, size_t hi)
{
    const ferry_sql_analysis *a = c->a;
    /* (tenant) = 'x': the parenthesised column is the operand */
    while (lo > 0 && sig_is(a, lo - 1, '(') && sig_is(a, hi, ')') && a->match[lo - 1] == hi &&
           !is_call(a, lo - 1)) {
        lo--;
        hi++;
    }
    /* col = ..., col [GLOBAL] [NOT] IN ... */
    if (comparison_op(a, hi))
        return check_operand(c, hi + 1);
    size_t j = hi;
    if (sig_kw(a, j, "global"))
        j++;
    if (sig_kw(a, j, "not"))
        j++;
    if (sig_kw(a, j, "in"))
        return check_operand(c, j + 1);
    /* ... = col */
    if (lo >= 2 && comparison_op(a, lo - 1))
        return check_operand_before(c, lo - 2);
    size_t open = c->enclosing[lo];
    if (open == NONE || sig_kind(a, open) != FERRY_TOK_LPAREN)
        return FERRY_OK;
    char fn[FERRY_SQL_NAME_BUF] = "";
    if (is_call(a, open))
        ident(a, open - 1, fn, sizeof fn);
    if (fn[0] && comparing_function(fn)) {
        /* f(..., col, ...): every argument other than the column itself */
        size_t arg = open + 1, close = a->match[open];
        while (arg < close) {
            size_t end = arg;
            while (end < close && !sig_is(a, end, ',')) {
                if (sig_open(a, end) && a->match[end] != NONE)
                    end = a->match[end];
                end++;
            }
            if (!(arg == lo && end == hi)) {
                int rc = check_operand(c, arg);
                if (rc)
                    return rc;
            }
            arg = end + 1;
        }
        return FERRY_OK;
    }
    if (fn[0] && strcasecmp(fn, "tuple"))
        return FERRY_OK; /* an argument of another function: the restriction keeps it inside */
    /* (tenant, x) compared: refused rather than matched element by element */
    size_t close = a->match[open], start = fn[0] ? open - 1 : open;
    bool compared = comparison_op(a, close + 1) || sig_kw(a, close + 1, "in") ||
                    sig_kw(a, close + 1, "not") || sig_kw(a, close + 1, "global") ||
                    (start >= 1 && comparison_op(a, start - 1));
    if (compared)
        return deny(c->err, "a tuple holding the tenant column is compared (at byte %zu); "
                    "compare the tenant column on its own", sig_start(a, open));
    return FERRY_OK;
}

/* The tenant and split columns of the managed tables the statement reads. */
typedef struct cols {
    const char *v[32];
    size_t n;
} cols;

static void cols_add(cols *c, const char *name)
{
    if (!name || !*name)
        return;
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i], name))
            return;
    if (c->n < sizeof c->v / sizeof c->v[0])
        c->v[c->n++] = name;
}

static bool cols_has(const cols *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i], name))
            return true;
    return false;
}

/* An alias named like a tenant or split column, also "x.tenant": the restriction names those
 * columns, and an alias could take their place. */
static bool alias_shadows(const cols *restricted, const char *alias)
{
    if (cols_has(restricted, alias))
        return true;
    const char *dot = strrchr(alias, '.');
    return dot && cols_has(restricted, dot + 1);
}

static int collect_aliases(checker *c, const cols *restricted)
{
    const ferry_sql_analysis *a = c->a;
    char name[FERRY_SQL_NAME_BUF];
    for (size_t i = 0; i + 1 < a->n_sig; i++) {
        if (!sig_kw(a, i, "as") || !is_ident(a, i + 1))
            continue;
        ident(a, i + 1, name, sizeof name);
        if (alias_shadows(restricted, name))
            return deny(c->err, "an alias named '%s' (at byte %zu) would stand for a column the "
                        "tenant restriction reads; choose another name", name,
                        sig_start(a, i + 1));
        char **v = realloc(c->aliases, (c->n_aliases + 1) * sizeof *v);
        if (!v)
            return ferry_err_set(c->err, FERRY_ENOMEM, "out of memory");
        c->aliases = v;
        if (!(v[c->n_aliases] = strdup(name)))
            return ferry_err_set(c->err, FERRY_ENOMEM, "out of memory");
        c->n_aliases++;
    }
    if (c->n_aliases)
        qsort(c->aliases, c->n_aliases, sizeof *c->aliases, cmp_strp);
    return FERRY_OK;
}

/* Per significant token, the bracket that directly encloses it (one pass). */
static int compute_enclosing(checker *c)
{
    const ferry_sql_analysis *a = c->a;
    c->enclosing = malloc((a->n_sig + 1) * sizeof *c->enclosing);
    size_t *stack = malloc((a->n_sig + 1) * sizeof *stack);
    if (!c->enclosing || !stack) {
        free(stack);
        return ferry_err_set(c->err, FERRY_ENOMEM, "out of memory");
    }
    size_t depth = 0;
    for (size_t i = 0; i < a->n_sig; i++) {
        enum ferry_tok_kind k = sig_kind(a, i);
        bool close = k == FERRY_TOK_RPAREN || k == FERRY_TOK_RBRACKET || k == FERRY_TOK_RBRACE;
        if (close && depth)
            depth--;
        c->enclosing[i] = depth ? stack[depth - 1] : NONE;
        if (sig_open(a, i))
            stack[depth++] = i;
    }
    free(stack);
    return FERRY_OK;
}

int ferry_sql_scope_check(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                          size_t n_tables, const ferry_sql_scope *scope, ferry_err *err)
{
    checker c = {a, scope, err, NULL, 0, NULL};
    cte_defs ctes = {NULL, 0};
    cols tenant_cols = {{0}, 0}, restricted = {{0}, 0};
    const char *defdb = scope->database && *scope->database ? scope->database : "default";
    char db[FERRY_SQL_NAME_BUF], tbl[FERRY_SQL_NAME_BUF], name[FERRY_SQL_NAME_BUF];
    int rc = FERRY_OK;
    if (!a->understood) {
        rc = deny(err, "the statement cannot be checked against this user's tenants: %s",
                  a->why);
        goto out;
    }
    for (size_t i = 0; i < a->n_settings; i++)
        if (ferry_sql_setting_refused_scoped(a->settings[i].name)) {
            rc = deny(err, "the setting %s is not allowed for users bound to tenants",
                      a->settings[i].name);
            goto out;
        }
    rc = collect_ctes(a, &ctes, err);
    if (rc)
        goto out;
    if (a->n_table_functions) {
        ferry_span f = a->table_functions[0];
        rc = deny(err, "the table function %.*s is not allowed for users bound to tenants "
                  "(they read the tables ferry manages)",
                  (int)(f.end - f.start > 64 ? 64 : f.end - f.start), a->toks.text + f.start);
        goto out;
    }
    for (size_t k = 0; k < a->n_refs; k++) {
        const ferry_sql_ref *r = &a->refs[k];
        ref_names(a, r, defdb, db, tbl, sizeof db);
        if (r->table >= 0) {
            const ferry_sql_table *t = &tables[r->table];
            if (r->tenant && !ferry_sql_scope_has(scope, r->tenant)) {
                rc = deny(err, "table %s holds tenant '%s', which is not one of this user's "
                          "tenants", tbl, r->tenant);
                goto out;
            }
            if (t->layout == FERRY_LAYOUT_SHARED)
                cols_add(&tenant_cols, t->tenant_column);
            cols_add(&restricted, t->tenant_column);
            cols_add(&restricted, t->split_column);
            continue;
        }
        if (r->cte && cte_visible(a, &ctes, r->level, tbl, r->name.start))
            continue;
        bool managed_name = false;
        for (size_t t = 0; t < n_tables && !managed_name; t++)
            managed_name = tables[t].name && !strcmp(tables[t].name, tbl);
        if (r->cte && managed_name) {
            rc = deny(err, "%s is read as a WITH subquery where none of that name is visible "
                      "(at byte %zu)", tbl, r->name.start);
            goto out;
        }
        if (!table_listed(scope, db, tbl)) {
            rc = deny(err, "table %s.%s is not a table ferry manages; users bound to tenants "
                      "read managed tables and the tables their user lists (ferry user "
                      "set-limits --tables)", db, tbl);
            goto out;
        }
    }
    rc = collect_aliases(&c, &restricted);
    if (!rc)
        rc = compute_enclosing(&c);
    if (rc)
        goto out;
    for (size_t i = 0; i < a->n_sig; i++) {
        if (!is_ident(a, i))
            continue;
        bool call = sig_is(a, i + 1, '(') && !(i > 0 && sig_is(a, i - 1, '.'));
        if (call && sig_kind(a, i) == FERRY_TOK_WORD &&
            ferry_sql_function_refused_scoped(ident(a, i, name, sizeof name))) {
            rc = deny(err, "the function %s is not allowed for users bound to tenants", name);
            goto out;
        }
        /* x IN table (a table reference the clause analysis does not list) */
        if (sig_kw(a, i, "in") && is_ident(a, i + 1) && !sig_is(a, i + 2, '(')) {
            size_t t = i + 1;
            bool qualified = sig_is(a, i + 2, '.') && is_ident(a, i + 3);
            if (qualified) {
                ident(a, t, db, sizeof db);
                ident(a, t + 2, tbl, sizeof tbl);
            } else {
                snprintf(db, sizeof db, "%s", defdb);
                ident(a, t, tbl, sizeof tbl);
            }
            if (!(!qualified && is_alias(&c, tbl)) && !table_listed(scope, db, tbl) &&
                !(!qualified && cte_visible(a, &ctes, 0, tbl, sig_start(a, t)))) {
                rc = deny(err, "`IN %s` reads a table; users bound to tenants read managed "
                          "tables and the tables their user lists", tbl);
                goto out;
            }
        }
        if (call || (i > 0 && sig_kw(a, i - 1, "as")))
            continue;
        if (!cols_has(&tenant_cols, ident(a, i, name, sizeof name)))
            continue;
        /* a tenant column reference: col, q.col, db.t.col (the column is the last part) */
        if (sig_is(a, i + 1, '.'))
            continue;
        size_t lo = i;
        while (lo >= 2 && sig_is(a, lo - 1, '.') && is_ident(a, lo - 2))
            lo -= 2;
        rc = check_tenant_use(&c, lo, i + 1);
        if (rc)
            goto out;
    }
out:
    for (size_t i = 0; i < c.n_aliases; i++)
        free(c.aliases[i]);
    free(c.aliases);
    free(c.enclosing);
    free(ctes.v);
    return rc;
}
