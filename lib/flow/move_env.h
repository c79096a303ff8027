/* Private: connections of a move to one shard (its ClickHouse through ferry's client, its node
 * agent), and small query helpers. Every statement goes through ferry_guarded_exec. */
#ifndef FERRY_MOVE_ENV_H
#define FERRY_MOVE_ENV_H

#include <jansson.h>

#include "ferry/agent.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"

struct ferry_config;

typedef struct mv_conn {
    char name[FERRY_NAME_MAX];
    char agent_url[FERRY_URL_MAX];
    char ch_url[FERRY_URL_MAX];
    char *token; /* agent bearer token (wiped on close) */
    ferry_ch_client *ch;
    ferry_agent_client *ag;
} mv_conn;

/* Opens clients for the shard: ClickHouse at the first of its replicas, the agent at its agent
 * URL; token, user and password files come from [shard "NAME"] of cfg. Nothing is contacted. */
int mv_conn_open(const ferry_shard *sh, const struct ferry_config *cfg, mv_conn *c,
                 ferry_err *err);
void mv_conn_close(mv_conn *c);

/* Runs a statement (through the SQL guard) and parses its TSV result into rows (caller frees
 * with ferry_ch_rows_free; rows may be NULL to discard). */
int mv_sql(mv_conn *c, const char *sql, ferry_ch_rows *rows, ferry_err *err);
/* An agent operation; the error message is prefixed with the shard's name. */
int mv_agent(mv_conn *c, const char *op, json_t *req, json_t **resp, long *status,
             ferry_err *err);

#endif
