/* A rebalancing plan in the scheduler's terms (include/ferry/schedule.h): shards numbered, the
 * steps of one slice sharing a slice number, so `ferry rebalance` and the benchmark schedule the
 * catalog's plan under per-shard limits. */
#include "ferry/move.h"
#include "ferry/schedule.h"

#include <stdlib.h>
#include <string.h>

static const ferry_rebalance_plan *sorting; /* qsort has no context pointer */

/* Name k of the plan: move k / 2's source (even k) or target (odd k). */
static const char *name_at(const ferry_rebalance_plan *p, size_t k)
{
    return k % 2 ? p->moves[k / 2].to : p->moves[k / 2].from;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(name_at(sorting, *(const size_t *)a), name_at(sorting, *(const size_t *)b));
}

static int slice_cmp(const void *a, const void *b)
{
    const ferry_planned_move *x = &sorting->moves[*(const size_t *)a];
    const ferry_planned_move *y = &sorting->moves[*(const size_t *)b];
    int d = strcmp(x->tenant, y->tenant);
    if (!d)
        d = (x->split > y->split) - (x->split < y->split);
    return d ? d : (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

int ferry_rebalance_sched_moves(const ferry_rebalance_plan *p, ferry_sched_move *out,
                                size_t *n_shards, ferry_err *err)
{
    size_t n = p->n_moves, *idx = malloc((2 * n + 1) * sizeof *idx);
    if (!idx)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    sorting = p;
    /* shards: every name a move reads from or writes to, numbered in name order */
    size_t m = 0;
    for (size_t k = 0; k < 2 * n; k++)
        if (name_at(p, k)[0])
            idx[m++] = k;
    if (m > 1) /* qsort of NULL, 0 is undefined */
        qsort(idx, m, sizeof *idx, name_cmp);
    *n_shards = 0;
    for (size_t j = 0; j < m; j++) {
        if (j && strcmp(name_at(p, idx[j]), name_at(p, idx[j - 1])))
            (*n_shards)++;
        if (idx[j] % 2)
            out[idx[j] / 2].to = (uint32_t)*n_shards;
        else
            out[idx[j] / 2].from = (uint32_t)*n_shards;
    }
    *n_shards += m > 0;
    for (size_t i = 0; i < n; i++)
        if (!p->moves[i].to[0] || out[i].to == out[i].from)
            out[i].to = FERRY_SCHED_NONE; /* a drop (or a step on one shard): no target */
    /* slices: moves of one (tenant, split) share the number of the first */
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    if (n > 1) /* qsort of NULL, 0 is undefined */
        qsort(idx, n, sizeof *idx, slice_cmp);
    for (size_t j = 0; j < n; j++) {
        const ferry_planned_move *a = &p->moves[idx[j]], *b = j ? &p->moves[idx[j - 1]] : NULL;
        bool same = b && a->split == b->split && !strcmp(a->tenant, b->tenant);
        out[idx[j]].slice = same ? out[idx[j - 1]].slice : (uint32_t)idx[j];
    }
    free(idx);
    return FERRY_OK;
}
