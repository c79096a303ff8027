/* S3 backend over libcurl: path-style or virtual-host URLs, HTTP or HTTPS, requests signed with
 * AWS Signature V4 by sigv4.c (every request carries x-amz-content-sha256 with the body's real
 * SHA-256, and the query string is built canonically so the URL sent is the one signed). One
 * curl easy handle per store keeps its connection alive between requests. */
#include "objstore/objstore_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "ferry/curl_easy.h"
#include "ferry/log.h"
#include "ferry/strutil.h"
#include "objstore/sigv4.h"

#define HASH_CHUNK (1024 * 1024)

typedef struct s3_store {
    CURL *curl;
    char *scheme;      /* "http" or "https" */
    char *hostport;    /* "127.0.0.1:9000" */
    char *bucket;
    char *region;
    bool virtual_host;
    char *access_key_id;
    char *secret;      /* wiped on close */
    char *ca_file;
    long timeout, connect_timeout_ms;
} s3_store;

static s3_store *S(ferry_objstore *st) { return st->impl; }

static void s3_free(s3_store *s)
{
    if (!s)
        return;
    if (s->curl)
        curl_easy_cleanup(s->curl);
    if (s->secret) {
        OPENSSL_cleanse(s->secret, strlen(s->secret));
        free(s->secret);
    }
    free(s->scheme);
    free(s->hostport);
    free(s->bucket);
    free(s->region);
    free(s->access_key_id);
    free(s->ca_file);
    free(s);
}

static void s3_close(ferry_objstore *st) { s3_free(S(st)); }

int objstore_s3_init(ferry_objstore *st, const ferry_objstore_s3_options *o, ferry_err *err)
{
    if (!o->endpoint || !o->bucket || !*o->bucket || !o->access_key_id || !*o->access_key_id ||
        !o->secret_access_key || !*o->secret_access_key)
        return ferry_err_set(err, FERRY_EINVAL,
                             "s3 object store needs endpoint, bucket, access key id and secret");
    const char *ep = o->endpoint, *rest;
    char *scheme;
    if (ferry_starts_with(ep, "http://")) {
        scheme = "http";
        rest = ep + 7;
    } else if (ferry_starts_with(ep, "https://")) {
        scheme = "https";
        rest = ep + 8;
    } else {
        return ferry_err_set(err, FERRY_EINVAL,
                             "s3 endpoint '%s' must start with http:// or https://", ep);
    }
    size_t hl = strcspn(rest, "/?#");
    if (hl == 0 || strchr(rest, '@') || (rest[hl] && strcmp(rest + hl, "/") != 0))
        return ferry_err_set(err, FERRY_EINVAL,
                             "s3 endpoint '%s' must be scheme://host[:port] with no path or "
                             "credentials", ep);
    for (const char *c = o->bucket; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "s3 bucket name '%s' may hold only a-z, 0-9, '-' and '.'",
                                 o->bucket);
    s3_store *s = calloc(1, sizeof *s);
    if (!s)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    s->scheme = strdup(scheme);
    s->hostport = ferry_strndup(rest, hl);
    s->bucket = strdup(o->bucket);
    s->region = strdup(o->region && *o->region ? o->region : "us-east-1");
    s->access_key_id = strdup(o->access_key_id);
    s->secret = strdup(o->secret_access_key);
    s->ca_file = o->ca_file ? strdup(o->ca_file) : NULL;
    s->virtual_host = o->virtual_host;
    s->timeout = o->timeout_seconds;
    long ct = o->connect_timeout_seconds ? o->connect_timeout_seconds : 10;
    s->connect_timeout_ms = ct <= 0 ? 0 /* libcurl's */ : ct > LONG_MAX / 1000 ? LONG_MAX
                                                                              : ct * 1000;
    if (!s->scheme || !s->hostport || !s->bucket || !s->region || !s->access_key_id ||
        !s->secret || (o->ca_file && !s->ca_file)) {
        s3_free(s);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    /* its options are set again for every request (s3_do) */
    int rc = ferry_curl_new(s->connect_timeout_ms, NULL, &s->curl, err);
    if (rc) {
        s3_free(s);
        ferry_err_prefix(err, "s3 object store: ");
        return rc;
    }
    snprintf(st->desc, sizeof st->desc, "s3://%s (%s://%s)", s->bucket, s->scheme, s->hostport);
    st->impl = s;
    return FERRY_OK;
}

/* ---- one request ------------------------------------------------------------------------ */

typedef struct s3_response {
    long status;
    ferry_buf body;        /* error bodies, and XML answers when no sink is given */
    ferry_objstore_sink sink;
    void *ud;
    bool sink_failed;
    uint64_t expect_total; /* for ranged GETs: bytes the caller asked for (0 = unchecked) */
    uint64_t received;
    /* headers */
    char etag[80];
    uint64_t content_length;
    bool have_length;
    time_t last_modified;
    char upload_id[256];
} s3_response;

typedef struct s3_upload {
    const objstore_body *body;
    uint64_t pos;
    ferry_err *err;
    bool failed;
} s3_upload;

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    s3_response *r = ud;
    size_t len = size * n;
    char line[512];
    size_t l = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, buf, l);
    line[l] = '\0';
    ferry_chomp(line);
    char *colon = strchr(line, ':');
    if (ferry_starts_with(line, "HTTP/")) {
        /* a new response (e.g. after 100 Continue): reset per-response headers */
        r->etag[0] = '\0';
        r->have_length = false;
        return len;
    }
    if (!colon)
        return len;
    *colon = '\0';
    char *v = ferry_trim(colon + 1);
    if (strcasecmp(line, "etag") == 0) {
        if (*v == '"')
            v++;
        size_t vl = strlen(v);
        if (vl && v[vl - 1] == '"')
            v[--vl] = '\0';
        snprintf(r->etag, sizeof r->etag, "%s", v);
    } else if (strcasecmp(line, "content-length") == 0) {
        r->have_length = ferry_parse_u64(v, &r->content_length);
    } else if (strcasecmp(line, "last-modified") == 0) {
        time_t t = curl_getdate(v, NULL);
        if (t > 0)
            r->last_modified = t;
    }
    return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    s3_response *r = ud;
    size_t len = size * n;
    if (r->status == 0)
        return 0;
    if (r->status >= 300 || !r->sink)
        return ferry_buf_append(&r->body, buf, len) == FERRY_OK ? len : 0;
    r->received += len;
    if (r->sink(r->ud, buf, len) != 0) {
        r->sink_failed = true;
        return 0;
    }
    return len;
}

