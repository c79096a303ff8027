/* The hot-list of the servers' filesystem caches and the warm-up of a moved slice on its new
 * server (include/ferry/cache_warm.h). Read-only: SELECTs through ferry_guarded_exec. */
#define _DEFAULT_SOURCE
#include "ferry/cache_warm.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/sqlguard.h"

static double now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec * 1000.0 + (double)tv.tv_usec / 1000.0;
}

static int sql_rows(ferry_fleet_server *srv, const char *sql, ferry_ch_rows *rows, ferry_err *err)
{
    int rc = ferry_guarded_rows(srv->ch, sql, rows, err);
    return rc ? ferry_err_prefix(err, "%s: ", srv->name) : FERRY_OK;
}

/* A column file's column: "<escaped name>[.<substream>].bin" (ClickHouse escapes every byte but
 * [A-Za-z0-9_] as %XX, so the first '.' ends the name); "*" for a compact part's data.bin. NULL
 * for files that hold no column data (marks, indexes, metadata). */
static char *column_of(const char *file)
{
    size_t n = strlen(file);
    if (n < 5 || strcmp(file + n - 4, ".bin"))
        return NULL;
    if (!strcmp(file, "data.bin"))
        return strdup("*");
    if (!strncmp(file, "skp_idx_", 8))
        return NULL;
    char *out = malloc(n + 1);
    size_t o = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n && file[i] != '.'; i++) {
        if (file[i] == '%' && isxdigit((unsigned char)file[i + 1]) &&
            isxdigit((unsigned char)file[i + 2])) {
            char hex[3] = {file[i + 1], file[i + 2], 0};
            out[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            out[o++] = file[i];
        }
    }
    out[o] = '\0';
    return out;
}

static void add_unique(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if (!strcmp(json_string_value(v), s)) return;
    json_array_append_new(arr, json_string(s));
}

/* One server's cached (partition, file) pairs of db.table into hot. */
static int hotlist_table(ferry_fleet_server *srv, const ferry_table_def *t, json_t *hot,
                         ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    /* a pointer file's folder is its part's path under the disk's (metadata) path */
    ferry_buf_puts(&sql, "SELECT DISTINCT p.partition_id, r.file FROM (SELECT concat(path, "
                         "substring(local_path, 1, length(local_path) - length(file))) AS dir, "
                         "splitByChar('/', local_path)[-1] AS file FROM system.remote_data_paths "
                         "WHERE notEmpty(cache_paths)) AS r INNER JOIN (SELECT path, partition_id "
                         "FROM system.parts WHERE active AND database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(t->name, &sql);
    ferry_buf_puts(&sql, ") AS p ON p.path = r.dir ORDER BY 1, 2");
    int rc = sql_rows(srv, ferry_buf_cstr(&sql), &rows, err);
    ferry_buf_free(&sql);
    if (rc)
        return rc;
    char key[2 * FERRY_NAME_MAX + 2];
    snprintf(key, sizeof key, "%s.%s", t->database, t->name);
    json_t *e = json_object_get(hot, key);
    for (size_t i = 0; i < rows.n_rows && rows.n_cols == 2; i++) {
        char *col = column_of(ferry_ch_rows_get(&rows, i, 1));
        if (!col)
            continue;
        if (!e) {
            e = json_pack("{s:[], s:[]}", "partitions", "columns");
            json_object_set_new(hot, key, e);
        }
        add_unique(json_object_get(e, "partitions"), ferry_ch_rows_get(&rows, i, 0));
        add_unique(json_object_get(e, "columns"), col);
        free(col);
    }
    ferry_ch_rows_free(&rows);
    return FERRY_OK;
}

int ferry_cache_hotlist(ferry_fleet *fl, const char *skip, json_t **out, ferry_err *err)
{
    json_t *hot = json_object();
    if (!hot)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t s = 0; s < fl->n_servers; s++) {
        ferry_fleet_server *srv = &fl->servers[s];
        if (skip && !strcmp(srv->name, skip))
            continue;
        for (size_t t = 0; t < fl->n_tables; t++) {
            ferry_err e = {0};
            if (hotlist_table(srv, &fl->tables[t], hot, &e))
                FLOG_WARN("msg=\"cache hot-list: server skipped\" server=%s table=%s error=\"%s\"",
                          srv->name, fl->tables[t].name, e.msg);
        }
    }
    *out = hot;
    return FERRY_OK;
}

static uint64_t event(ferry_fleet_server *srv, const char *name)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_err e = {0};
    uint64_t v = 0;
    ferry_buf_puts(&sql, "SELECT sum(value) FROM system.events WHERE event = ");
    ferry_sql_quote(name, &sql);
    if (!sql_rows(srv, ferry_buf_cstr(&sql), &rows, &e) && rows.n_rows == 1)
        v = strtoull(ferry_ch_rows_get(&rows, 0, 0), NULL, 10);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return v;
}

