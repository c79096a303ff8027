/* The object store conformance suite. Run without environment it tests the local backend in a
 * temporary directory; tests/integration/objstore_s3.sh runs the same program against s3rver
 * (directly, and through the botocore signature-checking proxy) by setting
 *   FERRY_TEST_S3_ENDPOINT, FERRY_TEST_S3_BUCKET, FERRY_TEST_S3_KEY_ID, FERRY_TEST_S3_SECRET
 *   FERRY_TEST_S3_URL_STYLE   path (default) | virtual
 *   FERRY_TEST_S3_NO_ABORT=1  the server answers 405 to AbortMultipartUpload (s3rver)
 *   FERRY_TEST_S3_CHECKS_SIGNATURES=1  a wrong secret must be refused (the verifying proxy)
 *   FERRY_TEST_S3_ROLE_KEYS=DIR  a key per role (DIR/<role>.id and DIR/<role>.secret), for the
 *                              enforcing policy proxy (tests/lib/s3_policy_proxy.py)
 *   FERRY_TEST_S3_RAW_LISTING=1  listings ignore encoding-type=url (s3rver without a proxy)
 *   FERRY_TEST_S3_NO_CONDITIONAL_PUT=1  PUT ignores If-None-Match (s3rver without a proxy)
 * Every store is opened from a ferry config file with per-role secret files, and every error
 * message and log line is checked for the secrets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/objstore.h"
#include "ferry/sweep.h"

#define MIB (1024 * 1024)

static char tmpdir[256];
static char rootdir[300];
static char confpath[300];
static char logpath[300];
static const char *s3_endpoint;
static char secret[128];
static char role_secrets[3][128]; /* FERRY_TEST_S3_ROLE_KEYS: one secret per role */
static char run_prefix[64]; /* keys of this run start with it, so reruns do not collide */
static ferry_config cfg;

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, 0600);
}

static void no_secret(const char *text)
{
    if (strstr(text, secret))
        fail_msg("a secret appears in: %s", text);
    for (int i = 0; i < 3; i++)
        if (role_secrets[i][0] && strstr(text, role_secrets[i]))
            fail_msg("a secret appears in: %s", text);
    if (strstr(text, "WRONGwrongWRONGwrong"))
        fail_msg("the wrong secret appears in: %s", text);
}

/* Runs an operation expected to fail with code, checks the message names no secret and
 * contains want (when given). */
