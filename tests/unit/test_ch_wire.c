/* The ClickHouse client's plain-socket transport (lib/clickhouse/wire.c) through ferry_ch_exec,
 * against a scripted HTTP server on a loopback port in a thread of this test: keep-alive reuse,
 * a server that closed the idle connection (resent on a new one), Connection: close, chunked
 * answers cut into small writes with a tagged in-band exception, a malformed answer, a server
 * that never answers (read timeout), a refused connection, and credentials in the request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"

/* One scripted exchange: after reading a whole request, write `reply` in pieces of `piece`
 * bytes (0: at once), then close the connection if `close_after`. reply NULL: read the request
 * and answer nothing (until the test ends). */
typedef struct step {
    const char *reply;
    size_t piece;
    bool close_after;
} step;

typedef struct server {
    int listen_fd;
    uint16_t port;
    const step *steps;
    size_t n_steps;
    pthread_t th;
    int accepted;            /* connections accepted */
    char last_request[4096]; /* headers of the last request */
    int stop_pipe[2];
} server;

/* Reads one request (headers + Content-Length body); false when the peer closed. */
static bool read_request(int fd, char *head, size_t headsz)
{
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        if (got + 1 >= headsz)
            return false;
        ssize_t k = recv(fd, head + got, headsz - 1 - got, 0);
        if (k <= 0)
            return false;
        got += (size_t)k;
        head[got] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    const char *cl = strcasestr(head, "Content-Length:");
    size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
    size_t have = got - (size_t)(end + 4 - head);
    char sink[4096];
    while (have < body) {
        ssize_t k = recv(fd, sink, sizeof sink, 0);
        if (k <= 0)
            return false;
        have += (size_t)k;
    }
    *end = '\0';
    return true;
}

static void *serve(void *arg)
{
    server *s = arg;
    size_t i = 0;
    while (i < s->n_steps) {
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        s->accepted++;
        while (i < s->n_steps) {
            char head[4096];
            if (!read_request(fd, head, sizeof head))
                break;
            snprintf(s->last_request, sizeof s->last_request, "%s", head);
            const step *st = &s->steps[i++];
            if (!st->reply) { /* hang until the test says stop */
                char c;
                ssize_t r = read(s->stop_pipe[0], &c, 1);
                (void)r;
                break;
            }
            size_t len = strlen(st->reply), off = 0;
            while (off < len) {
                size_t n = st->piece && st->piece < len - off ? st->piece : len - off;
                if (send(fd, st->reply + off, n, MSG_NOSIGNAL) < 0)
                    break;
                off += n;
                if (st->piece)
                    usleep(1000);
            }
            if (st->close_after)
                break;
        }
        close(fd);
    }
    return NULL;
}

static void server_start(server *s, const step *steps, size_t n)
{
    memset(s, 0, sizeof *s);
    s->steps = steps;
    s->n_steps = n;
    assert_int_equal(pipe(s->stop_pipe), 0);
    s->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->listen_fd, 8), 0);
    socklen_t l = sizeof a;
    getsockname(s->listen_fd, (struct sockaddr *)&a, &l);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(server *s)
{
    ssize_t w = write(s->stop_pipe[1], "x", 1);
    (void)w;
    shutdown(s->listen_fd, SHUT_RDWR);
    close(s->listen_fd);
    pthread_join(s->th, NULL);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
}

static ferry_ch_client *client_for(const server *s, const char *user, const char *password,
                                   long read_timeout_ms)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", s->port);
    ferry_ch_options o = {.url = url, .user = user, .password = password,
                          .read_timeout_ms = read_timeout_ms, .max_attempts = 1};
    ferry_ch_client *c = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_ch_client_new(&o, &c, &err), FERRY_OK);
    return c;
}

static int run(ferry_ch_client *c, const char *sql, ferry_buf *out, ferry_ch_status *st,
               ferry_err *err)
{
    ferry_buf_free(out);
    return ferry_ch_query_buf(c, sql, "TabSeparated", out, st, err);
}

#define OK_5 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nrow1\n"
#define CHUNKED_OK "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" \
                   "5\r\nrow2\n\r\n0\r\n\r\n"

static void test_keep_alive_and_idle_close(void **state)
{
    (void)state;
    const step steps[] = {
        {OK_5, 0, false},
        {CHUNKED_OK, 0, true}, /* answers, then closes without saying so */
        {OK_5, 0, false},      /* the next query: resent on a new connection */
    };
    server s;
    server_start(&s, steps, 3);
    ferry_ch_client *c = client_for(&s, NULL, NULL, 5000);
    ferry_buf out = FERRY_BUF_INIT;
    ferry_ch_status st;
    ferry_err err = {0};
    assert_int_equal(run(c, "SELECT 1", &out, &st, &err), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&out), "row1\n");
    assert_int_equal(st.num_connects, 1);
    assert_int_equal(run(c, "SELECT 2", &out, &st, &err), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&out), "row2\n");
    assert_int_equal(st.num_connects, 0); /* kept alive */
    usleep(20000);                        /* let the server's close arrive */
    assert_int_equal(run(c, "SELECT 3", &out, &st, &err), FERRY_OK);
    assert_string_equal(ferry_buf_cstr(&out), "row1\n");
    assert_int_equal(st.num_connects, 1);
    assert_int_equal(st.attempts, 1); /* the resend is the transport's, not a retry */
    assert_int_equal(s.accepted, 2);
    ferry_buf_free(&out);
    ferry_ch_client_free(c);
    server_stop(&s);
}

