/* The ClickHouse client's plain-socket transport for http:// servers: one kept-alive TCP
 * connection, a request written with one sendmsg, the response read with blocking recv calls
 * (SO_RCVTIMEO is the read timeout) and parsed by http1.c.
 *
 * Why not libcurl for these: a statement through libcurl took ~10 system calls (its multi loop
 * polls before and after every send and receive) and ~0.15 ms more per request than this on
 * the lab machine (docs/benchmarks.md, "Read router"), which is most of what the router adds
 * to a small query. Everything libcurl is needed for stays with it: TLS (https://), proxies
 * (http_proxy / all_proxy in the environment), and request bodies streamed from a reader.
 *
 * A connection that was idle may have been closed by the server: if sending on a reused
 * connection fails, or it closes before any response byte, the request is sent once more on a
 * new connection (the server never read it; libcurl does the same). */
#include "clickhouse_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"

#define RECV_BUF (256 * 1024)

struct ferry_ch_wire {
    int fd;             /* -1 when not connected */
    bool reused;        /* fd has carried a request before */
    long timeout_ms;    /* SO_SNDTIMEO / SO_RCVTIMEO set on fd (0: not yet) */
    char host[256];     /* for getaddrinfo: no brackets around an IPv6 literal */
    char port[8];
    char *authority;    /* Host: header value */
    char *path;         /* base path, "/" at least */
    char *auth_header;  /* "Authorization: Basic ...\r\n": holds the password */
    char *buf;          /* RECV_BUF bytes */
    ferry_http1 parser; /* the response being read (kept here: its line buffer is 8 KiB) */
};

static bool proxy_configured(void)
{
    static const char *const vars[] = {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return true;
    }
    return false;
}

static void wire_close(ferry_ch_wire *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    w->reused = false;
    w->timeout_ms = 0;
}

void ferry_ch_wire_free(ferry_ch_wire *w)
{
    if (!w)
        return;
    wire_close(w);
    free(w->authority);
    free(w->path);
    if (w->auth_header) {
        explicit_bzero(w->auth_header, strlen(w->auth_header));
        free(w->auth_header);
    }
    free(w->buf);
    free(w);
}

int ferry_ch_wire_new(const char *base_url, const char *user, const char *password,
                      ferry_ch_wire **out, ferry_err *err)
{
    int rc = FERRY_OK;
    *out = NULL;
    if (strncasecmp(base_url, "http://", 7) || proxy_configured())
        return FERRY_OK; /* libcurl's job */
    ferry_ch_wire *w = calloc(1, sizeof *w);
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *path = NULL, *cred = NULL;
    unsigned char *b64 = NULL;
    if (!w || !u) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    w->fd = -1;
    if (curl_url_set(u, CURLUPART_URL, base_url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        rc = ferry_err_set(err, FERRY_EINVAL, "ClickHouse URL %s: cannot parse it", base_url);
        goto out;
    }
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']')
        snprintf(w->host, sizeof w->host, "%.*s", (int)(hl - 2), host + 1);
    else
        snprintf(w->host, sizeof w->host, "%s", host);
    snprintf(w->port, sizeof w->port, "%s", port);
    size_t alen = hl + strlen(port) + 2;
    w->authority = malloc(alen);
    w->path = strdup(*path ? path : "/");
    w->buf = malloc(RECV_BUF);
    if (!w->authority || !w->path || !w->buf) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(w->authority, alen, "%s:%s", host, port);
    if (user || password) {
        const char *uname = user ? user : "default";
        size_t clen = strlen(uname) + 1 + (password ? strlen(password) : 0);
        cred = malloc(clen + 1);
        b64 = malloc(4 * ((clen + 2) / 3) + 1);
        if (!cred || !b64) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        snprintf(cred, clen + 1, "%s:%s", uname, password ? password : "");
        int n = EVP_EncodeBlock(b64, (const unsigned char *)cred, (int)clen);
        size_t hlen = (size_t)n + 32;
        w->auth_header = malloc(hlen);
        if (!w->auth_header) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        snprintf(w->auth_header, hlen, "Authorization: Basic %s\r\n", b64);
        explicit_bzero(b64, (size_t)n);
        explicit_bzero(cred, clen);
    }
out:
    free(cred);
    free(b64);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_url_cleanup(u);
    if (rc)
        ferry_ch_wire_free(w);
    else
        *out = w;
    return rc;
}

