/* Replica selection: which replica of a slice's shard to ask first, and in which order to fail
 * over, with ClickHouse's `load_balancing` semantics (PoolWithFailoverBase and
 * GetPriorityForLoadBalancing; docs/replicas.md has the details and every difference).
 *
 * One selector per replica set (a shard's replicas, or a slice's replica set). It keeps, per
 * replica, the error and slowdown counts (decaying with a half-life, capped), the configured
 * priority and the number of requests in flight. `ferry_rsel_select` returns all replicas in
 * the order to try them, sorted by the tuple
 *     (error_count - max_ignored_errors floored at 0, [slowdown_count when hedged],
 *      config_priority, policy priority, random)
 * exactly as ClickHouse sorts its pool states. The router tries the first and, on a connection
 * error or timeout, reports the error and moves on to the next one.
 *
 * The module is pure: no I/O, no clock, no global state. Time is the caller's `now_ms` (any
 * monotonic millisecond clock) and randomness comes from a caller-owned ferry_rsel_rng.
 *
 * Thread-safety: a selector is not internally locked. Every function taking a non-const
 * selector mutates it (select advances the decay clock and the round-robin counter) and needs
 * exclusive access: hold one mutex around each call (they are O(1), select is O(n^2) on n
 * replicas with n small and allocates nothing), or give each worker its own selector. A
 * ferry_rsel_rng must not be shared between threads either.
 *
 * Ownership: ferry_rsel_create copies every string it is given; the selector is freed with
 * ferry_rsel_free. Host names returned by ferry_rsel_host borrow from the selector. */
#ifndef FERRY_REPLICA_SELECT_H
#define FERRY_REPLICA_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

/* ---- policies ----------------------------------------------------------------------------- */

/* The `load_balancing` policies. The names are ClickHouse's setting values. */
typedef enum ferry_lb {
    FERRY_LB_RANDOM = 0,                    /* "random" */
    FERRY_LB_NEAREST_HOSTNAME,              /* "nearest_hostname" */
    FERRY_LB_HOSTNAME_LEVENSHTEIN_DISTANCE, /* "hostname_levenshtein_distance" */
    FERRY_LB_HOSTNAME_LONGEST_COMMON_PREFIX,/* "hostname_longest_common_prefix" */
    FERRY_LB_HOSTNAME_LONGEST_COMMON_SUFFIX,/* "hostname_longest_common_suffix" */
    FERRY_LB_IN_ORDER,                      /* "in_order" */
    FERRY_LB_FIRST_OR_RANDOM,               /* "first_or_random" */
    FERRY_LB_ROUND_ROBIN,                   /* "round_robin" */
    FERRY_LB_LEAST_REQUEST                  /* "least_request", alias "least_outstanding_requests" */
} ferry_lb;

#define FERRY_LB_COUNT 9

/* Setting value -> policy (exact, lower case); false for anything else. */
bool ferry_lb_parse(const char *name, ferry_lb *out);
/* The canonical name ("least_request" for FERRY_LB_LEAST_REQUEST); "?" when out of range. */
const char *ferry_lb_name(ferry_lb policy);
/* True for the four policies that compare host names with the local host name. */
bool ferry_lb_uses_hostname(ferry_lb policy);

/* ---- host name measures (ClickHouse's isLocalAddress.cpp) --------------------------------- */

/* nearest_hostname: the number of positions i < min(len a, len b) where the bytes differ
 * (case-sensitive; the longer name's tail does not count). */
size_t ferry_hostname_prefix_distance(const char *local, const char *host);
/* hostname_levenshtein_distance: Levenshtein distance after ASCII lower-casing both names. */
size_t ferry_hostname_levenshtein_distance(const char *local, const char *host);
/* hostname_longest_common_prefix / _suffix: length of the common prefix / suffix in bytes,
 * case-sensitive. */
size_t ferry_hostname_common_prefix(const char *local, const char *host);
size_t ferry_hostname_common_suffix(const char *local, const char *host);

/* ---- randomness --------------------------------------------------------------------------- */

/* xoshiro256** state, seeded through splitmix64 so that any 64-bit seed (0 included) works.
 * Owned by the caller; one per thread. */
typedef struct ferry_rsel_rng {
    uint64_t s[4];
} ferry_rsel_rng;

void ferry_rsel_rng_seed(ferry_rsel_rng *rng, uint64_t seed);
uint64_t ferry_rsel_rng_next(ferry_rsel_rng *rng);
/* Uniform in [0, bound) without modulo bias; bound 0 returns 0. */
uint64_t ferry_rsel_rng_below(ferry_rsel_rng *rng, uint64_t bound);

/* ---- settings ----------------------------------------------------------------------------- */

