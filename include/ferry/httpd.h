/* A small HTTP/1.1 server on libmicrohttpd, shared by ferry's long-running processes (the lab
 * node, later the node agent, router and coordinator).
 *
 * A server has a route table: each route matches a method (or any) and a path (exact, or a
 * prefix when the route's path ends in '/'), first match wins. A request goes through up to
 * three callbacks of its route:
 *
 *   on_headers(req)          once the request line and headers are in (optional). It may
 *                            answer at once (ferry_http_respond*), e.g. to refuse bad
 *                            credentials, and may attach per-request state (req_set_state).
 *   on_body(req, data, len)  each piece of the request body as it arrives (optional). When
 *                            absent, the server buffers the body up to route.max_body bytes
 *                            (413 beyond) and hands it over in on_complete.
 *   on_complete(req)         once the body is complete; must answer, unless on_headers or
 *                            on_body already did.
 *
 * Answers are either a byte buffer (copied) or a stream: a reader callback called on the
 * connection's thread until it reports the end; the body is sent with chunked encoding. A
 * reader that fails aborts the connection, so the client sees a truncated response rather than
 * a complete-looking one.
 *
 * Threads: by default each connection gets its own thread (FERRY_HTTPD_THREAD_PER_CONNECTION),
 * because ferry's handlers block (a query, a file copy); with a pool of polling threads a
 * blocking handler would stall every other connection served by the same thread. Handlers that
 * never block can use a pool (threads > 0). Keep-alive works in both modes. */
#ifndef FERRY_HTTPD_H
#define FERRY_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ferry/err.h"

typedef struct ferry_httpd ferry_httpd;
typedef struct ferry_http_req ferry_http_req;

typedef void (*ferry_http_headers_fn)(ferry_http_req *req, void *ctx);
/* Returns 0 to go on; non-zero aborts the connection (after answering, if the handler wants
 * the client to see why, it should answer first and return 0, then ignore the rest). */
typedef int (*ferry_http_body_fn)(ferry_http_req *req, void *ctx, const char *data, size_t len);
typedef void (*ferry_http_complete_fn)(ferry_http_req *req, void *ctx);
/* Frees per-request state set with ferry_http_req_set_state; called once per request, also
 * when the client went away. */
typedef void (*ferry_http_cleanup_fn)(ferry_http_req *req, void *ctx, void *state);

typedef struct ferry_http_route {
    const char *method; /* "GET", "POST", ...; NULL matches any method */
    const char *path;   /* "/ping" and "/" match exactly; "/agent/" matches every path below */
    ferry_http_headers_fn on_headers;   /* optional */
    ferry_http_body_fn on_body;         /* optional: streams the body instead of buffering */
    ferry_http_complete_fn on_complete; /* required */
    ferry_http_cleanup_fn on_cleanup;   /* optional */
    void *ctx;                          /* passed to every callback */
    size_t max_body;                    /* buffered: at most this (0 means 1 MiB); streamed
                                           (on_body): at most this in all (0: no limit).
                                           Beyond: 413 (at once when Content-Length says so) */
} ferry_http_route;

#define FERRY_HTTPD_THREAD_PER_CONNECTION 0

typedef struct ferry_httpd_options {
    const char *bind_addr;   /* dotted IPv4; NULL = 127.0.0.1 */
    uint16_t port;           /* 0 = any free port (see ferry_httpd_port) */
    unsigned threads;        /* FERRY_HTTPD_THREAD_PER_CONNECTION or a polling pool size */
    unsigned max_connections;/* 0 = 256 */
    unsigned idle_timeout_s; /* idle keep-alive connections are closed after this; 0 = 300 */
    unsigned max_per_address;  /* connections from one client address; beyond: the request
                                  on such a connection gets 429 with Retry-After and
                                  Connection: close before its body is read, and one that
                                  sends no headers within 1 s is shut down; 16 such at once
                                  from one address, and more are closed at accept (0 = no
                                  limit) */
    unsigned header_timeout_s; /* a request's headers must be in this long after the
                                  connection (or its previous request) began; 0 = no limit */
    unsigned receive_timeout_s;/* its body this long after its headers; 0 = no limit. Both
                                  count from the start, not from the last byte: past them the
                                  connection is shut down */
    unsigned min_receive_rate; /* bytes/s a body must arrive at, averaged over each
                                  FERRY_HTTPD_RATE_WINDOW_S window (time spent in the route's
                                  own on_body does not count); slower: shut down. 0 = none */
    unsigned max_requests_per_address; /* requests a second from one client address, over
                                  all its connections (a token bucket holding one second's
                                  worth); beyond: 429 with Retry-After before the body is read,
                                  and the refusal is owed: while an address owes, its new
                                  connections are closed at accept. 0 = no limit. Behind a
                                  proxy every client shares its address: leave it 0 there */
} ferry_httpd_options;

#define FERRY_HTTPD_RATE_WINDOW_S 10
#define FERRY_HTTPD_RETRY_AFTER_S 2 /* the Retry-After of a 429 */

/* The config keys of a server's bounds, the same in every section that has a server
 * ([router], [agent], [coordinator]; docs/config.md): max_connections,
 * max_connections_per_address, idle_timeout, header_timeout, receive_timeout, min_receive_rate,
 * max_requests_per_second_per_address.
 * For ferry_config_check_keys lists. */
