/* Row codecs for the router: find each row of an INSERT's data in JSONEachRow, TabSeparated
 * (with or without names), CSV (with or without names) or RowBinary, pull out its tenant and
 * split key, and write the row back with the split column set. Rows are copied byte for byte
 * apart from the split column, so values ferry does not understand pass through untouched. Pure.
 *
 * Every scanner works on a window of data that may end anywhere: when a row is not complete in
 * the window it reports "need more" (row->have false) without consuming anything, and the caller
 * appends more data and calls again. */
#include "router/codec_int.h"

#include "ferry/clickhouse.h"
#include "ferry/partition.h"
#include "ferry/router.h"
#include "ferry/strutil.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- formats ------------------------------------------------------------------------------- */

bool ferry_rt_format_parse(const char *name, enum ferry_rt_format *out)
{
    static const struct {
        const char *name;
        enum ferry_rt_format f;
    } names[] = {
        {"JSONEachRow", FERRY_RT_JSONEACHROW},  {"NDJSON", FERRY_RT_JSONEACHROW},
        {"JSONLines", FERRY_RT_JSONEACHROW},    {"TabSeparated", FERRY_RT_TSV},
        {"TSV", FERRY_RT_TSV},                  {"TabSeparatedWithNames", FERRY_RT_TSV_NAMES},
        {"TSVWithNames", FERRY_RT_TSV_NAMES},   {"CSV", FERRY_RT_CSV},
        {"CSVWithNames", FERRY_RT_CSV_NAMES},   {"RowBinary", FERRY_RT_ROWBINARY},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i].name)) {
            *out = names[i].f;
            return true;
        }
    return false;
}

const char *ferry_rt_format_forward_name(enum ferry_rt_format f)
{
    switch (f) {
    case FERRY_RT_JSONEACHROW:
        return "JSONEachRow";
    case FERRY_RT_TSV:
    case FERRY_RT_TSV_NAMES:
        return "TabSeparated";
    case FERRY_RT_CSV:
    case FERRY_RT_CSV_NAMES:
        return "CSV";
    case FERRY_RT_ROWBINARY:
        return "RowBinary";
    }
    return "?";
}

bool ferry_rt_format_needs_structure(enum ferry_rt_format f, bool has_column_list)
{
    if (f == FERRY_RT_ROWBINARY)
        return true; /* types, and the split column's type when it is appended */
    if (f == FERRY_RT_TSV || f == FERRY_RT_CSV)
        return !has_column_list;
    return false;
}

/* ---- DESCRIBE output ------------------------------------------------------------------------ */

void ferry_rt_schema_free(ferry_rt_schema *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->names[i]);
        free(s->types[i]);
    }
    free(s->names);
    free(s->types);
    memset(s, 0, sizeof *s);
}

int ferry_rt_schema_parse(const char *tsv, size_t len, ferry_rt_schema *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    char *text = malloc(len + 1);
    if (!text)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memcpy(text, tsv, len);
    text[len] = '\0';
    ferry_ch_rows rows = {0};
    int rc = ferry_ch_rows_parse(text, len, &rows, err); /* takes text over */
    if (rc)
        return rc;
    if (rows.n_rows && rows.n_cols < 3) {
        rc = ferry_err_set(err, FERRY_EINVAL, "DESCRIBE TABLE gave %zu columns, expected >= 3",
                           rows.n_cols);
        goto out;
    }
    out->names = calloc(rows.n_rows ? rows.n_rows : 1, sizeof *out->names);
    out->types = calloc(rows.n_rows ? rows.n_rows : 1, sizeof *out->types);
    if (!out->names || !out->types) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t r = 0; r < rows.n_rows; r++) {
        const char *dk = ferry_ch_rows_get(&rows, r, 2);
        if (!strcmp(dk, "MATERIALIZED") || !strcmp(dk, "ALIAS"))
            continue; /* not insertable */
        out->names[out->n] = strdup(ferry_ch_rows_get(&rows, r, 0));
        out->types[out->n] = strdup(ferry_ch_rows_get(&rows, r, 1));
        if (!out->names[out->n] || !out->types[out->n]) {
            free(out->names[out->n]);
            free(out->types[out->n]);
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        out->n++;
    }
out:
    ferry_ch_rows_free(&rows);
    if (rc)
        ferry_rt_schema_free(out);
    return rc;
}

/* ---- RowBinary types ------------------------------------------------------------------------ */