#define EXPECT_FAIL(code, want, call)                                                             \
    do {                                                                                          \
        ferry_err e_ = {0};                                                                       \
        ferry_err *err = &e_;                                                                     \
        int rc_ = (call);                                                                         \
        if (rc_ != (code))                                                                        \
            fail_msg("%s: expected %s, got %s: %s", #call, ferry_code_name(code),                 \
                     ferry_code_name(rc_), e_.msg);                                               \
        no_secret(e_.msg);                                                                        \
        if ((want) && !strstr(e_.msg, (want) ? (want) : ""))                                      \
            fail_msg("%s: message '%s' lacks '%s'", #call, e_.msg, (want) ? (want) : "");         \
    } while (0)

#define EXPECT_OK(call)                                                                           \
    do {                                                                                          \
        ferry_err e_ = {0};                                                                       \
        ferry_err *err = &e_;                                                                     \
        int rc_ = (call);                                                                         \
        if (rc_ != FERRY_OK)                                                                      \
            fail_msg("%s failed: %s (%s)", #call, e_.msg, ferry_code_name(rc_));                  \
    } while (0)

static int buf_sink(void *ud, const void *data, size_t len)
{
    return ferry_buf_append(ud, data, len);
}

static ferry_objstore *open_role(ferry_objstore_role role)
{
    ferry_objstore *st = NULL;
    EXPECT_OK(ferry_objstore_open_from_config(&cfg, role, &st, err));
    assert_int_equal(ferry_objstore_role_of(st), role);
    return st;
}

static void key_of(char *out, size_t n, const char *suffix)
{
    snprintf(out, n, "%s%s", run_prefix, suffix);
}

static char *random_bytes(size_t n, unsigned seed)
{
    char *p = malloc(n);
    uint64_t x = 0x9E3779B97F4A7C15ULL * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (char)(x >> 24);
    }
    return p;
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/ferry-objstore-XXXXXX",
             env("TMPDIR") ? env("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(rootdir, sizeof rootdir, "%s/blobs", tmpdir);
    mkdir(rootdir, 0755);
    snprintf(confpath, sizeof confpath, "%s/ferry.conf", tmpdir);
    snprintf(logpath, sizeof logpath, "%s/log", tmpdir);
    snprintf(run_prefix, sizeof run_prefix, "conf-%ld-%d/", (long)time(NULL), (int)getpid());

    int lfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(lfd >= 0);
    ferry_log_set_fd(lfd);
    ferry_log_set_level(FERRY_LOG_DEBUG);

    s3_endpoint = env("FERRY_TEST_S3_ENDPOINT");
    char text[4096], path[400];
    if (s3_endpoint) {
        snprintf(secret, sizeof secret, "%s", env("FERRY_TEST_S3_SECRET"));
        int n = snprintf(text, sizeof text,
                         "[cluster]\nname = t\n[object_store]\ntype = s3\nendpoint = %s\n"
                         "bucket = %s\nregion = us-east-1\nurl_style = %s\nprefix = parts/\n",
                         s3_endpoint, env("FERRY_TEST_S3_BUCKET"),
                         env("FERRY_TEST_S3_URL_STYLE") ? env("FERRY_TEST_S3_URL_STYLE")
                                                        : "path");
        static const char *const roles[] = {"clickhouse", "uploader", "janitor"};
        const char *role_keys = env("FERRY_TEST_S3_ROLE_KEYS");
        for (int i = 0; i < 3; i++) {
            char id[128];
            snprintf(id, sizeof id, "%s", env("FERRY_TEST_S3_KEY_ID") ? env("FERRY_TEST_S3_KEY_ID") : "");
            if (role_keys) {
                /* a key per role, as tests/lib/s3policy.sh makes them (DIR/ROLE.id, .secret) */
                char idp[400];
                snprintf(idp, sizeof idp, "%s/%s.id", role_keys, roles[i]);
                snprintf(path, sizeof path, "%s/%s.secret", role_keys, roles[i]);
                FILE *f = fopen(idp, "r");
                assert_non_null(f);
                assert_non_null(fgets(id, sizeof id, f));
                fclose(f);
                id[strcspn(id, "\n")] = '\0';
                f = fopen(path, "r");
                assert_non_null(f);
                assert_non_null(fgets(role_secrets[i], sizeof role_secrets[i], f));
                fclose(f);
                role_secrets[i][strcspn(role_secrets[i], "\n")] = '\0';
            } else {
                snprintf(path, sizeof path, "%s/%s.secret", tmpdir, roles[i]);
                char line[160];
                snprintf(line, sizeof line, "%s\n", secret);
                write_file(path, line);
            }
            n += snprintf(text + n, sizeof text - (size_t)n,
                          "[credentials \"%s\"]\naccess_key_id = %s\nsecret_access_key_file = %s\n",
                          roles[i], id, path);
        }
    } else {
        /* Local runs still need a secret to look for in messages. */
        snprintf(secret, sizeof secret, "localRunSecret/Never+Printed");
        snprintf(text, sizeof text,
                 "[cluster]\nname = t\n[object_store]\ntype = local\npath = %s/\nprefix = parts/\n",
                 rootdir);
    }
    write_file(confpath, text);
    ferry_err err = {0};
    if (ferry_config_load(confpath, &cfg, &err))
        fail_msg("config: %s", err.msg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ferry_config_free(&cfg);
    /* Every log line written during the run must be free of secrets. */
    char *log = NULL;
    FILE *f = fopen(logpath, "r");
    if (f) {
        size_t cap = 1 << 20;
        log = calloc(1, cap);
        size_t n = fread(log, 1, cap - 1, f);
        log[n] = '\0';
        fclose(f);
        if (strstr(log, secret)) {
            fprintf(stderr, "secret found in the log:\n%s\n", log);
            abort();
        }
        free(log);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return 0;
}

static void test_put_get_head(void **state)
{
    (void)state;
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    char key[256];
    key_of(key, sizeof key, "basic/hello.txt");
    const char *text = "hello, object store";
    time_t before = time(NULL);
    EXPECT_OK(ferry_objstore_put(ch, key, text, strlen(text), err));

    char *data = NULL;
    size_t len = 0;
    EXPECT_OK(ferry_objstore_get_mem(ch, key, &data, &len, err));
    assert_int_equal(len, strlen(text));
    assert_memory_equal(data, text, len);
    free(data);

    ferry_object_info info;
    EXPECT_OK(ferry_objstore_head(ch, key, &info, err));
    assert_int_equal(info.size, strlen(text));
    assert_true(info.etag[0] != '\0');
    assert_true(info.mtime >= before - 300 && info.mtime <= time(NULL) + 300);

    /* Byte ranges. */
    ferry_buf b = FERRY_BUF_INIT;
    EXPECT_OK(ferry_objstore_get(ch, key, 7, 6, buf_sink, &b, err));
    assert_int_equal(b.len, 6);
    assert_memory_equal(b.data, "object", 6);
    ferry_buf_reset(&b);
    EXPECT_OK(ferry_objstore_get(ch, key, 14, 0, buf_sink, &b, err));
    assert_string_equal(b.data, "store");
    ferry_buf_reset(&b);
    EXPECT_FAIL(FERRY_EINVAL, "outside the object",
                ferry_objstore_get(ch, key, 100, 5, buf_sink, &b, err));
    EXPECT_FAIL(FERRY_EINVAL, "outside the object",
                ferry_objstore_get(ch, key, 15, 10, buf_sink, &b, err));
    ferry_buf_free(&b);

    /* A put never replaces an object, whatever the role (the store refuses it: S3 answers
     * If-None-Match: * with 412; a store that ignores the header, as s3rver does, overwrites:
     * FERRY_TEST_S3_NO_CONDITIONAL_PUT=1). Same bytes or other bytes, same size or not. */
    if (!env("FERRY_TEST_S3_NO_CONDITIONAL_PUT")) {
        ferry_objstore *up = open_role(FERRY_ROLE_UPLOADER);
        EXPECT_FAIL(FERRY_ECONFLICT, "never replaces", ferry_objstore_put(ch, key, "v2", 2, err));
        EXPECT_FAIL(FERRY_ECONFLICT, "never replaces",
                    ferry_objstore_put(up, key, "hello, object store", 19, err));
        EXPECT_FAIL(FERRY_ECONFLICT, "never replaces",
                    ferry_objstore_put(up, key, "Hello, object Store", 19, err));
        char path[400];
        snprintf(path, sizeof path, "%s/replace.src", tmpdir);
        write_file(path, "replacement bytes");
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        EXPECT_FAIL(FERRY_ECONFLICT, "never replaces", ferry_objstore_put_fd(up, key, fd, err));
        close(fd);
        ferry_objstore_close(up);
        EXPECT_OK(ferry_objstore_get_mem(ch, key, &data, &len, err));
        assert_int_equal(len, 19);
        assert_memory_equal(data, "hello, object store", 19);
        free(data);
    }

    /* An empty object. */
    key_of(key, sizeof key, "basic/empty");
    EXPECT_OK(ferry_objstore_put(ch, key, NULL, 0, err));
    EXPECT_OK(ferry_objstore_get_mem(ch, key, &data, &len, err));
    assert_int_equal(len, 0);
    free(data);
    EXPECT_OK(ferry_objstore_head(ch, key, &info, err));
    assert_int_equal(info.size, 0);

    /* Keys with characters that need encoding. */
    key_of(key, sizeof key, "basic/sp ace+plus=eq%25&amp;é~(x).bin");
    EXPECT_OK(ferry_objstore_put(ch, key, "odd", 3, err));
    EXPECT_OK(ferry_objstore_get_mem(ch, key, &data, &len, err));
    assert_int_equal(len, 3);
    free(data);
    ferry_object_list l;
    char prefix[256];
    key_of(prefix, sizeof prefix, "basic/sp");
    EXPECT_OK(ferry_objstore_list(ch, prefix, NULL, 10, &l, err));
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].key, key);
    ferry_object_list_free(&l);
    ferry_objstore_close(ch);
}

static void test_missing_keys(void **state)
{
    (void)state;
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    ferry_objstore *jan = open_role(FERRY_ROLE_JANITOR);
    char key[256];
    key_of(key, sizeof key, "missing/nothing-here");
    char *data = NULL;
    size_t len;
    ferry_object_info info;
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_get_mem(ch, key, &data, &len, err));
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_head(ch, key, &info, err));
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_head(jan, key, &info, err));
    EXPECT_OK(ferry_objstore_delete(jan, key, err)); /* idempotent */
    ferry_object_list l;
    EXPECT_OK(ferry_objstore_list(ch, key, NULL, 0, &l, err));
    assert_int_equal(l.n, 0);
    assert_null(l.next_token);
    ferry_object_list_free(&l);
    EXPECT_FAIL(FERRY_EINVAL, "empty", ferry_objstore_put(ch, "", "x", 1, err));
    ferry_objstore_close(ch);
    ferry_objstore_close(jan);
}

