/* The text of a slice pack (docs/catalog.md, "Slice packs"): a tenant's slice records and routes
 * joined by key, as ferry_catalog_scan_slices gives them, one line per slice key in the join's
 * order (the split names as text):
 *
 *   SPLIT \t VERSION \t BYTES \t ROWS \t PLACEMENT \t ROUTE_VERSION \t SHARDS \t TENANT \n
 *
 * VERSION -1: no slice record (BYTES and ROWS 0, PLACEMENT empty); ROUTE_VERSION -1: no route
 * (SHARDS empty); both -1 never. TENANT empty when the records name the tenant of their path.
 * Pure: building and taking apart the text, no storage (the SQLite backend keeps the packs in
 * lib/catalog/slice_pack.c).
 *
 * Invariant: every row cat_pack_row writes, cat_unpack_rows gives back field for field; a row it
 * could not give back (text with a control character, an empty tenant, a number past INT64_MAX)
 * is refused (b->refused), never written. */
#include "catalog/catalog_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building a pack ---------------------------------------------------------------------------- */

static bool packable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20)
            return false;
    return true;
}

int cat_pack_row(const ferry_slice_row *row, void *arg, ferry_err *err)
{
    cat_pack_buf *b = arg;
    const char *placement = row->version >= 0 ? row->placement : "";
    const char *shards = row->route_version >= 0 ? row->shards : "";
    const char *tenant = strcmp(row->tenant, b->tenant) ? row->tenant : "";
    /* what the reader would not take back (cat_unpack_rows): refused, left to the records */
    if (!*row->tenant || !placement || !shards || !packable(placement) || !packable(shards) ||
        !packable(tenant) || (row->version < 0 && row->route_version < 0) ||
        (row->version >= 0 && (row->bytes > INT64_MAX || row->rows > INT64_MAX))) {
        b->refused = true;
        return FERRY_OK;
    }
    size_t need = strlen(placement) + strlen(shards) + strlen(tenant) + 6 * 21 + 1;
    if (b->cap - b->len < need) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc - b->len < need)
            nc *= 2;
        char *q = realloc(b->s, nc);
        if (!q)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        b->s = q;
        b->cap = nc;
    }
    int w = snprintf(b->s + b->len, b->cap - b->len,
                     "%" PRIu32 "\t%" PRId64 "\t%" PRIu64 "\t%" PRIu64 "\t%s\t%" PRId64 "\t%s\t%s\n",
                     row->split, row->version, row->version >= 0 ? row->bytes : 0,
                     row->version >= 0 ? row->rows : 0, placement, row->route_version, shards,
                     tenant);
    assert(w > 0 && (size_t)w < b->cap - b->len);
    b->len += (size_t)w;
    return FERRY_OK;
}

/* ---- taking a pack apart ------------------------------------------------------------------------ */

/* A number at *p up to the tab (an optional '-' only for -1), *p moved past the tab. */
static bool take_num(const char **p, const char *end, bool may_be_minus_one, int64_t max,
                     int64_t *out)
{
    const char *q = *p;
    if (may_be_minus_one && end - q >= 3 && q[0] == '-' && q[1] == '1' && q[2] == '\t') {
        *out = -1;
        *p = q + 3;
        return true;
    }
    if (q == end || *q < '0' || *q > '9')
        return false;
    int64_t x = 0;
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        if (x > (max - (*q - '0')) / 10)
            return false;
        x = x * 10 + (*q - '0');
    }
    if (q == end || *q != '\t')
        return false;
    *out = x;
    *p = q + 1;
    return true;
}

/* The text at *p up to the tab or, when last, the newline, into dst (size bytes, NUL-ended). */
static bool take_text(const char **p, const char *end, bool last, char *dst, size_t size)
{
    const char *q = *p;
    char stop = last ? '\n' : '\t';
    const char *e = memchr(q, stop, (size_t)(end - q));
    if (!e || (size_t)(e - q) >= size || memchr(q, last ? '\t' : '\n', (size_t)(e - q)))
        return false;
    memcpy(dst, q, (size_t)(e - q));
    dst[e - q] = '\0';
    *p = e + 1;
    return true;
}

int cat_unpack_rows(const char *key, const char *p, size_t len, cat_unpack *u,
                    ferry_slice_row_fn fn, void *arg, const char *rebuild, ferry_err *err)
{
    const char *end = p + len;
    for (size_t line = 1; p < end; line++) {
        int64_t split, version, bytes, rows, route_version;
        if (!take_num(&p, end, false, UINT32_MAX, &split) ||
            !take_num(&p, end, true, INT64_MAX, &version) ||
            !take_num(&p, end, false, INT64_MAX, &bytes) ||
            !take_num(&p, end, false, INT64_MAX, &rows) ||
            !take_text(&p, end, false, u->placement, sizeof u->placement) ||
            !take_num(&p, end, true, INT64_MAX, &route_version) ||
            !take_text(&p, end, false, u->shards, sizeof u->shards) ||
            !take_text(&p, end, true, u->tenant, sizeof u->tenant) ||
            (version < 0 && route_version < 0))
            return ferry_err_set(err, FERRY_EIO,
                                 "catalog: the slice pack of tenant %s is damaged at line %zu"
                                 " (%s)", key, line, rebuild);
        ferry_slice_row row = {
            .tenant = u->tenant[0] ? u->tenant : key,
            .split = (uint32_t)split,
            .placement = version >= 0 ? u->placement : NULL,
            .bytes = (uint64_t)bytes,
            .rows = (uint64_t)rows,
            .version = version,
            .shards = route_version >= 0 ? u->shards : NULL,
            .route_version = route_version,
        };
        int rc = fn(&row, arg, err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}
