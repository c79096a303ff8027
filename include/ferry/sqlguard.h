/* The one place that enforces ferry's safety rule for SQL it sends itself: ferry never issues
 * DROP PARTITION / DROP PART / DROP DETACHED, DROP TABLE / DATABASE / DICTIONARY, TRUNCATE, or
 * a lightweight or mutation DELETE, on anything. Those make ClickHouse remove parts, and on a
 * part whose pointer files reference shared objects ClickHouse then tries to delete objects other
 * servers still read (the blog's 1,620 delete attempts and endless retry loop). ferry removes
 * data with DETACH and a plain removal of the detached folder; object deletion is the janitor's.
 *
 * Every flow (tiering, moves, retention, sweeps) sends its statements through ferry_guarded_exec,
 * which refuses a forbidden statement before anything reaches the server. Pure apart from
 * ferry_guarded_exec itself. */
#ifndef FERRY_SQLGUARD_H
#define FERRY_SQLGUARD_H

#include "ferry/clickhouse.h"
#include "ferry/err.h"

/* FERRY_OK when sql may be sent; FERRY_EINVAL naming the forbidden construct otherwise. String
 * literals, quoted identifiers and comments are skipped, so a table called `drop` or a string
 * 'TRUNCATE' is fine. */
int ferry_sql_guard_check(const char *sql, ferry_err *err);

/* ferry_ch_query_buf behind the guard: runs sql on c and appends the result to out (may be
 * NULL to discard it). */
int ferry_guarded_exec(ferry_ch_client *c, const char *sql, ferry_buf *out, ferry_err *err);
/* ferry_ch_query_rows behind the guard: the result's rows in *rows (ferry_ch_rows_free). */
int ferry_guarded_rows(ferry_ch_client *c, const char *sql, ferry_ch_rows *rows, ferry_err *err);

#endif
