/* The TabSeparated format as ClickHouse writes it: field unescaping (in place), escaping, a
 * streaming row reader that accepts chunks split anywhere, whole-result parsing into rows, and
 * TabSeparatedWithNames turned into JSON lines. Pure: no I/O. */
#include "ferry/clickhouse.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

int ferry_tsv_unescape(char *s, size_t len, size_t *out_len, bool *is_null, ferry_err *err)
{
    *is_null = false;
    if (len == 2 && s[0] == '\\' && s[1] == 'N') {
        *is_null = true;
        s[0] = '\0';
        *out_len = 0;
        return FERRY_OK;
    }
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c != '\\') {
            s[w++] = c;
            continue;
        }
        if (i + 1 >= len) {
            s[w] = '\0';
            *out_len = w;
            return ferry_err_set(err, FERRY_EINVAL, "TSV field ends in a lone backslash");
        }
        char e = s[++i];
        switch (e) {
        case 't': s[w++] = '\t'; break;
        case 'n': s[w++] = '\n'; break;
        case 'r': s[w++] = '\r'; break;
        case 'b': s[w++] = '\b'; break;
        case 'f': s[w++] = '\f'; break;
        case 'a': s[w++] = '\a'; break;
        case 'v': s[w++] = '\v'; break;
        case 'e': s[w++] = '\x1b'; break;
        case '0': s[w++] = '\0'; break;
        case 'x': {
            int hi = i + 1 < len ? ferry_hex_digit(s[i + 1]) : -1;
            int lo = i + 2 < len ? ferry_hex_digit(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                s[w] = '\0';
                *out_len = w;
                return ferry_err_set(err, FERRY_EINVAL, "TSV field has a bad \\x escape");
            }
            s[w++] = (char)(hi * 16 + lo);
            i += 2;
            break;
        }
        default: s[w++] = e; break; /* \\ \' \" and anything else: the character itself */
        }
    }
    s[w] = '\0';
    *out_len = w;
    return FERRY_OK;
}

int ferry_tsv_escape(ferry_buf *out, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '\t': rep = "\\t"; break;
        case '\n': rep = "\\n"; break;
        case '\r': rep = "\\r"; break;
        case '\b': rep = "\\b"; break;
        case '\f': rep = "\\f"; break;
        case '\0': rep = "\\0"; break;
        case '\\': rep = "\\\\"; break;
        default: break;
        }
        int rc = rep ? ferry_buf_append(out, rep, 2) : ferry_buf_putc(out, s[i]);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

void ferry_tsv_reader_init(ferry_tsv_reader *r, ferry_tsv_row_fn on_row, void *arg)
{
    memset(r, 0, sizeof *r);
    r->on_row = on_row;
    r->arg = arg;
}

void ferry_tsv_reader_free(ferry_tsv_reader *r)
{
    ferry_buf_free(&r->line);
    free(r->fields);
    free(r->lens);
    free(r->nulls);
    memset(r, 0, sizeof *r);
}

static int reserve_fields(ferry_tsv_reader *r, size_t n)
{
    if (n <= r->cap)
        return FERRY_OK;
    size_t cap = r->cap ? r->cap : 8;
    while (cap < n)
        cap *= 2;
    char **f = realloc(r->fields, cap * sizeof *f);
    if (!f)
        return FERRY_ENOMEM;
    r->fields = f;
    size_t *l = realloc(r->lens, cap * sizeof *l);
    if (!l)
        return FERRY_ENOMEM;
    r->lens = l;
    bool *nu = realloc(r->nulls, cap * sizeof *nu);
    if (!nu)
        return FERRY_ENOMEM;
    r->nulls = nu;
    r->cap = cap;
    return FERRY_OK;
}

/* Splits line (without its '\n') at tabs, unescapes each field in place and calls on_row. */
static int emit_row(ferry_tsv_reader *r, char *line, size_t len, ferry_err *err)
{
    size_t n = 1;
    for (size_t i = 0; i < len; i++)
        n += line[i] == '\t';
    int rc = reserve_fields(r, n);
    if (rc)
        return ferry_err_set(err, rc, "out of memory parsing TSV");
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && line[i] != '\t')
            continue;
        line[i] = '\0'; /* the tab (or the byte after the line) becomes the terminator */
        r->fields[k] = line + start;
        rc = ferry_tsv_unescape(line + start, i - start, &r->lens[k], &r->nulls[k], err);
        if (rc)
            return ferry_err_prefix(err, "row %llu, field %zu: ",
                                    (unsigned long long)r->row_no + 1, k + 1);
        k++;
        start = i + 1;
    }
    r->row_no++;
    return r->on_row ? r->on_row(r->fields, r->lens, r->nulls, n, r->arg) : FERRY_OK;
}

int ferry_tsv_feed(ferry_tsv_reader *r, const void *data, size_t len, ferry_err *err)
{
    const char *p = data;
    const char *end = p + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            if (ferry_buf_append(&r->line, p, (size_t)(end - p)))
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory parsing TSV");
            return FERRY_OK;
        }
        if (ferry_buf_append(&r->line, p, (size_t)(nl - p)) || ferry_buf_reserve(&r->line, 1))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory parsing TSV");
        int rc = emit_row(r, r->line.data, r->line.len, err);
        ferry_buf_reset(&r->line);
        if (rc)
            return rc;
        p = nl + 1;
    }
    return FERRY_OK;
}