const char *ferry_ch_wire_base_path(const ferry_ch_wire *w)
{
    return w->path;
}

static void set_timeout(int fd, int opt, long ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

/* Connects to the first address that answers within the connect timeout. */
static int wire_connect(ferry_ch_wire *w, const ferry_ch_wire_io *io, const char *who,
                        ferry_err *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(w->host, w->port, &hints, &res);
    if (g)
        return ferry_err_set(err, FERRY_ECONNECT, "cannot connect to ClickHouse at %s: cannot "
                             "resolve the host: %s; is the URL right?", who, gai_strerror(g));
    int last_errno = 0;
    bool timed_out = false;
    long long deadline = (long long)ferry_clock_ms_u64() + io->connect_timeout_ms;
    for (struct addrinfo *a = res; a && w->fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        a->ai_protocol);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        int r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            long long left = deadline - (long long)ferry_clock_ms_u64();
            int pr;
            do
                pr = poll(&pf, 1, left > 0 ? (int)left : 0);
            while (pr < 0 && errno == EINTR);
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (pr == 0) {
                timed_out = true;
                errno = ETIMEDOUT;
            } else if (pr > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0) {
                r = soerr ? -1 : 0;
                errno = soerr;
            }
        }
        if (r != 0) {
            last_errno = errno;
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        w->fd = fd;
        w->reused = false;
    }
    freeaddrinfo(res);
    if (w->fd >= 0)
        return FERRY_OK;
    if (timed_out)
        return ferry_err_set(err, FERRY_ETIMEOUT, "cannot connect to ClickHouse at %s within "
                             "%ld ms", who, io->connect_timeout_ms);
    return ferry_err_set(err, FERRY_ECONNECT, "cannot connect to ClickHouse at %s: %s; is the "
                         "server running and the URL right?", who, strerror(last_errno));
}

static int send_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

/* One try on the current (or a new) connection. *retry_fresh: a reused connection died before
 * any response byte, so the request may go out again on a new one. */
