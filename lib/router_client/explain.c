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
