/* For unit tests: a route's or slice's shards (ferry_shard_set) set from printf-style text, as
 * the tests used to write the comma-separated lists; the test fails when the text is not a list.
 * Include after <cmocka.h>. */
#ifndef FERRY_TEST_SHARDS_TEXT_H
#define FERRY_TEST_SHARDS_TEXT_H

#include <stdarg.h>
#include <stdio.h>

#include "ferry/shard_set.h"

static inline void shards_printf(ferry_shard_set *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void shards_printf(ferry_shard_set *s, const char *fmt, ...)
{
    char text[FERRY_SHARDS_TEXT_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ferry_err err = {0};
    if (n < 0 || (size_t)n >= sizeof text || ferry_shard_set_parse(s, text, &err))
        fail_msg("not a shard list: '%s': %s", text, err.msg);
}

/* The list of text, by value. */
static inline ferry_shard_set shard_set_of(const char *text)
{
    ferry_shard_set s;
    shards_printf(&s, "%s", text);
    return s;
}

/* The list as text, for assertions: one of 4 buffers in turn (up to 4 in one expression). */
static inline const char *shards_text(const ferry_shard_set *s)
{
    static char buf[4][FERRY_SHARDS_TEXT_MAX];
    static unsigned k;
    return ferry_shard_set_str(s, buf[k++ % 4]);
}

#endif