static void test_list_pagination(void **state)
{
    (void)state;
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    char key[256], prefix[256];
    enum { N = 23 };
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "%slist/a/%s%02d", run_prefix, i % 2 ? "sub/" : "", i);
        char body[16];
        int bl = snprintf(body, sizeof body, "%d", i * 1000);
        EXPECT_OK(ferry_objstore_put(ch, key, body, (size_t)bl, err));
    }
    /* Neighbours that must not match "list/a/". */
    key_of(key, sizeof key, "list/ab");
    EXPECT_OK(ferry_objstore_put(ch, key, "x", 1, err));
    key_of(key, sizeof key, "list/a-x"); /* sorts before "list/a/" */
    EXPECT_OK(ferry_objstore_put(ch, key, "x", 1, err));

    key_of(prefix, sizeof prefix, "list/a/");
    char *token = NULL, last[256] = "";
    size_t total = 0, pages = 0;
    do {
        ferry_object_list l;
        EXPECT_OK(ferry_objstore_list(ch, prefix, token, 5, &l, err));
        free(token);
        token = l.next_token ? strdup(l.next_token) : NULL;
        assert_true(l.n <= 5);
        for (size_t i = 0; i < l.n; i++) {
            assert_true(strncmp(l.items[i].key, prefix, strlen(prefix)) == 0);
            assert_true(strcmp(l.items[i].key, last) > 0); /* sorted, no repeats across pages */
            snprintf(last, sizeof last, "%s", l.items[i].key);
            const char *name = strrchr(l.items[i].key, '/') + 1;
            int idx = atoi(name);
            char body[16];
            assert_int_equal(l.items[i].size, (uint64_t)snprintf(body, sizeof body, "%d", idx * 1000));
            assert_true(l.items[i].mtime > 0);
        }
        total += l.n;
        pages++;
        ferry_object_list_free(&l);
        assert_true(pages < 20);
    } while (token);
    assert_int_equal(total, N);
    assert_int_equal(pages, 5);

    /* A prefix that ends inside a name component. */
    key_of(prefix, sizeof prefix, "list/a/sub/1");
    ferry_object_list l;
    EXPECT_OK(ferry_objstore_list(ch, prefix, NULL, 0, &l, err));
    assert_int_equal(l.n, 5); /* 11 13 15 17 19 */
    ferry_object_list_free(&l);
    key_of(prefix, sizeof prefix, "list/a");
    EXPECT_OK(ferry_objstore_list(ch, prefix, NULL, 0, &l, err));
    assert_int_equal(l.n, N + 2);
    assert_null(l.next_token);
    ferry_object_list_free(&l);
    EXPECT_FAIL(FERRY_EINVAL, "above 1000", ferry_objstore_list(ch, prefix, NULL, 1001, &l, err));
    ferry_objstore_close(ch);
}

