/* Asking a running `ferry router` how it would run a SELECT now, without running it (the
 * X-Ferry-Explain header; docs/routing.md): the routing version, the moves in flight that hold
 * or widen the read, the replica picked per slice, the per-server queries. A client of the
 * router in lib/router_client/ (io layer), used by `ferry route-query --router`. */
#ifndef FERRY_ROUTER_EXPLAIN_H
#define FERRY_ROUTER_EXPLAIN_H

#include <jansson.h>

#include "ferry/buf.h"
#include "ferry/err.h"

/* POSTs sql to the router at url (basic authentication as user when not NULL; password never
 * logged) and reads back the plan object ({routing_version, held, why, plan, queries [{server,
 * sql}], globals, initiator, restricted_to_tenants ...}). *plan is the caller's (json_decref).
 * FERRY_ECONNECT: no router answered; FERRY_EREMOTE: it refused the statement (its message)
 * or did not answer with a plan. */
int ferry_router_explain(const char *url, const char *user, const char *password,
                         const char *sql, json_t **plan, ferry_err *err);

/* The plan ferry_router_explain returned, as text for a person, appended to out: the routing
 * version, the tenants a bound user is restricted to, then either why the read is held or the
 * plan with its globals, each server's query and the initiator's. FERRY_ENOMEM or FERRY_OK. */
int ferry_router_explain_text(const json_t *plan, ferry_buf *out);

#endif
