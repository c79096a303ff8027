/* The HTTP server module (see include/ferry/httpd.h): a route table over libmicrohttpd, with
 * buffered or streamed request bodies and buffered or streamed responses. */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

#include "ferry/clock.h"
#include "ferry/httpd.h"
#include "ferry/buf.h"
#include "ferry/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* One TCP connection, tracked for the deadlines (header_timeout_s, receive_timeout_s): from the
 * connection's start (or the end of its previous request) its request's headers must be in
 * within header_timeout_s, and its body within receive_timeout_s, however slowly bytes trickle
 * in (MHD's own timeout is reset by every byte); the body must also keep min_receive_rate. A
 * watchdog thread shuts the socket down past a deadline; MHD then closes the connection.
 * Connections are also counted per client address here (max_per_address) rather than with
 * MHD's own per-IP limit, which closes the surplus at accept without a word: a connection over
 * the limit is kept just long enough to answer its first request with 429. With a request
 * rate (max_rate), each address also has a token bucket of one second's requests, over all its
 * connections; a request past it is answered 429 before its body is read and puts the address
 * in debt (at most a second's worth), and while it owes, its new connections are closed at
 * accept (accept_cb). */
typedef struct addr_count {
    unsigned char key[17]; /* family, then the address bytes */
    unsigned n;            /* admitted connections from this address */
    double tokens;         /* max_rate: requests it may still make now (at most max_rate) */
    double t_last;         /* when tokens was last brought up to date (monotonic seconds) */
    struct addr_count *next;
} addr_count;

#define ADDR_BUCKETS 256
/* A body found over its bound only while it arrives (chunked, or a Content-Length that lied)
 * gets its 413 once the body ends (libmicrohttpd 0.9.75 cannot answer in the middle of one);
 * past this much more, the connection is dropped instead. */
#define DRAIN_MAX ((size_t)4 << 20)
#define OVER_HEADER_TIMEOUT_S 1.0 /* an over-limit connection must ask at once */
#define OVER_ADDRESS_SLACK 16     /* over-limit connections of one address answered 429 */
/* With a request rate, an address's entry outlives its connections until its bucket is full
 * again (so a client cannot reset its budget by reconnecting); the watchdog frees it after. */
#define ADDR_KEEP_S 2.0

typedef struct conn_track {
    int fd;
    int phase;          /* 0: waiting for headers, 1: receiving the body, 2: answering */
    double t0;          /* when the phase's deadline started counting (monotonic seconds) */
    bool cut;           /* shut down by the watchdog */
    bool over;          /* over max_per_address: answered 429, never served */
    bool busy;          /* inside the route's on_body (its time is not the client's) */
    double busy_t0;
    uint64_t body_bytes;              /* of the current request */
    double rate_t0;                   /* the current min_receive_rate window */
    uint64_t rate_bytes;              /* body_bytes when it began */
    addr_count *addr;   /* where this connection is counted (NULL: not counted) */
    struct conn_track *prev, *next;
} conn_track;

struct ferry_httpd {
    struct MHD_Daemon *daemon;
    ferry_http_route *routes;
    size_t n_routes;
    uint16_t port;
    /* deadlines (0: none) and the connections they apply to */
    unsigned header_timeout_s, receive_timeout_s, min_receive_rate, max_per_address;
    unsigned max_rate; /* requests a second per address (0: none) */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    conn_track *conns;
    addr_count *addrs[ADDR_BUCKETS];
    pthread_t watchdog;
    bool watching, stopping;
    ferry_httpd_counts counts;
};

static conn_track *track_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void track_phase(ferry_httpd *srv, struct MHD_Connection *conn, int phase)
{
    if (!srv->watching)
        return;
    pthread_mutex_lock(&srv->mu);
    conn_track *t = track_of(conn);
    if (t && t->phase != phase) {
        t->phase = phase;
        t->t0 = ferry_clock_s();
        if (phase == 1) {
            t->body_bytes = t->rate_bytes = 0;
            t->rate_t0 = t->t0;
        }
    }
    pthread_mutex_unlock(&srv->mu);
}

/* Around a piece of body handed to the route: counts its bytes for min_receive_rate, and keeps
 * the time the route itself takes (writing a file, forwarding) from counting as the client's. */
static void track_body(ferry_httpd *srv, struct MHD_Connection *conn, size_t n, bool enter)
{
    if (!srv->min_receive_rate)
        return;
    pthread_mutex_lock(&srv->mu);
    conn_track *t = track_of(conn);
    if (t) {
        double now = ferry_clock_s();
        if (enter) {
            t->body_bytes += n;
            t->busy = true;
            t->busy_t0 = now;
        } else {
            t->busy = false;
            if (now - t->busy_t0 > 0.5) { /* a slow handler: start the window again */
                t->rate_t0 = now;
                t->rate_bytes = t->body_bytes;
            }
        }
    }
    pthread_mutex_unlock(&srv->mu);
}

/* The key of a client address (family + bytes); false when MHD cannot tell. */
static bool sockaddr_key(const struct sockaddr *sa, unsigned char key[17], size_t *len)
{
    if (!sa)
        return false;
    memset(key, 0, 17);
    key[0] = (unsigned char)sa->sa_family;
    if (sa->sa_family == AF_INET) {
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        *len = 5;
    } else if (sa->sa_family == AF_INET6) {
        memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        *len = 17;
    } else {
        return false;
    }
    return true;
}

static bool addr_key(struct MHD_Connection *conn, unsigned char key[17], size_t *len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return sockaddr_key(ci ? ci->client_addr : NULL, key, len);
}

static unsigned addr_bucket(const unsigned char *key, size_t len)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % ADDR_BUCKETS;
}

/* Under mu: the entry of the address key (addr_key's 17 bytes) in its bucket b, or NULL. */
static addr_count *addr_find(ferry_httpd *srv, unsigned b, const unsigned char key[17])
{
    addr_count *a = srv->addrs[b];
    while (a && memcmp(a->key, key, sizeof a->key) != 0)
        a = a->next;
    return a;
}

/* Under mu: counts conn against its address, or marks it over the limit. */
static void addr_admit(ferry_httpd *srv, struct MHD_Connection *conn, conn_track *t)
{
    unsigned char key[17];
    size_t len;
    if (!addr_key(conn, key, &len))
        return; /* unknown address: only max_connections applies */
    unsigned b = addr_bucket(key, len);
    addr_count *a = addr_find(srv, b, key);
    if (a && srv->max_per_address && a->n >= srv->max_per_address) {
        t->over = true;
        srv->counts.over_address++;
        return;
    }
    if (!a) {
        if (!(a = calloc(1, sizeof *a)))
            return; /* out of memory: not counted rather than refused */
        memcpy(a->key, key, sizeof key);
        a->tokens = srv->max_rate;
        a->t_last = ferry_clock_s();
        a->next = srv->addrs[b];
        srv->addrs[b] = a;
    }
    a->n++;
    t->addr = a;
}

static void addr_free(ferry_httpd *srv, addr_count *a)
{
    addr_count **p = &srv->addrs[addr_bucket(a->key, a->key[0] == AF_INET ? 5 : 17)];
    while (*p && *p != a)
        p = &(*p)->next;
    if (*p)
        *p = a->next;
    free(a);
}

static void addr_release(ferry_httpd *srv, conn_track *t)
{
    addr_count *a = t->addr;
    if (!a || --a->n > 0)
        return;
    if (!srv->max_rate) /* else kept for its budget: addr_sweep frees it */
        addr_free(srv, a);
}

/* Under mu, with a request rate: frees the entries of addresses with no connection whose
 * budget is full again (ADDR_KEEP_S after their last request). */
static void addr_sweep(ferry_httpd *srv, double now)
{
    for (size_t b = 0; b < ADDR_BUCKETS; b++)
        for (addr_count *a = srv->addrs[b], *next; a; a = next) {
            next = a->next;
            if (!a->n && now - a->t_last >= ADDR_KEEP_S)
                addr_free(srv, a);
        }
}

/* Under mu: a's bucket brought up to now (at most one second's worth). */
static void rate_refill(ferry_httpd *srv, addr_count *a, double now)
{
    double add = (now - a->t_last) * srv->max_rate;
    a->tokens = a->tokens + add > srv->max_rate ? srv->max_rate : a->tokens + add;
    a->t_last = now;
}

/* Under mu: whether t's address may make one more request now (and it is counted); false:
 * over max_rate. A connection whose address is not counted (unknown, or out of memory) may. */
static bool rate_take(ferry_httpd *srv, conn_track *t, double now)
{
    addr_count *a = t->addr;
    if (!a)
        return true;
    rate_refill(srv, a, now);
    if (a->tokens < 1.0) {
        /* a refused request goes into debt (down to a second's worth): while the address
         * owes, its new connections are closed at accept (accept_cb) instead of answered */
        if (a->tokens > -(double)srv->max_rate)
            a->tokens -= 1.0;
        srv->counts.over_rate++;
        return false;
    }
    a->tokens -= 1.0;
    return true;
}

/* MHD's accept policy, with a request rate: an address in debt (its requests past the rate were
 * refused and it came straight back) has its connection closed at accept: a client that
 * ignores Retry-After costs an accept and a close, not a request and an answer each. */
static enum MHD_Result accept_cb(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    ferry_httpd *srv = cls;
    unsigned char key[17];
    size_t len;
    (void)addrlen;
    if (!sockaddr_key(addr, key, &len))
        return MHD_YES;
    bool refuse = false;
    pthread_mutex_lock(&srv->mu);
    addr_count *a = addr_find(srv, addr_bucket(key, len), key);
    if (a) {
        rate_refill(srv, a, ferry_clock_s());
        refuse = a->tokens <= -1.0;
        if (refuse)
            srv->counts.over_rate++;
    }
    pthread_mutex_unlock(&srv->mu);
    return refuse ? MHD_NO : MHD_YES;
}

static void notify_connection_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
                                 enum MHD_ConnectionNotificationCode toe)
{
    ferry_httpd *srv = cls;
    pthread_mutex_lock(&srv->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_track *t = ci ? calloc(1, sizeof *t) : NULL;
        if (t) { /* untracked (out of memory): only MHD's own timeout applies */
            t->fd = ci->connect_fd;
            t->t0 = ferry_clock_s();
            if (srv->max_per_address || srv->max_rate)
                addr_admit(srv, conn, t);
            t->next = srv->conns;
            if (srv->conns)
                srv->conns->prev = t;
            srv->conns = t;
        }
        *socket_context = t;
    } else {
        /* MHD closes the socket after this returns: the watchdog, holding mu, never shuts
         * down a descriptor that was closed (and maybe reused) */
        conn_track *t = *socket_context;
        if (t) {
            if (t->prev)
                t->prev->next = t->next;
            else
                srv->conns = t->next;
            if (t->next)
                t->next->prev = t->prev;
            addr_release(srv, t);
            free(t);
        }
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&srv->mu);
}

