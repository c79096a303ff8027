/* git-config style configuration parser (pure) and typed accessors. */
#define _POSIX_C_SOURCE 200809L
#include "ferry/config.h"
#include "ferry/buf.h"
#include "ferry/lines.h"
#include "ferry/strutil.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-'; }

static char *lower_dup(const char *s, size_t n)
{
    char *p = ferry_strndup(s, n);
    if (p)
        for (char *q = p; *q; q++)
            *q = (char)tolower((unsigned char)*q);
    return p;
}

static int add_entry(ferry_config *c, const char *section, const char *sub, const char *key,
                     size_t keylen, const char *value, int line)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        ferry_config_entry *e = realloc(c->entries, cap * sizeof *e);
        if (!e)
            return FERRY_ENOMEM;
        c->entries = e;
        c->cap = cap;
    }
    ferry_config_entry *e = &c->entries[c->n];
    e->section = strdup(section);
    e->subsection = sub ? strdup(sub) : NULL;
    e->key = lower_dup(key, keylen);
    e->value = strdup(value);
    e->line = line;
    if (!e->section || (sub && !e->subsection) || !e->key || !e->value) {
        free(e->section);
        free(e->subsection);
        free(e->key);
        free(e->value);
        return FERRY_ENOMEM;
    }
    c->n++;
    return FERRY_OK;
}

/* Parses a quoted string starting at *p (after the opening quote) into out; advances *p past the
 * closing quote. Returns false on an unterminated string or bad escape. */
static bool parse_quoted(const char **p, ferry_buf *out)
{
    const char *s = *p;
    while (*s && *s != '"') {
        if (*s == '\\') {
            s++;
            char c;
            switch (*s) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            default: return false;
            }
            ferry_buf_putc(out, c);
            s++;
        } else {
            ferry_buf_putc(out, *s++);
        }
    }
    if (*s != '"')
        return false;
    *p = s + 1;
    return true;
}

int ferry_config_parse(const char *text, const char *path, ferry_config *out, ferry_err *err)
{
    int rc = FERRY_OK;
    memset(out, 0, sizeof *out);
    out->path = strdup(path ? path : "<config>");
    char *section = NULL, *sub = NULL;
    ferry_buf val = FERRY_BUF_INIT, subbuf = FERRY_BUF_INIT;
    int lineno = 0;
    const char *p = text;
    if (!out->path) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    while (*p) {
        lineno++;
        const char *eol = strchr(p, '\n');
        size_t linelen = eol ? (size_t)(eol - p) : strlen(p);
        char *line = ferry_strndup(p, linelen);
        if (!line) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        p = eol ? eol + 1 : p + linelen;
        ferry_chomp(line);
        const char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '#' || *s == ';') {
            free(line);
            continue;
        }
        if (*s == '[') {
            s++;
            const char *name = s;
            while (name_char(*s))
                s++;
            size_t namelen = (size_t)(s - name);
            free(section);
            free(sub);
            section = NULL;
            sub = NULL;
            if (namelen == 0) {
                free(line);
                rc = ferry_err_set(err, FERRY_EINVAL,
                                   "%s:%d: section header needs a name, like [cluster] or "
                                   "[shard \"s1\"]", out->path, lineno);
                goto out;
            }
            section = lower_dup(name, namelen);
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s == '"') {
                s++;
                ferry_buf_reset(&subbuf);
                if (!parse_quoted(&s, &subbuf)) {
                    free(line);
                    rc = ferry_err_set(err, FERRY_EINVAL,
                                       "%s:%d: unterminated or badly escaped subsection name",
                                       out->path, lineno);
                    goto out;
                }
                sub = strdup(ferry_buf_cstr(&subbuf));
            }
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s != ']') {
                free(line);
                rc = ferry_err_set(err, FERRY_EINVAL, "%s:%d: expected ']' to close the section "
                                   "header", out->path, lineno);
                goto out;
            }
            s++;
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s && *s != '#' && *s != ';') {
                free(line);
                rc = ferry_err_set(err, FERRY_EINVAL, "%s:%d: unexpected text after section "
                                   "header", out->path, lineno);
                goto out;
            }
            free(line);
            continue;
        }
        if (!section) {
            free(line);
            rc = ferry_err_set(err, FERRY_EINVAL, "%s:%d: key outside any section; put it under "
                               "a header such as [cluster]", out->path, lineno);
            goto out;
        }
        const char *key = s;
        while (name_char(*s))
            s++;
        size_t keylen = (size_t)(s - key);
        while (*s == ' ' || *s == '\t')
            s++;
        if (keylen == 0 || *s != '=') {
            free(line);
            rc = ferry_err_set(err, FERRY_EINVAL, "%s:%d: expected 'key = value'", out->path,
                               lineno);
            goto out;
        }
        s++;
        while (*s == ' ' || *s == '\t')
            s++;
        ferry_buf_reset(&val);
        ferry_buf_puts(&val, "");
        if (*s == '"') {
            s++;
            if (!parse_quoted(&s, &val)) {
                free(line);
                rc = ferry_err_set(err, FERRY_EINVAL, "%s:%d: unterminated or badly escaped "
                                   "quoted value", out->path, lineno);
                goto out;
            }
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s && *s != '#' && *s != ';') {
                free(line);
                rc = ferry_err_set(err, FERRY_EINVAL, "%s:%d: unexpected text after quoted "
                                   "value", out->path, lineno);
                goto out;
            }
        } else {
            const char *v = s;
            const char *end = v;
            /* An unquoted value ends at a comment that follows whitespace. */
            while (*end && !((*end == '#' || *end == ';') && end > v &&
                             (end[-1] == ' ' || end[-1] == '\t')))
                end++;
            ferry_buf_append(&val, v, (size_t)(end - v));
            char *t = ferry_trim(val.data);
            memmove(val.data, t, strlen(t) + 1);
            val.len = strlen(val.data);
        }
        rc = add_entry(out, section, sub, key, keylen, ferry_buf_cstr(&val), lineno);
        free(line);
        if (rc) {
            ferry_err_set(err, rc, "out of memory");
            goto out;
        }
    }
