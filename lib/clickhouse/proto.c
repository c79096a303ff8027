/* The pure pieces of ClickHouse's HTTP protocol: URL building with parameter escaping,
 * statement classification, the retry policy, exception-code parsing and detection of
 * exceptions written into a 200 response (old "Code: NNN" trailers and the 25.11+ tagged
 * "__exception__" framing). No I/O. */
#include "ferry/clickhouse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- URL ---------------------------------------------------------------------------------- */

static int put_encoded(ferry_buf *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int rc;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            rc = ferry_buf_putc(out, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            rc = ferry_buf_append(out, e, 3);
        }
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

int ferry_ch_build_url(const char *base, const ferry_ch_setting *params, size_t n,
                       ferry_buf *out, ferry_err *err)
{
    const char *rest;
    if (!base || !*base)
        return ferry_err_set(err, FERRY_EINVAL, "no ClickHouse URL given (http://host:port)");
    if (!strncasecmp(base, "http://", 7))
        rest = base + 7;
    else if (!strncasecmp(base, "https://", 8))
        rest = base + 8;
    else
        return ferry_err_set(err, FERRY_EINVAL,
                             "ClickHouse URL must start with http:// or https:// (got a URL "
                             "of %zu characters)", strlen(base));
    size_t auth_len = strcspn(rest, "/?#");
    if (memchr(rest, '@', auth_len))
        return ferry_err_set(err, FERRY_EINVAL,
                             "ClickHouse URL must not carry user:password@; give the user and "
                             "password separately");
    if (auth_len == 0 || rest[0] == ':')
        return ferry_err_set(err, FERRY_EINVAL, "ClickHouse URL has no host");
    if (strpbrk(rest, "?#"))
        return ferry_err_set(err, FERRY_EINVAL,
                             "ClickHouse URL must not carry a query string or fragment; pass "
                             "settings separately");
    for (const char *p = rest; *p; p++)
        if ((unsigned char)*p <= ' ')
            return ferry_err_set(err, FERRY_EINVAL, "ClickHouse URL contains a space or "
                                                    "control character");
    int rc = ferry_buf_puts(out, base);
    if (!rc && rest[auth_len] == '\0')
        rc = ferry_buf_putc(out, '/');
    for (size_t i = 0; !rc && i < n; i++) {
        if (!params[i].name || !*params[i].name || !params[i].value)
            return ferry_err_set(err, FERRY_EINVAL, "URL parameter %zu has no name or value", i);
        rc = ferry_buf_putc(out, i == 0 ? '?' : '&');
        if (!rc)
            rc = put_encoded(out, params[i].name);
        if (!rc)
            rc = ferry_buf_putc(out, '=');
        if (!rc)
            rc = put_encoded(out, params[i].value);
    }
    if (rc)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory building a URL");
    return FERRY_OK;
}

/* ---- statements and retries ---------------------------------------------------------------- */

enum ferry_ch_stmt_kind ferry_ch_statement_kind(const char *sql)
{
    const char *p = sql;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == '('))
            p++;
        if (p[0] == '-' && p[1] == '-') {
            p += strcspn(p, "\n");
        } else if (p[0] == '#') {
            p += strcspn(p, "\n");
        } else if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
        } else {
            break;
        }
    }
    size_t n = 0;
    while (isalpha((unsigned char)p[n]))
        n++;
    static const char *const reads[] = {"SELECT", "WITH", "SHOW", "DESC", "DESCRIBE",
                                        "EXISTS", "EXPLAIN"};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        if (strlen(reads[i]) == n && !strncasecmp(p, reads[i], n))
            return FERRY_CH_STMT_READ;
    if (n == 6 && !strncasecmp(p, "INSERT", 6))
        return FERRY_CH_STMT_INSERT;
    return FERRY_CH_STMT_OTHER;
}