static size_t on_read(char *dst, size_t size, size_t n, void *ud)
{
    s3_upload *u = ud;
    size_t want = size * n;
    uint64_t left = u->body->len - u->pos;
    if (want > left)
        want = (size_t)left;
    if (want == 0)
        return 0;
    if (objstore_body_read(u->body, u->pos, dst, want, u->err) != FERRY_OK) {
        u->failed = true;
        return CURL_READFUNC_ABORT;
    }
    u->pos += want;
    return want;
}


/* on_body only forwards 2xx bodies once the status is known; set it from the header pass. */
static size_t on_header_status(char *buf, size_t size, size_t n, void *ud)
{
    s3_response *r = ud;
    if (ferry_starts_with(buf, "HTTP/")) {
        const char *sp = memchr(buf, ' ', size * n);
        if (sp)
            r->status = strtol(sp + 1, NULL, 10);
    }
    return on_header(buf, size, n, ud);
}

static int body_hash(const objstore_body *b, char out[65], ferry_err *err)
{
    if (b->data) {
        ferry_sigv4_sha256_hex(b->data, (size_t)b->len, out);
        return FERRY_OK;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    char *chunk = malloc(HASH_CHUNK);
    int rc = FERRY_OK;
    if (!ctx || !chunk || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (uint64_t pos = 0; pos < b->len && rc == FERRY_OK;) {
        size_t n = b->len - pos < HASH_CHUNK ? (size_t)(b->len - pos) : HASH_CHUNK;
        rc = objstore_body_read(b, pos, chunk, n, err);
        if (rc == FERRY_OK)
            EVP_DigestUpdate(ctx, chunk, n);
        pos += n;
    }
    if (rc == FERRY_OK) {
        unsigned char md[32];
        unsigned int ml = 0;
        EVP_DigestFinal_ex(ctx, md, &ml);
        for (int i = 0; i < 32; i++)
            snprintf(out + 2 * i, 3, "%02x", md[i]);
    }
out:
    free(chunk);
    EVP_MD_CTX_free(ctx);
    return rc;
}

/* "Code: Message" from an S3 error body, for messages. */
static void error_detail(const ferry_buf *body, char *out, size_t outsz)
{
    objstore_xml_error(ferry_buf_cstr(body), body->len, out, outsz);
}

static int status_code(long status, const char *detail)
{
    if (status == 404)
        return FERRY_ENOTFOUND;
    if (status == 401 || status == 403)
        return FERRY_EAUTH;
    if (status == 405 || status == 501)
        return FERRY_EUNSUPPORTED;
    if (status == 416)
        return FERRY_EINVAL;
    if (status == 409 || status == 412)
        return FERRY_ECONFLICT;
    if (status == 400 && strstr(detail, "InvalidPart"))
        return FERRY_EINVAL;
    return FERRY_EREMOTE;
}

typedef struct s3_call {
    const char *method;     /* GET PUT POST DELETE HEAD */
    const char *key;        /* NULL: the bucket itself */
    const ferry_sigv4_param *params;
    size_t n_params;
    const objstore_body *body; /* PUT/POST body, NULL for none */
    const char *range;      /* "bytes=a-b" or NULL */
    const char *content_type;
    bool create_only;       /* If-None-Match: * (PutObject, CompleteMultipartUpload) */
} s3_call;

static int s3_do(s3_store *s, const s3_call *c, s3_response *r, ferry_err *err)
{
    ferry_buf path = FERRY_BUF_INIT, query = FERRY_BUF_INIT, url = FERRY_BUF_INIT,
              host = FERRY_BUF_INIT, auth = FERRY_BUF_INIT, h = FERRY_BUF_INIT;
    struct curl_slist *hl = NULL;
    char payload_hash[65], amz_date[17];
    objstore_body empty = {"", -1, 0, 0};
    const objstore_body *body = c->body ? c->body : &empty;
    s3_upload up = {body, 0, err, false};
    int rc = FERRY_OK;
    const char *what = c->key ? c->key : "(bucket)";

    if (s->virtual_host)
        ferry_buf_printf(&host, "%s.%s", s->bucket, s->hostport);
    else
        ferry_buf_puts(&host, s->hostport);
    ferry_buf_putc(&path, '/');
    if (!s->virtual_host) {
        ferry_buf_puts(&path, s->bucket);
        if (c->key)
            ferry_buf_putc(&path, '/');
    }
    if (c->key)
        ferry_sigv4_uri_encode(&path, c->key, strlen(c->key), true);
    ferry_sigv4_canonical_query(c->params, c->n_params, &query);
    ferry_buf_printf(&url, "%s://%s%s%s%s", s->scheme, ferry_buf_cstr(&host),
                     ferry_buf_cstr(&path), query.len ? "?" : "", ferry_buf_cstr(&query));
    if ((rc = body_hash(body, payload_hash, err)))
        goto out;
    ferry_sigv4_amz_date(time(NULL), amz_date);

    ferry_sigv4_header sh[6]; /* in canonical (sorted) order */
    size_t nh = 0;
    sh[nh++] = (ferry_sigv4_header){"host", ferry_buf_cstr(&host)};
    if (c->create_only)
        sh[nh++] = (ferry_sigv4_header){"if-none-match", "*"};
    if (c->range)
        sh[nh++] = (ferry_sigv4_header){"range", c->range};
    sh[nh++] = (ferry_sigv4_header){"x-amz-content-sha256", payload_hash};
    sh[nh++] = (ferry_sigv4_header){"x-amz-date", amz_date};
    ferry_sigv4_request rq = {c->method, ferry_buf_cstr(&path), ferry_buf_cstr(&query), sh, nh,
                              payload_hash, amz_date, s->region, "s3"};
    if ((rc = ferry_sigv4_sign(&rq, s->access_key_id, s->secret, &auth, NULL, err)))
        goto out;

    for (size_t i = 0; i < nh; i++) {
        ferry_buf_reset(&h);
        ferry_buf_printf(&h, "%s: %s", sh[i].name, sh[i].value);
        hl = curl_slist_append(hl, h.data);
    }
    ferry_buf_reset(&h);
    ferry_buf_printf(&h, "Authorization: %s", auth.data);
    hl = curl_slist_append(hl, h.data);
    OPENSSL_cleanse(h.data, h.len);
    hl = curl_slist_append(hl, "Expect:");
    if (c->content_type) {
        ferry_buf_reset(&h);
        ferry_buf_printf(&h, "Content-Type: %s", c->content_type);
        hl = curl_slist_append(hl, h.data);
    } else {
        hl = curl_slist_append(hl, "Content-Type:");
    }
    if (!hl) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }

    CURL *cu = s->curl;
    curl_easy_reset(cu); /* keeps the connection cache: keep-alive survives */
    ferry_curl_common(cu, s->connect_timeout_ms, NULL);
    curl_easy_setopt(cu, CURLOPT_URL, url.data);
    curl_easy_setopt(cu, CURLOPT_HTTPHEADER, hl);
    if (s->timeout)
        curl_easy_setopt(cu, CURLOPT_TIMEOUT, s->timeout);
    /* Abort a transfer that stalls below 1 KiB/s for a minute. */
    curl_easy_setopt(cu, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(cu, CURLOPT_LOW_SPEED_TIME, 60L);
    if (s->ca_file)
        curl_easy_setopt(cu, CURLOPT_CAINFO, s->ca_file);
    curl_easy_setopt(cu, CURLOPT_HEADERFUNCTION, on_header_status);
    curl_easy_setopt(cu, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(cu, CURLOPT_WRITEDATA, r);
    if (strcmp(c->method, "HEAD") == 0) {
        curl_easy_setopt(cu, CURLOPT_NOBODY, 1L);
    } else if (strcmp(c->method, "PUT") == 0) {
        curl_easy_setopt(cu, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(cu, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(cu, CURLOPT_READDATA, &up);
        curl_easy_setopt(cu, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body->len);
    } else if (strcmp(c->method, "POST") == 0) {
        curl_easy_setopt(cu, CURLOPT_POST, 1L);
        curl_easy_setopt(cu, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(cu, CURLOPT_READDATA, &up);
        curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
    } else if (strcmp(c->method, "DELETE") == 0) {
        curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, "DELETE");
    }

    r->status = 0; /* on_header_status sets it from the status line, before any body byte */
    CURLcode cc = curl_easy_perform(cu);
    curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &r->status);
    if (up.failed) {
        rc = err ? err->code : FERRY_EIO; /* objstore_body_read set the message */
        ferry_err_prefix(err, "s3 %s %s: ", c->method, what);
        goto out;
    }
    if (r->sink_failed) {
        rc = ferry_err_set(err, FERRY_EIO, "s3 GET %s: the receiver stopped the transfer", what);
        goto out;
    }
    if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && r->status >= 300)) {
        int code = cc == CURLE_OPERATION_TIMEDOUT ? FERRY_ETIMEOUT
                   : (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
                      cc == CURLE_SSL_CONNECT_ERROR || cc == CURLE_PEER_FAILED_VERIFICATION)
                       ? FERRY_ECONNECT
                       : FERRY_EREMOTE;
        rc = ferry_err_set(err, code, "s3 %s %s at %s://%s: %s", c->method, what, s->scheme,
                           s->hostport, curl_easy_strerror(cc));
        goto out;
    }
    if (r->status < 200 || r->status >= 300) {
        char detail[512];
        error_detail(&r->body, detail, sizeof detail);
        rc = ferry_err_set(err, status_code(r->status, detail), "s3 %s %s/%s: HTTP %ld%s%s",
                           c->method, s->bucket, c->key ? c->key : "", r->status,
                           detail[0] ? " " : "",
                           detail[0] ? detail : (r->status == 404 ? "not found" : ""));
        goto out;
    }
out:
    curl_slist_free_all(hl);
    if (auth.data)
        OPENSSL_cleanse(auth.data, auth.len);
    ferry_buf_free(&path);
    ferry_buf_free(&query);
    ferry_buf_free(&url);
    ferry_buf_free(&host);
    ferry_buf_free(&auth);
    ferry_buf_free(&h);
    return rc;
}

/* ---- operations ------------------------------------------------------------------------- */

static int s3_put(ferry_objstore *st, const char *key, const objstore_body *body, ferry_err *err)
{
    s3_response r = {0};
    /* create only: S3 answers 412 when the key exists, so no role can replace an object
     * (stores that ignore the header are covered by the callers' existence checks) */
    s3_call c = {"PUT", key, NULL, 0, body, NULL, NULL, true};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_ECONFLICT)
        rc = ferry_err_set(err, FERRY_ECONFLICT, "s3 put %s: an object exists at this key, and "
                           "ferry never replaces one (%s)", key, st->desc);
    ferry_buf_free(&r.body);
    return rc;
}

static int s3_get(ferry_objstore *st, const char *key, uint64_t offset, uint64_t length,
                  ferry_objstore_sink sink, void *ud, ferry_err *err)
{
    s3_store *s = S(st);
    char range[64];
    bool ranged = offset > 0 || length > 0;
    if (length)
        snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)offset,
                 (unsigned long long)(offset + length - 1));
    else
        snprintf(range, sizeof range, "bytes=%llu-", (unsigned long long)offset);
    s3_response r = {0};
    r.sink = sink;
    r.ud = ud;
    s3_call c = {"GET", key, NULL, 0, NULL, ranged ? range : NULL, NULL, false};
    int rc = s3_do(s, &c, &r, err);
    /* S3 answers a range that starts inside the object but runs past its end with the bytes
     * that exist; ferry treats that as an error, like the local backend. */
    if (rc == FERRY_OK && length && r.received != length)
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "get %s: byte range %llu+%llu is outside the object (got %llu bytes)",
                           key, (unsigned long long)offset, (unsigned long long)length,
                           (unsigned long long)r.received);
    else if (rc == FERRY_EINVAL)
        ferry_err_prefix(err, "byte range %llu+%llu is outside the object: ",
                         (unsigned long long)offset, (unsigned long long)length);
    ferry_buf_free(&r.body);
    return rc;
}

