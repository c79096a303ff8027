/* Scheduling a rebalance under per-shard limits (include/ferry/schedule.h): moves queue per
 * (source, target) shard pair in plan order, so finding what may start after a move ends looks at
 * the queues of the two shards it freed (2 x shards queue heads), not at every waiting move; the
 * earliest startable head wins, which keeps plan order wherever the limits allow. */
#include "ferry/schedule.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum { PENDING = 0, RUNNING, DONE };

struct ferry_sched {
    size_t n, n_shards, cols; /* cols = n_shards + 1: the last column is "no target" */
    unsigned per_shard, max_running;
    uint32_t *from, *to;   /* [n]; to == n_shards for no target */
    uint32_t *prev, *next; /* [n] the slice's previous / next step, FERRY_SCHED_NONE */
    uint8_t *state;        /* [n] */
    uint32_t *qmoves;      /* moves grouped by queue (from * cols + to), plan order inside */
    size_t *qbeg;          /* [n_shards * cols + 1] */
    size_t *qhead;         /* [n_shards * cols] first entry that may still be pending */
    unsigned *used;        /* [cols] moves running on each shard */
    bool *dirty;           /* [n_shards] shards that freed a slot since the last start */
    bool all_dirty;        /* look at every queue (at first, after the global limit bound) */
    bool global_bound;     /* the last start stopped at max_running */
    size_t running, pending;
};

void ferry_sched_free(ferry_sched *s)
{
    if (!s)
        return;
    free(s->from);
    free(s->to);
    free(s->prev);
    free(s->next);
    free(s->state);
    free(s->qmoves);
    free(s->qbeg);
    free(s->qhead);
    free(s->used);
    free(s->dirty);
    free(s);
}

typedef struct slice_key {
    uint32_t slice, index;
} slice_key;

