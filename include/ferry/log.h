/* Logging: one line per event in logfmt (ts=... level=... msg="..." key=value), written with one
 * write(2) so lines from threads and processes never interleave. Secrets must never be passed
 * here; use ferry_redact_url for URLs that may carry credentials. */
#ifndef FERRY_LOG_H
#define FERRY_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum ferry_log_level { FERRY_LOG_DEBUG, FERRY_LOG_INFO, FERRY_LOG_WARN, FERRY_LOG_ERROR };
/* logfmt: ts=... level=... pid=... msg="..." k=v (the default for files and pipes);
 * text: "HH:MM:SS.mmm info  message k=v" for a person (the default on a terminal);
 * json: one object per line, every k=v a member (for log collectors). */
enum ferry_log_format { FERRY_LOG_LOGFMT, FERRY_LOG_TEXT, FERRY_LOG_JSON };

void ferry_log_set_level(enum ferry_log_level level);
void ferry_log_set_fd(int fd); /* default 2 */
/* Reads FERRY_LOG_LEVEL and FERRY_LOG_FORMAT (as ferry_log_configure takes them) from the
 * environment; without a format, a terminal gets text. */
void ferry_log_init_from_env(void);
/* levels: "info" or "info,router=debug,clickhouse=warn": a default level and levels per
 * component (a line's component is the first word of its message: "router", "agent", "lab",
 * "clickhouse", "move", ...); format: "text", "logfmt" or "json". NULL or "" leaves a setting as
 * it is. -1 with why filled for a bad value (nothing changed). */
int ferry_log_configure(const char *levels, const char *format, char *why, size_t whysz);

void ferry_log(enum ferry_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Whether a line of that level would be written (to skip building costly debug lines). */
bool ferry_log_enabled(enum ferry_log_level level);

#define FLOG_DEBUG(...) ferry_log(FERRY_LOG_DEBUG, __VA_ARGS__)
#define FLOG_INFO(...) ferry_log(FERRY_LOG_INFO, __VA_ARGS__)
#define FLOG_WARN(...) ferry_log(FERRY_LOG_WARN, __VA_ARGS__)
#define FLOG_ERROR(...) ferry_log(FERRY_LOG_ERROR, __VA_ARGS__)

/* Copies url into out with any "user:password@" userinfo and password= / secret= / token= /
 * X-Amz-Signature= query values replaced by "***". */
const char *ferry_redact_url(const char *url, char *out, size_t outsz);

#endif