static int s3_head(ferry_objstore *st, const char *key, ferry_object_info *info, ferry_err *err)
{
    s3_response r = {0};
    s3_call c = {"HEAD", key, NULL, 0, NULL, NULL, NULL, false};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s: no such object in %s", key, st->desc);
    if (rc == FERRY_OK) {
        info->size = r.content_length;
        info->mtime = r.last_modified;
        snprintf(info->etag, sizeof info->etag, "%s", r.etag);
    }
    ferry_buf_free(&r.body);
    return rc;
}

/* ListObjectsV2 with encoding-type=url: keys come percent-encoded, so any byte of a key
 * (control characters included, which XML 1.0 cannot carry) arrives intact. */
static int s3_list(ferry_objstore *st, const char *prefix, const char *token, size_t max_keys,
                   ferry_object_list *out, ferry_err *err)
{
    char mk[24];
    snprintf(mk, sizeof mk, "%zu", max_keys);
    ferry_sigv4_param params[5] = {{"list-type", "2"}, {"max-keys", mk}, {"prefix", prefix},
                                   {"encoding-type", "url"}};
    size_t np = 4;
    if (token)
        params[np++] = (ferry_sigv4_param){"continuation-token", token};
    s3_response r = {0};
    s3_call c = {"GET", NULL, params, np, NULL, NULL, NULL, false};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_OK)
        rc = objstore_xml_list(ferry_buf_cstr(&r.body), r.body.len, out, err);
    ferry_buf_free(&r.body);
    return rc;
}

