/* The router's streaming writes: one request's rows for one shard go out as one INSERT whose body
 * is streamed (chunked HTTP through libcurl's read callback) while the client's body is still
 * being read and parsed. Between the parser (the request's thread) and the sender (one thread per
 * open stream) sits a bounded byte queue, so memory per shard is bounded and a slow shard makes
 * only its own queue fill.
 *
 * Rows are first staged per shard (up to [router] flush_bytes); the stream opens when the stage
 * is full, with a deduplication token BASE:XXH3(first row):SEQ (stream_prepare), so the same
 * request sent again cuts the same INSERTs with the same tokens. A shard whose rows all
 * fit in the stage is sent at the end as one in-memory INSERT (replayable, so it may fail over to
 * another replica), all such shards in parallel. */
#include "router_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#include "ferry/chhttp.h"
#include "ferry/log.h"

struct rt_stream {
    rt_out *o;
    size_t shard;
    uint32_t seq;
    char token[512];
    ferry_ch_setting *settings;
    /* the queue, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    char *ring;
    size_t cap, head, len;
    bool eof;      /* the producer has nothing more */
    bool abort;    /* the producer gave up on this shard: the reader fails the upload */
    bool done;     /* the sender finished */
    bool consumed; /* the sender read from the queue (the body cannot be replayed) */
    pthread_t th;
    bool started;
    /* the memory body of a stream that never opened */
    ferry_buf mem;
    uint64_t rows;
    uint64_t bytes; /* of the body given to it (rows in the forwarded format) */
    rt_send send;
};

static void stream_result(rt_out *o, rt_stream *s);

static ssize_t ring_read(void *buf, size_t cap, void *arg)
{
    rt_stream *s = arg;
    pthread_mutex_lock(&s->mu);
    while (s->len == 0 && !s->eof && !s->abort)
        pthread_cond_wait(&s->cond, &s->mu);
    ssize_t got;
    if (s->abort) {
        errno = ECANCELED;
        got = -1;
    } else {
        size_t k = s->len < cap ? s->len : cap;
        size_t first = s->cap - s->head < k ? s->cap - s->head : k;
        memcpy(buf, s->ring + s->head, first);
        memcpy((char *)buf + first, s->ring, k - first);
        s->head = (s->head + k) % s->cap;
        s->len -= k;
        if (k)
            s->consumed = true;
        got = (ssize_t)k;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->mu);
    return got;
}

static void *stream_main(void *arg)
{
    rt_stream *s = arg;
    rt_send_one(&s->send);
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int rt_out_new(ferry_router *r, const char *token_base, const ferry_ch_setting *settings,
               size_t n_settings, const char *format, rt_out **out)
{
    rt_out *o = calloc(1, sizeof *o);
    if (!o)
        return FERRY_ENOMEM;
    o->r = r;
    o->n = r->n_shards;
    o->shards = calloc(o->n ? o->n : 1, sizeof *o->shards);
    if (!o->shards) {
        free(o);
        return FERRY_ENOMEM;
    }
    snprintf(o->token, sizeof o->token, "%s", token_base);
    o->settings = settings;
    o->n_settings = n_settings;
    o->format = format;
    *out = o;
    return FERRY_OK;
}

static rt_stream *stream_new(rt_out *o, size_t shard)
{
    rt_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->settings = calloc(o->n_settings + 1, sizeof *s->settings);
    if (!s->settings) {
        free(s);
        return NULL;
    }
    s->o = o;
    s->shard = shard;
    s->seq = o->shards[shard].streams++;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    return s;
}

static void stream_free(rt_stream *s)
{
    if (!s)
        return;
    free(s->ring);
    free(s->settings);
    ferry_buf_free(&s->mem);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s);
}

/* Prepares the send: the statement, the settings plus the deduplication token
 * BASE:XXH3(the request's first row):SEQ. The token names neither the shard nor the INSERT's
 * content: ClickHouse deduplicates each partition of an INSERT on its own (by partition and
 * token), so a retry whose rows are grouped differently (a slice moved to or from the shard
 * meanwhile) still drops the partitions the first attempt stored. SEQ tells a shard's INSERTs
 * of one request apart (one partition may be in two of them); the first row's hash keeps a
 * client's reused query_id with other data from being taken for a retry. */
