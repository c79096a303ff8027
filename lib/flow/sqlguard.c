/* ferry's SQL safety rule (see sqlguard.h): a keyword scan over the statement's bare words, as
 * ClickHouse's lexer splits it (lib/sql/tokenize.c: strings, quoted identifiers, '#', '--', '//'
 * and nested block comments never yield words), the same tokenizer the router classifies
 * statements with. */
#include "ferry/sqlguard.h"
#include "ferry/buf.h"
#include "ferry/sqltok.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define MAX_WORDS 64

/* Collects up to max bare words (upper-cased, each < 32 chars) of sql, in order. Text after an
 * unterminated string or comment yields none (ClickHouse refuses such a statement anyway).
 * Returns the number collected. */
static int bare_words(const char *sql, char words[][32], int max)
{
    ferry_toks t = {0};
    ferry_err err = {0};
    int n = 0;
    (void)ferry_sql_tokenize(sql, strlen(sql), &t, NULL, &err); /* t holds the tokens before an
                                                                    error */
    for (size_t i = 0; i < t.n && n < max; i++) {
        const ferry_tok *k = &t.v[i];
        const char *p = sql + k->start;
        if (k->kind != FERRY_TOK_WORD || !(isalpha((unsigned char)p[0]) || p[0] == '_'))
            continue;
        size_t len = k->len < 31 ? k->len : 31;
        for (size_t c = 0; c < len; c++)
            words[n][c] = (char)toupper((unsigned char)p[c]);
        words[n][len] = '\0';
        n++;
    }
    ferry_toks_free(&t);
    return n;
}

int ferry_sql_guard_check(const char *sql, ferry_err *err)
{
    char w[MAX_WORDS][32];
    int n = bare_words(sql, w, MAX_WORDS);
    if (n == 0)
        return FERRY_OK;
    const char *why = NULL;
    if (!strcmp(w[0], "TRUNCATE"))
        why = "TRUNCATE";
    else if (!strcmp(w[0], "DROP"))
        why = "DROP";
    else if (!strcmp(w[0], "DELETE"))
        why = "DELETE";
    else if (!strcmp(w[0], "ALTER")) {
        for (int i = 1; i + 1 < n && !why; i++) {
            if (!strcmp(w[i], "DROP") &&
                (!strcmp(w[i + 1], "PARTITION") || !strcmp(w[i + 1], "PART") ||
                 !strcmp(w[i + 1], "DETACHED")))
                why = "ALTER ... DROP PARTITION/PART/DETACHED";
            else if (!strcmp(w[i], "DELETE") && !strcmp(w[i + 1], "WHERE"))
                why = "ALTER ... DELETE";
        }
    }
    if (why)
        return ferry_err_set(err, FERRY_EINVAL,
                             "refused to send %s: ferry never makes ClickHouse remove parts, "
                             "whose pointer files may reference objects other servers share "
                             "(detach, then remove the detached folder)", why);
    return FERRY_OK;
}

int ferry_guarded_exec(ferry_ch_client *c, const char *sql, ferry_buf *out, ferry_err *err)
{
    int rc = ferry_sql_guard_check(sql, err);
    if (rc)
        return rc;
    ferry_buf discard = FERRY_BUF_INIT;
    rc = ferry_ch_query_buf(c, sql, NULL, out ? out : &discard, NULL, err);
    ferry_buf_free(&discard);
    return rc;
}

int ferry_guarded_rows(ferry_ch_client *c, const char *sql, ferry_ch_rows *rows, ferry_err *err)
{
    int rc = ferry_sql_guard_check(sql, err);
    if (rc)
        return rc;
    return ferry_ch_query_rows(c, sql, rows, NULL, err);
}
