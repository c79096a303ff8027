/* An incremental parser of one HTTP/1.1 response (status line, headers, a body framed by
 * Content-Length, chunked encoding, or the end of the connection), for the ClickHouse client's
 * plain-socket transport (wire.c). Pure: no I/O; bytes are fed as they arrive, in pieces of any
 * size, and headers and body bytes go to callbacks. Informational (1xx) responses are skipped.
 *
 * States, in order: STATUS -> HEADERS -> one of BODY_LENGTH | BODY_UNTIL_CLOSE |
 * CHUNK_SIZE <-> CHUNK_DATA -> CHUNK_DATA_END ... -> TRAILERS -> DONE. DONE is reached after the
 * last body byte (or the blank line after headers for bodiless responses); BODY_UNTIL_CLOSE
 * ends only with ferry_http1_finish (the peer closed). Lines are bounded (FERRY_HTTP1_LINE_MAX)
 * and so is the header block (FERRY_HTTP1_HEAD_MAX), so a hostile peer cannot make it buffer
 * without limit. */
#ifndef FERRY_CLICKHOUSE_HTTP1_H
#define FERRY_CLICKHOUSE_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

#define FERRY_HTTP1_LINE_MAX 8192
#define FERRY_HTTP1_HEAD_MAX (256 * 1024)

/* Each returns 0 to go on, or a ferry code that stops the parser (ferry_http1_feed returns it). */
typedef int (*ferry_http1_header_fn)(void *arg, const char *name, size_t name_len,
                                     const char *value, size_t value_len);
typedef int (*ferry_http1_body_fn)(void *arg, const char *data, size_t len);

typedef struct ferry_http1 {
    int state;
    int status;            /* the final status code; 0 until its status line is in */
    bool keep_alive;       /* the connection may carry another request after this response */
    bool chunked;
    bool has_length;
    bool head_request;     /* the request was HEAD: no body whatever the headers say */
    uint64_t length;       /* Content-Length */
    uint64_t left;         /* body bytes (or chunk bytes) still to come */
    uint64_t body_bytes;   /* body bytes handed to on_body so far */
    size_t head_bytes;     /* bytes of status line + headers so far */
    char line[FERRY_HTTP1_LINE_MAX];
    size_t line_len;
    ferry_http1_header_fn on_header; /* final response's headers only; may be NULL */
    ferry_http1_body_fn on_body;     /* may be NULL */
    void *arg;
} ferry_http1;

void ferry_http1_init(ferry_http1 *p, ferry_http1_header_fn on_header, ferry_http1_body_fn on_body,
                      void *arg, bool head_request);

/* Feeds len bytes. *used (optional) gets how many were consumed: all of them unless the
 * response ended inside the piece (then the rest belongs to no response of ours) or an error
 * stopped it. Returns FERRY_OK, FERRY_EREMOTE for a malformed response (err says what and
 * where), or what a callback returned. */
int ferry_http1_feed(ferry_http1 *p, const char *data, size_t len, size_t *used, ferry_err *err);

/* The peer closed the connection: completes a body read until close; anything else
 * unfinished is FERRY_EREMOTE ("the response ended early"). */
int ferry_http1_finish(ferry_http1 *p, ferry_err *err);

bool ferry_http1_done(const ferry_http1 *p);
/* True once the status line and headers of the final response are in. */
bool ferry_http1_head_done(const ferry_http1 *p);

#endif
