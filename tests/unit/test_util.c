/* Unit tests of the util layer: strict number parsing, the buffer, the config parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/names.h"
#include "ferry/strutil.h"

static void test_parse_numbers(void **state)
{
    (void)state;
    uint64_t u;
    int64_t i;
    double d;
    assert_true(ferry_parse_u64("0", &u) && u == 0);
    assert_true(ferry_parse_u64("18446744073709551615", &u) && u == UINT64_MAX);
    assert_false(ferry_parse_u64("18446744073709551616", &u));
    assert_false(ferry_parse_u64("-1", &u));
    assert_false(ferry_parse_u64("12x", &u));
    assert_false(ferry_parse_u64("", &u));
    assert_false(ferry_parse_u64(" 1", &u));
    assert_true(ferry_parse_i64("-5", &i) && i == -5);
    assert_false(ferry_parse_i64("-", &i));
    assert_true(ferry_parse_double("0.85", &d) && d == 0.85);
    assert_false(ferry_parse_double("nan", &d));
    assert_false(ferry_parse_double("1e999", &d));
    assert_false(ferry_parse_double("1.0 ", &d));
    assert_true(ferry_parse_bytes("2GiB", &u) && u == 2ULL << 30);
    assert_true(ferry_parse_bytes("512M", &u) && u == 512ULL << 20);
    assert_true(ferry_parse_bytes("10", &u) && u == 10);
    assert_false(ferry_parse_bytes("10X", &u));
    assert_false(ferry_parse_bytes("99999999999999999999T", &u));
    assert_true(ferry_parse_duration("3d", &u) && u == 3 * 86400);
    assert_true(ferry_parse_duration("24h", &u) && u == 86400);
    assert_false(ferry_parse_duration("3days", &u));
}

static void test_buf(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    assert_string_equal(ferry_buf_cstr(&b), "");
    for (int k = 0; k < 1000; k++)
        ferry_buf_printf(&b, "%d,", k);
    assert_true(b.len > 3000);
    assert_true(strncmp(b.data, "0,1,2,", 6) == 0);
    char *s = ferry_buf_detach(&b);
    assert_null(b.data);
    free(s);
    ferry_buf_free(&b);
}

static void test_split(void **state)
{
    (void)state;
    char line[] = "a\tb\t\tc";
    char *f[8];
    size_t n = ferry_split(line, '\t', f, 8);
    assert_int_equal(n, 4);
    assert_string_equal(f[0], "a");
    assert_string_equal(f[2], "");
    assert_string_equal(f[3], "c");
}

static void test_name_lists(void **state)
{
    (void)state;
    char l[16] = "";
    assert_false(ferry_list_has(l, "a"));
    assert_true(ferry_list_add(l, sizeof l, "node1"));
    assert_true(ferry_list_add(l, sizeof l, "node2"));
    assert_true(ferry_list_add(l, sizeof l, "node1")); /* already there */
    assert_string_equal(l, "node1,node2");
    assert_false(ferry_list_add(l, sizeof l, "node33")); /* 18 bytes would not fit */
    assert_string_equal(l, "node1,node2");
    assert_true(ferry_list_has(l, "node2"));
    assert_false(ferry_list_has(l, "node"));  /* whole names only */
    assert_false(ferry_list_has(l, "node1,")); /* a name never holds the separator */
    ferry_list_remove(l, "node1");
    assert_string_equal(l, "node2");
    assert_true(ferry_list_add(l, sizeof l, "n3"));
    ferry_list_remove(l, "n3");
    assert_string_equal(l, "node2");
    ferry_list_remove(l, "absent");
    assert_string_equal(l, "node2");
    ferry_list_remove(l, "node2");
    assert_string_equal(l, "");

    /* items of URL lists as [shard] replicas and agent hold them */
    char u[32];
    assert_int_equal(ferry_list_count(""), 0);
    assert_int_equal(ferry_list_count("http://a:1"), 1);
    assert_int_equal(ferry_list_count("http://a:1, http://b:2"), 2);
    assert_false(ferry_list_item("", 0, u, sizeof u));
    assert_true(ferry_list_item("http://a:1, http://b:2", 0, u, sizeof u));
    assert_string_equal(u, "http://a:1");
    assert_true(ferry_list_item("http://a:1,  http://b:2 ", 1, u, sizeof u));
    assert_string_equal(u, "http://b:2");
    assert_false(ferry_list_item("http://a:1, http://b:2", 2, u, sizeof u));
    assert_false(ferry_list_item("http://a-very-long-host-name:1", 0, u, 8)); /* does not fit */
}