/* The sweep's listing of the whole store (ferry_sweep_list_store) over more than two pages of
 * 1000 keys (s3rver's page size too), the last page partly filled, and again when the count
 * is a whole number of pages: every key once, in order, under a prefix and from the store's
 * root (the local backend once read its root directory only for the first page). Only the
 * keys under the prefix are checked for order: s3rver sorts "a/b" before "a-x" (not bytewise),
 * which the sweep does not rely on. */
static void check_all_pages(ferry_objstore *st, const char *scope, const char *prefix, int want)
{
    ferry_object_info *all = NULL;
    size_t n = 0;
    char key[320];
    int seen = 0;
    EXPECT_OK(ferry_sweep_list_store(st, scope, &all, &n, err));
    assert_true(n >= (size_t)want);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(all[i].key, prefix, strlen(prefix)))
            continue;
        snprintf(key, sizeof key, "%s%05d", prefix, seen++);
        assert_string_equal(all[i].key, key);
        assert_int_equal(all[i].size, 1);
    }
    assert_int_equal(seen, want);
    ferry_sweep_objects_free(all, n);
}

static void test_list_all_pages(void **state)
{
    (void)state;
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    char key[320], prefix[256];
    enum { N = 2000, EXTRA = 345 };
    key_of(prefix, sizeof prefix, "many/");
    for (int round = 0; round < 2; round++) {
        int from = round == 0 ? 0 : N, to = round == 0 ? N : N + EXTRA;
        for (int i = from; i < to; i++) {
            snprintf(key, sizeof key, "%s%05d", prefix, i);
            EXPECT_OK(ferry_objstore_put(ch, key, "x", 1, err));
        }
        check_all_pages(ch, prefix, prefix, to);
        check_all_pages(ch, "", prefix, to);
    }
    ferry_objstore_close(ch);
}

/* Keys with every byte class a key may hold: control characters, spaces, XML's special
 * characters, non-ASCII UTF-8, '%' and '+'. Each is put, listed back exactly (the sweep decides
 * what to delete from listed keys) and read. A store that sends listings without
 * encoding-type=url (s3rver directly: FERRY_TEST_S3_RAW_LISTING=1) cannot carry control
 * characters in XML: the listing must then fail, never return another key. */
