/* Per-query replica picking for reads: selectors per candidate list with per-server reports, and
 * one query's slice -> server assignment with failover (include/ferry/read_pick.h). Pure. */
#include "ferry/read_pick.h"

#include <stdlib.h>
#include <string.h>

/* ---- selectors per candidate list ----------------------------------------------------------- */

typedef struct rs_set {
    uint32_t *servers; /* the candidate list, in route order */
    size_t n;
    ferry_replica_selector *sel;
} rs_set;

struct ferry_rsets {
    size_t n_servers, cap_servers;
    char **names;
    ferry_rsel_options opt;
    char *local; /* owned copy of opt.local_hostname */
    rs_set *sets;
    size_t n_sets, cap_sets;
};

int ferry_rsets_new(const char *const *names, size_t n_servers, const ferry_rsel_options *opt,
                    ferry_rsets **out, ferry_err *err)
{
    *out = NULL;
    if (!names && n_servers)
        return ferry_err_set(err, FERRY_EINVAL, "replica sets: no server names");
    ferry_rsets *rs = calloc(1, sizeof *rs);
    if (!rs)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = FERRY_OK;
    for (size_t i = 0; i < n_servers && !rc; i++) {
        uint32_t idx;
        rc = ferry_rsets_add_server(rs, names[i], &idx, err);
    }
    if (rc)
        goto out;
    if (opt)
        rs->opt = *opt;
    else
        ferry_rsel_options_default(&rs->opt);
    if (rs->opt.local_hostname) {
        if (!(rs->local = strdup(rs->opt.local_hostname))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        rs->opt.local_hostname = rs->local;
    }
out:
    if (rc) {
        ferry_rsets_free(rs);
        return rc;
    }
    *out = rs;
    return FERRY_OK;
}

int ferry_rsets_add_server(ferry_rsets *rs, const char *name, uint32_t *index, ferry_err *err)
{
    if (!name || !*name)
        return ferry_err_set(err, FERRY_EINVAL, "replica sets: server %zu has no name",
                             rs->n_servers);
    if (rs->n_servers >= UINT32_MAX - 1)
        return ferry_err_set(err, FERRY_EINVAL, "replica sets: too many servers");
    if (rs->n_servers == rs->cap_servers) {
        size_t cap = rs->cap_servers ? 2 * rs->cap_servers : 16;
        char **p = realloc(rs->names, cap * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        rs->names = p;
        rs->cap_servers = cap;
    }
    if (!(rs->names[rs->n_servers] = strdup(name)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    *index = (uint32_t)rs->n_servers++;
    return FERRY_OK;
}

void ferry_rsets_free(ferry_rsets *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->n_sets; i++) {
        free(rs->sets[i].servers);
        ferry_rsel_free(rs->sets[i].sel);
    }
    free(rs->sets);
    for (size_t i = 0; rs->names && i < rs->n_servers; i++)
        free(rs->names[i]);
    free(rs->names);
    free(rs->local);
    free(rs);
}

static rs_set *find_set(ferry_rsets *rs, const uint32_t *cand, size_t n)
{
    for (size_t i = 0; i < rs->n_sets; i++)
        if (rs->sets[i].n == n && !memcmp(rs->sets[i].servers, cand, n * sizeof *cand))
            return &rs->sets[i];
    return NULL;
}

static int add_set(ferry_rsets *rs, const uint32_t *cand, size_t n, rs_set **out, ferry_err *err)
{
    const char *hosts[64];
    if (n > 64)
        return ferry_err_set(err, FERRY_EINVAL, "replica sets: more than 64 candidates");
    for (size_t i = 0; i < n; i++)
        hosts[i] = rs->names[cand[i]];
    if (rs->n_sets == rs->cap_sets) {
        size_t cap = rs->cap_sets ? 2 * rs->cap_sets : 8;
        rs_set *p = realloc(rs->sets, cap * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        rs->sets = p;
        rs->cap_sets = cap;
    }
    rs_set *s = &rs->sets[rs->n_sets];
    memset(s, 0, sizeof *s);
    s->servers = malloc(n * sizeof *s->servers);
    if (!s->servers)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    memcpy(s->servers, cand, n * sizeof *cand);
    s->n = n;
    int rc = ferry_rsel_create(hosts, NULL, n, &rs->opt, &s->sel, err);
    if (rc) {
        free(s->servers);
        return rc;
    }
    rs->n_sets++;
    *out = s;
    return FERRY_OK;
}

int ferry_rsets_order(ferry_rsets *rs, const uint32_t *cand, size_t n, uint64_t now_ms,
                      ferry_rsel_rng *rng, uint32_t *out, ferry_err *err)
{
    if (!n || n > 64)
        return ferry_err_set(err, FERRY_EINVAL, "replica sets: %zu candidates (1..64)", n);
    for (size_t i = 0; i < n; i++) {
        if (cand[i] >= rs->n_servers)
            return ferry_err_set(err, FERRY_EINVAL, "replica sets: server %u out of range",
                                 (unsigned)cand[i]);
        for (size_t k = 0; k < i; k++)
            if (cand[k] == cand[i])
                return ferry_err_set(err, FERRY_EINVAL, "replica sets: server %u listed twice",
                                     (unsigned)cand[i]);
    }
    if (n == 1) {
        out[0] = cand[0];
        return FERRY_OK;
    }
    rs_set *s = find_set(rs, cand, n);
    if (!s) {
        int rc = add_set(rs, cand, n, &s, err);
        if (rc)
            return rc;
    }
    size_t order[64];
    int rc = ferry_rsel_select(s->sel, now_ms, rng, order, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        out[i] = s->servers[order[i]];
    return FERRY_OK;
}

/* Calls fn on every (selector, position) that lists the server. */
static void each_listing(ferry_rsets *rs, uint32_t server,
                         int (*fn)(ferry_replica_selector *, size_t, ferry_err *))
{
    for (size_t i = 0; i < rs->n_sets; i++)
        for (size_t k = 0; k < rs->sets[i].n; k++)
            if (rs->sets[i].servers[k] == server)
                (void)fn(rs->sets[i].sel, k, NULL); /* only index errors, impossible here */
}

void ferry_rsets_begin(ferry_rsets *rs, uint32_t server)
{
    each_listing(rs, server, ferry_rsel_begin);
}

void ferry_rsets_end(ferry_rsets *rs, uint32_t server)
{
    /* a selector created while the request was in flight has nothing to end: refused there,
     * nothing changes */
    each_listing(rs, server, ferry_rsel_end);
}

void ferry_rsets_error(ferry_rsets *rs, uint32_t server)
{
    each_listing(rs, server, ferry_rsel_report_error);
}

void ferry_rsets_success(ferry_rsets *rs, uint32_t server)
{
    each_listing(rs, server, ferry_rsel_report_success);
}

uint64_t ferry_rsets_errors(ferry_rsets *rs, uint32_t server)
{
    uint64_t most = 0;
    for (size_t i = 0; i < rs->n_sets; i++)
        for (size_t k = 0; k < rs->sets[i].n; k++) {
            ferry_rsel_state st;
            if (rs->sets[i].servers[k] == server &&
                !ferry_rsel_get_state(rs->sets[i].sel, k, &st, NULL) && st.error_count > most)
                most = st.error_count;
        }
    return most;
}

size_t ferry_rsets_count(const ferry_rsets *rs)
{
    return rs->n_sets;
}

/* ---- one query's assignment ----------------------------------------------------------------- */

typedef struct rp_slice {
    uint32_t *order;
    uint32_t n;
    uint32_t at;   /* index in order of the current server; n when none is left */
    bool answered;
} rp_slice;

struct ferry_rpick {
    size_t n_servers;
    bool *failed; /* per server, in this query */
    rp_slice *slices;
    size_t n, cap;
};

int ferry_rpick_new(size_t n_servers, ferry_rpick **out)
{
    *out = NULL;
    ferry_rpick *p = calloc(1, sizeof *p);
    if (!p)
        return FERRY_ENOMEM;
    p->n_servers = n_servers;
    p->failed = calloc(n_servers ? n_servers : 1, sizeof *p->failed);
    if (!p->failed) {
        free(p);
        return FERRY_ENOMEM;
    }
    *out = p;
    return FERRY_OK;
}

void ferry_rpick_free(ferry_rpick *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->slices[i].order);
    free(p->slices);
    free(p->failed);
    free(p);
}

/* The first candidate at or after `from` that has not failed (n when none). */
static uint32_t next_alive(const ferry_rpick *p, const rp_slice *s, uint32_t from)
{
    while (from < s->n && p->failed[s->order[from]])
        from++;
    return from;
}

int ferry_rpick_add(ferry_rpick *p, const uint32_t *order, size_t n, size_t *index)
{
    if (!n || n > UINT32_MAX / 2)
        return FERRY_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (order[i] >= p->n_servers)
            return FERRY_EINVAL;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        rp_slice *s = realloc(p->slices, cap * sizeof *s);
        if (!s)
            return FERRY_ENOMEM;
        p->slices = s;
        p->cap = cap;
    }
    rp_slice *s = &p->slices[p->n];
    s->order = malloc(n * sizeof *s->order);
    if (!s->order)
        return FERRY_ENOMEM;
    memcpy(s->order, order, n * sizeof *order);
    s->n = (uint32_t)n;
    s->answered = false;
    s->at = next_alive(p, s, 0);
    if (index)
        *index = p->n;
    p->n++;
    return FERRY_OK;
}

size_t ferry_rpick_count(const ferry_rpick *p)
{
    return p->n;
}

uint32_t ferry_rpick_server(const ferry_rpick *p, size_t slice)
{
    if (slice >= p->n)
        return FERRY_RPICK_NONE;
    const rp_slice *s = &p->slices[slice];
    return s->at < s->n ? s->order[s->at] : FERRY_RPICK_NONE;
}

bool ferry_rpick_is_answered(const ferry_rpick *p, size_t slice)
{
    return slice < p->n && p->slices[slice].answered;
}

const uint32_t *ferry_rpick_order(const ferry_rpick *p, size_t slice, size_t *n)
{
    *n = 0;
    if (slice >= p->n)
        return NULL;
    *n = p->slices[slice].n;
    return p->slices[slice].order;
}

size_t ferry_rpick_tried(const ferry_rpick *p, size_t slice, uint32_t *out, size_t max)
{
    if (slice >= p->n)
        return 0;
    const rp_slice *s = &p->slices[slice];
    size_t upto = s->at < s->n ? s->at + 1 : s->n, m = 0;
    for (size_t i = 0; i < upto; i++) {
        /* candidates skipped because they had failed for another slice were tried too */
        if (m < max)
            out[m] = s->order[i];
        m++;
    }
    return m;
}

void ferry_rpick_answered(ferry_rpick *p, uint32_t server)
{
    for (size_t i = 0; i < p->n; i++)
        if (ferry_rpick_server(p, i) == server)
            p->slices[i].answered = true;
}

int ferry_rpick_fail(ferry_rpick *p, uint32_t server, size_t *lost)
{
    if (server >= p->n_servers)
        return FERRY_EINVAL;
    p->failed[server] = true;
    int rc = FERRY_OK;
    for (size_t i = 0; i < p->n; i++) {
        rp_slice *s = &p->slices[i];
        if (s->answered || s->at >= s->n || s->order[s->at] != server)
            continue;
        s->at = next_alive(p, s, s->at + 1);
        if (s->at >= s->n && !rc) {
            rc = FERRY_ENOTFOUND;
            if (lost)
                *lost = i;
        }
    }
    return rc;
}

bool ferry_rpick_server_failed(const ferry_rpick *p, uint32_t server)
{
    return server < p->n_servers && p->failed[server];
}

bool ferry_rpick_pending(const ferry_rpick *p, uint32_t server)
{
    for (size_t i = 0; i < p->n; i++)
        if (!p->slices[i].answered && ferry_rpick_server(p, i) == server)
            return true;
    return false;
}
