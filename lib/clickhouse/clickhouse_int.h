/* Private pieces shared by the ClickHouse client's files. */
#ifndef FERRY_CLICKHOUSE_INT_H
#define FERRY_CLICKHOUSE_INT_H

#include "ferry/clickhouse.h"
#include "http1.h"

/* Fills out (37 bytes) with a random version-4 UUID. */
int ferry_ch_random_uuid(char out[37]);

/* Replaces every occurrence of secret (when at least 3 characters long) in s by "***". */
void ferry_ch_scrub(char *s, const char *secret);

/* The client's cache of system.columns ("table\tcolumn\n" lines) and its loaded flag. */
ferry_buf *ferry_ch_client_sys_cache(ferry_ch_client *c, bool **loaded);

/* Does system.<table> have column <column>? Answers from a per-client cache of
 * system.columns for the system database, loaded on first use. */
int ferry_ch_system_has_column(ferry_ch_client *c, const char *table, const char *column,
                               bool *has, ferry_err *err);
/* Does system.<table> exist? (Same cache.) */
int ferry_ch_system_has_table(ferry_ch_client *c, const char *table, bool *has, ferry_err *err);

/* ---- the plain-socket transport (wire.c) ---- */
typedef struct ferry_ch_wire ferry_ch_wire;

/* *out gets a transport for base_url, or NULL (and FERRY_OK) when libcurl must carry the
 * requests: https://, or a proxy set in the environment. The credentials are kept, encoded,
 * for the Authorization header. Free with ferry_ch_wire_free. */
int ferry_ch_wire_new(const char *base_url, const char *user, const char *password,
                      ferry_ch_wire **out, ferry_err *err);
void ferry_ch_wire_free(ferry_ch_wire *w);
/* The base URL's path ("/" at least), to which the query string is appended. */
const char *ferry_ch_wire_base_path(const ferry_ch_wire *w);

typedef struct ferry_ch_wire_io {
    /* in */
    const char *target; /* request target: path and query string */
    const char *body;
    size_t body_len;
    long connect_timeout_ms;
    long read_timeout_ms;
    ferry_http1_header_fn on_header; /* final response's headers */
    ferry_http1_body_fn on_body;     /* its body, de-chunked */
    void *arg;
    /* out */
    const ferry_http1 *parser; /* set by the exchange; parser->status: the HTTP status once
                                * the headers are in (0 before) */
    bool got_response;   /* any response byte */
    bool timed_out;
    bool stopped;        /* set by the caller's callback when it stopped the transfer */
    long connects;       /* new connections made */
    uint64_t bytes_sent, bytes_received;
} ferry_ch_wire_io;

/* POSTs io->body to io->target and feeds the response to the callbacks. On failure *failure
 * classifies it for the retry policy and err says what happened, naming the server as who. */
int ferry_ch_wire_exchange(ferry_ch_wire *w, ferry_ch_wire_io *io, enum ferry_ch_failure *failure,
                           const char *who, ferry_err *err);

#endif