/* Under mu: whether the connection is past one of its deadlines (counted when it is). */
static bool past_deadline(ferry_httpd *srv, conn_track *t, double now)
{
    if (t->phase == 0) {
        double limit = srv->header_timeout_s ? (double)srv->header_timeout_s : 0;
        if (t->over && (!limit || limit > OVER_HEADER_TIMEOUT_S))
            limit = OVER_HEADER_TIMEOUT_S;
        if (limit && now - t->t0 > limit) {
            srv->counts.cut_headers++;
            return true;
        }
        return false;
    }
    if (t->phase != 1)
        return false;
    if (srv->receive_timeout_s && now - t->t0 > srv->receive_timeout_s) {
        srv->counts.cut_receive++;
        return true;
    }
    if (srv->min_receive_rate && !t->busy && now - t->rate_t0 >= FERRY_HTTPD_RATE_WINDOW_S) {
        double want = (double)srv->min_receive_rate * (now - t->rate_t0);
        if ((double)(t->body_bytes - t->rate_bytes) < want) {
            srv->counts.cut_slow++;
            return true;
        }
        t->rate_t0 = now;
        t->rate_bytes = t->body_bytes;
    }
    return false;
}

static void *watchdog_main(void *arg)
{
    ferry_httpd *srv = arg;
    pthread_mutex_lock(&srv->mu);
    while (!srv->stopping) {
        double now = ferry_clock_s();
        for (conn_track *t = srv->conns; t; t = t->next) {
            if (t->cut || !past_deadline(srv, t, now))
                continue;
            shutdown(t->fd, SHUT_RDWR);
            t->cut = true;
        }
        if (srv->max_rate)
            addr_sweep(srv, now);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&srv->cond, &srv->mu, &ts);
    }
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