int ferry_tsv_finish(ferry_tsv_reader *r, ferry_err *err)
{
    if (r->line.len)
        return ferry_err_set(err, FERRY_EINVAL,
                             "TSV result ends in the middle of row %llu (%zu bytes without a "
                             "newline): the result is incomplete",
                             (unsigned long long)r->row_no + 1, r->line.len);
    return FERRY_OK;
}

void ferry_ch_rows_free(ferry_ch_rows *rows)
{
    if (!rows)
        return;
    free(rows->fields);
    free(rows->lens);
    free(rows->nulls);
    free(rows->data);
    memset(rows, 0, sizeof *rows);
}

int ferry_ch_rows_parse(char *text, size_t len, ferry_ch_rows *rows, ferry_err *err)
{
    int rc = FERRY_OK;
    memset(rows, 0, sizeof *rows);
    rows->data = text;
    if (len && text[len - 1] != '\n') {
        rc = ferry_err_set(err, FERRY_EINVAL, "TSV result does not end with a newline: the "
                                              "result is incomplete");
        goto out;
    }
    size_t n_lines = 0, n_tabs_first = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n')
            n_lines++;
        else if (text[i] == '\t' && n_lines == 0)
            n_tabs_first++;
    }
    if (n_lines == 0)
        goto out;
    size_t n_cols = n_tabs_first + 1;
    size_t total = n_lines * n_cols;
    rows->fields = calloc(total, sizeof *rows->fields);
    rows->lens = calloc(total, sizeof *rows->lens);
    rows->nulls = calloc(total, sizeof *rows->nulls);
    if (!rows->fields || !rows->lens || !rows->nulls) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory parsing %zu TSV rows", n_lines);
        goto out;
    }
    rows->n_cols = n_cols;
    size_t row = 0, col = 0, start = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (ch != '\t' && ch != '\n')
            continue;
        if (col >= n_cols || (ch == '\n' && col != n_cols - 1)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "TSV row %zu has %s fields than the first "
                               "row's %zu", row + 1, col >= n_cols ? "more" : "fewer", n_cols);
            goto out;
        }
        text[i] = '\0';
        size_t idx = row * n_cols + col;
        rows->fields[idx] = text + start;
        rc = ferry_tsv_unescape(text + start, i - start, &rows->lens[idx], &rows->nulls[idx], err);
        if (rc) {
            ferry_err_prefix(err, "TSV row %zu, field %zu: ", row + 1, col + 1);
            goto out;
        }
        start = i + 1;
        if (ch == '\n') {
            row++;
            col = 0;
        } else {
            col++;
        }
    }
    rows->n_rows = row;
out:
    if (rc)
        ferry_ch_rows_free(rows);
    return rc;
}

int ferry_ch_quote(ferry_buf *out, const char *s)
{
    int rc = ferry_buf_putc(out, '\'');
    for (; !rc && *s; s++) {
        if (*s == '\\' || *s == '\'')
            rc = ferry_buf_putc(out, '\\');
        if (!rc)
            rc = ferry_buf_putc(out, *s);
    }
    return rc ? rc : ferry_buf_putc(out, '\'');
}

static int json_row(char **fields, const size_t *lens, const bool *nulls, size_t n, void *arg)
{
    ferry_tsv_json *j = arg;
    if (!j->have_header) {
        j->names = calloc(n ? n : 1, sizeof *j->names);
        if (!j->names)
            return ferry_err_set(j->err, FERRY_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++, j->n_names++)
            if (!(j->names[i] = ferry_strndup(fields[i], lens[i])))
                return ferry_err_set(j->err, FERRY_ENOMEM, "out of memory");
        j->have_header = true;
        return FERRY_OK;
    }
    if (n != j->n_names)
        return ferry_err_set(j->err, FERRY_EREMOTE, "row with %zu fields under %zu column names",
                             n, j->n_names);
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++) {
        json_t *v = nulls[i] ? json_null() : json_stringn(fields[i], lens[i]);
        if (!v) /* not UTF-8: keep the row, mark the value */
            v = json_string("<invalid UTF-8>");
        json_object_set_new(o, j->names[i], v);
    }
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!s)
        return ferry_err_set(j->err, FERRY_ENOMEM, "out of memory");
    size_t len = strlen(s);
    s[len] = '\n'; /* json_dumps' NUL makes room for the newline; not a string any more */
    int rc = j->write(s, len + 1, j->write_arg);
    free(s);
    return rc;
}

void ferry_tsv_json_init(ferry_tsv_json *j, ferry_write_fn write, void *write_arg, ferry_err *err)
{
    memset(j, 0, sizeof *j);
    j->write = write;
    j->write_arg = write_arg;
    j->err = err;
    ferry_tsv_reader_init(&j->tsv, json_row, j);
}

int ferry_tsv_json_feed(const void *data, size_t len, void *arg)
{
    ferry_tsv_json *j = arg;
    return ferry_tsv_feed(&j->tsv, data, len, j->err);
}

int ferry_tsv_json_finish(ferry_tsv_json *j) { return ferry_tsv_finish(&j->tsv, j->err); }

void ferry_tsv_json_free(ferry_tsv_json *j)
{
    for (size_t i = 0; i < j->n_names; i++)
        free(j->names[i]);
    free(j->names);
    ferry_tsv_reader_free(&j->tsv);
    memset(j, 0, sizeof *j);
}