static void btype_free(btype *t)
{
    for (size_t i = 0; i < t->n_children; i++)
        btype_free(&t->children[i]);
    free(t->children);
    memset(t, 0, sizeof *t);
}

/* Parses a ClickHouse type name at *s into t. Returns false for types RowBinary cannot be
 * walked through by ferry (JSON, Dynamic, Variant, Object, AggregateFunction...). */
static bool btype_parse(const char **s, btype *t, int depth)
{
    memset(t, 0, sizeof *t);
    if (depth > 32)
        return false;
    const char *p = *s;
    while (*p == ' ')
        p++;
    const char *name = p;
    while (isalnum((unsigned char)*p) || *p == '_')
        p++;
    size_t nl = (size_t)(p - name);
    const char *args = NULL;
    const char *after = p;
    if (*p == '(') {
        args = p + 1;
        int lvl = 0;
        bool q = false;
        for (; *p; p++) {
            if (q) {
                if (*p == '\\' && p[1])
                    p++;
                else if (*p == '\'')
                    q = false;
                continue;
            }
            if (*p == '\'')
                q = true;
            else if (*p == '(')
                lvl++;
            else if (*p == ')' && --lvl == 0)
                break;
        }
        if (*p != ')')
            return false;
        after = p + 1;
    }
#define IS(n) (nl == strlen(n) && !strncmp(name, n, nl))
    static const struct {
        const char *n;
        size_t w;
        int sign;
    } fixed[] = {{"Int8", 1, 1},     {"Int16", 2, 1},    {"Int32", 4, 1},     {"Int64", 8, 1},
                 {"Int128", 16, 0},  {"Int256", 32, 0},  {"UInt8", 1, 2},     {"UInt16", 2, 2},
                 {"UInt32", 4, 2},   {"UInt64", 8, 2},   {"UInt128", 16, 0},  {"UInt256", 32, 0},
                 {"Float32", 4, 0},  {"Float64", 8, 0},  {"BFloat16", 2, 0},  {"Bool", 1, 0},
                 {"Date", 2, 0},     {"Date32", 4, 0},   {"DateTime", 4, 0},  {"DateTime64", 8, 0},
                 {"UUID", 16, 0},    {"IPv4", 4, 0},     {"IPv6", 16, 0},     {"Enum8", 1, 0},
                 {"Enum16", 2, 0},   {"Decimal32", 4, 0}, {"Decimal64", 8, 0},
                 {"Decimal128", 16, 0}, {"Decimal256", 32, 0}, {"Time", 4, 0}, {"Time64", 8, 0}};
    bool ok = true;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (IS(fixed[i].n)) {
            t->kind = BT_FIXED;
            t->width = fixed[i].w;
            t->int_sign = fixed[i].sign;
            goto done;
        }
    if (IS("Decimal") && args) {
        unsigned prec = (unsigned)strtoul(args, NULL, 10);
        t->kind = BT_FIXED;
        t->width = prec <= 9 ? 4 : prec <= 18 ? 8 : prec <= 38 ? 16 : 32;
    } else if (IS("String")) {
        t->kind = BT_STRING;
    } else if (IS("FixedString") && args) {
        t->kind = BT_FIXEDSTRING;
        t->width = (size_t)strtoul(args, NULL, 10);
        ok = t->width > 0;
    } else if ((IS("LowCardinality") || IS("Nullable") || IS("Array")) && args) {
        const char *a = args;
        btype child;
        if (!btype_parse(&a, &child, depth + 1))
            return false;
        if (IS("LowCardinality")) {
            *t = child; /* RowBinary writes the dictionary's type */
        } else {
            t->kind = IS("Nullable") ? BT_NULLABLE : BT_ARRAY;
            t->children = malloc(sizeof *t->children);
            if (!t->children) {
                btype_free(&child);
                return false;
            }
            t->children[0] = child;
            t->n_children = 1;
        }
    } else if ((IS("Map") || IS("Tuple")) && args) {
        t->kind = IS("Map") ? BT_MAP : BT_TUPLE;
        const char *a = args;
        for (;;) {
            while (*a == ' ')
                a++;
            /* A named tuple element: "name Type". */
            if (t->kind == BT_TUPLE) {
                const char *w = a;
                while (isalnum((unsigned char)*w) || *w == '_')
                    w++;
                if (*w == ' ' && w > a) {
                    const char *x = w;
                    while (*x == ' ')
                        x++;
                    if (isalpha((unsigned char)*x))
                        a = x;
                }
            }
            void *pn = realloc(t->children, (t->n_children + 1) * sizeof *t->children);
            if (!pn) {
                btype_free(t);
                return false;
            }
            t->children = pn;
            if (!btype_parse(&a, &t->children[t->n_children], depth + 1)) {
                btype_free(t);
                return false;
            }
            t->n_children++;
            while (*a == ' ')
                a++;
            if (*a == ',') {
                a++;
                continue;
            }
            break;
        }
        if (*a != ')' || (t->kind == BT_MAP && t->n_children != 2)) {
            btype_free(t);
            return false;
        }
    } else {
        return false;
    }
done:
#undef IS
    if (!ok)
        return false;
    *s = after;
    return true;
}