typedef struct http_header {
    char *name, *value;
    struct http_header *next;
} http_header;

struct ferry_http_req {
    ferry_httpd *srv;
    struct MHD_Connection *conn;
    const ferry_http_route *route; /* NULL: no route matched (404) */
    const char *method, *path;
    bool started;    /* on_headers ran */
    bool completed;  /* on_complete ran */
    bool queued;     /* the response went to MHD */
    bool discarding; /* answered early or body too large: drop the rest of the body */
    bool delivered;  /* MHD sent the whole response (set just before on_cleanup) */
    size_t received; /* body bytes so far */
    bool too_large;  /* over the route's max_body: answered 413, draining */
    struct MHD_Response *response;
    unsigned status;
    http_header *headers;
    ferry_buf body;
    char *auth_user, *auth_password;
    void *state;
};

const char *ferry_http_status_text(unsigned status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "";
    }
}

static const ferry_http_route *match_route(const ferry_httpd *srv, const char *method,
                                           const char *path)
{
    for (size_t i = 0; i < srv->n_routes; i++) {
        const ferry_http_route *r = &srv->routes[i];
        if (r->method && strcmp(r->method, method) != 0)
            continue;
        size_t n = strlen(r->path);
        bool prefix = n > 1 && r->path[n - 1] == '/';
        if (prefix ? strncmp(path, r->path, n) == 0 : strcmp(path, r->path) == 0)
            return r;
    }
    return NULL;
}

