/* A router's explained plan for a SELECT (include/ferry/router_explain.h). */
#include "ferry/router_explain.h"

#include <stdio.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/http_call.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

int ferry_router_explain(const char *url, const char *user, const char *password,
                         const char *sql, json_t **plan, ferry_err *err)
{
    *plan = NULL;
    ferry_buf target = FERRY_BUF_INIT;
    ferry_http_answer a;
    memset(&a, 0, sizeof a);
    char red[512];
    int rc = ferry_buf_printf(&target, "%s%s", url, *url && url[strlen(url) - 1] == '/' ? ""
                                                                                     : "/");
    if (rc) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    static const char *const hdrs[] = {"X-Ferry-Explain: 1", NULL};
    ferry_http_call call = {.url = target.data,
                            .body = sql,
                            .body_len = strlen(sql),
                            .headers = hdrs,
                            .user = user,
                            .password = password,
                            .timeout_ms = 30000};
    if ((rc = ferry_http_do(&call, &a, err))) {
        if (rc == FERRY_ECONNECT) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            ferry_err_set(err, FERRY_ECONNECT, "cannot reach the router at %s: %s; is `ferry "
                          "router` running there?", ferry_redact_url(url, red, sizeof red), why);
        }
        goto out;
    }
    if (a.status != 200) {
        char *msg = (char *)ferry_buf_cstr(&a.body);
        ferry_chomp(msg);
        rc = ferry_err_set(err, FERRY_EREMOTE, "the router refused the statement (HTTP %ld): %s",
                           a.status, msg);
        goto out;
    }
    json_t *o = json_loadb(a.body.data ? a.body.data : "", a.body.len, 0, NULL);
    if (!json_is_object(o) || !json_object_get(o, "held")) {
        json_decref(o);
        rc = ferry_err_set(err, FERRY_EREMOTE, "the server at %s did not answer with a plan: is "
                           "it a `ferry router` of this version?",
                           ferry_redact_url(url, red, sizeof red));
        goto out;
    }
    *plan = o;
out:
    ferry_http_answer_free(&a);
    ferry_buf_free(&target);
    return rc;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

int ferry_router_explain_text(const json_t *o, ferry_buf *b)
{
    int rc = 0;
    json_t *v = json_object_get(o, "routing_version");
    if (v)
        rc |= ferry_buf_printf(b, "routing version: %lld\n", (long long)json_integer_value(v));
    json_t *only = json_object_get(o, "restricted_to_tenants");
    size_t k;
    json_t *t;
    if (json_is_array(only)) {
        rc |= ferry_buf_puts(b, "restricted to tenants:");
        json_array_foreach(only, k, t)
            rc |= ferry_buf_printf(b, "%s%s", k ? ", " : " ", json_string_value(t));
        rc |= ferry_buf_puts(b, " (every managed reference, whatever the query says)\n");
    }
    if (json_is_true(json_object_get(o, "held")))
        return rc | ferry_buf_printf(b, "held: %s\n", str(o, "why")) ? FERRY_ENOMEM : FERRY_OK;
    rc |= ferry_buf_printf(b, "plan: %s (%s)\n", str(o, "plan"), str(o, "why"));
    json_array_foreach(json_object_get(o, "globals"), k, t)
        rc |= ferry_buf_printf(b, "global (computed once):\n  %s\n", json_string_value(t));
    json_array_foreach(json_object_get(o, "queries"), k, t)
        rc |= ferry_buf_printf(b, "server %s:\n  %s\n", str(t, "server"), str(t, "sql"));
    json_t *ini = json_object_get(o, "initiator");
    if (json_is_string(ini))
        rc |= ferry_buf_printf(b, "initiator:\n  %s\n", json_string_value(ini));
    return rc ? FERRY_ENOMEM : FERRY_OK;
}
