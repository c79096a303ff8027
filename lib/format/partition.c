/* Partition literal parsing and printing for the managed table layouts. */
#include "ferry/partition.h"
#include "ferry/strutil.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int ferry_layout_parse(const char *name, enum ferry_layout *out, ferry_err *err)
{
    if (!strcmp(name, "shared"))
        *out = FERRY_LAYOUT_SHARED;
    else if (!strcmp(name, "per_tenant"))
        *out = FERRY_LAYOUT_PER_TENANT;
    else
        return ferry_err_set(err, FERRY_EINVAL, "unknown table layout '%s' (expected shared or "
                             "per_tenant)", name);
    return FERRY_OK;
}

const char *ferry_layout_name(enum ferry_layout layout)
{
    return layout == FERRY_LAYOUT_SHARED ? "shared" : "per_tenant";
}

int ferry_partition_literal_split(const char *literal, char *storage, char **fields, int *quoted,
                                  int max, ferry_err *err)
{
    const char *p = literal;
    char *w = storage;
    int n = 0;
    while (isspace((unsigned char)*p))
        p++;
    int tuple = *p == '(';
    if (tuple)
        p++;
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (tuple && *p == ')' && n == 0) { /* "()" = tuple(): no elements */
            p++;
            break;
        }
        if (n == max) {
            ferry_err_set(err, FERRY_EINVAL, "partition %s has more than %d elements", literal,
                          max);
            return -1;
        }
        fields[n] = w;
        quoted[n] = 0;
        if (*p == '\'') {
            quoted[n] = 1;
            p++;
            while (*p && *p != '\'') {
                if (*p == '\\' && p[1]) {
                    p++;
                    switch (*p) {
                    case 'n': *w++ = '\n'; break;
                    case 't': *w++ = '\t'; break;
                    case 'r': *w++ = '\r'; break;
                    case '0': *w++ = '\0'; break;
                    default: *w++ = *p;
                    }
                    p++;
                } else {
                    *w++ = *p++;
                }
            }
            if (*p != '\'') {
                ferry_err_set(err, FERRY_EINVAL, "partition %s: unterminated string", literal);
                return -1;
            }
            p++;
        } else {
            const char *start = p;
            while (*p && *p != ',' && *p != ')' && !isspace((unsigned char)*p))
                *w++ = *p++;
            if (p == start) {
                ferry_err_set(err, FERRY_EINVAL, "partition %s: empty element", literal);
                return -1;
            }
        }
        *w++ = '\0';
        n++;
        while (isspace((unsigned char)*p))
            p++;
        if (!tuple)
            break;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == ')') {
            p++;
            break;
        }
        ferry_err_set(err, FERRY_EINVAL, "partition %s: expected ',' or ')'", literal);
        return -1;
    }
    while (isspace((unsigned char)*p))
        p++;
    if (*p) {
        ferry_err_set(err, FERRY_EINVAL, "partition %s: unexpected text after the value",
                      literal);
        return -1;
    }
    return n;
}

static int parse_u32(const char *literal, const char *what, const char *s, uint32_t *out,
                     ferry_err *err)
{
    uint64_t v;
    if (!ferry_parse_u64(s, &v) || v > UINT32_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "partition %s: %s '%s' is not an unsigned "
                             "integer", literal, what, s);
    *out = (uint32_t)v;
    return FERRY_OK;
}

int ferry_partition_parse(enum ferry_layout layout, const char *literal, ferry_partition_key *out,
                          ferry_err *err)
{
    char storage[1024];
    char *f[4];
    int q[4];
    memset(out, 0, sizeof *out);
    if (strlen(literal) >= sizeof storage)
        return ferry_err_set(err, FERRY_EINVAL, "partition literal too long");
    int n = ferry_partition_literal_split(literal, storage, f, q, 4, err);
    if (n < 0)
        return FERRY_EINVAL;
    int want = layout == FERRY_LAYOUT_SHARED ? 3 : 2;
    if (n != want)
        return ferry_err_set(err, FERRY_EINVAL, "partition %s has %d elements; the %s layout "
                             "expects %s", literal, n, ferry_layout_name(layout),
                             layout == FERRY_LAYOUT_SHARED ? "(tenant, day, split)"
                                                           : "(day, split)");
    int i = 0;
    if (layout == FERRY_LAYOUT_SHARED) {
        if (strlen(f[0]) >= sizeof out->tenant || !f[0][0])
            return ferry_err_set(err, FERRY_EINVAL, "partition %s: bad tenant", literal);
        strcpy(out->tenant, f[0]);
        out->tenant_is_string = q[0];
        i = 1;
    }
    if (q[i] || q[i + 1])
        return ferry_err_set(err, FERRY_EINVAL, "partition %s: day and split must be integers",
                             literal);
    int rc = parse_u32(literal, "day", f[i], &out->day, err);
    if (!rc)
        rc = parse_u32(literal, "split", f[i + 1], &out->split, err);
    return rc;
}

int ferry_sql_quote(const char *s, ferry_buf *out)
{
    int rc = ferry_buf_putc(out, '\'');
    for (; *s && !rc; s++) {
        if (*s == '\'' || *s == '\\')
            rc = ferry_buf_putc(out, '\\');
        if (!rc)
            rc = ferry_buf_putc(out, *s);
    }
    return rc ? rc : ferry_buf_putc(out, '\'');
}

int ferry_sql_ident(const char *s, ferry_buf *out)
{
    int rc = ferry_buf_putc(out, '`');
    for (; *s && !rc; s++) {
        if (*s == '`' || *s == '\\')
            rc = ferry_buf_putc(out, '\\');
        if (!rc)
            rc = ferry_buf_putc(out, *s);
    }
    return rc ? rc : ferry_buf_putc(out, '`');
}

int ferry_sql_db_table(const char *db, const char *table, ferry_buf *out)
{
    int rc = ferry_sql_ident(db, out);
    if (!rc)
        rc = ferry_buf_putc(out, '.');
    return rc ? rc : ferry_sql_ident(table, out);
}

int ferry_partition_sql(enum ferry_layout layout, const ferry_partition_key *key, ferry_buf *out)
{
    int rc = ferry_buf_putc(out, '(');
    if (!rc && layout == FERRY_LAYOUT_SHARED) {
        rc = key->tenant_is_string ? ferry_sql_quote(key->tenant, out)
                                   : ferry_buf_puts(out, key->tenant);
        if (!rc)
            rc = ferry_buf_puts(out, ", ");
    }
    if (!rc)
        rc = ferry_buf_printf(out, "%u, %u)", key->day, key->split);
    return rc;
}
