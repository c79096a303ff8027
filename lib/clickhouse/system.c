/* Helpers over ClickHouse system tables: server version, partitions and parts of a table,
 * detached parts, data paths per disk, table engine and storage policy. Each query names its
 * columns explicitly and substitutes a constant for a column the server lacks (18.16 has no
 * disks, no hash_of_all_files, no system.detached_parts), so the TSV it returns always has the
 * shape the pure parsers below expect. */
#include "clickhouse_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

/* ---- system.columns cache ------------------------------------------------------------------ */

static int load_sys_columns(ferry_ch_client *c, ferry_buf *cache, bool *loaded, ferry_err *err)
{
    if (*loaded)
        return FERRY_OK;
    ferry_buf_reset(cache);
    int rc = ferry_ch_query_buf(c,
                                "SELECT table, name FROM system.columns WHERE database = "
                                "'system' AND table IN ('parts', 'tables', 'detached_parts', "
                                "'disks', 'storage_policies')",
                                "TabSeparated", cache, NULL, err);
    if (rc)
        return ferry_err_prefix(err, "listing system table columns: ");
    *loaded = true;
    return FERRY_OK;
}

static bool cache_has(const ferry_buf *cache, const char *table, const char *column)
{
    char needle[256];
    int n = column ? snprintf(needle, sizeof needle, "%s\t%s\n", table, column)
                   : snprintf(needle, sizeof needle, "%s\t", table);
    if (n <= 0 || (size_t)n >= sizeof needle || !cache->len)
        return false;
    const char *p = cache->data;
    while ((p = strstr(p, needle)) != NULL) {
        if (p == cache->data || p[-1] == '\n')
            return true;
        p += 1;
    }
    return false;
}

int ferry_ch_system_has_column(ferry_ch_client *c, const char *table, const char *column,
                               bool *has, ferry_err *err)
{
    bool *loaded;
    ferry_buf *cache = ferry_ch_client_sys_cache(c, &loaded);
    int rc = load_sys_columns(c, cache, loaded, err);
    if (rc)
        return rc;
    *has = cache_has(cache, table, column);
    return FERRY_OK;
}

int ferry_ch_system_has_table(ferry_ch_client *c, const char *table, bool *has, ferry_err *err)
{
    return ferry_ch_system_has_column(c, table, NULL, has, err);
}

/* "column" when system.<table> has it, else fallback (a constant SQL expression). */
static int col_or(ferry_ch_client *c, const char *table, const char *column,
                  const char *fallback, const char **expr, ferry_err *err)
{
    bool has = false;
    int rc = ferry_ch_system_has_column(c, table, column, &has, err);
    *expr = has ? column : fallback;
    return rc;
}

/* Appends "database = 'db' AND <name_col> = 'table'" with both quoted. */
static int where_table(ferry_buf *sql, const char *db, const char *table, const char *name_col)
{
    int rc = ferry_buf_puts(sql, " database = ");
    if (!rc)
        rc = ferry_ch_quote(sql, db);
    if (!rc)
        rc = ferry_buf_printf(sql, " AND %s = ", name_col) < 0;
    if (!rc)
        rc = ferry_ch_quote(sql, table);
    return rc ? FERRY_ENOMEM : FERRY_OK;
}

static int run_text(ferry_ch_client *c, ferry_buf *sql, ferry_buf *out, ferry_err *err)
{
    return ferry_ch_query_buf(c, ferry_buf_cstr(sql), "TabSeparated", out, NULL, err);
}

/* ---- pure parsers -------------------------------------------------------------------------- */

/* Each system-table parser below is a table of columns: where each column's value goes in the
 * record and how it is read. One loop (parse_records) fills any record type from its table, and
 * one (free_records) frees the strings it allocated. */
enum col_kind {
    COL_STR,          /* NULL reads as "" */
    COL_STR_NULLABLE, /* NULL stays NULL */
    COL_U64,          /* NULL reads as 0 */
    COL_I64,
    COL_U32
};

typedef struct col_spec {
    enum col_kind kind;
    size_t offset;
} col_spec;

#define N_SPEC(a) (sizeof(a) / sizeof((a)[0]))