static void test_key_bytes(void **state)
{
    (void)state;
    static const char *const names[] = {
        "ctl\x01\x02\x1b\x1f\x7f", "tab\tlf\ncr\rcrlf\r\n", "sp ace  two", "amp&lt<gt>q\"a'",
        "amp&amp;lit&#65;", "utf\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", "pct%41%", "plus+", "p%2B+",
        "sym!$()*,;=@[]^`{|}~",
    };
    enum { N = sizeof names / sizeof names[0] };
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    char prefix[256], key[512];
    key_of(prefix, sizeof prefix, "bytes/");
    for (size_t i = 0; i < N; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, names[i]);
        char body[8];
        int bl = snprintf(body, sizeof body, "%zu", i * 11);
        EXPECT_OK(ferry_objstore_put(ch, key, body, (size_t)bl, err));
        char *data = NULL;
        size_t len = 0;
        EXPECT_OK(ferry_objstore_get_mem(ch, key, &data, &len, err));
        assert_int_equal(len, (size_t)bl);
        assert_memory_equal(data, body, len);
        free(data);
    }
    ferry_object_info *all = NULL;
    size_t n = 0;
    ferry_err e = {0};
    int rc = ferry_sweep_list_store(ch, prefix, &all, &n, &e);
    if (env("FERRY_TEST_S3_RAW_LISTING")) {
        if (rc != FERRY_EREMOTE)
            fail_msg("a raw listing with control characters gave %s (%s), not an error",
                     ferry_code_name(rc), e.msg);
    } else {
        if (rc)
            fail_msg("listing: %s", e.msg);
        assert_int_equal(n, N);
        for (size_t i = 0; i < N; i++) {
            snprintf(key, sizeof key, "%s%s", prefix, names[i]);
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++)
                seen = !strcmp(all[k].key, key);
            if (!seen) {
                for (size_t k = 0; k < n; k++)
                    fprintf(stderr, "listed: '%s'\n", all[k].key);
                fail_msg("key %zu ('%s') not listed exactly", i, names[i]);
            }
        }
        ferry_sweep_objects_free(all, n);
    }
    /* the keys go, so that later listings of the whole store (other tests, reruns against
     * the same bucket) do not meet them */
    ferry_objstore *jan = open_role(FERRY_ROLE_JANITOR);
    for (size_t i = 0; i < N; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, names[i]);
        EXPECT_OK(ferry_objstore_delete(jan, key, err));
    }
    ferry_objstore_close(jan);
    ferry_objstore_close(ch);
}

static void test_delete(void **state)
{
    (void)state;
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    ferry_objstore *jan = open_role(FERRY_ROLE_JANITOR);
    char key[256];
    key_of(key, sizeof key, "del/victim");
    EXPECT_OK(ferry_objstore_put(ch, key, "bye", 3, err));
    ferry_object_info info;
    EXPECT_OK(ferry_objstore_head(jan, key, &info, err));
    EXPECT_OK(ferry_objstore_delete(jan, key, err));
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_head(ch, key, &info, err));
    ferry_object_list l;
    EXPECT_OK(ferry_objstore_list(jan, key, NULL, 0, &l, err));
    assert_int_equal(l.n, 0);
    ferry_object_list_free(&l);
    ferry_objstore_close(ch);
    ferry_objstore_close(jan);
}

static void check_roundtrip(ferry_objstore *ch, const char *key, const char *want, size_t n)
{
    char *data = NULL;
    size_t len = 0;
    EXPECT_OK(ferry_objstore_get_mem(ch, key, &data, &len, err));
    assert_int_equal(len, n);
    assert_true(memcmp(data, want, n) == 0);
    free(data);
    ferry_object_info info;
    EXPECT_OK(ferry_objstore_head(ch, key, &info, err));
    assert_int_equal(info.size, n);
}

