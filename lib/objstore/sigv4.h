/* AWS Signature Version 4 for S3 requests, computed by hand with OpenSSL: pure functions (no
 * I/O, no clock) so AWS's published examples can be replayed as unit tests. We sign ourselves
 * rather than through CURLOPT_AWS_SIGV4 because libcurl 7.88 neither sorts query parameters nor
 * canonicalises valueless ones, and hashes only POSTFIELDS bodies (see shared/deps-notes.md). */
#ifndef FERRY_OBJSTORE_SIGV4_H
#define FERRY_OBJSTORE_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "ferry/buf.h"
#include "ferry/err.h"

typedef struct ferry_sigv4_header {
    const char *name;  /* any case; signed lower-cased */
    const char *value; /* trimmed and inner runs of spaces collapsed when signed */
} ferry_sigv4_header;

typedef struct ferry_sigv4_param {
    const char *key;   /* raw (not yet encoded) */
    const char *value; /* raw; NULL or "" both give "key=" */
} ferry_sigv4_param;

typedef struct ferry_sigv4_request {
    const char *method;       /* "GET", "PUT", ... */
    const char *path;         /* the URI-encoded path exactly as sent, e.g. "/bucket/a%20b" */
    const char *query;        /* canonical query string (ferry_sigv4_canonical_query) or "" */
    const ferry_sigv4_header *headers; /* every header to sign; must include host */
    size_t n_headers;
    const char *payload_hash; /* hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
    const char *amz_date;     /* "YYYYMMDDTHHMMSSZ" (also sent as x-amz-date) */
    const char *region;       /* "us-east-1" */
    const char *service;      /* "s3" */
} ferry_sigv4_request;

/* Writes the Authorization header value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=...") into authorization. When canonical is not NULL the canonical request is
 * appended to it (for tests and debugging; it contains no secret). The secret is used only to
 * derive the signing key, which is wiped before returning. */
int ferry_sigv4_sign(const ferry_sigv4_request *rq, const char *access_key_id,
                     const char *secret_access_key, ferry_buf *authorization,
                     ferry_buf *canonical, ferry_err *err);

/* RFC 3986 encoding as SigV4 wants it: unreserved A-Z a-z 0-9 - . _ ~ kept, everything else
 * %XX (upper-case hex); '/' kept when keep_slash (object key paths). */
int ferry_sigv4_uri_encode(ferry_buf *out, const char *s, size_t n, bool keep_slash);

/* The canonical query string of params: each key and value encoded, sorted by key then value,
 * written "k=v" joined with '&'. The same string must be used in the URL that is sent. */
int ferry_sigv4_canonical_query(const ferry_sigv4_param *params, size_t n, ferry_buf *out);

/* Lower-case hex SHA-256 of data. */
void ferry_sigv4_sha256_hex(const void *data, size_t n, char out[65]);

/* "YYYYMMDDTHHMMSSZ" for t (UTC). */
void ferry_sigv4_amz_date(time_t t, char out[17]);

#endif
