/* The ClickHouse SQL tokenizer (see include/ferry/sqltok.h for the rules). Written from the
 * behaviour of ClickHouse's lexer; every byte lands in exactly one token. */
#include "ferry/sqltok.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static bool is_word(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* '_' between two digits of the current base (never first in a block, never last). */
static bool digit_separator(const char *s, size_t pos, size_t len, bool block_start, bool hex)
{
    if (s[pos] != '_' || block_start || pos + 1 >= len)
        return false;
    return hex ? is_hex(s[pos + 1]) : is_digit(s[pos + 1]);
}

/* Consumes digits (with separators) from pos; returns the new position. */
static size_t digits(const char *s, size_t pos, size_t len, bool hex)
{
    bool block_start = true;
    while (pos < len && ((hex ? is_hex(s[pos]) : is_digit(s[pos])) ||
                         digit_separator(s, pos, len, block_start, hex))) {
        pos++;
        block_start = false;
    }
    return pos;
}

/* A number starting at a digit. after_dot: only a plain integer (tuple access x.1.2). */
static size_t scan_number(const char *s, size_t pos, size_t len, bool after_dot)
{
    size_t begin = pos;
    if (after_dot) {
        pos = digits(s, pos, len, false);
    } else {
        bool hex = false;
        if (pos + 2 < len && s[pos] == '0' && (s[pos + 1] == 'x' || s[pos + 1] == 'X') &&
            is_hex(s[pos + 2])) {
            hex = true;
            pos += 2;
        } else if (pos + 2 < len && s[pos] == '0' && (s[pos + 1] == 'b' || s[pos + 1] == 'B') &&
                   (s[pos + 2] == '0' || s[pos + 2] == '1')) {
            pos += 2;
        }
        /* the first digit is always consumed; '_' is not allowed right after it when it
         * started the number (digits() treats the first position as a block start) */
        pos = digits(s, pos, len, hex);
        if (pos < len && s[pos] == '.') {
            pos++;
            pos = digits(s, pos, len, hex);
        }
        if (pos + 1 < len && (hex ? (s[pos] == 'p' || s[pos] == 'P')
                                  : (s[pos] == 'e' || s[pos] == 'E'))) {
            pos++;
            if (pos + 1 < len && (s[pos] == '-' || s[pos] == '+'))
                pos++;
            pos = digits(s, pos, len, false);
        }
    }
    if (pos == begin)
        pos++;
    return pos;
}

/* A quoted token from pos (at the quote); returns the end or 0 when unterminated. */
static size_t scan_quoted(const char *s, size_t pos, size_t len, char quote)
{
    pos++;
    while (pos < len) {
        if (s[pos] == quote) {
            if (pos + 1 < len && s[pos + 1] == quote) {
                pos += 2;
                continue;
            }
            return pos + 1;
        }
        if (s[pos] == '\\') {
            if (pos + 1 >= len)
                return 0;
            pos += 2;
            continue;
        }
        pos++;
    }
    return 0;
}

/* x'...' or b'...': returns the end or 0 when not closed properly. */
static size_t scan_hexbin(const char *s, size_t pos, size_t len)
{
    bool hex = s[pos] == 'x' || s[pos] == 'X';
    pos += 2;
    while (pos < len && (hex ? is_hex(s[pos]) : (s[pos] == '0' || s[pos] == '1')))
        pos++;
    if (pos >= len || s[pos] != '\'')
        return 0;
    return pos + 1;
}

/* A nested block comment from pos (at the slash); returns the end or 0 when not closed. */
static size_t scan_block_comment(const char *s, size_t pos, size_t len)
{
    size_t level = 1;
    pos += 2;
    while (pos + 2 <= len) {
        if (s[pos] == '/' && s[pos + 1] == '*') {
            level++;
            pos += 2;
        } else if (s[pos] == '*' && s[pos + 1] == '/') {
            pos += 2;
            if (--level == 0)
                return pos;
        } else {
            pos++;
        }
    }
    return 0;
}

static size_t line_end(const char *s, size_t pos, size_t len)
{
    const char *nl = memchr(s + pos, '\n', len - pos);
    return nl ? (size_t)(nl - s) : len;
}

/* Heredocs ($tag$ ... $tag$) without a quadratic search. ClickHouse's lexer looks for the
 * closing tag from every '$' to the end of the text, so a text of many distinct tags that never
 * close costs time quadratic in its length (256 KiB of "$1$+$2$+..." took 17 s). The closing
 * tag of the heredoc opened at the '$' number i (tag i: from it to the next '$', inclusive) is
 * the first later '$' whose own tag has the same bytes, so one backward pass with a hash table
 * over the tags links each '$' to the next one with the same tag: the same answers, linear. */