static void test_multipart(void **state)
{
    (void)state;
    ferry_objstore *up = open_role(FERRY_ROLE_UPLOADER);
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    char key[256];
    key_of(key, sizeof key, "mpu/big.bin");
    size_t n = 5 * MIB + MIB + 7;
    char *data = random_bytes(n, 1);

    /* Explicit multipart, parts uploaded out of order. */
    ferry_objstore_mpu *mpu = NULL;
    EXPECT_OK(ferry_objstore_mpu_begin(up, key, &mpu, err));
    EXPECT_OK(ferry_objstore_mpu_part(up, mpu, 2, data + 5 * MIB, n - 5 * MIB, err));
    EXPECT_OK(ferry_objstore_mpu_part(up, mpu, 1, data, 5 * MIB, err));
    EXPECT_OK(ferry_objstore_mpu_complete(up, mpu, err));
    check_roundtrip(ch, key, data, n);

    /* put_fd turns a file above the threshold into 3 parts. */
    char path[400];
    snprintf(path, sizeof path, "%s/src.bin", tmpdir);
    size_t n2 = 11 * MIB + 3;
    char *data2 = random_bytes(n2, 2);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data2, n2), (ssize_t)n2);
    EXPECT_OK(ferry_objstore_set_multipart(up, 6 * MIB, 5 * MIB, err));
    EXPECT_FAIL(FERRY_EINVAL, "5 MiB", ferry_objstore_set_multipart(up, 6 * MIB, MIB, err));
    key_of(key, sizeof key, "mpu/from-fd.bin");
    EXPECT_OK(ferry_objstore_put_fd(up, key, fd, err));
    check_roundtrip(ch, key, data2, n2);
    /* Below the threshold: a single PUT streamed from the file. */
    assert_int_equal(ftruncate(fd, 3 * MIB + 1), 0);
    key_of(key, sizeof key, "mpu/small-from-fd.bin");
    EXPECT_OK(ferry_objstore_put_fd(up, key, fd, err));
    check_roundtrip(ch, key, data2, 3 * MIB + 1);
    close(fd);

    /* Abort. */
    key_of(key, sizeof key, "mpu/aborted.bin");
    EXPECT_OK(ferry_objstore_mpu_begin(up, key, &mpu, err));
    EXPECT_OK(ferry_objstore_mpu_part(up, mpu, 1, data, 1000, err));
    if (env("FERRY_TEST_S3_NO_ABORT"))
        EXPECT_FAIL(FERRY_EUNSUPPORTED, "AbortMultipartUpload",
                    ferry_objstore_mpu_abort(up, mpu, err));
    else
        EXPECT_OK(ferry_objstore_mpu_abort(up, mpu, err));
    ferry_object_info info;
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_head(ch, key, &info, err));
    if (!s3_endpoint) { /* nothing left behind in the local store */
        char mpudir[400];
        snprintf(mpudir, sizeof mpudir, "%s/.ferry-mpu", rootdir);
        char cmd[500];
        snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", mpudir);
        assert_int_equal(system(cmd), 0);
    }
    /* Complete without parts is refused. */
    EXPECT_OK(ferry_objstore_mpu_begin(up, key, &mpu, err));
    EXPECT_FAIL(FERRY_EINVAL, "no parts", ferry_objstore_mpu_complete(up, mpu, err));
    free(data);
    free(data2);
    ferry_objstore_close(up);
    ferry_objstore_close(ch);
}

static void test_roles(void **state)
{
    (void)state;
    ferry_objstore *up = open_role(FERRY_ROLE_UPLOADER);
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    ferry_objstore *jan = open_role(FERRY_ROLE_JANITOR);
    char key[256];
    key_of(key, sizeof key, "roles/part.bin");
    char *data;
    size_t len;
    ferry_object_info info;
    ferry_object_list l;
    ferry_objstore_mpu *mpu;

    EXPECT_OK(ferry_objstore_put(up, key, "abc", 3, err));
    EXPECT_FAIL(FERRY_EAUTH, "the uploader role cannot delete", ferry_objstore_delete(up, key, err));
    EXPECT_FAIL(FERRY_EAUTH, "the uploader role cannot read", ferry_objstore_get_mem(up, key, &data, &len, err));
    EXPECT_FAIL(FERRY_EAUTH, "uploader", ferry_objstore_list(up, run_prefix, NULL, 0, &l, err));
    EXPECT_FAIL(FERRY_EAUTH, "uploader", ferry_objstore_head(up, key, &info, err));

    EXPECT_FAIL(FERRY_EAUTH, "the clickhouse role cannot delete", ferry_objstore_delete(ch, key, err));

    EXPECT_FAIL(FERRY_EAUTH, "the janitor role cannot create", ferry_objstore_put(jan, key, "x", 1, err));
    EXPECT_FAIL(FERRY_EAUTH, "janitor", ferry_objstore_mpu_begin(jan, key, &mpu, err));
    EXPECT_FAIL(FERRY_EAUTH, "the janitor role cannot read", ferry_objstore_get_mem(jan, key, &data, &len, err));

    /* Nothing was deleted by the refused calls. */
    check_roundtrip(ch, key, "abc", 3);
    EXPECT_OK(ferry_objstore_delete(jan, key, err));
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_head(ch, key, &info, err));
    ferry_objstore_close(up);
    ferry_objstore_close(ch);
    ferry_objstore_close(jan);
}

