/* Replica selection with ClickHouse's load_balancing semantics (see include/ferry/replica_select.h
 * and docs/replicas.md). Pure: no I/O, no clock, no global state.
 *
 * Which ClickHouse behaviour each part follows (read in ClickHouse's sources, not copied):
 *   - the sort tuple, the per-select random redraw, the decay, the cap, the ignored errors and
 *     the max_tries clamp: src/Common/PoolWithFailoverBase.h (PoolState::compare,
 *     updatePoolStates, updateErrorCounts, updateSharedErrorCounts, getMany);
 *   - the per-policy priorities, round_robin's counter, least_request's sampling:
 *     src/Common/GetPriorityForLoadBalancing.cpp (getPriorityFunc);
 *   - the four host name measures: src/Common/isLocalAddress.cpp;
 *   - first_offset modulo the replica count: src/Client/ConnectionPoolWithFailover.cpp. */
#include "ferry/replica_select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- policies ----------------------------------------------------------------------------- */

static const char *const lb_names[FERRY_LB_COUNT] = {
    [FERRY_LB_RANDOM] = "random",
    [FERRY_LB_NEAREST_HOSTNAME] = "nearest_hostname",
    [FERRY_LB_HOSTNAME_LEVENSHTEIN_DISTANCE] = "hostname_levenshtein_distance",
    [FERRY_LB_HOSTNAME_LONGEST_COMMON_PREFIX] = "hostname_longest_common_prefix",
    [FERRY_LB_HOSTNAME_LONGEST_COMMON_SUFFIX] = "hostname_longest_common_suffix",
    [FERRY_LB_IN_ORDER] = "in_order",
    [FERRY_LB_FIRST_OR_RANDOM] = "first_or_random",
    [FERRY_LB_ROUND_ROBIN] = "round_robin",
    [FERRY_LB_LEAST_REQUEST] = "least_request",
};

bool ferry_lb_parse(const char *name, ferry_lb *out)
{
    if (!name)
        return false;
    for (int i = 0; i < FERRY_LB_COUNT; i++)
        if (strcmp(name, lb_names[i]) == 0) {
            *out = (ferry_lb)i;
            return true;
        }
    /* ferry's own name for the same power-of-two-choices policy. */
    if (strcmp(name, "least_outstanding_requests") == 0) {
        *out = FERRY_LB_LEAST_REQUEST;
        return true;
    }
    return false;
}

const char *ferry_lb_name(ferry_lb policy)
{
    return (unsigned)policy < FERRY_LB_COUNT ? lb_names[policy] : "?";
}

bool ferry_lb_uses_hostname(ferry_lb policy)
{
    return policy == FERRY_LB_NEAREST_HOSTNAME || policy == FERRY_LB_HOSTNAME_LEVENSHTEIN_DISTANCE ||
           policy == FERRY_LB_HOSTNAME_LONGEST_COMMON_PREFIX ||
           policy == FERRY_LB_HOSTNAME_LONGEST_COMMON_SUFFIX;
}

/* ---- host name measures ------------------------------------------------------------------- */

/* isLocalAddress.cpp getHostNamePrefixDistance: differing bytes at equal positions, up to the
 * shorter length. */
size_t ferry_hostname_prefix_distance(const char *local, const char *host)
{
    size_t d = 0;
    for (size_t i = 0; local[i] && host[i]; i++)
        d += local[i] != host[i];
    return d;
}

static unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* isLocalAddress.cpp getHostNameLevenshteinDistance calls levenshteinDistanceCaseInsensitive
 * (the newest code; older releases compared case-sensitively). Classic two-row dynamic
 * programme over the shorter name; host names are short, so the row normally lives on the
 * stack. SIZE_MAX when a very long name cannot get its row. */
size_t ferry_hostname_levenshtein_distance(const char *local, const char *host)
{
    const unsigned char *a = (const unsigned char *)local, *b = (const unsigned char *)host;
    size_t la = strlen(local), lb = strlen(host);
    if (la < lb) {
        const unsigned char *t = a;
        a = b;
        b = t;
        size_t tl = la;
        la = lb;
        lb = tl;
    }
    /* b is the shorter one: one row of lb + 1 cells. */
    size_t stack_row[257];
    size_t *row = stack_row;
    if (lb + 1 > sizeof stack_row / sizeof stack_row[0]) {
        row = malloc((lb + 1) * sizeof *row);
        if (!row)
            return SIZE_MAX;
    }
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0]; /* row[i-1][j-1] */
        row[0] = i;
        unsigned char ca = ascii_lower(a[i - 1]);
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j]; /* row[i-1][j] */
            size_t best = diag + (ca != ascii_lower(b[j - 1]));
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[lb];
    if (row != stack_row)
        free(row);
    return d;
}

