/* A ClickHouse SQL tokenizer that never corrupts text: every byte of the input belongs to exactly
 * one token, and each token keeps its byte span, so a rewrite is done by splicing spans of the
 * original text (bytes outside the edited spans are copied verbatim). Pure: no I/O, no globals.
 *
 * The token rules follow ClickHouse's lexer (src/Parsers/Lexer.cpp, read for behaviour):
 *   - strings '...' with backslash escapes and '' doubling; x'..' / b'..' hex and binary strings
 *   - quoted identifiers "..." and `...` (same escaping rules)
 *   - comments: -- and // to the end of the line; '#' followed by a space or '!' to the end of
 *     the line (a '#' otherwise is an error); block comments (slash-star ... star-slash), nested
 *     as the SQL standard says
 *   - numbers: 123, 1.5, .5, 1e5, 1e-5, 0x1F, 0b101, 0x1.8p3, 1_000_000 ('_' between digits);
 *     after a '.', only a plain integer (so x.1.2 is x . 1 . 2); 1abc is a bare word
 *   - heredocs $tag$ ... $tag$ (the tag may be empty: $$ ... $$)
 *   - operators (== != <> <= >= -> :: || etc.), brackets, comma, semicolon, dot
 * Errors detected here (the query is certainly invalid, and ClickHouse would say so): an
 * unterminated '...', "...", `...`, x'..' or block comment. They are reported with the byte offset
 * where the unterminated token starts. Other bytes ClickHouse's lexer rejects (a lone '!', '#x',
 * a '\' not followed by 'G', non-ASCII bytes outside strings) become FERRY_TOK_ERROR tokens; the
 * analysis treats a query containing one as not understood (the router forwards such a query to
 * a server, which reports the syntax error the way ClickHouse does). */
#ifndef FERRY_SQLTOK_H
#define FERRY_SQLTOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

enum ferry_tok_kind {
    FERRY_TOK_WS,       /* ASCII whitespace run */
    FERRY_TOK_COMMENT,  /* --, //, # , or a (nested) block comment */
    FERRY_TOK_WORD,     /* bare word: identifier or keyword (letters, digits, _, $) */
    FERRY_TOK_QIDENT,   /* "quoted" or `back-quoted` identifier */
    FERRY_TOK_STRING,   /* 'string', x'hex', b'bin' */
    FERRY_TOK_NUMBER,   /* numeric literal */
    FERRY_TOK_HEREDOC,  /* $tag$...$tag$ */
    FERRY_TOK_LPAREN,
    FERRY_TOK_RPAREN,
    FERRY_TOK_LBRACKET, /* [ */
    FERRY_TOK_RBRACKET,
    FERRY_TOK_LBRACE,   /* { (query parameters {name:Type}, JSON paths) */
    FERRY_TOK_RBRACE,
    FERRY_TOK_COMMA,
    FERRY_TOK_SEMICOLON,
    FERRY_TOK_DOT,
    FERRY_TOK_OP,       /* operators: + - * / % = == != <> < <= > >= -> :: : ? || | @ @@ $ \G */
    FERRY_TOK_ERROR     /* a byte (or UTF-8 sequence) ClickHouse's lexer rejects */
};

/* 12 bytes: a statement of n bytes has up to n tokens (an IN list of one-digit numbers has
 * about one per byte), so their size is what analysing a long statement costs. Offsets fit 32
 * bits: ferry_sql_tokenize refuses text of FERRY_SQL_TEXT_MAX bytes or more. */
typedef struct ferry_tok {
    uint32_t start;     /* byte offset in the text */
    uint32_t len;       /* bytes; never 0 */
    unsigned char kind; /* enum ferry_tok_kind */
} ferry_tok;

#define FERRY_SQL_TEXT_MAX ((size_t)UINT32_MAX)

typedef struct ferry_toks {
    const char *text; /* borrowed: the tokenized text (must outlive the tokens) */
    size_t text_len;
    ferry_tok *v;     /* owned */
    size_t n, cap;
} ferry_toks;

/* Tokenizes text[0..len). On success out->v covers every byte, in order, without gaps. On an
 * unterminated string, quoted identifier or block comment returns FERRY_EINVAL with a message
 * such as "single quoted string is not closed (starts at byte 17)"; *err_offset (may be NULL)
 * gets that byte offset. Text of FERRY_SQL_TEXT_MAX bytes or more is FERRY_EINVAL. out is emptied
 * first; free with ferry_toks_free in every case. */
int ferry_sql_tokenize(const char *text, size_t len, ferry_toks *out, size_t *err_offset,
                       ferry_err *err);
void ferry_toks_free(ferry_toks *t);

/* Whitespace and comments are not significant. */
bool ferry_tok_significant(const ferry_tok *tok);

/* True when tok is a bare word equal to kw, ignoring ASCII case. */
bool ferry_tok_is_kw(const ferry_toks *t, const ferry_tok *tok, const char *kw);

/* The value of a string literal, quoted identifier or bare word, unquoted: escapes decoded
 * (\\n \\t \\0 \\xHH and any other \\c as c), doubled quotes collapsed. Returns a malloc'd,
 * NUL-terminated string (caller frees) or NULL for other kinds / out of memory. *out_len (may be
 * NULL) gets the length (the value may contain NUL bytes). */
char *ferry_tok_value(const ferry_toks *t, const ferry_tok *tok, size_t *out_len);

#endif