/* ferry_list_has is the one membership test for comma-separated lists (routes, placements, repair
 * needs, users' tenants): whole names, no prefix or suffix matches, no trimming. */
static void test_list_has(void **state)
{
    (void)state;
    assert_true(ferry_list_has("ab,a", "a"));
    assert_true(ferry_list_has("a,ab", "ab"));
    assert_false(ferry_list_has("ab,abc", "a"));  /* a prefix of an item is not an item */
    assert_false(ferry_list_has("ab,abc", "b"));  /* nor a suffix */
    assert_false(ferry_list_has("ab", "abc"));    /* nor a longer name */
    assert_false(ferry_list_has("a, b", "b"));    /* blanks are part of the item */
    assert_true(ferry_list_has("a, b", " b"));
    assert_true(ferry_list_has("node1", "node1")); /* one item, no comma */
    /* empty lists and empty names */
    assert_false(ferry_list_has("", "a"));
    assert_false(ferry_list_has(NULL, "a"));
    assert_false(ferry_list_has("", ""));
    assert_false(ferry_list_has("a", ""));
    assert_false(ferry_list_has("a,", ""));       /* a trailing comma adds no item */
    assert_true(ferry_list_has(",a", ""));        /* an empty item before a comma is one */
    assert_true(ferry_list_has("a,,b", ""));
    /* trailing commas */
    assert_true(ferry_list_has("a,", "a"));
    assert_true(ferry_list_has("a,b,", "b"));
    assert_false(ferry_list_has("a,", "a,"));
    /* a name of the longest length, among others */
    char name[FERRY_NAME_MAX], list[3 * FERRY_NAME_MAX];
    memset(name, 'x', FERRY_NAME_MAX - 1);
    name[FERRY_NAME_MAX - 1] = '\0';
    snprintf(list, sizeof list, "x,%s,xx", name);
    assert_true(ferry_list_has(list, name));
    name[FERRY_NAME_MAX - 2] = '\0';
    assert_false(ferry_list_has(list, name));
}

/* ferry_name_ok: the one name rule of the catalog and placement (ferry/names.h). */
static void test_name_rule(void **state)
{
    (void)state;
    char name[FERRY_NAME_MAX + 1];
    memset(name, 'n', sizeof name);
    name[100] = '\0';
    assert_true(ferry_name_ok(name)); /* 100 characters */
    name[100] = 'n';
    name[FERRY_NAME_MAX - 1] = '\0';
    assert_true(ferry_name_ok(name)); /* 127: the longest */
    name[FERRY_NAME_MAX - 1] = 'n';
    name[FERRY_NAME_MAX] = '\0';
    assert_false(ferry_name_ok(name)); /* 128 */
    assert_true(ferry_name_ok("node-1.eu_west"));
    assert_false(ferry_name_ok(""));
    assert_false(ferry_name_ok("."));
    assert_false(ferry_name_ok(".."));
    assert_true(ferry_name_ok("..."));
    assert_false(ferry_name_ok("a b"));
    assert_false(ferry_name_ok("a,b"));
    assert_false(ferry_name_ok("a/b"));
}

