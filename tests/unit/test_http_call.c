/* The short HTTP control calls (include/ferry/http_call.h) against ferry's own HTTP server on a
 * free loopback port: a POST with headers and basic authentication arrives whole and its answer
 * comes back with its status; an answer over max_answer fails instead of growing; a port with
 * nobody listening is FERRY_ECONNECT; percent-encoding keeps only unreserved bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ferry/http_call.h"
#include "ferry/httpd.h"

static void echo(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    const char *user = NULL, *password = NULL;
    size_t len = 0;
    const char *body = ferry_http_body(req, &len);
    const char *hdr = ferry_http_header(req, "X-Test");
    char out[512];
    bool auth = ferry_http_basic_auth(req, &user, &password);
    int n = snprintf(out, sizeof out, "%s %s %s:%s %.*s", ferry_http_method(req),
                     hdr ? hdr : "-", auth ? user : "-", auth ? password : "-", (int)len,
                     body ? body : "");
    ferry_http_respond(req, 201, "text/plain", out, (size_t)n);
}

static void big(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    static char blob[100000];
    memset(blob, 'x', sizeof blob);
    ferry_http_respond(req, 200, "text/plain", blob, sizeof blob);
}

static void test_calls(void **state)
{
    (void)state;
    ferry_http_route routes[] = {{.path = "/echo", .on_complete = echo},
                                 {.path = "/big", .on_complete = big}};
    ferry_httpd_options o = {0};
    ferry_httpd *srv = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_httpd_start(&o, routes, 2, &srv, &err), FERRY_OK);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/echo", ferry_httpd_port(srv));

    const char *hdrs[] = {"X-Test: yes", NULL};
    ferry_http_call c = {.url = url, .body = "hello", .body_len = 5, .headers = hdrs,
                         .user = "u", .password = "p"};
    ferry_http_answer a;
    assert_int_equal(ferry_http_do(&c, &a, &err), FERRY_OK);
    assert_int_equal(a.status, 201);
    assert_string_equal(ferry_buf_cstr(&a.body), "POST yes u:p hello");
    ferry_http_answer_free(&a);

    snprintf(url, sizeof url, "http://127.0.0.1:%u/big", ferry_httpd_port(srv));
    ferry_http_call g = {.url = url, .max_answer = 1000};
    assert_int_equal(ferry_http_do(&g, &a, &err), FERRY_EIO);
    assert_true(a.body.len <= 1000);
    ferry_http_answer_free(&a);
    g.max_answer = 0;
    assert_int_equal(ferry_http_do(&g, &a, &err), FERRY_OK);
    assert_int_equal(a.body.len, 100000);
    ferry_http_answer_free(&a);

    uint16_t port = ferry_httpd_port(srv);
    ferry_httpd_stop(srv);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/echo", port);
    ferry_http_call gone = {.url = url, .timeout_ms = 2000};
    assert_int_equal(ferry_http_do(&gone, &a, &err), FERRY_ECONNECT);
    assert_non_null(strstr(err.msg, "onnect"));
    ferry_http_answer_free(&a);
}

static void test_escape(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    assert_int_equal(ferry_url_escape(&b, "a b&c=d/é~-_."), 0);
    assert_string_equal(ferry_buf_cstr(&b), "a%20b%26c%3Dd%2F%C3%A9~-_.");
    ferry_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
