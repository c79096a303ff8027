/* The node agent inside a lab node: the same handlers as `ferry agent` (lib/agent), mounted
 * under /agent/v1/ on the node's HTTP port and talking to the node's own ClickHouse over HTTP.
 * A node started without an [agent] section in node.conf answers 404 under /agent/, so a caller
 * can tell "no agent" from "no node". */
#include "node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/agent.h"
#include "ferry/log.h"

static ferry_agent *node_agent;

static void agent_missing(ferry_http_req *req, void *ctx)
{
    (void)ctx;
    char body[512];
    snprintf(body, sizeof body, "{\"error\": \"no agent handler for %s %s\"}\n",
             ferry_http_method(req), ferry_http_path(req));
    ferry_http_respond(req, 404, "application/json", body, strlen(body));
}

void node_agent_set_httpd(ferry_httpd *srv)
{
    if (node_agent)
        ferry_agent_set_httpd(node_agent, srv);
}

size_t node_agent_routes(node *n, ferry_http_route *routes, size_t max, ferry_err *err)
{
    if (!n->agent_token_file) {
        if (max < 1)
            return 0;
        routes[0] = (ferry_http_route){.method = NULL, .path = "/agent/",
                                       .on_complete = agent_missing};
        return 1;
    }
    char *token = NULL;
    if (ferry_agent_read_token_file(n->agent_token_file, &token, err) != FERRY_OK)
        return 0;
    char url[128];
    snprintf(url, sizeof url, "http://%s:%u", n->listen, n->http_port);
    ferry_agent_options o = {.clickhouse_url = url,
                             .data_path = n->data_path,
                             .token = token,
                             .config_path = n->agent_config,
                             .refused_deletes = node_guard_refused};
    int rc = ferry_agent_new(&o, &node_agent, err);
    memset(token, 0, strlen(token));
    free(token);
    if (rc != FERRY_OK)
        return 0;
    size_t nr = ferry_agent_routes(node_agent, routes, max);
    if (nr == 0) {
        ferry_err_set(err, FERRY_EINTERNAL, "no room for the agent's routes");
        return 0;
    }
    /* the same body limits as `ferry agent` ([agent] max_request_bytes, max_receive_bytes of
     * the ferry config it reads), read at start; a lab's first start comes before the lab
     * writes that config: the defaults then */
    ferry_agent_bounds b;
    const char *cfg = n->agent_config && access(n->agent_config, F_OK) == 0 ? n->agent_config
                                                                            : NULL;
    if (ferry_agent_bounds_read(cfg, &b, err) != FERRY_OK)
        return 0;
    ferry_agent_bounds_apply(&b, routes, nr);
    return nr;
}
