/* ferry-node's internal pieces: one simulated ClickHouse server (embedded libchdb) serving
 * ClickHouse's HTTP interface, its delete guard, and the hook where the node agent's routes
 * plug in. */
#ifndef FERRY_NODE_H
#define FERRY_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ferry/chdb.h"
#include "ferry/httpd.h"

typedef struct node_user {
    char *name;
    char *password_sha256; /* lower-case hex; "" = no password */
} node_user;

typedef struct node {
    char *name;
    char *data_path;   /* absolute, trailing '/' */
    char *config_path; /* the node.conf it was started with */
    char *listen;
    uint16_t http_port;
    char *object_store_type; /* "local" | "s3" */
    char *blob_path;         /* local: shared blob directory */
    uint64_t cold_cache_size; /* bytes of a cache disk in front of cold (0: none) */
    char *s3_endpoint, *s3_bucket, *s3_region;
    char *agent_token_file; /* [agent] token_file: mounts the node agent (NULL: none) */
    char *agent_config;     /* [agent] config: the ferry config it reads */
    node_user *users;
    size_t n_users;
    unsigned pool_size;
    size_t max_query_body; /* bytes of body buffered when it is the query itself */
    ferry_httpd_options http; /* connections and deadlines ([node] keys, as every server has) */
    ferry_chdb *lib;
    ferry_chdb_pool *pool;    /* read-write connections (POST) */
    ferry_chdb_pool *ro_pool; /* readonly = 2 connections (GET, as ClickHouse does) */
    char version[64];  /* ClickHouse's version() */
    char timezone[64]; /* ClickHouse's timezone() */
    time_t started;
} node;

/* node/guard.c */
int node_guard_set_root(const char *dir);
unsigned long node_guard_refused(void);

/* node/query.c: the ClickHouse HTTP interface ("/" route) */
void node_query_on_headers(ferry_http_req *req, void *ctx);
int node_query_on_body(ferry_http_req *req, void *ctx, const char *data, size_t len);
void node_query_on_complete(ferry_http_req *req, void *ctx);
void node_query_on_cleanup(ferry_http_req *req, void *ctx, void *state);

/* node/agent.c: the routes under /agent/: the node agent when node.conf has [agent], else a
 * 404 catch-all. Fills up to max routes and returns the count; 0 with err on failure. */
size_t node_agent_routes(node *n, ferry_http_route *routes, size_t max, ferry_err *err);
/* The node's HTTP server, for the agent's metrics (what its bounds refused). */
void node_agent_set_httpd(ferry_httpd *srv);

#endif