/* Per-query settings (ClickHouse query settings of the same names). */
typedef struct ferry_rsel_query {
    ferry_lb policy;             /* load_balancing */
    uint64_t first_offset;       /* load_balancing_first_offset, taken modulo the replica count */
    uint64_t max_ignored_errors; /* distributed_replica_max_ignored_errors */
    bool use_slowdown_count;     /* hedged requests: slowdowns sort right after errors */
    uint32_t least_request_choice_count; /* load_balancing_least_request_choice_count (2);
                                            values below 2 count as 2 */
    double least_request_bias;   /* load_balancing_least_request_active_request_bias (1.0),
                                    finite and >= 0 */
} ferry_rsel_query;

typedef struct ferry_rsel_options {
    ferry_rsel_query query;     /* the settings ferry_rsel_select uses */
    const char *local_hostname; /* this host's name; required by the host name policies */
    uint64_t half_life_ms;      /* distributed_replica_error_half_life (60 s); 0 = counts are
                                   reset on every select */
    uint64_t error_cap;         /* distributed_replica_error_cap (1000) */
} ferry_rsel_options;

/* ClickHouse's defaults: random, offset 0, no ignored errors, no slowdowns, least_request with
 * 2 choices and bias 1.0, no local host name, half-life 60000 ms, cap 1000. */
void ferry_rsel_options_default(ferry_rsel_options *opt);
void ferry_rsel_query_default(ferry_rsel_query *q);

/* ---- the selector ------------------------------------------------------------------------- */

typedef struct ferry_replica_selector ferry_replica_selector;

/* A selector over n >= 1 replicas. hosts[i] is replica i's host name without port (the host
 * name policies compare it with opt->local_hostname). config_priority[i] is the replica's
 * configured priority, lower is preferred (ClickHouse `<priority>`); NULL means 1 for all.
 * opt NULL means the defaults. FERRY_EINVAL for an empty set, a NULL or empty host name, bad
 * settings, or a host name policy without a local host name. *out is owned by the caller. */
int ferry_rsel_create(const char *const *hosts, const int64_t *config_priority, size_t n,
                      const ferry_rsel_options *opt, ferry_replica_selector **out,
                      ferry_err *err);
void ferry_rsel_free(ferry_replica_selector *sel);

size_t ferry_rsel_count(const ferry_replica_selector *sel);
/* Replica i's host name (borrowed), NULL when i is out of range. */
const char *ferry_rsel_host(const ferry_replica_selector *sel, size_t i);

/* Writes all n replica indices to order[0..n-1] (the caller's array of ferry_rsel_count
 * entries), best first, with the selector's settings. First decays the error counts to now_ms.
 * FERRY_EINVAL only for bad arguments. */
int ferry_rsel_select(ferry_replica_selector *sel, uint64_t now_ms, ferry_rsel_rng *rng,
                      size_t *order, ferry_err *err);
/* The same with explicit per-query settings (q NULL = the selector's). FERRY_EINVAL when q
 * names a host name policy and the selector has no local host name, or q is invalid. */
int ferry_rsel_select_query(ferry_replica_selector *sel, const ferry_rsel_query *q,
                            uint64_t now_ms, ferry_rsel_rng *rng, size_t *order, ferry_err *err);

/* A connection error or timeout on replica i: error_count = min(error_cap, error_count + 1). */
int ferry_rsel_report_error(ferry_replica_selector *sel, size_t i, ferry_err *err);
/* A hedged-request slowdown on replica i (slowdown_count + 1; not capped, as in ClickHouse). */
int ferry_rsel_report_slowdown(ferry_replica_selector *sel, size_t i, ferry_err *err);
/* A successful request on replica i. Counted for statistics only: as in ClickHouse, success
 * does not lower the error count; only the half-life does. */
int ferry_rsel_report_success(ferry_replica_selector *sel, size_t i, ferry_err *err);
/* A request to replica i starts / ends (least_request reads these in-flight counts). end on a
 * replica with nothing in flight is FERRY_EINVAL and changes nothing. */
int ferry_rsel_begin(ferry_replica_selector *sel, size_t i, ferry_err *err);
int ferry_rsel_end(ferry_replica_selector *sel, size_t i, ferry_err *err);

/* The tries a caller may make on one replica within one query: ClickHouse's getMany clamps
 * max_tries to the error cap. */
uint64_t ferry_rsel_max_tries(const ferry_replica_selector *sel, uint64_t wanted);

/* A snapshot of replica i, as last decayed by a select (ClickHouse's system.clusters shows
 * the shared counts the same way). */
typedef struct ferry_rsel_state {
    uint64_t error_count;
    uint64_t slowdown_count;
    uint64_t in_flight;
    uint64_t successes;
    int64_t config_priority;
} ferry_rsel_state;

int ferry_rsel_get_state(const ferry_replica_selector *sel, size_t i, ferry_rsel_state *out,
                         ferry_err *err);

#endif