static bool parse_type_str(const char *s, btype *t)
{
    const char *p = s;
    if (!btype_parse(&p, t, 0))
        return false;
    while (*p == ' ')
        p++;
    if (*p) {
        btype_free(t);
        return false;
    }
    return true;
}

/* Reads a LEB128 varint; 0 need more, -1 malformed, else bytes used. */
static int varint(const unsigned char *p, size_t len, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < 10; i++) {
        if (i >= len)
            return 0;
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return (int)i + 1;
        }
    }
    return -1;
}

/* A length (a varint up to limit) at d[*p], *p moved past it; 0 need more, -1 malformed, 1 read. */
static int length(const unsigned char *d, size_t len, size_t *p, uint64_t *n, size_t limit)
{
    int k = varint(d + *p, len - *p, n);
    if (k <= 0)
        return k;
    if (*n > limit)
        return -1;
    *p += (size_t)k;
    return 1;
}

/* Skips one value of type t at data[*pos]; 0 need more, -1 malformed, 1 done. */
static int bt_skip(const btype *t, const unsigned char *d, size_t len, size_t *pos, size_t limit)
{
    size_t p = *pos;
    uint64_t n = 0;
    int k;
    switch (t->kind) {
    case BT_FIXED:
    case BT_FIXEDSTRING:
        if (len - p < t->width)
            return 0;
        p += t->width;
        break;
    case BT_STRING:
        if ((k = length(d, len, &p, &n, limit)) <= 0)
            return k;
        if (len - p < n)
            return 0;
        p += n;
        break;
    case BT_NULLABLE:
        if (p >= len)
            return 0;
        if (d[p] > 1)
            return -1;
        if (d[p++] == 0) {
            size_t q = p;
            k = bt_skip(&t->children[0], d, len, &q, limit);
            if (k <= 0)
                return k;
            p = q;
        }
        break;
    case BT_ARRAY:
    case BT_MAP:
        if ((k = length(d, len, &p, &n, limit)) <= 0)
            return k;
        for (uint64_t i = 0; i < n; i++)
            for (size_t c = 0; c < t->n_children; c++) {
                k = bt_skip(&t->children[c], d, len, &p, limit);
                if (k <= 0)
                    return k;
            }
        break;
    case BT_TUPLE:
        for (size_t c = 0; c < t->n_children; c++) {
            k = bt_skip(&t->children[c], d, len, &p, limit);
            if (k <= 0)
                return k;
        }
        break;
    }
    *pos = p;
    return 1;
}

/* ---- the codec ------------------------------------------------------------------------------ */


void ferry_rt_codec_free(ferry_rt_codec *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_cols; i++) {
        free(c->cols[i]);
        if (c->types)
            btype_free(&c->types[i]);
    }
    free(c->cols);
    free(c->types);
    if (c->have_split_type)
        btype_free(&c->split_type);
    free(c->tenant_col);
    free(c->split_col);
    free(c->key_col);
    ferry_buf_free(&c->tenant_buf);
    ferry_buf_free(&c->key_buf);
    free(c->fields);
    free(c);
}

static const char *schema_type(const ferry_rt_schema *s, const char *name)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (!strcmp(s->names[i], name))
            return s->types[i];
    return NULL;
}