/* isLocalAddress.cpp getHostNameLongestCommonPrefix / Suffix: case-sensitive, like
 * nearest_hostname. */
size_t ferry_hostname_common_prefix(const char *local, const char *host)
{
    size_t i = 0;
    while (local[i] && local[i] == host[i])
        i++;
    return i;
}

size_t ferry_hostname_common_suffix(const char *local, const char *host)
{
    size_t la = strlen(local), lb = strlen(host), k = 0;
    while (k < la && k < lb && local[la - 1 - k] == host[lb - 1 - k])
        k++;
    return k;
}

/* ---- randomness --------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void ferry_rsel_rng_seed(ferry_rsel_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** 1.0 (Blackman and Vigna, public domain reference algorithm). */
uint64_t ferry_rsel_rng_next(ferry_rsel_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Rejection sampling: draws below 2^64 mod bound are discarded so every residue is equally
 * likely (ClickHouse takes `rng() % n`, whose bias is negligible at these sizes anyway). */
uint64_t ferry_rsel_rng_below(ferry_rsel_rng *rng, uint64_t bound)
{
    if (bound == 0)
        return 0;
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t x = ferry_rsel_rng_next(rng);
        if (x >= threshold)
            return x % bound;
    }
}

/* ---- settings ----------------------------------------------------------------------------- */

void ferry_rsel_query_default(ferry_rsel_query *q)
{
    memset(q, 0, sizeof *q);
    q->policy = FERRY_LB_RANDOM;
    q->least_request_choice_count = 2;
    q->least_request_bias = 1.0;
}

void ferry_rsel_options_default(ferry_rsel_options *opt)
{
    memset(opt, 0, sizeof *opt);
    ferry_rsel_query_default(&opt->query);
    opt->half_life_ms = 60000;
    opt->error_cap = 1000;
}

/* ---- the selector ------------------------------------------------------------------------- */

struct replica {
    char *host;
    int64_t config_priority;
    uint64_t error_count;
    uint64_t slowdown_count;
    uint64_t in_flight;
    uint64_t successes;
    /* The four host name measures against the local host name, computed once (ClickHouse
     * fills them in ConnectionPoolWithFailover's constructor). */
    uint64_t prefix_distance;
    uint64_t levenshtein_distance;
    uint64_t common_prefix;
    uint64_t common_suffix;
};

/* One row of the sort: PoolState's tuple plus the index, which breaks the (2^-64-rare) tie of
 * equal random numbers so the order is a pure function of the inputs. */
struct sort_key {
    uint64_t error_count;
    uint64_t slowdown_count;
    int64_t config_priority;
    int64_t priority;
    uint64_t random;
    size_t index;
};

struct ferry_replica_selector {
    size_t n;
    struct replica *r;
    ferry_rsel_query query;
    char *local_hostname; /* NULL when none was given */
    uint64_t half_life_ms;
    uint64_t error_cap;
    bool decay_started;       /* ClickHouse: last_error_decrease_time != 0 */
    uint64_t last_decay_ms;
    uint64_t round_robin_used; /* GetPriorityForLoadBalancing::last_used */
    struct sort_key *keys;     /* scratch for select, n entries */
    size_t *candidates;        /* scratch for least_request, n entries */
};

static int check_query(const ferry_rsel_query *q, bool have_local, ferry_err *err)
{
    if ((unsigned)q->policy >= FERRY_LB_COUNT)
        return ferry_err_set(err, FERRY_EINVAL, "replica selection: unknown load_balancing policy %d",
                             (int)q->policy);
    if (ferry_lb_uses_hostname(q->policy) && !have_local)
        return ferry_err_set(err, FERRY_EINVAL,
                             "replica selection: load_balancing %s compares host names but no "
                             "local host name was given; set it or choose another policy",
                             ferry_lb_name(q->policy));
    if (!isfinite(q->least_request_bias) || q->least_request_bias < 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "replica selection: load_balancing_least_request_active_request_bias "
                             "must be a finite number >= 0, got %g",
                             q->least_request_bias);
    return FERRY_OK;
}