static void free_headers(http_header *h)
{
    while (h) {
        http_header *next = h->next;
        free(h->name);
        free(h->value);
        free(h);
        h = next;
    }
}

static void free_req(ferry_http_req *req)
{
    if (!req)
        return;
    if (req->route && req->route->on_cleanup && req->state)
        req->route->on_cleanup(req, req->route->ctx, req->state);
    if (req->response)
        MHD_destroy_response(req->response);
    free_headers(req->headers);
    ferry_buf_free(&req->body);
    if (req->auth_user)
        MHD_free(req->auth_user);
    if (req->auth_password)
        MHD_free(req->auth_password);
    free(req);
}

/* Attaches the collected headers and hands the response to MHD (once). */
static enum MHD_Result queue_response(ferry_http_req *req)
{
    if (req->queued || !req->response)
        return MHD_YES;
    for (http_header *h = req->headers; h; h = h->next)
        MHD_add_response_header(req->response, h->name, h->value);
    enum MHD_Result rc = MHD_queue_response(req->conn, req->status, req->response);
    MHD_destroy_response(req->response);
    req->response = NULL;
    req->queued = true;
    return rc;
}

/* Refuses a request before its body is read: the connection is closed after the answer. */
static enum MHD_Result refuse_early(ferry_http_req *req, unsigned status, const char *text)
{
    ferry_http_respond_text(req, status, text);
    ferry_http_add_header(req, "Connection", "close");
    req->discarding = true;
    return queue_response(req);
}

/* 429 for a client address over one of its limits ("too many connections ... at most N at
 * once"), with Retry-After, before the body is read. */
static enum MHD_Result too_many(ferry_http_req *req, const char *what, unsigned limit,
                                const char *per)
{
    char msg[160], after[16];
    snprintf(msg, sizeof msg, "too many %s from your address (at most %u %s); retry later\n",
             what, limit, per);
    snprintf(after, sizeof after, "%u", FERRY_HTTPD_RETRY_AFTER_S);
    ferry_http_add_header(req, "Retry-After", after);
    return refuse_early(req, 429, msg);
}