bool ferry_ch_should_retry(const ferry_ch_retry_case *rc)
{
    if (rc->attempt >= rc->max_attempts || rc->data_delivered || !rc->body_replayable)
        return false;
    bool idempotent = rc->kind == FERRY_CH_STMT_READ || rc->caller_idempotent ||
                      (rc->kind == FERRY_CH_STMT_INSERT && rc->has_dedup_token);
    switch (rc->failure) {
    case FERRY_CH_FAIL_CONNECT:
        /* No connection was made, so the server never saw the statement: always safe. */
        return true;
    case FERRY_CH_FAIL_NO_REPLY:
        /* The request may have reached the server and run; only repeatable statements. */
        return idempotent;
    case FERRY_CH_FAIL_PARTIAL:
    case FERRY_CH_FAIL_TIMEOUT:
    case FERRY_CH_FAIL_SERVER:
    case FERRY_CH_FAIL_LOCAL:
        return false;
    }
    return false;
}

long ferry_ch_backoff_ms(int attempt, long base_ms)
{
    const long cap = 5000;
    if (base_ms <= 0)
        base_ms = 100;
    long d = base_ms;
    for (int i = 1; i < attempt && d < cap; i++)
        d *= 2;
    return d < cap ? d : cap;
}

/* ---- exceptions ---------------------------------------------------------------------------- */

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m == 0 || n < m)
        return NULL;
    return memmem(hay, n, needle, m);
}

int ferry_ch_exception_code(const char *text, size_t len)
{
    const char *p = find_bytes(text, len, "Code: ", 6);
    if (!p)
        return 0;
    p += 6;
    const char *end = text + len;
    long v = 0;
    int digits = 0;
    while (p < end && isdigit((unsigned char)*p) && digits < 9) {
        v = v * 10 + (*p - '0');
        p++;
        digits++;
    }
    return digits ? (int)v : 0;
}

/* Copies src/n into msg, replacing control characters by spaces and trimming both ends. */
static void copy_message(char *msg, size_t msgsz, const char *src, size_t n)
{
    if (!msg || msgsz == 0)
        return;
    while (n && isspace((unsigned char)*src)) {
        src++;
        n--;
    }
    while (n && isspace((unsigned char)src[n - 1]))
        n--;
    if (n >= msgsz)
        n = msgsz - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        msg[i] = c < ' ' || c == 0x7f ? ' ' : (char)c;
    }
    msg[n] = '\0';
}

bool ferry_ch_format_is_binary(const char *format)
{
    if (!format)
        return false;
    static const char *const bin[] = {"Native", "RowBinary", "Parquet", "Arrow", "ORC",
                                      "Avro", "Protobuf", "CapnProto", "MsgPack", "BSON",
                                      "Npy", "RawBLOB"};
    for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++)
        if (!strncasecmp(format, bin[i], strlen(bin[i])))
            return true;
    return false;
}

#define EXC_MARK "__exception__"
#define EXC_MARK_LEN 13

/* Skips one "\r\n" or "\n" at p; returns the new position. */
static size_t skip_eol(const char *b, size_t len, size_t p)
{
    if (p < len && b[p] == '\r')
        p++;
    if (p < len && b[p] == '\n')
        p++;
    return p;
}

ssize_t ferry_ch_find_tag_marker(const char *body, size_t len, const char *tag)
{
    size_t tl = tag ? strlen(tag) : 0;
    if (tl == 0)
        return -1;
    size_t from = 0;
    while (from < len) {
        const char *m = find_bytes(body + from, len - from, EXC_MARK, EXC_MARK_LEN);
        if (!m)
            return -1;
        size_t at = (size_t)(m - body);
        size_t p = skip_eol(body, len, at + EXC_MARK_LEN);
        if (p > at + EXC_MARK_LEN && p + tl <= len && !memcmp(body + p, tag, tl))
            return (ssize_t)at;
        from = at + 1;
    }
    return -1;
}