void ferry_rsel_free(ferry_replica_selector *sel)
{
    if (!sel)
        return;
    if (sel->r)
        for (size_t i = 0; i < sel->n; i++)
            free(sel->r[i].host);
    free(sel->r);
    free(sel->local_hostname);
    free(sel->keys);
    free(sel->candidates);
    free(sel);
}

int ferry_rsel_create(const char *const *hosts, const int64_t *config_priority, size_t n,
                      const ferry_rsel_options *opt, ferry_replica_selector **out, ferry_err *err)
{
    ferry_rsel_options defaults;
    ferry_replica_selector *sel = NULL;
    int rc = FERRY_OK;

    *out = NULL;
    if (!opt) {
        ferry_rsel_options_default(&defaults);
        opt = &defaults;
    }
    if (n == 0 || !hosts) {
        rc = ferry_err_set(err, FERRY_EINVAL, "replica selection: a replica set needs at least one replica");
        goto out;
    }
    bool have_local = opt->local_hostname && opt->local_hostname[0];
    rc = check_query(&opt->query, have_local, err);
    if (rc)
        goto out;

    sel = calloc(1, sizeof *sel);
    if (!sel) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "replica selection: out of memory");
        goto out;
    }
    sel->n = n;
    sel->query = opt->query;
    sel->half_life_ms = opt->half_life_ms;
    sel->error_cap = opt->error_cap;
    sel->r = calloc(n, sizeof *sel->r);
    sel->keys = calloc(n, sizeof *sel->keys);
    sel->candidates = calloc(n, sizeof *sel->candidates);
    if (have_local)
        sel->local_hostname = strdup(opt->local_hostname);
    if (!sel->r || !sel->keys || !sel->candidates || (have_local && !sel->local_hostname)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "replica selection: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct replica *r = &sel->r[i];
        if (!hosts[i] || !hosts[i][0]) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "replica selection: replica %zu has an empty host name", i + 1);
            goto out;
        }
        r->host = strdup(hosts[i]);
        if (!r->host) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "replica selection: out of memory");
            goto out;
        }
        /* PoolState::config_priority defaults to 1 when <priority> is not configured. */
        r->config_priority = config_priority ? config_priority[i] : 1;
        if (have_local) {
            r->prefix_distance = ferry_hostname_prefix_distance(sel->local_hostname, r->host);
            r->levenshtein_distance = ferry_hostname_levenshtein_distance(sel->local_hostname, r->host);
            r->common_prefix = ferry_hostname_common_prefix(sel->local_hostname, r->host);
            r->common_suffix = ferry_hostname_common_suffix(sel->local_hostname, r->host);
            if (r->levenshtein_distance == SIZE_MAX) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "replica selection: out of memory");
                goto out;
            }
        }
    }
    *out = sel;
    sel = NULL;
out:
    ferry_rsel_free(sel);
    return rc;
}

size_t ferry_rsel_count(const ferry_replica_selector *sel)
{
    return sel->n;
}

const char *ferry_rsel_host(const ferry_replica_selector *sel, size_t i)
{
    return i < sel->n ? sel->r[i].host : NULL;
}

/* PoolWithFailoverBase::updateErrorCounts with a millisecond clock: once at least one full
 * half-life has passed since the last decrease, shift the counts right by the number of whole
 * periods and set the last decrease to now (the remainder of the period is dropped, as in
 * ClickHouse, so frequent selects cannot postpone the decay forever but a partial period is
 * not carried over either). 64 or more periods, or a zero half-life, reset the counts. The
 * first call only starts the clock. A clock that went backwards changes nothing. */
static void decay(ferry_replica_selector *sel, uint64_t now_ms)
{
    if (!sel->decay_started) {
        sel->decay_started = true;
        sel->last_decay_ms = now_ms;
        return;
    }
    if (now_ms < sel->last_decay_ms)
        return;
    uint64_t delta = now_ms - sel->last_decay_ms;
    uint64_t shift = sel->half_life_ms ? delta / sel->half_life_ms : 64;
    if (shift == 0)
        return;
    sel->last_decay_ms = now_ms;
    for (size_t i = 0; i < sel->n; i++) {
        struct replica *r = &sel->r[i];
        if (shift >= 64) {
            r->error_count = 0;
            r->slowdown_count = 0;
        } else {
            r->error_count >>= shift;
            r->slowdown_count >>= shift;
        }
    }
}

/* GetPriorityForLoadBalancing LEAST_REQUEST: sample max(2, choice_count) distinct replicas
 * (capped at n) with a partial Fisher-Yates shuffle, score each 1 / (in_flight + 1)^bias and
 * keep the first strictly best; the winner's priority is 0, everyone else's 1. */
