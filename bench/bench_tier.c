/* Tiering benchmark, this build against a baseline build side by side in one run. Each build gets
 * a one-node lab of its own (its own ferry-node, local object store) holding the same data:
 *
 *   blog   the blog's tenant: 2 million rows over 8 days, the 5 cold days tiered (its reference:
 *          176 ms to upload the five cold days to S3, about 100 ms to load them back);
 *   large  a tenant SCALE times larger (default 100, $FERRY_BENCH_TIER_SCALE), 5 cold days;
 *          right before and right after it is tiered, the same frozen files are copied plainly
 *          into the same store with the uploader role (ferry_objstore_put_fd, in process, one
 *          file after another: the raw upload the tiering is compared with, their mean and
 *          each), each timed write starting from a flushed disk;
 *   small  SMALL partitions of about 2,000 rows each ($FERRY_BENCH_TIER_SMALL, default 120), one
 *          old day of one tenant each, in a table of their own: the per-partition fixed cost.
 *
 * Each case is tiered with each build's own `ferry tier --json` (the real flow through the node
 * agent), the builds taking turns case by case; the load average is read before and after each.
 * $FERRY_BENCH_BASELINE names the baseline's build directory (its ferry and ferry-node); without
 * it only this build runs. Prints one JSON object. Needs ferry and ferry-node one directory up
 * (build-release/) or $FERRY_NODE_BIN. $FERRY_BENCH_TIER_DIR (default /tmp) holds the labs. */