/* Sets the data's columns and finds ours in them. */
static int set_columns(ferry_rt_codec *c, const char *const *cols, size_t n,
                       const ferry_rt_schema *schema, const char *where, ferry_err *err)
{
    c->cols = calloc(n ? n : 1, sizeof *c->cols);
    if (!c->cols)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    c->tenant_idx = c->key_idx = c->split_idx = -1;
    for (size_t i = 0; i < n; i++) {
        c->cols[i] = strdup(cols[i]);
        if (!c->cols[i])
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        c->n_cols++;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(cols[j], cols[i]))
                return ferry_err_set(err, FERRY_EINVAL, "%s names column '%s' twice", where,
                                     cols[i]);
        if (!strcmp(cols[i], c->tenant_col))
            c->tenant_idx = (long)i;
        if (!strcmp(cols[i], c->key_col))
            c->key_idx = (long)i;
        if (!strcmp(cols[i], c->split_col))
            c->split_idx = (long)i;
    }
    if (c->tenant_idx < 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s has no tenant column '%s'; the router needs it to route rows",
                             where, c->tenant_col);
    if (c->key_idx < 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s has no split key column '%s'; the router computes each row's "
                             "split from it",
                             where, c->key_col);
    c->split_appended = c->split_idx < 0;
    if (c->format == FERRY_RT_ROWBINARY) {
        c->types = calloc(n ? n : 1, sizeof *c->types);
        if (!c->types)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            const char *ty = schema_type(schema, cols[i]);
            if (!ty)
                return ferry_err_set(err, FERRY_EINVAL, "the table has no column '%s'", cols[i]);
            if (!parse_type_str(ty, &c->types[i]))
                return ferry_err_set(err, FERRY_EINVAL,
                                     "RowBinary through the router: column '%s' has type %s, "
                                     "which the router cannot read (use JSONEachRow, TSV or CSV "
                                     "for this table)",
                                     cols[i], ty);
        }
        const btype *kt = &c->types[c->key_idx], *tt = &c->types[c->tenant_idx];
        if (!(kt->kind == BT_STRING || kt->kind == BT_FIXEDSTRING || kt->int_sign))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "RowBinary through the router: the split key '%s' must be a "
                                 "String, FixedString or integer column",
                                 c->key_col);
        if (!(tt->kind == BT_STRING || tt->kind == BT_FIXEDSTRING || tt->int_sign))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "RowBinary through the router: the tenant column '%s' must be a "
                                 "String, FixedString or integer column",
                                 c->tenant_col);
        const char *st = schema_type(schema, c->split_col);
        if (!st || !parse_type_str(st, &c->split_type) || c->split_type.kind != BT_FIXED ||
            !c->split_type.int_sign) {
            if (st && c->split_type.kind == BT_FIXED)
                btype_free(&c->split_type);
            return ferry_err_set(err, FERRY_EINVAL,
                                 "RowBinary through the router: the split column '%s' must be an "
                                 "integer column of the table (it is %s)",
                                 c->split_col, st ? st : "missing");
        }
        c->have_split_type = true;
    }
    return FERRY_OK;
}

int ferry_rt_codec_new(const ferry_rt_codec_options *opt, ferry_rt_codec **out, ferry_err *err)
{
    *out = NULL;
    ferry_rt_codec *c = calloc(1, sizeof *c);
    if (!c)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    c->format = opt->format;
    c->max_row = opt->max_row_bytes ? opt->max_row_bytes : (64u << 20);
    c->tenant_col = strdup(opt->tenant_column);
    c->split_col = strdup(opt->split_column);
    c->key_col = strdup(opt->split_key);
    c->tenant_idx = c->key_idx = c->split_idx = -1;
    int rc = FERRY_OK;
    if (!c->tenant_col || !c->split_col || !c->key_col) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    bool header = opt->format == FERRY_RT_TSV_NAMES || opt->format == FERRY_RT_CSV_NAMES;
    c->list_given = opt->n_columns > 0 || opt->format != FERRY_RT_JSONEACHROW;
    if (opt->n_columns > 0 && opt->format != FERRY_RT_JSONEACHROW && !header) {
        rc = set_columns(c, opt->columns, opt->n_columns, opt->schema,
                         "the INSERT's column list", err);
    } else if (opt->n_columns > 0 && opt->format == FERRY_RT_JSONEACHROW) {
        /* JSON rows name their columns; the list only limits them. Check ours are in it. */
        rc = set_columns(c, opt->columns, opt->n_columns, NULL, "the INSERT's column list", err);
    } else if (header) {
        c->header_pending = true;
    } else if (opt->format != FERRY_RT_JSONEACHROW) {
        if (!opt->schema)
            rc = ferry_err_set(err, FERRY_EINVAL, "the table's structure is needed for %s",
                               ferry_rt_format_forward_name(opt->format));
        else
            rc = set_columns(c, (const char *const *)opt->schema->names, opt->schema->n,
                             opt->schema, "the table", err);
    }
    if (!rc && header && opt->format == FERRY_RT_ROWBINARY)
        rc = ferry_err_set(err, FERRY_EINVAL, "internal: RowBinary has no header");
    /* RowBinary with a header-less table order keeps the schema for the split type. */
out:
    if (rc) {
        ferry_rt_codec_free(c);
        return rc;
    }
    *out = c;
    return FERRY_OK;
}

