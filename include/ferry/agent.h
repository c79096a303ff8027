/* The node agent: a small authenticated HTTP API on each ClickHouse host that does what only a
 * process on that host can do with the server's files: list parts, freeze a partition, upload
 * frozen part files unchanged to object storage, write pointer parts into a table's detached/
 * folder on the cold disk, send a frozen part to another host's agent (which verifies it while
 * writing), and remove detached or shadow folders. docs/agent.md describes the API.
 *
 * The server side is a set of ferry_httpd routes under /agent/v1/, mounted by `ferry agent`
 * (a daemon) and by every lab node. Every request must carry `Authorization: Bearer <token>`;
 * the token is compared in constant time and never logged. Every path the agent touches is
 * confined to the ClickHouse data directories (--data-path plus every disk path in
 * system.disks), checked with ferry/pathsafe.h after symlinks are resolved.
 *
 * The client side (ferry_agent_client) is what a coordinator uses to call an agent, and what an
 * agent uses to stream a part to another agent. */
#ifndef FERRY_AGENT_H
#define FERRY_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/err.h"
#include "ferry/httpd.h"

/* 2: the many-part forms (freeze "partitions", upload and write-pointers "parts", remove-freeze
 * "names") and uploads checked against checksums.txt. An agent of version 1 answers 400 to them
 * (a required field is missing), and callers then fall back to one request per part.
 * 3: send "live": an active part on an object-storage disk sent from the table's own folder, no
 * freeze (an agent of version 2 answers 400: "freeze" is required; movers ask status first).
 * 4: pin, raising the ref_count of an active part's pointer files to their links (an agent of
 * version 3 has no such operation; movers ask status first and detach such parts instead).
 * 5: a batch of live pointer parts: send "parts" (instead of "part") streams them to one
 * receive, "batch=1" (an agent of version 4 answers 400: "part" is required; movers ask both
 * agents' status first and send one part per request otherwise). */
#define FERRY_AGENT_API_VERSION 5
#define FERRY_AGENT_PREFIX "/agent/v1/"

/* ---------------------------------------------------------------------------------------------
 * Server
 * ------------------------------------------------------------------------------------------- */

typedef struct ferry_agent ferry_agent;

typedef struct ferry_agent_options {
    const char *clickhouse_url;      /* the local server's HTTP interface */
    const char *clickhouse_user;     /* NULL: the server's default user */
    const char *clickhouse_password; /* NULL: none. Copied, wiped on free, never logged. */
    const char *data_path;           /* ClickHouse's <path>; always an allowed root */
    const char *token;               /* the bearer token callers must present (copied) */
    const char *config_path;         /* ferry config: [object_store], [credentials "uploader"]
                                        and "clickhouse", [cluster] pointer_format. Read again by
                                        each operation that needs it (so the lab can write it
                                        after its nodes start). NULL: object-store operations
                                        answer 501. */
    /* NULL, or the embedder's own count of deletes it refused (a lab node's delete guard),
     * exported beside ClickHouse's own delete requests as ferry_agent_refused_deletes_total */
    unsigned long (*refused_deletes)(void);
} ferry_agent_options;

/* Creates the agent; *out is owned by the caller (ferry_agent_free). Nothing is contacted. */
int ferry_agent_new(const ferry_agent_options *opt, ferry_agent **out, ferry_err *err);
void ferry_agent_free(ferry_agent *a);

/* The number of routes ferry_agent_routes fills. */
#define FERRY_AGENT_N_ROUTES 3
/* Fills routes[0..FERRY_AGENT_N_ROUTES) (max must be at least that): POST /agent/v1/receive
 * (streamed body), everything else under /agent/v1/, and a catch-all for /agent/ that answers
 * 404. The routes borrow a, which must outlive the server. Returns the count, 0 if max is too
 * small. */
size_t ferry_agent_routes(ferry_agent *a, ferry_http_route *routes, size_t max);
/* The HTTP server the agent's routes run in (borrowed; it must outlive the agent's use): its
 * metrics then include what that server's bounds refused (ferry_agent_http_refused_total). */
void ferry_agent_set_httpd(ferry_agent *a, ferry_httpd *srv);

/* The bounds of the daemon's HTTP server: [agent] max_connections,
 * max_connections_per_address, idle_timeout, header_timeout, receive_timeout, min_receive_rate
 * (FERRY_HTTPD_CONFIG_KEYS), max_request_bytes (an operation's JSON body) and max_receive_bytes
 * (one part streamed to receive) of the ferry config (docs/config.md). */
typedef struct ferry_agent_bounds {
    ferry_httpd_options http; /* the caller adds bind_addr and port */
    size_t max_request_bytes;
    size_t max_receive_bytes;
} ferry_agent_bounds;
/* The defaults, overridden by config_path's [agent] keys (NULL: the defaults). */
int ferry_agent_bounds_read(const char *config_path, ferry_agent_bounds *b, ferry_err *err);
/* Sets the routes' body limits (routes from ferry_agent_routes). */
void ferry_agent_bounds_apply(const ferry_agent_bounds *b, ferry_http_route *routes, size_t n);

/* Checks what a daemon should check before it serves: the config (when given) opens the
 * object store with the uploader role and has a valid pointer_format. */
int ferry_agent_check_config(ferry_agent *a, ferry_err *err);

/* Reads a token file: one line of 16..1024 printable non-space bytes. *token: caller wipes and
 * frees. The message names the file, never its content. */