typedef struct heredoc_index {
    bool built;
    size_t m;     /* '$' bytes in the text */
    size_t *pos;  /* their offsets */
    size_t *next; /* the next '$' (index) with the same tag; SIZE_MAX: none */
} heredoc_index;

static uint64_t tag_hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

static int heredoc_build(heredoc_index *hx, const char *s, size_t len)
{
    size_t m = 0, cap = 2;
    for (const char *p = s; (p = memchr(p, '$', (size_t)(s + len - p))); p++)
        m++;
    while (cap < 2 * m)
        cap *= 2;
    hx->pos = malloc(m * sizeof *hx->pos);
    hx->next = malloc(m * sizeof *hx->next);
    size_t *slot = calloc(cap, sizeof *slot); /* index + 1 of the earliest '$' seen with a tag */
    if (!hx->pos || !hx->next || !slot) {
        free(slot);
        return FERRY_ENOMEM;
    }
    m = 0;
    for (const char *p = s; (p = memchr(p, '$', (size_t)(s + len - p))); p++)
        hx->pos[m++] = (size_t)(p - s);
    hx->m = m;
    for (size_t i = m; i-- > 0;) {
        hx->next[i] = SIZE_MAX;
        if (i + 1 == m)
            continue; /* no '$' after it: no tag */
        size_t tl = hx->pos[i + 1] - hx->pos[i] + 1;
        const char *tag = s + hx->pos[i];
        size_t k = (size_t)tag_hash(tag, tl) & (cap - 1);
        for (;; k = (k + 1) & (cap - 1)) {
            if (!slot[k]) {
                slot[k] = i + 1;
                break;
            }
            size_t j = slot[k] - 1;
            if (hx->pos[j + 1] - hx->pos[j] + 1 == tl && !memcmp(s + hx->pos[j], tag, tl)) {
                hx->next[i] = j;
                slot[k] = i + 1;
                break;
            }
        }
    }
    free(slot);
    hx->built = true;
    return FERRY_OK;
}

static void heredoc_free(heredoc_index *hx)
{
    free(hx->pos);
    free(hx->next);
}

/* $tag$ ... $tag$ from pos (a '$'): returns the end, or 0 when this is not a complete
 * heredoc; *rc gets FERRY_ENOMEM when the index could not be built. */