/* The hot-list's columns that db.table has on srv, back-quoted and comma-separated into cols
 * ("*" stays "*"); false when none is left. */
static int table_columns(ferry_fleet_server *srv, const ferry_table_def *t, json_t *want,
                         ferry_buf *cols, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    size_t i;
    json_t *v;
    json_array_foreach(want, i, v) if (!strcmp(json_string_value(v), "*"))
    {
        ferry_buf_puts(cols, "*");
        return FERRY_OK;
    }
    ferry_buf_puts(&sql, "SELECT name FROM system.columns WHERE database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(t->name, &sql);
    int rc = sql_rows(srv, ferry_buf_cstr(&sql), &rows, err);
    ferry_buf_free(&sql);
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        const char *name = ferry_ch_rows_get(&rows, r, 0);
        bool wanted = false;
        json_array_foreach(want, i, v) wanted |= !strcmp(json_string_value(v), name);
        if (!wanted)
            continue;
        if (cols->len)
            ferry_buf_puts(cols, ", ");
        ferry_sql_ident(name, cols);
    }
    ferry_ch_rows_free(&rows);
    return rc;
}

int ferry_cache_warm(ferry_fleet *fl, const char *server, const char *tenant, uint32_t split,
                     json_t *hotlist, json_t **report, ferry_err *err)
{
    ferry_fleet_server *srv = ferry_fleet_server_find(fl, server);
    *report = NULL;
    if (!srv)
        return ferry_err_set(err, FERRY_EINVAL, "unknown server '%s'", server);
    double t0 = now_ms();
    uint64_t src0 = event(srv, "CachedReadBufferReadFromSourceBytes");
    uint64_t hit0 = event(srv, "CachedReadBufferReadFromCacheBytes");
    size_t tables = 0, parts = 0, ncols = 0;
    int rc = FERRY_OK;
    for (size_t t = 0; !rc && t < fl->n_tables; t++) {
        const ferry_table_def *def = &fl->tables[t];
        char key[2 * FERRY_NAME_MAX + 2];
        snprintf(key, sizeof key, "%s.%s", def->database, def->name);
        json_t *e = json_object_get(hotlist, key);
        if (!e || !def->tenant_column[0])
            continue;
        ferry_buf cols = FERRY_BUF_INIT, sql = FERRY_BUF_INIT;
        if ((rc = table_columns(srv, def, json_object_get(e, "columns"), &cols, err)) ||
            !cols.len) {
            ferry_buf_free(&cols);
            continue;
        }
        /* the slice's rows in the cached partitions: the tenant (and split) columns are in the
         * partition key, so the server reads those partitions' parts only */
        ferry_buf_puts(&sql, "SELECT ");
        ferry_buf_puts(&sql, ferry_buf_cstr(&cols));
        ferry_buf_puts(&sql, " FROM ");
        ferry_sql_ident(def->database, &sql);
        ferry_buf_puts(&sql, ".");
        ferry_sql_ident(def->name, &sql);
        ferry_buf_puts(&sql, " WHERE ");
        ferry_sql_ident(def->tenant_column, &sql);
        ferry_buf_puts(&sql, " = ");
        ferry_sql_quote(tenant, &sql);
        if (def->split_column[0]) {
            ferry_buf_puts(&sql, " AND ");
            ferry_sql_ident(def->split_column, &sql);
            ferry_buf_printf(&sql, " = %u", split);
        }
        ferry_buf_puts(&sql, " AND _partition_id IN (");
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(e, "partitions"), i, p)
        {
            if (i)
                ferry_buf_puts(&sql, ", ");
            ferry_sql_quote(json_string_value(p), &sql);
        }
        ferry_buf_puts(&sql, ") FORMAT Null");
        ferry_ch_rows rows;
        rc = sql_rows(srv, ferry_buf_cstr(&sql), &rows, err);
        ferry_ch_rows_free(&rows);
        tables++;
        parts += json_array_size(json_object_get(e, "partitions"));
        ncols += json_array_size(json_object_get(e, "columns"));
        ferry_buf_free(&cols);
        ferry_buf_free(&sql);
    }
    if (rc)
        return ferry_err_prefix(err, "warming the cache of %s: ", server);
    uint64_t src1 = event(srv, "CachedReadBufferReadFromSourceBytes");
    uint64_t hit1 = event(srv, "CachedReadBufferReadFromCacheBytes");
    *report = json_pack("{s:s, s:I, s:I, s:I, s:f, s:I, s:I}", "server", server, "tables",
                        (json_int_t)tables, "partitions", (json_int_t)parts, "columns",
                        (json_int_t)ncols, "ms", now_ms() - t0, "read_from_store_bytes",
                        (json_int_t)(src1 - src0), "read_from_cache_bytes",
                        (json_int_t)(hit1 - hit0));
    return FERRY_OK;
}