static void stream_prepare(rt_out *o, rt_stream *s)
{
    ferry_router *r = o->r;
    snprintf(s->token, sizeof s->token, "%s:%016llx:%u", o->token,
             (unsigned long long)o->data_hash, s->seq);
    for (size_t i = 0; i < o->n_settings; i++)
        s->settings[i] = o->settings[i];
    s->settings[o->n_settings] = (ferry_ch_setting){"insert_deduplication_token", s->token};
    s->send = (rt_send){.r = r,
                        .shard = s->shard,
                        .sql = o->sql,
                        .format = o->format,
                        .settings = s->settings,
                        .n_settings = o->n_settings + 1};
}

/* Opens the shard's stream with its stage as the first bytes (the token's hash). */
static int stream_open(rt_out *o, size_t shard)
{
    rt_out_shard *os = &o->shards[shard];
    rt_stream *s = stream_new(o, shard);
    if (!s)
        return FERRY_ENOMEM;
    s->cap = o->r->stream_buffer_bytes;
    if (s->cap < os->stage.len)
        s->cap = os->stage.len;
    s->ring = malloc(s->cap);
    if (!s->ring) {
        stream_free(s);
        return FERRY_ENOMEM;
    }
    stream_prepare(o, s);
    s->send.body_reader = ring_read;
    s->send.body_reader_arg = s;
    s->send.consumed = &s->consumed;
    s->send.consumed_mu = &s->mu;
    if (pthread_create(&s->th, NULL, stream_main, s) != 0) {
        stream_free(s);
        return FERRY_EINTERNAL;
    }
    s->started = true;
    os->open = s;
    return FERRY_OK;
}

/* Moves the stage into the open stream's queue, waiting for room at most shard_timeout. Fails
 * the shard (its stream aborted) when the sender ended early or the shard took nothing within
 * the timeout. */
