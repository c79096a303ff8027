/* Partition naming: how a managed table's partitions map to (tenant, day, split), parsed from
 * the `partition` column of system.parts (a ClickHouse literal such as ('t1',20261101,3) or
 * (20261101,3)). Pure: no I/O.
 *
 * Two layouts are supported:
 *   shared      one table for all tenants, PARTITION BY (tenant, day, split)
 *   per_tenant  one table (set) per tenant, PARTITION BY (day, split); the tenant comes from the
 *               table, not the partition
 * day is an integer YYYYMMDD (toYYYYMMDD(ts)); tenant is a string or an integer in the key. */
#ifndef FERRY_PARTITION_H
#define FERRY_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/err.h"

enum ferry_layout { FERRY_LAYOUT_SHARED, FERRY_LAYOUT_PER_TENANT };

#define FERRY_TENANT_MAX 256

typedef struct ferry_partition_key {
    char tenant[FERRY_TENANT_MAX]; /* "" for per_tenant layouts until the caller fills it */
    int tenant_is_string;          /* 1 when the literal was quoted */
    uint32_t day;                  /* YYYYMMDD */
    uint32_t split;
} ferry_partition_key;

int ferry_layout_parse(const char *name, enum ferry_layout *out, ferry_err *err);
const char *ferry_layout_name(enum ferry_layout layout);

/* Splits a ClickHouse partition literal into its elements: a tuple "(a, 'b', 3)" or a single
 * value "3" / "'x'". Each element is returned unquoted (string escapes decoded) in fields[i]
 * (pointing into storage, which the caller provides and which must be at least strlen(literal)+1
 * bytes); quoted[i] says whether it was a string. Returns the element count or -1 with err. */
int ferry_partition_literal_split(const char *literal, char *storage, char **fields, int *quoted,
                                  int max, ferry_err *err);

/* Parses the partition literal of a table with the given layout. */
int ferry_partition_parse(enum ferry_layout layout, const char *literal, ferry_partition_key *out,
                          ferry_err *err);

/* Appends the SQL partition expression for key to out, e.g. ('t1', 20261101, 3) or
 * (20261101, 3), quoting and escaping the tenant as a string when tenant_is_string. */
int ferry_partition_sql(enum ferry_layout layout, const ferry_partition_key *key, ferry_buf *out);

/* Appends s as a ClickHouse single-quoted string literal (escaping \ and '). */
int ferry_sql_quote(const char *s, ferry_buf *out);
/* Appends s as a back-quoted identifier (escaping ` and \). */
int ferry_sql_ident(const char *s, ferry_buf *out);
/* Appends `db`.`table`, each part as ferry_sql_ident writes it. */
int ferry_sql_db_table(const char *db, const char *table, ferry_buf *out);

#endif