int ferry_rt_codec_columns(const ferry_rt_codec *c, ferry_buf *out)
{
    if (!c->list_given)
        return FERRY_OK;
    int rc = ferry_buf_putc(out, '(');
    for (size_t i = 0; i < c->n_cols && !rc; i++) {
        if (i)
            rc = ferry_buf_puts(out, ", ");
        if (!rc)
            rc = ferry_sql_ident(c->cols[i], out);
    }
    if (!rc && c->split_appended) {
        if (c->n_cols)
            rc = ferry_buf_puts(out, ", ");
        if (!rc)
            rc = ferry_sql_ident(c->split_col, out);
    }
    if (!rc)
        rc = ferry_buf_putc(out, ')');
    return rc;
}

/* ---- text fields: TSV and CSV --------------------------------------------------------------- */


/* Finds the end of one TSV line from start; returns the index of '\n' or len (need more). */
static size_t tsv_line_end(const char *d, size_t start, size_t len)
{
    const char *nl = memchr(d + start, '\n', len - start);
    return nl ? (size_t)(nl - d) : len;
}

/* Splits a TSV line into fields (spans); returns the count (up to max; more counts as max+1). */
static size_t tsv_fields(const char *d, size_t start, size_t end, span *f, size_t max)
{
    size_t n = 0, s = start;
    for (size_t i = start;; i++) {
        if (i == end || d[i] == '\t') {
            if (n < max)
                f[n] = (span){s, i - s, false};
            n++;
            s = i + 1;
            if (i == end)
                break;
        }
    }
    return n > max ? max + 1 : n;
}

/* Scans one CSV record from start. Returns 1 with *end at the record's '\n' (or len at eof),
 * 0 need more, -1 malformed (a quote in the middle of an unquoted field is allowed, as in
 * ClickHouse; an unterminated quoted field at eof is not). Fills up to max fields. */
