/* Internals shared by the SQL analysis, rewrite and plan code: significant-token access and the
 * edit list that rewriting splices into the original text. */
#ifndef FERRY_SQL_INT_H
#define FERRY_SQL_INT_H

#include "ferry/buf.h"
#include "ferry/sqlrw.h"

#include <stdint.h>

/* The i-th significant token. */
static inline const ferry_tok *sig_tok(const ferry_sql_analysis *a, size_t i)
{
    return &a->toks.v[a->sig[i]];
}
static inline size_t sig_start(const ferry_sql_analysis *a, size_t i)
{
    return sig_tok(a, i)->start;
}
static inline size_t sig_end(const ferry_sql_analysis *a, size_t i)
{
    const ferry_tok *t = sig_tok(a, i);
    return t->start + t->len;
}
static inline bool sig_kw(const ferry_sql_analysis *a, size_t i, const char *kw)
{
    return i < a->n_sig && ferry_tok_is_kw(&a->toks, sig_tok(a, i), kw);
}
/* The kind of the i-th significant token; FERRY_TOK_WS (never significant) past the end. */
static inline enum ferry_tok_kind sig_kind(const ferry_sql_analysis *a, size_t i)
{
    return i < a->n_sig ? sig_tok(a, i)->kind : FERRY_TOK_WS;
}
/* The significant token is the byte c (brackets, comma, single-byte operators). */
static inline bool sig_is(const ferry_sql_analysis *a, size_t i, char c)
{
    return i < a->n_sig && sig_tok(a, i)->len == 1 && a->toks.text[sig_tok(a, i)->start] == c;
}

/* An opening bracket of any kind: ( [ { (skipped whole when scanning a level). */
static inline bool sig_open(const ferry_sql_analysis *a, size_t i)
{
    enum ferry_tok_kind k = sig_kind(a, i);
    return k == FERRY_TOK_LPAREN || k == FERRY_TOK_LBRACKET || k == FERRY_TOK_LBRACE;
}

/* One splice: replace text[start,end) with repl (start == end: an insertion). */
typedef struct sql_edit {
    size_t start, end;
    char *repl;
    size_t seq;
} sql_edit;

typedef struct sql_edits {
    sql_edit *v;
    size_t n, cap;
} sql_edits;

int sql_edits_add(sql_edits *e, size_t start, size_t end, const char *repl);
/* Takes ownership of repl. */
int sql_edits_add_owned(sql_edits *e, size_t start, size_t end, char *repl);
void sql_edits_free(sql_edits *e);
/* Applies the edits that lie within [from, to) and writes that range of the text to out.
 * Edits must not overlap (an insertion may sit at the boundary of a replacement). */
int sql_edits_apply(const sql_edits *e, const char *text, size_t from, size_t to, ferry_buf *out);

/* The edits that make the server's query (renames, restrictions, IN pruning, GLOBAL
 * materialisation). *skip: the server serves nothing any managed reference reads. */
int sql_server_edits(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                     const ferry_sql_target *target, sql_edits *edits, bool *skip,
                     ferry_err *err);

/* The restriction predicate for ref on this server ("0" when it serves nothing the reference
 * reads) and whether it is empty. qualify: prefix the columns with the reference's qualifier. */
int sql_restriction(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                    const ferry_sql_target *target, size_t ref, bool qualify, ferry_buf *out,
                    bool *empty);

/* The same; *whole (when not NULL): the reference needs no restriction on this server (it
 * reads only tenants the server serves whole, see ferry_sql_target.tenant_splits). */
int sql_restriction_ex(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                       const ferry_sql_target *target, size_t ref, bool qualify, ferry_buf *out,
                       bool *empty, bool *whole);

/* The local table name for ref on the target, written as identifiers. */
int sql_local_name(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                   const ferry_sql_target *target, size_t ref, ferry_buf *out);

/* Whether the reference is inside a GLOBAL subquery (its level or an ancestor's). */
bool sql_ref_in_global(const ferry_sql_analysis *a, size_t ref);

#endif
