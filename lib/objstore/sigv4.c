/* AWS Signature Version 4: canonical request, string to sign, signing key and signature.
 * Pure: the caller supplies the time and every header to sign. */
#include "objstore/sigv4.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

static const char HEX[] = "0123456789abcdef";

static void to_hex(const unsigned char *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = HEX[d[i] >> 4];
        out[2 * i + 1] = HEX[d[i] & 15];
    }
    out[2 * n] = '\0';
}

void ferry_sigv4_sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    to_hex(md, 32, out);
}

void ferry_sigv4_amz_date(time_t t, char out[17])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

int ferry_sigv4_uri_encode(ferry_buf *out, const char *s, size_t n, bool keep_slash)
{
    static const char UHEX[] = "0123456789ABCDEF";
    int rc = ferry_buf_reserve(out, n);
    if (rc == FERRY_OK)
        out->data[out->len] = '\0'; /* reserve alone leaves it unterminated */
    for (size_t i = 0; rc == FERRY_OK && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            rc = ferry_buf_putc(out, (char)c);
        } else {
            char e[3] = {'%', UHEX[c >> 4], UHEX[c & 15]};
            rc = ferry_buf_append(out, e, 3);
        }
    }
    return rc;
}

typedef struct enc_pair {
    char *k, *v;
} enc_pair;

static int cmp_pair(const void *a, const void *b)
{
    const enc_pair *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : strcmp(x->v, y->v);
}

int ferry_sigv4_canonical_query(const ferry_sigv4_param *params, size_t n, ferry_buf *out)
{
    int rc = FERRY_OK;
    enc_pair *pairs = n ? calloc(n, sizeof *pairs) : NULL;
    if (n && !pairs)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < n && rc == FERRY_OK; i++) {
        ferry_buf k = FERRY_BUF_INIT, v = FERRY_BUF_INIT;
        const char *val = params[i].value ? params[i].value : "";
        rc = ferry_sigv4_uri_encode(&k, params[i].key, strlen(params[i].key), false);
        if (rc == FERRY_OK)
            rc = ferry_sigv4_uri_encode(&v, val, strlen(val), false);
        pairs[i].k = ferry_buf_detach(&k);
        pairs[i].v = ferry_buf_detach(&v);
        if (!pairs[i].k || !pairs[i].v)
            rc = FERRY_ENOMEM;
    }
    if (rc == FERRY_OK && n)
        qsort(pairs, n, sizeof *pairs, cmp_pair);
    for (size_t i = 0; i < n && rc == FERRY_OK; i++)
        rc = ferry_buf_printf(out, "%s%s=%s", i ? "&" : "", pairs[i].k, pairs[i].v);
    for (size_t i = 0; i < n; i++) {
        free(pairs[i].k);
        free(pairs[i].v);
    }
    free(pairs);
    return rc;
}

typedef struct canon_header {
    char *name;  /* lower-cased */
    char *value; /* trimmed, runs of spaces collapsed */
} canon_header;

static int cmp_header(const void *a, const void *b)
{
    return strcmp(((const canon_header *)a)->name, ((const canon_header *)b)->name);
}

static char *canon_value(const char *v)
{
    size_t n = strlen(v);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    while (*v == ' ' || *v == '\t')
        v++;
    bool space = false;
    for (; *v; v++) {
        if (*v == ' ' || *v == '\t') {
            space = true;
            continue;
        }
        if (space && o != out)
            *o++ = ' ';
        space = false;
        *o++ = *v;
    }
    *o = '\0';
    return out;
}

static bool hmac256(const void *key, size_t keylen, const char *msg, unsigned char out[32])
{
    unsigned int len = 0;
    return HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, strlen(msg), out,
                &len) != NULL && len == 32;
}