static size_t least_request_winner(ferry_replica_selector *sel, const ferry_rsel_query *q,
                                   ferry_rsel_rng *rng)
{
    size_t n = sel->n;
    size_t choices = q->least_request_choice_count < 2 ? 2 : q->least_request_choice_count;
    if (choices > n)
        choices = n;
    size_t *c = sel->candidates;
    for (size_t i = 0; i < n; i++)
        c[i] = i;
    for (size_t i = 0; i + 1 < n && i < choices; i++) {
        size_t j = i + (size_t)ferry_rsel_rng_below(rng, n - i);
        size_t t = c[i];
        c[i] = c[j];
        c[j] = t;
    }
    size_t best = c[0];
    double best_score = 0;
    for (size_t i = 0; i < choices; i++) {
        double active = (double)sel->r[c[i]].in_flight;
        /* bias 1 (the default) is a plain division; skip pow for it. */
        double score = q->least_request_bias == 1.0 ? 1.0 / (active + 1.0)
                                                    : 1.0 / pow(active + 1.0, q->least_request_bias);
        if (score > best_score) { /* strict: ties keep the earlier, randomly placed candidate */
            best_score = score;
            best = c[i];
        }
    }
    return best;
}

/* The policy priority of replica i (lower is preferred). */
static int64_t policy_priority(const ferry_replica_selector *sel, const ferry_rsel_query *q,
                               size_t i, size_t offset, size_t rr_last, size_t lr_best)
{
    const struct replica *r = &sel->r[i];
    size_t n = sel->n;
    switch (q->policy) {
    case FERRY_LB_NEAREST_HOSTNAME:
        return (int64_t)r->prefix_distance;
    case FERRY_LB_HOSTNAME_LEVENSHTEIN_DISTANCE:
        return (int64_t)r->levenshtein_distance;
    case FERRY_LB_HOSTNAME_LONGEST_COMMON_PREFIX:
        return -(int64_t)r->common_prefix; /* a similarity: negated so longer wins */
    case FERRY_LB_HOSTNAME_LONGEST_COMMON_SUFFIX:
        return -(int64_t)r->common_suffix;
    case FERRY_LB_IN_ORDER:
        return (int64_t)i;
    case FERRY_LB_FIRST_OR_RANDOM:
        return i == offset ? 0 : 1;
    case FERRY_LB_LEAST_REQUEST:
        return i == lr_best ? 0 : 1;
    case FERRY_LB_ROUND_ROBIN:
        /* The replica right after rr_last gets 0, the one after that 1, ..., rr_last itself
         * n - 1: the rotation starts one past the counter. */
        if (i > rr_last)
            return (int64_t)(i - rr_last - 1);
        if (i < rr_last)
            return (int64_t)(n - 1 - (rr_last - i));
        return (int64_t)(n - 1);
    case FERRY_LB_RANDOM:
    default:
        return 0; /* no priority function: the random number decides ties */
    }
}

/* PoolState::compare: lexicographic on (error_count, [slowdown_count], config_priority,
 * priority, random). */
static bool key_less(const struct sort_key *a, const struct sort_key *b, bool use_slowdown)
{
    if (a->error_count != b->error_count)
        return a->error_count < b->error_count;
    if (use_slowdown && a->slowdown_count != b->slowdown_count)
        return a->slowdown_count < b->slowdown_count;
    if (a->config_priority != b->config_priority)
        return a->config_priority < b->config_priority;
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->random != b->random)
        return a->random < b->random;
    return a->index < b->index;
}

