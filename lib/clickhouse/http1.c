/* The incremental HTTP/1.1 response parser (see http1.h for the states and limits). */
#include "http1.h"

#include <string.h>
#include <strings.h>

enum {
    S_STATUS,
    S_HEADERS,
    S_BODY_LENGTH,
    S_BODY_UNTIL_CLOSE,
    S_CHUNK_SIZE,
    S_CHUNK_DATA,
    S_CHUNK_DATA_END, /* the CRLF after a chunk's data */
    S_TRAILERS,
    S_DONE,
};

void ferry_http1_init(ferry_http1 *p, ferry_http1_header_fn on_header, ferry_http1_body_fn on_body,
                      void *arg, bool head_request)
{
    /* not the 8 KiB line buffer: line_len says how much of it is in use */
    memset(p, 0, offsetof(ferry_http1, line));
    p->line_len = 0;
    p->state = S_STATUS;
    p->on_header = on_header;
    p->on_body = on_body;
    p->arg = arg;
    p->head_request = head_request;
}

bool ferry_http1_done(const ferry_http1 *p)
{
    return p->state == S_DONE;
}

bool ferry_http1_head_done(const ferry_http1 *p)
{
    return p->state != S_STATUS && p->state != S_HEADERS;
}

static bool token_has(const char *v, size_t n, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i + w <= n; i++)
        if (!strncasecmp(v + i, word, w) && (i == 0 || v[i - 1] == ' ' || v[i - 1] == ',') &&
            (i + w == n || v[i + w] == ' ' || v[i + w] == ',' || v[i + w] == ';'))
            return true;
    return false;
}

static int status_line(ferry_http1 *p, const char *l, size_t n, ferry_err *err)
{
    /* HTTP/1.x SP 3DIGIT [SP reason] */
    if (n < 12 || memcmp(l, "HTTP/1.", 7) || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
        l[9] < '1' || l[9] > '5' || l[10] < '0' || l[10] > '9' || l[11] < '0' || l[11] > '9' ||
        (n > 12 && l[12] != ' '))
        return ferry_err_set(err, FERRY_EREMOTE, "not an HTTP/1.x status line (%zu bytes "
                             "starting \"%.*s\")", n, (int)(n < 20 ? n : 20), l);
    p->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    p->keep_alive = l[7] == '1';
    p->chunked = p->has_length = false;
    p->length = 0;
    return FERRY_OK;
}

static int header_line(ferry_http1 *p, const char *l, size_t n, ferry_err *err)
{
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l || l[0] == ' ' || l[0] == '\t')
        return ferry_err_set(err, FERRY_EREMOTE, "malformed HTTP header line (%zu bytes)", n);
    size_t nlen = (size_t)(colon - l);
    const char *v = colon + 1;
    size_t vlen = n - nlen - 1;
    while (vlen && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        vlen--;
    if (p->status >= 200) {
        if (nlen == 14 && !strncasecmp(l, "Content-Length", 14)) {
            uint64_t x = 0;
            if (!vlen)
                return ferry_err_set(err, FERRY_EREMOTE, "empty Content-Length");
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - 9) / 10)
                    return ferry_err_set(err, FERRY_EREMOTE, "bad Content-Length \"%.*s\"",
                                         (int)(vlen < 30 ? vlen : 30), v);
                x = x * 10 + (uint64_t)(v[i] - '0');
            }
            if (p->has_length && x != p->length)
                return ferry_err_set(err, FERRY_EREMOTE, "two different Content-Length headers");
            p->has_length = true;
            p->length = x;
        } else if (nlen == 17 && !strncasecmp(l, "Transfer-Encoding", 17)) {
            if (!token_has(v, vlen, "chunked"))
                return ferry_err_set(err, FERRY_EREMOTE, "unsupported Transfer-Encoding "
                                     "\"%.*s\"", (int)(vlen < 40 ? vlen : 40), v);
            p->chunked = true;
        } else if (nlen == 10 && !strncasecmp(l, "Connection", 10)) {
            if (token_has(v, vlen, "close"))
                p->keep_alive = false;
            else if (token_has(v, vlen, "keep-alive"))
                p->keep_alive = true;
        }
        if (p->on_header)
            return p->on_header(p->arg, l, nlen, v, vlen);
    }
    return FERRY_OK;
}

/* The blank line after the headers: decides how the body is framed. */
static int head_end(ferry_http1 *p, ferry_err *err)
{
    if (p->status < 200) { /* 1xx: its own headers only; the real response follows */
        p->state = S_STATUS;
        p->status = 0;
        return FERRY_OK;
    }
    if (p->head_request || p->status == 204 || p->status == 304) {
        p->state = S_DONE;
    } else if (p->chunked) {
        p->state = S_CHUNK_SIZE; /* Transfer-Encoding wins over Content-Length (RFC 9112 6.3) */
        p->keep_alive = p->keep_alive && !p->has_length;
    } else if (p->has_length) {
        p->left = p->length;
        p->state = p->left ? S_BODY_LENGTH : S_DONE;
    } else {
        p->state = S_BODY_UNTIL_CLOSE;
        p->keep_alive = false;
    }
    (void)err;
    return FERRY_OK;
}

