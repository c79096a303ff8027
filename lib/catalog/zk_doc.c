/* The ZooKeeper backend's tenant documents: the text format that holds many slice (or route)
 * records of one tenant in one znode, and the edits a commit makes to it (docs/catalog.md,
 * "Tenant documents"). Pure code, no ZooKeeper: tests/unit/test_zk_doc.c checks it alone.
 *
 *   ferry-tenant-doc 1\n
 *   SPLIT VERSION LENGTH\n     one line per entry, splits strictly increasing
 *   <LENGTH bytes: the record's JSON document, as the catalog layer gave it>\n
 *
 * Length-prefixed rather than JSON of JSON: the entries are stored byte for byte as the catalog
 * encoded them (both backends keep identical documents), and taking a document apart is a few
 * number parses per entry instead of a JSON parse of every byte (a scan of a million slices reads
 * about 100 MB of them). */
#include "catalog/zk_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZDOC_HEADER "ferry-tenant-doc 1\n"

void zdoc_free(zdoc *d)
{
    free(d->v);
    memset(d, 0, sizeof *d);
}

/* A decimal number of at most max digits from *p up to the byte stop; false when malformed
 * (empty, a leading zero before other digits, a non-digit, too long). */
static bool num(const char **p, const char *end, char stop, int max, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    int digits = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (++digits > max)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (!digits || s >= end || *s != stop || (digits > 1 && **p == '0'))
        return false;
    *p = s + 1;
    *out = v;
    return true;
}

int zdoc_decode(const char *text, size_t len, zdoc *d)
{
    memset(d, 0, sizeof *d);
    const char *p = text, *end = text + len;
    size_t hl = strlen(ZDOC_HEADER);
    if (len < hl || memcmp(text, ZDOC_HEADER, hl))
        return -1;
    p += hl;
    while (p < end) {
        uint64_t split, version, n;
        if (!num(&p, end, ' ', 10, &split) || split > UINT32_MAX ||
            !num(&p, end, ' ', 18, &version) || !num(&p, end, '\n', 9, &n) ||
            n > (size_t)(end - p) || (size_t)(end - p) - n < 1 || p[n] != '\n')
            goto bad;
        if (d->n && d->v[d->n - 1].split >= split)
            goto bad; /* strictly increasing: one entry per split, found by bisection */
        if (d->n == d->cap) {
            size_t cap = d->cap ? d->cap * 2 : 16;
            zdoc_entry *v = realloc(d->v, cap * sizeof *v);
            if (!v)
                goto bad;
            d->v = v;
            d->cap = cap;
        }
        d->v[d->n++] = (zdoc_entry){(uint32_t)split, (int64_t)version, p, (size_t)n};
        p += n + 1;
    }
    return 0;
bad:
    zdoc_free(d);
    return -1;
}

int zdoc_spans(char *text, size_t len, const char *mid, size_t mid_len, cat_flat *out)
{
    const char *p = text, *end = text + len;
    size_t hl = strlen(ZDOC_HEADER);
    uint64_t prev = 0;
    bool first = true;
    if (len < hl || memcmp(text, ZDOC_HEADER, hl))
        return -1;
    p += hl;
    while (p < end) {
        uint64_t split, version, n;
        const char *digits = p;
        if (!num(&p, end, ' ', 10, &split) || split > UINT32_MAX)
            return -1;
        uint32_t digits_len = (uint32_t)(p - 1 - digits);
        if (!num(&p, end, ' ', 18, &version) || !num(&p, end, '\n', 9, &n) ||
            n > (size_t)(end - p) || (size_t)(end - p) - n < 1 || p[n] != '\n')
            return -1;
        if (!first && prev >= split)
            return -1; /* strictly increasing, as zdoc_decode demands */
        first = false;
        prev = split;
        char *doc = text + (p - text);
        doc[n] = '\0';
        /* text has no NUL before len (its length is its strlen): doc's length is n */
        cat_span sp = {.mid = mid, .mid_len = (uint32_t)mid_len, .name = digits,
                       .name_len = digits_len, .doc = doc, .version = (int64_t)version,
                       .doc_len = (uint32_t)n};
        if (cat_flat_span(out, &sp))
            return FERRY_ENOMEM;
        p += n + 1;
    }
    return 0;
}

char *zdoc_encode(const zdoc *d, size_t *len)
{
    size_t cap = strlen(ZDOC_HEADER) + 1;
    for (size_t i = 0; i < d->n; i++)
        cap += d->v[i].doc_len + 48; /* 10 + 1 + 19 + 1 + 10 + 1 digits, spaces, newlines */
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t n = (size_t)snprintf(out, cap, "%s", ZDOC_HEADER);
    for (size_t i = 0; i < d->n; i++) {
        const zdoc_entry *e = &d->v[i];
        n += (size_t)snprintf(out + n, cap - n, "%u %lld %zu\n", e->split, (long long)e->version,
                              e->doc_len);
        memcpy(out + n, e->doc, e->doc_len);
        n += e->doc_len;
        out[n++] = '\n';
    }
    out[n] = '\0';
    *len = n;
    return out;
}

/* The index of split's entry, or of where it would go (*found false). */
static size_t locate(const zdoc *d, uint32_t split, bool *found)
{
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->v[mid].split < split)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < d->n && d->v[lo].split == split;
    return lo;
}

zdoc_entry *zdoc_find(zdoc *d, uint32_t split)
{
    bool found;
    size_t i = locate(d, split, &found);
    return found ? &d->v[i] : NULL;
}

int zdoc_put(zdoc *d, uint32_t split, const char *doc, size_t doc_len, int64_t version)
{
    bool found;
    size_t i = locate(d, split, &found);
    if (!found) {
        if (d->n == d->cap) {
            size_t cap = d->cap ? d->cap * 2 : 16;
            zdoc_entry *v = realloc(d->v, cap * sizeof *v);
            if (!v)
                return FERRY_ENOMEM;
            d->v = v;
            d->cap = cap;
        }
        memmove(&d->v[i + 1], &d->v[i], (d->n - i) * sizeof *d->v);
        d->n++;
    }
    d->v[i] = (zdoc_entry){split, version, doc, doc_len};
    return FERRY_OK;
}

void zdoc_remove(zdoc *d, uint32_t split)
{
    bool found;
    size_t i = locate(d, split, &found);
    if (!found)
        return;
    memmove(&d->v[i], &d->v[i + 1], (d->n - i - 1) * sizeof *d->v);
    d->n--;
}
