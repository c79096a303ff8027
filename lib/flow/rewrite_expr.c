/* `ferry rewrite`'s input checks (pure, no I/O): the user's expressions go into ferry's own
 * INSERT ... SELECT on every server, so each must be one expression over the table's own columns
 * and nothing else (no second statement, no subquery or IN into another table, no function that
 * reads files, URLs or dictionaries). The tokenizer of the read router (sqltok.h) keeps string
 * literals, quoted identifiers and comments apart, so a string 'SELECT' or a column `from` is
 * fine. See include/ferry/rewrite.h. */
#include "ferry/rewrite.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ferry/sqlrw.h"
#include "ferry/sqltok.h"

#define REWRITE_EXPR_MAX 512

/* Words that start a clause or a statement: none belongs in one expression. SELECT and the like
 * would be a subquery reading any table; SETTINGS/FORMAT would change ferry's own statement. */
static const char *const refused_words[] = {
    "SELECT", "WITH", "FROM", "JOIN", "UNION", "EXCEPT", "INTERSECT", "INSERT", "INTO",
    "ALTER", "CREATE", "DROP", "TRUNCATE", "DELETE", "UPDATE", "SYSTEM", "SETTINGS", "FORMAT",
    "PREWHERE", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "QUALIFY", "WINDOW", NULL};

/* The next significant token at or after i, or t->n. */
static size_t next_sig(const ferry_toks *t, size_t i)
{
    while (i < t->n && !ferry_tok_significant(&t->v[i]))
        i++;
    return i;
}

int ferry_rewrite_expr_check(const char *what, const char *expr, ferry_err *err)
{
    ferry_toks t = {0};
    size_t off = 0, len = expr ? strlen(expr) : 0;
    int rc = FERRY_OK, depth = 0;
    if (!len)
        return ferry_err_set(err, FERRY_EINVAL, "%s: the expression is empty", what);
    if (len > REWRITE_EXPR_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "%s: the expression is %zu bytes; at most %d "
                             "(it is journaled with the job)", what, len, REWRITE_EXPR_MAX);
    if ((rc = ferry_sql_tokenize(expr, len, &t, &off, err))) {
        ferry_err_prefix(err, "%s: ", what);
        goto out;
    }
    size_t sig = 0;
    for (size_t i = 0; i < t.n; i++) {
        const ferry_tok *k = &t.v[i];
        if (!ferry_tok_significant(k))
            continue;
        sig++;
        const char *at = expr + k->start;
        switch (k->kind) {
        case FERRY_TOK_SEMICOLON:
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: a ';' at byte %zu: one expression only, "
                               "never a second statement", what, (size_t)k->start);
            goto out;
        case FERRY_TOK_ERROR:
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: unexpected character at byte %zu ('%.*s')",
                               what, (size_t)k->start, (int)k->len, at);
            goto out;
        case FERRY_TOK_LBRACE:
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: a query parameter ({name:Type}) at byte %zu: "
                               "write the value itself", what, (size_t)k->start);
            goto out;
        case FERRY_TOK_HEREDOC:
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: a heredoc at byte %zu: use a '...' string",
                               what, (size_t)k->start);
            goto out;
        case FERRY_TOK_LPAREN:
        case FERRY_TOK_LBRACKET:
            depth++;
            break;
        case FERRY_TOK_RPAREN:
        case FERRY_TOK_RBRACKET:
            if (--depth < 0) {
                rc = ferry_err_set(err, FERRY_EINVAL, "%s: unbalanced '%c' at byte %zu", what,
                                   *at, (size_t)k->start);
                goto out;
            }
            break;
        case FERRY_TOK_WORD: {
            for (const char *const *w = refused_words; *w; w++)
                if (ferry_tok_is_kw(&t, k, *w)) {
                    rc = ferry_err_set(err, FERRY_EINVAL, "%s: '%.*s' at byte %zu: the expression "
                                       "must be one condition or value over the table's own "
                                       "columns (no subquery, no other clause or statement)",
                                       what, (int)k->len, at, (size_t)k->start);
                    goto out;
                }
            size_t nx = next_sig(&t, i + 1);
            bool call = nx < t.n && t.v[nx].kind == FERRY_TOK_LPAREN;
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(k->len < 127 ? k->len : 127), at);
            if (call && ferry_sql_function_refused_scoped(name)) {
                rc = ferry_err_set(err, FERRY_EINVAL, "%s: function %s at byte %zu reads beyond "
                                   "the table (files, URLs, dictionaries, other tables); not "
                                   "allowed in a rewrite", what, name, (size_t)k->start);
                goto out;
            }
            /* x IN t / x NOT IN t / GLOBAL IN t read the table t */
            if (ferry_tok_is_kw(&t, k, "IN") && nx < t.n &&
                (t.v[nx].kind == FERRY_TOK_WORD || t.v[nx].kind == FERRY_TOK_QIDENT)) {
                size_t after = next_sig(&t, nx + 1);
                if (after >= t.n || t.v[after].kind != FERRY_TOK_LPAREN) {
                    rc = ferry_err_set(err, FERRY_EINVAL, "%s: 'IN %.*s' at byte %zu reads another "
                                       "table; list the values: IN (1, 2, 3)", what,
                                       (int)t.v[nx].len, expr + t.v[nx].start, (size_t)k->start);
                    goto out;
                }
            }
            break;
        }
        default:
            break;
        }
    }
    if (!sig)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: the expression is only blanks or comments",
                           what);
    else if (depth)
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: %d bracket%s not closed", what, depth,
                           depth == 1 ? "" : "s");
