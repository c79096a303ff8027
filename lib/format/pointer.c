/* ClickHouse object-storage metadata ("pointer") files: parse and serialize versions 1..5.
 * Pure logic, no I/O. The reader is strict: anything ClickHouse itself would not write is
 * rejected with the line it was found on, because a pointer file ferry accepts is one it may
 * later copy to a server. */
#include "ferry/pointer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

int ferry_ch_escape(ferry_buf *out, const char *s, size_t n)
{
    int rc = ferry_buf_reserve(out, n);
    if (rc == FERRY_OK)
        out->data[out->len] = '\0'; /* reserve alone leaves it unterminated */
    for (size_t i = 0; rc == FERRY_OK && i < n; i++) {
        char esc = 0;
        switch (s[i]) {
        case '\b': esc = 'b'; break;
        case '\f': esc = 'f'; break;
        case '\n': esc = 'n'; break;
        case '\r': esc = 'r'; break;
        case '\t': esc = 't'; break;
        case '\0': esc = '0'; break;
        case '\\': esc = '\\'; break;
        case '\'': esc = '\''; break;
        default: break;
        }
        if (esc) {
            char pair[2] = {'\\', esc};
            rc = ferry_buf_append(out, pair, 2);
        } else {
            rc = ferry_buf_putc(out, s[i]);
        }
    }
    return rc;
}

int ferry_ch_unescape(ferry_buf *out, const char *s, size_t n, ferry_err *err)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\t' || c == '\n')
            return ferry_err_set(err, FERRY_EINVAL, "raw %s at byte %zu of an escaped string",
                                 c == '\t' ? "tab" : "newline", i + 1);
        if (c != '\\') {
            if (ferry_buf_putc(out, c))
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            continue;
        }
        if (i + 1 >= n)
            return ferry_err_set(err, FERRY_EINVAL, "lone backslash at the end of an escaped string");
        char e = s[++i], d;
        switch (e) {
        case 'b': d = '\b'; break;
        case 'f': d = '\f'; break;
        case 'n': d = '\n'; break;
        case 'r': d = '\r'; break;
        case 't': d = '\t'; break;
        case '0': d = '\0'; break;
        case 'a': d = '\a'; break;
        case 'v': d = '\v'; break;
        case '\\': d = '\\'; break;
        case '\'': d = '\''; break;
        case '"': d = '"'; break;
        case 'x': {
            int hi = i + 1 < n ? ferry_hex_digit(s[i + 1]) : -1;
            int lo = i + 2 < n ? ferry_hex_digit(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return ferry_err_set(err, FERRY_EINVAL,
                                     "bad \\x escape at byte %zu (expected two hex digits)", i);
            d = (char)(hi * 16 + lo);
            i += 2;
            break;
        }
        default:
            return ferry_err_set(err, FERRY_EINVAL, "unknown escape '\\%c' at byte %zu",
                                 (e >= 0x20 && e < 0x7f) ? e : '?', i);
        }
        if (ferry_buf_putc(out, d))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    return FERRY_OK;
}

/* std::filesystem::path(prefix) / suffix for POSIX paths, which is how ClickHouse rebuilds
 * relative keys (an absolute suffix replaces the prefix). An empty prefix yields suffix. */
static char *join_key(const char *prefix, const char *suffix)
{
    size_t pl = strlen(prefix), sl = strlen(suffix);
    if (pl == 0 || suffix[0] == '/')
        return strdup(suffix);
    bool sep = prefix[pl - 1] != '/';
    char *k = malloc(pl + sep + sl + 1);
    if (!k)
        return NULL;
    memcpy(k, prefix, pl);
    if (sep)
        k[pl] = '/';
    memcpy(k + pl + sep, suffix, sl + 1);
    return k;
}

uint64_t ferry_pointer_total_size(const ferry_pointer *p)
{
    uint64_t t = 0;
    for (size_t i = 0; i < p->n_objects; i++)
        t += p->objects[i].size;
    return t;
}

