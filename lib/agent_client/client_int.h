/* Private to lib/agent_client: the client's state, shared by client.c (the HTTP requests) and
 * ops.c (the typed operations, ferry/agent_ops.h). */
#ifndef FERRY_AGENT_CLIENT_INT_H
#define FERRY_AGENT_CLIENT_INT_H

#include <curl/curl.h>

#include "ferry/agent.h"
#include "ferry/agent_ops.h"

/* Bits of ferry_agent_client.one_at_a_time: the many-part forms the agent refused with 400 (an
 * agent of API 1), asked one item per request from then on. */
enum {
    AGENT_ONE_FREEZE = 1u << 0,
    AGENT_ONE_REMOVE_DETACHED = 1u << 1,
    AGENT_ONE_REMOVE_FREEZE = 1u << 2,
    AGENT_ONE_UPLOAD = 1u << 3,
    AGENT_ONE_WRITE_POINTERS = 1u << 4,
};

struct ferry_agent_client {
    CURL *curl;
    char *base; /* without a trailing '/' */
    char *auth; /* "Authorization: Bearer <token>" (wiped on free) */
    long timeout_ms;
    char name[128]; /* "" or the name set by ferry_agent_client_set_name (a shard's) */
    ferry_agent_client_stats stats;
    long last_status;
    unsigned one_at_a_time;
};

#endif