static void test_config(void **state)
{
    (void)state;
    const char *text = "# top comment\n"
                       "[cluster]\n"
                       "  Name = lab   # trailing comment\n"
                       "fill = 0.85\n"
                       "[shard \"node 1\"]\n"
                       "http = http://127.0.0.1:8123\n"
                       "password = \"p#ss \\\"q\\\"\"\n"
                       "[shard \"node2\"]\n"
                       "weight = 2\n"
                       "[cluster]\n"
                       "name = lab2\n";
    ferry_config c;
    ferry_err err = {0};
    assert_int_equal(ferry_config_parse(text, "t.conf", &c, &err), FERRY_OK);
    assert_string_equal(ferry_config_get(&c, "cluster", NULL, "name"), "lab2");
    assert_string_equal(ferry_config_get(&c, "shard", "node 1", "password"), "p#ss \"q\"");
    double fill;
    assert_int_equal(ferry_config_double(&c, "cluster", NULL, "fill", 1.0, &fill, &err), 0);
    assert_true(fill == 0.85);
    const char *subs[4];
    assert_int_equal(ferry_config_subsections(&c, "shard", subs, 4), 2);
    assert_string_equal(subs[0], "node 1");
    assert_string_equal(subs[1], "node2");
    uint64_t w;
    assert_int_equal(ferry_config_u64(&c, "shard", "node2", "weight", 1, &w, &err), 0);
    assert_int_equal(w, 2);
    assert_int_equal(ferry_config_u64(&c, "cluster", NULL, "name", 1, &w, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "t.conf:11"));
    const char *allowed[] = {"name", NULL};
    assert_int_equal(ferry_config_check_keys(&c, "cluster", allowed, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "unknown key 'fill'"));
    ferry_config_free(&c);

    const char *bad[] = {"key = v\n", "[cluster\n", "[cluster]\nnovalue\n",
                         "[s \"unterminated]\n", "[c]\nk = \"open\n", "[]\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ferry_err e = {0};
        assert_int_equal(ferry_config_parse(bad[i], "bad.conf", &c, &e), FERRY_EINVAL);
        assert_non_null(strstr(e.msg, "bad.conf:"));
    }
}

static void test_redact(void **state)
{
    (void)state;
    char out[256];
    ferry_redact_url("http://user:secret@host:8123/?query=1&password=hunter2&x=1", out,
                     sizeof out);
    assert_null(strstr(out, "secret"));
    assert_null(strstr(out, "hunter2"));
    assert_non_null(strstr(out, "query=1"));
}

/* A secret file's first line, whatever line ends it; an empty file is "" (callers decide). */
static void test_secret_line(void **state)
{
    (void)state;
    char path[] = "/tmp/ferry_secret_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const struct {
        const char *content, *want;
    } cases[] = {{"s3cret\nsecond line\n", "s3cret"}, {"crlf\r\n", "crlf"},
                 {"no newline", "no newline"}, {"", ""}, {"\nafter an empty line", ""}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(cases[i].content, f);
        fclose(f);
        char *got = NULL;
        ferry_err err = {0};
        assert_int_equal(ferry_read_secret_line(path, &got, &err), FERRY_OK);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
    close(fd);
    unlink(path);
    char *got = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_read_secret_line(path, &got, &err), FERRY_ENOTFOUND);
    assert_null(got);
}

static void test_duration_ms(void **state)
{
    (void)state;
    uint64_t ms = 0;
    uint32_t u = 0;
    assert_true(ferry_parse_duration_ms("500ms", &ms));
    assert_int_equal(ms, 500);
    assert_true(ferry_parse_duration_ms("30s", &ms));
    assert_int_equal(ms, 30000);
    assert_true(ferry_parse_duration_ms("2m", &ms));
    assert_int_equal(ms, 120000);
    assert_false(ferry_parse_duration_ms("ms", &ms));
    assert_false(ferry_parse_duration_ms("5xms", &ms));
    assert_false(ferry_parse_duration_ms("", &ms));
    assert_true(ferry_parse_u32("4294967295", &u));
    assert_int_equal(u, 4294967295u);
    assert_false(ferry_parse_u32("4294967296", &u));
    assert_false(ferry_parse_u32("-1", &u));
    assert_false(ferry_parse_duration_ms32("50d", &u)); /* over 2^32 ms */
    assert_true(ferry_parse_duration_ms32("49d", &u));
    assert_int_equal(u, 4233600000u);
    assert_true(ferry_parse_duration_ms32("1500ms", &u));
    assert_int_equal(u, 1500);
    assert_true(ferry_parse_duration_ms32("2m", &u));
    assert_int_equal(u, 120000);
    assert_false(ferry_parse_duration_ms32("soon", &u));
}

