/* Strict number parsing and small string helpers. */
#include "ferry/strutil.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ferry_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || !isdigit((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

bool ferry_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '-'))
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return false;
    *out = v;
    return true;
}

bool ferry_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* The decimal number s starts with (a digit first, no sign), *end after it. */
static bool leading_u64(const char *s, uint64_t *v, char **end)
{
    if (!s || !isdigit((unsigned char)*s))
        return false;
    errno = 0;
    unsigned long long n = strtoull(s, end, 10);
    *v = n;
    return errno == 0;
}

/* v * mult when it fits. */
static bool scaled(uint64_t v, uint64_t mult, uint64_t *out)
{
    if (mult > 1 && v > UINT64_MAX / mult)
        return false;
    *out = v * mult;
    return true;
}

bool ferry_parse_bytes(const char *s, uint64_t *out)
{
    uint64_t v;
    char *end;
    if (!leading_u64(s, &v, &end))
        return false;
    uint64_t mult = 1;
    if (*end) {
        char unit = (char)toupper((unsigned char)*end);
        const char *rest = end + 1;
        switch (unit) {
        case 'B': mult = 1; rest = end + 1; break;
        case 'K': mult = 1ULL << 10; break;
        case 'M': mult = 1ULL << 20; break;
        case 'G': mult = 1ULL << 30; break;
        case 'T': mult = 1ULL << 40; break;
        default: return false;
        }
        if (unit != 'B') {
            if (*rest == 'i' || *rest == 'I')
                rest++;
            if (*rest == 'B' || *rest == 'b')
                rest++;
        }
        if (*rest)
            return false;
    }
    return scaled(v, mult, out);
}

bool ferry_parse_duration(const char *s, uint64_t *seconds)
{
    uint64_t v;
    char *end;
    if (!leading_u64(s, &v, &end))
        return false;
    uint64_t mult;
    if (!*end)
        mult = 1;
    else if (end[1])
        return false;
    else {
        switch (*end) {
        case 's': mult = 1; break;
        case 'm': mult = 60; break;
        case 'h': mult = 3600; break;
        case 'd': mult = 86400; break;
        case 'w': mult = 7 * 86400; break;
        default: return false;
        }
    }
    return scaled(v, mult, seconds);
}

size_t ferry_split(char *line, char sep, char **fields, size_t max)
{
    size_t n = 0;
    char *p = line;
    for (;;) {
        if (n < max)
            fields[n] = p;
        n++;
        char *q = strchr(p, sep);
        if (!q)
            break;
        *q = '\0';
        p = q + 1;
    }
    return n;
}

void ferry_chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

char *ferry_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

bool ferry_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool ferry_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

char *ferry_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

const char *ferry_fmt_bytes(uint64_t bytes, char *out, size_t outsz)
{
    static const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1000.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(out, outsz, "%llu B", (unsigned long long)bytes);
    else
        snprintf(out, outsz, "%.1f %s", v, units[u]);
    return out;
}

bool ferry_list_has(const char *list, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == nl && !strncmp(p, name, nl))
            return true;
        p += len;
        if (*p == ',')
            p++;
    }
    return false;
}

size_t ferry_list_count(const char *list)
{
    size_t n = 0;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    return *list ? n + 1 : 0;
}

bool ferry_list_item(const char *list, size_t i, char *out, size_t outsz)
{
    const char *p = list;
    for (size_t k = 0; k < i; k++) {
        p = strchr(p, ',');
        if (!p)
            return false;
        p++;
    }
    if (!*list)
        return false;
    size_t len = strcspn(p, ",");
    while (len && isspace((unsigned char)*p)) {
        p++;
        len--;
    }
    while (len && isspace((unsigned char)p[len - 1]))
        len--;
    if (len >= outsz)
        return false;
    memcpy(out, p, len);
    out[len] = '\0';
    return true;
}

bool ferry_list_add(char *list, size_t size, const char *name)
{
    if (ferry_list_has(list, name))
        return true;
    size_t n = strlen(list);
    if (n + strlen(name) + 2 > size)
        return false;
    snprintf(list + n, size - n, "%s%s", n ? "," : "", name);
    return true;
}

void ferry_list_remove(char *list, const char *name)
{
    /* in place: the kept names are copied down over the removed ones */
    size_t nl = strlen(name), w = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (!(len == nl && !strncmp(p, name, nl))) {
            if (w)
                list[w++] = ',';
            memmove(list + w, p, len);
            w += len;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    list[w] = '\0';
}

bool ferry_parse_duration_ms(const char *s, uint64_t *ms)
{
    uint64_t v = 0;
    size_t n = strlen(s);
    if (n > 2 && !strcmp(s + n - 2, "ms")) {
        char buf[32];
        if (n - 2 >= sizeof buf)
            return false;
        memcpy(buf, s, n - 2);
        buf[n - 2] = '\0';
        if (!ferry_parse_u64(buf, &v))
            return false;
    } else {
        if (!ferry_parse_duration(s, &v) || v > UINT64_MAX / 1000)
            return false;
        v *= 1000;
    }
    *ms = v;
    return true;
}

int ferry_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool ferry_parse_hostport(const char *s, char *host, size_t hostsz, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    uint64_t p;
    if (!colon || colon == s || (size_t)(colon - s) >= hostsz ||
        !ferry_parse_u64(colon + 1, &p) || p > 65535)
        return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (uint16_t)p;
    return true;
}

bool ferry_parse_duration_ms32(const char *s, uint32_t *ms)
{
    uint64_t v = 0;
    if (!ferry_parse_duration_ms(s, &v) || v > UINT32_MAX)
        return false;
    *ms = (uint32_t)v;
    return true;
}

bool ferry_parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (!ferry_parse_u64(s, &v) || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}