out:
    free(section);
    free(sub);
    ferry_buf_free(&val);
    ferry_buf_free(&subbuf);
    if (rc)
        ferry_config_free(out);
    return rc;
}

int ferry_config_load(const char *path, ferry_config *out, ferry_err *err)
{
    char *text = NULL;
    int rc = ferry_read_file(path, &text, NULL, err);
    if (rc) {
        if (rc == FERRY_ENOTFOUND)
            ferry_err_set(err, FERRY_EINVAL, "config file %s does not exist (create it, or pass "
                          "--config with the right path)", path);
        return rc == FERRY_ENOTFOUND ? FERRY_EINVAL : rc;
    }
    rc = ferry_config_parse(text, path, out, err);
    free(text);
    return rc;
}

void ferry_config_free(ferry_config *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->entries[i].section);
        free(c->entries[i].subsection);
        free(c->entries[i].key);
        free(c->entries[i].value);
    }
    free(c->entries);
    free(c->path);
    memset(c, 0, sizeof *c);
}

static bool sub_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

const ferry_config_entry *ferry_config_find(const ferry_config *c, const char *section,
                                            const char *subsection, const char *key)
{
    for (size_t i = c->n; i-- > 0;) {
        const ferry_config_entry *e = &c->entries[i];
        if (strcasecmp(e->section, section) == 0 && sub_eq(e->subsection, subsection) &&
            strcasecmp(e->key, key) == 0)
            return e;
    }
    return NULL;
}

const char *ferry_config_get(const ferry_config *c, const char *section, const char *subsection,
                             const char *key)
{
    const ferry_config_entry *e = ferry_config_find(c, section, subsection, key);
    return e ? e->value : NULL;
}

static int bad_value(const ferry_config *c, const ferry_config_entry *e, const char *expected,
                     ferry_err *err)
{
    if (e->subsection)
        return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [%s \"%s\"] %s = '%s': expected %s",
                             c->path, e->line, e->section, e->subsection, e->key, e->value,
                             expected);
    return ferry_err_set(err, FERRY_EINVAL, "%s:%d: [%s] %s = '%s': expected %s", c->path,
                         e->line, e->section, e->key, e->value, expected);
}

int ferry_config_u64(const ferry_config *c, const char *section, const char *subsection,
                     const char *key, uint64_t def, uint64_t *out, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(c, section, subsection, key);
    if (!e) {
        *out = def;
        return FERRY_OK;
    }
    if (!ferry_parse_u64(e->value, out))
        return bad_value(c, e, "a non-negative integer", err);
    return FERRY_OK;
}

