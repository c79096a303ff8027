/* SQL analysis and per-server rewriting for read routing (issue 10). Pure: no I/O, no globals.
 *
 * analysis   statement kind, the clauses of every SELECT level with their byte spans, table
 *            references at every nesting level, the tenant filter of each managed reference,
 *            GLOBAL IN / GLOBAL JOIN subqueries, the statement's FORMAT and SETTINGS.
 * rewrite    one query for one server: managed tables renamed to the server's local tables,
 *            tenant IN lists pruned, a slice restriction added per managed reference so each
 *            slice is read exactly once, FORMAT and SETTINGS stripped (returned separately).
 * plan       several servers: plain rows / partial aggregation (-State/-Merge) / gather rows,
 *            with the initiator's query (see docs/routing.md).
 * All rewriting splices byte spans of the original text; untouched bytes are copied verbatim. */
#ifndef FERRY_SQLRW_H
#define FERRY_SQLRW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/err.h"
#include "ferry/partition.h"
#include "ferry/sqltok.h"

/* ---- inputs ---- */

/* A managed table, as the query names it. */
typedef struct ferry_sql_table {
    const char *name;           /* logical name (shared layout), e.g. "events" */
    const char *database;       /* a db-qualified reference must match it; NULL = any */
    enum ferry_layout layout;
    const char *tenant_column;  /* shared layout */
    const char *split_column;
    const char *tenant_pattern; /* per_tenant: table names, "{tenant}" marks the tenant,
                                 * e.g. "events_{tenant}" */
    bool tenant_numeric;        /* tenant values are integers (written unquoted) */
} ferry_sql_table;

/* ---- analysis ---- */

enum ferry_stmt_kind {
    FERRY_STMT_SELECT,      /* SELECT ... (or a parenthesised union of selects) */
    FERRY_STMT_WITH_SELECT, /* WITH ... SELECT ... */
    FERRY_STMT_INSERT,
    FERRY_STMT_EXPLAIN,
    FERRY_STMT_OTHER
};

enum ferry_clause {
    FERRY_CL_WITH,
    FERRY_CL_SELECT,
    FERRY_CL_FROM, /* the whole FROM section: tables, JOINs, ARRAY JOINs */
    FERRY_CL_PREWHERE,
    FERRY_CL_WHERE,
    FERRY_CL_GROUP_BY,
    FERRY_CL_HAVING,
    FERRY_CL_WINDOW,
    FERRY_CL_QUALIFY,
    FERRY_CL_ORDER_BY,
    FERRY_CL_LIMIT_BY,
    FERRY_CL_LIMIT, /* LIMIT n [OFFSET m] / LIMIT m, n */
    FERRY_CL_OFFSET,
    FERRY_CL_SETTINGS,
    FERRY_CL_FORMAT,
    FERRY_CL_COUNT
};

typedef struct ferry_span {
    size_t start, end; /* byte offsets, [start, end) */
} ferry_span;

typedef struct ferry_sql_clause {
    bool present;
    ferry_span kw;   /* the keyword(s), e.g. "GROUP BY" */
    ferry_span body; /* the clause's contents (empty span when none) */
    size_t tok_kw, tok_body, tok_end; /* significant-token indices (internal use) */
} ferry_sql_clause;

/* One SELECT (one part of a UNION). */
typedef struct ferry_sql_level {
    size_t parent;    /* enclosing level, SIZE_MAX at the top */
    ferry_span span;  /* from WITH/SELECT to the end of its last clause */
    ferry_sql_clause cl[FERRY_CL_COUNT];
    size_t n_sources; /* table expressions in FROM/JOIN (tables, subqueries, functions) */
    bool has_join, has_array_join;
    bool unsafe_joins;     /* RIGHT/FULL/ANY/ASOF/PASTE... joins: restrict by wrapping */
    bool in_global;        /* inside the right-hand side of a GLOBAL IN / JOIN */
    size_t sig_start, sig_end; /* significant-token range (internal) */
} ferry_sql_level;

