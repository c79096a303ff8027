/* Statement classification for the router: is this an INSERT ... FORMAT F the router can route,
 * and what does its head say (table, column list, format, where the data starts). Pure. */
#include "ferry/clickhouse.h"
#include "ferry/router.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct tok {
    const char *s, *end;
    const char *p; /* next unread byte */
} tok;

/* Skips white space and comments; false when the text ends inside a comment. */
static bool skip_space(tok *t)
{
    for (;;) {
        while (t->p < t->end && isspace((unsigned char)*t->p))
            t->p++;
        if (t->end - t->p >= 2 && t->p[0] == '-' && t->p[1] == '-') {
            while (t->p < t->end && *t->p != '\n')
                t->p++;
            continue;
        }
        if (t->end - t->p >= 2 && t->p[0] == '/' && t->p[1] == '*') {
            const char *q = t->p + 2;
            while (q + 1 < t->end && !(q[0] == '*' && q[1] == '/'))
                q++;
            if (q + 1 >= t->end)
                return false;
            t->p = q + 2;
            continue;
        }
        return true;
    }
}

static bool word_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '$'; }

/* The keyword kw at the cursor (case-insensitive, as a whole word). */
static bool keyword(tok *t, const char *kw)
{
    if (!skip_space(t))
        return false;
    size_t n = strlen(kw);
    if ((size_t)(t->end - t->p) < n || strncasecmp(t->p, kw, n) != 0)
        return false;
    if (t->p + n < t->end && word_char(t->p[n]))
        return false;
    t->p += n;
    return true;
}

/* An identifier: bare, `back-quoted` or "double-quoted" (with \ escapes and doubled quotes). */
static bool ident(tok *t, char *out, size_t outsz)
{
    if (!skip_space(t) || t->p >= t->end)
        return false;
    size_t n = 0;
    char q = *t->p;
    if (q == '`' || q == '"') {
        const char *p = t->p + 1;
        while (p < t->end) {
            char c = *p++;
            if (c == '\\' && p < t->end)
                c = *p++;
            else if (c == q) {
                if (p < t->end && *p == q)
                    p++;
                else {
                    t->p = p;
                    out[n] = '\0';
                    return n > 0;
                }
            }
            if (n + 1 >= outsz)
                return false;
            out[n++] = c;
        }
        return false;
    }
    if (!(isalpha((unsigned char)q) || q == '_'))
        return false;
    while (t->p < t->end && word_char(*t->p)) {
        if (n + 1 >= outsz)
            return false;
        out[n++] = *t->p++;
    }
    out[n] = '\0';
    return true;
}

static bool punct(tok *t, char c)
{
    if (!skip_space(t) || t->p >= t->end || *t->p != c)
        return false;
    t->p++;
    return true;
}

void ferry_rt_insert_free(ferry_rt_insert *ins)
{
    if (!ins)
        return;
    free(ins->columns);
    memset(ins, 0, sizeof *ins);
}

enum ferry_rt_stmt ferry_rt_classify(const char *sql, size_t len, bool complete,
                                     ferry_rt_insert *ins, bool *need_more)
{
    memset(ins, 0, sizeof *ins);
    *need_more = false;
    tok t = {sql, sql + len, sql};
    if (!keyword(&t, "INSERT")) {
        enum ferry_ch_stmt_kind k = FERRY_CH_STMT_OTHER;
        if (len) {
            char *z = malloc(len + 1);
            if (z) {
                memcpy(z, sql, len);
                z[len] = '\0';
                k = ferry_ch_statement_kind(z);
                free(z);
            }
        }
        return k == FERRY_CH_STMT_READ ? FERRY_RT_STMT_SELECT : FERRY_RT_STMT_OTHER;
    }
    if (!keyword(&t, "INTO"))
        goto other;
    (void)keyword(&t, "TABLE");
    char a[FERRY_RT_IDENT_MAX], b[FERRY_RT_IDENT_MAX];
    if (!ident(&t, a, sizeof a))
        goto other;
    if (!strcasecmp(a, "FUNCTION"))
        goto other;
    if (punct(&t, '.')) {
        if (!ident(&t, b, sizeof b))
            goto other;
        memcpy(ins->database, a, sizeof a);
        memcpy(ins->table, b, sizeof b);
    } else {
        memcpy(ins->table, a, sizeof a);
    }
    if (punct(&t, '(')) {
        size_t cap = 0;
        for (;;) {
            if (ins->n_columns == cap) {
                size_t nc = cap ? cap * 2 : 16;
                void *p = realloc(ins->columns, nc * sizeof *ins->columns);
                if (!p)
                    goto other;
                ins->columns = p;
                cap = nc;
            }
            if (!ident(&t, ins->columns[ins->n_columns], FERRY_RT_IDENT_MAX))
                goto other;
            ins->n_columns++;
            if (punct(&t, ')'))
                break;
            if (!punct(&t, ','))
                goto other;
        }
    }
    if (!keyword(&t, "FORMAT"))
        goto other;
    if (!ident(&t, ins->format, sizeof ins->format))
        goto other;
    /* The name must be followed by white space (or the end of a complete text). */
    const char *p = t.p;
    while (p < t.end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (p == t.end && !complete) {
        *need_more = true;
        goto other;
    }
    if (p < t.end && *p == '\n')
        p++;
    else if (p == t.p && p < t.end)
        goto other; /* "FORMAT TSVx..." cut mid-name cannot happen here; anything glued on is bad */
    ins->data_offset = (size_t)(p - sql);
    return FERRY_RT_STMT_INSERT;
other:
    /* Ran out of text before the head was complete: the caller reads more (it cuts the text at
     * line ends, so a keyword is never cut in half). */
    if (!complete && skip_space(&t) && t.p >= t.end)
        *need_more = true;
    else if (!complete && t.p < t.end && !skip_space(&t))
        *need_more = true; /* inside a comment */
    ferry_rt_insert_free(ins);
    return FERRY_RT_STMT_INSERT_OTHER;
}

bool ferry_rt_insert_target(const char *sql, size_t len, char *db, char *table)
{
    tok t = {sql, sql + len, sql};
    char a[FERRY_RT_IDENT_MAX], b[FERRY_RT_IDENT_MAX];
    db[0] = table[0] = '\0';
    if (!keyword(&t, "INSERT") || !keyword(&t, "INTO"))
        return false;
    (void)keyword(&t, "TABLE");
    if (!ident(&t, a, sizeof a) || !strcasecmp(a, "FUNCTION"))
        return false;
    if (punct(&t, '.')) {
        if (!ident(&t, b, sizeof b))
            return false;
        memcpy(db, a, sizeof a);
        memcpy(table, b, sizeof b);
    } else {
        memcpy(table, a, sizeof a);
    }
    return true;
}