static int s3_del(ferry_objstore *st, const char *key, ferry_err *err)
{
    s3_response r = {0};
    s3_call c = {"DELETE", key, NULL, 0, NULL, NULL, NULL, false};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_ENOTFOUND) /* some stores answer 404 for a missing key: already gone */
        rc = FERRY_OK;
    ferry_buf_free(&r.body);
    return rc;
}

static int s3_mpu_begin(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    ferry_sigv4_param params[] = {{"uploads", ""}};
    s3_response r = {0};
    s3_call c = {"POST", mpu->key, params, 1, NULL, NULL, NULL, false};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_OK) {
        ferry_buf id = FERRY_BUF_INIT;
        bool found = false;
        rc = objstore_xml_value("s3 multipart initiate", ferry_buf_cstr(&r.body), r.body.len,
                                "InitiateMultipartUploadResult/UploadId", &id, &found, NULL, 0,
                                err);
        if (rc == FERRY_OK && (!found || id.len == 0))
            rc = ferry_err_set(err, FERRY_EREMOTE,
                               "s3 multipart %s: the answer to initiate has no UploadId", mpu->key);
        if (rc == FERRY_OK && !(mpu->upload_id = ferry_buf_detach(&id)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        ferry_buf_free(&id);
    }
    ferry_buf_free(&r.body);
    return rc;
}

static int s3_mpu_part(ferry_objstore *st, ferry_objstore_mpu *mpu, int number,
                       const objstore_body *body, char etag[80], ferry_err *err)
{
    char num[16];
    snprintf(num, sizeof num, "%d", number);
    ferry_sigv4_param params[] = {{"partNumber", num}, {"uploadId", mpu->upload_id}};
    s3_response r = {0};
    s3_call c = {"PUT", mpu->key, params, 2, body, NULL, NULL, false};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_OK && !r.etag[0])
        rc = ferry_err_set(err, FERRY_EREMOTE, "s3 multipart %s part %d: no ETag in the answer",
                           mpu->key, number);
    if (rc == FERRY_OK)
        snprintf(etag, 80, "%s", r.etag);
    ferry_buf_free(&r.body);
    return rc;
}

