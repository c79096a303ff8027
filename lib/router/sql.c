/* Statement classification for the router: is this an INSERT ... FORMAT F the router can route,
 * and what does its head say (table, column list, format, where the data starts). Pure.
 *
 * The head is read by ClickHouse's token rules (lib/sql/tokenize.c: nested block comments,
 * '#'/'--'/'//' line comments, quoted identifiers), so a comment cannot hide a statement from the
 * router that the server would see. The scanner is incremental: the daemon feeds it the body's
 * start as it arrives and every byte is tokenized once (a request's CPU is linear in its bytes,
 * however its lines and chunks are cut). It stops only after a whitespace byte, where no token
 * but a line comment, a block comment or a quoted token can continue (the tokenizer looks at
 * most one byte ahead, and never across whitespace, except for heredocs, which no INSERT head
 * holds); those three carry their state (nesting depth, escape) from one feed to the next. */
#include "ferry/router.h"
#include "ferry/sqltok.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PIECE 4096

enum { L_NORMAL, L_BLOCK, L_QUOTE, L_LINE };

enum {
    P_START,     /* before the first word ('(' allowed: "(SELECT 1)") */
    P_INTO,      /* after INSERT */
    P_TABLEKW,   /* after INTO: optional TABLE */
    P_NAME1,     /* a name: [db.]table */
    P_AFTER1,    /* after the first name: '.', '(' or FORMAT */
    P_NAME2,     /* after "db." */
    P_AFTER_NAME,/* '(' or FORMAT */
    P_COL,       /* a column name */
    P_COLSEP,    /* ',' or ')' */
    P_FORMAT,    /* FORMAT after the column list */
    P_FMT,       /* the format's name */
    P_AFTER_FMT  /* bytes after the name: spaces, one newline, then the data */
};

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

void ferry_rt_head_init(ferry_rt_head *h)
{
    memset(h, 0, sizeof *h);
}

void ferry_rt_head_free(ferry_rt_head *h)
{
    ferry_rt_insert_free(&h->ins);
}

static void decide(ferry_rt_head *h, enum ferry_rt_stmt kind)
{
    h->decided = true;
    h->kind = kind;
}

/* The parse failed where a routable INSERT head needed something else. */
static void fail(ferry_rt_head *h)
{
    decide(h, h->state == P_START ? FERRY_RT_STMT_OTHER : FERRY_RT_STMT_INSERT_OTHER);
}

/* An identifier token into out: a bare word starting with a letter or '_', or a quoted one
 * (unescaped; empty, NUL-holding or too long names are refused). */
