/* logfmt logger: one write(2) per line. */
#define _POSIX_C_SOURCE 200809L
#include "ferry/log.h"
#include "ferry/buf.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static enum ferry_log_level g_level = FERRY_LOG_INFO;
static int g_fd = 2;
static enum ferry_log_format g_format = FERRY_LOG_LOGFMT;
static bool g_format_set;

/* per-component levels: "router=debug" (the component is a line's first word, see below) */
#define MAX_COMPONENTS 16
static struct {
    char name[32];
    enum ferry_log_level level;
} g_comp[MAX_COMPONENTS];
static size_t g_ncomp;
static enum ferry_log_level g_min = FERRY_LOG_INFO; /* the lowest of all levels */

void ferry_log_set_level(enum ferry_log_level level)
{
    g_level = level;
    g_ncomp = 0;
    g_min = level;
}
void ferry_log_set_fd(int fd) { g_fd = fd; }

static int level_parse(const char *v, size_t n, enum ferry_log_level *out)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == n && !strncasecmp(v, names[i], n)) {
            *out = (enum ferry_log_level)i;
            return 0;
        }
    return -1;
}

int ferry_log_configure(const char *levels, const char *format, char *why, size_t whysz)
{
    if (format && *format) {
        if (!strcasecmp(format, "json"))
            g_format = FERRY_LOG_JSON;
        else if (!strcasecmp(format, "logfmt"))
            g_format = FERRY_LOG_LOGFMT;
        else if (!strcasecmp(format, "text"))
            g_format = FERRY_LOG_TEXT;
        else {
            snprintf(why, whysz, "log format '%s': expected text, logfmt or json", format);
            return -1;
        }
        g_format_set = true;
    }
    if (!levels || !*levels)
        return 0;
    enum ferry_log_level base = g_level;
    size_t ncomp = 0;
    for (const char *p = levels; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        enum ferry_log_level lv;
        if (eq) {
            size_t nl = (size_t)(eq - p);
            if (!nl || nl >= sizeof g_comp[0].name || ncomp == MAX_COMPONENTS ||
                level_parse(eq + 1, len - nl - 1, &lv)) {
                snprintf(why, whysz, "log level '%.*s': expected COMPONENT=debug|info|warn|error",
                         (int)len, p);
                return -1;
            }
            memcpy(g_comp[ncomp].name, p, nl);
            g_comp[ncomp].name[nl] = '\0';
            g_comp[ncomp++].level = lv;
        } else if (level_parse(p, len, &base)) {
            snprintf(why, whysz, "log level '%.*s': expected debug, info, warn or error, or "
                     "COMPONENT=LEVEL (e.g. info,clickhouse=debug)", (int)len, p);
            return -1;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    g_level = base;
    g_ncomp = ncomp;
    g_min = base;
    for (size_t i = 0; i < ncomp; i++)
        if (g_comp[i].level < g_min)
            g_min = g_comp[i].level;
    return 0;
}

void ferry_log_init_from_env(void)
{
    char why[256];
    if (ferry_log_configure(getenv("FERRY_LOG_LEVEL"), getenv("FERRY_LOG_FORMAT"), why,
                            sizeof why))
        fprintf(stderr, "ferry: ignoring the environment's %s\n", why);
    if (!g_format_set && isatty(g_fd))
        g_format = FERRY_LOG_TEXT;
}

bool ferry_log_enabled(enum ferry_log_level level) { return level >= g_min; }

/* A line's component: the first word of its message (msg="router: ..." or "lab: started ...")
 * up to ':' or a space, lower-case letters only ("clickhouse statement" -> "clickhouse"). */
static void component_of(const char *body, char *out, size_t size)
{
    const char *p = body;
    if (!strncmp(p, "msg=", 4))
        p += 4;
    if (*p == '"')
        p++;
    size_t n = 0;
    while (p[n] && p[n] != ':' && p[n] != ' ' && p[n] != '"' && n + 1 < size)
        n++;
    memcpy(out, p, n);
    out[n] = '\0';
}

static enum ferry_log_level level_for(const char *body)
{
    if (!g_ncomp)
        return g_level;
    char comp[32];
    component_of(body, comp, sizeof comp);
    for (size_t i = 0; i < g_ncomp; i++)
        if (!strcmp(g_comp[i].name, comp))
            return g_comp[i].level;
    return g_level;
}

static void json_str(ferry_buf *b, const char *s, size_t n)
{
    ferry_buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            ferry_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            ferry_buf_printf(b, "\\u%04x", c);
        else
            ferry_buf_putc(b, (char)c);
    }
    ferry_buf_putc(b, '"');
}

/* The logfmt body as JSON members: key=value and key="quoted \" value" pairs; leading text
 * that is not a pair is the message. */
static void body_json(ferry_buf *b, const char *s)
{
    const char *msg_end = s;
    bool have_msg = false;
    while (*s) {
        while (*s == ' ')
            s++;
        size_t k = 0;
        while ((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z') ||
               (s[k] >= '0' && s[k] <= '9') || s[k] == '_' || s[k] == '.' || s[k] == '-')
            k++;
        if (!k || s[k] != '=') {
            /* free text: part of the message (up to the next pair) */
            const char *start = s;
            while (*s) {
                const char *sp = strchr(s, ' ');
                if (!sp) {
                    s += strlen(s);
                    break;
                }
                s = sp + 1;
                size_t kk = 0;
                while ((s[kk] >= 'a' && s[kk] <= 'z') || (s[kk] >= 'A' && s[kk] <= 'Z') ||
                       (s[kk] >= '0' && s[kk] <= '9') || s[kk] == '_')
                    kk++;
                if (kk && s[kk] == '=')
                    break;
            }
            msg_end = s;
            if (!have_msg) {
                size_t n = (size_t)(msg_end - start);
                while (n && start[n - 1] == ' ')
                    n--;
                ferry_buf_puts(b, ",\"msg\":");
                json_str(b, start, n);
                have_msg = true;
            }
            continue;
        }
        const char *key = s;
        s += k + 1;
        ferry_buf_puts(b, ",");
        json_str(b, key, k);
        ferry_buf_putc(b, ':');
        if (*s == '"') {
            ferry_buf v = FERRY_BUF_INIT;
            for (s++; *s && *s != '"'; s++) {
                if (*s == '\\' && s[1])
                    s++;
                ferry_buf_putc(&v, *s);
            }
            if (*s == '"')
                s++;
            json_str(b, v.data ? v.data : "", v.len);
            ferry_buf_free(&v);
        } else {
            size_t n = strcspn(s, " ");
            json_str(b, s, n);
            s += n;
        }
    }
}

void ferry_log(enum ferry_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (level < g_min)
        return;
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (m < 0)
        body[0] = '\0';
    if (level < level_for(body))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[80];
    snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    ferry_buf line = FERRY_BUF_INIT;
    if (g_format == FERRY_LOG_JSON) {
        ferry_buf_printf(&line, "{\"ts\":\"%s\",\"level\":\"%s\",\"pid\":%d", stamp,
                         names[level], (int)getpid());
        body_json(&line, body);
        ferry_buf_puts(&line, "}\n");
    } else if (g_format == FERRY_LOG_TEXT) {
        /* for a person at a terminal: time of day, level, the message as written */
        const char *b = body;
        ferry_buf_printf(&line, "%.12s %-5s ", stamp + 11, names[level]);
        if (!strncmp(b, "msg=\"", 5)) {
            const char *q = strchr(b + 5, '"');
            if (q) {
                ferry_buf_append(&line, b + 5, (size_t)(q - b - 5));
                b = q + 1;
            }
        }
        ferry_buf_printf(&line, "%s\n", b);
    } else {
        ferry_buf_printf(&line, "ts=%s level=%s pid=%d %s\n", stamp, names[level], (int)getpid(),
                         body);
    }
    if (line.data) {
        ssize_t w = write(g_fd, line.data, line.len); /* one write: lines never interleave */
        (void)w;
    }
    ferry_buf_free(&line);
}

const char *ferry_redact_url(const char *url, char *out, size_t outsz)
{
    ferry_buf b = FERRY_BUF_INIT;
    const char *s = url;
    const char *scheme = strstr(url, "://");
    if (scheme) {
        const char *host = scheme + 3;
        const char *slash = strchr(host, '/');
        const char *at = strchr(host, '@');
        if (at && (!slash || at < slash)) {
            ferry_buf_append(&b, url, (size_t)(host - url));
            ferry_buf_puts(&b, "***@");
            s = at + 1;
        }
    }
    static const char *secret_keys[] = {"password=", "secret=", "token=", "X-Amz-Signature=",
                                        "X-Amz-Credential=", "secret_access_key=", NULL};
    while (*s) {
        bool matched = false;
        if (s == url || s[-1] == '?' || s[-1] == '&') {
            for (const char **k = secret_keys; *k; k++) {
                size_t kl = strlen(*k);
                if (strncasecmp(s, *k, kl) == 0) {
                    ferry_buf_append(&b, s, kl);
                    ferry_buf_puts(&b, "***");
                    s += kl;
                    while (*s && *s != '&')
                        s++;
                    matched = true;
                    break;
                }
            }
        }
        if (!matched)
            ferry_buf_putc(&b, *s++);
    }
    snprintf(out, outsz, "%s", ferry_buf_cstr(&b));
    ferry_buf_free(&b);
    return out;
}