/* A table reference in FROM / JOIN. */
typedef struct ferry_sql_ref {
    size_t level;
    int table;            /* index into the tables given to the analysis, -1: not managed */
    ferry_span expr;      /* the whole table expression: name [AS alias] [FINAL] [SAMPLE..] */
    ferry_span name;      /* [db.]table as written */
    ferry_span alias;     /* the alias identifier, {0,0} when none */
    ferry_span modifiers; /* FINAL / SAMPLE ... text, {0,0} when none */
    char *qualifier;      /* owned: what qualifies its columns: the alias, else the table name */
    char *tenant;         /* owned: per_tenant: the tenant from the table name */
    bool first_source;    /* the level's first table expression */
    bool wrap;            /* the level's joins make a WHERE restriction unsafe for it */
    /* tenant filter found in the level's WHERE / PREWHERE (shared layout) */
    bool has_filter;
    char **tenants;       /* owned, sorted, unique */
    size_t n_tenants;
    ferry_span *in_lists; /* owned: "(...)" spans of `tenant IN (...)` conjuncts to prune */
    size_t n_in_lists;
    bool cte;             /* the name is a WITH name AS (subquery) of the statement */
} ferry_sql_ref;

/* The right-hand side of a GLOBAL IN / GLOBAL JOIN that is a subquery. */
typedef struct ferry_sql_global {
    ferry_span paren;  /* "( SELECT ... )" including the parentheses */
    ferry_span inner;  /* the subquery text */
    char name[32];     /* _data_<16 hex digits>: xxh3 of the subquery's significant tokens */
    bool join;         /* GLOBAL JOIN (else GLOBAL [NOT] IN) */
    bool nested;       /* inside another GLOBAL subquery (computed with it) */
} ferry_sql_global;

typedef struct ferry_sql_setting {
    char *name;  /* owned */
    char *value; /* owned: the value as written (a literal or expression text) */
} ferry_sql_setting;

typedef struct ferry_sql_analysis {
    ferry_toks toks;
    size_t *sig;  /* indices of significant tokens */
    size_t n_sig;
    size_t *match; /* per significant token: matching bracket's significant index, or SIZE_MAX */
    enum ferry_stmt_kind kind;
    bool understood;      /* false: not a SELECT ferry can route (see why) */
    char why[256];
    ferry_sql_level *levels;
    size_t n_levels;
    ferry_sql_ref *refs;
    size_t n_refs;
    ferry_sql_global *globals;
    size_t n_globals;
    ferry_span *table_functions; /* owned: the names of table functions in FROM / JOIN */
    size_t n_table_functions;
    bool top_union;       /* the statement is a UNION / EXCEPT / INTERSECT */
    ferry_span body;      /* the statement without FORMAT, SETTINGS and a trailing ';' */
    ferry_span format_clause, settings_clause; /* {0,0} when absent */
    char *format;         /* owned: the FORMAT name, NULL when none */
    ferry_sql_setting *settings; /* the statement's SETTINGS, parsed */
    size_t n_settings;
} ferry_sql_analysis;

/* Analyses sql[0..len) (sql must outlive the analysis). Returns FERRY_EINVAL (with the byte
 * offset in the message) for input that is certainly not valid SQL: unterminated strings,
 * quoted identifiers or comments, unbalanced brackets. Anything else succeeds; a statement that
 * is not a SELECT, or one this module does not understand, has understood = false and why set.
 * Free with ferry_sql_analysis_free in every case. */
int ferry_sql_analyze(const char *sql, size_t len, const ferry_sql_table *tables,
                      size_t n_tables, ferry_sql_analysis *out, ferry_err *err);
void ferry_sql_analysis_free(ferry_sql_analysis *a);

const char *ferry_stmt_kind_name(enum ferry_stmt_kind kind);
const char *ferry_clause_name(enum ferry_clause cl);

/* The settings ClickHouse interprets only at the initiator (they shape the final result or its
 * serialisation). NULL-terminated. ferry_sql_setting_initiator_only is case-sensitive, as
 * setting names are. */
const char *const *ferry_sql_initiator_only_settings(void);
bool ferry_sql_setting_initiator_only(const char *name);

/* ---- the slices a server reads ---- */

typedef struct ferry_sql_slice {
    const char *tenant;
    uint32_t split;
} ferry_sql_slice;

/* What one server serves, for one managed table: its slices (any order). */
typedef struct ferry_sql_served {
    const ferry_sql_slice *slices;
    size_t n;
} ferry_sql_served;

/* A tenant's split count: its slices are splits 0..splits-1. */
typedef struct ferry_sql_tenant_splits {
    const char *tenant;
    uint32_t splits;
} ferry_sql_tenant_splits;

/* ---- tenant scope: what a user bound to tenants may read (docs/security.md) ---- */

