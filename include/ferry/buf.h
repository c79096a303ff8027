/* A growable byte buffer, always NUL-terminated so its data can be used as a C string.
 * The buffer owns data; ferry_buf_free releases it, ferry_buf_detach hands it to the caller. */
#ifndef FERRY_BUF_H
#define FERRY_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ferry_buf {
    char *data; /* NULL until the first append */
    size_t len;
    size_t cap;
} ferry_buf;

#define FERRY_BUF_INIT {NULL, 0, 0}

int ferry_buf_reserve(ferry_buf *b, size_t extra);           /* 0 or FERRY_ENOMEM */
int ferry_buf_append(ferry_buf *b, const void *p, size_t n); /* 0 or FERRY_ENOMEM */
int ferry_buf_puts(ferry_buf *b, const char *s);
int ferry_buf_putc(ferry_buf *b, char c);
int ferry_buf_printf(ferry_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ferry_buf_vprintf(ferry_buf *b, const char *fmt, va_list ap);
void ferry_buf_reset(ferry_buf *b);                          /* len = 0, keeps memory */
void ferry_buf_free(ferry_buf *b);
/* Returns the data (caller frees; never NULL: an empty buffer gives "") and empties b. */
char *ferry_buf_detach(ferry_buf *b);
/* "" when nothing was appended yet. */
const char *ferry_buf_cstr(const ferry_buf *b);

#endif