bool ferry_http_declared_too_large(const ferry_http_req *req, size_t limit)
{
    const char *cl = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Content-Length");
    if (!cl || !limit)
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(cl, &end, 10);
    if (end == cl || (errno != ERANGE && v <= limit))
        return false;
    /* A client that waits for 100 Continue reads the answer cleanly. One that sends at once
     * would see its connection reset (unread data at close) and never the answer: its body is
     * read and dropped, and answered at its end, unless it is too large even for that. */
    const char *expect = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Expect");
    return (expect && !strcasecmp(expect, "100-continue")) || errno == ERANGE ||
           v - limit > DRAIN_MAX;
}

static bool body_expected(const ferry_http_req *req)
{
    const char *cl = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Content-Length");
    return (cl && strcmp(cl, "0") != 0) ||
           MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Transfer-Encoding");
}

static size_t body_limit(const ferry_http_route *r)
{
    if (r->on_body)
        return r->max_body; /* 0: no limit */
    return r->max_body ? r->max_body : (size_t)1 << 20;
}

static void count_too_large(ferry_httpd *srv)
{
    pthread_mutex_lock(&srv->mu);
    srv->counts.too_large++;
    pthread_mutex_unlock(&srv->mu);
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    ferry_httpd *srv = cls;
    ferry_http_req *req = *con_cls;
    (void)version;
    if (!req) {
        req = calloc(1, sizeof *req);
        if (!req)
            return MHD_NO;
        req->srv = srv;
        req->conn = conn;
        req->method = method;
        req->path = url;
        *con_cls = req;
        track_phase(srv, conn, 1);
        conn_track *t = srv->max_per_address || srv->max_rate ? track_of(conn) : NULL;
        if (t && t->over)
            return too_many(req, "connections", srv->max_per_address, "at once");
        if (t && srv->max_rate) {
            pthread_mutex_lock(&srv->mu);
            bool may = rate_take(srv, t, ferry_clock_s());
            pthread_mutex_unlock(&srv->mu);
            if (!may)
                return too_many(req, "requests", srv->max_rate, "a second");
        }
        req->route = match_route(srv, method, url);
        if (!req->route) {
            ferry_http_respond_text(req, 404, "There is no handle for this path\n");
            req->discarding = true;
            return queue_response(req);
        }
        size_t limit = body_limit(req->route);
        if (ferry_http_declared_too_large(req, limit)) {
            char msg[128];
            snprintf(msg, sizeof msg, "request body larger than %zu bytes\n", limit);
            count_too_large(srv);
            return refuse_early(req, 413, msg); /* on_headers never ran: no state to free */
        }
        req->started = true;
        if (req->route->on_headers)
            req->route->on_headers(req, req->route->ctx);
        if (req->response) {
            /* answered before the body: it will not be read, so the connection cannot go on */
            if (body_expected(req))
                ferry_http_add_header(req, "Connection", "close");
            req->discarding = true;
            return queue_response(req);
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->too_large && (req->received += n) > body_limit(req->route) + DRAIN_MAX)
            return MHD_NO; /* the 413 waits for the end of the body: not forever */
        if (req->discarding || req->queued)
            return MHD_YES;
        size_t limit = body_limit(req->route);
        if (limit && req->received + n > limit) {
            req->too_large = true;
            req->received += n;
            char msg[128];
            snprintf(msg, sizeof msg, "request body larger than %zu bytes\n", limit);
            count_too_large(srv);
            if (!req->response)
                ferry_http_respond_text(req, 413, msg);
            ferry_http_add_header(req, "Connection", "close");
            req->discarding = true;
            return MHD_YES;
        }
        req->received += n;
        if (req->route->on_body) {
            track_body(srv, conn, n, true);
            int rc = req->route->on_body(req, req->route->ctx, upload_data, n);
            track_body(srv, conn, 0, false);
            if (rc != 0)
                return MHD_NO;
            if (req->response)
                req->discarding = true;
            return MHD_YES;
        }
        track_body(srv, conn, n, true);
        int rc = ferry_buf_append(&req->body, upload_data, n);
        track_body(srv, conn, 0, false);
        return rc == 0 ? MHD_YES : MHD_NO;
    }
    /* The body is complete. */
    track_phase(srv, conn, 2);
    if (!req->response && !req->queued && !req->completed) {
        req->completed = true;
        req->route->on_complete(req, req->route->ctx);
    }
    if (!req->response && !req->queued)
        ferry_http_respond_text(req, 500, "handler gave no answer\n");
    return queue_response(req);
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    ferry_httpd *srv = cls;
    track_phase(srv, conn, 0); /* keep-alive: the next request's headers */
    ferry_http_req *req = *con_cls;
    if (req)
        req->delivered = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    free_req(req);
    *con_cls = NULL;
}

