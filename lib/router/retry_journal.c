/* The router's retry journal ([router] retry_journal; docs/routing.md "The retry journal").
 *
 * The slices a client may retry a write to live in the router's memory (pending.c), and a move,
 * a tiering swap and a repair ask every router before they touch such a slice. A router killed
 * with a write in flight (the client got no answer and will retry), or restarted after a write
 * failed, would forget them, and the retry could then land after a swap or a switch that took
 * the first attempt's block ids out of ClickHouse's deduplication log: the rows twice. So a
 * router with a journal writes down, before any row of a slice leaves for a shard, that the
 * request touches the slice, and at the request's end whether its slices await a retry. A
 * router started on the journal holds what the last one left: every slice of a request that
 * never ended for a whole window from now (its client may retry at any moment), every slice of
 * a failed one for what was left of its window.
 *
 * The file is text, one record per line, appended by one write() each (no fsync: it survives
 * the process, not the machine):
 *
 *     ferry-router-retries 1
 *     I <request> <split> <tenant>        the request sends rows of the slice
 *     D <request>                         the request ended
 *     P <until> <split> <tenant>          a retry is expected until <until> (Unix ms)
 *
 * Request ids grow across a router's lives (the first is the clock in ns, or one more than the
 * largest id replayed), so a D never ends a request of an earlier life. When the file passes
 * RT_JOURNAL_COMPACT_BYTES it is replaced (a new file renamed over it) by one holding only what
 * is still true: the slices held and the I records of the requests in flight.
 *
 * With or without a file the journal keeps the open requests in memory, each slice with the time
 * of its first row (rt_journal_inflight_ms): a write still open since before a tiering freeze may
 * have its rows in the frozen parts and fail later, so the swap waits for it (GET /ferry/router's
 * inflight_write_ms).
 *
 * Invariant: while a request is open, each slice it routed rows to has an I record in the
 * current file (compaction writes them again); a slice whose retry is held in memory has a P
 * record there, written no later than the request's D. One mutex serialises the appends and the
 * compaction; the order of locks is journal, then the pending table (rt_pending_each). */
#include "router_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/clock.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/names.h"

#define JOURNAL_HEADER "ferry-router-retries 1\n"
#define JOURNAL_PATH_MAX 4096

struct rt_journal {
    pthread_mutex_t mu;
    char path[JOURNAL_PATH_MAX];
    char tmp_path[JOURNAL_PATH_MAX + 8];  /* the compaction's new file, renamed over path */
    char lock_path[JOURNAL_PATH_MAX + 8]; /* held (flock) for the router's life: one per journal */
    bool file;                          /* a path was given (set at open, never changes) */
    int fd;                             /* path, O_APPEND */
    int lock_fd;
    uint64_t bytes; /* in the current file */
    uint64_t next_id;
    uint64_t window_ms;
    rt_pending *pending;
    rt_journal_req open; /* the requests with I records (a ring: open.next is the first) */
    uint64_t write_errors;
};

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A tenant name goes last on its line: it only has to hold no newline (catalog names never do). */
static bool name_ok(const char *tenant) { return *tenant && !strchr(tenant, '\n'); }

/* ---- replay ---------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct replay {
    uint64_t *ended; /* ids of D records, sorted before the second pass */
    size_t n_ended, cap_ended;
    uint64_t max_id;
    size_t held, bad;
} replay;

/* One record: pass 1 collects the ended requests, pass 2 holds the slices. -1: not a record. */
static int replay_line(rt_journal *j, replay *rp, char *line, int pass, uint64_t now)
{
    char kind = line[0];
    if (!kind || line[1] != ' ')
        return -1;
    char *p = line + 2, *end;
    errno = 0;
    uint64_t a = strtoull(p, &end, 10);
    if (errno || end == p)
        return -1;
    if (kind == 'D') {
        if (*end)
            return -1;
        if (pass == 1) {
            if (rp->n_ended == rp->cap_ended) {
                size_t cap = rp->cap_ended ? rp->cap_ended * 2 : 256;
                uint64_t *e = realloc(rp->ended, cap * sizeof *e);
                if (!e)
                    return -2;
                rp->ended = e;
                rp->cap_ended = cap;
            }
            rp->ended[rp->n_ended++] = a;
        }
        return 0;
    }
    if ((kind != 'I' && kind != 'P') || *end != ' ')
        return -1;
    p = end + 1;
    unsigned long split = strtoul(p, &end, 10);
    if (end == p || *end != ' ' || split > UINT32_MAX || !end[1])
        return -1;
    const char *tenant = end + 1;
    if (kind == 'I' && a > rp->max_id)
        rp->max_id = a;
    if (pass == 1)
        return 0;
    uint64_t left;
    if (kind == 'P')
        left = a > now ? a - now : 0;
    else if (rp->n_ended && bsearch(&a, rp->ended, rp->n_ended, sizeof a, cmp_u64))
        left = 0; /* the request ended */
    else
        left = j->window_ms; /* it never did: its client may retry from now on */
    if (!left)
        return 0;
    if (rt_pending_hold(j->pending, tenant, (uint32_t)split, left))
        return -2;
    rp->held++;
    return 0;
}

