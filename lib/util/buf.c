/* Growable byte buffer. */
#include "ferry/buf.h"
#include "ferry/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ferry_buf_reserve(ferry_buf *b, size_t extra)
{
    if (extra > ((size_t)-1) / 2 - b->len)
        return FERRY_ENOMEM;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return FERRY_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return FERRY_ENOMEM;
    b->data = p;
    b->cap = cap;
    b->data[b->len] = '\0';
    return FERRY_OK;
}

int ferry_buf_append(ferry_buf *b, const void *p, size_t n)
{
    if (ferry_buf_reserve(b, n))
        return FERRY_ENOMEM;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return FERRY_OK;
}

int ferry_buf_puts(ferry_buf *b, const char *s) { return ferry_buf_append(b, s, strlen(s)); }

int ferry_buf_putc(ferry_buf *b, char c) { return ferry_buf_append(b, &c, 1); }

int ferry_buf_vprintf(ferry_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return FERRY_EINTERNAL;
    if (ferry_buf_reserve(b, (size_t)n))
        return FERRY_ENOMEM;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return FERRY_OK;
}

int ferry_buf_printf(ferry_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = ferry_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void ferry_buf_reset(ferry_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void ferry_buf_free(ferry_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *ferry_buf_detach(ferry_buf *b)
{
    char *p = b->data ? b->data : strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

const char *ferry_buf_cstr(const ferry_buf *b) { return b->data ? b->data : ""; }
