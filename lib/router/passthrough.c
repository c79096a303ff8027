/* Passthrough: a statement the router does not route goes unchanged to the configured default
 * server ([router] passthrough): same method, query string, ClickHouse headers and body; the
 * answer (status, X-ClickHouse-* headers, body) is streamed back as it arrives, so a large SELECT
 * result is never held in memory. A libcurl transfer runs on its own thread and writes the body
 * into a pipe that the HTTP server's stream reader drains.
 *
 * The request's body goes one of two ways. A statement read whole (a SELECT, DDL: the router
 * must see all of it to decide it is not a routed read; at most max_query_size, as a server
 * would parse) is handed over in memory, the request's own buffer without a copy
 * (rt_passthrough). An INSERT that is not routed, or a multipart body (the client's external
 * data), streams (rt_passthrough_open / _feed / _finish): the connection's thread puts each
 * piece of the body into a bounded ring ([router] stream_buffer_bytes, charged to the memory
 * budget) as it arrives, and libcurl's read callback sends it on (chunked, or with the client's
 * Content-Length), so memory per request is that ring plus the answer's pipe, whatever the
 * body's size. A full ring makes the client wait (TCP back-pressure).
 *
 * Credentials: with [router] auth = catalog the client authenticated with the router, and its
 * user, password and Authorization are never forwarded; the passthrough server gets the
 * router's own identity ([router] passthrough_user / passthrough_password_file). With auth =
 * none the router is transparent: the client's credentials go to the passthrough server as
 * they came (it is the one that checks them).
 *
 * Threads: a transfer runs on a thread of a pool that grows with the transfers in flight and
 * shrinks after PT_WORKER_IDLE_S idle, rather than on a thread of its own: creating and ending a
 * thread per statement maps and unmaps a stack, and the unmapping interrupts every other CPU
 * running one of the router's threads (a TLB shootdown), which showed in the profile of a
 * router passing many small statements through (docs/benchmarks.md, "The router under
 * abuse"). */
#include "router_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/clock.h"
#include "ferry/curl_easy.h"
#include "ferry/log.h"

/* the TCP (and TLS) connect to the passthrough server */
#define PT_CONNECT_TIMEOUT_MS 5000L

struct rt_pt {
    ferry_router *r;
    CURL *curl;
    struct curl_slist *req_headers;
    ferry_buf url;
    const void *body; /* owned (rt_passthrough): the body is body_len bytes from body_at */
    size_t body_at, body_len;
    bool is_get;
    int pipe_rd, pipe_wr;
    bool th_started;  /* handed to a worker (pt_main runs or will run) */
    bool released;    /* the worker is done with it (pt_free may go on), under mu */
    struct rt_pt *next; /* the workers' queue */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool headers_done; /* status and headers known (first body byte or the end) */
    bool finished;
    long status;
    char hdr_names[16][64];
    char hdr_values[16][512];
    size_t n_hdrs;
    char content_type[128];
    CURLcode result;
    char errbuf[CURL_ERROR_SIZE];
    /* [router] passthrough_timeout: the longest the server may send nothing */
    unsigned timeout_s;
    curl_off_t last_dl, last_ul;
    double last_activity; /* ferry_clock_s() when bytes last moved either way */
    bool stalled;
    /* a streamed body (rt_passthrough_open), under mu: the ring between the connection's thread
     * (rt_passthrough_feed) and libcurl's read callback (on_read) */
    bool streamed;
    char *ring;
    size_t cap, head, len;
    size_t charged;   /* of the router's memory budget, for the ring */
    bool in_eof;      /* the client's body ended */
    bool in_abort;    /* the request went away or was refused: the upload fails */
};
typedef struct rt_pt pt;

/* Under mu: the status and headers are known from here (pt_answer may go on). */
static void mark_headers_locked(pt *p)
{
    if (!p->headers_done) {
        curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &p->status);
        p->headers_done = true;
        pthread_cond_broadcast(&p->cond);
    }
}

