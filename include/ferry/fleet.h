/* The cluster as a flow sees it: the config, the catalog, and one ClickHouse client and one
 * agent client per server (shard). Opened once by retention, the sweep and doctor; the servers
 * are the catalog's shards that are not gone, with their connection details (agent token file,
 * ClickHouse user and password file) from the config's [shard "x"] sections.
 *
 * Not thread-safe (one fleet per thread), like the clients it holds. */
#ifndef FERRY_FLEET_H
#define FERRY_FLEET_H

#include <stddef.h>

#include "ferry/agent.h"
#include "ferry/catalog.h"
#include "ferry/clickhouse.h"
#include "ferry/config.h"
#include "ferry/err.h"
#include "ferry/objstore.h"

/* A replica of a shard after the first: its ClickHouse URL and its agent, from the same
 * positions of the shard's replicas and agent lists. */
typedef struct ferry_fleet_replica {
    char url[FERRY_URL_MAX];
    char agent_url[FERRY_URL_MAX]; /* "" when the shard lists one agent only */
    ferry_agent_client *agent;     /* owned; NULL when agent_url is "" */
} ferry_fleet_replica;

typedef struct ferry_fleet_server {
    char name[FERRY_NAME_MAX];
    char url[FERRY_URL_MAX];       /* the first replica's ClickHouse HTTP URL */
    char agent_url[FERRY_URL_MAX]; /* the first replica's agent */
    ferry_ch_client *ch;           /* owned */
    ferry_agent_client *agent;     /* owned */
    ferry_fleet_replica *more;     /* owned: the replicas after the first (the sweep and
                                    * retention read every replica's pointer files) */
    size_t n_more;
} ferry_fleet_server;

typedef struct ferry_fleet {
    char *config_path;             /* owned */
    ferry_config cfg;
    ferry_catalog *cat;            /* owned */
    ferry_settings settings;       /* from the catalog (written by `ferry init`) */
    ferry_fleet_server *servers;   /* owned; sorted by name */
    size_t n_servers;
    ferry_table_def *tables;       /* owned: the catalog's managed tables */
    char store_prefix[512];
    size_t n_tables;
} ferry_fleet;

/* How long the clients of one shard wait (0: the client's default) and how often ClickHouse
 * requests are tried (0: the client's default). */
typedef struct ferry_shard_client_opts {
    long ch_read_timeout_ms;
    int ch_max_attempts;
    long agent_timeout_ms;
} ferry_shard_client_opts;

/* The clients of one shard, as every flow opens them: ClickHouse at the first of the shard's
 * replicas (user and password_file from [shard "NAME"] of cfg), the agent at its (first) agent URL with
 * the bearer token of agent_token_file. Nothing is contacted. On success the caller owns *ch,
 * *agent and, when token is not NULL, *token (the agent token: wipe before freeing). On error
 * nothing is returned and the message names the shard and what the config lacks. */
int ferry_shard_clients_open(const ferry_config *cfg, const ferry_shard *sh,
                             const ferry_shard_client_opts *opts, ferry_ch_client **ch,
                             ferry_agent_client **agent, char **token, ferry_err *err);

/* Loads the config at config_path, opens its catalog (which must have been initialised with
 * `ferry init`: FERRY_ENOTFOUND otherwise) and makes a client per server. Nothing is contacted
 * but the catalog. *out is owned by the caller (ferry_fleet_close). */
int ferry_fleet_open(const char *config_path, ferry_fleet **out, ferry_err *err);
void ferry_fleet_close(ferry_fleet *f);

/* Opens the object store of the config with role; *out owned by the caller. */
int ferry_fleet_store(ferry_fleet *f, ferry_objstore_role role, ferry_objstore **out,
                      ferry_err *err);
/* [object_store] prefix with a trailing '/' ("" when none): the part of the store that is
 * ferry's (and its cold disks'). */
const char *ferry_fleet_store_prefix(const ferry_fleet *f);

/* The server named name, or NULL. */
ferry_fleet_server *ferry_fleet_server_find(ferry_fleet *f, const char *name);
/* The managed table named name, or NULL. */
const ferry_table_def *ferry_fleet_table_find(const ferry_fleet *f, const char *name);

#endif
