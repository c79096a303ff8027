/* The router's errors as ClickHouse gives them (docs/routing.md): an error name to its numeric
 * code, and the answer a client's ClickHouse library parses (status, X-ClickHouse-Exception-Code,
 * "Code: N. DB::Exception: ..."). */
#include "router_int.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/chhttp.h"
#include "ferry/strutil.h"

int rt_error_code(const char *name)
{
    static const struct {
        const char *name;
        int code;
    } codes[] = {{"THERE_IS_NO_COLUMN", 8},
                 {"CANNOT_PARSE_INPUT_ASSERTION_FAILED", 27},
                 {"BAD_ARGUMENTS", 36},
                 {"NOT_IMPLEMENTED", 48},
                 {"SYNTAX_ERROR", 62},
                 {"UNKNOWN_FORMAT", 73},
                 {"CANNOT_WRITE_TO_FILE_DESCRIPTOR", 75},
                 {"INCORRECT_DATA", 117},
                 {"TIMEOUT_EXCEEDED", 159},
                 {"MEMORY_LIMIT_EXCEEDED", 241},
                 {"CANNOT_ALLOCATE_MEMORY", 173},
                 {"QUOTA_EXCEEDED", 201},
                 {"TOO_MANY_SIMULTANEOUS_QUERIES", 202},
                 {"NETWORK_ERROR", 210},
                 {"ALL_CONNECTION_TRIES_FAILED", 279},
                 {"ALL_REPLICAS_ARE_STALE", 369},
                 {"QUERY_WAS_CANCELLED", 394},
                 {"TOO_MANY_ROWS_OR_BYTES", 396},
                 {"CANNOT_SCHEDULE_TASK", 439},
                 {"QUERY_IS_TOO_LARGE", 393},
                 {"ACCESS_DENIED", 497},
                 {"AUTHENTICATION_FAILED", 516}};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (!strcmp(codes[i].name, name))
            return codes[i].code;
    return 1001; /* STD_EXCEPTION */
}

static void respond_error_code(ferry_http_req *req, int code, const char *name, const char *msg)
{
    char body[FERRY_ERR_MSG_MAX + 4096];
    snprintf(body, sizeof body, "Code: %d. DB::Exception: %s. (%s) (version ferry router)\n", code,
             msg, name);
    char c[16];
    snprintf(c, sizeof c, "%d", code);
    ferry_http_add_header(req, "X-ClickHouse-Exception-Code", c);
    ferry_http_respond(req, ferry_ch_error_http_status(name), "text/plain; charset=UTF-8", body,
                       strlen(body));
}

void rt_respond_error(ferry_http_req *req, const char *name, const char *fmt, ...)
{
    char msg[FERRY_ERR_MSG_MAX + 2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    respond_error_code(req, rt_error_code(name), name, msg);
}