static void mark_headers(pt *p)
{
    pthread_mutex_lock(&p->mu);
    mark_headers_locked(p);
    pthread_mutex_unlock(&p->mu);
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
    pt *p = arg;
    size_t len = size * n;
    char line[700];
    size_t l = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, buf, l);
    line[l] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (!strncasecmp(line, "HTTP/", 5)) {
        p->n_hdrs = 0; /* a new response (after 100 Continue) */
        return len;
    }
    char *colon = strchr(line, ':');
    if (!colon)
        return len;
    *colon = '\0';
    const char *v = colon + 1;
    while (*v == ' ')
        v++;
    if (!strcasecmp(line, "Content-Type")) {
        size_t cl = strnlen(v, sizeof p->content_type - 1);
        memcpy(p->content_type, v, cl);
        p->content_type[cl] = '\0';
    } else if (!strncasecmp(line, "X-ClickHouse-", 13) && p->n_hdrs < 16) {
        size_t nl = strnlen(line, sizeof p->hdr_names[0] - 1);
        memcpy(p->hdr_names[p->n_hdrs], line, nl);
        p->hdr_names[p->n_hdrs][nl] = '\0';
        size_t vl = strnlen(v, sizeof p->hdr_values[0] - 1);
        memcpy(p->hdr_values[p->n_hdrs], v, vl);
        p->hdr_values[p->n_hdrs][vl] = '\0';
        p->n_hdrs++;
    }
    return len;
}

static size_t on_write(char *buf, size_t size, size_t n, void *arg)
{
    pt *p = arg;
    size_t len = size * n;
    mark_headers(p);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(p->pipe_wr, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0; /* the client went away: abort the transfer */
        off += (size_t)w;
    }
    return len;
}

/* libcurl calls this about once a second and at every transfer: a transfer with no byte
 * received or sent for timeout_s is a stalled server (stopped, hung, or a socket that accepts
 * and never answers). Time blocked writing to a slow client does not count: no call then, and
 * the next one sees the new bytes. (libcurl's own low-speed limit averages over 5 s windows
 * that count the request's upload, so it would fire up to 5 s late.) */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)ultotal;
    pt *p = arg;
    double now = ferry_clock_s();
    if (dlnow != p->last_dl || ulnow != p->last_ul) {
        p->last_dl = dlnow;
        p->last_ul = ulnow;
        p->last_activity = now;
        return 0;
    }
    if (now - p->last_activity > (double)p->timeout_s) {
        p->stalled = true;
        return 1;
    }
    return 0;
}

/* libcurl's read callback of a streamed body: the ring's bytes as they come, 0 at the body's
 * end, an abort when the request went away. Waiting for the client is not the server stalling:
 * the stall clock (on_progress) starts again when bytes come. */
static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    pt *p = arg;
    size_t max = size * n;
    pthread_mutex_lock(&p->mu);
    while (!p->len && !p->in_eof && !p->in_abort)
        pthread_cond_wait(&p->cond, &p->mu);
    if (p->in_abort) {
        pthread_mutex_unlock(&p->mu);
        return CURL_READFUNC_ABORT;
    }
    size_t k = p->len < max ? p->len : max;
    size_t first = p->cap - p->head < k ? p->cap - p->head : k;
    memcpy(buf, p->ring + p->head, first);
    memcpy(buf + first, p->ring, k - first);
    p->head = (p->head + k) % p->cap;
    p->len -= k;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    p->last_activity = ferry_clock_s();
    return k;
}

