/* What `ferry route-query` plans over, and how it shows the plan: the managed tables from a
 * spec string ("events:shared:tenant:split") or a config's [table "NAME"] sections, a routing
 * table as TSV text, and a routed query described as JSON or as text. Pure (lib/sql): the caller
 * reads the files and prints. */
#ifndef FERRY_ROUTE_INPUT_H
#define FERRY_ROUTE_INPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ferry/buf.h"
#include "ferry/config.h"
#include "ferry/err.h"
#include "ferry/sqlrw.h"

#define FERRY_SQL_MAX_TABLES 64

/* Managed tables, filled by the calls below. Strings taken from a config are borrowed from it
 * (it must outlive the set); everything else is owned. Zero-initialise, free with
 * ferry_sql_tables_free. */
typedef struct ferry_sql_tables {
    ferry_sql_table t[FERRY_SQL_MAX_TABLES];
    const char *local[FERRY_SQL_MAX_TABLES]; /* per table, its name on the servers (NULL: the
                                              * name as written); ferry_route_query's
                                              * local_names */
    char *owned[FERRY_SQL_MAX_TABLES * 3];
    size_t n, n_owned;
} ferry_sql_tables;

/* Adds one table from a spec: NAME:shared[:TENANT_COLUMN[:SPLIT_COLUMN]] (default tenant,
 * split) or NAME:per_tenant:PATTERN[:SPLIT_COLUMN], PATTERN containing {tenant}. FERRY_EINVAL
 * names the spec and says the expected form. */
int ferry_sql_tables_add_spec(ferry_sql_tables *ts, const char *spec, ferry_err *err);

/* Adds the tables of cfg's [table "NAME"] sections (layout, database, tenant_column,
 * split_column; a per_tenant table's tenant_table, default NAME_{tenant}). FERRY_EINVAL names
 * the config file and line. */
int ferry_sql_tables_from_config(ferry_sql_tables *ts, const ferry_config *cfg, ferry_err *err);

/* NAME=LOCAL: the table NAME (already added) is called LOCAL on the servers. */
int ferry_sql_tables_set_local(ferry_sql_tables *ts, const char *name_eq_local, ferry_err *err);

void ferry_sql_tables_free(ferry_sql_tables *ts);

/* A routing table: the routes point into text and shards, both owned. */
typedef struct ferry_sql_routes {
    ferry_sql_route *v;
    size_t n;
    char *text;
    const char **shards;
} ferry_sql_routes;

/* Parses TSV text, one route a line: tenant<TAB>split<TAB>shard[,shard...] (the first shard
 * serves reads, the others hold copies); blank lines and lines starting with '#' are skipped.
 * FERRY_EINVAL names source and the line for a malformed line, a split of 2^32 or more, an
 * empty shard name, a slice listed twice, a NUL byte, or no route at all. On error *out is
 * empty. */
int ferry_sql_routes_parse(const char *text, size_t len, const char *source,
                           ferry_sql_routes *out, ferry_err *err);
void ferry_sql_routes_free(ferry_sql_routes *r);

/* A routed query as one JSON object: statement, refs [{ref, table, name, qualifier, level,
 * wrapped, tenants|null}], format, settings [{name, value, initiator_only}], and when planned
 * also kind, why, queries [{server, ref, sql}], initiator, globals [{name, sql, join}].
 * tables are the ones it was analysed with. The caller owns the result; NULL when out of
 * memory. */
json_t *ferry_routed_json(const ferry_routed *rt, const ferry_sql_table *tables, bool planned);

/* The same as text for a person, appended to out: a line per reference with its tenants, the
 * format and settings, and when planned the plan, each server's query and the initiator's. */
int ferry_routed_text(const ferry_routed *rt, const ferry_sql_table *tables, bool planned,
                      ferry_buf *out);

#endif
