/* One HTTP request and its whole answer, over libcurl: the wrapper for ferry's short control
 * calls (a router's status for the move fence, a lab node's health, a router's explained plan).
 * Streaming clients (ClickHouse, the agents, S3, the router's passthrough) keep their own
 * handles, because they feed and drain bodies as they go; every handle, these and theirs, comes
 * from ferry_curl_new (ferry/curl_easy.h).
 *
 * The answer is bounded (max_answer), the whole call has a deadline (timeout_ms), no signal is
 * used (threads), and credentials (user/password, secret headers) never reach an error
 * message. */
#ifndef FERRY_HTTP_CALL_H
#define FERRY_HTTP_CALL_H

#include <stddef.h>

#include "ferry/buf.h"
#include "ferry/err.h"

typedef struct ferry_http_call {
    const char *url;
    const char *body;            /* NULL: a GET; else a POST of body_len bytes */
    size_t body_len;
    const char *const *headers;  /* "Name: value" strings, NULL-terminated; may be NULL */
    const char *user;            /* HTTP basic authentication when not NULL */
    const char *password;        /* with user; NULL: empty */
    long timeout_ms;             /* the whole call; 0: 30 s */
    size_t max_answer;           /* the longest answer body kept; 0: 16 MiB (longer fails) */
} ferry_http_call;

typedef struct ferry_http_answer {
    long status;                 /* the HTTP status */
    ferry_buf body;              /* owned: ferry_http_answer_free */
} ferry_http_answer;

/* Sends the request. FERRY_OK for any HTTP answer (look at a->status); FERRY_ECONNECT when none
 * came (refused, timed out, reset: the message is libcurl's, and the caller names the URL);
 * FERRY_EIO for an answer over max_answer; FERRY_ENOMEM. *a is always initialised (free it). */
int ferry_http_do(const ferry_http_call *c, ferry_http_answer *a, ferry_err *err);
void ferry_http_answer_free(ferry_http_answer *a);

/* Appends s percent-encoded for a URL's query (RFC 3986 unreserved bytes kept). */
int ferry_url_escape(ferry_buf *out, const char *s);

#endif