static void pt_main(pt *p)
{
    p->result = curl_easy_perform(p->curl);
    /* finished with the headers in one step: pt_answer, woken by headers_done, must see a
     * transfer that failed before any answer as finished, or it streams an empty broken body
     * instead of answering the error (seen as a client's "partial transfer" on a stall) */
    pthread_mutex_lock(&p->mu);
    mark_headers_locked(p);
    p->finished = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    close(p->pipe_wr);
    pthread_mutex_lock(&p->mu);
    p->pipe_wr = -1;
    p->released = true; /* the last touch: pt_free may free p from here */
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

#define PT_WORKER_IDLE_S 30

/* A worker: runs queued transfers; leaves after PT_WORKER_IDLE_S without one, or at stop. */
static void *pt_worker(void *arg)
{
    ferry_router *r = arg;
    pthread_mutex_lock(&r->pt_work_mu);
    for (;;) {
        if (!r->pt_work_head && !r->pt_work_stop) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += PT_WORKER_IDLE_S;
            r->pt_idle++;
            int rc = 0;
            while (!r->pt_work_head && !r->pt_work_stop && rc != ETIMEDOUT)
                rc = pthread_cond_timedwait(&r->pt_work_cond, &r->pt_work_mu, &dl);
            r->pt_idle--;
        }
        pt *p = r->pt_work_head;
        if (!p)
            break; /* idle too long, or the router stops */
        r->pt_work_head = p->next;
        if (!r->pt_work_head)
            r->pt_work_tail = NULL;
        r->pt_work_queued--;
        pthread_mutex_unlock(&r->pt_work_mu);
        pt_main(p);
        pthread_mutex_lock(&r->pt_work_mu);
    }
    r->pt_workers--;
    pthread_cond_broadcast(&r->pt_work_cond);
    pthread_mutex_unlock(&r->pt_work_mu);
    return NULL;
}

/* Queues p for a worker: an idle one, or a new one when every worker is busy. false when no
 * thread could be started and none is left to run it. */
static bool pt_submit(pt *p)
{
    ferry_router *r = p->r;
    bool ok = true;
    pthread_mutex_lock(&r->pt_work_mu);
    if (r->pt_work_tail)
        r->pt_work_tail->next = p;
    else
        r->pt_work_head = p;
    r->pt_work_tail = p;
    r->pt_work_queued++;
    if (r->pt_idle >= r->pt_work_queued) {
        pthread_cond_signal(&r->pt_work_cond);
    } else {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, pt_worker, r) == 0) {
            r->pt_workers++;
        } else if (!r->pt_workers) {
            /* nobody will take it: unqueue (it is the last one: no worker takes any) */
            pt **q = &r->pt_work_head;
            while (*q != p)
                q = &(*q)->next;
            *q = p->next;
            r->pt_work_tail = NULL;
            for (pt *t = r->pt_work_head; t; t = t->next)
                r->pt_work_tail = t;
            r->pt_work_queued--;
            ok = false;
        }
        pthread_attr_destroy(&at);
    }
    pthread_mutex_unlock(&r->pt_work_mu);
    return ok;
}

/* A handle for a transfer, with ferry's common options and errbuf as its error buffer: an idle
 * one when there is (its connection to the passthrough server kept alive: no connect, and no new
 * connection for the server to set up, per statement), or a new one. NULL when libcurl has none
 * to give (logged). */
static CURL *pool_take(ferry_router *r, char *errbuf)
{
    CURL *h = NULL;
    pthread_mutex_lock(&r->pt_pool_mu);
    if (r->pt_pool_n)
        h = r->pt_pool[--r->pt_pool_n];
    pthread_mutex_unlock(&r->pt_pool_mu);
    if (h) {
        curl_easy_reset(h); /* the options go; the connection cache stays */
        ferry_curl_common(h, PT_CONNECT_TIMEOUT_MS, errbuf);
        return h;
    }
    ferry_err e = {0};
    if (ferry_curl_new(PT_CONNECT_TIMEOUT_MS, errbuf, &h, &e))
        FLOG_ERROR("msg=\"router: no libcurl handle for a passthrough\" err=\"%s\"", e.msg);
    return h;
}