/* The tagged form: [\r\n]__exception__\r\nTAG\r\nMESSAGE\r\nLEN TAG\r\n__exception__\r\n */
static ssize_t find_tagged(const char *b, size_t len, const char *tag, int *code, char *msg,
                           size_t msgsz)
{
    ssize_t at = ferry_ch_find_tag_marker(b, len, tag);
    if (at < 0)
        return -1;
    size_t tl = strlen(tag);
    size_t start = (size_t)at;
    if (start >= 2 && b[start - 2] == '\r' && b[start - 1] == '\n')
        start -= 2;
    else if (start >= 1 && b[start - 1] == '\n')
        start -= 1;
    size_t m0 = skip_eol(b, len, (size_t)at + EXC_MARK_LEN) + tl;
    m0 = skip_eol(b, len, m0);
    /* The closing "LEN TAG": the last occurrence of the tag after the message. */
    size_t m1 = len;
    for (size_t p = m0; p + tl <= len; p++) {
        const char *t = find_bytes(b + p, len - p, tag, tl);
        if (!t)
            break;
        m1 = (size_t)(t - b);
        p = m1;
    }
    if (m1 < len) {
        while (m1 > m0 && b[m1 - 1] == ' ')
            m1--;
        while (m1 > m0 && isdigit((unsigned char)b[m1 - 1]))
            m1--;
    }
    *code = ferry_ch_exception_code(b + m0, m1 - m0);
    copy_message(msg, msgsz, b + m0, m1 - m0);
    if (msg && msgsz && !msg[0])
        copy_message(msg, msgsz, "exception without a message", 27);
    return (ssize_t)start;
}

/* Does an untagged exception text start at b+p and run to the end of the body? */
static bool looks_like_trailer(const char *b, size_t len, size_t p)
{
    const char *s = b + p;
    size_t n = len - p;
    if (n < 8 || memcmp(s, "Code: ", 6) || !isdigit((unsigned char)s[6]))
        return false;
    size_t i = 6;
    while (i < n && isdigit((unsigned char)s[i]))
        i++;
    if (i >= n || (s[i] != '.' && s[i] != ','))
        return false;
    /* "Code: 60. DB::Exception:" (19.x and later) or "Code: 60, e.displayText() = DB::..." */
    size_t look = n - i < 48 ? n - i : 48;
    if (!find_bytes(s + i, look, "Exception", 9))
        return false;
    if (s[n - 1] != '\n' || memchr(s, '\0', n))
        return false;
    return true;
}

/* A JSON row {"exception": "Code: ..."} (JSON*EachRow with http_write_exception_in_output_format) */
static bool looks_like_json_exception(const char *b, size_t len, size_t p)
{
    static const char k[] = "{\"exception\":";
    size_t n = len - p;
    return n > sizeof k && !memcmp(b + p, k, sizeof k - 1) && b[len - 1] == '\n' &&
           find_bytes(b + p, n, "Code: ", 6) && !memchr(b + p, '\0', n);
}

ssize_t ferry_ch_find_trailer(const char *body, size_t len, bool is_start, const char *tag,
                              bool binary, int *code, char *msg, size_t msgsz)
{
    *code = 0;
    if (msg && msgsz)
        msg[0] = '\0';
    if (tag && *tag)
        return find_tagged(body, len, tag, code, msg, msgsz);
    for (size_t p = 0; p < len; p++) {
        bool line_start = p == 0 ? is_start : body[p - 1] == '\n';
        if (!binary && !line_start)
            continue;
        if (body[p] == '_' && line_start && len - p > EXC_MARK_LEN &&
            !memcmp(body + p, EXC_MARK, EXC_MARK_LEN)) {
            /* "__exception__" line before the text (some versions before 25.11) */
            size_t q = skip_eol(body, len, p + EXC_MARK_LEN);
            if (q > p + EXC_MARK_LEN && looks_like_trailer(body, len, q)) {
                *code = ferry_ch_exception_code(body + q, len - q);
                copy_message(msg, msgsz, body + q, len - q);
                return (ssize_t)p;
            }
        }
        if (body[p] == 'C' && looks_like_trailer(body, len, p)) {
            *code = ferry_ch_exception_code(body + p, len - p);
            copy_message(msg, msgsz, body + p, len - p);
            return (ssize_t)p;
        }
        if (body[p] == '{' && line_start && looks_like_json_exception(body, len, p)) {
            const char *c = find_bytes(body + p, len - p, "Code: ", 6);
            *code = ferry_ch_exception_code(c, len - (size_t)(c - body));
            copy_message(msg, msgsz, c, len - (size_t)(c - body));
            /* drop the JSON closing quote and brace from the message */
            if (msg && msgsz) {
                size_t ml = strlen(msg);
                if (ml >= 2 && !strcmp(msg + ml - 2, "\"}"))
                    msg[ml - 2] = '\0';
            }
            return (ssize_t)p;
        }
    }
    return -1;
}