static int get_field(const ferry_ch_rows *r, size_t row, size_t col, const col_spec *spec,
                     void *rec, const char *what, ferry_err *err)
{
    size_t i = row * r->n_cols + col;
    char *dst = (char *)rec + spec->offset;
    bool null = r->nulls[i];
    const char *text = null ? "" : ferry_ch_rows_get(r, row, col);
    uint64_t u = 0;
    int64_t s = 0;
    switch (spec->kind) {
    case COL_STR:
    case COL_STR_NULLABLE: {
        char *v = NULL;
        if (!(null && spec->kind == COL_STR_NULLABLE) &&
            !(v = ferry_strndup(text, null ? 0 : r->lens[i])))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        memcpy(dst, &v, sizeof v);
        return FERRY_OK;
    }
    case COL_I64:
        if (!null && !ferry_parse_i64(text, &s))
            break;
        memcpy(dst, &s, sizeof s);
        return FERRY_OK;
    case COL_U64:
    case COL_U32:
        if (!null && !ferry_parse_u64(text, &u))
            break;
        if (spec->kind == COL_U64) {
            memcpy(dst, &u, sizeof u);
            return FERRY_OK;
        }
        if (u > UINT32_MAX)
            return ferry_err_set(err, FERRY_EREMOTE, "%s row %zu column %zu: %llu out of range",
                                 what, row + 1, col + 1, (unsigned long long)u);
        uint32_t u32 = (uint32_t)u;
        memcpy(dst, &u32, sizeof u32);
        return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_EREMOTE, "%s row %zu column %zu: '%s' is not a number", what,
                         row + 1, col + 1, text);
}

static void free_records(const col_spec *spec, size_t n_spec, size_t rec_size, void *recs,
                         size_t n)
{
    for (size_t i = 0; recs && i < n; i++) {
        for (size_t c = 0; c < n_spec; c++) {
            if (spec[c].kind != COL_STR && spec[c].kind != COL_STR_NULLABLE)
                continue;
            char *v;
            memcpy(&v, (char *)recs + i * rec_size + spec[c].offset, sizeof v);
            free(v);
        }
    }
    free(recs);
}

/* Parses TSV text (modified in place) into *out, an array of *n records of rec_size bytes laid
 * out by spec (one spec per column, in order). The caller frees *out with free_records. */
static int parse_records(char *text, size_t len, const char *what, const col_spec *spec,
                         size_t n_spec, size_t rec_size, void **out, size_t *n, ferry_err *err)
{
    ferry_ch_rows r;
    char *recs = NULL;
    *out = NULL;
    *n = 0;
    int rc = ferry_ch_rows_parse(text, len, &r, err);
    if (rc)
        return rc;
    if (r.n_rows && r.n_cols != n_spec) {
        rc = ferry_err_set(err, FERRY_EREMOTE,
                           "unexpected %s result: %zu columns per row, expected %zu", what,
                           r.n_cols, n_spec);
        goto out;
    }
    /* calloc: a record whose parse stops half-way has NULL in its remaining strings */
    recs = calloc(r.n_rows ? r.n_rows : 1, rec_size);
    if (!recs) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < r.n_rows; i++)
        for (size_t c = 0; c < n_spec; c++)
            if ((rc = get_field(&r, i, c, &spec[c], recs + i * rec_size, what, err)))
                goto out;
    *out = recs;
    *n = r.n_rows;
    recs = NULL;
out:
    free_records(spec, n_spec, rec_size, recs, r.n_rows);
    ferry_ch_rows_free(&r);
    return rc;
}

/* sql (a SELECT up to its WHERE) completed with the table's condition and tail, run, and its
 * rows parsed as parse_records does. */
static int select_records(ferry_ch_client *c, ferry_buf *sql, const char *db, const char *table,
                          const char *tail, const char *what, const col_spec *spec,
                          size_t n_spec, size_t rec_size, void **out, size_t *n, ferry_err *err)
{
    ferry_buf res = FERRY_BUF_INIT;
    int rc;
    if (where_table(sql, db, table, "table") || ferry_buf_puts(sql, tail)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    } else if (!(rc = run_text(c, sql, &res, err))) {
        size_t len = res.len;
        rc = parse_records(ferry_buf_detach(&res), len, what, spec, n_spec, rec_size, out, n,
                           err);
    }
    ferry_buf_free(&res);
    return rc;
}

static const col_spec partition_cols[] = {
    {COL_STR, offsetof(ferry_ch_partition, partition_id)},
    {COL_STR, offsetof(ferry_ch_partition, partition)},
    {COL_STR, offsetof(ferry_ch_partition, disk_name)},
    {COL_U64, offsetof(ferry_ch_partition, parts)},
    {COL_U64, offsetof(ferry_ch_partition, rows)},
    {COL_U64, offsetof(ferry_ch_partition, bytes_on_disk)},
};