/* Reads what an earlier router left at j->path into the pending table. A missing file is an
 * empty journal; a line that is not a record is skipped and counted (a write cut short when
 * the process died); a file of another format is an error, so no other file is overwritten. */
static int replay_file(rt_journal *j, ferry_err *err)
{
    FILE *f = fopen(j->path, "r");
    if (!f) {
        if (errno == ENOENT)
            return FERRY_OK;
        return ferry_err_set(err, FERRY_EIO, "[router] retry_journal %s: cannot read it: %s",
                             j->path, strerror(errno));
    }
    replay rp = {0};
    char *line = NULL;
    size_t cap = 0;
    int rc = FERRY_OK;
    uint64_t now = ferry_clock_wall_ms();
    for (int pass = 1; pass <= 2 && !rc; pass++) {
        rewind(f);
        ssize_t n;
        size_t no = 0;
        while ((n = getline(&line, &cap, f)) >= 0) {
            no++;
            bool whole = n > 0 && line[n - 1] == '\n';
            if (whole)
                line[--n] = '\0';
            if (no == 1) {
                if (strcmp(line, "ferry-router-retries 1")) {
                    rc = ferry_err_set(err, FERRY_EINVAL,
                                       "[router] retry_journal %s is not a ferry router's retry "
                                       "journal (its first line is not '%.*s'); point the key at "
                                       "a file of its own",
                                       j->path, (int)strlen(JOURNAL_HEADER) - 1, JOURNAL_HEADER);
                    break;
                }
                continue;
            }
            int lr = whole ? replay_line(j, &rp, line, pass, now) : -1;
            if (lr == -2) {
                rc = ferry_err_set(err, FERRY_ENOMEM,
                                   "[router] retry_journal %s: out of memory (or more than %d "
                                   "slices held) replaying it",
                                   j->path, RT_PENDING_MAX);
                break;
            }
            if (lr == -1 && pass == 2)
                rp.bad++;
        }
        if (!rc && ferror(f))
            rc = ferry_err_set(err, FERRY_EIO, "[router] retry_journal %s: reading it failed",
                               j->path);
        if (pass == 1 && rp.n_ended)
            qsort(rp.ended, rp.n_ended, sizeof *rp.ended, cmp_u64);
    }
    if (!rc) {
        j->next_id = rp.max_id + 1 > j->next_id ? rp.max_id + 1 : j->next_id;
        if (rp.held || rp.bad)
            FLOG_INFO("msg=\"router: retry journal replayed: slices held for a client's retry "
                      "the last router expected\" path=\"%s\" slices=%zu unreadable_lines=%zu",
                      j->path, rp.held, rp.bad);
    }
    free(line);
    free(rp.ended);
    fclose(f);
    return rc;
}

/* ---- compaction ------------------------------------------------------------------------------ */

static int put_held(void *ctx, const char *tenant, uint32_t split, uint64_t left_ms)
{
    ferry_buf *b = ctx;
    if (!name_ok(tenant))
        return 0;
    return ferry_buf_printf(b, "P %" PRIu64 " %u %s\n", ferry_clock_wall_ms() + left_ms, split,
                            tenant)
               ? -1
               : 0;
}

/* Replaces the file by one holding only the slices held and the I records of the open requests;
 * with j->mu held. On failure the current file stays in use (it is only longer). */