#define _DEFAULT_SOURCE
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

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static double load1(void)
{
    double l[1] = {0};
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* One build under test: its binaries and its lab. */
typedef struct build {
    const char *name;
    char ferry[PATH_MAX + 16], node[PATH_MAX + 16];
    char dir[PATH_MAX], conf[PATH_MAX + 16];
    ferry_ch_client *ch;
    ferry_config cfg;
    ferry_objstore *store; /* uploader role, for the plain copy */
} build;

/* Runs sql; its answer's first number (0 when there is none). */
static long long q(build *b, const char *sql)
{
    ferry_err err = {0};
    ferry_buf out = FERRY_BUF_INIT;
    if (ferry_ch_query_buf(b->ch, sql, NULL, &out, NULL, &err)) {
        fprintf(stderr, "bench_tier (%s): %s: %s\n", b->name, sql, err.msg);
        exit(1);
    }
    long long v = out.len ? atoll(ferry_buf_cstr(&out)) : 0;
    ferry_buf_free(&out);
    return v;
}

/* Waits (up to 120 s) until the set-up's merged-away parts are gone from the tables. The lab
 * runs with old_parts_lifetime = 0 (docs/lab.md), and ClickHouse removes a table's outdated
 * parts inside the statement of a DETACH PART (tiering's swap, tier_steps.c): left there, the
 * 40 million rows OPTIMIZE FINAL merged away would be deleted inside the first case's swap and
 * counted as its load back (290 ms against 27 measured apart; docs/benchmarks.md). On a server
 * (old_parts_lifetime 480 s) the background thread removes them long before. The tables run
 * their cleanup thread every second (their DDL): by default it backs off to once in 300 s while
 * it finds nothing, which the 100x set-up's long ingest allowed, and the wait ran out. */
static void wait_no_outdated(build *b)
{
    for (int i = 0; i < 240; i++) {
        if (q(b, "SELECT count() FROM system.parts WHERE database = 'default' AND "
                 "table IN ('events', 'small') AND NOT active") == 0)
            return;
        usleep(500 * 1000);
    }
    fprintf(stderr, "bench_tier (%s): outdated parts still there after 120 s\n", b->name);
    exit(1);
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

/* The disk of a lab machine absorbs a burst of writes fast and then slows to its sustained rate
 * (on this 2-core guest 400-800 MB/s for the first GB, 140-200 MB/s after): every timed write
 * starts from a flushed, idle disk. */
static void settle(void)
{
    sync();
    sleep(3);
}

/* Freezes the cold days of tenant under 'benchcopy' (the hard links keep the hot files after the
 * tiering replaced them), into *shadow. */
static void copy_freeze(build *b, int tenant, char *shadow, size_t shadowsz)
{
    char sql[1024];
    for (int d = 4; d <= 8; d++) {
        snprintf(sql, sizeof sql, "ALTER TABLE events FREEZE PARTITION (%d, toYYYYMMDD(today() - "
                 "%d), 0) WITH NAME 'benchcopy'", tenant, d);
        q(b, sql);
    }
    snprintf(shadow, shadowsz, "%s/node1/data/shadow/benchcopy", b->dir);
}

static void copy_unfreeze(build *b, const char *shadow)
{
    char cmd[PATH_MAX + 80];
    q(b, "ALTER TABLE events UNFREEZE WITH NAME 'benchcopy'");
    snprintf(cmd, sizeof cmd, "rm -rf %s", shadow);
    if (system(cmd) != 0)
        exit(1);
}

/* Puts every file frozen under shadow into the store under bench-copy/<tag>/, one after another
 * with the uploader role (the raw upload): *ms and *bytes of the copy alone. */
static void plain_copy(build *b, const char *shadow, const char *tag, double *ms, uint64_t *bytes)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bench-copy/%s", tag);
    copy_store = b->store;
    copy_prefix = prefix;
    copy_root_len = strlen(shadow);
    copy_bytes = copy_files = 0;
    settle();
    double c0 = now_ms();
    nftw(shadow, copy_one, 16, FTW_PHYS);
    *ms = now_ms() - c0;
    *bytes = copy_bytes;
}

/* ---- the labs ------------------------------------------------------------------------------ */

static const char *const DDL = "(tenant UInt32, day UInt32, split UInt32, ts DateTime, user "
                               "UInt32, value UInt64) ENGINE = MergeTree PARTITION BY (tenant, "
                               "day, split) ORDER BY (ts, user) SETTINGS storage_policy = 'tiered', "
                               "cleanup_delay_period = 1, max_cleanup_delay_period = 1, "
                               "cleanup_delay_period_random_add = 0";

static void lab_setup(build *b, const char *root, uint64_t large_rows, int small)
{
    snprintf(b->dir, sizeof b->dir, "%s/%s", root, b->name);
    snprintf(b->conf, sizeof b->conf, "%s/ferry.conf", b->dir);
    setenv("FERRY_NODE_BIN", b->node, 1);
    ferry_err err = {0};
    ferry_lab_options lo = {.dir = b->dir, .nodes = 1, .timeout_s = 120};
    json_t *st = NULL;
    if (ferry_lab_up(&lo, &err) || ferry_lab_status(b->dir, &st, &err)) {
        fprintf(stderr, "bench_tier (%s): %s\n", b->name, err.msg);
        exit(1);
    }
    const char *url = json_string_value(
        json_object_get(json_array_get(json_object_get(st, "nodes"), 0), "http"));
    ferry_ch_options co = {.url = url, .read_timeout_ms = 3600 * 1000};
    if (ferry_ch_client_new(&co, &b->ch, &err))
        exit(1);
    json_decref(st);
    FILE *fp = fopen(b->conf, "a");
    if (!fp)
        exit(1);
    fprintf(fp, "\n[table \"events\"]\ndatabase = default\nlayout = shared\n"
                "\n[table \"small\"]\ndatabase = default\nlayout = shared\n");
    fclose(fp);
    char cmd[3 * PATH_MAX], sql[1024];
    snprintf(cmd, sizeof cmd, "%s init --config %s >/dev/null", b->ferry, b->conf);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_tier (%s): ferry init failed\n", b->name);
        exit(1);
    }
    snprintf(sql, sizeof sql, "CREATE TABLE events %s", DDL);
    q(b, sql);
    snprintf(sql, sizeof sql, "CREATE TABLE small %s", DDL);
    q(b, sql);
    uint64_t rows[2] = {2000000, large_rows};
    for (int t = 0; t < 2; t++)
        for (int d = 1; d <= 8; d++) {
            snprintf(sql, sizeof sql, "INSERT INTO events SELECT %d, toYYYYMMDD(today() - %d), 0, "
                     "toDateTime(today() - %d) + intDiv(number * 86400, %llu), "
                     "cityHash64(number, %d) %% 50000, number FROM numbers(%llu)",
                     t + 1, d, d, (unsigned long long)(rows[t] / 8), d,
                     (unsigned long long)(rows[t] / 8));
            q(b, sql);
        }
    snprintf(sql, sizeof sql, "INSERT INTO small SELECT 100 + number %% %d, toYYYYMMDD(today() - 5), "
             "0, toDateTime(today() - 5) + number %% 86400, number %% 977, number FROM "
             "numbers(%d) SETTINGS max_partitions_per_insert_block = 100000", small, 2000 * small);
    q(b, sql);
    q(b, "OPTIMIZE TABLE events FINAL");
    q(b, "OPTIMIZE TABLE small FINAL");
    wait_no_outdated(b);
    if (ferry_config_load(b->conf, &b->cfg, &err) ||
        ferry_objstore_open_from_config(&b->cfg, FERRY_ROLE_UPLOADER, &b->store, &err)) {
        fprintf(stderr, "bench_tier (%s): %s\n", b->name, err.msg);
        exit(1);
    }
}