void ferry_ch_partitions_free(ferry_ch_partition *p, size_t n)
{
    free_records(partition_cols, N_SPEC(partition_cols), sizeof *p, p, n);
}

int ferry_ch_parse_partitions(char *text, size_t len, ferry_ch_partition **out, size_t *n,
                              ferry_err *err)
{
    void *recs = NULL;
    int rc = parse_records(text, len, "system.parts partitions", partition_cols,
                           N_SPEC(partition_cols), sizeof **out, &recs, n, err);
    *out = recs;
    return rc;
}

static const col_spec part_cols[] = {
    {COL_STR, offsetof(ferry_ch_part, name)},
    {COL_STR, offsetof(ferry_ch_part, partition_id)},
    {COL_STR, offsetof(ferry_ch_part, partition)},
    {COL_STR, offsetof(ferry_ch_part, disk_name)},
    {COL_STR, offsetof(ferry_ch_part, path)},
    {COL_STR, offsetof(ferry_ch_part, hash_of_all_files)},
    {COL_U64, offsetof(ferry_ch_part, rows)},
    {COL_U64, offsetof(ferry_ch_part, bytes_on_disk)},
    {COL_I64, offsetof(ferry_ch_part, min_block_number)},
    {COL_I64, offsetof(ferry_ch_part, max_block_number)},
    {COL_U32, offsetof(ferry_ch_part, level)},
};

void ferry_ch_parts_free(ferry_ch_part *p, size_t n)
{
    free_records(part_cols, N_SPEC(part_cols), sizeof *p, p, n);
}

int ferry_ch_parse_parts(char *text, size_t len, ferry_ch_part **out, size_t *n, ferry_err *err)
{
    void *recs = NULL;
    int rc = parse_records(text, len, "system.parts", part_cols, N_SPEC(part_cols), sizeof **out,
                           &recs, n, err);
    *out = recs;
    return rc;
}

static const col_spec detached_cols[] = {
    {COL_STR, offsetof(ferry_ch_detached_part, name)},
    {COL_STR_NULLABLE, offsetof(ferry_ch_detached_part, partition_id)},
    {COL_STR_NULLABLE, offsetof(ferry_ch_detached_part, reason)},
    {COL_STR, offsetof(ferry_ch_detached_part, disk)},
    {COL_STR, offsetof(ferry_ch_detached_part, path)},
    {COL_U64, offsetof(ferry_ch_detached_part, bytes_on_disk)},
};

void ferry_ch_detached_free(ferry_ch_detached_part *p, size_t n)
{
    free_records(detached_cols, N_SPEC(detached_cols), sizeof *p, p, n);
}

int ferry_ch_parse_detached(char *text, size_t len, ferry_ch_detached_part **out, size_t *n,
                            ferry_err *err)
{
    void *recs = NULL;
    int rc = parse_records(text, len, "system.detached_parts", detached_cols,
                           N_SPEC(detached_cols), sizeof **out, &recs, n, err);
    *out = recs;
    return rc;
}

int ferry_ch_parse_version(const char *text, ferry_ch_version *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->text, sizeof out->text, "%s", text);
    ferry_chomp(out->text);
    int consumed = 0;
    if (sscanf(out->text, "%d.%d.%d%n", &out->major, &out->minor, &out->patch, &consumed) != 3 ||
        out->major <= 0)
        return ferry_err_set(err, FERRY_EREMOTE, "unexpected server version '%s'", out->text);
    return FERRY_OK;
}

bool ferry_ch_replace_keeps_replaced(const ferry_ch_version *v)
{
    return !v || v->major < 26 || (v->major == 26 && v->minor < 7);
}

/* ---- helpers ------------------------------------------------------------------------------- */

int ferry_ch_server_version(ferry_ch_client *c, ferry_ch_version *out, ferry_err *err)
{
    ferry_buf b = FERRY_BUF_INIT;
    int rc = ferry_ch_query_buf(c, "SELECT version()", "TabSeparated", &b, NULL, err);
    if (!rc)
        rc = ferry_ch_parse_version(ferry_buf_cstr(&b), out, err);
    ferry_buf_free(&b);
    return rc;
}

