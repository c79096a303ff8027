/* The HTTP/1.1 response parser of the ClickHouse client's plain-socket transport
 * (lib/clickhouse/http1.c): framing by Content-Length, chunked and end of connection, fed whole
 * and one byte at a time; 1xx skipped; keep-alive; malformed input refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "clickhouse/http1.h"
#include "ferry/buf.h"

typedef struct seen {
    ferry_buf headers; /* "name=value\n" */
    ferry_buf body;
    int stop_after_body; /* >0: the body callback fails once this many bytes are in */
} seen;

static int on_header(void *arg, const char *name, size_t nlen, const char *value, size_t vlen)
{
    seen *s = arg;
    ferry_buf_append(&s->headers, name, nlen);
    ferry_buf_putc(&s->headers, '=');
    ferry_buf_append(&s->headers, value, vlen);
    ferry_buf_putc(&s->headers, '\n');
    return 0;
}

static int on_body(void *arg, const char *data, size_t len)
{
    seen *s = arg;
    ferry_buf_append(&s->body, data, len);
    if (s->stop_after_body && s->body.len >= (size_t)s->stop_after_body)
        return FERRY_EIO;
    return 0;
}

/* Parses text fed in pieces of `step` bytes (0: all at once). Returns the feed's code. */
static int parse(const char *text, size_t step, seen *s, ferry_http1 *p, size_t *used_total)
{
    ferry_err err = {0};
    memset(s, 0, sizeof *s);
    ferry_http1_init(p, on_header, on_body, s, false);
    size_t len = strlen(text), i = 0;
    *used_total = 0;
    while (i < len) {
        size_t n = step && step < len - i ? step : len - i;
        size_t used = 0;
        int rc = ferry_http1_feed(p, text + i, n, &used, &err);
        *used_total += used;
        if (rc)
            return rc;
        i += n;
        if (ferry_http1_done(p))
            break;
    }
    return 0;
}

static void free_seen(seen *s)
{
    ferry_buf_free(&s->headers);
    ferry_buf_free(&s->body);
}

static void test_framings(void **state)
{
    (void)state;
    static const struct {
        const char *text, *body;
        int status;
        bool keep_alive, done;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello", 200, true, true},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world"
         "\r\n0\r\n\r\n", "hello world", 200, true, true},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n"
         "X-Trailer: 1\r\n\r\n", "0123456789", 200, true, true},
        {"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Length: 3\r\n\r\n"
         "bad", "bad", 500, false, true},
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok",
         200, true, true},
        {"HTTP/1.1 204 No Content\r\n\r\n", "", 204, true, true},
        {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "", 200, true, true},
        {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 200, false, true},
        {"HTTP/1.1 200 OK\n\nuntil close", "until close", 200, false, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (size_t step = 0; step <= 3; step++) {
            seen s;
            ferry_http1 p;
            size_t used;
            assert_int_equal(parse(cases[c].text, step, &s, &p, &used), 0);
            assert_int_equal(p.status, cases[c].status);
            assert_int_equal(ferry_http1_done(&p), cases[c].done);
            if (!cases[c].done) {
                assert_int_equal(ferry_http1_finish(&p, NULL), 0);
                assert_true(ferry_http1_done(&p));
            }
            assert_int_equal(p.keep_alive, cases[c].keep_alive);
            assert_int_equal(s.body.len, strlen(cases[c].body));
            if (s.body.len)
                assert_memory_equal(s.body.data, cases[c].body, s.body.len);
            free_seen(&s);
        }
    }
}

static void test_headers_and_leftover(void **state)
{
    (void)state;
    seen s;
    ferry_http1 p;
    size_t used;
    const char *text = "HTTP/1.1 200 OK\r\nX-ClickHouse-Exception-Code:  62 \r\n"
                       "X-ClickHouse-Query-Id: abc\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200";
    assert_int_equal(parse(text, 0, &s, &p, &used), 0);
    assert_true(ferry_http1_done(&p));
    assert_int_equal(used, strlen(text) - strlen("HTTP/1.1 200"));
    assert_string_equal(ferry_buf_cstr(&s.headers), "X-ClickHouse-Exception-Code=62\n"
                                                     "X-ClickHouse-Query-Id=abc\n"
                                                     "Content-Length=1\n");
    free_seen(&s);
    /* a 1xx response's headers are not the final response's */
    assert_int_equal(parse("HTTP/1.1 100 Continue\r\nX-A: 1\r\n\r\nHTTP/1.1 200 OK\r\nX-B: 2\r\n"
                           "Content-Length: 0\r\n\r\n", 1, &s, &p, &used), 0);
    assert_string_equal(ferry_buf_cstr(&s.headers), "X-B=2\nContent-Length=0\n");
    free_seen(&s);
}

static void test_early_end(void **state)
{
    (void)state;
    static const char *const partial[] = {
        "",
        "HTTP/1.1 200 OK\r\nContent-Le",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    };
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        seen s;
        ferry_http1 p;
        size_t used;
        ferry_err err = {0};
        assert_int_equal(parse(partial[i], 2, &s, &p, &used), 0);
        assert_false(ferry_http1_done(&p));
        assert_int_equal(ferry_http1_finish(&p, &err), FERRY_EREMOTE);
        assert_non_null(strstr(err.msg, "ended early"));
        free_seen(&s);
    }
}

static void test_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "SSH-2.0-OpenSSH\r\n",
        "HTTP/2 200\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t step = 0; step <= 1; step++) {
            seen s;
            ferry_http1 p;
            size_t used;
            assert_int_equal(parse(bad[i], step, &s, &p, &used), FERRY_EREMOTE);
            free_seen(&s);
        }
    }
    /* a header line beyond the bound */
    ferry_buf big = FERRY_BUF_INIT;
    ferry_buf_puts(&big, "HTTP/1.1 200 OK\r\nX-Big: ");
    for (int i = 0; i < FERRY_HTTP1_LINE_MAX; i++)
        ferry_buf_putc(&big, 'a');
    ferry_buf_puts(&big, "\r\n\r\n");
    seen s;
    ferry_http1 p;
    size_t used;
    assert_int_equal(parse(ferry_buf_cstr(&big), 100, &s, &p, &used), FERRY_EREMOTE);
    free_seen(&s);
    ferry_buf_free(&big);
}

static void test_callback_stops(void **state)
{
    (void)state;
    seen s = {0};
    ferry_http1 p;
    ferry_err err = {0};
    s.stop_after_body = 3;
    ferry_http1_init(&p, on_header, on_body, &s, false);
    const char *t = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
    size_t used = 0;
    assert_int_equal(ferry_http1_feed(&p, t, strlen(t), &used, &err), FERRY_EIO);
    assert_false(ferry_http1_done(&p));
    free_seen(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framings),     cmocka_unit_test(test_headers_and_leftover),
        cmocka_unit_test(test_early_end),    cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
