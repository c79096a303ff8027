/* Per-query replica picking for reads (docs/replicas.md, "Replica selection in the router").
 *
 * A slice with rf > 1 can be read from any of its candidate servers. For each query the router
 * picks one server per slice, groups the slices by server (each server is sent only the slices
 * it was picked for), and when a server cannot be reached moves exactly that server's
 * unanswered slices to their next candidates.
 *
 * Two pure parts (no I/O, no clock, no locks; the caller serialises access):
 *
 *   ferry_rsets   the router's long-lived replica selectors, one per candidate list (an ordered
 *                 list of server indices, e.g. a slice's route {2, 0}), each a
 *                 ferry_replica_selector over those servers. Errors and requests in flight are
 *                 reported per server and reach every selector that lists the server, so a
 *                 server that failed sorts last for every slice it serves.
 *   ferry_rpick   one query's assignment: per slice, the order of its candidates for this query
 *                 and which one is current; failing a server advances its unanswered slices.
 *
 * Ownership: *out of the constructors is the caller's (ferry_rsets_free, ferry_rpick_free). */
#ifndef FERRY_READ_PICK_H
#define FERRY_READ_PICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/replica_select.h"

/* ---- selectors per candidate list ----------------------------------------------------------- */

typedef struct ferry_rsets ferry_rsets;

/* n_servers servers named names[i] (the host names the host-name policies compare; copied).
 * opt: the selector options every list's selector gets (NULL: defaults). */
int ferry_rsets_new(const char *const *names, size_t n_servers, const ferry_rsel_options *opt,
                    ferry_rsets **out, ferry_err *err);
void ferry_rsets_free(ferry_rsets *rs);
/* Adds a server (its host name, for the host name policies) as the next index, *index. Servers
 * are never removed: a server no candidate list names costs nothing. */
int ferry_rsets_add_server(ferry_rsets *rs, const char *name, uint32_t *index, ferry_err *err);

/* Orders the candidate list cand[0..n) (distinct server indices, in route order: `in_order` and
 * `first_or_random` prefer cand[0]) for one slice of one query: out[0..n) gets the server
 * indices, best first, with the policy, the error counts (decayed to now_ms) and the in-flight
 * counts. The list's selector is created on first use. FERRY_EINVAL for an empty list, an index
 * out of range or a repeated server. */
int ferry_rsets_order(ferry_rsets *rs, const uint32_t *cand, size_t n, uint64_t now_ms,
                      ferry_rsel_rng *rng, uint32_t *out, ferry_err *err);

/* Per-server reports, forwarded to every selector listing the server: a request starts / ends
 * (least_request), a connection error or timeout (error count + 1, capped), a success. */
void ferry_rsets_begin(ferry_rsets *rs, uint32_t server);
void ferry_rsets_end(ferry_rsets *rs, uint32_t server);
void ferry_rsets_error(ferry_rsets *rs, uint32_t server);
void ferry_rsets_success(ferry_rsets *rs, uint32_t server);

/* The server's error count in the selectors that list it (the largest; they agree unless a
 * selector was created after errors were reported). 0 when no selector lists it. */
uint64_t ferry_rsets_errors(ferry_rsets *rs, uint32_t server);
size_t ferry_rsets_count(const ferry_rsets *rs); /* selectors created so far */

/* ---- one query's assignment ----------------------------------------------------------------- */

typedef struct ferry_rpick ferry_rpick;

#define FERRY_RPICK_NONE UINT32_MAX

int ferry_rpick_new(size_t n_servers, ferry_rpick **out);
void ferry_rpick_free(ferry_rpick *p);

/* Adds a slice whose candidates, in the order to try them for this query, are order[0..n)
 * (n >= 1, server indices < n_servers). Its current server is the first one that has not
 * failed in this query (FERRY_RPICK_NONE when every one has). *index (may be NULL) gets the
 * slice's index (0, 1, ... in the order of the calls). */
int ferry_rpick_add(ferry_rpick *p, const uint32_t *order, size_t n, size_t *index);

size_t ferry_rpick_count(const ferry_rpick *p);
/* The slice's current server, FERRY_RPICK_NONE when none is left. */
uint32_t ferry_rpick_server(const ferry_rpick *p, size_t slice);
bool ferry_rpick_is_answered(const ferry_rpick *p, size_t slice);
/* The slice's candidates in this query's order (borrowed; *n gets the count; NULL when out of
 * range). */
const uint32_t *ferry_rpick_order(const ferry_rpick *p, size_t slice, size_t *n);
/* The servers tried for the slice so far, including the current one, in order: at most max
 * written to out; returns how many there are. */
size_t ferry_rpick_tried(const ferry_rpick *p, size_t slice, uint32_t *out, size_t max);

/* The server answered for every slice it currently holds. */
void ferry_rpick_answered(ferry_rpick *p, uint32_t server);
/* The server could not be reached (connection error or timeout) in this query: each slice it
 * holds and has not answered moves to its next candidate that has not failed in this query;
 * slices already answered stay where they are. FERRY_ENOTFOUND when a slice has no candidate
 * left (*lost, if not NULL, gets the first such slice; the other slices still moved). */
int ferry_rpick_fail(ferry_rpick *p, uint32_t server, size_t *lost);
bool ferry_rpick_server_failed(const ferry_rpick *p, uint32_t server);
/* Whether some slice on the server still waits for an answer. */
bool ferry_rpick_pending(const ferry_rpick *p, uint32_t server);

#endif