int ferry_ch_list_partitions(ferry_ch_client *c, const char *db, const char *table,
                             ferry_ch_partition **out, size_t *n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    const char *disk, *bytes;
    void *recs = NULL;
    *out = NULL;
    *n = 0;
    int rc = col_or(c, "parts", "disk_name", "'default'", &disk, err);
    if (!rc)
        rc = col_or(c, "parts", "bytes_on_disk", "bytes", &bytes, err);
    if (rc)
        goto out;
    if (ferry_buf_printf(&sql, "SELECT partition_id, partition, %s AS disk, count(), sum(rows), "
                               "sum(%s) FROM system.parts WHERE active AND", disk, bytes) < 0) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    rc = select_records(c, &sql, db, table, " GROUP BY partition_id, partition, disk ORDER BY "
                        "partition_id, disk", "system.parts partitions", partition_cols,
                        N_SPEC(partition_cols), sizeof **out, &recs, n, err);
    *out = recs;
out:
    if (rc)
        ferry_err_prefix(err, "partitions of %s.%s: ", db, table);
    ferry_buf_free(&sql);
    return rc;
}

int ferry_ch_list_parts(ferry_ch_client *c, const char *db, const char *table,
                        ferry_ch_part **out, size_t *n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    const char *disk, *hash, *bytes;
    void *recs = NULL;
    *out = NULL;
    *n = 0;
    int rc = col_or(c, "parts", "disk_name", "'default'", &disk, err);
    if (!rc)
        rc = col_or(c, "parts", "hash_of_all_files", "''", &hash, err);
    if (!rc)
        rc = col_or(c, "parts", "bytes_on_disk", "bytes", &bytes, err);
    if (rc)
        goto out;
    if (ferry_buf_printf(&sql, "SELECT name, partition_id, partition, %s, path, %s, rows, %s, "
                               "min_block_number, max_block_number, level FROM system.parts "
                               "WHERE active AND", disk, hash, bytes) < 0) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    rc = select_records(c, &sql, db, table, " ORDER BY name", "system.parts", part_cols,
                        N_SPEC(part_cols), sizeof **out, &recs, n, err);
    *out = recs;
out:
    if (rc)
        ferry_err_prefix(err, "parts of %s.%s: ", db, table);
    ferry_buf_free(&sql);
    return rc;
}

int ferry_ch_list_detached(ferry_ch_client *c, const char *db, const char *table,
                           ferry_ch_detached_part **out, size_t *n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    const char *disk, *path, *bytes;
    bool has = false;
    void *recs = NULL;
    *out = NULL;
    *n = 0;
    int rc = ferry_ch_system_has_table(c, "detached_parts", &has, err);
    if (rc)
        goto out;
    if (!has) {
        ferry_ch_version v;
        ferry_err verr;
        const char *vt = ferry_ch_server_version(c, &v, &verr) ? "this version" : v.text;
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED,
                           "ClickHouse %s at %s has no system.detached_parts table (it came in "
                           "19.x); upgrade the server to list detached parts", vt,
                           ferry_ch_client_url(c));
        goto out;
    }
    rc = col_or(c, "detached_parts", "disk", "'default'", &disk, err);
    if (!rc)
        rc = col_or(c, "detached_parts", "path", "''", &path, err);
    if (!rc)
        rc = col_or(c, "detached_parts", "bytes_on_disk", "toUInt64(0)", &bytes, err);
    if (rc)
        goto out;
    if (ferry_buf_printf(&sql, "SELECT name, partition_id, reason, %s, %s, %s FROM "
                               "system.detached_parts WHERE", disk, path, bytes) < 0) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    rc = select_records(c, &sql, db, table, " ORDER BY name", "system.detached_parts",
                        detached_cols, N_SPEC(detached_cols), sizeof **out, &recs, n, err);
    *out = recs;
out:
    if (rc && rc != FERRY_EUNSUPPORTED)
        ferry_err_prefix(err, "detached parts of %s.%s: ", db, table);
    ferry_buf_free(&sql);
    return rc;
}

void ferry_ch_table_info_free(ferry_ch_table_info *info)
{
    if (!info)
        return;
    free(info->engine);
    free(info->storage_policy);
    free(info->engine_full);
    memset(info, 0, sizeof *info);
}