int ferry_config_double(const ferry_config *c, const char *section, const char *subsection,
                        const char *key, double def, double *out, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(c, section, subsection, key);
    if (!e) {
        *out = def;
        return FERRY_OK;
    }
    if (!ferry_parse_double(e->value, out))
        return bad_value(c, e, "a number", err);
    return FERRY_OK;
}

int ferry_config_bytes(const ferry_config *c, const char *section, const char *subsection,
                       const char *key, uint64_t def, uint64_t *out, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(c, section, subsection, key);
    if (!e) {
        *out = def;
        return FERRY_OK;
    }
    if (!ferry_parse_bytes(e->value, out))
        return bad_value(c, e, "a size such as 1048576, 512M or 2GiB", err);
    return FERRY_OK;
}

int ferry_config_bool(const ferry_config *c, const char *section, const char *subsection,
                      const char *key, bool def, bool *out, ferry_err *err)
{
    const ferry_config_entry *e = ferry_config_find(c, section, subsection, key);
    if (!e) {
        *out = def;
        return FERRY_OK;
    }
    const char *v = e->value;
    if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") ||
        !strcmp(v, "1"))
        *out = true;
    else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off") ||
             !strcmp(v, "0"))
        *out = false;
    else
        return bad_value(c, e, "true or false", err);
    return FERRY_OK;
}

int ferry_config_require(const ferry_config *c, const char *section, const char *subsection,
                         const char *key, const char **out, ferry_err *err)
{
    const char *v = ferry_config_get(c, section, subsection, key);
    if (!v || !*v) {
        if (subsection)
            return ferry_err_set(err, FERRY_EINVAL, "%s: [%s \"%s\"] needs '%s = ...'", c->path,
                                 section, subsection, key);
        return ferry_err_set(err, FERRY_EINVAL, "%s: [%s] needs '%s = ...'", c->path, section,
                             key);
    }
    *out = v;
    return FERRY_OK;
}

size_t ferry_config_subsections(const ferry_config *c, const char *section, const char **out,
                                size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        const ferry_config_entry *e = &c->entries[i];
        if (!e->subsection || strcasecmp(e->section, section) != 0)
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const ferry_config_entry *f = &c->entries[j];
            seen = f->subsection && strcasecmp(f->section, section) == 0 &&
                   strcmp(f->subsection, e->subsection) == 0;
        }
        if (seen)
            continue;
        if (n < max)
            out[n] = e->subsection;
        n++;
    }
    return n;
}

int ferry_config_check_keys(const ferry_config *c, const char *section,
                            const char *const *allowed, ferry_err *err)
{
    for (size_t i = 0; i < c->n; i++) {
        const ferry_config_entry *e = &c->entries[i];
        if (strcasecmp(e->section, section) != 0)
            continue;
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcasecmp(*a, e->key) == 0;
        if (!ok) {
            ferry_buf list = FERRY_BUF_INIT;
            for (const char *const *a = allowed; *a; a++)
                ferry_buf_printf(&list, "%s%s", a == allowed ? "" : ", ", *a);
            ferry_err_set(err, FERRY_EINVAL, "%s:%d: unknown key '%s' in [%s]; known keys: %s",
                          c->path, e->line, e->key, e->section, ferry_buf_cstr(&list));
            ferry_buf_free(&list);
            return FERRY_EINVAL;
        }
    }
    return FERRY_OK;
}

void ferry_config_fput_value(FILE *fp, const char *value)
{
    bool quote = !*value || isspace((unsigned char)value[0]) ||
                 isspace((unsigned char)value[strlen(value) - 1]) || strpbrk(value, "#;\"\\\n\t");
    if (!quote) {
        fputs(value, fp);
        return;
    }
    fputc('"', fp);
    for (const char *s = value; *s; s++) {
        switch (*s) {
        case '"': fputs("\\\"", fp); break;
        case '\\': fputs("\\\\", fp); break;
        case '\n': fputs("\\n", fp); break;
        case '\t': fputs("\\t", fp); break;
        default: fputc(*s, fp);
        }
    }
    fputc('"', fp);
}
