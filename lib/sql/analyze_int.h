/* Private to the SELECT analysis (analyze.c: levels, clauses, references, the statement's tail;
 * analyze_tenants.c: the tenant filter of every managed reference). */
#ifndef FERRY_SQL_ANALYZE_INT_H
#define FERRY_SQL_ANALYZE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sql_int.h"

#define NONE SIZE_MAX

typedef struct parser {
    ferry_sql_analysis *a;
    const ferry_sql_table *tables;
    size_t n_tables;
    char **ctes; /* names of WITH name AS (subquery) */
    size_t n_ctes;
    int oom;
    unsigned depth; /* subqueries open (parse_query calls on the stack) */
} parser;

static inline bool kw_in(const ferry_sql_analysis *a, size_t i, const char *const *list)
{
    for (; *list; list++)
        if (sig_kw(a, i, *list))
            return true;
    return false;
}

static inline char *sig_value(const ferry_sql_analysis *a, size_t i)
{
    return ferry_tok_value(&a->toks, sig_tok(a, i), NULL);
}

static inline bool is_ident(const ferry_sql_analysis *a, size_t i)
{
    return i < a->n_sig && (sig_kind(a, i) == FERRY_TOK_WORD || sig_kind(a, i) == FERRY_TOK_QIDENT);
}

static inline bool starts_query(const ferry_sql_analysis *a, size_t i)
{
    return sig_kw(a, i, "select") || sig_kw(a, i, "with");
}

/* Marks the analysis not understood (the first reason is kept, with the byte offset of
 * significant token sig_index when there is one). */
void not_understood(parser *p, size_t sig_index, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The index of the managed table db.tbl names, -1 when none (*cte true when it names a CTE of
 * the statement); *tenant gets a per_tenant table's tenant (owned). */
int match_table(parser *p, const char *db, const char *tbl, char **tenant, bool *cte);

/* analyze_tenants.c */
/* The tenant filter of every managed reference, from the WHERE / PREWHERE conjuncts of its
 * level (literal equalities and IN lists on the tenant column). */
void tenant_filters(parser *p);
/* Table functions and other sources the analysis cannot see through: not understood. */
void unrecognised_sources(parser *p);

#endif