int ferry_agent_read_token_file(const char *path, char **token, ferry_err *err);

/* ---------------------------------------------------------------------------------------------
 * Pure pieces (exposed for tests and for the coordinator)
 * ------------------------------------------------------------------------------------------- */

/* true when header (the Authorization value, may be NULL) is "Bearer <token>" with exactly
 * token. Constant time in the token's content (both sides are hashed, then CRYPTO_memcmp). */
bool ferry_agent_bearer_ok(const char *header, const char *token);

/* ClickHouse's escapeForFileName: bytes outside [A-Za-z0-9_] become %XX (upper-case hex). */
int ferry_agent_escape_name(ferry_buf *out, const char *name);

/* The object key of one uploaded part file (docs/formats.md, "Object keys for uploaded parts"):
 * <prefix><escaped db>/<escaped table>/<partition_id>/<upload_id>/<part>/<file>. upload_id is
 * the freeze name the part was uploaded from: part names are unique only within one server's
 * table, freeze names are unique per server and attempt, so two servers never share a key for
 * different bytes. partition_id, upload_id, part and file must be safe path components
 * (FERRY_EINVAL otherwise). */
int ferry_agent_object_key(const char *prefix, const char *db, const char *table,
                           const char *partition_id, const char *upload_id, const char *part,
                           const char *file, ferry_buf *out, ferry_err *err);

/* The partition id of a part name ("3-20261101-0_1_1_0" -> "3-20261101-0") into out (size
 * outsz); FERRY_EINVAL when name is not <id>_<min>_<max>_<level>[_<mutation>]. */
int ferry_agent_part_partition_id(const char *part, char *out, size_t outsz, ferry_err *err);

/* Whether a server of this version reads pointer files of format version: 1..5 exist; version
 * 5 (full object keys) is read from ClickHouse 23.11 on. FERRY_EINVAL with a message otherwise. */
int ferry_agent_pointer_version_ok(int version, const ferry_ch_version *server, ferry_err *err);

/* ---------------------------------------------------------------------------------------------
 * Client
 * ------------------------------------------------------------------------------------------- */

typedef struct ferry_agent_client ferry_agent_client;

/* url: the agent's base URL (http://host:port, the /agent/v1/ prefix is added); token: its
 * bearer token (copied, wiped on free). timeout_ms: the longest wait for an answer (0: 10 min).
 * Not thread-safe: one client per thread. */
int ferry_agent_client_new(const char *url, const char *token, long timeout_ms,
                           ferry_agent_client **out, ferry_err *err);
void ferry_agent_client_free(ferry_agent_client *c);
/* Changes the longest wait for an answer of the client's next requests (0: 10 min). */
void ferry_agent_client_set_timeout(ferry_agent_client *c, long timeout_ms);

/* POST /agent/v1/<op> with the JSON body req (GET when req is NULL). On a 2xx answer *resp is
 * the answer (caller decrefs). Otherwise the error code follows the status (400 EINVAL, 401/403
 * EAUTH, 404 ENOTFOUND, 409 ECONFLICT, 5xx EREMOTE, no answer ECONNECT/ETIMEOUT) and the message
 * is the agent's "error" text; *resp is then the error answer when there was one (or NULL). */
int ferry_agent_call(ferry_agent_client *c, const char *op, json_t *req, json_t **resp,
                     long *http_status, ferry_err *err);

/* The error code ferry_agent_call gives an answer of this HTTP status (also for the per-part
 * "status" of a many-part answer). */
int ferry_agent_code_for_status(long status);

/* One file to stream: its name inside the part folder and an open descriptor (read with pread
 * from offset 0), or its bytes in memory (data, borrowed; fd then unused). */
typedef struct ferry_agent_send_file {
    const char *name;
    int fd;
    uint64_t size;
    const char *data;
    const char *part; /* a batch: set on each part's first file, the part the files from it on
                       * belong to; NULL otherwise */
} ferry_agent_send_file;

/* Streams a part's files to the agent's receive endpoint (docs/agent.md, "Part stream"):
 * POST /agent/v1/receive?database=..&table=..&part=..&kind=hot|pointer[&disk=..]. Files go in
 * the given order (for a hot part, checksums.txt first so the receiver can verify while it
 * writes). *resp as in ferry_agent_call; *bytes_sent counts body bytes.
 * Test-only fault injection: when the environment variable FERRY_AGENT_TEST_CORRUPT_SEND is
 * "FILE" or "FILE:OFFSET", the byte at OFFSET (default 0) of FILE is flipped after it was hashed,
 * as a transmission error would. */
int ferry_agent_send_part(ferry_agent_client *c, const char *db, const char *table,
                          const char *part, const char *kind, const char *disk,
                          const ferry_agent_send_file *files, size_t n, json_t **resp,
                          long *http_status, uint64_t *bytes_sent, ferry_err *err);
/* The same for several pointer parts of one table in one stream (API 5): POST
 * /agent/v1/receive?database=..&table=..&batch=1&kind=pointer[&disk=..], each part's files
 * after a "P <part>" line (files[i].part set on each part's first file, files[0] included). The
 * receiver places each part as it would alone; *resp lists them under "parts". */
int ferry_agent_send_parts(ferry_agent_client *c, const char *db, const char *table,
                           const char *disk, const ferry_agent_send_file *files, size_t n,
                           json_t **resp, long *http_status, uint64_t *bytes_sent,
                           ferry_err *err);

#endif
