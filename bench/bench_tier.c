/* Tiering benchmark: the blog's tenant (2 million rows over 8 days, 5 days tiered; its reference:
 * 176 ms to upload the five cold days, about 100 ms to load them back) and a tenant SCALE times
 * larger (default 100, $FERRY_BENCH_TIER_SCALE), side by side in one run on a one-node lab with
 * the local object store. Each is tiered with ferry_tier_run (the real flow: agent upload,
 * pointer parts, ATTACH, REPLACE, verification, catalog); before that, the same frozen files are
 * copied plainly into the same store with the uploader role (the physical limit for the upload).
 * Prints one JSON object: bytes uploaded, pointer bytes written, wall time per step, upload and
 * plain-copy throughput.
 * Needs ferry-node one directory up (build-release/ferry-node) or $FERRY_NODE_BIN. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/err.h"
#include "ferry/lab.h"
#include "ferry/objstore.h"
#include "ferry/tier.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static ferry_ch_client *ch;

static void q(const char *sql)
{
    ferry_err err = {0};
    ferry_buf out = FERRY_BUF_INIT;
    if (ferry_ch_query_buf(ch, sql, NULL, &out, NULL, &err)) {
        fprintf(stderr, "bench_tier: %s: %s\n", sql, err.msg);
        exit(1);
    }
    ferry_buf_free(&out);
}

/* ---- plain copy of a freeze's files into the store ---------------------------------------- */

static ferry_objstore *copy_store;
static const char *copy_prefix;
static size_t copy_root_len;
static uint64_t copy_bytes, copy_files;

static int copy_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || !strcmp(path + strlen(path) - 13, "increment.txt"))
        return 0;
    char key[PATH_MAX + 64];
    snprintf(key, sizeof key, "%s%s", copy_prefix, path + copy_root_len);
    int fd = open(path, O_RDONLY);
    ferry_err err = {0};
    if (fd < 0 || ferry_objstore_put_fd(copy_store, key, fd, &err)) {
        fprintf(stderr, "bench_tier: plain copy of %s: %s\n", path, err.msg);
        exit(1);
    }
    close(fd);
    copy_bytes += (uint64_t)sb->st_size;
    copy_files++;
    return 0;
}

typedef struct tenant_run {
    const char *name;
    int tenant;
    uint64_t rows;
    json_t *result;
} tenant_run;

static void run_tenant(const char *dir, const char *conf, tenant_run *t)
{
    char sql[1024], shadow[PATH_MAX];
    /* the plain copy: FREEZE the cold days under another name, put every file, unfreeze */
    for (int d = 4; d <= 8; d++) {
        snprintf(sql, sizeof sql, "ALTER TABLE events FREEZE PARTITION (%d, toYYYYMMDD(today() - "
                 "%d), 0) WITH NAME 'benchcopy'", t->tenant, d);
        q(sql);
    }
    snprintf(shadow, sizeof shadow, "%s/node1/data/shadow/benchcopy", dir);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bench-copy/%s", t->name);
    copy_prefix = prefix;
    copy_root_len = strlen(shadow);
    copy_bytes = copy_files = 0;
    double c0 = now_ms();
    nftw(shadow, copy_one, 16, FTW_PHYS);
    double copy_ms = now_ms() - c0;
    q("ALTER TABLE events UNFREEZE WITH NAME 'benchcopy'");
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", shadow);
    if (system(cmd) != 0)
        exit(1);

    /* the real flow */
    char tenant[16];
    snprintf(tenant, sizeof tenant, "%d", t->tenant);
    ferry_tier_options o = {.config_path = conf, .older_than = 3 * 86400, .tenant = tenant};
    json_t *report = NULL;
    ferry_err err = {0};
    double t0 = now_ms();
    if (ferry_tier_run(&o, &report, &err)) {
        fprintf(stderr, "bench_tier: tiering %s: %s\n", t->name, err.msg);
        exit(1);
    }
    double wall = now_ms() - t0;
    json_t *steps = json_object_get(report, "step_ms");
    double upload_ms = json_number_value(json_object_get(steps, "UPLOAD"));
    double load_ms = json_number_value(json_object_get(report, "load_sql_ms"));
    double fp_ms = json_number_value(json_object_get(report, "fingerprint_ms"));
    uint64_t up = (uint64_t)json_integer_value(json_object_get(report, "bytes_uploaded"));
    t->result = json_pack(
        "{s:s, s:I, s:i, s:I, s:I, s:I, s:I, s:O, s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f}", "tenant",
        t->name, "rows", (json_int_t)t->rows, "cold_days", 5, "partitions_tiered",
        json_integer_value(json_object_get(report, "partitions_tiered")), "bytes_uploaded",
        (json_int_t)up, "files_uploaded",
        json_integer_value(json_object_get(report, "files_uploaded")), "pointer_bytes",
        json_integer_value(json_object_get(report, "pointer_bytes")), "step_ms", steps, "wall_ms",
        wall, "upload_ms", upload_ms, "upload_mb_per_s", upload_ms > 0 ? up / 1e3 / upload_ms : 0.0,
        "load_back_ms", load_ms, "verify_fingerprint_ms", fp_ms, "plain_copy_bytes", (json_int_t)copy_bytes, "plain_copy_ms",
        copy_ms, "plain_copy_mb_per_s", copy_ms > 0 ? copy_bytes / 1e3 / copy_ms : 0.0,
        "upload_vs_plain_copy", upload_ms > 0 ? copy_ms / upload_ms : 0.0);
    json_decref(report);
}