/* A query parameter of the request (URL parameter param_NAME=value): what {NAME:Type} in the
 * text stands for. */
typedef struct ferry_sql_param {
    const char *name;
    const char *value;
} ferry_sql_param;

typedef struct ferry_sql_scope {
    const char *const *tenants; /* the tenants whose rows the reader may see, sorted (strcmp) */
    size_t n_tenants;
    const char *const *tables;  /* tables ferry does not manage that the reader may read as each
                                 * server has them, "db.table" (any order) */
    size_t n_tables;
    const char *database;       /* the request's database for unqualified names ("default") */
    const ferry_sql_param *params;
    size_t n_params;
} ferry_sql_scope;

/* Whether tenant is one of the scope's. */
bool ferry_sql_scope_has(const ferry_sql_scope *s, const char *tenant);

/* Checks an analysed SELECT for a reader bound to scope's tenants. FERRY_OK, or FERRY_EACCESS
 * with what is refused (the caller answers ACCESS_DENIED):
 *   - a statement the analysis did not understand (it could not be restricted reliably);
 *   - table functions (url, s3, file, remote, cluster, numbers, ...), tables ferry does not
 *     manage and the scope does not list (system.*, information_schema, other databases), a
 *     name taken for a WITH subquery where no such subquery is visible, `x IN table`;
 *   - functions that read beyond the query's tables or the request (file, dictGet*, joinGet*,
 *     getClientHTTPHeader, hasColumnInTable, ...) and settings that would change what the
 *     restriction means or reach other requests (ferry_sql_setting_refused_scoped);
 *   - a per-tenant table of another tenant;
 *   - the tenant column compared (=, ==, !=, <>, [NOT] IN, equals, notEquals, [global][not]In,
 *     has, hasAny, hasAll, indexOf, countEqual) with a literal, a literal list or a query
 *     parameter naming a tenant outside the scope, or with anything that is not a literal, a
 *     query parameter, a column or a subquery (an expression could name any tenant); a tuple
 *     holding the tenant column in a comparison; an alias named like a tenant or split column.
 * Whatever passes is still restricted to the scope's slices by the rewrite
 * (ferry_sql_target.scope): this check gives a clear ACCESS_DENIED for a query naming another
 * tenant, the restriction is what keeps other tenants' rows out. Pure. */
int ferry_sql_scope_check(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                          size_t n_tables, const ferry_sql_scope *scope, ferry_err *err);
/* Settings a bound reader may not set, in the statement or as URL parameters:
 * allow_get_client_http_header (the router's credentials toward the shards are in its request
 * headers), replace_running_query (another user's query could be replaced), readonly,
 * allow_ddl, allow_introspection_functions, ... Case-sensitive like setting names. */
bool ferry_sql_setting_refused_scoped(const char *name);
/* Whether a function is one a scoped reader may not call: it reads beyond the query's tables
 * (files, URLs, dictionaries, Join tables, other tables' metadata, the request's headers).
 * Compared without case. Also used by `ferry rewrite` for its expressions. */
bool ferry_sql_function_refused_scoped(const char *name);

/* Per server and managed table (index as in the tables array): local table name, for
 * per_tenant tables a pattern with {tenant}. NULL = the name as written (identity). */
typedef struct ferry_sql_target {
    const ferry_sql_served *served; /* one per table */
    const char *const *local_names; /* one per table, entries may be NULL; array may be NULL */
    bool materialize_globals;       /* replace GLOBAL subqueries by their _data_ names */
    /* Optional (NULL: unknown): every tenant's split count, sorted by tenant (strcmp). A
     * reference whose tenant filter names only tenants of which this server serves every split
     * gets no slice restriction: split counts only grow, so every row of those tenants on the
     * server is in a slice it serves, and the tenant filter (which stays in the query, its IN
     * lists pruned to the tenants the server serves) already selects exactly them. Not for
     * references without a tenant filter, wrapped join sides or gather plans. Saves the server
     * evaluating the (tenant, split) IN set, which costs ~1 ms per query on ClickHouse 26.7. */
    const ferry_sql_tenant_splits *tenant_splits;
    size_t n_tenant_splits;
    /* Optional (NULL: every tenant): a reader bound to tenants. Every managed reference is then
     * restricted to served slices of the scope's tenants, on every server and in every plan
     * (rows of other tenants are never read, whatever the query says), and tenant_splits is
     * not used (each reference keeps its explicit restriction). */
    const ferry_sql_scope *scope;
} ferry_sql_target;

