/* Partition fingerprints for verification (see verify.h). */
#include "ferry/verify.h"
#include "ferry/buf.h"
#include "ferry/partition.h"
#include "ferry/strutil.h"

#include <stdio.h>
#include <string.h>

static int parse_u64_field(const char *s, uint64_t *out) { return ferry_parse_u64(s, out) ? 0 : -1; }

int ferry_fingerprint_partition(ferry_ch_client *c, const char *db, const char *table,
                                const char *partition_id, ferry_fingerprint *out, ferry_err *err)
{
    int rc;
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    memset(out, 0, sizeof *out);
    /* _partition_id filters on the partition without knowing the partition key. */
    ferry_buf_puts(&sql, "SELECT count(), sum(h), groupBitXor(h), uniqExact(h) FROM (SELECT "
                         "cityHash64(*) AS h FROM ");
    ferry_sql_ident(db, &sql);
    ferry_buf_putc(&sql, '.');
    ferry_sql_ident(table, &sql);
    ferry_buf_puts(&sql, " WHERE _partition_id = ");
    ferry_sql_quote(partition_id, &sql);
    ferry_buf_puts(&sql, ") SETTINGS max_threads = 4\n");
    rc = ferry_ch_query_buf(c, ferry_buf_cstr(&sql), "TabSeparated", &res, NULL, err);
    if (rc)
        goto out;
    char *f[8];
    char *line = res.data ? res.data : (char *)"";
    ferry_chomp(line);
    if (ferry_split(line, '\t', f, 8) != 4 || parse_u64_field(f[0], &out->rows) ||
        parse_u64_field(f[1], &out->hash_sum) || parse_u64_field(f[2], &out->hash_xor) ||
        parse_u64_field(f[3], &out->distinct)) {
        rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected fingerprint answer for %s.%s "
                           "partition %s", db, table, partition_id);
        goto out;
    }
    ferry_buf_reset(&sql);
    ferry_buf_reset(&res);
    ferry_buf_puts(&sql, "SELECT count(), sum(bytes_on_disk) FROM system.parts WHERE active AND "
                         "database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(partition_id, &sql);
    rc = ferry_ch_query_buf(c, ferry_buf_cstr(&sql), "TabSeparated", &res, NULL, err);
    if (rc)
        goto out;
    line = res.data ? res.data : (char *)"";
    ferry_chomp(line);
    if (ferry_split(line, '\t', f, 8) != 2 || parse_u64_field(f[0], &out->parts) ||
        parse_u64_field(f[1], &out->bytes))
        rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected parts answer for %s.%s partition %s",
                           db, table, partition_id);
out:
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}

bool ferry_fingerprint_same(const ferry_fingerprint *a, const ferry_fingerprint *b, char *why,
                            size_t whysz)
{
    if (a->rows != b->rows)
        snprintf(why, whysz, "rows differ: %llu vs %llu", (unsigned long long)a->rows,
                 (unsigned long long)b->rows);
    else if (a->distinct != b->distinct)
        snprintf(why, whysz, "distinct rows differ: %llu vs %llu",
                 (unsigned long long)a->distinct, (unsigned long long)b->distinct);
    else if (a->hash_sum != b->hash_sum || a->hash_xor != b->hash_xor)
        snprintf(why, whysz, "row contents differ (same row count %llu)",
                 (unsigned long long)a->rows);
    else
        return true;
    return false;
}

int ferry_fingerprint_partitions(ferry_ch_client *c, const char *db, const char *table,
                                 const char *const *ids, size_t n, ferry_fingerprint *out,
                                 ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    memset(out, 0, n * sizeof *out);
    if (!n)
        return FERRY_OK;
    ferry_buf_puts(&sql, "SELECT _partition_id, count(), sum(h), groupBitXor(h), uniqExact(h) "
                         "FROM (SELECT _partition_id, cityHash64(*) AS h FROM ");
    ferry_sql_ident(db, &sql);
    ferry_buf_putc(&sql, '.');
    ferry_sql_ident(table, &sql);
    ferry_buf_puts(&sql, " WHERE _partition_id IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_puts(&sql, ", ");
        ferry_sql_quote(ids[i], &sql);
    }
    ferry_buf_puts(&sql, ")) GROUP BY _partition_id SETTINGS max_threads = 4\n");
    int rc = ferry_ch_query_buf(c, ferry_buf_cstr(&sql), "TabSeparated", &res, NULL, err);
    char *save = NULL;
    for (char *line = rc ? NULL : strtok_r(res.data ? res.data : (char *)"", "\n", &save);
         !rc && line; line = strtok_r(NULL, "\n", &save)) {
        char *f[8];
        ferry_fingerprint fp = {0};
        if (ferry_split(line, '\t', f, 8) != 5 || parse_u64_field(f[1], &fp.rows) ||
            parse_u64_field(f[2], &fp.hash_sum) || parse_u64_field(f[3], &fp.hash_xor) ||
            parse_u64_field(f[4], &fp.distinct)) {
            rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected fingerprint answer for %s.%s",
                               db, table);
            break;
        }
        for (size_t i = 0; i < n; i++)
            if (!strcmp(ids[i], f[0]))
                out[i] = fp;
    }
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}