static void pool_give(ferry_router *r, CURL *h)
{
    pthread_mutex_lock(&r->pt_pool_mu);
    if (h && r->pt_pool_n < sizeof r->pt_pool / sizeof r->pt_pool[0]) {
        r->pt_pool[r->pt_pool_n++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&r->pt_pool_mu);
    curl_easy_cleanup(h);
}

void rt_passthrough_pool_free(ferry_router *r)
{
    /* the workers (every transfer ended with its request, before this) */
    pthread_mutex_lock(&r->pt_work_mu);
    r->pt_work_stop = true;
    pthread_cond_broadcast(&r->pt_work_cond);
    while (r->pt_workers)
        pthread_cond_wait(&r->pt_work_cond, &r->pt_work_mu);
    pthread_mutex_unlock(&r->pt_work_mu);
    pthread_mutex_lock(&r->pt_pool_mu);
    for (size_t i = 0; i < r->pt_pool_n; i++)
        curl_easy_cleanup(r->pt_pool[i]);
    r->pt_pool_n = 0;
    pthread_mutex_unlock(&r->pt_pool_mu);
}

static void pt_free(void *arg)
{
    pt *p = arg;
    pthread_mutex_lock(&p->mu);
    if (!p->in_eof)
        p->in_abort = true; /* a body not complete must not look complete upstream */
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    if (p->pipe_rd >= 0)
        close(p->pipe_rd); /* a transfer still writing fails and stops */
    if (p->th_started) {
        pthread_mutex_lock(&p->mu);
        while (!p->released)
            pthread_cond_wait(&p->cond, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    if (p->pipe_wr >= 0)
        close(p->pipe_wr);
    /* only a handle whose transfer ended well goes back (a failed one may hold a connection
     * in an unknown state; libcurl would close it, but there is no gain in keeping it) */
    if (p->th_started && p->finished && p->result == CURLE_OK)
        pool_give(p->r, p->curl);
    else
        curl_easy_cleanup(p->curl);
    curl_slist_free_all(p->req_headers);
    ferry_buf_free(&p->url);
    free((void *)p->body);
    free(p->ring);
    rt_mem_release(p->r, p->charged);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p);
}

static ssize_t pt_read(void *cls, char *buf, size_t max)
{
    pt *p = cls;
    for (;;) {
        ssize_t n = read(p->pipe_rd, buf, max);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            return n;
        if (n < 0)
            return -1;
        /* End of the pipe: the transfer is over; a broken one must not look complete. */
        return p->result == CURLE_OK ? 0 : -1;
    }
}

typedef struct qs_ctx {
    CURL *curl;
    ferry_buf *url;
    bool first;
    bool strip_credentials;
} qs_ctx;

bool rt_credential_param(const char *name)
{
    return !strcmp(name, "user") || !strcmp(name, "password") || !strcmp(name, "quota_key");
}

static int add_arg(void *cls, const char *name, const char *value)
{
    qs_ctx *q = cls;
    if (q->strip_credentials && rt_credential_param(name))
        return 0;
    char *n = curl_easy_escape(q->curl, name, 0);
    char *v = value ? curl_easy_escape(q->curl, value, 0) : NULL;
    ferry_buf_printf(q->url, "%c%s", q->first ? '?' : '&', n ? n : "");
    if (v)
        ferry_buf_printf(q->url, "=%s", v);
    q->first = false;
    curl_free(n);
    curl_free(v);
    return 0;
}

/* A transfer for the request with everything but its body: URL, headers, credentials, the
 * answer's callbacks and the stall clock. NULL after answering the request itself. */
static pt *pt_setup(ferry_router *r, ferry_http_req *req)
{
    if (!r->passthrough[0]) {
        rt_respond_error(req, "NOT_IMPLEMENTED",
                         "ferry router: this statement is not an INSERT into a managed table and "
                         "no [router] passthrough server is configured");
        return NULL;
    }
    pt *p = calloc(1, sizeof *p);
    int fds[2] = {-1, -1};
    CURL *cu = NULL;
    if (!p || pipe(fds) != 0 || !(cu = pool_take(r, p->errbuf))) {
        if (fds[0] >= 0) {
            close(fds[0]);
            close(fds[1]);
        }
        free(p);
        rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of resources");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->pipe_rd = fds[0];
    p->pipe_wr = fds[1];
    p->r = r;
    p->curl = cu;
    const char *method = ferry_http_method(req);
    p->is_get = !strcmp(method, "GET");
    const char *base = r->passthrough;
    size_t bl = strlen(base);
    ferry_buf_append(&p->url, base, bl && base[bl - 1] == '/' ? bl - 1 : bl);
    ferry_buf_puts(&p->url, ferry_http_path(req));
    bool own = r->auth == RT_AUTH_CATALOG; /* the router's identity, not the client's */
    qs_ctx q = {p->curl, &p->url, true, own};
    ferry_http_args_foreach(req, add_arg, &q);
    static const char *const fwd[] = {"Authorization", "X-ClickHouse-User", "X-ClickHouse-Key",
                                      "X-ClickHouse-Database", "X-ClickHouse-Format",
                                      "X-ClickHouse-Quota", "Content-Type", NULL};
    for (int i = 0; fwd[i]; i++) {
        const char *v = ferry_http_header(req, fwd[i]);
        if (!v || (own && i < 3))
            continue;
        char h[1024];
        snprintf(h, sizeof h, "%s: %s", fwd[i], v);
        p->req_headers = curl_slist_append(p->req_headers, h);
    }
    p->req_headers = curl_slist_append(p->req_headers, "Expect:");
    if (own && r->passthrough_user[0]) {
        curl_easy_setopt(p->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(p->curl, CURLOPT_USERNAME, r->passthrough_user);
        curl_easy_setopt(p->curl, CURLOPT_PASSWORD,
                         r->passthrough_password ? r->passthrough_password : "");
    }
    curl_easy_setopt(p->curl, CURLOPT_URL, ferry_buf_cstr(&p->url));
    curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->req_headers);
    curl_easy_setopt(p->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(p->curl, CURLOPT_HEADERDATA, p);
    curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, p);
    if (r->passthrough_timeout_s) {
        /* a stalled server must not hold the client and a thread forever (on_progress) */
        p->timeout_s = r->passthrough_timeout_s;
        p->last_activity = ferry_clock_s();
        curl_easy_setopt(p->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(p->curl, CURLOPT_XFERINFODATA, p);
        curl_easy_setopt(p->curl, CURLOPT_NOPROGRESS, 0L);
    }
    if (!p->is_get && strcmp(method, "POST"))
        curl_easy_setopt(p->curl, CURLOPT_CUSTOMREQUEST, method);
    return p;
}

/* Starts the transfer's thread; false after answering the request (p freed). */
static bool pt_start(pt *p, ferry_http_req *req)
{
    p->th_started = pt_submit(p);
    if (p->th_started)
        return true;
    pt_free(p);
    rt_respond_error(req, "CANNOT_SCHEDULE_TASK", "ferry router: cannot start a thread");
    return false;
}

/* Waits for the server's status and headers and answers the request with them, the body
 * streamed from the pipe (p owned by the answer from here), or the error of a server that
 * could not be reached or stalled (p freed). */
static void pt_answer(pt *p, ferry_http_req *req)
{
    ferry_router *r = p->r;
    pthread_mutex_lock(&p->mu);
    while (!p->headers_done)
        pthread_cond_wait(&p->cond, &p->mu);
    bool finished = p->finished;
    pthread_mutex_unlock(&p->mu);
    if (finished && p->result != CURLE_OK && p->status == 0) {
        char redacted[FERRY_URL_MAX];
        ferry_redact_url(r->passthrough, redacted, sizeof redacted);
        char msg[CURL_ERROR_SIZE];
        snprintf(msg, sizeof msg, "%s", p->errbuf[0] ? p->errbuf : curl_easy_strerror(p->result));
        bool stalled = p->stalled;
        pt_free(p);
        if (stalled) {
            rt_respond_error(req, "TIMEOUT_EXCEEDED",
                             "ferry router: the passthrough server %s sent nothing for %u s "
                             "([router] passthrough_timeout); the statement may still run there",
                             redacted, r->passthrough_timeout_s);
            return;
        }
        rt_respond_error(req, "ALL_CONNECTION_TRIES_FAILED",
                         "ferry router: the passthrough server %s cannot be reached: %s", redacted,
                         msg);
        return;
    }
    for (size_t i = 0; i < p->n_hdrs; i++)
        ferry_http_add_header(req, p->hdr_names[i], p->hdr_values[i]);
    ferry_http_respond_stream(req, (unsigned)(p->status ? p->status : 502),
                              p->content_type[0] ? p->content_type : NULL, pt_read, p, pt_free);
}

void rt_passthrough(ferry_router *r, ferry_http_req *req, ferry_buf *held, size_t body_at)
{
    pt *p = pt_setup(r, req);
    if (!p)
        return;
    /* the request's own buffer, not a copy: it stays charged to the memory budget by the
     * request until the request ends, after this transfer */
    if (held->data && held->len > body_at) {
        p->body_len = held->len - body_at;
        p->body_at = body_at;
        p->body = ferry_buf_detach(held);
    }
    if (!p->is_get) {
        curl_easy_setopt(p->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS,
                         p->body ? (const char *)p->body + p->body_at : "");
        curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->body_len);
    }
    if (pt_start(p, req))
        pt_answer(p, req);
}

rt_pt *rt_passthrough_open(ferry_router *r, ferry_http_req *req)
{
    pt *p = pt_setup(r, req);
    if (!p)
        return NULL;
    size_t cap = r->stream_buffer_bytes;
    if (!rt_mem_reserve(r, cap)) {
        pt_free(p);
        rt_metrics_refused(r, RT_REFUSED_MEMORY);
        rt_respond_error(req, "MEMORY_LIMIT_EXCEEDED",
                         "ferry router: the requests in progress hold the router's [router] "
                         "memory_budget (%zu bytes); retry later",
                         r->memory_budget);
        return NULL;
    }
    p->charged = cap;
    p->streamed = true;
    if (!(p->ring = malloc(cap))) {
        pt_free(p);
        rt_respond_error(req, "CANNOT_ALLOCATE_MEMORY", "ferry router: out of memory");
        return NULL;
    }
    p->cap = cap;
    /* the client's length when it gave one (the body forwarded is exactly its body), else
     * chunked */
    curl_off_t size = -1;
    const char *cl = ferry_http_header(req, "Content-Length");
    if (cl && *cl) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (!errno && end && !*end)
            size = (curl_off_t)v;
    }
    curl_easy_setopt(p->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(p->curl, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(p->curl, CURLOPT_READDATA, p);
    curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, size);
    if (size < 0)
        p->req_headers = curl_slist_append(p->req_headers, "Transfer-Encoding: chunked");
    curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->req_headers);
    if (!pt_start(p, req))
        return NULL;
    return p;
}

int rt_passthrough_feed(rt_pt *p, const char *data, size_t len)
{
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    while (len) {
        if (p->finished || p->in_abort) {
            rc = 1; /* the server answered already (an error): the rest is not needed */
            break;
        }
        size_t room = p->cap - p->len;
        if (!room) {
            if (!p->timeout_s) {
                pthread_cond_wait(&p->cond, &p->mu);
                continue;
            }
            /* the server taking nothing for passthrough_timeout is a stall, as on_progress
             * sees it (which libcurl does not call while it waits for room to send) */
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += p->timeout_s;
            if (pthread_cond_timedwait(&p->cond, &p->mu, &dl) == ETIMEDOUT &&
                p->len == p->cap && !p->finished) {
                p->in_abort = true;
                p->stalled = true;
                pthread_cond_broadcast(&p->cond);
                rc = -1;
                break;
            }
            continue;
        }
        size_t k = len < room ? len : room;
        size_t tail = (p->head + p->len) % p->cap;
        size_t first = p->cap - tail < k ? p->cap - tail : k;
        memcpy(p->ring + tail, data, first);
        memcpy(p->ring, data + first, k - first);
        p->len += k;
        data += k;
        len -= k;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void rt_passthrough_finish(rt_pt *p, ferry_http_req *req)
{
    pthread_mutex_lock(&p->mu);
    p->in_eof = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    pt_answer(p, req);
}

void rt_passthrough_abort(rt_pt *p)
{
    if (p)
        pt_free(p);
}