int ferry_httpd_start(const ferry_httpd_options *opt, const ferry_http_route *routes,
                      size_t n_routes, ferry_httpd **out, ferry_err *err)
{
    ferry_httpd_options def = {0};
    if (!opt)
        opt = &def;
    const char *addr = opt->bind_addr ? opt->bind_addr : "127.0.0.1";
    int rc = FERRY_OK;
    int fd = -1;
    ferry_httpd *srv = calloc(1, sizeof *srv);
    if (!srv)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    srv->routes = calloc(n_routes ? n_routes : 1, sizeof *routes);
    if (!srv->routes) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(srv->routes, routes, n_routes * sizeof *routes);
    srv->n_routes = n_routes;

    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(opt->port)};
    if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
        rc = ferry_err_set(err, FERRY_EINVAL, "listen address '%s' is not a dotted IPv4 address",
                           addr);
        goto out;
    }
    /* Our own socket, so a taken port is reported with its errno rather than a bare failure. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        rc = ferry_err_set(err, FERRY_EIO, "socket: %s", strerror(errno));
        goto out;
    }
    if (bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
        int e = errno;
        rc = ferry_err_set(err, e == EADDRINUSE ? FERRY_ECONFLICT : FERRY_EIO,
                           "cannot listen on %s:%u: %s%s", addr, opt->port, strerror(e),
                           e == EADDRINUSE ? " (another process uses this port; pick another)"
                                           : "");
        goto out;
    }
    if (listen(fd, 128) != 0) {
        rc = ferry_err_set(err, FERRY_EIO, "listen on %s:%u: %s", addr, opt->port,
                           strerror(errno));
        goto out;
    }
    socklen_t slen = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &slen);
    srv->port = ntohs(sin.sin_port);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
    if (opt->threads == FERRY_HTTPD_THREAD_PER_CONNECTION)
        flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    else
        flags |= MHD_USE_EPOLL;
    unsigned limit = opt->max_connections ? opt->max_connections : 256;
    unsigned timeout = opt->idle_timeout_s ? opt->idle_timeout_s : 300;
    srv->header_timeout_s = opt->header_timeout_s;
    srv->receive_timeout_s = opt->receive_timeout_s;
    srv->min_receive_rate = opt->min_receive_rate;
    srv->max_per_address = opt->max_per_address;
    srv->max_rate = opt->max_requests_per_address;
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cond, NULL);
    srv->watching = srv->header_timeout_s || srv->receive_timeout_s || srv->min_receive_rate ||
                    srv->max_per_address || srv->max_rate;
    struct MHD_OptionItem ops[] = {
        {MHD_OPTION_LISTEN_SOCKET, fd, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed_cb, srv},
        {MHD_OPTION_CONNECTION_LIMIT, limit, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, timeout, NULL},
        /* Past the limit a connection is kept just long enough to answer 429 (up to 1 s); an
         * address with OVER_ADDRESS_SLACK such connections open already is closed at accept,
         * so one address cannot fill max_connections with them. */
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT,
         opt->max_per_address ? opt->max_per_address + OVER_ADDRESS_SLACK : 0, NULL},
        {srv->watching ? MHD_OPTION_NOTIFY_CONNECTION : MHD_OPTION_END,
         (intptr_t)notify_connection_cb, srv},
        {MHD_OPTION_END, 0, NULL}};
    /* with a request rate, an address in debt is closed at accept (accept_cb) */
    MHD_AcceptPolicyCallback apc = srv->max_rate ? accept_cb : NULL;
    if (opt->threads > 1)
        srv->daemon = MHD_start_daemon(flags, 0, apc, srv, access_cb, srv,
                                       MHD_OPTION_THREAD_POOL_SIZE, opt->threads,
                                       MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
    else
        srv->daemon = MHD_start_daemon(flags, 0, apc, srv, access_cb, srv, MHD_OPTION_ARRAY,
                                       ops, MHD_OPTION_END);
    if (srv->daemon && srv->watching) {
        if (pthread_create(&srv->watchdog, NULL, watchdog_main, srv) != 0) {
            MHD_stop_daemon(srv->daemon);
            srv->daemon = NULL;
            fd = -1; /* MHD closed it */
            rc = ferry_err_set(err, FERRY_EIO, "cannot start the connection watchdog thread");
            goto out;
        }
    }
    if (!srv->daemon) {
        rc = ferry_err_set(err, FERRY_EIO, "libmicrohttpd could not start on %s:%u", addr,
                           srv->port);
        goto out;
    }
    fd = -1; /* the daemon owns it now */
    *out = srv;
    srv = NULL;
out:
    if (fd >= 0)
        close(fd);
    if (srv) {
        free(srv->routes);
        free(srv);
    }
    return rc;
}