static int chunk_size_line(ferry_http1 *p, const char *l, size_t n, ferry_err *err)
{
    uint64_t x = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char c = l[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            break;
        if (x >> 59)
            return ferry_err_set(err, FERRY_EREMOTE, "HTTP chunk size too large");
        x = x * 16 + (uint64_t)d;
    }
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i == 0 || (i < n && l[i] != ';'))
        return ferry_err_set(err, FERRY_EREMOTE, "bad HTTP chunk size line \"%.*s\"",
                             (int)(n < 30 ? n : 30), l);
    p->left = x;
    p->state = x ? S_CHUNK_DATA : S_TRAILERS;
    return FERRY_OK;
}

/* One complete line (without its CRLF) in the current state. */
static int take_line(ferry_http1 *p, const char *l, size_t n, ferry_err *err)
{
    switch (p->state) {
    case S_STATUS:
        if (n == 0) /* tolerate a stray CRLF before a response */
            return FERRY_OK;
        if (status_line(p, l, n, err))
            return FERRY_EREMOTE;
        p->state = S_HEADERS;
        return FERRY_OK;
    case S_HEADERS:
        return n == 0 ? head_end(p, err) : header_line(p, l, n, err);
    case S_CHUNK_SIZE:
        return chunk_size_line(p, l, n, err);
    case S_CHUNK_DATA_END:
        if (n != 0)
            return ferry_err_set(err, FERRY_EREMOTE, "HTTP chunk not followed by CRLF");
        p->state = S_CHUNK_SIZE;
        return FERRY_OK;
    case S_TRAILERS:
        if (n == 0)
            p->state = S_DONE;
        return FERRY_OK;
    default:
        return ferry_err_set(err, FERRY_EINTERNAL, "HTTP parser: line in state %d", p->state);
    }
}

static bool line_state(int s)
{
    return s == S_STATUS || s == S_HEADERS || s == S_CHUNK_SIZE || s == S_CHUNK_DATA_END ||
           s == S_TRAILERS;
}

int ferry_http1_feed(ferry_http1 *p, const char *data, size_t len, size_t *used, ferry_err *err)
{
    size_t i = 0;
    int rc = FERRY_OK;
    while (i < len && p->state != S_DONE) {
        if (line_state(p->state)) {
            const char *nl = memchr(data + i, '\n', len - i);
            size_t take = nl ? (size_t)(nl - (data + i)) : len - i;
            if (p->line_len + take >= sizeof p->line) {
                rc = ferry_err_set(err, FERRY_EREMOTE, "HTTP response line longer than %d bytes",
                                   FERRY_HTTP1_LINE_MAX);
                break;
            }
            memcpy(p->line + p->line_len, data + i, take);
            p->line_len += take;
            i += take;
            if (p->state == S_STATUS || p->state == S_HEADERS) {
                p->head_bytes += take + (nl ? 1 : 0);
                if (p->head_bytes > FERRY_HTTP1_HEAD_MAX) {
                    rc = ferry_err_set(err, FERRY_EREMOTE, "HTTP response headers longer than "
                                       "%d bytes", FERRY_HTTP1_HEAD_MAX);
                    break;
                }
            }
            if (!nl)
                break;
            i++; /* the '\n' */
            size_t n = p->line_len;
            if (n && p->line[n - 1] == '\r')
                n--;
            p->line_len = 0;
            p->line[n] = '\0';
            if ((rc = take_line(p, p->line, n, err)) != FERRY_OK)
                break;
            continue;
        }
        size_t avail = len - i;
        size_t take = avail;
        if (p->state != S_BODY_UNTIL_CLOSE && take > p->left)
            take = (size_t)p->left;
        if (take && p->on_body && (rc = p->on_body(p->arg, data + i, take)) != FERRY_OK) {
            i += take;
            break;
        }
        i += take;
        p->body_bytes += take;
        if (p->state == S_BODY_UNTIL_CLOSE)
            continue;
        p->left -= take;
        if (p->left == 0)
            p->state = p->state == S_CHUNK_DATA ? S_CHUNK_DATA_END : S_DONE;
    }
    if (used)
        *used = i;
    return rc;
}

int ferry_http1_finish(ferry_http1 *p, ferry_err *err)
{
    if (p->state == S_BODY_UNTIL_CLOSE) {
        p->state = S_DONE;
        return FERRY_OK;
    }
    if (p->state == S_DONE)
        return FERRY_OK;
    return ferry_err_set(err, FERRY_EREMOTE, "the HTTP response ended early (%s)",
                         p->state == S_STATUS && p->status == 0 && p->line_len == 0
                             ? "no response"
                         : p->state == S_STATUS || p->state == S_HEADERS ? "in its headers"
                                                                          : "in its body");
}