static int s3_mpu_complete(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    ferry_buf xml = FERRY_BUF_INIT;
    ferry_buf_puts(&xml, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < mpu->n; i++)
        ferry_buf_printf(&xml, "<Part><PartNumber>%d</PartNumber><ETag>\"%s\"</ETag></Part>",
                         mpu->parts[i].number, mpu->parts[i].etag);
    if (ferry_buf_puts(&xml, "</CompleteMultipartUpload>"))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    objstore_body b = {xml.data, -1, 0, xml.len};
    ferry_sigv4_param params[] = {{"uploadId", mpu->upload_id}};
    s3_response r = {0};
    s3_call c = {"POST", mpu->key, params, 1, &b, NULL, "application/xml", true};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_ECONFLICT)
        rc = ferry_err_set(err, FERRY_ECONFLICT, "s3 multipart %s: an object exists at this "
                           "key, and ferry never replaces one (%s)", mpu->key, st->desc);
    /* S3 may answer 200 and still report an error in the body: the root element says */
    if (rc == FERRY_OK) {
        char root[64];
        ferry_buf ignored = FERRY_BUF_INIT;
        rc = objstore_xml_value("s3 multipart complete", ferry_buf_cstr(&r.body), r.body.len,
                                "", &ignored, NULL, root, sizeof root, err);
        ferry_buf_free(&ignored);
        if (rc == FERRY_OK && strcmp(root, "CompleteMultipartUploadResult")) {
            char detail[512];
            error_detail(&r.body, detail, sizeof detail);
            rc = ferry_err_set(err, FERRY_EREMOTE, "s3 multipart %s: complete failed: %s",
                               mpu->key, detail[0] ? detail : root);
        }
    }
    ferry_buf_free(&r.body);
    ferry_buf_free(&xml);
    return rc;
}