static int push_object(ferry_pointer *p, char *key_owned, uint64_t size)
{
    if (p->n_objects == p->cap_objects) {
        size_t cap = p->cap_objects ? p->cap_objects * 2 : 8;
        ferry_pointer_object *o = realloc(p->objects, cap * sizeof *o);
        if (!o)
            return FERRY_ENOMEM;
        p->objects = o;
        p->cap_objects = cap;
    }
    p->objects[p->n_objects].key = key_owned;
    p->objects[p->n_objects].size = size;
    p->n_objects++;
    return FERRY_OK;
}

int ferry_pointer_add_object(ferry_pointer *p, const char *key, uint64_t size, ferry_err *err)
{
    if (!key || !*key)
        return ferry_err_set(err, FERRY_EINVAL, "pointer object key is empty");
    /* Sizes are Int64 in ClickHouse; keep the total representable there too. */
    uint64_t total = ferry_pointer_total_size(p);
    if (size > (uint64_t)INT64_MAX || total > (uint64_t)INT64_MAX - size)
        return ferry_err_set(err, FERRY_EINVAL, "pointer total size overflows Int64");
    char *k = strdup(key);
    if (!k || push_object(p, k, size)) {
        free(k);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    return FERRY_OK;
}

void ferry_pointer_free(ferry_pointer *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_objects; i++)
        free(p->objects[i].key);
    free(p->objects);
    free(p->inline_data);
    *p = (ferry_pointer)FERRY_POINTER_INIT;
}

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct reader {
    const char *p, *end;
    long line;
    ferry_err *err;
} reader;

/* The next line without its '\n'; refuses a last line with no newline. */
static int next_line(reader *r, const char *what, const char **s, size_t *n)
{
    r->line++;
    if (r->p >= r->end)
        return ferry_err_set(r->err, FERRY_EINVAL, "line %ld: file ends where %s was expected",
                             r->line, what);
    const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
    if (!nl)
        return ferry_err_set(r->err, FERRY_EINVAL,
                             "line %ld: %s is not terminated by a newline (truncated file?)",
                             r->line, what);
    *s = r->p;
    *n = (size_t)(nl - r->p);
    r->p = nl + 1;
    return FERRY_OK;
}

/* Strict decimal: digits only (optionally one leading '-' when allow_minus), no spaces. */
static int parse_num(reader *r, const char *s, size_t n, const char *what, bool allow_minus,
                     int64_t max, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (allow_minus && n > 0 && s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i == n)
        return ferry_err_set(r->err, FERRY_EINVAL, "line %ld: %s is missing", r->line, what);
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return ferry_err_set(r->err, FERRY_EINVAL,
                                 "line %ld: %s is not a decimal number (found '%.*s')", r->line,
                                 what, (int)(n > 40 ? 40 : n), s);
        int d = s[i] - '0';
        if (v > (max - d) / 10)
            return ferry_err_set(r->err, FERRY_EINVAL, "line %ld: %s is out of range", r->line,
                                 what);
        v = v * 10 + d;
    }
    *out = neg ? -v : v;
    return FERRY_OK;
}

