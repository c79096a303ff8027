/* The node agent's route table: the API a ferry coordinator uses to act on one server (freeze,
 * copy pointer parts, attach, ...). Issue 4 adds the handlers here; until then every path under
 * /agent/ answers 404 with a JSON error, so a caller can tell "no agent" from "no node". */
#include "node.h"

#include <stdio.h>
#include <string.h>

static void agent_missing(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    char body[512];
    snprintf(body, sizeof body, "{\"error\": \"no agent handler for %s %s\"}\n",
             ferry_http_method(req), ferry_http_path(req));
    ferry_http_respond(req, 404, "application/json", body, strlen(body));
}

const ferry_http_route node_agent_routes[] = {
    /* Agent handlers go before this catch-all. */
    {.method = NULL, .path = "/agent/", .on_complete = agent_missing},
};

size_t node_agent_route_count(void) { return sizeof node_agent_routes / sizeof node_agent_routes[0]; }
