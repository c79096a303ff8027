/* The router fence: how a move (lib/flow) waits for every running router of the cluster
 * (`[cluster] routers`) before it switches a slice and before it publishes. A client of the
 * routers' status endpoint (GET /ferry/router): lib/router_client/, in the io layer below the
 * flows and the router daemon (docs/routing.md, "Moves and the router"; docs/architecture.md,
 * "Layers"). */
#ifndef FERRY_FENCE_H
#define FERRY_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

struct ferry_config;
/* The fence a move passes after its routing switch and before it publishes: waits until every
 * router listed in [cluster] routers (base URLs, comma-separated) reports a routing version >=
 * version and no read or write in flight under an older one (GET /ferry/router). FERRY_OK at once when the config lists
 * none; FERRY_ETIMEOUT naming the router after timeout_ms (0: 60 s). */
int ferry_router_fence(const struct ferry_config *cfg, uint64_t version, unsigned timeout_ms,
                       ferry_err *err);
/* The fence before a move switches slice (tenant, split) to shard: waits until every router in
 * [cluster] routers lists shard as usable in its status (it loaded the shard's catalog record and
 * can read its credentials) and expects no client's retry of a failed write to the slice (a
 * request that stored part of its rows is retried where its rows are; docs/routing.md "Retries
 * and moves"). The shard part times out after timeout_ms (0: 60 s); a pending retry is waited for
 * as long as the router's [router] retry_window says. FERRY_ETIMEOUT naming the router and why. */
int ferry_router_fence_switch(const struct ferry_config *cfg, const char *shard,
                              const char *tenant, uint32_t split, unsigned timeout_ms,
                              ferry_err *err);

/* Whether a router of [cluster] routers expects a client's retry of a failed write to slice
 * (tenant, split) now (its status's pending_retry_ms; one look, no wait). A flow that gives
 * ClickHouse parts under new names (a move's copy, a repair's, tiering's swap) must not do so
 * then: the copy carries no deduplication token, and a swap drops the block ids of the parts it
 * detaches from ClickHouse's deduplication log, so the retry would store the rows a second time
 * (docs/routing.md "Retries and moves"). *why (whysz bytes) names the router and how long. A
 * router that does not answer: true (restarted on its retry journal it holds again what it
 * expected; a router gone for good must leave [cluster] routers, as the move's fence needs); no
 * routers listed: false. tenant NULL: whether a router expects a retry for any slice (one look
 * at each router's pending_retry_slices, for a caller about to ask of many slices). inflight_ms
 * > 0: also true while a write that has been sending rows of the slice (any slice: tenant NULL)
 * for at least inflight_ms is still open (the router's inflight_write_ms): a caller that took
 * parts inflight_ms ago (tiering's freeze) may hold rows of it, and it may still fail. */
bool ferry_router_retry_pending(const struct ferry_config *cfg, const char *tenant,
                                uint32_t split, uint64_t inflight_ms, char *why, size_t whysz);

/* How long a flow that gives a replica parts under new names waits for open writes (below). */
#define FERRY_OPEN_WRITES_WAIT_MS 3000u

/* Waits until no router of [cluster] routers has a write to slice (tenant, split) that was
 * already open when the call began, nor expects a client's retry of one, nor fails to answer
 * (ferry_router_retry_pending). Such a write may have stored rows on a replica a repair or a
 * clone is about to give copied parts (which carry no block ids) or replace, and still fail: its
 * retry would be stored again. Writes that begin later are not waited for. FERRY_ETIMEOUT
 * naming the router and the write after max_ms (or when the process is asked to stop). */
int ferry_router_wait_open_writes(const struct ferry_config *cfg, const char *tenant,
                                  uint32_t split, unsigned max_ms, ferry_err *err);

#endif