static size_t scan_heredoc(heredoc_index *hx, const char *s, size_t pos, size_t len, int *rc)
{
    if (!hx->built && (*rc = heredoc_build(hx, s, len)) != FERRY_OK)
        return 0;
    size_t lo = 0, hi = hx->m;
    while (lo < hi) { /* the '$' at pos */
        size_t mid = lo + (hi - lo) / 2;
        if (hx->pos[mid] < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t i = lo;
    if (i + 1 >= hx->m)
        return 0;
    size_t tl = hx->pos[i + 1] - pos + 1;
    size_t j = hx->next[i];
    if (j == i + 1) /* the opening tag's own closing '$' starts the same tag: not a close */
        j = hx->next[j];
    return j == SIZE_MAX ? 0 : hx->pos[j] + tl;
}

static size_t utf8_seq_len(unsigned char c)
{
    if (c >= 0xF0)
        return 4;
    if (c >= 0xE0)
        return 3;
    if (c >= 0xC0)
        return 2;
    return 1;
}

static int push(ferry_toks *t, enum ferry_tok_kind kind, size_t start, size_t end, ferry_err *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        ferry_tok *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory tokenizing SQL");
        t->v = v;
        t->cap = cap;
    }
    assert(end > start && end <= FERRY_SQL_TEXT_MAX);
    t->v[t->n++] = (ferry_tok){(uint32_t)start, (uint32_t)(end - start), (unsigned char)kind};
    return FERRY_OK;
}

static int unterminated(const char *what, size_t at, size_t *err_offset, ferry_err *err)
{
    if (err_offset)
        *err_offset = at;
    return ferry_err_set(err, FERRY_EINVAL, "%s is not closed (starts at byte %zu)", what, at);
}

int ferry_sql_tokenize(const char *s, size_t len, ferry_toks *out, size_t *err_offset,
                       ferry_err *err)
{
    out->text = s;
    out->text_len = len;
    out->n = 0;
    if (len >= FERRY_SQL_TEXT_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "the statement is %zu bytes: longer than the "
                             "%zu ferry can analyse", len, FERRY_SQL_TEXT_MAX - 1);
    enum ferry_tok_kind prev = FERRY_TOK_WS; /* last significant kind */
    bool have_prev = false;
    size_t pos = 0;
    heredoc_index hx = {0};
    int rc = FERRY_OK;
    while (pos < len) {
        size_t begin = pos;
        enum ferry_tok_kind kind = FERRY_TOK_OP;
        char c = s[pos];
        if (is_space(c)) {
            while (pos < len && is_space(s[pos]))
                pos++;
            kind = FERRY_TOK_WS;
        } else if (is_digit(c)) {
            pos = scan_number(s, pos, len, have_prev && prev == FERRY_TOK_DOT);
            kind = FERRY_TOK_NUMBER;
            if (pos < len && is_word(s[pos])) { /* 1abc: an identifier */
                while (pos < len && (is_word(s[pos]) || s[pos] == '$'))
                    pos++;
                kind = FERRY_TOK_WORD;
            }
        } else if (c == '\'' || c == '"' || c == '`') {
            pos = scan_quoted(s, pos, len, c);
            if (!pos) {
                rc = unterminated(c == '\'' ? "single quoted string"
                                  : c == '"' ? "double quoted identifier"
                                             : "back quoted identifier",
                                  begin, err_offset, err);
                goto out;
            }
            kind = c == '\'' ? FERRY_TOK_STRING : FERRY_TOK_QIDENT;
        } else if (c == '(' || c == ')' || c == '[' || c == ']' || c == '{' || c == '}' ||
                   c == ',' || c == ';') {
            pos++;
            kind = c == '('   ? FERRY_TOK_LPAREN
                   : c == ')' ? FERRY_TOK_RPAREN
                   : c == '[' ? FERRY_TOK_LBRACKET
                   : c == ']' ? FERRY_TOK_RBRACKET
                   : c == '{' ? FERRY_TOK_LBRACE
                   : c == '}' ? FERRY_TOK_RBRACE
                   : c == ',' ? FERRY_TOK_COMMA
                              : FERRY_TOK_SEMICOLON;
        } else if (c == '.') {
            bool digit_next = pos + 1 < len && is_digit(s[pos + 1]);
            bool after_operand = have_prev && (prev == FERRY_TOK_RPAREN ||
                                               prev == FERRY_TOK_RBRACKET ||
                                               prev == FERRY_TOK_WORD ||
                                               prev == FERRY_TOK_QIDENT ||
                                               prev == FERRY_TOK_NUMBER);
            if (pos > 0 && (!digit_next || after_operand)) {
                pos++;
                kind = FERRY_TOK_DOT;
            } else { /* .5, .5e3 */
                pos = digits(s, pos + 1, len, false);
                if (pos + 1 < len && (s[pos] == 'e' || s[pos] == 'E')) {
                    pos++;
                    if (pos + 1 < len && (s[pos] == '-' || s[pos] == '+'))
                        pos++;
                    pos = digits(s, pos, len, false);
                }
                kind = FERRY_TOK_NUMBER;
            }
        } else if (c == '-' && pos + 1 < len && s[pos + 1] == '-') {
            pos = line_end(s, pos, len);
            kind = FERRY_TOK_COMMENT;
        } else if (c == '/' && pos + 1 < len && s[pos + 1] == '/') {
            pos = line_end(s, pos, len);
            kind = FERRY_TOK_COMMENT;
        } else if (c == '/' && pos + 1 < len && s[pos + 1] == '*') {
            pos = scan_block_comment(s, pos, len);
            if (!pos) {
                rc = unterminated("multiline comment", begin, err_offset, err);
                goto out;
            }
            kind = FERRY_TOK_COMMENT;
        } else if (c == '#') {
            if (pos + 1 < len && (s[pos + 1] == ' ' || s[pos + 1] == '!')) {
                pos = line_end(s, pos, len);
                kind = FERRY_TOK_COMMENT;
            } else {
                pos++;
                kind = FERRY_TOK_ERROR;
            }
        } else if (c == '$') {
            size_t end = scan_heredoc(&hx, s, pos, len, &rc);
            if (rc) {
                rc = ferry_err_set(err, rc, "out of memory tokenizing SQL");
                goto out;
            }
            if (end) {
                pos = end;
                kind = FERRY_TOK_HEREDOC;
            } else if (pos + 1 == len || !is_word(s[pos + 1])) {
                pos++;
                kind = FERRY_TOK_OP;
            } else {
                while (pos < len && (is_word(s[pos]) || s[pos] == '$'))
                    pos++;
                kind = FERRY_TOK_WORD;
            }
        } else if ((c == 'x' || c == 'X' || c == 'b' || c == 'B') && pos + 2 < len &&
                   s[pos + 1] == '\'') {
            pos = scan_hexbin(s, pos, len);
            if (!pos) {
                rc = unterminated("single quoted string", begin, err_offset, err);
                goto out;
            }
            kind = FERRY_TOK_STRING;
        } else if (is_word(c)) {
            while (pos < len && (is_word(s[pos]) || s[pos] == '$'))
                pos++;
            kind = FERRY_TOK_WORD;
        } else if ((unsigned char)c >= 0x80) {
            size_t n = utf8_seq_len((unsigned char)c);
            pos += n <= len - pos ? n : len - pos;
            kind = FERRY_TOK_ERROR;
        } else {
            /* operators; two-byte forms first */
            static const char *const two[] = {"->", "==", "!=", "<>", "<=", ">=", "::",
                                              "||", "@@", "\\G"};
            kind = FERRY_TOK_OP;
            size_t n = 1;
            for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
                if (pos + 1 < len && s[pos] == two[k][0] && s[pos + 1] == two[k][1])
                    n = 2;
            if (n == 1 && (c == '!' || c == '\\' || c < 0x20 || c == 0x7f))
                kind = FERRY_TOK_ERROR;
            if (n == 1 && !strchr("+-*/%=<>?:|@", c))
                kind = FERRY_TOK_ERROR;
            pos += n;
        }
        rc = push(out, kind, begin, pos, err);
        if (rc)
            goto out;
        if (kind != FERRY_TOK_WS && kind != FERRY_TOK_COMMENT) {
            prev = kind;
            have_prev = true;
        }
    }
    /* the vector doubled as it grew: give the slack back, the tokens live as long as the
     * analysis (a long IN list has about a token per 3 bytes) */
    if (out->cap > out->n + 64) {
        ferry_tok *v = realloc(out->v, (out->n + 1) * sizeof *v);
        if (v) {
            out->v = v;
            out->cap = out->n + 1;
        }
    }
out:
    heredoc_free(&hx);
    return rc;
}

void ferry_toks_free(ferry_toks *t)
{
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

bool ferry_tok_significant(const ferry_tok *tok)
{
    return tok->kind != FERRY_TOK_WS && tok->kind != FERRY_TOK_COMMENT;
}

bool ferry_tok_is_kw(const ferry_toks *t, const ferry_tok *tok, const char *kw)
{
    if (tok->kind != FERRY_TOK_WORD)
        return false;
    size_t n = strlen(kw);
    if (n != tok->len)
        return false;
    const char *p = t->text + tok->start;
    for (size_t k = 0; k < n; k++) {
        char a = p[k], b = kw[k];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z')
            b = (char)(b - 'A' + 'a');
        if (a != b)
            return false;
    }
    return true;
}

char *ferry_tok_value(const ferry_toks *t, const ferry_tok *tok, size_t *out_len)
{
    const char *p = t->text + tok->start;
    char *v = NULL;
    size_t n = 0;
    if (tok->kind == FERRY_TOK_WORD) {
        v = malloc(tok->len + 1);
        if (!v)
            return NULL;
        memcpy(v, p, tok->len);
        n = tok->len;
    } else if ((tok->kind == FERRY_TOK_STRING && p[0] == '\'') || tok->kind == FERRY_TOK_QIDENT) {
        char q = p[0];
        v = malloc(tok->len);
        if (!v)
            return NULL;
        for (size_t k = 1; k + 1 < tok->len; k++) {
            char c = p[k];
            if (c == q && k + 2 < tok->len && p[k + 1] == q) {
                v[n++] = q;
                k++;
            } else if (c == '\\' && k + 2 < tok->len) {
                char e = p[++k];
                switch (e) {
                case 'n': v[n++] = '\n'; break;
                case 't': v[n++] = '\t'; break;
                case 'r': v[n++] = '\r'; break;
                case 'b': v[n++] = '\b'; break;
                case 'f': v[n++] = '\f'; break;
                case 'a': v[n++] = '\a'; break;
                case 'v': v[n++] = '\v'; break;
                case 'e': v[n++] = '\x1b'; break;
                case '0': v[n++] = '\0'; break;
                case 'x':
                    if (k + 3 < tok->len && is_hex(p[k + 1]) && is_hex(p[k + 2])) {
                        v[n++] = (char)(ferry_hex_digit(p[k + 1]) * 16 +
                                        ferry_hex_digit(p[k + 2]));
                        k += 2;
                    } else {
                        v[n++] = e;
                    }
                    break;
                default: v[n++] = e;
                }
            } else {
                v[n++] = c;
            }
        }
    } else {
        return NULL;
    }
    v[n] = '\0';
    if (out_len)
        *out_len = n;
    return v;
}