static void stream_push(rt_out *o, size_t shard)
{
    rt_out_shard *os = &o->shards[shard];
    rt_stream *s = os->open;
    const char *p = os->stage.data;
    size_t left = os->stage.len;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += o->r->shard_timeout_ms / 1000;
    deadline.tv_nsec += (o->r->shard_timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    while (left && !s->done) {
        size_t room = s->cap - s->len;
        if (room == 0) {
            if (pthread_cond_timedwait(&s->cond, &s->mu, &deadline) == ETIMEDOUT) {
                s->abort = true;
                pthread_cond_broadcast(&s->cond);
                os->timed_out = true;
                break;
            }
            continue;
        }
        size_t k = left < room ? left : room;
        size_t tail = (s->head + s->len) % s->cap;
        size_t first = s->cap - tail < k ? s->cap - tail : k;
        memcpy(s->ring + tail, p, first);
        memcpy(s->ring, p + first, k - first);
        s->len += k;
        p += k;
        left -= k;
        pthread_cond_broadcast(&s->cond);
    }
    bool gone = s->done || s->abort;
    pthread_mutex_unlock(&s->mu);
    s->rows += os->stage_rows;
    s->bytes += os->stage.len;
    os->stage.len = 0;
    os->stage_rows = 0;
    if (gone) {
        /* The sender ended (an error) or was given up: close it now; the shard is failed. */
        rt_stream *done = os->open;
        os->open = NULL;
        pthread_mutex_lock(&done->mu);
        done->eof = true;
        pthread_cond_broadcast(&done->cond);
        pthread_mutex_unlock(&done->mu);
        pthread_join(done->th, NULL);
        stream_result(o, done);
        stream_free(done);
    }
}

static void set_failed(rt_out *o, size_t shard, const char *name, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void set_failed(rt_out *o, size_t shard, const char *name, int code, const char *fmt, ...)
{
    rt_out_shard *os = &o->shards[shard];
    if (os->failed)
        return; /* the first error is the one reported */
    os->failed = true;
    os->error_code = code;
    snprintf(os->error_name, sizeof os->error_name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(os->error, sizeof os->error, fmt, ap);
    va_end(ap);
}

/* Accounts a finished stream's rows. */
static void stream_result(rt_out *o, rt_stream *s)
{
    rt_out_shard *os = &o->shards[s->shard];
    ferry_router *r = o->r;
    if (!s->send.rc && !s->abort) {
        os->rows_written += s->rows;
        os->bytes_written += s->bytes;
        return;
    }
    os->rows_failed += s->rows;
    if (s->abort && os->timed_out) {
        set_failed(o, s->shard, "TIMEOUT_EXCEEDED", 0,
                   "the shard took no rows for [router] shard_timeout (%ld ms)",
                   r->shard_timeout_ms);
    } else {
        char name[64] = "";
        ferry_ch_error_parse(s->send.st.message, name, sizeof name);
        set_failed(o, s->shard,
                   s->send.rc == FERRY_ETIMEOUT   ? "TIMEOUT_EXCEEDED"
                   : s->send.rc == FERRY_ECONNECT ? "ALL_CONNECTION_TRIES_FAILED"
                   : name[0]                      ? name
                                                  : "NETWORK_ERROR",
                   s->send.st.ch_code, "%s", s->send.err.msg);
    }
    FLOG_WARN("msg=\"router: shard refused its part of an insert\" shard=%s rows=%llu err=\"%s\"",
              r->shards[s->shard]->name, (unsigned long long)s->rows, os->error);
}

/* Makes room for shard slot index shard (a slot the router opened after the request began). */
static int out_reserve(rt_out *o, size_t shard)
{
    if (shard < o->n)
        return FERRY_OK;
    size_t n = o->r->n_shards;
    if (shard >= n)
        return FERRY_EINTERNAL; /* a route names a slot the router has not counted: a bug */
    rt_out_shard *p = realloc(o->shards, n * sizeof *p);
    if (!p)
        return FERRY_ENOMEM;
    memset(p + o->n, 0, (n - o->n) * sizeof *p);
    o->shards = p;
    o->n = n;
    return FERRY_OK;
}

int rt_out_row(rt_out *o, size_t shard, const char *row, size_t len)
{
    int rc = out_reserve(o, shard);
    if (rc)
        return rc;
    rt_out_shard *os = &o->shards[shard];
    if (os->failed) {
        os->rows_failed++; /* a failed shard gets nothing more in this request */
        return FERRY_OK;
    }
    if (ferry_buf_append(&os->stage, row, len))
        return FERRY_ENOMEM;
    os->stage_rows++;
    if (o->hold || os->stage.len < o->r->flush_bytes)
        return FERRY_OK;
    if (!os->open && (rc = stream_open(o, shard)))
        return rc;
    stream_push(o, shard);
    return FERRY_OK;
}

void rt_out_finish(rt_out *o, bool send_staged)
{
    /* Shards whose rows never filled a stage: one in-memory INSERT each, all in parallel. */
    rt_stream **mem = calloc(o->n ? o->n : 1, sizeof *mem);
    rt_send *sends = calloc(o->n ? o->n : 1, sizeof *sends);
    size_t n = 0;
    for (size_t sh = 0; sh < o->n; sh++) {
        rt_out_shard *os = &o->shards[sh];
        if (os->open) {
            if (os->stage.len && send_staged) {
                stream_push(o, sh);
            } else if (os->stage.len) {
                os->rows_dropped += os->stage_rows;
                os->stage.len = 0;
                os->stage_rows = 0;
            }
            rt_stream *s = os->open;
            if (!s)
                continue; /* closed by the push (failed) */
            pthread_mutex_lock(&s->mu);
            s->eof = true;
            pthread_cond_broadcast(&s->cond);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        if (!os->stage.len)
            continue;
        if (!send_staged || os->failed || !mem || !sends) {
            os->rows_dropped += os->stage_rows;
            os->stage.len = 0;
            os->stage_rows = 0;
            continue;
        }
        rt_stream *s = stream_new(o, sh);
        if (!s) {
            os->rows_failed += os->stage_rows;
            set_failed(o, sh, "CANNOT_ALLOCATE_MEMORY", 0, "out of memory");
            os->stage.len = os->stage_rows = 0;
            continue;
        }
        s->mem = os->stage;
        s->rows = os->stage_rows;
        s->bytes = os->stage.len;
        memset(&os->stage, 0, sizeof os->stage);
        os->stage_rows = 0;
        stream_prepare(o, s);
        s->send.body = s->mem.data;
        s->send.body_len = s->mem.len;
        mem[n] = s;
        sends[n++] = s->send;
    }
    rt_send_all(sends, n);
    for (size_t i = 0; i < n; i++) {
        mem[i]->send = sends[i];
        mem[i]->send.settings = mem[i]->settings;
        stream_result(o, mem[i]);
        stream_free(mem[i]);
    }
    for (size_t sh = 0; sh < o->n; sh++) {
        rt_out_shard *os = &o->shards[sh];
        rt_stream *s = os->open;
        if (!s)
            continue;
        os->open = NULL;
        pthread_join(s->th, NULL);
        stream_result(o, s);
        stream_free(s);
    }
    free(mem);
    free(sends);
}

void rt_out_free(rt_out *o)
{
    if (!o)
        return;
    rt_out_finish(o, false);
    for (size_t sh = 0; sh < o->n; sh++)
        ferry_buf_free(&o->shards[sh].stage);
    free(o->shards);
    free(o);
}