static void test_in_band_exception_in_pieces(void **state)
{
    (void)state;
    const step steps[] = {
        {"HTTP/1.1 200 OK\r\nX-ClickHouse-Exception-Tag: qz7tag\r\n"
         "Transfer-Encoding: chunked\r\n\r\n"
         "4\r\n1\n2\n\r\n8E\r\n\r\n__exception__\r\nqz7tag\r\nCode: 395. DB::Exception: boom. (FUNCTION_THROW_IF_VALUE_IS_NON_ZERO) (version 25.11.1.1)\r\n91 qz7tag\r\n__exception__\r\n\r\n0\r\n\r\n",
         3, false},
        {"HTTP/1.1 404 Not Found\r\nX-ClickHouse-Exception-Code: 60\r\nContent-Length: 39\r\n"
         "\r\nCode: 60. DB::Exception: Unknown table.",
         0, false},
    };
    server s;
    server_start(&s, steps, 2);
    ferry_ch_client *c = client_for(&s, NULL, NULL, 5000);
    ferry_buf out = FERRY_BUF_INIT;
    ferry_ch_status st;
    ferry_err err = {0};
    assert_int_equal(run(c, "SELECT tagged", &out, &st, &err), FERRY_EREMOTE);
    assert_string_equal(ferry_buf_cstr(&out), "1\n2\n"); /* nothing of the exception block */
    assert_true(st.in_band);
    assert_int_equal(run(c, "SELECT missing", &out, &st, &err), FERRY_EREMOTE);
    assert_int_equal(st.http_status, 404);
    assert_int_equal(st.ch_code, 60);
    assert_non_null(strstr(err.msg, "Unknown table"));
    ferry_buf_free(&out);
    ferry_ch_client_free(c);
    server_stop(&s);
}

static void test_malformed_and_timeout(void **state)
{
    (void)state;
    const step steps[] = {
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nnothex\r\n", 0, false},
        {NULL, 0, false}, /* never answers */
    };
    server s;
    server_start(&s, steps, 2);
    ferry_ch_client *c = client_for(&s, NULL, NULL, 300);
    ferry_buf out = FERRY_BUF_INIT;
    ferry_ch_status st;
    ferry_err err = {0};
    assert_int_equal(run(c, "SELECT 1", &out, &st, &err), FERRY_EREMOTE);
    assert_non_null(strstr(err.msg, "malformed response"));
    assert_non_null(strstr(err.msg, "chunk size"));
    assert_int_equal(run(c, "SELECT 2", &out, &st, &err), FERRY_ETIMEOUT);
    assert_non_null(strstr(err.msg, "read timeout"));
    ferry_buf_free(&out);
    ferry_ch_client_free(c);
    server_stop(&s);
}

static void test_refused_and_credentials(void **state)
{
    (void)state;
    const step steps[] = {{OK_5, 0, false}};
    server s;
    server_start(&s, steps, 1);
    ferry_ch_client *c = client_for(&s, "ferry", "s3cr3t-pw", 5000);
    ferry_buf out = FERRY_BUF_INIT;
    ferry_ch_status st;
    ferry_err err = {0};
    assert_int_equal(run(c, "SELECT 1", &out, &st, &err), FERRY_OK);
    /* base64("ferry:s3cr3t-pw") */
    assert_non_null(strstr(s.last_request, "Authorization: Basic ZmVycnk6czNjcjN0LXB3\r\n"));
    assert_non_null(strstr(s.last_request, "POST /?query_id="));
    ferry_ch_client_free(c);
    uint16_t port = s.port;
    server_stop(&s);

    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", port); /* nobody listens any more */
    ferry_ch_options o = {.url = url, .password = "s3cr3t-pw", .max_attempts = 1};
    assert_int_equal(ferry_ch_client_new(&o, &c, &err), FERRY_OK);
    assert_int_equal(run(c, "SELECT 1", &out, &st, &err), FERRY_ECONNECT);
    assert_non_null(strstr(err.msg, "cannot connect"));
    assert_null(strstr(err.msg, "s3cr3t"));
    ferry_buf_free(&out);
    ferry_ch_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_alive_and_idle_close),
        cmocka_unit_test(test_in_band_exception_in_pieces),
        cmocka_unit_test(test_malformed_and_timeout),
        cmocka_unit_test(test_refused_and_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