/* Only the role's own secret file is read: the others may be missing or unreadable. */
static void test_config_reads_one_secret(void **state)
{
    (void)state;
    char text[2048], up_secret[400];
    snprintf(up_secret, sizeof up_secret, "%s/only-uploader.secret", tmpdir);
    write_file(up_secret, "uploaderSecret/Never+Printed\n");
    snprintf(text, sizeof text,
             "[object_store]\ntype = s3\nendpoint = http://127.0.0.1:1\nbucket = b\n"
             "[credentials \"uploader\"]\naccess_key_id = UP\nsecret_access_key_file = %s\n"
             "[credentials \"janitor\"]\naccess_key_id = JAN\nsecret_access_key_file = %s/missing\n",
             up_secret, tmpdir);
    ferry_config c = {0};
    ferry_err e = {0};
    assert_int_equal(ferry_config_parse(text, "roles.conf", &c, &e), 0);
    ferry_objstore *st = NULL;
    EXPECT_OK(ferry_objstore_open_from_config(&c, FERRY_ROLE_UPLOADER, &st, err));
    /* Nothing listens on port 1: a connection error, whose message must not carry the secret. */
    ferry_err ce = {0};
    int rc = ferry_objstore_put(st, "k", "v", 1, &ce);
    assert_true(rc == FERRY_ECONNECT || rc == FERRY_EREMOTE);
    assert_null(strstr(ce.msg, "uploaderSecret"));
    assert_non_null(strstr(ce.msg, "127.0.0.1:1"));
    EXPECT_FAIL(FERRY_EAUTH, "the uploader role cannot delete", ferry_objstore_delete(st, "k", err));
    ferry_objstore_close(st);
    EXPECT_FAIL(FERRY_EINVAL, "roles.conf:10: credentials.janitor.secret_access_key_file",
                ferry_objstore_open_from_config(&c, FERRY_ROLE_JANITOR, &st, err));
    EXPECT_FAIL(FERRY_EINVAL, "[credentials \"clickhouse\"] access_key_id is required",
                ferry_objstore_open_from_config(&c, FERRY_ROLE_CLICKHOUSE, &st, err));
    ferry_config_free(&c);

    /* Typos and bad values are reported with their line. */
    assert_int_equal(ferry_config_parse("[object_store]\ntype = s4\n", "t.conf", &c, &e), 0);
    EXPECT_FAIL(FERRY_EINVAL, "t.conf:2: object_store.type",
                ferry_objstore_open_from_config(&c, FERRY_ROLE_UPLOADER, &st, err));
    ferry_config_free(&c);
    assert_int_equal(ferry_config_parse("[object_store]\ntype = s3\nendpont = x\n", "t.conf", &c, &e), 0);
    EXPECT_FAIL(FERRY_EINVAL, "t.conf:3", ferry_objstore_open_from_config(&c, FERRY_ROLE_UPLOADER, &st, err));
    ferry_config_free(&c);

    /* A log line at debug level during all this mentioned no secret (checked in teardown). */
    FILE *f = fopen(up_secret, "r");
    char buf[64] = "";
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
}

static void test_wrong_secret(void **state)
{
    (void)state;
    if (!env("FERRY_TEST_S3_CHECKS_SIGNATURES"))
        skip();
    ferry_objstore_s3_options o = {
        .endpoint = s3_endpoint,
        .bucket = env("FERRY_TEST_S3_BUCKET"),
        .access_key_id = env("FERRY_TEST_S3_KEY_ID"),
        .secret_access_key = "WRONGwrongWRONGwrong",
        .virtual_host = env("FERRY_TEST_S3_URL_STYLE") && strcmp(env("FERRY_TEST_S3_URL_STYLE"), "virtual") == 0,
    };
    ferry_objstore *st = NULL;
    EXPECT_OK(ferry_objstore_open_s3(&o, FERRY_ROLE_CLICKHOUSE, &st, err));
    char key[256];
    key_of(key, sizeof key, "wrong/secret");
    EXPECT_FAIL(FERRY_EAUTH, "SignatureDoesNotMatch", ferry_objstore_put(st, key, "x", 1, err));
    ferry_object_info info;
    EXPECT_FAIL(FERRY_EAUTH, NULL, ferry_objstore_head(st, key, &info, err));
    ferry_objstore_close(st);
    /* The refused put wrote nothing. */
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_head(ch, key, &info, err));
    ferry_objstore_close(ch);
}

