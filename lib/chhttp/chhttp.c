/* ClickHouse HTTP interface helpers (see include/ferry/chhttp.h). */
#include "ferry/chhttp.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parameters the HTTP handler itself consumes; every other one is a setting. */
static const char *const protocol_params[] = {
    "query", "database", "default_format", "user", "password", "query_id", "session_id",
    "session_timeout", "session_check", "compress", "decompress", "buffer_size",
    "wait_end_of_query", "quota_key", "stacktrace", "role", "http_native_compression_disable_checksumming_on_decompress",
    "close_session", "client_protocol_version", NULL};

enum ferry_ch_param_kind ferry_ch_param_kind(const char *name)
{
    for (size_t i = 0; protocol_params[i]; i++)
        if (strcmp(name, protocol_params[i]) == 0)
            return FERRY_CH_PARAM_PROTOCOL;
    if (strncmp(name, "param_", 6) == 0 && name[6])
        return FERRY_CH_PARAM_QUERY;
    return FERRY_CH_PARAM_SETTING;
}

bool ferry_ch_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 256 || !(isalpha((unsigned char)name[0]) || name[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)name[i]) || name[i] == '_' || name[i] == '.'))
            return false;
    return true;
}

int ferry_ch_quote_string(ferry_buf *out, const char *value)
{
    int rc = ferry_buf_putc(out, '\'');
    for (const unsigned char *p = (const unsigned char *)value; *p && rc == 0; p++) {
        switch (*p) {
        case '\'': rc = ferry_buf_puts(out, "\\'"); break;
        case '\\': rc = ferry_buf_puts(out, "\\\\"); break;
        case '\n': rc = ferry_buf_puts(out, "\\n"); break;
        case '\r': rc = ferry_buf_puts(out, "\\r"); break;
        case '\t': rc = ferry_buf_puts(out, "\\t"); break;
        default:
            if (*p < 0x20)
                rc = ferry_buf_printf(out, "\\x%02X", *p);
            else
                rc = ferry_buf_putc(out, (char)*p);
        }
    }
    return rc ? rc : ferry_buf_putc(out, '\'');
}