uint16_t ferry_httpd_port(const ferry_httpd *srv) { return srv->port; }

void ferry_httpd_stop(ferry_httpd *srv)
{
    if (!srv)
        return;
    if (srv->watching) {
        pthread_mutex_lock(&srv->mu);
        srv->stopping = true;
        pthread_cond_signal(&srv->cond);
        pthread_mutex_unlock(&srv->mu);
        pthread_join(srv->watchdog, NULL);
    }
    MHD_stop_daemon(srv->daemon);
    for (size_t b = 0; b < ADDR_BUCKETS; b++) /* all released by then; in case one was not */
        while (srv->addrs[b]) {
            addr_count *a = srv->addrs[b];
            srv->addrs[b] = a->next;
            free(a);
        }
    pthread_mutex_destroy(&srv->mu);
    pthread_cond_destroy(&srv->cond);
    free(srv->routes);
    free(srv);
}

void ferry_httpd_counts_get(ferry_httpd *srv, ferry_httpd_counts *out)
{
    pthread_mutex_lock(&srv->mu);
    *out = srv->counts;
    pthread_mutex_unlock(&srv->mu);
}

void ferry_httpd_metrics(ferry_httpd *srv, ferry_buf *out, const char *name)
{
    ferry_httpd_counts c;
    ferry_httpd_counts_get(srv, &c);
    ferry_metrics_family(out, name, FERRY_METRIC_COUNTER,
                         "connections and requests the HTTP server's bounds refused, by bound");
    const struct {
        const char *reason;
        uint64_t n;
    } rows[] = {{"header_timeout", c.cut_headers},
                {"receive_timeout", c.cut_receive},
                {"min_receive_rate", c.cut_slow},
                {"max_connections_per_address", c.over_address},
                {"max_requests_per_second_per_address", c.over_rate},
                {"body_too_large", c.too_large}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        ferry_metrics_sample(out, name, (const char *[]){"reason", rows[i].reason, NULL},
                             (double)rows[i].n);
}

const char *ferry_http_method(const ferry_http_req *req) { return req->method; }
const char *ferry_http_path(const ferry_http_req *req) { return req->path; }

const char *ferry_http_arg(const ferry_http_req *req, const char *name)
{
    const char *v = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
    if (v)
        return v;
    /* "?flag" has a key and no value: MHD reports NULL for both cases, so look again. */
    if (MHD_lookup_connection_value_n(req->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name), NULL,
                                      NULL) == MHD_YES)
        return "";
    return NULL;
}

typedef struct args_iter {
    int (*fn)(void *cls, const char *name, const char *value);
    void *cls;
    int rc;
} args_iter;

static enum MHD_Result args_iter_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    args_iter *it = cls;
    it->rc = it->fn(it->cls, key, value ? value : "");
    return it->rc == 0 ? MHD_YES : MHD_NO;
}

