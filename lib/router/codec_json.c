/* The router's JSONEachRow codec (codec_int.h): finds each object of the data window, its
 * tenant and split key values (strings decoded, numbers as written), and leaves the bytes as
 * they are. Objects nested deeper than a bound are refused rather than recursed into. Pure. */
#include "router/codec_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

/* Scans a JSON string starting at d[*p] == '"'; 1 done (*p after it), 0 need more, -1 bad. */
static int js_string(const char *d, size_t len, size_t *p)
{
    size_t i = *p + 1;
    while (i < len) {
        unsigned char ch = (unsigned char)d[i];
        if (ch == '"') {
            *p = i + 1;
            return 1;
        }
        if (ch == '\\') {
            if (i + 1 >= len)
                return 0;
            i += 2;
            continue;
        }
        i++;
    }
    return 0;
}

static int js_value(const char *d, size_t len, size_t *p, int depth);

static void js_ws(const char *d, size_t len, size_t *p)
{
    while (*p < len && (d[*p] == ' ' || d[*p] == '\t' || d[*p] == '\n' || d[*p] == '\r'))
        (*p)++;
}

static int js_container(const char *d, size_t len, size_t *p, int depth, char close)
{
    size_t i = *p + 1;
    bool first = true;
    for (;;) {
        js_ws(d, len, &i);
        if (i >= len)
            return 0;
        if (d[i] == close) {
            *p = i + 1;
            return 1;
        }
        if (!first) {
            if (d[i] != ',')
                return -1;
            i++;
            js_ws(d, len, &i);
        }
        first = false;
        if (close == '}') {
            if (i >= len)
                return 0;
            if (d[i] != '"')
                return -1;
            int k = js_string(d, len, &i);
            if (k <= 0)
                return k;
            js_ws(d, len, &i);
            if (i >= len)
                return 0;
            if (d[i] != ':')
                return -1;
            i++;
        }
        int k = js_value(d, len, &i, depth + 1);
        if (k <= 0)
            return k;
    }
}

static int js_value(const char *d, size_t len, size_t *p, int depth)
{
    if (depth > 64)
        return -1;
    js_ws(d, len, p);
    if (*p >= len)
        return 0;
    char ch = d[*p];
    if (ch == '"')
        return js_string(d, len, p);
    if (ch == '{')
        return js_container(d, len, p, depth, '}');
    if (ch == '[')
        return js_container(d, len, p, depth, ']');
    size_t i = *p;
    while (i < len && (isalnum((unsigned char)d[i]) || d[i] == '-' || d[i] == '+' || d[i] == '.'))
        i++;
    if (i == *p)
        return -1;
    if (i >= len)
        return 0; /* the number may go on */
    *p = i;
    return 1;
}

static void put_utf8(ferry_buf *b, unsigned cp)
{
    if (cp < 0x80) {
        ferry_buf_putc(b, (char)cp);
    } else if (cp < 0x800) {
        ferry_buf_putc(b, (char)(0xc0 | (cp >> 6)));
        ferry_buf_putc(b, (char)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        ferry_buf_putc(b, (char)(0xe0 | (cp >> 12)));
        ferry_buf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
        ferry_buf_putc(b, (char)(0x80 | (cp & 0x3f)));
    } else {
        ferry_buf_putc(b, (char)(0xf0 | (cp >> 18)));
        ferry_buf_putc(b, (char)(0x80 | ((cp >> 12) & 0x3f)));
        ferry_buf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
        ferry_buf_putc(b, (char)(0x80 | (cp & 0x3f)));
    }
}

static bool hex4(const char *s, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = s[i];
        unsigned x = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
                     : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                     : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10)
                                              : 16u;
        if (x > 15)
            return false;
        *v = *v * 16 + x;
    }
    return true;
}

/* Decodes the JSON string d[s..e) (quotes included) into b; false on a bad escape. */
static bool js_decode(const char *d, size_t s, size_t e, ferry_buf *b)
{
    ferry_buf_reset(b);
    for (size_t i = s + 1; i + 1 < e; i++) {
        char ch = d[i];
        if (ch != '\\') {
            ferry_buf_putc(b, ch);
            continue;
        }
        ch = d[++i];
        switch (ch) {
        case 'n': ferry_buf_putc(b, '\n'); break;
        case 't': ferry_buf_putc(b, '\t'); break;
        case 'r': ferry_buf_putc(b, '\r'); break;
        case 'b': ferry_buf_putc(b, '\b'); break;
        case 'f': ferry_buf_putc(b, '\f'); break;
        case '/': case '\\': case '"': ferry_buf_putc(b, ch); break;
        case 'u': {
            unsigned cp, lo;
            if (i + 4 >= e || !hex4(d + i + 1, &cp))
                return false;
            i += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < e && d[i + 1] == '\\' && d[i + 2] == 'u' &&
                hex4(d + i + 3, &lo) && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            put_utf8(b, cp);
            break;
        }
        default:
            return false;
        }
    }
    return true;
}