static int csv_record(const char *d, size_t start, size_t len, bool eof, span *f, size_t max,
                      size_t *nf, size_t *end)
{
    size_t n = 0, i = start;
    for (;;) {
        size_t fs = i;
        bool quoted = false;
        if (i < len && d[i] == '"') {
            quoted = true;
            i++;
            for (;;) {
                if (i >= len)
                    return eof ? -1 : 0;
                if (d[i] == '"') {
                    if (i + 1 >= len && !eof)
                        return 0;
                    if (i + 1 < len && d[i + 1] == '"') {
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                i++;
            }
            if (i < len && d[i] != ',' && d[i] != '\n' && d[i] != '\r')
                return -1;
        } else {
            while (i < len && d[i] != ',' && d[i] != '\n')
                i++;
        }
        size_t fe = i;
        if (i >= len && !eof)
            return 0;
        if (!quoted && fe > fs && d[fe - 1] == '\r' && (i >= len || d[i] == '\n'))
            fe--;
        if (n < max)
            f[n] = (span){quoted ? fs + 1 : fs, quoted ? fe - fs - 2 : fe - fs, quoted};
        n++;
        if (i < len && d[i] == '\r')
            i++;
        if (i >= len) {
            if (!eof)
                return 0;
            break;
        }
        if (d[i] == ',') {
            i++;
            continue;
        }
        if (d[i] == '\n')
            break;
        return -1;
    }
    *nf = n > max ? max + 1 : n;
    *end = i;
    return 1;
}

/* Decodes a field's text into b (TSV escapes, or CSV's doubled quotes). */
static int field_text(const ferry_rt_codec *c, const char *d, span f, ferry_buf *b, ferry_err *err)
{
    ferry_buf_reset(b);
    if (c->format == FERRY_RT_TSV || c->format == FERRY_RT_TSV_NAMES) {
        if (ferry_buf_append(b, d + f.off, f.len) || ferry_buf_reserve(b, 1))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        b->data[b->len] = '\0';
        size_t nl;
        bool is_null;
        int rc = ferry_tsv_unescape(b->data, b->len, &nl, &is_null, err);
        if (rc)
            return rc;
        b->len = nl;
        if (is_null)
            return ferry_err_set(err, FERRY_EINVAL, "is NULL (\\N)");
        return FERRY_OK;
    }
    for (size_t i = 0; i < f.len; i++) {
        char ch = d[f.off + i];
        if (f.quoted && ch == '"')
            i++; /* a doubled quote */
        if (ferry_buf_putc(b, ch))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    if (!f.quoted && f.len == 2 && !memcmp(d + f.off, "\\N", 2))
        return ferry_err_set(err, FERRY_EINVAL, "is NULL (\\N)");
    return FERRY_OK;
}

#define MAX_FIELDS 4096

static int text_next(ferry_rt_codec *c, const char *d, size_t len, bool eof, size_t *used,
                     ferry_rt_row *row, ferry_err *err)
{
    bool csv = c->format == FERRY_RT_CSV || c->format == FERRY_RT_CSV_NAMES;
    if (!c->fields && !(c->fields = malloc(MAX_FIELDS * sizeof *c->fields)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    span *f = c->fields;
    int rc = FERRY_OK;
    size_t pos = 0;
    for (;;) {
        /* Empty lines (and a trailing newline) are skipped. */
        while (pos < len && (d[pos] == '\n' || (d[pos] == '\r' && pos + 1 < len && d[pos + 1] == '\n')))
            pos += d[pos] == '\r' ? 2 : 1;
        if (pos >= len)
            break;
        size_t nf = 0, end = 0;
        if (csv) {
            int k = csv_record(d, pos, len, eof, f, MAX_FIELDS, &nf, &end);
            if (k < 0) {
                rc = ferry_err_set(err, FERRY_EINVAL, "CSV row %llu: malformed quoting",
                                   (unsigned long long)c->rows + 1);
                goto out;
            }
            if (k == 0)
                break;
        } else {
            end = tsv_line_end(d, pos, len);
            if (end == len && !eof)
                break;
            size_t e = end;
            if (e > pos && d[e - 1] == '\r')
                e--;
            nf = tsv_fields(d, pos, e, f, MAX_FIELDS);
        }
        if (c->header_pending) {
            if (nf > MAX_FIELDS) {
                rc = ferry_err_set(err, FERRY_EINVAL, "the header has more than %d columns",
                                   MAX_FIELDS);
                goto out;
            }
            char **names = calloc(nf ? nf : 1, sizeof *names);
            ferry_buf b = {0};
            rc = names ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            for (size_t i = 0; i < nf && !rc; i++) {
                rc = field_text(c, d, f[i], &b, err);
                if (!rc && !(names[i] = ferry_strndup(b.data ? b.data : "", b.len)))
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            }
            if (!rc)
                rc = set_columns(c, (const char *const *)names, nf, NULL, "the header row", err);
            for (size_t i = 0; names && i < nf; i++)
                free(names[i]);
            free(names);
            ferry_buf_free(&b);
            if (rc)
                goto out;
            c->header_pending = false;
            pos = end < len ? end + 1 : end;
            continue;
        }
        uint64_t rn = c->rows + 1;
        if (nf != c->n_cols) {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s row %llu has %zu field(s), expected %zu (%s)",
                               csv ? "CSV" : "TSV", (unsigned long long)rn, nf, c->n_cols,
                               nf > c->n_cols ? "too many" : "too few");
            goto out;
        }
        rc = field_text(c, d, f[c->tenant_idx], &c->tenant_buf, err);
        if (rc) {
            ferry_err_prefix(err, "row %llu: tenant column '%s': ", (unsigned long long)rn,
                             c->tenant_col);
            goto out;
        }
        rc = field_text(c, d, f[c->key_idx], &c->key_buf, err);
        if (rc) {
            ferry_err_prefix(err, "row %llu: split key column '%s': ", (unsigned long long)rn,
                             c->key_col);
            goto out;
        }
        size_t e = end;
        if (!csv && e > pos && d[e - 1] == '\r')
            e--;
        if (csv) {
            /* the record's content ends before "\r\n" / "\n" */
            e = end;
            if (e > pos && e <= len && d[e - 1] == '\r')
                e--;
        }
        row->have = true;
        row->start = pos;
        row->end = e;
        row->split_present = c->split_idx >= 0;
        if (row->split_present) {
            span s = f[c->split_idx];
            row->split_at = s.quoted ? s.off - 1 : s.off;
            row->split_len = s.quoted ? s.len + 2 : s.len;
        }
        row->tenant = c->tenant_buf.data ? c->tenant_buf.data : "";
        row->tenant_len = c->tenant_buf.len;
        row->key = c->key_buf.data ? c->key_buf.data : "";
        row->key_len = c->key_buf.len;
        row->number = rn;
        c->rows = rn;
        pos = end < len ? end + 1 : end;
        break;
    }
out:
    *used = pos;
    if (!rc && !row->have && !eof && len - pos > c->max_row)
        rc = ferry_err_set(err, FERRY_EINVAL, "row %llu is longer than %zu bytes",
                           (unsigned long long)c->rows + 1, c->max_row);
    return rc;
}

/* ---- RowBinary ------------------------------------------------------------------------------ */

/* The text of a RowBinary String / FixedString / integer value at d[s..e). */
static void bin_text(const btype *t, const unsigned char *d, size_t s, size_t e, ferry_buf *b)
{
    ferry_buf_reset(b);
    if (t->kind == BT_STRING) {
        uint64_t n = 0;
        int k = varint(d + s, e - s, &n);
        ferry_buf_append(b, d + s + k, (size_t)n);
        return;
    }
    if (t->kind == BT_FIXEDSTRING) {
        size_t n = t->width;
        while (n && d[s + n - 1] == 0)
            n--; /* trailing zero bytes are padding */
        ferry_buf_append(b, d + s, n);
        return;
    }
    uint64_t u = 0;
    for (size_t i = 0; i < t->width; i++)
        u |= (uint64_t)d[s + i] << (8 * i);
    if (t->int_sign == 1 && t->width < 8 && (u >> (8 * t->width - 1)) & 1)
        u |= ~0ULL << (8 * t->width); /* sign-extend */
    if (t->int_sign == 1)
        ferry_buf_printf(b, "%lld", (long long)u);
    else
        ferry_buf_printf(b, "%llu", (unsigned long long)u);
}

static int bin_next(ferry_rt_codec *c, const char *data, size_t len, bool eof, size_t *used,
                    ferry_rt_row *row, ferry_err *err)
{
    const unsigned char *d = (const unsigned char *)data;
    *used = 0;
    if (len == 0)
        return FERRY_OK;
    uint64_t rn = c->rows + 1;
    size_t p = 0, ts = 0, te = 0, ks = 0, ke = 0;
    row->split_present = c->split_idx >= 0;
    for (size_t i = 0; i < c->n_cols; i++) {
        size_t s = p;
        int k = bt_skip(&c->types[i], d, len, &p, c->max_row);
        if (k < 0)
            return ferry_err_set(err, FERRY_EINVAL,
                                 "RowBinary row %llu: column '%s': malformed value (a length "
                                 "beyond the row limit)",
                                 (unsigned long long)rn, c->cols[i]);
        if (k == 0) {
            if (eof)
                return ferry_err_set(err, FERRY_EINVAL,
                                     "RowBinary row %llu is cut short at the end of the data "
                                     "(column '%s')",
                                     (unsigned long long)rn, c->cols[i]);
            if (len > c->max_row)
                return ferry_err_set(err, FERRY_EINVAL, "row %llu is longer than %zu bytes",
                                     (unsigned long long)rn, c->max_row);
            return FERRY_OK;
        }
        if ((long)i == c->tenant_idx)
            ts = s, te = p;
        if ((long)i == c->key_idx)
            ks = s, ke = p;
        if ((long)i == c->split_idx) {
            row->split_at = s;
            row->split_len = p - s;
        }
    }
    bin_text(&c->types[c->tenant_idx], d, ts, te, &c->tenant_buf);
    bin_text(&c->types[c->key_idx], d, ks, ke, &c->key_buf);
    row->have = true;
    row->start = 0;
    row->end = p;
    row->tenant = c->tenant_buf.data ? c->tenant_buf.data : "";
    row->tenant_len = c->tenant_buf.len;
    row->key = c->key_buf.data ? c->key_buf.data : "";
    row->key_len = c->key_buf.len;
    row->number = rn;
    c->rows = rn;
    *used = p;
    return FERRY_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

int ferry_rt_codec_next(ferry_rt_codec *c, const char *data, size_t len, bool eof, size_t *used,
                        ferry_rt_row *row, ferry_err *err)
{
    memset(row, 0, sizeof *row);
    *used = 0;
    /* The row finders start from the row's first byte each time. An incomplete row is looked at
     * again only once its bytes have doubled (or reached max_row, where it is an error), so a
     * row arriving in many chunks costs time linear in its size, not quadratic (one 8 MB JSON
     * row in 16 KiB chunks took 2.6 s); a row may so be seen complete up to one row's worth
     * of bytes late, never later than the end of the data. */
    if (!eof && len < c->retry_len)
        return FERRY_OK;
    int rc;
    switch (c->format) {
    case FERRY_RT_JSONEACHROW:
        rc = codec_json_next(c, data, len, eof, used, row, err);
        break;
    case FERRY_RT_ROWBINARY:
        rc = bin_next(c, data, len, eof, used, row, err);
        break;
    default:
        rc = text_next(c, data, len, eof, used, row, err);
        break;
    }
    c->retry_len = 0;
    if (rc == FERRY_OK && !row->have && !eof) {
        size_t rest = len - *used, next = rest > 64 ? 2 * rest : rest + 64;
        c->retry_len = next < c->max_row + 1 ? next : c->max_row + 1;
    }
    return rc;
}

int ferry_rt_codec_emit(ferry_rt_codec *c, const char *data, const ferry_rt_row *row,
                        uint32_t split, ferry_buf *out, ferry_err *err)
{
    int rc = FERRY_OK;
    if (c->format == FERRY_RT_ROWBINARY) {
        size_t w = c->split_type.width;
        if (w < 8 && (uint64_t)split >> (8 * w - (c->split_type.int_sign == 1)))
            return ferry_err_set(err, FERRY_EINVAL,
                                 "split %u does not fit the split column '%s' (%zu byte(s))", split,
                                 c->split_col, w);
        unsigned char v[8] = {0};
        for (size_t i = 0; i < 4 && i < w; i++)
            v[i] = (unsigned char)(split >> (8 * i));
        if (row->split_present) {
            rc = ferry_buf_append(out, data + row->start, row->split_at - row->start);
            if (!rc)
                rc = ferry_buf_append(out, v, w);
            if (!rc)
                rc = ferry_buf_append(out, data + row->split_at + row->split_len,
                                      row->end - row->split_at - row->split_len);
        } else {
            rc = ferry_buf_append(out, data + row->start, row->end - row->start);
            if (!rc)
                rc = ferry_buf_append(out, v, w);
        }
        return rc ? ferry_err_set(err, FERRY_ENOMEM, "out of memory") : FERRY_OK;
    }
    char num[16];
    int nl = snprintf(num, sizeof num, "%u", split);
    if (row->split_present) {
        rc = ferry_buf_append(out, data + row->start, row->split_at - row->start);
        if (!rc)
            rc = ferry_buf_append(out, num, (size_t)nl);
        if (!rc)
            rc = ferry_buf_append(out, data + row->split_at + row->split_len,
                                  row->end - row->split_at - row->split_len);
    } else if (c->format == FERRY_RT_JSONEACHROW) {
        /* Insert the member before the closing brace. */
        size_t close = row->end - 1;
        size_t q = close;
        while (q > row->start + 1 && isspace((unsigned char)data[q - 1]))
            q--;
        bool empty = q == row->start + 1;
        rc = ferry_buf_append(out, data + row->start, q - row->start);
        if (!rc)
            rc = ferry_buf_printf(out, "%s\"", empty ? "" : ",");
        if (!rc) {
            for (const char *s = c->split_col; *s && !rc; s++)
                rc = ferry_buf_putc(out, *s); /* column names are letters, digits and _ */
        }
        if (!rc)
            rc = ferry_buf_printf(out, "\":%s}", num);
    } else {
        char sep = (c->format == FERRY_RT_CSV || c->format == FERRY_RT_CSV_NAMES) ? ',' : '\t';
        rc = ferry_buf_append(out, data + row->start, row->end - row->start);
        if (!rc)
            rc = ferry_buf_putc(out, sep);
        if (!rc)
            rc = ferry_buf_append(out, num, (size_t)nl);
    }
    if (!rc)
        rc = ferry_buf_putc(out, '\n');
    return rc ? ferry_err_set(err, FERRY_ENOMEM, "out of memory") : FERRY_OK;
}