int ferry_http_args_foreach(const ferry_http_req *req,
                            int (*fn)(void *cls, const char *name, const char *value), void *cls)
{
    args_iter it = {fn, cls, 0};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, args_iter_cb, &it);
    return it.rc;
}

const char *ferry_http_header(const ferry_http_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

bool ferry_http_client_addr(const ferry_http_req *req, char *buf, size_t size)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr || !size)
        return false;
    const struct sockaddr *sa = ci->client_addr;
    const void *a = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                    : sa->sa_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                        : NULL;
    return a && inet_ntop(sa->sa_family, a, buf, (socklen_t)size) != NULL;
}

bool ferry_http_basic_auth(ferry_http_req *req, const char **user, const char **password)
{
    if (!req->auth_user) {
        char *pass = NULL;
        req->auth_user = MHD_basic_auth_get_username_password(req->conn, &pass);
        req->auth_password = pass;
        if (!req->auth_user)
            return false;
    }
    *user = req->auth_user;
    *password = req->auth_password ? req->auth_password : "";
    return true;
}

const char *ferry_http_body(const ferry_http_req *req, size_t *len)
{
    if (len)
        *len = req->body.len;
    return ferry_buf_cstr(&req->body);
}

void ferry_http_req_set_state(ferry_http_req *req, void *state) { req->state = state; }
void *ferry_http_req_state(const ferry_http_req *req) { return req->state; }
bool ferry_http_responded(const ferry_http_req *req) { return req->response || req->queued; }
bool ferry_http_delivered(const ferry_http_req *req) { return req->delivered; }
unsigned ferry_http_status(const ferry_http_req *req) { return req->status; }

int ferry_http_add_header(ferry_http_req *req, const char *name, const char *value)
{
    http_header *h = calloc(1, sizeof *h);
    if (!h)
        return FERRY_ENOMEM;
    h->name = strdup(name);
    h->value = strdup(value);
    if (!h->name || !h->value) {
        free_headers(h);
        return FERRY_ENOMEM;
    }
    /* Keep insertion order: append. */
    http_header **p = &req->headers;
    while (*p)
        p = &(*p)->next;
    *p = h;
    return FERRY_OK;
}

static int set_response(ferry_http_req *req, unsigned status, const char *content_type,
                        struct MHD_Response *resp)
{
    if (!resp)
        return FERRY_ENOMEM;
    if (req->response || req->queued) {
        MHD_destroy_response(resp);
        return FERRY_ECONFLICT;
    }
    if (content_type)
        MHD_add_response_header(resp, "Content-Type", content_type);
    req->response = resp;
    req->status = status;
    return FERRY_OK;
}

int ferry_http_respond(ferry_http_req *req, unsigned status, const char *content_type,
                       const void *data, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    return set_response(req, status, content_type, resp);
}

int ferry_http_respond_text(ferry_http_req *req, unsigned status, const char *text)
{
    return ferry_http_respond(req, status, "text/plain; charset=UTF-8", text, strlen(text));
}

typedef struct stream_ctx {
    ferry_http_read_fn read;
    void *cls;
    void (*free_cls)(void *cls);
} stream_ctx;

static ssize_t stream_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_ctx *s = cls;
    ssize_t n = s->read(s->cls, buf, max);
    if (n > 0)
        return n;
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free_cb(void *cls)
{
    stream_ctx *s = cls;
    if (s->free_cls)
        s->free_cls(s->cls);
    free(s);
}

int ferry_http_respond_stream(ferry_http_req *req, unsigned status, const char *content_type,
                              ferry_http_read_fn read, void *cls, void (*free_cls)(void *cls))
{
    stream_ctx *s = malloc(sizeof *s);
    if (!s) {
        if (free_cls)
            free_cls(cls);
        return FERRY_ENOMEM;
    }
    s->read = read;
    s->cls = cls;
    s->free_cls = free_cls;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                                  stream_read_cb, s,
                                                                  stream_free_cb);
    if (!resp) {
        stream_free_cb(s);
        return FERRY_ENOMEM;
    }
    return set_response(req, status, content_type, resp);
}