static int s3_mpu_abort(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    ferry_sigv4_param params[] = {{"uploadId", mpu->upload_id}};
    s3_response r = {0};
    s3_call c = {"DELETE", mpu->key, params, 1, NULL, NULL, NULL, false};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc == FERRY_EUNSUPPORTED)
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED,
                           "s3 multipart %s: the store does not support AbortMultipartUpload "
                           "(s3rver answers 405); the uploaded parts stay until a lifecycle rule "
                           "(AbortIncompleteMultipartUpload) removes them", mpu->key);
    ferry_buf_free(&r.body);
    return rc;
}

/* GetBucketVersioning: <VersioningConfiguration><Status>Enabled|Suspended</Status>, or no
 * Status when versioning was never enabled. A store that answers anything else does not
 * implement it (s3rver ignores ?versioning and answers a listing). */
static int s3_versioning(ferry_objstore *st, char *status, size_t statussz, ferry_err *err)
{
    ferry_sigv4_param params[1] = {{"versioning", ""}};
    s3_response r = {0};
    s3_call c = {"GET", NULL, params, 1, NULL, NULL, NULL, false};
    int rc = s3_do(S(st), &c, &r, err);
    if (rc)
        goto out;
    char root[64] = "";
    ferry_buf v = FERRY_BUF_INIT;
    bool found = false;
    ferry_err perr = {0};
    /* an answer that is not XML at all is also "not implemented" */
    if (objstore_xml_value("s3 versioning", ferry_buf_cstr(&r.body), r.body.len,
                           "VersioningConfiguration/Status", &v, &found, root, sizeof root,
                           &perr) != FERRY_OK ||
        strcmp(root, "VersioningConfiguration")) {
        rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "the store does not implement bucket "
                           "versioning: GetBucketVersioning answered without a "
                           "VersioningConfiguration (%s)", st->desc);
        ferry_buf_free(&v);
        goto out;
    }
    snprintf(status, statussz, "%s", found ? ferry_buf_cstr(&v) : "");
    ferry_buf_free(&v);
out:
    ferry_buf_free(&r.body);
    return rc;
}

const objstore_ops objstore_s3_ops = {
    .kind = "s3",
    .put = s3_put,
    .get = s3_get,
    .head = s3_head,
    .list = s3_list,
    .del = s3_del,
    .mpu_begin = s3_mpu_begin,
    .mpu_part = s3_mpu_part,
    .mpu_complete = s3_mpu_complete,
    .mpu_abort = s3_mpu_abort,
    .versioning = s3_versioning,
    .close = s3_close,
};