static bool tok_ident(const ferry_toks *t, const ferry_tok *k, char *out, size_t outsz)
{
    const char *p = t->text + k->start;
    if (k->kind == FERRY_TOK_WORD) {
        if (!((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z') || p[0] == '_'))
            return false;
        if (k->len >= outsz)
            return false;
        memcpy(out, p, k->len);
        out[k->len] = '\0';
        return true;
    }
    if (k->kind != FERRY_TOK_QIDENT)
        return false;
    size_t n = 0;
    char *v = ferry_tok_value(t, k, &n);
    bool ok = v && n > 0 && n < outsz && !memchr(v, '\0', n);
    if (ok)
        memcpy(out, v, n + 1);
    free(v);
    return ok;
}

static bool is_read_word(const ferry_toks *t, const ferry_tok *k)
{
    static const char *const reads[] = {"SELECT", "WITH",   "SHOW",   "DESC",
                                        "DESCRIBE", "EXISTS", "EXPLAIN"};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        if (ferry_tok_is_kw(t, k, reads[i]))
            return true;
    return false;
}

/* One significant token into the head's parser. */
static void step(ferry_rt_head *h, const ferry_toks *t, const ferry_tok *k)
{
    ferry_rt_insert *ins = &h->ins;
    switch (h->state) {
    case P_START:
        if (k->kind == FERRY_TOK_LPAREN) {
            h->paren = true;
            return;
        }
        if (!h->paren && ferry_tok_is_kw(t, k, "INSERT")) {
            h->state = P_INTO;
            return;
        }
        decide(h, is_read_word(t, k) ? FERRY_RT_STMT_SELECT : FERRY_RT_STMT_OTHER);
        return;
    case P_INTO:
        if (!ferry_tok_is_kw(t, k, "INTO"))
            break;
        h->state = P_TABLEKW;
        return;
    case P_TABLEKW:
        h->state = P_NAME1;
        if (ferry_tok_is_kw(t, k, "TABLE"))
            return;
        step(h, t, k); /* the name */
        return;
    case P_NAME1:
        if (!tok_ident(t, k, ins->table, sizeof ins->table) || !strcasecmp(ins->table, "FUNCTION"))
            break;
        h->state = P_AFTER1;
        return;
    case P_AFTER1:
        if (k->kind == FERRY_TOK_DOT) {
            memcpy(ins->database, ins->table, sizeof ins->table);
            ins->table[0] = '\0';
            h->state = P_NAME2;
            return;
        }
        h->have_target = true;
        h->state = P_AFTER_NAME;
        step(h, t, k);
        return;
    case P_NAME2:
        if (!tok_ident(t, k, ins->table, sizeof ins->table))
            break;
        h->have_target = true;
        h->state = P_AFTER_NAME;
        return;
    case P_AFTER_NAME:
        if (k->kind == FERRY_TOK_LPAREN) {
            h->state = P_COL;
            return;
        }
        if (!ferry_tok_is_kw(t, k, "FORMAT"))
            break;
        h->state = P_FMT;
        return;
    case P_COL:
        if (ins->n_columns == FERRY_RT_MAX_COLUMNS)
            break;
        if (ins->n_columns == h->cols_cap) {
            size_t nc = h->cols_cap ? h->cols_cap * 2 : 16;
            void *p = realloc(ins->columns, nc * sizeof *ins->columns);
            if (!p)
                break;
            ins->columns = p;
            h->cols_cap = nc;
        }
        if (!tok_ident(t, k, ins->columns[ins->n_columns], FERRY_RT_IDENT_MAX))
            break;
        ins->n_columns++;
        h->state = P_COLSEP;
        return;
    case P_COLSEP:
        if (k->kind == FERRY_TOK_COMMA)
            h->state = P_COL;
        else if (k->kind == FERRY_TOK_RPAREN)
            h->state = P_FORMAT;
        else
            break;
        return;
    case P_FORMAT:
        if (!ferry_tok_is_kw(t, k, "FORMAT"))
            break;
        h->state = P_FMT;
        return;
    case P_FMT:
        if (!tok_ident(t, k, ins->format, sizeof ins->format))
            break;
        h->state = P_AFTER_FMT;
        h->after = k->start + k->len;
        h->name_end = h->after;
        return;
    default:
        return;
    }
    fail(h);
}

/* Tokenizes text[from, to) (absolute offsets; the tokenizer sees text+from) and steps the parser
 * through its significant tokens. Returns where the lexer stands: to, or the start of a token
 * left open (its mode set). */
static size_t lex_normal(ferry_rt_head *h, const char *text, size_t from, size_t to,
                         bool complete)
{
    if (text[from] == '.') {
        /* resumed right after a quoted name or a comment: the tokenizer, starting here, would
         * take ".5" for a number; after an operand it is a dot (as it would be in context) */
        ferry_toks one = {.text = text, .text_len = to};
        ferry_tok k = {.kind = FERRY_TOK_DOT, .start = (uint32_t)from, .len = 1};
        step(h, &one, &k);
        return from + 1;
    }
    ferry_toks toks = {0};
    size_t erroff = 0;
    ferry_err err = {0};
    int rc = ferry_sql_tokenize(text + from, to - from, &toks, &erroff, &err);
    /* the tokens are relative to text+from: see them through the whole text */
    ferry_toks whole = toks;
    whole.text = text;
    whole.text_len = to;
    size_t at = to;
    for (size_t i = 0; i < toks.n && !h->decided && h->state != P_AFTER_FMT; i++) {
        ferry_tok k = toks.v[i];
        k.start += from;
        if (ferry_tok_significant(&k)) {
            step(h, &whole, &k);
            continue;
        }
        /* a line comment reaching the end of the text goes on in the next feed */
        if (k.kind == FERRY_TOK_COMMENT && i + 1 == toks.n && rc == FERRY_OK && !complete &&
            k.start + k.len == to && !(text[k.start] == '/' && text[k.start + 1] == '*'))
            h->lex = L_LINE;
    }
    if (rc != FERRY_OK && (h->decided || h->state == P_AFTER_FMT)) {
        /* the head was complete before the error: it is in the data */
    } else if (rc != FERRY_OK && rc != FERRY_EINVAL) {
        fail(h); /* out of memory: not routed (an INSERT into a managed table is refused) */
    } else if (rc != FERRY_OK) {
        at = from + erroff;
        char c = text[at];
        if (c == '/') {
            h->lex = L_BLOCK;
            h->depth = 1;
            h->tok_start = at;
            at += 2;
        } else if (c == '\'' || c == '"' || c == '`') {
            h->lex = L_QUOTE;
            h->quote = c;
            h->esc = false;
            h->tok_start = at;
            at += 1;
        } else {
            fail(h); /* x'..' / b'..' not closed: nothing a head may hold */
        }
    }
    ferry_toks_free(&toks);
    return at;
}

/* A quoted token closed at end (exclusive): a significant token for the parser. */
static void quoted_token(ferry_rt_head *h, const char *text, size_t end)
{
    ferry_toks whole = {.text = text, .text_len = end};
    ferry_tok k = {.kind = h->quote == '\'' ? FERRY_TOK_STRING : FERRY_TOK_QIDENT,
                   .start = (uint32_t)h->tok_start, .len = (uint32_t)(end - h->tok_start)};
    step(h, &whole, &k);
}

/* Lexes text[h->done, to) in whatever mode the lexer is. */
static void lex(ferry_rt_head *h, const char *text, size_t to, bool complete)
{
    size_t p = h->done;
    while (p < to && !h->decided && h->state != P_AFTER_FMT) {
        if (h->lex == L_NORMAL) {
            /* in pieces of about PIECE bytes, each ending after a whitespace byte: the
             * tokens of a piece are allocated at once, and the head is usually decided in the
             * first one (the data after it is not tokenized) */
            size_t end = to;
            for (size_t i = p + PIECE; i < to; i++)
                if (is_ws(text[i])) {
                    end = i + 1;
                    break;
                }
            p = lex_normal(h, text, p, end, complete && end == to);
        } else if (h->lex == L_LINE) {
            const char *nl = memchr(text + p, '\n', to - p);
            if (!nl) {
                p = to;
            } else {
                p = (size_t)(nl - text);
                h->lex = L_NORMAL;
            }
        } else if (h->lex == L_BLOCK) {
            while (p + 2 <= to && h->depth) {
                if (text[p] == '/' && text[p + 1] == '*') {
                    h->depth++;
                    p += 2;
                } else if (text[p] == '*' && text[p + 1] == '/') {
                    h->depth--;
                    p += 2;
                } else {
                    p++;
                }
            }
            /* a pair is never cut in two: 'to' is after a whitespace byte (or the end) */
            if (!h->depth)
                h->lex = L_NORMAL;
            else
                p = to;
        } else { /* L_QUOTE */
            bool closed = false;
            while (p < to) {
                char c = text[p];
                if (h->esc) {
                    h->esc = false;
                    p++;
                } else if (c == '\\') {
                    h->esc = true;
                    p++;
                } else if (c == h->quote) {
                    /* a doubled quote stays inside; the byte before 'to' is whitespace (or
                     * the text is complete), so the byte after a quote is always here */
                    if (p + 1 < to && text[p + 1] == h->quote) {
                        p += 2;
                    } else {
                        p++;
                        closed = true;
                        break;
                    }
                } else {
                    p++;
                }
            }
            if (closed) {
                h->lex = L_NORMAL;
                quoted_token(h, text, p);
            }
        }
    }
    if (p > h->done)
        h->done = p;
}

/* The bytes after the format's name: spaces, then one newline or the data itself. */
static void after_format(ferry_rt_head *h, const char *text, size_t len, bool complete)
{
    size_t p = h->after;
    while (p < len && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r'))
        p++;
    h->after = p;
    if (p == len) {
        if (complete) {
            h->ins.data_offset = len;
            decide(h, FERRY_RT_STMT_INSERT);
        }
        return;
    }
    if (text[p] == '\n') {
        h->ins.data_offset = p + 1;
    } else if (p == h->name_end) {
        fail(h); /* "FORMAT TSV(...": anything glued on is bad */
        return;
    } else {
        h->ins.data_offset = p;
    }
    decide(h, FERRY_RT_STMT_INSERT);
}

bool ferry_rt_head_feed(ferry_rt_head *h, const char *text, size_t len, bool complete)
{
    if (h->decided)
        return true;
    if (h->state != P_AFTER_FMT) {
        size_t to = len;
        if (!complete) {
            /* stop after a whitespace byte: the last one among the bytes not looked at yet
             * (bytes in [done, seen) hold none) */
            size_t from = h->seen > h->done ? h->seen : h->done;
            to = h->done;
            for (size_t i = len; i > from; i--)
                if (is_ws(text[i - 1])) {
                    to = i;
                    break;
                }
            if (len > h->seen)
                h->seen = len;
        }
        if (to > h->done)
            lex(h, text, to, complete);
    }
    if (!h->decided && h->state == P_AFTER_FMT)
        after_format(h, text, len, complete);
    if (!h->decided && complete)
        fail(h); /* the text ended before the head did */
    return h->decided;
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
    ferry_rt_head h;
    ferry_rt_head_init(&h);
    memset(ins, 0, sizeof *ins);
    *need_more = false;
    if (!ferry_rt_head_feed(&h, sql, len, complete)) {
        *need_more = true;
        ferry_rt_head_free(&h);
        return FERRY_RT_STMT_INSERT_OTHER;
    }
    if (h.kind == FERRY_RT_STMT_INSERT) {
        *ins = h.ins;
        memset(&h.ins, 0, sizeof h.ins);
    }
    ferry_rt_head_free(&h);
    return h.kind;
}

bool ferry_rt_head_target(const ferry_rt_head *h, char *db, char *table)
{
    db[0] = table[0] = '\0';
    if (!h->have_target)
        return false;
    memcpy(db, h->ins.database, FERRY_RT_IDENT_MAX);
    memcpy(table, h->ins.table, FERRY_RT_IDENT_MAX);
    return true;
}

bool ferry_rt_insert_target(const char *sql, size_t len, char *db, char *table)
{
    ferry_rt_head h;
    ferry_rt_head_init(&h);
    (void)ferry_rt_head_feed(&h, sql, len, true);
    bool ok = ferry_rt_head_target(&h, db, table);
    ferry_rt_head_free(&h);
    return ok;
}
