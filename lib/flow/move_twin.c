/* ferry's empty twin table ("<table>_ferry_empty", ferry_tier_empty_name) as a move uses it:
 * `REPLACE PARTITION ID p FROM <twin>` empties partition p of a table in tens of milliseconds
 * (its parts become outdated and the server's cleanup thread removes them later), where DETACH
 * PARTITION and MOVE PARTITION remove every file of every part before they answer (hundreds of
 * milliseconds for 40 cold parts, docs/benchmarks.md). A move releases its source this way
 * (move_release.c) and empties its staging table after publishing by ATTACH PARTITION FROM
 * (move_publish.c). Both callers decide whether removing the parts later is safe; this file
 * only says whether the server and the twin allow it, and writes the statement. */
#include <stdio.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/partition.h"
#include "ferry/clickhouse.h"
#include "ferry/log.h"
#include "flow/move_env.h"

bool mv_replace_crash_safe(mv_conn *c)
{
    if (!c->replace_checked) {
        ferry_ch_rows rows = {0};
        ferry_err err = {0}, perr = {0};
        ferry_ch_version v;
        /* a version that cannot be told counts as unsafe, and is asked again next time */
        if (!mv_sql(c, "SELECT version()", &rows, &err) && rows.n_rows == 1 && rows.n_cols >= 1 &&
            !ferry_ch_parse_version(ferry_ch_rows_get(&rows, 0, 0), &v, &perr)) {
            c->replace_safe = !ferry_ch_replace_keeps_replaced(&v);
            c->replace_checked = true;
        }
        ferry_ch_rows_free(&rows);
    }
    return c->replace_checked && c->replace_safe;
}

bool mv_twin_ready(mv_conn *c, const char *db, const char *table, const char *twin,
                   const char *otherwise)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_err err = {0};
    bool ok = false;
    ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
    ferry_sql_db_table(db, twin, &sql);
    ferry_buf_puts(&sql, " AS ");
    ferry_sql_db_table(db, table, &sql);
    if (mv_sql(c, ferry_buf_cstr(&sql), NULL, &err))
        goto out;
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "SELECT count() FROM system.parts WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(twin, &sql);
    if (mv_sql(c, ferry_buf_cstr(&sql), &rows, &err))
        goto out;
    ok = rows.n_rows == 1 && !strcmp(ferry_ch_rows_get(&rows, 0, 0), "0");
    if (!ok)
        FLOG_WARN("msg=\"ferry's empty twin table holds parts; %s\" server=%s table=%s.%s",
                  otherwise, c->name, db, twin);
out:
    if (err.code)
        FLOG_WARN("msg=\"ferry's empty twin table not ready; %s\" server=%s table=%s.%s "
                  "err=\"%s\"", otherwise, c->name, db, twin, err.msg);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return ok;
}

void mv_twin_replace_sql(ferry_buf *sql, const char *db, const char *table, const char *twin,
                         char (*ids)[FERRY_NAME_MAX], const bool *pick, size_t n)
{
    size_t k = 0;
    ferry_buf_puts(sql, "ALTER TABLE ");
    ferry_sql_db_table(db, table, sql);
    for (size_t i = 0; i < n; i++) {
        if (pick && !pick[i])
            continue;
        ferry_buf_puts(sql, k++ ? ", REPLACE PARTITION ID " : " REPLACE PARTITION ID ");
        ferry_sql_quote(ids[i], sql);
        ferry_buf_puts(sql, " FROM ");
        ferry_sql_db_table(db, twin, sql);
    }
    ferry_buf_puts(sql, " SETTINGS allow_replace_partition_from_empty_source = 1");
}
