/* The [coordinator] section (ferry_coord_config_read): the status page's history, the HTTP
 * server's bounds over the coordinator's defaults, and bad keys and values with the file named.
 * Also the text of a router's explained plan (ferry_router_explain_text), which
 * `ferry route-query --router` prints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ferry/config.h"
#include "ferry/coordinator.h"
#include "ferry/httpd.h"
#include "ferry/router_explain.h"

static int read_text(const char *text, ferry_coord_options *o, ferry_httpd_options *http,
                     ferry_err *err)
{
    ferry_config cfg = {0};
    int rc = ferry_config_parse(text, "c.conf", &cfg, err);
    assert_int_equal(rc, FERRY_OK);
    memset(o, 0, sizeof *o);
    rc = ferry_coord_config_read(&cfg, o, http, err);
    ferry_config_free(&cfg);
    return rc;
}

static void test_coord_config(void **state)
{
    (void)state;
    ferry_coord_options o;
    ferry_httpd_options http, def;
    ferry_err err = {0};
    ferry_coord_http_defaults(&def);
    assert_int_equal(read_text("[cluster]\n  name = x\n", &o, &http, &err), FERRY_OK);
    assert_int_equal(o.history_every_s, 0);
    assert_null(o.history_file);
    assert_ptr_equal(o.http, &http);
    assert_int_equal(http.max_connections, def.max_connections);
    assert_int_equal(http.max_per_address, def.max_per_address);

    ferry_config cfg = {0};
    assert_int_equal(ferry_config_parse("[coordinator]\n  history_interval = 5m\n"
                                        "  history_file = /var/lib/ferry/h.json\n"
                                        "  max_connections = 128\n",
                                        "c.conf", &cfg, &err),
                     FERRY_OK);
    memset(&o, 0, sizeof o);
    int rc = ferry_coord_config_read(&cfg, &o, &http, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_int_equal(o.history_every_s, 300);
    assert_string_equal(o.history_file, "/var/lib/ferry/h.json");
    assert_int_equal(http.max_connections, 128);
    assert_int_equal(http.max_per_address, def.max_per_address);
    ferry_config_free(&cfg);

    assert_int_equal(read_text("[coordinator]\n  history_interval = 25h\n", &o, &http, &err),
                     FERRY_EINVAL);
    assert_string_equal(err.msg, "c.conf: [coordinator] history_interval = '25h': expected a "
                                 "duration from 1s to 24h, such as 5m");
    assert_int_equal(read_text("[coordinator]\n  history_interval = 0\n", &o, &http, &err),
                     FERRY_EINVAL);
    assert_int_equal(read_text("[coordinator]\n  histroy_file = x\n", &o, &http, &err),
                     FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "histroy_file"));
    assert_int_equal(read_text("[coordinator]\n  max_connections = lots\n", &o, &http, &err),
                     FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "max_connections"));
    assert_int_equal(read_text("[coordinator]\n  max_connections = 32\n", &o, &http, &err),
                     FERRY_EINVAL); /* under the default 64 per address */
    assert_string_equal(err.msg, "c.conf: [coordinator] max_connections_per_address (64) is "
                                 "above max_connections (32)");
}

static void test_explain_text(void **state)
{
    (void)state;
    json_error_t je;
    json_t *plan = json_loads("{\"routing_version\": 7, \"restricted_to_tenants\": [\"a\", \"b\"],"
                              " \"plan\": \"aggregate\", \"why\": \"two servers\","
                              " \"globals\": [\"SELECT 1\"],"
                              " \"queries\": [{\"server\": \"n1\", \"sql\": \"SELECT x\"}],"
                              " \"initiator\": \"SELECT y\"}",
                              0, &je);
    assert_non_null(plan);
    ferry_buf b = FERRY_BUF_INIT;
    assert_int_equal(ferry_router_explain_text(plan, &b), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&b),
                        "routing version: 7\n"
                        "restricted to tenants: a, b (every managed reference, whatever the "
                        "query says)\n"
                        "plan: aggregate (two servers)\n"
                        "global (computed once):\n  SELECT 1\n"
                        "server n1:\n  SELECT x\n"
                        "initiator:\n  SELECT y\n");
    json_decref(plan);
    ferry_buf_reset(&b);
    plan = json_loads("{\"routing_version\": 8, \"held\": true, \"why\": \"a move publishes "
                      "acme/0\", \"queries\": [{\"server\": \"n1\", \"sql\": \"SELECT x\"}]}",
                      0, &je);
    assert_int_equal(ferry_router_explain_text(plan, &b), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&b), "routing version: 8\nheld: a move publishes acme/0\n");
    json_decref(plan);
    ferry_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coord_config),
        cmocka_unit_test(test_explain_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