int ferry_ch_table_info_get(ferry_ch_client *c, const char *db, const char *table,
                            ferry_ch_table_info *info, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows r = {0};
    const char *policy;
    memset(info, 0, sizeof *info);
    int rc = col_or(c, "tables", "storage_policy", "''", &policy, err);
    if (rc)
        goto out;
    if (ferry_buf_printf(&sql, "SELECT engine, engine_full, %s FROM system.tables WHERE",
                         policy) < 0 ||
        where_table(&sql, db, table, "name")) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = ferry_ch_query_rows(c, ferry_buf_cstr(&sql), &r, NULL, err)))
        goto out;
    if (r.n_rows == 0)
        goto out;
    if (r.n_cols != 3) {
        rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected system.tables result (%zu columns)",
                           r.n_cols);
        goto out;
    }
    info->exists = true;
    static const col_spec table_cols[] = {
        {COL_STR, offsetof(ferry_ch_table_info, engine)},
        {COL_STR, offsetof(ferry_ch_table_info, engine_full)},
        {COL_STR, offsetof(ferry_ch_table_info, storage_policy)},
    };
    for (size_t col = 0; col < N_SPEC(table_cols) && !rc; col++)
        rc = get_field(&r, 0, col, &table_cols[col], info, "system.tables", err);
out:
    if (rc) {
        ferry_ch_table_info_free(info);
        ferry_err_prefix(err, "table %s.%s: ", db, table);
    }
    ferry_ch_rows_free(&r);
    ferry_buf_free(&sql);
    return rc;
}

void ferry_ch_data_paths_free(ferry_ch_data_path *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++) {
        free(p[i].disk);
        free(p[i].path);
    }
    free(p);
}

int ferry_ch_table_data_paths(ferry_ch_client *c, const char *db, const char *table,
                              ferry_ch_data_path **out, size_t *n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows paths = {0}, disks = {0};
    ferry_ch_data_path *p = NULL;
    ferry_ch_table_info info = {0};
    bool has_paths = false, has_disks = false;
    size_t np = 0;
    *out = NULL;
    *n = 0;
    int rc = ferry_ch_table_info_get(c, db, table, &info, err);
    if (rc)
        goto out;
    if (!info.exists) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "table %s.%s does not exist on %s", db, table,
                           ferry_ch_client_url(c));
        goto out;
    }
    if ((rc = ferry_ch_system_has_column(c, "tables", "data_paths", &has_paths, err)) ||
        (rc = ferry_ch_system_has_table(c, "disks", &has_disks, err)))
        goto out;
    if (ferry_buf_puts(&sql, has_paths ? "SELECT arrayJoin(data_paths) FROM system.tables WHERE"
                                       : "SELECT data_path FROM system.tables WHERE") ||
        where_table(&sql, db, table, "name")) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = ferry_ch_query_rows(c, ferry_buf_cstr(&sql), &paths, NULL, err)))
        goto out;
    /* A cache disk shares the metadata path of the object-storage disk it wraps: of disks with
     * the same path, the one in the table's storage policy is the table's (listed first) */
    ferry_buf_reset(&sql);
    if (ferry_buf_puts(&sql, "SELECT name, path FROM system.disks") ||
        (info.storage_policy && *info.storage_policy &&
         (ferry_buf_puts(&sql, " ORDER BY has((SELECT groupArrayArray(disks) FROM "
                               "system.storage_policies WHERE policy_name = ") ||
          ferry_ch_quote(&sql, info.storage_policy) ||
          ferry_buf_puts(&sql, "), name) DESC, name")))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (has_disks && (rc = ferry_ch_query_rows(c, ferry_buf_cstr(&sql), &disks, NULL, err)))
        goto out;
    p = calloc(paths.n_rows ? paths.n_rows : 1, sizeof *p);
    if (!p) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < paths.n_rows; i++) {
        const char *path = ferry_ch_rows_get(&paths, i, 0);
        if (!*path)
            continue; /* tables without data directories (Memory, views) */
        const char *disk = "default";
        size_t best = 0;
        for (size_t d = 0; disks.n_cols == 2 && d < disks.n_rows; d++) {
            const char *dp = ferry_ch_rows_get(&disks, d, 1);
            size_t dl = strlen(dp);
            if (dl > best && !strncmp(path, dp, dl)) {
                best = dl;
                disk = ferry_ch_rows_get(&disks, d, 0);
            }
        }
        p[np].disk = strdup(disk);
        p[np].path = strdup(path);
        np++;
        if (!p[np - 1].disk || !p[np - 1].path) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }
    *out = p;
    *n = np;
    p = NULL;
out:
    if (rc && rc != FERRY_ENOTFOUND)
        ferry_err_prefix(err, "data paths of %s.%s: ", db, table);
    ferry_ch_data_paths_free(p, np);
    ferry_ch_table_info_free(&info);
    ferry_ch_rows_free(&paths);
    ferry_ch_rows_free(&disks);
    ferry_buf_free(&sql);
    return rc;
}