int ferry_sigv4_sign(const ferry_sigv4_request *rq, const char *access_key_id,
                     const char *secret_access_key, ferry_buf *authorization,
                     ferry_buf *canonical, ferry_err *err)
{
    int rc = FERRY_OK;
    canon_header *hs = NULL;
    ferry_buf creq = FERRY_BUF_INIT, signed_names = FERRY_BUF_INIT, sts = FERRY_BUF_INIT;
    ferry_buf kbuf = FERRY_BUF_INIT;
    unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
    char date[9], sig_hex[65], creq_hash[65];

    if (!rq->amz_date || strlen(rq->amz_date) != 16 || rq->amz_date[8] != 'T') {
        rc = ferry_err_set(err, FERRY_EINVAL, "sigv4: x-amz-date must look like 20130524T000000Z");
        goto out;
    }
    memcpy(date, rq->amz_date, 8);
    date[8] = '\0';

    hs = calloc(rq->n_headers ? rq->n_headers : 1, sizeof *hs);
    if (!hs) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    bool have_host = false;
    for (size_t i = 0; i < rq->n_headers; i++) {
        hs[i].name = strdup(rq->headers[i].name);
        hs[i].value = canon_value(rq->headers[i].value);
        if (!hs[i].name || !hs[i].value) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        for (char *c = hs[i].name; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        have_host |= strcmp(hs[i].name, "host") == 0;
    }
    if (!have_host) {
        rc = ferry_err_set(err, FERRY_EINVAL, "sigv4: the host header must be signed");
        goto out;
    }
    qsort(hs, rq->n_headers, sizeof *hs, cmp_header);

    /* Canonical request. Repeated header names are merged with ',' as AWS specifies. */
    rc = ferry_buf_printf(&creq, "%s\n%s\n%s\n", rq->method, rq->path, rq->query ? rq->query : "");
    for (size_t i = 0; i < rq->n_headers && rc == FERRY_OK; i++) {
        bool same_as_prev = i > 0 && strcmp(hs[i].name, hs[i - 1].name) == 0;
        if (same_as_prev) {
            creq.len--; /* drop the '\n' of the previous line */
            rc = ferry_buf_printf(&creq, ",%s\n", hs[i].value);
        } else {
            rc = ferry_buf_printf(&creq, "%s:%s\n", hs[i].name, hs[i].value);
            if (rc == FERRY_OK)
                rc = ferry_buf_printf(&signed_names, "%s%s", i ? ";" : "", hs[i].name);
        }
    }
    if (rc == FERRY_OK)
        rc = ferry_buf_printf(&creq, "\n%s\n%s", ferry_buf_cstr(&signed_names), rq->payload_hash);
    if (rc) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (canonical)
        ferry_buf_append(canonical, creq.data, creq.len);

    ferry_sigv4_sha256_hex(creq.data, creq.len, creq_hash);
    if (ferry_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", rq->amz_date,
                         date, rq->region, rq->service, creq_hash) ||
        ferry_buf_printf(&kbuf, "AWS4%s", secret_access_key)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (!hmac256(kbuf.data, kbuf.len, date, k1) || !hmac256(k1, 32, rq->region, k2) ||
        !hmac256(k2, 32, rq->service, k3) || !hmac256(k3, 32, "aws4_request", k4) ||
        !hmac256(k4, 32, sts.data, sig)) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "sigv4: HMAC-SHA256 failed in OpenSSL");
        goto out;
    }
    to_hex(sig, 32, sig_hex);
    if (ferry_buf_printf(authorization,
                         "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
                         "SignedHeaders=%s, Signature=%s",
                         access_key_id, date, rq->region, rq->service,
                         ferry_buf_cstr(&signed_names), sig_hex))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    if (kbuf.data)
        OPENSSL_cleanse(kbuf.data, kbuf.len);
    OPENSSL_cleanse(k1, sizeof k1);
    OPENSSL_cleanse(k2, sizeof k2);
    OPENSSL_cleanse(k3, sizeof k3);
    OPENSSL_cleanse(k4, sizeof k4);
    ferry_buf_free(&kbuf);
    if (hs) {
        for (size_t i = 0; i < rq->n_headers; i++) {
            free(hs[i].name);
            free(hs[i].value);
        }
        free(hs);
    }
    ferry_buf_free(&creq);
    ferry_buf_free(&signed_names);
    ferry_buf_free(&sts);
    return rc;
}