int ferry_rsel_select_query(ferry_replica_selector *sel, const ferry_rsel_query *q,
                            uint64_t now_ms, ferry_rsel_rng *rng, size_t *order, ferry_err *err)
{
    if (!sel || !rng || !order)
        return ferry_err_set(err, FERRY_EINVAL, "replica selection: missing selector, rng or order");
    if (!q)
        q = &sel->query;
    int rc = check_query(q, sel->local_hostname != NULL, err);
    if (rc)
        return rc;

    size_t n = sel->n;
    /* ConnectionPoolWithFailover::get: offset = load_balancing_first_offset % pool size. */
    size_t offset = (size_t)(q->first_offset % n);
    /* GetPriorityForLoadBalancing ROUND_ROBIN: the counter advances only for round_robin
     * selects; the pre-increment value modulo n is the "last used" replica. */
    size_t rr_last = 0;
    if (q->policy == FERRY_LB_ROUND_ROBIN)
        rr_last = (size_t)(sel->round_robin_used++ % n);
    size_t lr_best = 0;
    if (q->policy == FERRY_LB_LEAST_REQUEST)
        lr_best = least_request_winner(sel, q, rng);

    /* updatePoolStates: decay the shared counts, redraw every random number, then take
     * distributed_replica_max_ignored_errors off a copy of each error count. */
    decay(sel, now_ms);
    struct sort_key *keys = sel->keys;
    for (size_t i = 0; i < n; i++) {
        const struct replica *r = &sel->r[i];
        struct sort_key *k = &keys[i];
        k->error_count = r->error_count > q->max_ignored_errors ? r->error_count - q->max_ignored_errors : 0;
        k->slowdown_count = r->slowdown_count;
        k->config_priority = r->config_priority;
        k->priority = policy_priority(sel, q, i, offset, rr_last, lr_best);
        k->random = ferry_rsel_rng_next(rng);
        k->index = i;
    }
    /* Insertion sort: n is a handful of replicas, and it needs no allocation. */
    for (size_t i = 1; i < n; i++) {
        struct sort_key k = keys[i];
        size_t j = i;
        while (j > 0 && key_less(&k, &keys[j - 1], q->use_slowdown_count)) {
            keys[j] = keys[j - 1];
            j--;
        }
        keys[j] = k;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = keys[i].index;
    return FERRY_OK;
}

int ferry_rsel_select(ferry_replica_selector *sel, uint64_t now_ms, ferry_rsel_rng *rng,
                      size_t *order, ferry_err *err)
{
    return ferry_rsel_select_query(sel, NULL, now_ms, rng, order, err);
}

static int check_index(const ferry_replica_selector *sel, size_t i, ferry_err *err)
{
    if (!sel || i >= sel->n)
        return ferry_err_set(err, FERRY_EINVAL, "replica selection: replica index %zu out of range (%zu replicas)",
                             i, sel ? sel->n : 0);
    return FERRY_OK;
}

/* updateSharedErrorCounts: the shared count grows by the new errors, capped at the error cap. */
int ferry_rsel_report_error(ferry_replica_selector *sel, size_t i, ferry_err *err)
{
    int rc = check_index(sel, i, err);
    if (rc)
        return rc;
    struct replica *r = &sel->r[i];
    if (r->error_count < sel->error_cap)
        r->error_count++;
    else
        r->error_count = sel->error_cap;
    return FERRY_OK;
}

int ferry_rsel_report_slowdown(ferry_replica_selector *sel, size_t i, ferry_err *err)
{
    int rc = check_index(sel, i, err);
    if (rc)
        return rc;
    if (sel->r[i].slowdown_count < UINT64_MAX)
        sel->r[i].slowdown_count++;
    return FERRY_OK;
}

int ferry_rsel_report_success(ferry_replica_selector *sel, size_t i, ferry_err *err)
{
    int rc = check_index(sel, i, err);
    if (rc)
        return rc;
    sel->r[i].successes++;
    return FERRY_OK;
}

int ferry_rsel_begin(ferry_replica_selector *sel, size_t i, ferry_err *err)
{
    int rc = check_index(sel, i, err);
    if (rc)
        return rc;
    sel->r[i].in_flight++;
    return FERRY_OK;
}

int ferry_rsel_end(ferry_replica_selector *sel, size_t i, ferry_err *err)
{
    int rc = check_index(sel, i, err);
    if (rc)
        return rc;
    if (sel->r[i].in_flight == 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "replica selection: request end on %s without a matching begin",
                             sel->r[i].host);
    sel->r[i].in_flight--;
    return FERRY_OK;
}

uint64_t ferry_rsel_max_tries(const ferry_replica_selector *sel, uint64_t wanted)
{
    return wanted > sel->error_cap ? sel->error_cap : wanted;
}

int ferry_rsel_get_state(const ferry_replica_selector *sel, size_t i, ferry_rsel_state *out,
                         ferry_err *err)
{
    int rc = check_index(sel, i, err);
    if (rc)
        return rc;
    const struct replica *r = &sel->r[i];
    out->error_count = r->error_count;
    out->slowdown_count = r->slowdown_count;
    out->in_flight = r->in_flight;
    out->successes = r->successes;
    out->config_priority = r->config_priority;
    return FERRY_OK;
}