out:
    ferry_toks_free(&t);
    return rc;
}

int ferry_rewrite_update_parse(const char *text, char *col, size_t colsz, char *expr,
                               size_t exprsz, ferry_err *err)
{
    ferry_toks t = {0};
    size_t off = 0;
    int rc = ferry_sql_tokenize(text, strlen(text), &t, &off, err);
    if (rc) {
        ferry_err_prefix(err, "--update: ");
        goto out;
    }
    size_t c = next_sig(&t, 0), eq = c < t.n ? next_sig(&t, c + 1) : t.n;
    if (c >= t.n || (t.v[c].kind != FERRY_TOK_WORD && t.v[c].kind != FERRY_TOK_QIDENT) ||
        eq >= t.n || t.v[eq].kind != FERRY_TOK_OP || t.v[eq].len != 1 ||
        text[t.v[eq].start] != '=') {
        rc = ferry_err_set(err, FERRY_EINVAL, "--update wants 'column = expression', e.g. "
                           "--update 'country = \\'FR\\'' (got '%s')", text);
        goto out;
    }
    char *name = ferry_tok_value(&t, &t.v[c], NULL);
    if (!name) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    bool bad = !*name || strlen(name) >= colsz;
    for (const char *p = name; *p && !bad; p++)
        bad = !(isalnum((unsigned char)*p) || *p == '_');
    if (bad) {
        rc = ferry_err_set(err, FERRY_EINVAL, "--update: column name '%s' is not a plain column "
                           "name ([A-Za-z0-9_]+)", name);
        free(name);
        goto out;
    }
    snprintf(col, colsz, "%s", name);
    free(name);
    const char *rest = text + t.v[eq].start + 1;
    if (strlen(rest) >= exprsz) {
        rc = ferry_err_set(err, FERRY_EINVAL, "--update: the expression is too long");
        goto out;
    }
    snprintf(expr, exprsz, "%s", rest);
    rc = ferry_rewrite_expr_check("--update", expr, err);
out:
    ferry_toks_free(&t);
    return rc;
}

static bool parse_day(const char *s, size_t n, uint32_t *out)
{
    if (n != 8)
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < 8; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    uint32_t m = v / 100 % 100, d = v % 100;
    if (v / 10000 < 1970 || m < 1 || m > 12 || d < 1 || d > 31)
        return false;
    *out = v;
    return true;
}

int ferry_rewrite_days_parse(const char *text, uint32_t *from, uint32_t *to, ferry_err *err)
{
    const char *dots = strstr(text, "..");
    bool ok = dots ? parse_day(text, (size_t)(dots - text), from) &&
                         parse_day(dots + 2, strlen(dots + 2), to)
                   : parse_day(text, strlen(text), from) && (*to = *from);
    if (!ok)
        return ferry_err_set(err, FERRY_EINVAL, "--days wants YYYYMMDD or YYYYMMDD..YYYYMMDD "
                             "(inclusive), not '%s'", text);
    if (*from > *to)
        return ferry_err_set(err, FERRY_EINVAL, "--days %s: the first day is after the last",
                             text);
    return FERRY_OK;
}
