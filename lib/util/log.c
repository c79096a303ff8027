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

void ferry_log_set_level(enum ferry_log_level level) { g_level = level; }
void ferry_log_set_fd(int fd) { g_fd = fd; }

void ferry_log_init_from_env(void)
{
    const char *v = getenv("FERRY_LOG_LEVEL");
    if (!v)
        return;
    if (!strcasecmp(v, "debug"))
        g_level = FERRY_LOG_DEBUG;
    else if (!strcasecmp(v, "info"))
        g_level = FERRY_LOG_INFO;
    else if (!strcasecmp(v, "warn"))
        g_level = FERRY_LOG_WARN;
    else if (!strcasecmp(v, "error"))
        g_level = FERRY_LOG_ERROR;
}

bool ferry_log_enabled(enum ferry_log_level level) { return level >= g_level; }

void ferry_log(enum ferry_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (level < g_level)
        return;
    char line[4096];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s pid=%d ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[level], (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(g_fd, line, len);
    (void)w;
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
