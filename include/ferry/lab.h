/* The lab: several ferry-node processes on one machine, each a ClickHouse 26.7 server with its
 * own data path and loopback HTTP port, sharing one object store (a local blob directory, or
 * an S3 bucket). DIR holds everything:
 *
 *   DIR/lab.json        state: nodes, ports, PIDs (with their start times), object store
 *   DIR/lab.lock        flock'ed by every lab command, so two never edit the state at once
 *   DIR/ferry.conf      a ferry configuration naming the nodes as shards (docs/config.md)
 *   DIR/ferry.password  the password of the lab user "ferry" (mode 0600)
 *   DIR/blobs/          the shared blob directory (local object store)
 *   DIR/nodeK/          node.conf, node.log, data/ (ClickHouse's path, config.xml)
 *
 * Only processes the lab started are ever signalled: a recorded PID is used only when
 * /proc/PID/cmdline is ferry-node with this node's config and its start time matches. */
#ifndef FERRY_LAB_H
#define FERRY_LAB_H

#include <jansson.h>
#include <stdbool.h>

#include "ferry/err.h"

typedef struct ferry_lab_options {
    const char *dir;          /* required */
    unsigned nodes;           /* lab up: at least this many nodes (0 = keep, or 3 when new) */
    const char *object_store; /* "local" (default) or "s3"; must match an existing lab */
    const char *s3_endpoint;  /* s3: scheme://host:port */
    const char *s3_bucket;
    const char *s3_prefix;          /* optional key prefix inside the bucket */
    const char *s3_access_key_file; /* holds the clickhouse role's access key id */
    const char *s3_secret_key_file; /* holds its secret; never copied, never printed */
    /* optional: the uploader's and the janitor's own keys (both files of a role, or neither;
     * default: the clickhouse role's key above, as s3rver has one account) */
    const char *s3_uploader_access_key_file, *s3_uploader_secret_key_file;
    const char *s3_janitor_access_key_file, *s3_janitor_secret_key_file;
    const char *node_bin;     /* NULL: $FERRY_NODE_BIN, else ferry-node next to this program */
    const char *libchdb;      /* NULL: the node's default ($FERRY_LIBCHDB or the cache) */
    /* lab up: bytes of a filesystem cache in front of each node's cold disk (ClickHouse's
     * cache disk `cold_cache` wrapping `cold`, docs/lab.md); 0 = none. Fixed when the lab is
     * made: parts on the cold volume name the disk, so it cannot come or go later */
    unsigned long long cold_cache_bytes;
    unsigned timeout_s;       /* how long to wait for each node to answer; 0 = 60 */
    /* the ClickHouse version of the nodes this call starts anew ("26.7" or "26.5", their cached
     * libchdb; NULL = the lab's libchdb); a new lab pins it in ferry.conf. For restart-node:
     * the version the node comes back with (NULL = the one it ran). */
    const char *version;
    const char *node; /* restart-node: the node's name */
} ferry_lab_options;

/* Starts what is not running: new nodes up to opt->nodes, and any recorded node that died
 * (on its old port when free). Running nodes are left alone. Waits until every node answers
 * on HTTP; on failure stops the nodes this call started and reports the node's log. */
int ferry_lab_up(const ferry_lab_options *opt, ferry_err *err);
/* Adds one node to an existing lab and starts it. */
int ferry_lab_add_node(const ferry_lab_options *opt, ferry_err *err);
/* Stops opt->node if it runs and starts it again on the same data directory (and port when
 * free), with opt->version's library when given: a rolling upgrade, one server at a time.
 * Other nodes are left as they are. */
int ferry_lab_restart_node(const ferry_lab_options *opt, ferry_err *err);
/* Stops the lab's running nodes (SIGTERM, then SIGKILL after 10 s). Data stays. */
int ferry_lab_down(const char *dir, ferry_err *err);
/* {"dir":..., "clickhouse_version" (the pin), "nodes": [{"name","http","pid","alive","data_path",
 * "log","version" (asked for, or "default"),"clickhouse" (version() at its last start, or null),
 * "insert_mode"}], "object_store": {"type":"local","path"} | {"type":"s3","endpoint","bucket"},
 * plus "cold_cache_bytes" when the lab has a cache in front of the cold disk}. Caller owns *out. */
int ferry_lab_status(const char *dir, json_t **out, ferry_err *err);

#endif