static int exchange_once(ferry_ch_wire *w, ferry_ch_wire_io *io, const char *head,
                         size_t head_len, bool *retry_fresh, enum ferry_ch_failure *failure,
                         const char *who, ferry_err *err)
{
    *retry_fresh = false;
    if (w->fd < 0) {
        int rc = wire_connect(w, io, who, err);
        if (rc) {
            *failure = FERRY_CH_FAIL_CONNECT;
            return rc;
        }
        io->connects++;
    }
    bool was_reused = w->reused;
    w->reused = true;
    if (w->timeout_ms != io->read_timeout_ms) { /* two system calls saved per request */
        set_timeout(w->fd, SO_SNDTIMEO, io->read_timeout_ms);
        set_timeout(w->fd, SO_RCVTIMEO, io->read_timeout_ms);
        w->timeout_ms = io->read_timeout_ms;
    }
    struct iovec iov[2] = {{(void *)head, head_len}, {(void *)io->body, io->body_len}};
    if (send_all(w->fd, iov, io->body_len ? 2 : 1) != 0) {
        int e = errno;
        wire_close(w);
        if (was_reused && (e == EPIPE || e == ECONNRESET)) {
            *retry_fresh = true;
            *failure = FERRY_CH_FAIL_NO_REPLY;
            return ferry_err_set(err, FERRY_ECONNECT, "ClickHouse at %s closed the idle "
                                 "connection", who);
        }
        if (e == EAGAIN || e == EWOULDBLOCK) {
            io->timed_out = true;
            *failure = FERRY_CH_FAIL_TIMEOUT;
            return ferry_err_set(err, FERRY_ETIMEOUT, "ClickHouse at %s: sending the request "
                                 "stalled for %ld ms (read timeout)", who, io->read_timeout_ms);
        }
        *failure = FERRY_CH_FAIL_NO_REPLY;
        return ferry_err_set(err, FERRY_ECONNECT, "ClickHouse at %s: sending the request "
                             "failed: %s", who, strerror(e));
    }
    io->bytes_sent += head_len + io->body_len;
    ferry_http1 *p = &w->parser;
    for (;;) {
        ssize_t k = recv(w->fd, w->buf, RECV_BUF, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k > 0) {
            io->got_response = true;
            io->bytes_received += (uint64_t)k;
            size_t used = 0;
            int rc = ferry_http1_feed(p, w->buf, (size_t)k, &used, err);
            if (rc) {
                wire_close(w);
                if (rc == FERRY_EREMOTE && !io->stopped) {
                    *failure = FERRY_CH_FAIL_PARTIAL;
                    ferry_err_prefix(err, "ClickHouse at %s sent a malformed response: ", who);
                } else {
                    *failure = FERRY_CH_FAIL_LOCAL;
                }
                return rc;
            }
            if (ferry_http1_done(p)) {
                if (used < (size_t)k || !p->keep_alive)
                    wire_close(w); /* bytes beyond the response, or the server will close */
                return FERRY_OK;
            }
            continue;
        }
        int e = k == 0 ? 0 : errno;
        wire_close(w);
        if (e == EAGAIN || e == EWOULDBLOCK) {
            io->timed_out = true;
            *failure = FERRY_CH_FAIL_TIMEOUT;
            return ferry_err_set(err, FERRY_ETIMEOUT, "ClickHouse at %s: no data for %ld ms "
                                 "(read timeout) after %llu bytes of the response", who,
                                 io->read_timeout_ms, (unsigned long long)io->bytes_received);
        }
        if (k == 0 && ferry_http1_finish(p, NULL) == FERRY_OK)
            return FERRY_OK; /* a body delimited by the end of the connection */
        if (!io->got_response) {
            *retry_fresh = was_reused;
            *failure = FERRY_CH_FAIL_NO_REPLY;
            return ferry_err_set(err, FERRY_ECONNECT, "ClickHouse at %s closed the connection "
                                 "before answering (%s); the statement may or may not have run",
                                 who, e ? strerror(e) : "end of stream");
        }
        *failure = FERRY_CH_FAIL_PARTIAL;
        return ferry_err_set(err, FERRY_ECONNECT, "connection to ClickHouse at %s broke after "
                             "%llu bytes of the response (%s): the server may have stopped; the "
                             "result is incomplete", who, (unsigned long long)io->bytes_received,
                             e ? strerror(e) : "end of stream");
    }
}

int ferry_ch_wire_exchange(ferry_ch_wire *w, ferry_ch_wire_io *io, enum ferry_ch_failure *failure,
                           const char *who, ferry_err *err)
{
    ferry_buf head = FERRY_BUF_INIT;
    int rc = ferry_buf_printf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\n"
                              "Content-Type: text/plain; charset=UTF-8\r\n\r\n",
                              io->target, w->authority, w->auth_header ? w->auth_header : "",
                              io->body_len);
    if (rc) {
        *failure = FERRY_CH_FAIL_LOCAL;
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        bool retry_fresh = false;
        ferry_http1_init(&w->parser, io->on_header, io->on_body, io->arg, false);
        io->parser = &w->parser;
        io->got_response = false;
        rc = exchange_once(w, io, head.data, head.len, &retry_fresh, failure, who, err);
        if (!rc || !retry_fresh)
            break;
    }
out:
    if (head.data)
        explicit_bzero(head.data, head.len); /* it carried the credentials */
    ferry_buf_free(&head);
    return rc;
}