int main(void)
{
    int scale = getenv("FERRY_BENCH_TIER_SCALE") ? atoi(getenv("FERRY_BENCH_TIER_SCALE")) : 100;
    if (scale < 1)
        scale = 1;
    char dir[] = "/tmp/ferry-bench-tier.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char self[PATH_MAX], nodebin[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0 && !getenv("FERRY_NODE_BIN")) {
        self[n] = '\0';
        *strrchr(self, '/') = '\0';
        snprintf(nodebin, sizeof nodebin, "%s/../ferry-node", self);
        setenv("FERRY_NODE_BIN", nodebin, 1);
    }
    ferry_err err = {0};
    ferry_lab_options lo = {.dir = dir, .nodes = 1, .timeout_s = 120};
    if (ferry_lab_up(&lo, &err)) {
        fprintf(stderr, "bench_tier: %s\n", err.msg);
        return 1;
    }
    json_t *st = NULL;
    ferry_lab_status(dir, &st, &err);
    const char *base = json_string_value(
        json_object_get(json_array_get(json_object_get(st, "nodes"), 0), "http"));
    ferry_ch_options co = {.url = base, .read_timeout_ms = 3600 * 1000};
    if (ferry_ch_client_new(&co, &ch, &err))
        return 1;
    char conf[PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(conf, sizeof conf, "%s/ferry.conf", dir);
    FILE *fp = fopen(conf, "a");
    if (!fp)
        return 1;
    fprintf(fp, "\n[table \"events\"]\ndatabase = default\nlayout = shared\n");
    fclose(fp);
    snprintf(cmd, sizeof cmd, "%s/../ferry init --config %s >/dev/null", self, conf);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_tier: ferry init failed (ferry next to the bench's directory?)\n");
        return 1;
    }
    q("CREATE TABLE events (tenant UInt32, day UInt32, split UInt32, ts DateTime, user UInt32, "
      "value UInt64) ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (ts, user) "
      "SETTINGS storage_policy = 'tiered'");
    tenant_run runs[2] = {{.name = "blog", .tenant = 1, .rows = 2000000},
                          {.name = "large", .tenant = 2, .rows = 2000000ULL * (uint64_t)scale}};
    double i0 = now_ms();
    for (int r = 0; r < 2; r++)
        for (int d = 1; d <= 8; d++) {
            char sql[1024];
            snprintf(sql, sizeof sql, "INSERT INTO events SELECT %d, toYYYYMMDD(today() - %d), 0, "
                     "toDateTime(today() - %d) + intDiv(number * 86400, %llu), "
                     "cityHash64(number, %d) %% 50000, number FROM numbers(%llu)",
                     runs[r].tenant, d, d, (unsigned long long)(runs[r].rows / 8), d,
                     (unsigned long long)(runs[r].rows / 8));
            q(sql);
        }
    q("OPTIMIZE TABLE events FINAL");
    double insert_ms = now_ms() - i0;
    ferry_config cfg = {0};
    if (ferry_config_load(conf, &cfg, &err) ||
        ferry_objstore_open_from_config(&cfg, FERRY_ROLE_UPLOADER, &copy_store, &err)) {
        fprintf(stderr, "bench_tier: %s\n", err.msg);
        return 1;
    }
    for (int r = 0; r < 2; r++)
        run_tenant(dir, conf, &runs[r]);
    json_t *out = json_pack("{s:s, s:i, s:s, s:f, s:{s:i, s:i, s:s}, s:[o, o]}", "bench", "tier",
                            "scale", scale, "store", "local", "insert_ms", insert_ms, "reference",
                            "upload_ms", 176, "load_back_ms", 100, "what",
                            "blog: 5 cold days of 2M rows over 8 days, 13.0 MB in S3", "tenants",
                            runs[0].result, runs[1].result);
    char *s = json_dumps(out, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(out);
    json_decref(st);
    ferry_objstore_close(copy_store);
    ferry_config_free(&cfg);
    ferry_ch_client_free(ch);
    ferry_lab_down(dir, &err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
