/* Lists of shard names as arrays (include/ferry/shard_set.h): parsed from and formatted to the
 * comma-separated text the catalog stores. */
#include "ferry/shard_set.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

void ferry_shard_set_clear(ferry_shard_set *s)
{
    s->n = 0;
}

/* FERRY_EINVAL for the list text (cut short when long), why it is not one; *s left empty. */
static int bad(ferry_shard_set *s, ferry_err *err, const char *text, size_t len, const char *why)
{
    ferry_shard_set_clear(s);
    return ferry_err_set(err, FERRY_EINVAL, "shard list '%.*s%s': %s", (int)(len > 200 ? 200 : len),
                         text, len > 200 ? "..." : "", why);
}

/* The next item of text[0..len) from *at, its blanks trimmed when trim (the stored reading). */
static bool next_item(const char *text, size_t len, size_t *at, bool trim, const char **item,
                      size_t *n)
{
    if (*at >= len)
        return false;
    const char *p = text + *at;
    const char *comma = memchr(p, ',', len - *at);
    size_t k = comma ? (size_t)(comma - p) : len - *at;
    *at += k + 1;
    while (trim && k && isspace((unsigned char)p[0])) {
        p++;
        k--;
    }
    while (trim && k && isspace((unsigned char)p[k - 1]))
        k--;
    *item = p;
    *n = k;
    return true;
}

bool ferry_shard_text_next(const char *text, size_t len, size_t *at, const char **item,
                           size_t *n)
{
    return next_item(text, len, at, true, item, n);
}

/* The parse of both: stored, each item trimmed of blanks and the empty ones skipped. */
static int parse(ferry_shard_set *s, const char *text, size_t len, bool stored, ferry_err *err)
{
    char why[256] = "";
    ferry_shard_set_clear(s);
    size_t at = 0, item = 0, n;
    const char *p;
    while (!why[0] && next_item(text, len, &at, stored, &p, &n)) {
        char name[FERRY_NAME_MAX];
        item++;
        if (stored && n == 0)
            continue;
        if (n == 0)
            snprintf(why, sizeof why, "item %zu is empty", item);
        else if (n >= FERRY_NAME_MAX)
            snprintf(why, sizeof why, "item %zu is longer than %d bytes", item, FERRY_NAME_MAX - 1);
        else if (s->n == FERRY_SHARDS_MAX)
            snprintf(why, sizeof why, "more than %d names, the most a route or placement holds",
                     FERRY_SHARDS_MAX);
        else {
            memcpy(name, p, n);
            name[n] = '\0';
            if (!ferry_name_ok(name))
                snprintf(why, sizeof why, "item %zu is not a valid name (%s)", item,
                         FERRY_NAME_RULE);
            else if (ferry_shard_set_has(s, name))
                snprintf(why, sizeof why, "item %zu (%s) is listed twice", item, name);
            else
                memcpy(s->name[s->n++], name, n + 1);
        }
    }
    if (!why[0] && !stored && len && text[len - 1] == ',') /* "a,": an empty last item */
        snprintf(why, sizeof why, "item %zu is empty", item + 1);
    if (why[0])
        return bad(s, err, text, len, why);
    assert(s->n <= FERRY_SHARDS_MAX);
    return FERRY_OK;
}

int ferry_shard_set_parse_n(ferry_shard_set *s, const char *text, size_t len, ferry_err *err)
{
    return parse(s, text, len, false, err);
}

int ferry_shard_set_parse_stored(ferry_shard_set *s, const char *text, size_t len,
                                 ferry_err *err)
{
    return parse(s, text, len, true, err);
}

int ferry_shard_set_parse(ferry_shard_set *s, const char *text, ferry_err *err)
{
    return ferry_shard_set_parse_n(s, text, text ? strlen(text) : 0, err);
}

size_t ferry_shard_set_format(const ferry_shard_set *s, char *out, size_t size)
{
    assert(size > 0 && s->n <= FERRY_SHARDS_MAX);
    size_t len = 0;
    for (uint32_t i = 0; i < s->n; i++)
        for (const char *c = i ? "," : "", *p = s->name[i]; *c || *p; len++) {
            char ch = *c ? *c++ : *p++;
            if (len < size - 1)
                out[len] = ch;
        }
    out[len < size ? len : size - 1] = '\0';
    return len;
}

const char *ferry_shard_set_str(const ferry_shard_set *s, char out[FERRY_SHARDS_TEXT_MAX])
{
    size_t n = ferry_shard_set_format(s, out, FERRY_SHARDS_TEXT_MAX);
    assert(n < FERRY_SHARDS_TEXT_MAX);
    (void)n;
    return out;
}

const char *ferry_shard_set_at(const ferry_shard_set *s, size_t i)
{
    assert(i < s->n);
    return s->name[i];
}

int ferry_shard_set_find(const ferry_shard_set *s, const char *name)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (!strcmp(s->name[i], name))
            return (int)i;
    return -1;
}

bool ferry_shard_set_has(const ferry_shard_set *s, const char *name)
{
    return ferry_shard_set_find(s, name) >= 0;
}

int ferry_shard_set_add(ferry_shard_set *s, const char *name, ferry_err *err)
{
    if (!ferry_name_ok(name))
        return ferry_err_set(err, FERRY_EINVAL, "'%.*s%s' is not a valid shard name (%s)", 200,
                             name, strlen(name) > 200 ? "..." : "", FERRY_NAME_RULE);
    if (ferry_shard_set_has(s, name))
        return FERRY_OK;
    if (s->n == FERRY_SHARDS_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "cannot add shard %s: the list holds %d names, "
                             "the most a route or placement holds", name, FERRY_SHARDS_MAX);
    snprintf(s->name[s->n++], FERRY_NAME_MAX, "%s", name);
    return FERRY_OK;
}

bool ferry_shard_set_remove(ferry_shard_set *s, const char *name)
{
    int i = ferry_shard_set_find(s, name);
    if (i < 0)
        return false;
    memmove(s->name[i], s->name[i + 1], (s->n - (size_t)i - 1) * sizeof s->name[0]);
    s->n--;
    return true;
}

bool ferry_shard_set_equal(const ferry_shard_set *a, const ferry_shard_set *b)
{
    if (a->n != b->n)
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (strcmp(a->name[i], b->name[i]))
            return false;
    return true;
}

bool ferry_shard_set_same(const ferry_shard_set *a, const ferry_shard_set *b)
{
    /* no name is in a list twice, so equal counts and a in b means the same names */
    if (a->n != b->n)
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (!ferry_shard_set_has(b, a->name[i]))
            return false;
    return true;
}