/* Local backend only: keys cannot leave the root. */
static void test_local_key_safety(void **state)
{
    (void)state;
    if (s3_endpoint)
        skip();
    ferry_objstore *ch = open_role(FERRY_ROLE_CLICKHOUSE);
    char outside[320], path[400], key[500];
    snprintf(outside, sizeof outside, "%s/outside", tmpdir);
    mkdir(outside, 0755);
    snprintf(path, sizeof path, "%s/secret.txt", outside);
    write_file(path, "outside data");
    /* A directory symlink and a file symlink inside the root, both pointing out. */
    snprintf(path, sizeof path, "%s/evil", rootdir);
    assert_int_equal(symlink(outside, path), 0);
    snprintf(path, sizeof path, "%s/link.txt", rootdir);
    snprintf(key, sizeof key, "%s/secret.txt", outside);
    assert_int_equal(symlink(key, path), 0);

    char *data;
    size_t len;
    EXPECT_FAIL(FERRY_EINVAL, "symlink", ferry_objstore_get_mem(ch, "evil/secret.txt", &data, &len, err));
    EXPECT_FAIL(FERRY_EINVAL, "symlink", ferry_objstore_get_mem(ch, "link.txt", &data, &len, err));
    EXPECT_FAIL(FERRY_EINVAL, "symlink", ferry_objstore_put(ch, "evil/new.txt", "x", 1, err));
    snprintf(path, sizeof path, "%s/new.txt", outside);
    assert_int_equal(access(path, F_OK), -1);
    EXPECT_FAIL(FERRY_EINVAL, "'..'", ferry_objstore_get_mem(ch, "../outside/secret.txt", &data, &len, err));
    EXPECT_FAIL(FERRY_EINVAL, "'..'", ferry_objstore_put(ch, "a/../../x", "x", 1, err));
    EXPECT_FAIL(FERRY_EINVAL, "empty", ferry_objstore_put(ch, "a//b", "x", 1, err));
    EXPECT_FAIL(FERRY_EINVAL, "empty", ferry_objstore_put(ch, "a/b/", "x", 1, err));
    EXPECT_FAIL(FERRY_EINVAL, "outside the object store root", ferry_objstore_get_mem(ch, "/etc/hostname", &data, &len, err));
    snprintf(key, sizeof key, "%s/secret.txt", outside);
    EXPECT_FAIL(FERRY_EINVAL, "outside the object store root", ferry_objstore_put(ch, key, "x", 1, err));
    EXPECT_FAIL(FERRY_EINVAL, "reserved", ferry_objstore_put(ch, ".ferry-mpu/x", "x", 1, err));

    /* Absolute keys inside the root, as ClickHouse's v5 pointers for local blob storage have. */
    snprintf(key, sizeof key, "%s/abc/defghij", rootdir);
    EXPECT_OK(ferry_objstore_put(ch, key, "blob", 4, err));
    check_roundtrip(ch, "abc/defghij", "blob", 4);
    check_roundtrip(ch, key, "blob", 4);
    ferry_object_list l;
    snprintf(key, sizeof key, "%s/abc/", rootdir);
    EXPECT_OK(ferry_objstore_list(ch, key, NULL, 0, &l, err));
    assert_int_equal(l.n, 1);
    snprintf(key, sizeof key, "%s/abc/defghij", rootdir);
    assert_string_equal(l.items[0].key, key);
    ferry_object_list_free(&l);
    /* Listing everything skips the symlinks and reserved names. */
    EXPECT_OK(ferry_objstore_list(ch, "", NULL, 1000, &l, err));
    for (size_t i = 0; i < l.n; i++) {
        assert_null(strstr(l.items[i].key, "evil"));
        assert_null(strstr(l.items[i].key, "link.txt"));
        assert_null(strstr(l.items[i].key, ".ferry-"));
    }
    ferry_object_list_free(&l);
    /* No temporary files are left next to objects. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(find '%s' -name '.ferry-tmp*')\"", rootdir);
    assert_int_equal(system(cmd), 0);
    ferry_objstore_close(ch);

    ferry_objstore *st = NULL;
    EXPECT_FAIL(FERRY_EINVAL, "absolute", ferry_objstore_open_local("relative/dir", FERRY_ROLE_CLICKHOUSE, &st, err));
    EXPECT_FAIL(FERRY_ENOTFOUND, NULL, ferry_objstore_open_local("/nonexistent/ferry/dir", FERRY_ROLE_CLICKHOUSE, &st, err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_head),
        cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_list_pagination),
        cmocka_unit_test(test_list_all_pages),
        cmocka_unit_test(test_key_bytes),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_multipart),
        cmocka_unit_test(test_roles),
        cmocka_unit_test(test_config_reads_one_secret),
        cmocka_unit_test(test_wrong_secret),
        cmocka_unit_test(test_local_key_safety),
    };
    return cmocka_run_group_tests_name(getenv("FERRY_TEST_S3_ENDPOINT") ? "objstore-s3"
                                                                        : "objstore-local",
                                       tests, setup, teardown);
}
