/* ferry's SQL safety rule (see sqlguard.h): a keyword scan over a light tokenisation that skips
 * strings, quoted identifiers and comments. */
#include "ferry/sqlguard.h"
#include "ferry/buf.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define MAX_WORDS 64

/* Collects up to max bare words (upper-cased, each < 32 chars) of sql, in order; quoted text and
 * comments are skipped, punctuation ends a word. Returns the number collected. */
static int bare_words(const char *sql, char words[][32], int max)
{
    int n = 0;
    const char *p = sql;
    while (*p && n < max) {
        if (*p == '\'' || *p == '"' || *p == '`') {
            char q = *p++;
            while (*p && *p != q) {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
            if (*p)
                p++;
        } else if (p[0] == '-' && p[1] == '-') {
            while (*p && *p != '\n')
                p++;
        } else if (*p == '#') {
            while (*p && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            int depth = 0;
            do {
                if (p[0] == '/' && p[1] == '*') {
                    depth++;
                    p += 2;
                } else if (p[0] == '*' && p[1] == '/') {
                    depth--;
                    p += 2;
                } else {
                    p++;
                }
            } while (*p && depth > 0);
        } else if (isalpha((unsigned char)*p) || *p == '_') {
            size_t len = 0;
            while (isalnum((unsigned char)p[len]) || p[len] == '_')
                len++;
            size_t k = len < 31 ? len : 31;
            for (size_t i = 0; i < k; i++)
                words[n][i] = (char)toupper((unsigned char)p[i]);
            words[n][k] = '\0';
            n++;
            p += len;
        } else {
            p++;
        }
    }
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
