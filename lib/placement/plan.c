/* The planner: compares two layouts of the same slices and lists the replica moves between
 * them, in an order that respects the destinations' fill targets where it can. */
#include "placement/placement_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sched {
    ferry_pl_move mv;
    uint32_t from_u, to_u; /* indices into the union of old and new shards */
} sched;

static int sched_cmp(const void *a, const void *b)
{
    const ferry_pl_move *x = &((const sched *)a)->mv, *y = &((const sched *)b)->mv;
    if (x->from_removed != y->from_removed)
        return x->from_removed ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->slice != y->slice)
        return x->slice < y->slice ? -1 : 1;
    return strcmp(x->from ? x->from : "", y->from ? y->from : "");
}

/* Whether shard u of the union (below) is in set[0..n), a slice's replicas; map turns the
 * set's shard indexes into the union's (NULL: they are the union's already, the new cluster's).
 * Indexes, not names: a million slices would otherwise compare two million names. */
static bool in_set(const uint32_t *set, unsigned n, const uint32_t *map, uint32_t u)
{
    for (unsigned j = 0; j < n; j++)
        if (set[j] != FERRY_PL_NO_SHARD && (map ? map[set[j]] : set[j]) == u)
            return true;
    return false;
}

int ferry_pl_plan_build(const ferry_pl_layout *old, const ferry_pl_layout *nl, ferry_pl_plan *out,
                        ferry_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = FERRY_OK;
    const ferry_pl_cluster *oc = old->cluster, *nc = nl->cluster;
    const ferry_pl_inventory *inv = nl->inv;
    size_t nu = nc->n, cap = 0, nm = 0;
    sched *mv = NULL;
    uint32_t *old_u = NULL;
    uint64_t *load = NULL, *limit = NULL;
    bool *done = NULL;
    if (old->inv != nl->inv)
        return ferry_err_set(err, FERRY_EINTERNAL, "plan: layouts are over different slices");

    /* The union of shards: the new cluster's, then those only the old one has. */
    old_u = malloc((oc->n ? oc->n : 1) * sizeof *old_u);
    load = calloc(nc->n + oc->n, sizeof *load);
    limit = calloc(nc->n + oc->n, sizeof *limit);
    if (!old_u || !load || !limit) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t s = 0; s < oc->n; s++) {
        long k = ferry_pl_cluster_find(nc, oc->shards[s].name);
        old_u[s] = k >= 0 ? (uint32_t)k : (uint32_t)nu++;
        load[old_u[s]] = old->shard_bytes[s];
    }
    for (size_t s = 0; s < nu; s++) {
        uint64_t c = s < nc->n ? nc->shards[s].capacity : 0;
        limit[s] = c ? (uint64_t)floorl((long double)c * nl->opts.fill) : UINT64_MAX;
    }

    for (size_t i = 0; i < inv->n; i++) {
        const uint32_t *o = old->replicas + i * old->rf, *n = nl->replicas + i * nl->rf;
        uint32_t rem[64], add[64];
        unsigned nr = 0, na = 0;
        for (unsigned j = 0; j < old->rf && nr < 64; j++)
            if (o[j] != FERRY_PL_NO_SHARD && !in_set(n, nl->rf, NULL, old_u[o[j]]))
                rem[nr++] = o[j];
        for (unsigned j = 0; j < nl->rf && na < 64; j++)
            if (n[j] != FERRY_PL_NO_SHARD && !in_set(o, old->rf, old_u, n[j]))
                add[na++] = n[j];
        unsigned pairs = nr > na ? nr : na;
        if (pairs)
            out->moved_slices++;
        for (unsigned p = 0; p < pairs; p++) {
            if (nm == cap) {
                cap = cap ? cap * 2 : 256;
                sched *q = realloc(mv, cap * sizeof *mv);
                if (!q) {
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                    goto out;
                }
                mv = q;
            }
            sched *m = &mv[nm++];
            memset(m, 0, sizeof *m);
            m->mv.slice = (uint32_t)i;
            m->mv.bytes = inv->slices[i].bytes;
            m->from_u = m->to_u = UINT32_MAX;
            if (p < nr) {
                m->mv.from = oc->shards[rem[p]].name;
                m->from_u = old_u[rem[p]];
                m->mv.from_removed = m->from_u >= nc->n;
            }
            if (p < na) {
                m->mv.to = nc->shards[add[p]].name;
                m->to_u = add[p];
                m->mv.to_existing = ferry_pl_cluster_find(oc, m->mv.to) >= 0;
            }
        }
    }
    if (nm)
        qsort(mv, nm, sizeof *mv, sched_cmp);

    /* Order: rounds over the waiting moves; a move goes when its destination has room. */
    out->moves = calloc(nm ? nm : 1, sizeof *out->moves);
    done = calloc(nm ? nm : 1, sizeof *done);
    if (!out->moves || !done) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t emitted = 0, first_waiting = 0;
    while (emitted < nm) {
        bool progress = false;
        for (size_t k = first_waiting; k < nm; k++) {
            if (done[k])
                continue;
            sched *m = &mv[k];
            bool room = m->to_u == UINT32_MAX ||
                        (load[m->to_u] <= limit[m->to_u] &&
                         m->mv.bytes <= limit[m->to_u] - load[m->to_u]);
            if (!room)
                continue;
            if (m->to_u != UINT32_MAX)
                load[m->to_u] += m->mv.bytes;
            if (m->from_u != UINT32_MAX)
                load[m->from_u] -= m->mv.bytes;
            out->moves[emitted++] = m->mv;
            done[k] = true;
            progress = true;
        }
        while (first_waiting < nm && done[first_waiting])
            first_waiting++;
        if (!progress && first_waiting < nm) {
            sched *m = &mv[first_waiting]; /* a cycle: go anyway */
            load[m->to_u] += m->mv.bytes;
            if (m->from_u != UINT32_MAX)
                load[m->from_u] -= m->mv.bytes;
            out->moves[emitted++] = m->mv;
            done[first_waiting] = true;
        }
    }
    out->slices = inv->n;
    out->moved = nm;
    for (size_t k = 0; k < nm; k++) {
        out->moved_bytes += out->moves[k].bytes;
        out->moved_between_existing += out->moves[k].to && out->moves[k].to_existing;
    }
    for (size_t i = 0; i < inv->n; i++)
        out->total_bytes += inv->slices[i].bytes * nl->rf;
out:
    if (rc)
        ferry_pl_plan_free(out);
    free(mv);
    free(old_u);
    free(load);
    free(limit);
    free(done);
    return rc;
}

void ferry_pl_plan_free(ferry_pl_plan *p)
{
    free(p->moves);
    memset(p, 0, sizeof *p);
}