#define FERRY_HTTPD_CONFIG_KEYS                                                                  \
    "max_connections", "max_connections_per_address", "idle_timeout", "header_timeout",          \
        "receive_timeout", "min_receive_rate", "max_requests_per_second_per_address"

struct ferry_config;
/* Reads those keys of [section] into *o, which holds the defaults on entry (a key absent keeps
 * its default). Bad values: FERRY_EINVAL naming the file, section and key. */
int ferry_httpd_config_read(const struct ferry_config *cfg, const char *section,
                            ferry_httpd_options *o, ferry_err *err);

/* What a server's bounds did so far (for /metrics and tests). */
typedef struct ferry_httpd_counts {
    uint64_t cut_headers;     /* shut down past header_timeout */
    uint64_t cut_receive;     /* past receive_timeout */
    uint64_t cut_slow;        /* below min_receive_rate */
    uint64_t over_address;    /* connections over max_per_address (answered 429 or cut) */
    uint64_t over_rate;       /* requests over max_requests_per_address (answered 429) */
    uint64_t too_large;       /* requests refused with 413 by max_body */
} ferry_httpd_counts;
void ferry_httpd_counts_get(ferry_httpd *srv, ferry_httpd_counts *out);
struct ferry_buf;
/* Those counts as a Prometheus counter family NAME with a label reason = header_timeout,
 * receive_timeout, min_receive_rate, max_connections_per_address,
 * max_requests_per_second_per_address or body_too_large. */
void ferry_httpd_metrics(ferry_httpd *srv, struct ferry_buf *out, const char *name);

/* Starts serving routes (the array is copied; strings and ctx are borrowed and must outlive
 * the server). A port already in use gives FERRY_ECONFLICT naming the address. */
int ferry_httpd_start(const ferry_httpd_options *opt, const ferry_http_route *routes,
                      size_t n_routes, ferry_httpd **out, ferry_err *err);
uint16_t ferry_httpd_port(const ferry_httpd *srv);
/* Stops accepting, waits for the connection threads, frees srv. NULL is fine. */
void ferry_httpd_stop(ferry_httpd *srv);

/* ---- the request (valid only inside callbacks; strings are borrowed) ---- */
const char *ferry_http_method(const ferry_http_req *req);
const char *ferry_http_path(const ferry_http_req *req); /* without the query string */
/* A decoded query-string argument, NULL when absent ("" for "?flag"). */
const char *ferry_http_arg(const ferry_http_req *req, const char *name);
/* Calls fn for every query-string argument in order; stops when fn returns non-zero and
 * returns that value. */
int ferry_http_args_foreach(const ferry_http_req *req,
                            int (*fn)(void *cls, const char *name, const char *value),
                            void *cls);
const char *ferry_http_header(const ferry_http_req *req, const char *name); /* case-insensitive */
/* The client's address (dotted IPv4, or IPv6) into buf; false when the server cannot tell. */
bool ferry_http_client_addr(const ferry_http_req *req, char *buf, size_t size);
/* HTTP basic credentials, if sent: *user and *password are owned by the request. */
bool ferry_http_basic_auth(ferry_http_req *req, const char **user, const char **password);
/* Whether to refuse a body at its headers, before reading it, because its Content-Length is
 * over limit: when the client waits for 100 Continue, or the body is so far over that reading
 * it to the end to answer there is not worth it (over limit + 4 MiB). Otherwise the body is
 * better read and dropped and the refusal answered at its end: a client that sends its body at
 * once would see a reset connection instead of the answer. Routes with max_body get this. */
bool ferry_http_declared_too_large(const ferry_http_req *req, size_t limit);
/* The buffered body (on_complete of a route without on_body); never NULL. */
const char *ferry_http_body(const ferry_http_req *req, size_t *len);
void ferry_http_req_set_state(ferry_http_req *req, void *state);
void *ferry_http_req_state(const ferry_http_req *req);
bool ferry_http_responded(const ferry_http_req *req);
/* In on_cleanup: whether the client received the whole response (false when it went away
 * before, or the connection failed). */
bool ferry_http_delivered(const ferry_http_req *req);
/* The status of the answer given (0: none yet). */
unsigned ferry_http_status(const ferry_http_req *req);

/* ---- answers: exactly one per request ---- */
/* Adds a response header; call before responding. Returns 0 or FERRY_ENOMEM. */
int ferry_http_add_header(ferry_http_req *req, const char *name, const char *value);
/* A complete body (copied). content_type may be NULL. */
int ferry_http_respond(ferry_http_req *req, unsigned status, const char *content_type,
                       const void *data, size_t len);
int ferry_http_respond_text(ferry_http_req *req, unsigned status, const char *text);

/* A streamed body: read(cls, buf, max) returns the number of bytes written into buf (> 0),
 * 0 at the end, or -1 on failure (the connection is aborted). It may block. free_cls is
 * called exactly once when the response is done or the client went away. */
typedef ssize_t (*ferry_http_read_fn)(void *cls, char *buf, size_t max);
int ferry_http_respond_stream(ferry_http_req *req, unsigned status, const char *content_type,
                              ferry_http_read_fn read, void *cls, void (*free_cls)(void *cls));

/* The reason phrase for a status ("Not Found"). */
const char *ferry_http_status_text(unsigned status);

#endif
