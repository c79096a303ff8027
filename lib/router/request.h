/* The router daemon's per-request state, private to the two files that handle a request:
 * server.c (classification, passthrough, the HTTP callbacks, the daemon's life cycle) and
 * insert.c (the insert path: rows parsed as the body streams in, routed and streamed to their
 * shards). */
#ifndef FERRY_ROUTER_REQUEST_H
#define FERRY_ROUTER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "router_int.h"

enum req_mode { MODE_HEAD, MODE_INSERT, MODE_PASS, MODE_STREAM, MODE_DONE };

typedef struct req_state {
    ferry_router *r;
    rt_principal *who;  /* who sent it (auth.c); NULL only before authentication */
    enum req_mode mode;
    ferry_buf head;     /* the body's start while the statement is not known yet */
    ferry_rt_head scan; /* its classification so far (each byte looked at once) */
    size_t mem_held;    /* bytes of head and body reserved from the memory budget (budget.c) */
    ferry_buf body;     /* MODE_PASS: the statement's text read whole (the query parameter and
                           a newline, then the body; or the body) */
    size_t body_at;     /* MODE_PASS: where the client's body starts in it */
    bool want_nl;       /* MODE_PASS: the query parameter is held; a newline before the body */
    size_t stmt_max;    /* MODE_PASS of a statement (not an INSERT's data): the text a server
                           would parse at most (max_query_size); 0: max_buffered_bytes only */
    bool past_max;      /* MODE_PASS: bytes beyond stmt_max came (white space, dropped) */
    enum ferry_rt_stmt kind_stmt; /* passthrough: what the statement is */
    rt_pt *pt;          /* MODE_STREAM: the passthrough its body streams to */
    bool pt_answered;   /* MODE_STREAM: the server answered before the body's end */
    size_t received;
    /* insert */
    ferry_rt_insert ins;
    rt_table *table;
    enum ferry_rt_format format;
    ferry_rt_codec *codec;
    ferry_buf carry;    /* data not consumed yet (an incomplete row) */
    ferry_buf row_out;  /* one emitted row */
    rt_snapshot *cur;   /* the routing table rows are routed with; a write in flight under its
                           version is recorded until it is released (rt_route_begin) */
    rt_out *out;        /* per-shard streams */
    char token[256];    /* the base of the deduplication tokens */
    char query_id[256];
    ferry_ch_setting *settings; /* the client's settings, passed on */
    size_t n_settings;
    char *columns_sql;  /* the forwarded INSERT's statement */
    uint64_t rows;
    rt_touched touched; /* the slices rows were routed to (pending.c) */
    rt_journal_req journal; /* those slices in the retry journal (retry_journal.c) */
    /* a bound user's insert is held whole (no stream opens) until every row passed the tenant
     * check, so a refused row stores nothing; tables it was grouped with that are not the
     * current one stay recorded in flight until the rows are sent (kept) */
    bool hold;
    rt_snapshot *kept[8];
    size_t n_kept;
    enum rt_kind kind;  /* for the metrics */
    double t0;          /* when the headers arrived (monotonic seconds) */
    bool ok;            /* answered 200 */
    bool failed;        /* an error was answered; the rest of the body is ignored */
} req_state;

/* ---- the insert path (insert.c) ---- */

/* Sets up the insert into the managed table t once the statement is known (mode MODE_INSERT).
 * False when it answered an error. */
bool rt_insert_begin(ferry_http_req *req, req_state *st, rt_table *t);
/* A piece of the insert's data (eof: the body ended): every complete row is routed. */
void rt_insert_data(ferry_http_req *req, req_state *st, const char *data, size_t len, bool eof);
/* Answers an error for the insert, saying what was already written: streams already open are
 * ended (their rows are written), rows still staged are dropped; mode MODE_DONE. */
void rt_insert_fail(ferry_http_req *req, req_state *st, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The body ended: the last rows routed, every stream ended, the answer sent. */
void rt_insert_end(ferry_http_req *req, req_state *st);

#endif