int ferry_ch_error_parse(const char *msg, char *name, size_t namesz)
{
    int code = 0;
    if (namesz)
        name[0] = '\0';
    const char *c = strstr(msg, "Code: ");
    if (c)
        code = atoi(c + 6);
    /* The name is the last "(UPPER_CASE_WORD)"; ClickHouse puts it after the message. */
    const char *best = NULL;
    size_t best_len = 0;
    for (const char *p = strchr(msg, '('); p; p = strchr(p + 1, '(')) {
        const char *q = p + 1;
        while (*q && (isupper((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '_'))
            q++;
        if (*q == ')' && q - p > 2 && isupper((unsigned char)p[1])) {
            best = p + 1;
            best_len = (size_t)(q - p - 1);
        }
    }
    if (best && namesz) {
        if (best_len >= namesz)
            best_len = namesz - 1;
        memcpy(name, best, best_len);
        name[best_len] = '\0';
    }
    return code;
}

static bool name_in(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(name, list[i]) == 0)
            return true;
    return false;
}

unsigned ferry_ch_error_http_status(const char *name)
{
    static const char *const forbidden[] = {"UNKNOWN_USER", "WRONG_PASSWORD",
                                            "AUTHENTICATION_FAILED", "SET_NON_GRANTED_ROLE",
                                            "ACCESS_DENIED", NULL};
    static const char *const bad_request[] = {
        "BAD_ARGUMENTS", "CANNOT_COMPILE_REGEXP", "CANNOT_PARSE_TEXT",
        "CANNOT_PARSE_ESCAPE_SEQUENCE", "CANNOT_PARSE_QUOTED_STRING", "CANNOT_PARSE_DATE",
        "CANNOT_PARSE_DATETIME", "CANNOT_PARSE_NUMBER", "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING",
        "CANNOT_PARSE_IPV4", "CANNOT_PARSE_IPV6", "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
        "CANNOT_PARSE_UUID", "DUPLICATE_COLUMN", "ILLEGAL_COLUMN", "UNKNOWN_ELEMENT_IN_AST",
        "UNKNOWN_TYPE_OF_AST_NODE", "THERE_IS_NO_COLUMN", "TOO_DEEP_AST", "TOO_BIG_AST",
        "UNEXPECTED_AST_STRUCTURE", "SYNTAX_ERROR", "INCORRECT_DATA", "TYPE_MISMATCH",
        "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE", NULL};
    static const char *const not_found[] = {
        "UNKNOWN_TABLE", "UNKNOWN_FUNCTION", "UNKNOWN_IDENTIFIER", "UNKNOWN_TYPE",
        "UNKNOWN_STORAGE", "UNKNOWN_DATABASE", "UNKNOWN_SETTING", "UNKNOWN_DIRECTION_OF_SORTING",
        "UNKNOWN_AGGREGATE_FUNCTION", "UNKNOWN_FORMAT", "UNKNOWN_DATABASE_ENGINE",
        "UNKNOWN_TYPE_OF_QUERY", "UNKNOWN_ROLE", NULL};
    if (strcmp(name, "REQUIRED_PASSWORD") == 0)
        return 401;
    if (name_in(name, forbidden))
        return 403;
    if (name_in(name, bad_request))
        return 400;
    if (name_in(name, not_found))
        return 404;
    if (strcmp(name, "QUERY_IS_TOO_LARGE") == 0)
        return 413;
    if (strcmp(name, "NOT_IMPLEMENTED") == 0)
        return 501;
    if (strcmp(name, "SOCKET_TIMEOUT") == 0 || strcmp(name, "CANNOT_OPEN_FILE") == 0 ||
        strcmp(name, "CANNOT_SCHEDULE_TASK") == 0)
        return 503;
    if (strcmp(name, "HTTP_LENGTH_REQUIRED") == 0)
        return 411;
    if (strcmp(name, "TIMEOUT_EXCEEDED") == 0)
        return 408;
    if (strcmp(name, "UNSUPPORTED_MEDIA_TYPE") == 0)
        return 415;
    return 500;
}

/* A minimal SQL scanner: yields top-level words with their positions, skipping string
 * literals, quoted identifiers, comments and anything inside parentheses. */
typedef struct sql_scan {
    const char *s;
    size_t len, pos;
    int depth;
} sql_scan;

/* Advances to the next top-level word; returns false at the end. */
static bool scan_word(sql_scan *sc, size_t *start, size_t *wlen)
{
    const char *s = sc->s;
    while (sc->pos < sc->len) {
        char c = s[sc->pos];
        if (c == '\'' || c == '"' || c == '`') {
            sc->pos++;
            while (sc->pos < sc->len && s[sc->pos] != c) {
                if (s[sc->pos] == '\\')
                    sc->pos++;
                sc->pos++;
            }
            sc->pos++;
        } else if (c == '-' && sc->pos + 1 < sc->len && s[sc->pos + 1] == '-') {
            while (sc->pos < sc->len && s[sc->pos] != '\n')
                sc->pos++;
        } else if (c == '/' && sc->pos + 1 < sc->len && s[sc->pos + 1] == '*') {
            const char *end = NULL;
            for (size_t i = sc->pos + 2; i + 1 < sc->len; i++)
                if (s[i] == '*' && s[i + 1] == '/') {
                    end = s + i + 2;
                    break;
                }
            sc->pos = end ? (size_t)(end - s) : sc->len;
        } else if (c == '(') {
            sc->depth++;
            sc->pos++;
        } else if (c == ')') {
            sc->depth--;
            sc->pos++;
        } else if (isalpha((unsigned char)c) || c == '_') {
            size_t b = sc->pos;
            while (sc->pos < sc->len &&
                   (isalnum((unsigned char)s[sc->pos]) || s[sc->pos] == '_'))
                sc->pos++;
            if (sc->depth == 0) {
                *start = b;
                *wlen = sc->pos - b;
                return true;
            }
        } else {
            sc->pos++;
        }
    }
    return false;
}

static bool word_is(const char *s, size_t start, size_t wlen, const char *kw)
{
    return strlen(kw) == wlen && strncasecmp(s + start, kw, wlen) == 0;
}

bool ferry_ch_starts_with_keyword(const char *sql, size_t len, const char *kw)
{
    size_t i = 0;
    for (;;) {
        while (i < len && isspace((unsigned char)sql[i]))
            i++;
        if (i + 1 < len && sql[i] == '-' && sql[i + 1] == '-') {
            while (i < len && sql[i] != '\n')
                i++;
        } else if (i + 1 < len && sql[i] == '/' && sql[i + 1] == '*') {
            i += 2;
            while (i + 1 < len && !(sql[i] == '*' && sql[i + 1] == '/'))
                i++;
            i += 2;
        } else {
            break;
        }
    }
    size_t k = strlen(kw);
    if (i + k > len || strncasecmp(sql + i, kw, k) != 0)
        return false;
    return i + k == len || !(isalnum((unsigned char)sql[i + k]) || sql[i + k] == '_');
}

bool ferry_ch_find_format(const char *sql, size_t len, char *fmt, size_t fmtsz,
                          size_t *format_kw_pos)
{
    sql_scan sc = {sql, len, 0, 0};
    size_t b, n, prev_b = 0;
    bool prev_format = false, found = false;
    while (scan_word(&sc, &b, &n)) {
        if (prev_format) {
            /* The name must follow FORMAT directly, separated only by white space. */
            bool adjacent = true;
            for (size_t i = prev_b + 6; i < b; i++)
                if (!isspace((unsigned char)sql[i]))
                    adjacent = false;
            if (adjacent) {
                size_t m = n < fmtsz - 1 ? n : fmtsz - 1;
                memcpy(fmt, sql + b, m);
                fmt[m] = '\0';
                if (format_kw_pos)
                    *format_kw_pos = prev_b;
                found = true;
            }
        }
        prev_format = word_is(sql, b, n, "FORMAT");
        prev_b = b;
    }
    return found;
}

bool ferry_ch_split_insert(const char *sql, size_t len, char **insert, char *fmt, size_t fmtsz)
{
    if (!ferry_ch_starts_with_keyword(sql, len, "INSERT"))
        return false;
    size_t kw;
    if (!ferry_ch_find_format(sql, len, fmt, fmtsz, &kw))
        return false;
    /* Nothing but the name, white space and ';' may follow FORMAT. */
    size_t i = kw + 6;
    while (i < len && isspace((unsigned char)sql[i]))
        i++;
    i += strlen(fmt);
    for (; i < len; i++)
        if (!isspace((unsigned char)sql[i]) && sql[i] != ';')
            return false;
    *insert = malloc(kw + 1);
    if (!*insert)
        return false;
    memcpy(*insert, sql, kw);
    (*insert)[kw] = '\0';
    return true;
}

int ferry_ch_insert_from_infile(ferry_buf *out, const char *insert, const char *path,
                                const char *fmt)
{
    size_t len = strlen(insert), b, n, settings = len;
    sql_scan sc = {insert, len, 0, 0};
    while (scan_word(&sc, &b, &n))
        if (word_is(insert, b, n, "SETTINGS")) {
            settings = b;
            break;
        }
    size_t head = settings;
    while (head > 0 && isspace((unsigned char)insert[head - 1]))
        head--;
    int rc = ferry_buf_append(out, insert, head);
    rc |= ferry_buf_puts(out, " FROM INFILE ");
    rc |= ferry_ch_quote_string(out, path);
    if (settings < len) {
        rc |= ferry_buf_putc(out, ' ');
        size_t tail = len;
        while (tail > settings && isspace((unsigned char)insert[tail - 1]))
            tail--;
        rc |= ferry_buf_append(out, insert + settings, tail - settings);
    }
    rc |= ferry_buf_puts(out, " FORMAT ");
    rc |= ferry_buf_puts(out, fmt);
    return rc ? -1 : 0;
}