int ferry_pointer_parse(const char *text, size_t len, const char *key_prefix, ferry_pointer *out,
                        ferry_err *err)
{
    ferry_pointer p = FERRY_POINTER_INIT;
    ferry_buf key = FERRY_BUF_INIT;
    reader r = {text, text + len, 0, err};
    const char *s = NULL;
    size_t n = 0;
    int64_t v;
    int rc;
    if (!key_prefix)
        key_prefix = "";

    if ((rc = next_line(&r, "the format version", &s, &n)))
        goto out;
    if ((rc = parse_num(&r, s, n, "format version", false, INT32_MAX, &v)))
        goto out;
    if (v < FERRY_POINTER_V_MIN || v > FERRY_POINTER_V_MAX) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "line 1: unknown pointer format version %lld (ClickHouse reads 1 to 5)",
                           (long long)v);
        goto out;
    }
    p.version = (int)v;

    if ((rc = next_line(&r, "'<object count>\\t<total size>'", &s, &n)))
        goto out;
    const char *tab = memchr(s, '\t', n);
    if (!tab) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "line 2: expected '<object count>\\t<total size>', found no tab");
        goto out;
    }
    int64_t count, total;
    if ((rc = parse_num(&r, s, (size_t)(tab - s), "object count", false, UINT32_MAX, &count)) ||
        (rc = parse_num(&r, tab + 1, n - (size_t)(tab + 1 - s), "total size", false, INT64_MAX,
                        &total)))
        goto out;

    uint64_t sum = 0;
    for (int64_t i = 0; i < count; i++) {
        if ((rc = next_line(&r, "an object line '<size>\\t<key>'", &s, &n)))
            goto out;
        tab = memchr(s, '\t', n);
        if (!tab) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "line %ld: expected '<size>\\t<key>' (object %lld of %lld), found "
                               "no tab", r.line, (long long)i + 1, (long long)count);
            goto out;
        }
        int64_t size;
        if ((rc = parse_num(&r, s, (size_t)(tab - s), "object size", false, INT64_MAX, &size)))
            goto out;
        ferry_buf_reset(&key);
        if ((rc = ferry_ch_unescape(&key, tab + 1, n - (size_t)(tab + 1 - s), err))) {
            ferry_err_prefix(err, "line %ld: object key: ", r.line);
            goto out;
        }
        if (key.len == 0) {
            rc = ferry_err_set(err, FERRY_EINVAL, "line %ld: object key is empty", r.line);
            goto out;
        }
        if (memchr(key.data, '\0', key.len)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "line %ld: object key contains a NUL byte",
                               r.line);
            goto out;
        }
        char *full;
        if (p.version == FERRY_POINTER_V_ABSOLUTE_PATHS) {
            if (!ferry_starts_with(key.data, key_prefix)) {
                rc = ferry_err_set(err, FERRY_EINVAL,
                                   "line %ld: version 1 key does not start with the disk's key "
                                   "prefix '%s'", r.line, key_prefix);
                goto out;
            }
            full = join_key(key_prefix, key.data + strlen(key_prefix));
        } else if (p.version < FERRY_POINTER_V_FULL_OBJECT_KEY) {
            full = join_key(key_prefix, key.data);
        } else {
            full = strdup(key.data);
        }
        if (!full || push_object(&p, full, (uint64_t)size)) {
            free(full);
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        if ((uint64_t)size > (uint64_t)INT64_MAX - sum) {
            rc = ferry_err_set(err, FERRY_EINVAL, "line %ld: object sizes overflow Int64", r.line);
            goto out;
        }
        sum += (uint64_t)size;
    }
    if (sum != (uint64_t)total) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "line 2: total size %lld is not the sum of the object sizes (%llu)",
                           (long long)total, (unsigned long long)sum);
        goto out;
    }

    if ((rc = next_line(&r, "the reference count", &s, &n)) ||
        (rc = parse_num(&r, s, n, "reference count", true, INT32_MAX, &v)))
        goto out;
    p.ref_count = (int32_t)v;
    p.ref_count_at = (size_t)(s - text);
    p.ref_count_len = n;

    if (p.version >= FERRY_POINTER_V_READ_ONLY_FLAG) {
        if ((rc = next_line(&r, "the read-only flag", &s, &n)))
            goto out;
        if (n != 1 || (s[0] != '0' && s[0] != '1')) {
            rc = ferry_err_set(err, FERRY_EINVAL, "line %ld: read-only flag must be 0 or 1",
                               r.line);
            goto out;
        }
        p.read_only = s[0] == '1';
    }

    if (p.version >= FERRY_POINTER_V_INLINE_DATA) {
        if ((rc = next_line(&r, "the inline-data line (empty for parts in object storage)", &s,
                            &n)))
            goto out;
        ferry_buf_reset(&key);
        if ((rc = ferry_ch_unescape(&key, s, n, err))) {
            ferry_err_prefix(err, "line %ld: inline data: ", r.line);
            goto out;
        }
        if (key.len) {
            p.inline_len = key.len;
            p.inline_data = ferry_buf_detach(&key);
        }
    }

    if (r.p != r.end) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "line %ld: unexpected data after the end of a version %d pointer file",
                           r.line + 1, p.version);
        goto out;
    }
    *out = p;
    p = (ferry_pointer)FERRY_POINTER_INIT;
    rc = FERRY_OK;