static int slice_key_cmp(const void *a, const void *b)
{
    const slice_key *x = a, *y = b;
    if (x->slice != y->slice)
        return x->slice < y->slice ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

int ferry_sched_new(const ferry_sched_move *moves, size_t n, size_t n_shards, unsigned per_shard,
                    unsigned max_running, ferry_sched **out, ferry_err *err)
{
    *out = NULL;
    if (per_shard < 1)
        return ferry_err_set(err, FERRY_EINVAL, "at most 0 moves per shard: nothing could run");
    if (n_shards == 0 || n_shards > 1u << 16)
        return ferry_err_set(err, FERRY_EINVAL, "%zu shards: 1..65536 are scheduled", n_shards);
    if (n >= FERRY_SCHED_NONE)
        return ferry_err_set(err, FERRY_EINVAL, "too many moves to schedule (%zu)", n);
    for (size_t i = 0; i < n; i++)
        if (moves[i].from >= n_shards ||
            (moves[i].to != FERRY_SCHED_NONE && moves[i].to >= n_shards) ||
            moves[i].from == moves[i].to)
            return ferry_err_set(err, FERRY_EINVAL, "move %zu: shards %u -> %u are not two of "
                                 "the %zu shards", i, moves[i].from, moves[i].to, n_shards);
    ferry_sched *s = calloc(1, sizeof *s);
    slice_key *keys = NULL;
    if (!s)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    s->n = n;
    s->n_shards = n_shards;
    s->cols = n_shards + 1;
    s->per_shard = per_shard;
    s->max_running = max_running;
    size_t nq = n_shards * s->cols, nn = n ? n : 1;
    s->from = malloc(nn * sizeof *s->from);
    s->to = malloc(nn * sizeof *s->to);
    s->prev = malloc(nn * sizeof *s->prev);
    s->next = malloc(nn * sizeof *s->next);
    s->state = calloc(nn, 1);
    s->qmoves = malloc(nn * sizeof *s->qmoves);
    s->qbeg = calloc(nq + 1, sizeof *s->qbeg);
    s->qhead = calloc(nq, sizeof *s->qhead);
    s->used = calloc(s->cols, sizeof *s->used);
    s->dirty = calloc(n_shards, sizeof *s->dirty);
    keys = malloc(nn * sizeof *keys);
    if (!s->from || !s->to || !s->prev || !s->next || !s->state || !s->qmoves || !s->qbeg ||
        !s->qhead || !s->used || !s->dirty || !keys) {
        ferry_sched_free(s);
        free(keys);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    /* queues: a counting sort by (from, to), stable, so plan order holds inside each */
    for (size_t i = 0; i < n; i++) {
        s->from[i] = moves[i].from;
        s->to[i] = moves[i].to == FERRY_SCHED_NONE ? (uint32_t)n_shards : moves[i].to;
        s->qbeg[(size_t)s->from[i] * s->cols + s->to[i] + 1]++;
        s->prev[i] = s->next[i] = FERRY_SCHED_NONE;
        keys[i] = (slice_key){moves[i].slice, (uint32_t)i};
    }
    for (size_t q = 0; q < nq; q++) {
        s->qbeg[q + 1] += s->qbeg[q];
        s->qhead[q] = s->qbeg[q];
    }
    for (size_t i = 0; i < n; i++)
        s->qmoves[s->qhead[(size_t)s->from[i] * s->cols + s->to[i]]++] = (uint32_t)i;
    for (size_t q = 0; q < nq; q++)
        s->qhead[q] = s->qbeg[q];
    /* steps of one slice: a chain in plan order */
    if (n > 1) /* qsort of NULL, 0 is undefined */
        qsort(keys, n, sizeof *keys, slice_key_cmp);
    for (size_t k = 1; k < n; k++)
        if (keys[k].slice != FERRY_SCHED_NONE && keys[k].slice == keys[k - 1].slice) {
            s->prev[keys[k].index] = keys[k - 1].index;
            s->next[keys[k - 1].index] = keys[k].index;
        }
    free(keys);
    s->pending = n;
    s->all_dirty = true;
    *out = s;
    return FERRY_OK;
}

static bool has_room(const ferry_sched *s, size_t q)
{
    size_t f = q / s->cols, t = q % s->cols;
    return s->used[f] < s->per_shard && (t == s->n_shards || s->used[t] < s->per_shard);
}

/* The first move of queue q that may start (pending, its slice's earlier steps done), or
 * FERRY_SCHED_NONE. Entries that left the pending state at the front are dropped for good. */
static uint32_t queue_first(ferry_sched *s, size_t q)
{
    while (s->qhead[q] < s->qbeg[q + 1] && s->state[s->qmoves[s->qhead[q]]] != PENDING)
        s->qhead[q]++;
    for (size_t k = s->qhead[q]; k < s->qbeg[q + 1]; k++) {
        uint32_t m = s->qmoves[k];
        if (s->state[m] == PENDING && (s->prev[m] == FERRY_SCHED_NONE ||
                                       s->state[s->prev[m]] == DONE))
            return m;
    }
    return FERRY_SCHED_NONE;
}

/* The earliest startable move among the queues of the shards marked dirty (all when all). */
static uint32_t best_candidate(ferry_sched *s, bool all)
{
    uint32_t best = FERRY_SCHED_NONE;
    size_t nq = s->n_shards * s->cols;
    for (size_t q = 0; all && q < nq; q++) {
        uint32_t m;
        if (s->qbeg[q] != s->qbeg[q + 1] && has_room(s, q) &&
            (m = queue_first(s, q)) < best)
            best = m;
    }
    for (size_t d = 0; !all && d < s->n_shards; d++) {
        if (!s->dirty[d] || s->used[d] >= s->per_shard)
            continue;
        for (size_t o = 0; o < s->cols; o++) {
            size_t qs[2] = {d * s->cols + o, o < s->n_shards ? o * s->cols + d : nq};
            for (int k = 0; k < 2; k++) {
                uint32_t m;
                if (qs[k] < nq && s->qbeg[qs[k]] != s->qbeg[qs[k] + 1] && has_room(s, qs[k]) &&
                    (m = queue_first(s, qs[k])) < best)
                    best = m;
            }
        }
    }
    return best;
}

size_t ferry_sched_start(ferry_sched *s, size_t *out, size_t cap)
{
    size_t k = 0;
    bool all = s->all_dirty;
    s->global_bound = false;
    while (k < cap) {
        if (s->max_running && s->running >= s->max_running) {
            s->global_bound = s->pending > 0;
            break;
        }
        uint32_t m = best_candidate(s, all);
        if (m == FERRY_SCHED_NONE)
            break;
        assert(s->state[m] == PENDING);
        s->state[m] = RUNNING;
        s->used[s->from[m]]++;
        s->used[s->to[m]]++; /* the "no target" column is never full */
        s->running++;
        s->pending--;
        out[k++] = m;
    }
    /* stopped by the caller's buffer: what is left may start next time, wherever it is */
    s->all_dirty = k == cap && s->pending > 0;
    memset(s->dirty, 0, s->n_shards * sizeof *s->dirty);
    return k;
}

void ferry_sched_finish(ferry_sched *s, size_t i)
{
    assert(i < s->n && s->state[i] == RUNNING);
    s->state[i] = DONE;
    s->used[s->from[i]]--;
    s->used[s->to[i]]--;
    s->running--;
    s->dirty[s->from[i]] = true;
    if (s->to[i] < s->n_shards)
        s->dirty[s->to[i]] = true;
    uint32_t nx = s->next[i];
    if (nx != FERRY_SCHED_NONE) { /* the slice's next step may start now */
        s->dirty[s->from[nx]] = true;
        if (s->to[nx] < s->n_shards)
            s->dirty[s->to[nx]] = true;
    }
    if (s->global_bound)
        s->all_dirty = true; /* a move anywhere may have waited for the global limit */
}

size_t ferry_sched_running(const ferry_sched *s) { return s->running; }
size_t ferry_sched_pending(const ferry_sched *s) { return s->pending; }

/* ---- simulation: a heap of running moves by end time ---- */

typedef struct ev {
    double end;
    size_t move;
} ev;

static bool ev_before(const ev *a, const ev *b)
{
    return a->end < b->end || (a->end == b->end && a->move < b->move);
}

static void heap_push(ev *h, size_t *n, ev e)
{
    size_t i = (*n)++;
    while (i > 0 && ev_before(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static ev heap_pop(ev *h, size_t *n)
{
    ev top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && ev_before(&h[c + 1], &h[c]))
            c++;
        if (!ev_before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

int ferry_sched_simulate(const ferry_sched_move *moves, size_t n, size_t n_shards,
                         unsigned per_shard, unsigned max_running, const double *seconds,
                         double *start, double *makespan, size_t *peak, ferry_err *err)
{
    ferry_sched *s = NULL;
    int rc = ferry_sched_new(moves, n, n_shards, per_shard, max_running, &s, err);
    if (rc)
        return rc;
    ev *heap = malloc((n ? n : 1) * sizeof *heap);
    size_t *started = malloc((n ? n : 1) * sizeof *started);
    if (!heap || !started) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t nh = 0;
    double now = 0;
    *peak = 0;
    for (;;) {
        size_t k = ferry_sched_start(s, started, n ? n : 1);
        for (size_t j = 0; j < k; j++) {
            if (start)
                start[started[j]] = now;
            heap_push(heap, &nh, (ev){now + seconds[started[j]], started[j]});
        }
        if (ferry_sched_running(s) > *peak)
            *peak = ferry_sched_running(s);
        if (nh == 0)
            break;
        ev e = heap_pop(heap, &nh);
        now = e.end;
        ferry_sched_finish(s, e.move);
    }
    assert(ferry_sched_pending(s) == 0);
    *makespan = now;
out:
    free(heap);
    free(started);
    ferry_sched_free(s);
    return rc;
}