/* ADDR:PORT for --listen: the last colon splits, the port is 0..65535, the address fits. */
static void test_hostport(void **state)
{
    (void)state;
    char host[16];
    uint16_t port = 1;
    assert_true(ferry_parse_hostport("127.0.0.1:0", host, sizeof host, &port));
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 0);
    assert_true(ferry_parse_hostport("::1:9123", host, sizeof host, &port));
    assert_string_equal(host, "::1");
    assert_int_equal(port, 9123);
    assert_false(ferry_parse_hostport("127.0.0.1", host, sizeof host, &port));
    assert_false(ferry_parse_hostport(":8123", host, sizeof host, &port));
    assert_false(ferry_parse_hostport("host:65536", host, sizeof host, &port));
    assert_false(ferry_parse_hostport("host:80x", host, sizeof host, &port));
    assert_false(ferry_parse_hostport("host:", host, sizeof host, &port));
    assert_false(ferry_parse_hostport("a-very-long-host-name:80", host, sizeof host, &port));
}

static void test_hex_digit(void **state)
{
    (void)state;
    const char *digits = "0123456789abcdef", *upper = "ABCDEF";
    for (int i = 0; i < 16; i++)
        assert_int_equal(ferry_hex_digit(digits[i]), i);
    for (int i = 0; i < 6; i++)
        assert_int_equal(ferry_hex_digit(upper[i]), 10 + i);
    assert_int_equal(ferry_hex_digit('g'), -1);
    assert_int_equal(ferry_hex_digit('G'), -1);
    assert_int_equal(ferry_hex_digit('/'), -1);
    assert_int_equal(ferry_hex_digit(':'), -1);
    assert_int_equal(ferry_hex_digit('\0'), -1);
}

/* The clock's units agree with each other (read in order, so each later reading is at least the
 * earlier one; 1e-3 ms covers the rounding of seconds scaled to ms), whole ms truncate, and a
 * deadline's nanoseconds stay normalised across a second boundary. */
static void test_clock(void **state)
{
    (void)state;
    double ms0 = ferry_clock_ms();
    double s1 = ferry_clock_s();
    uint64_t u2 = ferry_clock_ms_u64();
    double ms3 = ferry_clock_ms();
    assert_true(ms0 <= s1 * 1e3 + 1e-3);
    assert_true(s1 * 1e3 <= (double)u2 + 1 + 1e-3);
    assert_true((double)u2 <= ms3);
    const uint64_t waits[] = {0, 1, 999, 1000, 1001, 1999, 86400000};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        double before = ferry_clock_ms();
        struct timespec t = ferry_clock_after_ms(waits[i]);
        double after = ferry_clock_ms();
        assert_true(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L);
        double at = (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
        assert_true(at >= before + (double)waits[i] - 1e-3);
        assert_true(at <= after + (double)waits[i] + 1e-3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_numbers), cmocka_unit_test(test_buf),
        cmocka_unit_test(test_split),         cmocka_unit_test(test_config),
        cmocka_unit_test(test_name_lists),    cmocka_unit_test(test_list_has),
        cmocka_unit_test(test_name_rule),
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_secret_line),
        cmocka_unit_test(test_duration_ms),
        cmocka_unit_test(test_hostport),
        cmocka_unit_test(test_hex_digit),
        cmocka_unit_test(test_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