out:
    ferry_pointer_free(&p);
    ferry_buf_free(&key);
    return rc;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* The text stored in the file for full key in the given version, or NULL (err set) when the key
 * cannot be expressed there. The result points into full. */
static const char *stored_key(const char *full, int version, const char *prefix, size_t idx,
                              ferry_err *err)
{
    if (version == FERRY_POINTER_V_FULL_OBJECT_KEY)
        return full;
    size_t pl = strlen(prefix);
    const char *rel = NULL;
    if (version == FERRY_POINTER_V_ABSOLUTE_PATHS) {
        if (ferry_starts_with(full, prefix)) {
            char *back = join_key(prefix, full + pl);
            bool same = back && strcmp(back, full) == 0;
            free(back);
            if (same)
                return full;
        }
    } else if (pl == 0) {
        rel = full;
    } else if (ferry_starts_with(full, prefix)) {
        rel = full + pl;
        if (prefix[pl - 1] != '/')
            rel = *rel == '/' ? rel + 1 : NULL;
    }
    if (rel && *rel && *rel != '/')
        return rel;
    ferry_err_set(err, FERRY_EINVAL,
                  "object %zu: key '%s' is not under the disk's key prefix '%s', so it cannot be "
                  "written in pointer format version %d (use version 5, which stores full keys)",
                  idx + 1, full, prefix, version);
    return NULL;
}

int ferry_pointer_serialize(const ferry_pointer *p, int version, const char *key_prefix,
                            ferry_buf *out, ferry_err *err)
{
    if (!key_prefix)
        key_prefix = "";
    if (version < FERRY_POINTER_V_MIN || version > FERRY_POINTER_V_MAX)
        return ferry_err_set(err, FERRY_EINVAL,
                             "pointer format version %d is not one ClickHouse reads (1 to 5)",
                             version);
    if (p->read_only && version < FERRY_POINTER_V_READ_ONLY_FLAG)
        return ferry_err_set(err, FERRY_EINVAL,
                             "a read-only flag cannot be written in pointer format version %d "
                             "(needs 3 or later)", version);
    if (p->inline_len && version < FERRY_POINTER_V_INLINE_DATA)
        return ferry_err_set(err, FERRY_EINVAL,
                             "inline data cannot be written in pointer format version %d (needs 4 "
                             "or later)", version);
    if (p->n_objects > UINT32_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "too many objects for one pointer file");
    uint64_t total = 0;
    for (size_t i = 0; i < p->n_objects; i++) {
        if (!p->objects[i].key || !*p->objects[i].key)
            return ferry_err_set(err, FERRY_EINVAL, "object %zu: empty key", i + 1);
        if (p->objects[i].size > (uint64_t)INT64_MAX - total)
            return ferry_err_set(err, FERRY_EINVAL, "object sizes overflow Int64");
        total += p->objects[i].size;
        if (!stored_key(p->objects[i].key, version, key_prefix, i, err))
            return FERRY_EINVAL;
    }

    size_t start = out->len;
    int rc = ferry_buf_printf(out, "%d\n%zu\t%llu\n", version, p->n_objects,
                              (unsigned long long)total);
    for (size_t i = 0; rc == FERRY_OK && i < p->n_objects; i++) {
        const char *k = stored_key(p->objects[i].key, version, key_prefix, i, err);
        rc = ferry_buf_printf(out, "%llu\t", (unsigned long long)p->objects[i].size);
        if (rc == FERRY_OK)
            rc = ferry_ch_escape(out, k, strlen(k));
        if (rc == FERRY_OK)
            rc = ferry_buf_putc(out, '\n');
    }
    if (rc == FERRY_OK)
        rc = ferry_buf_printf(out, "%d\n", (int)p->ref_count);
    if (rc == FERRY_OK && version >= FERRY_POINTER_V_READ_ONLY_FLAG)
        rc = ferry_buf_puts(out, p->read_only ? "1\n" : "0\n");
    if (rc == FERRY_OK && version >= FERRY_POINTER_V_INLINE_DATA) {
        rc = ferry_ch_escape(out, p->inline_data ? p->inline_data : "", p->inline_len);
        if (rc == FERRY_OK)
            rc = ferry_buf_putc(out, '\n');
    }
    if (rc) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    return FERRY_OK;
}