typedef struct ferry_sql_rewritten {
    bool skip;   /* the server serves nothing the query reads: do not query it */
    char *sql;   /* owned: the server's query (no FORMAT, no SETTINGS) */
} ferry_sql_rewritten;

/* Rewrites an understood analysis for one server. FERRY_EUNSUPPORTED when the analysis was not
 * understood. */
int ferry_sql_rewrite(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                      const ferry_sql_target *target, ferry_sql_rewritten *out, ferry_err *err);
void ferry_sql_rewritten_free(ferry_sql_rewritten *r);

/* Appends s as an identifier: bare when it is a plain word, else back-quoted. */
int ferry_sql_append_ident(const char *s, ferry_buf *out);

/* ---- plans for several servers ---- */

enum ferry_plan_kind {
    FERRY_PLAN_SINGLE,    /* one server (or none serves anything): forward its query as is */
    FERRY_PLAN_ROWS,      /* union of per-server rows; initiator applies ORDER BY / LIMIT */
    FERRY_PLAN_AGGREGATE, /* per-server -State columns; initiator -Merge, HAVING, ORDER BY .. */
    FERRY_PLAN_GATHER     /* per-server rows of each managed reference; initiator runs the query */
};

/* The placeholder in initiator queries where the per-server results are read from: the router
 * substitutes url(...) / a union of url() calls. For GATHER, one per managed reference:
 * {{ferry.rows.N}} with N the reference index; for ROWS/AGGREGATE: {{ferry.partial}}. */
#define FERRY_PLAN_PARTIAL "{{ferry.partial}}"

typedef struct ferry_plan_server_query {
    size_t server;  /* index into the servers given to the plan */
    int ref;        /* GATHER: the managed reference (index in analysis refs); else -1 */
    char *sql;      /* owned */
} ferry_plan_server_query;

typedef struct ferry_read_plan {
    enum ferry_plan_kind kind;
    char why[256];                  /* why this kind (for route-query and logs) */
    ferry_plan_server_query *queries;
    size_t n_queries;
    char *initiator_sql;            /* owned; NULL for SINGLE */
    char *format;                   /* owned copy of the statement's FORMAT, or NULL */
    ferry_sql_setting *settings;    /* owned copies of the statement's SETTINGS */
    size_t n_settings;
    ferry_sql_global *globals;      /* owned copies: the GLOBAL subqueries to compute first */
    size_t n_globals;
    char **global_sql;              /* owned: each global's subquery text */
} ferry_read_plan;

/* Builds the plan for servers[0..n_servers) (one ferry_sql_target each). A server that serves
 * nothing the query reads is left out; when none serves anything, the first server gets a query
 * whose managed references read nothing (so the answer has the right shape). */
int ferry_sql_plan(const ferry_sql_analysis *a, const ferry_sql_table *tables,
                   const ferry_sql_target *servers, size_t n_servers, ferry_read_plan *out,
                   ferry_err *err);
void ferry_read_plan_free(ferry_read_plan *p);
const char *ferry_plan_kind_name(enum ferry_plan_kind kind);

/* ---- routing a query with a routing table (shared by `ferry route-query` and the router) ---- */

/* One slice's serving shards: the first serves reads; the others hold copies (e.g. the target
 * of a move before the switch) and must not return the slice. */
typedef struct ferry_sql_route {
    const char *tenant;
    uint32_t split;
    const char *const *shards;
    size_t n_shards;
} ferry_sql_route;

typedef struct ferry_routed {
    ferry_sql_analysis analysis;
    char **servers;          /* owned: every shard named in the routes, sorted */
    size_t n_servers;
    ferry_read_plan plan;    /* query server indices refer to servers[] */
} ferry_routed;

/* Analyses sql and plans it over the shards of routes. local_names: per table, the local table
 * name on every server (NULL array or entry: the name as written). The same routes apply to
 * every managed table (a slice is a tenant's split across the managed tables). */
int ferry_route_query(const char *sql, size_t len, const ferry_sql_table *tables,
                      size_t n_tables, const char *const *local_names, const ferry_sql_route *routes,
                      size_t n_routes, ferry_routed *out, ferry_err *err);
void ferry_routed_free(ferry_routed *r);

#endif