static void lab_teardown(build *b)
{
    ferry_err err = {0};
    ferry_objstore_close(b->store);
    ferry_config_free(&b->cfg);
    ferry_ch_client_free(b->ch);
    ferry_lab_down(b->dir, &err);
}

/* `ferry tier --json` of the build with args, from a flushed disk; the report, with the wall
 * time around the command and the load average before and after added. */
static json_t *tier(build *b, const char *args)
{
    char cmd[4 * PATH_MAX + 256];
    snprintf(cmd, sizeof cmd, "%s tier --config %s --older-than 3d --json %s 2>>%s/tier.log",
             b->ferry, b->conf, args, b->dir);
    settle();
    double l0 = load1(), t0 = now_ms();
    FILE *p = popen(cmd, "r");
    json_error_t je;
    json_t *r = p ? json_loadf(p, 0, &je) : NULL;
    int st = p ? pclose(p) : -1;
    double wall = now_ms() - t0;
    if (!r || st != 0) {
        fprintf(stderr, "bench_tier (%s): `%s` failed (exit %d): %s\n", b->name, cmd, st,
                r ? json_string_value(json_object_get(r, "error")) : je.text);
        exit(1);
    }
    json_object_set_new(r, "command_ms", json_real(wall));
    json_object_set_new(r, "load_avg_before", json_real(l0));
    json_object_set_new(r, "load_avg_after", json_real(load1()));
    return r;
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }
static double step(json_t *r, const char *s) { return num(json_object_get(r, "step_ms"), s); }

/* The figures of one case for one build, from its report. */
static json_t *figures(json_t *r)
{
    double wall = num(r, "wall_ms");
    double bytes = num(r, "bytes_uploaded");
    double verify = num(r, "fingerprint_ms") + num(r, "upload_check_ms") + step(r, "VERIFY");
    double parts = num(r, "partitions_tiered");
    json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:O, s:f, s:f}",
                          "wall_ms", wall, "partitions", parts, "bytes_uploaded", bytes,
                          "upload_pointers_ms", step(r, "UPLOAD") + step(r, "POINTERS"),
                          "load_back_ms", num(r, "load_sql_ms"), "verification_ms", verify,
                          "verification_share", wall > 0 ? verify / wall : 0.0,
                          "tier_mb_per_s", wall > 0 ? bytes / 1e3 / wall : 0.0,
                          "ms_per_partition", parts > 0 ? wall / parts : 0.0, "step_ms",
                          json_object_get(r, "step_ms"), "load_avg_before",
                          num(r, "load_avg_before"), "load_avg_after", num(r, "load_avg_after"));
    const char *extra[] = {"waves", "statements", "agent_requests", "catalog_writes",
                           "fingerprint_ms", "upload_check_ms", "files_uploaded",
                           "pointer_bytes"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++)
        if (json_object_get(r, extra[i]))
            json_object_set(o, extra[i], json_object_get(r, extra[i]));
    if (parts > 0 && wall > 0)
        json_object_set_new(o, "partitions_per_s", json_real(parts * 1e3 / wall));
    return o;
}