/* The text of a JSON scalar value d[s..e): a string decoded, a number or literal as written. */
static int js_scalar_text(const char *d, size_t s, size_t e, ferry_buf *b, const char *what,
                          uint64_t rn, ferry_err *err)
{
    if (d[s] == '"') {
        if (!js_decode(d, s, e, b))
            return ferry_err_set(err, FERRY_EINVAL, "row %llu: %s: bad string escape",
                                 (unsigned long long)rn, what);
        return FERRY_OK;
    }
    if (d[s] == '{' || d[s] == '[' || (e - s == 4 && !memcmp(d + s, "null", 4)))
        return ferry_err_set(err, FERRY_EINVAL, "row %llu: %s must be a string or a number",
                             (unsigned long long)rn, what);
    ferry_buf_reset(b);
    return ferry_buf_append(b, d + s, e - s) ? FERRY_ENOMEM : FERRY_OK;
}

int codec_json_next(ferry_rt_codec *c, const char *d, size_t len, bool eof, size_t *used,
                    ferry_rt_row *row, ferry_err *err)
{
    size_t pos = 0;
    /* Rows may be separated by white space and commas, and wrapped in one [ ] array. */
    while (pos < len && (d[pos] == ' ' || d[pos] == '\t' || d[pos] == '\n' || d[pos] == '\r' ||
                         d[pos] == ',' || d[pos] == '[' || d[pos] == ']'))
        pos++;
    *used = pos;
    if (pos >= len)
        return FERRY_OK;
    uint64_t rn = c->rows + 1;
    if (d[pos] != '{')
        return ferry_err_set(err, FERRY_EINVAL,
                             "JSONEachRow row %llu: expected '{' at the start of a row, found '%c'",
                             (unsigned long long)rn, isprint((unsigned char)d[pos]) ? d[pos] : '?');
    size_t i = pos + 1;
    bool first = true, have_tenant = false, have_key = false;
    row->split_present = false;
    ferry_buf key = {0};
    int rc = FERRY_OK;
    for (;;) {
        js_ws(d, len, &i);
        if (i >= len)
            goto more;
        if (d[i] == '}') {
            i++;
            break;
        }
        if (!first) {
            if (d[i] != ',')
                goto bad;
            i++;
            js_ws(d, len, &i);
        }
        first = false;
        if (i >= len)
            goto more;
        if (d[i] != '"')
            goto bad;
        size_t ks = i;
        int k = js_string(d, len, &i);
        if (k == 0)
            goto more;
        if (k < 0 || !js_decode(d, ks, i, &key))
            goto bad;
        size_t member_start = ks;
        js_ws(d, len, &i);
        if (i >= len)
            goto more;
        if (d[i] != ':')
            goto bad;
        i++;
        js_ws(d, len, &i);
        size_t vs = i;
        k = js_value(d, len, &i, 1);
        if (k == 0)
            goto more;
        if (k < 0)
            goto bad;
        size_t ve = i;
        const char *name = key.data ? key.data : "";
        if (key.len == strlen(c->tenant_col) && !memcmp(name, c->tenant_col, key.len)) {
            rc = js_scalar_text(d, vs, ve, &c->tenant_buf, "the tenant column", rn, err);
            have_tenant = true;
        } else if (key.len == strlen(c->key_col) && !memcmp(name, c->key_col, key.len)) {
            rc = js_scalar_text(d, vs, ve, &c->key_buf, "the split key column", rn, err);
            have_key = true;
        } else if (key.len == strlen(c->split_col) && !memcmp(name, c->split_col, key.len)) {
            row->split_present = true;
            row->split_at = vs;
            row->split_len = ve - vs;
        }
        (void)member_start;
        if (rc)
            goto out;
    }
    if (!have_tenant) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "JSONEachRow row %llu has no tenant column '%s'; the router needs it",
                           (unsigned long long)rn, c->tenant_col);
        goto out;
    }
    if (!have_key) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "JSONEachRow row %llu has no split key column '%s'; the router computes "
                           "the row's split from it",
                           (unsigned long long)rn, c->key_col);
        goto out;
    }
    row->have = true;
    row->start = pos;
    row->end = i;
    row->tenant = c->tenant_buf.data;
    row->tenant_len = c->tenant_buf.len;
    row->key = c->key_buf.data;
    row->key_len = c->key_buf.len;
    row->number = rn;
    c->rows = rn;
    *used = i;
    goto out;
more:
    if (eof)
        rc = ferry_err_set(err, FERRY_EINVAL, "JSONEachRow row %llu is cut short at the end of the data",
                           (unsigned long long)rn);
    else if (len - pos > c->max_row)
        rc = ferry_err_set(err, FERRY_EINVAL, "row %llu is longer than %zu bytes",
                           (unsigned long long)rn, c->max_row);
    goto out;
bad:
    rc = ferry_err_set(err, FERRY_EINVAL, "JSONEachRow row %llu: malformed JSON near byte %zu of the row",
                       (unsigned long long)rn, i - pos);
out:
    ferry_buf_free(&key);
    return rc;
}
