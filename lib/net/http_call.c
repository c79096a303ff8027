/* ferry's short HTTP control calls over libcurl (include/ferry/http_call.h). */
#include "ferry/http_call.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ferry/curl_easy.h"
#include "ferry/log.h"

#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_MAX_ANSWER ((size_t)16 << 20)

typedef struct answer_sink {
    ferry_buf *body;
    size_t max;
    bool over;
} answer_sink;

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
    answer_sink *s = arg;
    size_t len = size * n;
    if (s->body->len + len > s->max) {
        s->over = true;
        return 0; /* curl stops with a write error */
    }
    return ferry_buf_append(s->body, p, len) ? 0 : len;
}

int ferry_http_do(const ferry_http_call *c, ferry_http_answer *a, ferry_err *err)
{
    memset(a, 0, sizeof *a);
    a->body = (ferry_buf)FERRY_BUF_INIT;
    long timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : DEFAULT_TIMEOUT_MS;
    char msg[CURL_ERROR_SIZE] = "";
    CURL *h = NULL;
    struct curl_slist *hdrs = NULL;
    /* no connect timeout of its own: the call's deadline (CURLOPT_TIMEOUT_MS) bounds it */
    int rc = ferry_curl_new(0, msg, &h, err);
    if (rc)
        goto out;
    for (const char *const *p = c->headers; p && *p; p++) {
        struct curl_slist *n = curl_slist_append(hdrs, *p);
        if (!n) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        hdrs = n;
    }
    answer_sink sink = {&a->body, c->max_answer ? c->max_answer : DEFAULT_MAX_ANSWER, false};
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    if (hdrs)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (c->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
    }
    if (c->user) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERNAME, c->user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, c->password ? c->password : "");
    }
    CURLcode cc = curl_easy_perform(h);
    char red[512];
    if (sink.over) {
        rc = ferry_err_set(err, FERRY_EIO, "%s answered more than %zu bytes",
                           ferry_redact_url(c->url, red, sizeof red), sink.max);
    } else if (cc != CURLE_OK) { /* libcurl's words: the caller names the URL */
        rc = ferry_err_set(err, FERRY_ECONNECT, "%s", msg[0] ? msg : curl_easy_strerror(cc));
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    }
out:
    curl_slist_free_all(hdrs);
    if (h)
        curl_easy_cleanup(h);
    return rc;
}

void ferry_http_answer_free(ferry_http_answer *a)
{
    ferry_buf_free(&a->body);
    a->status = 0;
}

int ferry_url_escape(ferry_buf *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char ch = *p;
        bool keep = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~';
        int rc = keep ? ferry_buf_putc(out, (char)ch)
                      : ferry_buf_printf(out, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}