int main(void)
{
    int scale = getenv("FERRY_BENCH_TIER_SCALE") ? atoi(getenv("FERRY_BENCH_TIER_SCALE")) : 100;
    int small = getenv("FERRY_BENCH_TIER_SMALL") ? atoi(getenv("FERRY_BENCH_TIER_SMALL")) : 120;
    const char *base = getenv("FERRY_BENCH_BASELINE");
    if (scale < 1)
        scale = 1;
    if (small < 1)
        small = 1;
    /* $FERRY_BENCH_TIER_DIR (default /tmp): where the labs (their disks and the local store)
     * live; /dev/shm takes the machine's disk out of both the tiering and the plain copy */
    char root[512];
    const char *under = getenv("FERRY_BENCH_TIER_DIR") ? getenv("FERRY_BENCH_TIER_DIR") : "/tmp";
    if ((size_t)snprintf(root, sizeof root, "%s/ferry-bench-tier.XXXXXX", under) >= sizeof root ||
        !mkdtemp(root)) {
        fprintf(stderr, "bench_tier: cannot make a directory under %s\n", under);
        return 1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    *strrchr(self, '/') = '\0'; /* build/bench */
    build builds[2] = {{.name = "new"}, {.name = "old"}};
    size_t nb = base ? 2 : 1;
    snprintf(builds[0].ferry, sizeof builds[0].ferry, "%s/../ferry", self);
    if (getenv("FERRY_NODE_BIN"))
        snprintf(builds[0].node, sizeof builds[0].node, "%s", getenv("FERRY_NODE_BIN"));
    else
        snprintf(builds[0].node, sizeof builds[0].node, "%s/../ferry-node", self);
    if (base) {
        snprintf(builds[1].ferry, sizeof builds[1].ferry, "%s/ferry", base);
        snprintf(builds[1].node, sizeof builds[1].node, "%s/ferry-node", base);
    }
    double l0 = load1(), i0 = now_ms();
    for (size_t i = 0; i < nb; i++)
        lab_setup(&builds[i], root, 2000000ULL * (uint64_t)scale, small);
    double insert_ms = now_ms() - i0;
    json_t *cases = json_object(), *blog = json_object(), *large = json_object(),
           *smallc = json_object();
    /* the builds take turns, case by case, on their own labs */
    for (size_t i = 0; i < nb; i++) {
        json_t *r = tier(&builds[i], "--table events --tenant 1");
        json_object_set_new(blog, builds[i].name, figures(r));
        json_decref(r);
    }
    /* the raw upload of the same files right before and right after the tiering, each write
     * from a flushed disk (settle); the tiering is compared with their mean, and with each */
    for (size_t i = 0; i < nb; i++) {
        char shadow[PATH_MAX + 64];
        double ms[2] = {0, 0};
        uint64_t bytes[2] = {0, 0};
        copy_freeze(&builds[i], 2, shadow, sizeof shadow);
        plain_copy(&builds[i], shadow, "before", &ms[0], &bytes[0]);
        json_t *r = tier(&builds[i], "--table events --tenant 2");
        plain_copy(&builds[i], shadow, "after", &ms[1], &bytes[1]);
        copy_unfreeze(&builds[i], shadow);
        json_t *f = figures(r);
        double plain[2];
        for (int k = 0; k < 2; k++)
            plain[k] = ms[k] > 0 ? (double)bytes[k] / 1e3 / ms[k] : 0;
        double mean = (plain[0] + plain[1]) / 2, tier_mbs = num(f, "tier_mb_per_s");
        json_object_set_new(f, "plain_copy_bytes", json_integer((json_int_t)bytes[0]));
        json_object_set_new(f, "plain_copy_ms", json_pack("[f, f]", ms[0], ms[1]));
        json_object_set_new(f, "plain_copy_mb_per_s", json_real(mean));
        json_object_set_new(f, "plain_copy_mb_per_s_before_after",
                            json_pack("[f, f]", plain[0], plain[1]));
        json_object_set_new(f, "tier_vs_plain_copy", json_real(mean > 0 ? tier_mbs / mean : 0));
        json_object_set_new(f, "tier_vs_plain_copy_before_after",
                            json_pack("[f, f]", plain[0] > 0 ? tier_mbs / plain[0] : 0.0,
                                      plain[1] > 0 ? tier_mbs / plain[1] : 0.0));
        json_object_set_new(large, builds[i].name, f);
        json_decref(r);
    }
    for (size_t i = 0; i < nb; i++) {
        json_t *r = tier(&builds[i], "--table small");
        json_object_set_new(smallc, builds[i].name, figures(r));
        json_decref(r);
    }
    json_object_set_new(cases, "blog", blog);
    json_object_set_new(cases, "large", large);
    json_object_set_new(cases, "small", smallc);
    json_t *out = json_pack("{s:s, s:i, s:i, s:s, s:f, s:f, s:f, s:{s:i, s:i, s:s}, s:o}",
                            "bench", "tier", "scale", scale, "small_partitions", small, "store",
                            "local", "insert_ms", insert_ms, "load_avg_start", l0,
                            "load_avg_end", load1(), "reference", "upload_ms", 176,
                            "load_back_ms", 100, "what",
                            "blog: 5 cold days of 2M rows over 8 days, 13.0 MB in S3", "cases",
                            cases);
    if (base)
        json_object_set_new(out, "baseline", json_string(base));
    char *s = json_dumps(out, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(out);
    for (size_t i = 0; i < nb; i++)
        lab_teardown(&builds[i]);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd) == 0 ? 0 : 1;
}