static int compact_locked(rt_journal *j, ferry_err *err)
{
    ferry_buf b = FERRY_BUF_INIT;
    int fd = -1, rc = FERRY_OK;
    if (ferry_buf_puts(&b, JOURNAL_HEADER) || rt_pending_each(j->pending, put_held, &b)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (rt_journal_req *q = j->open.next; q != &j->open; q = q->next)
        for (size_t i = 0; i < q->n; i++)
            if (ferry_buf_printf(&b, "I %" PRIu64 " %u %s\n", q->id, q->slices[i].split,
                                 q->slices[i].tenant)) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
    fd = open(j->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || ferry_write_all(fd, b.data, b.len) || rename(j->tmp_path, j->path)) {
        rc = ferry_err_set(err, FERRY_EIO, "[router] retry_journal %s: cannot write %s and rename "
                           "it over the journal: %s", j->path, j->tmp_path, strerror(errno));
        if (fd >= 0)
            unlink(j->tmp_path);
        goto out;
    }
    if (j->fd >= 0)
        close(j->fd);
    j->fd = fd;
    fd = -1;
    j->bytes = b.len;
out:
    if (fd >= 0)
        close(fd);
    ferry_buf_free(&b);
    return rc;
}

/* ---- life cycle ------------------------------------------------------------------------------ */

int rt_journal_open(const char *path, rt_pending *pending, rt_journal **out, ferry_err *err)
{
    *out = NULL;
    if (path && strlen(path) >= JOURNAL_PATH_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "[router] retry_journal: the path is longer than "
                             "%d bytes", JOURNAL_PATH_MAX - 1);
    rt_journal *j = calloc(1, sizeof *j);
    if (!j)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    pthread_mutex_init(&j->mu, NULL);
    j->fd = j->lock_fd = -1;
    j->open.next = j->open.prev = &j->open;
    j->pending = pending;
    j->window_ms = rt_pending_window_ms(pending);
    j->next_id = wall_ns();
    int rc = FERRY_OK;
    if (!path)
        goto out; /* the open writes in memory, no file */
    j->file = true;
    snprintf(j->path, sizeof j->path, "%s", path);
    snprintf(j->tmp_path, sizeof j->tmp_path, "%s.new", path);
    snprintf(j->lock_path, sizeof j->lock_path, "%s.lock", path);
    j->lock_fd = open(j->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->lock_fd < 0) {
        rc = ferry_err_set(err, FERRY_EIO, "[router] retry_journal: cannot open %s: %s (the "
                           "folder must exist and be writable by the router)",
                           j->lock_path, strerror(errno));
        goto out;
    }
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB)) {
        rc = ferry_err_set(err, FERRY_ECONFLICT, "[router] retry_journal %s is in use by another "
                           "router (%s is locked); give each router a journal of its own",
                           j->path, j->lock_path);
        goto out;
    }
    unlink(j->tmp_path); /* a compaction cut short: the journal itself is whole */
    rc = replay_file(j, err);
    if (!rc)
        rc = compact_locked(j, err); /* no requests yet: no lock needed */
out:
    if (rc) {
        rt_journal_close(j);
        return rc;
    }
    *out = j;
    return FERRY_OK;
}

void rt_journal_close(rt_journal *j)
{
    if (!j)
        return;
    assert(j->open.next == &j->open); /* every request ended (the server stopped first) */
    if (j->fd >= 0)
        close(j->fd);
    if (j->lock_fd >= 0)
        close(j->lock_fd); /* releases the lock */
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* ---- requests -------------------------------------------------------------------------------- */

/* Appends one or more whole records; compacts when the file has grown. With j->mu held. */
static int append_locked(rt_journal *j, const char *data, size_t len)
{
    if (ferry_write_all(j->fd, data, len)) {
        int e = errno;
        uint64_t n = ++j->write_errors;
        if (!(n & (n - 1))) /* the 1st, 2nd, 4th, ... */
            FLOG_WARN("msg=\"router: cannot write the retry journal\" path=\"%s\" error=\"%s\" "
                      "failures=%" PRIu64, j->path, strerror(e), j->write_errors);
        errno = e;
        return -1;
    }
    j->bytes += len;
    if (j->bytes > RT_JOURNAL_COMPACT_BYTES) {
        ferry_err err = {0};
        if (compact_locked(j, &err))
            FLOG_WARN("msg=\"router: cannot compact the retry journal\" error=\"%s\"", err.msg);
    }
    return 0;
}

int rt_journal_touch(rt_journal *j, rt_journal_req *q, const char *tenant, uint32_t split,
                     ferry_err *err)
{
    if (!j)
        return FERRY_OK;
    if (!name_ok(tenant))
        return ferry_err_set(err, FERRY_EINVAL, "tenant name with a newline");
    char line[64 + FERRY_NAME_MAX];
    int n = 0, rc = FERRY_OK;
    pthread_mutex_lock(&j->mu);
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 4;
        rt_journal_slice *s = realloc(q->slices, cap * sizeof *s);
        if (!s) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        q->slices = s;
        q->cap = cap;
    }
    char *name = strdup(tenant);
    if (!name) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (!q->id) {
        q->id = j->next_id++;
        q->next = &j->open;
        q->prev = j->open.prev;
        j->open.prev->next = q;
        j->open.prev = q;
    }
    q->slices[q->n++] = (rt_journal_slice){name, split, ferry_clock_ms_u64()};
    if (!j->file)
        goto out; /* in memory only */
    n = snprintf(line, sizeof line, "I %" PRIu64 " %u %s\n", q->id, split, tenant);
    if (n < 0 || (size_t)n >= sizeof line || append_locked(j, line, (size_t)n))
        rc = ferry_err_set(err, FERRY_EIO, "the router cannot write its retry journal %s: %s",
                           j->path, n < 0 || (size_t)n >= sizeof line ? "tenant name too long"
                                                                      : strerror(errno));
out:
    pthread_mutex_unlock(&j->mu);
    return rc;
}

