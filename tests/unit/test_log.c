/* The logger's formats and per-component levels (lib/util/log.c): logfmt, text and JSON lines
 * from the same calls; COMPONENT=LEVEL filters by a line's first word; bad settings refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "ferry/log.h"

static char *capture(void (*fn)(void))
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    ferry_log_set_fd(fd[1]);
    fn();
    close(fd[1]);
    ferry_log_set_fd(2);
    static char buf[8192];
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void emit(void)
{
    FLOG_INFO("msg=\"router: shard connected\" shard=node1 replicas=\"http://h:1\" note=\"a \\\"q\\\"\"");
    FLOG_DEBUG("msg=\"clickhouse statement\" ms=1.5");
    FLOG_WARN("agent: op=send status=502 error=\"boom\"");
}

static void test_json(void **state)
{
    (void)state;
    char why[256];
    ferry_log_set_level(FERRY_LOG_INFO);
    assert_int_equal(ferry_log_configure(NULL, "json", why, sizeof why), 0);
    char *out = capture(emit);
    char *line2 = strchr(out, '\n');
    assert_non_null(line2);
    *line2++ = '\0';
    json_error_t je;
    json_t *a = json_loads(out, 0, &je), *b = json_loads(line2, 0, &je);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(a, "msg")), "router: shard connected");
    assert_string_equal(json_string_value(json_object_get(a, "shard")), "node1");
    assert_string_equal(json_string_value(json_object_get(a, "replicas")), "http://h:1");
    assert_string_equal(json_string_value(json_object_get(a, "note")), "a \"q\"");
    assert_string_equal(json_string_value(json_object_get(a, "level")), "info");
    assert_string_equal(json_string_value(json_object_get(b, "msg")), "agent:");
    assert_string_equal(json_string_value(json_object_get(b, "op")), "send");
    assert_string_equal(json_string_value(json_object_get(b, "error")), "boom");
    assert_null(strstr(line2, "clickhouse statement")); /* debug is below info */
    json_decref(a);
    json_decref(b);
}

static void test_components(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(ferry_log_configure("warn,clickhouse=debug", "logfmt", why, sizeof why), 0);
    char *out = capture(emit);
    assert_null(strstr(out, "shard connected"));          /* router: default warn */
    assert_non_null(strstr(out, "clickhouse statement"));  /* clickhouse=debug */
    assert_non_null(strstr(out, "level=warn pid="));       /* the agent's warning */
    assert_true(ferry_log_enabled(FERRY_LOG_DEBUG));        /* some component wants debug */
    assert_int_equal(ferry_log_configure("info", "text", why, sizeof why), 0);
    out = capture(emit);
    assert_non_null(strstr(out, "info  router: shard connected shard=node1"));
    assert_int_equal(ferry_log_configure("loud", NULL, why, sizeof why), -1);
    assert_non_null(strstr(why, "debug, info, warn or error"));
    assert_int_equal(ferry_log_configure("x=", NULL, why, sizeof why), -1);
    assert_int_equal(ferry_log_configure(NULL, "xml", why, sizeof why), -1);
    ferry_log_set_level(FERRY_LOG_INFO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_components),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
