/* ch_probe: drives ferry's ClickHouse client helpers from shell tests (tests/integration) and
 * prints their parsed results as tab-separated lines, so a test can check them against the real
 * server. Usage: ch_probe URL COMMAND [ARGS]; CH_USER and CH_PASSWORD_FILE select credentials. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/clickhouse.h"
#include "ferry/lines.h"
#include "ferry/strutil.h"

static int fail(const char *what, const ferry_err *err, const ferry_ch_status *st)
{
    fprintf(stderr, "%s failed: code=%s ch_code=%d in_band=%d attempts=%d: %s\n", what,
            ferry_code_name(err->code), st ? st->ch_code : 0, st ? st->in_band : 0,
            st ? st->attempts : 0, err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ch_probe URL version|partitions|parts|detached|paths|table|"
                        "reuse|rows|exec ...\n");
        return 2;
    }
    ferry_err err = {0};
    char *password = NULL;
    const char *pwfile = getenv("CH_PASSWORD_FILE");
    if (pwfile && *pwfile) {
        size_t len;
        if (ferry_read_file(pwfile, &password, &len, &err))
            return fail("reading the password", &err, NULL);
        ferry_chomp(password);
    }
    ferry_ch_options o = {.url = argv[1], .user = getenv("CH_USER"), .password = password,
                          .read_timeout_ms = 20000, .backoff_ms = 50};
    const char *att = getenv("CH_ATTEMPTS");
    if (att)
        o.max_attempts = atoi(att);
    ferry_ch_client *c = NULL;
    if (ferry_ch_client_new(&o, &c, &err))
        return fail("client", &err, NULL);
    const char *cmd = argv[2];
    const char *db = argc > 3 ? argv[3] : "default";
    const char *tbl = argc > 4 ? argv[4] : "";
    int status = 0;
    if (!strcmp(cmd, "version")) {
        ferry_ch_version v;
        if (ferry_ch_server_version(c, &v, &err))
            status = fail("version", &err, NULL);
        else
            printf("%s\t%d\t%d\t%d\n", v.text, v.major, v.minor, v.patch);
    } else if (!strcmp(cmd, "partitions")) {
        ferry_ch_partition *p;
        size_t n;
        if (ferry_ch_list_partitions(c, db, tbl, &p, &n, &err))
            status = fail("partitions", &err, NULL);
        for (size_t i = 0; !status && i < n; i++)
            printf("%s\t%s\t%s\t%llu\t%llu\t%llu\n", p[i].partition_id, p[i].partition,
                   p[i].disk_name, (unsigned long long)p[i].parts, (unsigned long long)p[i].rows,
                   (unsigned long long)p[i].bytes_on_disk);
        if (!status)
            ferry_ch_partitions_free(p, n);
    } else if (!strcmp(cmd, "parts")) {
        ferry_ch_part *p;
        size_t n;
        if (ferry_ch_list_parts(c, db, tbl, &p, &n, &err))
            status = fail("parts", &err, NULL);
        for (size_t i = 0; !status && i < n; i++)
            printf("%s\t%s\t%s\t%llu\t%llu\t%s\t%s\t%lld\t%lld\t%u\n", p[i].name,
                   p[i].partition_id, p[i].disk_name, (unsigned long long)p[i].rows,
                   (unsigned long long)p[i].bytes_on_disk, p[i].path, p[i].hash_of_all_files,
                   (long long)p[i].min_block_number, (long long)p[i].max_block_number,
                   p[i].level);
        if (!status)
            ferry_ch_parts_free(p, n);
    } else if (!strcmp(cmd, "detached")) {
        ferry_ch_detached_part *p;
        size_t n;
        int rc = ferry_ch_list_detached(c, db, tbl, &p, &n, &err);
        if (rc == FERRY_EUNSUPPORTED) {
            printf("unsupported\t%s\n", err.msg);
        } else if (rc) {
            status = fail("detached", &err, NULL);
        } else {
            for (size_t i = 0; i < n; i++)
                printf("%s\t%s\t%s\t%s\t%llu\n", p[i].name,
                       p[i].partition_id ? p[i].partition_id : "NULL",
                       p[i].reason ? p[i].reason : "NULL", p[i].disk,
                       (unsigned long long)p[i].bytes_on_disk);
            ferry_ch_detached_free(p, n);
        }
    } else if (!strcmp(cmd, "paths")) {
        ferry_ch_data_path *p;
        size_t n;
        if (ferry_ch_table_data_paths(c, db, tbl, &p, &n, &err))
            status = fail("paths", &err, NULL);
        for (size_t i = 0; !status && i < n; i++)
            printf("%s\t%s\n", p[i].disk, p[i].path);
        if (!status)
            ferry_ch_data_paths_free(p, n);
    } else if (!strcmp(cmd, "table")) {
        ferry_ch_table_info ti;
        if (ferry_ch_table_info_get(c, db, tbl, &ti, &err))
            status = fail("table", &err, NULL);
        else
            printf("%d\t%s\t%s\n", ti.exists, ti.engine ? ti.engine : "-",
                   ti.storage_policy ? ti.storage_policy : "-");
        ferry_ch_table_info_free(&ti);
    } else if (!strcmp(cmd, "reuse")) {
        /* Three queries in a row: the first opens a connection, the others reuse it. */
        for (int i = 0; i < 3 && !status; i++) {
            ferry_ch_status st;
            ferry_buf b = FERRY_BUF_INIT;
            if (ferry_ch_query_buf(c, "SELECT 1", NULL, &b, &st, &err))
                status = fail("reuse", &err, &st);
            else
                printf("query %d new_connections=%ld\n", i + 1, st.num_connects);
            ferry_buf_free(&b);
        }
        ferry_ch_stats s;
        ferry_ch_client_stats(c, &s);
        printf("total queries=%llu connects=%llu\n", (unsigned long long)s.queries,
               (unsigned long long)s.connects);
    } else if (!strcmp(cmd, "rows") && argc > 3) {
        ferry_ch_rows r;
        ferry_ch_status st;
        if (ferry_ch_query_rows(c, argv[3], &r, &st, &err)) {
            status = fail("rows", &err, &st);
        } else {
            printf("rows=%zu cols=%zu\n", r.n_rows, r.n_cols);
            for (size_t i = 0; i < r.n_rows * r.n_cols; i++) {
                printf("[");
                for (size_t k = 0; k < r.lens[i]; k++) {
                    unsigned char ch = (unsigned char)r.fields[i][k];
                    if (ch < 32 || ch == '\\')
                        printf("\\x%02x", ch);
                    else
                        putchar(ch);
                }
                printf("]%s", r.nulls[i] ? "NULL" : "");
                putchar((i + 1) % r.n_cols ? ' ' : '\n');
            }
            ferry_ch_rows_free(&r);
        }
    } else if (!strcmp(cmd, "exec") && argc > 3) {
        ferry_ch_status st;
        ferry_ch_query q = {.sql = argv[3], .idempotent = argc > 4 && !strcmp(argv[4], "idem")};
        if (ferry_ch_exec(c, &q, &st, &err))
            status = fail("exec", &err, &st);
        else
            printf("ok attempts=%d\n", st.attempts);
    } else {
        fprintf(stderr, "ch_probe: unknown command %s\n", cmd);
        status = 2;
    }
    ferry_ch_client_free(c);
    free(password);
    return status;
}