bool rt_journal_has_file(const rt_journal *j) { return j && j->file; }

/* The oldest first touch among the open requests' slices matching (tenant, split), or any slice
 * when tenant is NULL; with j->mu held. 0: none. */
static uint64_t oldest_touch_locked(rt_journal *j, const char *tenant, uint32_t split)
{
    uint64_t oldest = 0;
    for (rt_journal_req *q = j->open.next; q != &j->open; q = q->next) {
        for (size_t i = 0; i < q->n; i++) {
            const rt_journal_slice *s = &q->slices[i];
            if (tenant && (s->split != split || strcmp(s->tenant, tenant)))
                continue;
            if (!oldest || s->t_ms < oldest)
                oldest = s->t_ms;
            if (!tenant)
                break; /* a request's first slice is its oldest */
        }
        if (!tenant && oldest)
            break; /* the ring is in the order of first touches */
    }
    return oldest;
}

uint64_t rt_journal_inflight_ms(rt_journal *j, const char *tenant, uint32_t split)
{
    if (!j)
        return 0;
    pthread_mutex_lock(&j->mu);
    uint64_t t = oldest_touch_locked(j, tenant, split);
    pthread_mutex_unlock(&j->mu);
    uint64_t now = ferry_clock_ms_u64();
    return t ? (now > t ? now - t : 1) : 0;
}

uint64_t rt_journal_write_errors(rt_journal *j)
{
    pthread_mutex_lock(&j->mu);
    uint64_t n = j->write_errors;
    pthread_mutex_unlock(&j->mu);
    return n;
}

void rt_journal_end(rt_journal *j, rt_journal_req *q, bool held)
{
    if (!j || !q->id)
        return;
    ferry_buf b = FERRY_BUF_INIT;
    bool oom = false;
    if (j->file) { /* the records are formatted outside the lock, and only for a file */
        uint64_t until = ferry_clock_wall_ms() + j->window_ms;
        for (size_t i = 0; held && i < q->n && !oom; i++)
            oom = ferry_buf_printf(&b, "P %" PRIu64 " %u %s\n", until, q->slices[i].split,
                                   q->slices[i].tenant) != 0;
        oom = oom || ferry_buf_printf(&b, "D %" PRIu64 "\n", q->id) != 0;
    }
    pthread_mutex_lock(&j->mu);
    q->prev->next = q->next;
    q->next->prev = q->prev;
    if (!j->file)
        ; /* in memory only */
    else if (oom)
        FLOG_WARN("msg=\"router: out of memory writing the retry journal; a restart of this "
                  "router would hold request %" PRIu64 "'s slices for a whole window\"", q->id);
    else
        append_locked(j, b.data, b.len); /* a failure is logged; memory still holds them */
    pthread_mutex_unlock(&j->mu);
    ferry_buf_free(&b);
    for (size_t i = 0; i < q->n; i++)
        free(q->slices[i].tenant);
    free(q->slices);
    memset(q, 0, sizeof *q);
}
