/* Moving one slice between shards: the journaled state machine (see move.h, docs/moves.md).
 *
 * The journal is the catalog record moves/ID (state, step, detail) plus jobs/move.ID whose data
 * holds {"freezes": [names made and not yet removed], "fp": {table: {rows, sum, xor}}}. Every
 * change of either is a compare-and-set; the run also holds the catalog lease "move.ID".
 *
 *  state    work done in the state                         guarantees when the state is left
 *  -------  ---------------------------------------------  --------------------------------------
 *  PLANNED  nothing (ferry_move_begin checked the request) the request was valid when journaled
 *  CLONE    one copy round: FREEZE every slice partition   the target's staging table
 *           on the source (fresh freeze name per attempt),  <table>_ferry_staging holds a copy of a
 *           send the parts agent to agent into staging's    snapshot of every slice partition
 *           detached/ (hot: real files, checked against     (parts byte-identical, checked while
 *           checksums.txt while written; cold: pointer      written); the real table on the target
 *           files, every object checked), ATTACH them in    is untouched; routing unchanged
 *           staging, remove the freeze
 *  VERIFY   every staged part has the hash_of_all_files    the staged copy is faithful; the
 *           and rows of a source part; partitions the       routing switch is allowed
 *           source did not change since are equal: hot
 *           ones by fingerprints (verify.h, every row
 *           read), cold ones by their part digest
 *           (cold_digest: no row read)
 *  -------  the routing switch: one catalog batch moves the journal to SWITCH and the slice's
 *           route to the target (both by CAS). THE COMMIT POINT: from here on the move only
 *           rolls forward; the source keeps every row until CLEANUP
 *  SWITCH   wait the grace period (writes in flight to the   the target's real table holds every
 *           source land), then catch-up rounds: freeze      row of the slice: rows the source got
 *           again, make staging equal to the source         before the switch (verified equal,
 *           (send new and merged parts, detach parts the    partition by partition) plus rows
 *           source merged away), until staging and source   written to the target after it;
 *           have equal fingerprints and part hashes; the    staging holds nothing of the slice
 *           verified fingerprints are journaled; step is
 *           set to PUBLISH (with the route: a new routing
 *           version), the read fence waits for readers of
 *           the union, then each partition goes into
 *           the real table with MOVE PARTITION ... TO
 *           TABLE (atomic; empties staging, so a resume
 *           never adds a partition twice)
 *  CLEANUP  the source still matches the journaled           the source holds nothing of the slice
 *           fingerprints (else stop: a late write); DETACH  (no active, detached or frozen part);
 *           the slice's partitions on the source, remove    no leftover of the move on the target
 *           the detached folders through the agent, remove
 *           leftovers in the target's staging detached/,
 *           remove every freeze the move made
 *  DONE     -
 *  FAILED   (from CLONE/VERIFY) the target's staging parts   routing never changed; the target
 *           of the slice were detached and removed, the     holds nothing of the move
 *           source's freezes removed
 *
 * Readers (lib/router/routing.c has the full argument): the switch, the publish step and the
 * entry into CLEANUP are each one batch with the slice's route, so each raises the routing
 * version; routers read the union of source and target under the switch's version, hold reads
 * of the slice under the publish step's, and read the target alone from CLEANUP's. The read
 * fence before the first MOVE PARTITION waits until no router reads under an older version.
 *
 * Invariants: the source's real table is only read until CLEANUP; the target's real table only
 * receives parts by MOVE PARTITION from staging, after verification; object storage is never
 * written or deleted (cold parts travel as pointer files, removal is a plain unlink by the agent);
 * no statement can DROP, TRUNCATE or DELETE (sqlguard). A step repeated after a crash gives the
 * same result: freezes are found by name, sends of a part already placed answer "existing",
 * ATTACH of a partition without detached parts attaches nothing, the catch-up diff is computed
 * from what is there, and MOVE PARTITION of an empty staging partition is skipped. */
#include "ferry/move.h"
#include "ferry/fence.h"
#include "ferry/stop.h"

#include <jansson.h>
#include <pthread.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ferry/agent.h"
#include "ferry/buf.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/rate.h"
#include "ferry/strutil.h"
#include "ferry/tally.h"
#include "ferry/testknob.h"
#include "ferry/verify.h"
#include "flow/move_env.h"
#include "flow/part_records.h"
#include "flow/replica_int.h"
#include "flow/staging_load.h"

#define MV_MAX_ATTEMPTS 20    /* attempts of one state before the move gives up */
#define MV_MAX_ROUNDS 5       /* catch-up rounds of one SWITCH attempt */
#define MV_STEP_PUBLISH FERRY_MOVE_STEP_PUBLISH /* SWITCH step: verified, publishing */
#define MV_STAGING_SUFFIX "_ferry_staging"

/* ---- small helpers ---------------------------------------------------------------------- */

/* Copies src into dst (size dstsz), truncating; names in the catalog always fit. */
static void copy_str(char *dst, size_t dstsz, const char *src)
{
    size_t n = strlen(src);
    if (n >= dstsz)
        n = dstsz - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Test-only fault injection (include/ferry/testknob.h): FERRY_TEST_CRASH_AFTER=<point> kills
 * this process at that point, as kill -9 would (docs/moves.md). */
static void crash_point(const char *point) { ferry_fault_point("FERRY_TEST_CRASH_AFTER", point); }

static void sql_table(ferry_buf *b, const char *db, const char *table)
{
    ferry_sql_ident(db, b);
    ferry_buf_putc(b, '.');
    ferry_sql_ident(table, b);
}

static void staging_name(const char *table, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s%s", table, MV_STAGING_SUFFIX);
}

static uint64_t u64_of(const char *s)
{
    uint64_t v = 0;
    return ferry_parse_u64(s, &v) ? v : 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- what the servers hold -------------------------------------------------------------- */

typedef struct mv_pids {
    char (*ids)[FERRY_NAME_MAX];
    size_t n;
} mv_pids;

static void pids_free(mv_pids *p)
{
    free(p->ids);
    memset(p, 0, sizeof *p);
}

static bool pids_has(const mv_pids *p, const char *id)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->ids[i], id))
            return true;
    return false;
}

static int pids_add(mv_pids *p, const char *id)
{
    if (pids_has(p, id))
        return FERRY_OK;
    void *n = realloc(p->ids, (p->n + 1) * sizeof *p->ids);
    if (!n)
        return FERRY_ENOMEM;
    p->ids = n;
    snprintf(p->ids[p->n++], FERRY_NAME_MAX, "%s", id);
    return FERRY_OK;
}

/* The partition ids of the slice in db.table on c (active parts with rows), added to out
 * (replica_sync.c reads them for both flows). */
static int slice_pids(mv_conn *c, const ferry_table_def *t, const char *table, const char *tenant,
                      uint32_t split, mv_pids *out, ferry_err *err)
{
    return rs_slice_pids(c, t, table, tenant, split, &out->ids, &out->n, err);
}

/* Whether two lists of parts hold the same multiset of hash_of_all_files. */
static bool same_hashes(const mv_parts *a, const mv_parts *b)
{
    if (a->n != b->n)
        return false;
    bool same = true;
    char **x = calloc(a->n + 1, sizeof *x), **y = calloc(b->n + 1, sizeof *y);
    if (!x || !y) {
        same = false;
        goto out;
    }
    for (size_t i = 0; i < a->n; i++) {
        x[i] = (char *)a->p[i].hash;
        y[i] = (char *)b->p[i].hash;
    }
    qsort(x, a->n, sizeof *x, cmp_str);
    qsort(y, b->n, sizeof *y, cmp_str);
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(x[i], y[i]))
            same = false;
out:
    free(x);
    free(y);
    return same;
}

/* ---- the move context ------------------------------------------------------------------- */

typedef struct mvctx {
    const ferry_move_opts *o;
    ferry_catalog *cat;
    ferry_record mv;  /* the journal record */
    ferry_record job; /* jobs/move.ID */
    json_t *data;     /* job data */
    mv_conn src, dst;
    ferry_record_list tables;
    ferry_move_result *res;
    double t0;
    uint64_t bytes_done, bytes_total;
    size_t parts_done, parts_total;
    size_t cold_verified, hot_verified; /* partitions verified equal (by part hashes), cold / hot */
    unsigned long catalog_writes; /* commits this run made */
    ferry_rate *rate;               /* the bandwidth limit: o->rate, or own_rate */
    ferry_rate *own_rate;           /* o->max_bytes_per_second for this run alone */
    bool permanent; /* the last failure cannot heal by retrying: roll back */
    bool clone;     /* keep-source mode: adds a replica (journal data "mode": "clone") */
} mvctx;

static void progress(mvctx *x)
{
    if (!x->o->progress)
        return;
    ferry_move_progress p = {.id = x->mv.u.move.id,
                             .tenant = x->mv.u.move.tenant,
                             .split = x->mv.u.move.split,
                             .from = x->mv.u.move.from,
                             .to = x->mv.u.move.to,
                             .state = ferry_move_state_name(x->mv.u.move.state),
                             .bytes_done = x->bytes_done,
                             .bytes_total = x->bytes_total,
                             .parts_done = x->parts_done,
                             .parts_total = x->parts_total,
                             .elapsed_s = now_s() - x->t0};
    x->o->progress(&p, x->o->progress_arg);
}

static int job_save(mvctx *x, ferry_err *err)
{
    char *s = json_dumps(x->data, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (strlen(s) >= sizeof x->job.u.job.data) {
        free(s);
        return ferry_err_set(err, FERRY_EINTERNAL, "move %s: journal data too large",
                             x->mv.u.move.id);
    }
    snprintf(x->job.u.job.data, sizeof x->job.u.job.data, "%s", s);
    snprintf(x->job.u.job.state, sizeof x->job.u.job.state, "%s",
             ferry_move_state_name(x->mv.u.move.state));
    x->job.u.job.updated = (int64_t)time(NULL);
    free(s);
    x->catalog_writes++;
    int rc = ferry_catalog_update(x->cat, &x->job, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "move %s: its journal was changed by another mover: ",
                         x->mv.u.move.id);
    return rc;
}

static int move_update(mvctx *x, ferry_err *err)
{
    x->mv.u.move.updated = (int64_t)time(NULL);
    x->catalog_writes++;
    int rc = ferry_catalog_update(x->cat, &x->mv, err);
    if (rc == FERRY_ECONFLICT)
        ferry_err_prefix(err, "move %s: changed by another mover: ", x->mv.u.move.id);
    return rc;
}

static int advance(mvctx *x, enum ferry_move_state to, const char *detail, ferry_err *err)
{
    x->catalog_writes++;
    int rc = ferry_catalog_move_advance(x->cat, &x->mv, to, detail, err);
    if (!rc)
        ferry_log(FERRY_LOG_INFO, "msg=\"move state\" move=%s tenant=%s split=%u state=%s",
                  x->mv.u.move.id, x->mv.u.move.tenant, x->mv.u.move.split,
                  ferry_move_state_name(to));
    progress(x);
    return rc;
}

/* The journal record next and the slice's route in one catalog batch (a batch that touches a
 * route raises the routing version: *routing_version). FERRY_ECONFLICT when either moved on. */
static int commit_with_route(mvctx *x, const ferry_record *next, const ferry_record *route,
                             uint64_t *routing_version, ferry_err *err)
{
    ferry_batch *b = ferry_batch_new();
    ferry_commit_info info = {0};
    if (!b)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = ferry_batch_update(b, next, err);
    if (!rc)
        rc = ferry_batch_update(b, route, err);
    if (!rc) {
        x->catalog_writes++;
        rc = ferry_catalog_commit(x->cat, b, &info, err);
    }
    ferry_batch_free(b);
    *routing_version = info.routing_version;
    return rc;
}

/* Writes the journal `next` and touches the slice's route (unchanged) in one catalog batch, so
 * the routing version rises with the journal: a router loads the move records with the routes
 * under one version (lib/router/routing.c), so it sees this step exactly from that version on.
 * Used where readers must change what they read: the publish step and CLEANUP. */
static int journal_routed(mvctx *x, ferry_record *next, ferry_err *err)
{
    if (next->u.move.state != x->mv.u.move.state &&
        !ferry_move_transition_ok(x->mv.u.move.state, next->u.move.state))
        return ferry_err_set(err, FERRY_EINVAL, "move %s cannot go from %s to %s",
                             x->mv.u.move.id, ferry_move_state_name(x->mv.u.move.state),
                             ferry_move_state_name(next->u.move.state));
    ferry_record route;
    ferry_record_init(&route, FERRY_REC_ROUTE);
    snprintf(route.u.route.tenant, sizeof route.u.route.tenant, "%s", x->mv.u.move.tenant);
    route.u.route.split = x->mv.u.move.split;
    int rc = ferry_catalog_get(x->cat, &route, err);
    if (rc)
        return rc;
    next->u.move.updated = (int64_t)time(NULL);
    uint64_t routing_version = 0;
    rc = commit_with_route(x, next, &route, &routing_version, err);
    if (rc) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "move %s: changed by another mover (or its route changed): ",
                             x->mv.u.move.id);
        return rc;
    }
    char id[64];
    snprintf(id, sizeof id, "%s", x->mv.u.move.id);
    ferry_record_free(&x->mv);
    ferry_record_init(&x->mv, FERRY_REC_MOVE);
    snprintf(x->mv.u.move.id, sizeof x->mv.u.move.id, "%s", id);
    if ((rc = ferry_catalog_get(x->cat, &x->mv, err)))
        return rc;
    ferry_log(FERRY_LOG_INFO,
              "msg=\"move state\" move=%s tenant=%s split=%u state=%s step=%u routing_version=%llu",
              x->mv.u.move.id, x->mv.u.move.tenant, x->mv.u.move.split,
              ferry_move_state_name(x->mv.u.move.state), x->mv.u.move.step,
              (unsigned long long)routing_version);
    progress(x);
    return FERRY_OK;
}

/* Enters CLEANUP with a new routing version (journal_routed): routers stop holding reads of the
 * slice (publishing) or start reading a clone's new replica. */
static int advance_cleanup(mvctx *x, ferry_err *err)
{
    ferry_record next = x->mv;
    next.u.move.state = FERRY_MOVE_CLEANUP;
    next.u.move.step = 0;
    next.u.move.detail[0] = '\0';
    return journal_routed(x, &next, err);
}

/* Starts a new attempt of the current state: counts it in the journal (a CAS that a second
 * mover would lose) and removes the freezes earlier attempts left. */
static int remove_freezes(mvctx *x, ferry_err *err);

static int begin_attempt(mvctx *x, ferry_err *err)
{
    if (x->mv.u.move.step >= MV_MAX_ATTEMPTS) {
        x->permanent = true;
        return ferry_err_set(err, FERRY_EIO, "move %s: %u attempts of %s failed; giving up",
                             x->mv.u.move.id, x->mv.u.move.step,
                             ferry_move_state_name(x->mv.u.move.state));
    }
    x->mv.u.move.step++;
    snprintf(x->mv.u.move.owner, sizeof x->mv.u.move.owner, "%s", x->o->owner ? x->o->owner : "");
    int rc = move_update(x, err);
    if (!rc)
        rc = remove_freezes(x, err);
    return rc;
}

static int freeze_name(mvctx *x, const char *tag, char *out, size_t outsz, ferry_err *err)
{
    /* only [A-Za-z0-9_]: ClickHouse escapes other bytes of a WITH NAME into %XX in the shadow
     * folder's name, which the agent looks up unescaped */
    snprintf(out, outsz, "%s_%s", x->mv.u.move.id, tag);
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    json_t *fr = json_object_get(x->data, "freezes");
    json_array_append_new(fr, json_string(out));
    return job_save(x, err); /* journaled before it exists, so a crash never forgets it */
}

static int remove_freeze_named(mvctx *x, const char *name, ferry_err *err)
{
    json_t *req = json_pack("{s:s}", "name", name);
    int rc = mv_agent(&x->src, "remove-freeze", req, NULL, NULL, err);
    json_decref(req);
    if (rc)
        return rc;
    json_t *fr = json_object_get(x->data, "freezes");
    for (size_t i = 0; i < json_array_size(fr); i++)
        if (!strcmp(json_string_value(json_array_get(fr, i)), name)) {
            json_array_remove(fr, i);
            break;
        }
    return job_save(x, err);
}

static int remove_freezes(mvctx *x, ferry_err *err)
{
    json_t *fr = json_object_get(x->data, "freezes");
    while (json_array_size(fr) > 0) {
        char name[160];
        snprintf(name, sizeof name, "%s", json_string_value(json_array_get(fr, 0)));
        int rc = remove_freeze_named(x, name, err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

static int ensure_staging(mvctx *x, const ferry_table_def *t, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    staging_name(t->name, st, sizeof st);
    /* read-only mode: a staging table detached by a load (another flow's, or one a crash cut)
     * is waited for or attached again before CREATE could make a second one */
    int rc = stg_recover(&x->dst, t->database, st, err);
    if (rc)
        return rc;
    ferry_buf sql = FERRY_BUF_INIT;
    /* same columns, engine, keys and storage policy: what ATTACH and MOVE PARTITION require */
    ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
    sql_table(&sql, t->database, st);
    ferry_buf_puts(&sql, " AS ");
    sql_table(&sql, t->database, t->name);
    rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
    /* The catch-up rounds name staging parts (DETACH PART of a stale copy); a background merge
     * in staging would rename them under our feet (NO_SUCH_DATA_PART). Nothing needs merges in
     * staging: its parts go to the real table by MOVE PARTITION. Stopped on every run, since the
     * setting does not survive a server restart. */
    if (!rc) {
        ferry_buf_reset(&sql);
        ferry_buf_puts(&sql, "SYSTEM STOP MERGES ");
        sql_table(&sql, t->database, st);
        rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
    }
    ferry_buf_free(&sql);
    return rc;
}

/* Detaches one part of the target's staging table and removes its folder. */
static int staging_drop_part(mvctx *x, const ferry_table_def *t, const char *part, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    staging_name(t->name, st, sizeof st);
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    sql_table(&sql, t->database, st);
    ferry_buf_puts(&sql, " DETACH PART ");
    ferry_sql_quote(part, &sql);
    int rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    if (rc)
        return rc;
    json_t *req = json_pack("{s:s, s:s, s:s}", "database", t->database, "table", st, "part", part);
    rc = mv_agent(&x->dst, "remove-detached", req, NULL, NULL, err);
    json_decref(req);
    return rc;
}

/* Removes every detached part of db.table on c whose partition is in pids. With tmp_too, also
 * the agents' temporary folders (tmp-ferry-<pid>-...) left by a receive whose agent was killed;
 * the agent refuses (409) those whose writer still runs: another move's receive in progress. */
static int remove_detached_of(mv_conn *c, const char *db, const char *table, const mv_pids *pids,
                              bool tmp_too, ferry_err *err)
{
    json_t *req = json_pack("{s:s, s:s}", "database", db, "table", table), *resp = NULL;
    int rc = mv_agent(c, "parts", req, &resp, NULL, err);
    json_decref(req);
    if (rc)
        return rc;
    json_t *det = json_object_get(resp, "detached"), *d, *batch = json_array();
    size_t i;
    /* the parts of the slice's partitions in one request (an older agent takes one each) */
    json_array_foreach(det, i, d) {
        const char *pid = json_string_value(json_object_get(d, "partition_id"));
        const char *name = json_string_value(json_object_get(d, "name"));
        if (batch && name && strncmp(name, "tmp-ferry-", 10) && pid && pids_has(pids, pid))
            json_array_append_new(batch, json_string(name));
    }
    bool batched = false;
    if (json_array_size(batch) > 1) {
        json_t *r = json_pack("{s:s, s:s, s:O}", "database", db, "table", table, "parts", batch);
        long status = 0;
        rc = r ? mv_agent(c, "remove-detached", r, NULL, &status, err)
               : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        json_decref(r);
        batched = rc == FERRY_OK;
        if (rc && status == 400)
            rc = FERRY_OK; /* an agent of an older version: one request per part below */
    }
    json_decref(batch);
    json_array_foreach(det, i, d)
    {
        const char *pid = json_string_value(json_object_get(d, "partition_id"));
        const char *name = json_string_value(json_object_get(d, "name"));
        bool tmp = tmp_too && name && !strncmp(name, "tmp-ferry-", 10);
        if (rc || !name || (!tmp && (batched || !pid || !pids_has(pids, pid))))
            continue;
        json_t *r = json_pack("{s:s, s:s, s:s}", "database", db, "table", table, "part", name);
        long status = 0;
        rc = mv_agent(c, "remove-detached", r, NULL, &status, err);
        json_decref(r);
        if (rc && tmp && status == 409) {
            ferry_log(FERRY_LOG_DEBUG, "msg=\"receive in progress, kept\" shard=%s folder=%s",
                      c->name, name);
            rc = FERRY_OK;
            continue;
        }
        if (rc)
            break;
        if (tmp)
            ferry_log(FERRY_LOG_INFO, "msg=\"removed a half-received part left by a killed "
                      "agent\" shard=%s table=%s.%s folder=%s", c->name, db, table, name);
    }
    json_decref(resp);
    return rc;
}


/* The frozen parts of partition pid in a freeze answer (a part's name starts with "PID_"). */
static size_t frozen_of(json_t *fparts, const char *pid, json_t **out, size_t max)
{
    size_t n = 0, i, pl = strlen(pid);
    json_t *fp;
    json_array_foreach(fparts, i, fp) {
        const char *name = json_string_value(json_object_get(fp, "name"));
        if (name && !strncmp(name, pid, pl) && name[pl] == '_' && n < max)
            out[n++] = fp;
    }
    return n;
}

/* The freeze of a slice one partition at a time, for agents that take one partition per
 * request: *out gets {"parts": [every frozen part]}. A partition gone meanwhile (404) is
 * skipped. */
static int freeze_each(mvctx *x, const ferry_table_def *t, const char *freeze,
                       const mv_slice *src, json_t **out, ferry_err *err)
{
    json_t *all = json_array();
    int rc = all ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < src->n_pids; i++) {
        json_t *req = json_pack("{s:s, s:s, s:s, s:s}", "database", t->database, "table",
                                t->name, "partition_id", src->pids[i], "name", freeze),
               *fz = NULL;
        long status = 0;
        rc = mv_agent(&x->src, "freeze", req, &fz, &status, err);
        json_decref(req);
        if (rc == FERRY_ENOTFOUND && status == 404) {
            rc = FERRY_OK; /* the partition went away (nothing to freeze) */
            continue;
        }
        if (!rc)
            json_array_extend(all, json_object_get(fz, "parts"));
        json_decref(fz);
    }
    if (rc) {
        json_decref(all);
        return rc;
    }
    *out = json_pack("{s:o}", "parts", all);
    return *out ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* ---- sending parts, several at a time ---------------------------------------------------- */

#define MV_SEND_THREADS 4 /* parts in flight agent to agent at once */

typedef struct send_job {
    const char *name;  /* the frozen part (borrowed from the freeze answer) */
    size_t pid;        /* its partition's index in the slice listing */
    bool sent;
} send_job;

typedef struct send_pool {
    mvctx *x;
    const ferry_table_def *t;
    const char *staging, *freeze;
    const mv_slice *src;
    bool first;
    send_job *jobs;
    size_t n, next;
    pthread_mutex_t mu; /* next, stop, the error, x's counters and result */
    bool stop;
    int rc;
    long status;
    ferry_err err;
} send_pool;

/* Sends one part from the source's agent (client cl) to the target's staging detached/, and
 * accounts it. */
static int send_one(send_pool *p, ferry_agent_client *cl, send_job *j, ferry_err *err)
{
    mvctx *x = p->x;
    const ferry_table_def *t = p->t;
    json_t *ans = NULL;
    long status = 0;
    json_t *sreq = json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "database",
                             t->database, "table", t->name, "freeze", p->freeze, "part", j->name,
                             "target", "url", x->dst.agent_url, "token", x->dst.token,
                             "database", t->database, "table", p->staging);
    int rc = sreq ? ferry_agent_call(cl, "send", sreq, &ans, &status, err)
                  : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    json_decref(sreq);
    pthread_mutex_lock(&p->mu);
    x->src.n_agent++;
    if (rc) {
        if (status == 507 || status == 422 || status == 409)
            x->permanent = true; /* target full, or a part that fails its checks */
        if (status == 507)
            ferry_err_prefix(err, "target shard %s ran out of disk space while receiving part "
                             "%s of %s.%s (free space on that disk, then start the move "
                             "again): ", x->dst.name, j->name, t->database, t->name);
        else
            ferry_err_prefix(err, "agent of %s (send): sending part %s of %s.%s from %s to %s: ",
                             x->src.name, j->name, t->database, t->name, x->src.name,
                             x->dst.name);
        pthread_mutex_unlock(&p->mu);
        json_decref(ans);
        return rc;
    }
    uint64_t sent_bytes = (uint64_t)json_integer_value(json_object_get(ans, "bytes_sent"));
    bool pointer = !strcmp(json_string_value(json_object_get(ans, "kind")) ?: "", "pointer");
    if (pointer)
        x->res->cold_copied += sent_bytes;
    else
        x->res->hot_copied += sent_bytes;
    if (!p->first) {
        mv_parts sp_all = mv_slice_parts(p->src, p->src->pids[j->pid]);
        const mv_part *sp = mv_parts_find(&sp_all, j->name);
        if (sp && sp->cold)
            x->res->cold_bytes += sp->bytes, x->res->cold_parts++;
        else if (sp)
            x->res->hot_bytes += sp->bytes, x->res->hot_parts++;
    }
    x->bytes_done += sent_bytes;

    x->parts_done++;
    j->sent = true;
    progress(x);
    pthread_mutex_unlock(&p->mu);
    json_decref(ans);
    ferry_rate_account(x->rate, sent_bytes); /* the run's bandwidth limit (shared or its own) */
    return FERRY_OK;
}

static void *send_worker(void *arg)
{
    send_pool *p = arg;
    mvctx *x = p->x;
    ferry_agent_client *cl = NULL;
    ferry_err err = {0};
    int rc = ferry_agent_client_new(x->src.agent_url, x->src.token, 600000, &cl, &err);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        send_job *j = !rc && !p->stop && p->next < p->n ? &p->jobs[p->next++] : NULL;
        pthread_mutex_unlock(&p->mu);
        if (!j)
            break;
        rc = send_one(p, cl, j, &err);
    }
    if (rc) {
        pthread_mutex_lock(&p->mu);
        if (!p->rc) {
            p->rc = rc;
            p->err = err;
        }
        p->stop = true;
        pthread_mutex_unlock(&p->mu);
    }
    ferry_agent_client_free(cl);
    return NULL;
}

/* Sends every job: the calling thread and up to MV_SEND_THREADS - 1 more, each with its own
 * agent client (a client is one connection, not shared). The first error stops the others
 * after their current part; it is the one returned. */
static int send_all(send_pool *p, ferry_err *err)
{
    size_t nt = MV_SEND_THREADS;
    if (nt > p->n)
        nt = p->n;
    pthread_t th[MV_SEND_THREADS];
    bool started[MV_SEND_THREADS] = {false};
    pthread_mutex_init(&p->mu, NULL);
    for (size_t i = 1; i < nt; i++)
        started[i] = pthread_create(&th[i], NULL, send_worker, p) == 0;
    send_worker(p);
    for (size_t i = 1; i < nt; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    if (p->rc)
        *err = p->err;
    return p->rc;
}

/* One copy round for one table: make the target's staging partitions of the slice equal to a
 * snapshot (FREEZE) of the source's. `first` counts every snapshot part's real size in the
 * result (the CLONE round); later rounds count only what they send. The slice's parts are
 * listed once per side, every partition is frozen by one agent request (one ALTER TABLE), and
 * the partitions that received parts are attached by one ALTER TABLE. */
static int copy_round(mvctx *x, const ferry_table_def *t, const char *freeze, bool first,
                      ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    staging_name(t->name, st, sizeof st);
    mv_slice src = {0}, stg = {0};
    json_t *fz = NULL, **fparts = NULL;
    size_t n_attach = 0;
    const char *tenant = x->mv.u.move.tenant;
    uint32_t split = x->mv.u.move.split;
    int rc = mv_slice_list(&x->src, t, t->name, tenant, split, false, &src, err);
    if (!rc)
        rc = mv_slice_list(&x->dst, t, st, tenant, split, true, &stg, err);
    if (!rc && src.n_pids) {
        json_t *ids = json_array();
        for (size_t i = 0; ids && i < src.n_pids; i++)
            json_array_append_new(ids, json_string(src.pids[i]));
        json_t *req = json_pack("{s:s, s:s, s:s, s:o}", "database", t->database, "table",
                                t->name, "name", freeze, "partition_ids", ids);
        long status = 0;
        rc = req ? mv_agent(&x->src, "freeze", req, &fz, &status, err)
                 : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        json_decref(req);
        if (rc && status == 400)
            rc = freeze_each(x, t, freeze, &src, &fz, err); /* an agent of an older version */
    }
    json_t *all_frozen = json_object_get(fz, "parts");
    size_t max_frozen = json_array_size(all_frozen);
    if (!rc && !(fparts = calloc(max_frozen + 1, sizeof *fparts)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    bool sent_any = false;
    send_job *jobs = NULL;
    size_t n_jobs = 0, cap_jobs = 0;
    bool *sent_pid = calloc(src.n_pids + 1, sizeof *sent_pid);
    if (!rc && !sent_pid)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < src.n_pids; i++) {
        const char *pid = src.pids[i];
        size_t nf = frozen_of(all_frozen, pid, fparts, max_frozen);
        mv_parts sp_all = mv_slice_parts(&src, pid), sg = mv_slice_parts(&stg, pid);
        bool *need = calloc(nf + 1, sizeof *need), *keep = calloc(sg.n + 1, sizeof *keep);
        if (!need || !keep)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        /* diff by content: a frozen part whose hash staging holds (and not yet matched) stays */
        for (size_t k = 0; !rc && k < nf; k++) {
            const char *name = json_string_value(json_object_get(fparts[k], "name"));
            const mv_part *sp = name ? mv_parts_find(&sp_all, name) : NULL;
            if (!sp) {
                /* an empty part (not listed), or one merged away since the freeze: either way
                 * nothing to send now; the exact comparison after the switch copies until
                 * staging equals the source, so a part skipped here cannot be lost */
                FLOG_INFO("msg=\"frozen part not sent: empty, or merged since the freeze\" "
                          "move=%s table=%s.%s part=%s", x->mv.u.move.id, t->database, t->name,
                          name ? name : "?");
                continue;
            }
            if (first) {
                if (sp->cold)
                    x->res->cold_bytes += sp->bytes, x->res->cold_parts++;
                else
                    x->res->hot_bytes += sp->bytes, x->res->hot_parts++;
            }
            need[k] = true;
            for (size_t j = 0; j < sg.n; j++)
                if (!keep[j] && !strcmp(sg.p[j].hash, sp->hash) && sg.p[j].rows == sp->rows) {
                    keep[j] = true;
                    need[k] = false;
                    break;
                }
            if (need[k]) {
                x->parts_total++;
                x->bytes_total += (uint64_t)json_integer_value(json_object_get(fparts[k], "bytes"));
            }
        }
        /* staging parts the snapshot no longer has (the source merged them away) */
        for (size_t j = 0; !rc && j < sg.n; j++)
            if (!keep[j])
                rc = staging_drop_part(x, t, sg.p[j].name, err);
        progress(x);
        for (size_t k = 0; !rc && k < nf; k++) {
            if (!need[k])
                continue;
            if (n_jobs == cap_jobs) {
                size_t cap = cap_jobs ? 2 * cap_jobs : 16;
                send_job *j = realloc(jobs, cap * sizeof *j);
                if (!j) {
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                    break;
                }
                jobs = j;
                cap_jobs = cap;
            }
            jobs[n_jobs++] = (send_job){
                .name = json_string_value(json_object_get(fparts[k], "name")), .pid = i};
        }
        free(need);
        free(keep);
    }
    /* the parts go agent to agent, several at a time */
    if (!rc && n_jobs) {
        send_pool pool = {.x = x, .t = t, .staging = st, .freeze = freeze, .src = &src,
                          .first = first, .jobs = jobs, .n = n_jobs};
        rc = send_all(&pool, err);
        for (size_t j = 0; j < n_jobs; j++)
            if (jobs[j].sent)
                sent_pid[jobs[j].pid] = true;
    }
    const char **load = rc ? NULL : calloc(src.n_pids + 1, sizeof *load);
    if (!rc && !load)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < src.n_pids; i++) {
        if (!sent_pid || !sent_pid[i])
            continue;
        load[n_attach++] = src.pids[i];
        sent_any = true;
    }
    if (!rc && sent_any) {
        crash_point("CLONE:sent");
        /* ATTACH PARTITION, or the read-only route (staging_load.h) */
        rc = stg_load(&x->dst, t->database, st, load, n_attach, err);
    }
    free(load);
    free(jobs);
    free(sent_pid);
    free(fparts);
    json_decref(fz);
    mv_slice_free(&src);
    mv_slice_free(&stg);
    return rc;
}

/* Whether every part of the list is on an object-storage disk (a cold partition). */
static bool all_cold(const mv_parts *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->p[i].active && !ps->p[i].cold)
            return false;
    return ps->n > 0;
}

/* The digest of a cold partition from its active parts alone (docs/moves.md, "Verification"):
 * rows = the parts' rows, sum and xor of xxh64 over each part's hash_of_all_files. A cold part's
 * files are pointer files naming immutable objects (the key carries the freeze name, so no two
 * parts share a key for different bytes), and the receiving agent checked that every object they
 * name exists with its size; two parts with equal hash_of_all_files (the hash of checksums.txt,
 * which holds every file's hash) and rows read the same bytes. Reading every row on both sides
 * would only read those same objects twice. */
static void cold_digest(const mv_parts *ps, ferry_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    for (size_t i = 0; i < ps->n; i++) {
        if (!ps->p[i].active)
            continue;
        uint64_t h = XXH64(ps->p[i].hash, strlen(ps->p[i].hash), 0x66657272u);
        fp->rows += ps->p[i].rows;
        fp->hash_sum += h;
        fp->hash_xor ^= h;
        fp->parts++;
        fp->bytes += ps->p[i].bytes;
    }
}

/* The union of two slices' partition ids, sorted (into out). */
static int pids_union(const mv_slice *a, const mv_slice *b, mv_pids *out, ferry_err *err)
{
    for (size_t i = 0; i < a->n_pids; i++)
        if (pids_add(out, a->pids[i]))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < b->n_pids; i++)
        if (!pids_has(out, b->pids[i]) && pids_add(out, b->pids[i]))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

/* Adds b's rows and hashes to a (the fingerprints of disjoint sets of rows or parts). */
static void fp_add(ferry_fingerprint *a, const ferry_fingerprint *b)
{
    a->rows += b->rows;
    a->hash_sum += b->hash_sum;
    a->hash_xor ^= b->hash_xor;
}

/* Adds the source's rows of the partitions hot to fp: one query for all of them. */
static int fingerprint_hot(mvctx *x, const ferry_table_def *t, const mv_pids *hot,
                           ferry_fingerprint *fp, ferry_err *err)
{
    const char **ids = calloc(hot->n, sizeof *ids);
    ferry_fingerprint *f = calloc(hot->n, sizeof *f);
    int rc = ids && f ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; !rc && k < hot->n; k++)
        ids[k] = hot->ids[k];
    if (!rc)
        rc = ferry_fingerprint_partitions(x->src.ch, t->database, t->name, ids, hot->n, f, err);
    for (size_t k = 0; !rc && k < hot->n; k++)
        fp_add(fp, &f[k]);
    free(ids);
    free(f);
    return rc;
}

/* Compares the staging copy with the source, partition by partition, from one listing of the
 * slice's parts per side. exact: the source is quiescent (after the switch), so part hashes
 * must be equal (*stable false when the source changed since the copy: another round is
 * needed). Not exact (VERIFY): every staged part must be a copy of a source part (hash and
 * rows). Equal multisets of hash_of_all_files are equal data (each staged part was checked
 * against its checksums.txt while it was written, and the hash covers every file's checksum),
 * so no row is read to compare. fp (may be NULL; exact and stable only) accumulates the source's
 * fingerprint of the slice, which CLEANUP checks again: cold partitions by their part digest,
 * hot ones by their rows (one query for all of them; a later merge on the source changes the
 * parts, not the rows). digest (may be NULL) accumulates the digest of the source's parts. */
static int compare_copy(mvctx *x, const ferry_table_def *t, bool exact, bool *stable,
                        ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    staging_name(t->name, st, sizeof st);
    mv_pids pids = {0}, hot = {0};
    mv_slice src = {0}, stg = {0};
    *stable = true;
    int rc = mv_slice_list(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, exact,
                           &src, err);
    if (!rc)
        rc = mv_slice_list(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, true, &stg,
                           err);
    if (!rc)
        rc = pids_union(&src, &stg, &pids, err);
    for (size_t i = 0; !rc && i < pids.n; i++) {
        const char *pid = pids.ids[i];
        mv_parts sv = mv_slice_parts(&src, pid), sg = mv_slice_parts(&stg, pid);
        mv_parts src_active = {0};
        src_active.p = calloc(sv.n + 1, sizeof *src_active.p);
        if (!src_active.p)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        for (size_t k = 0; !rc && k < sv.n; k++)
            if (sv.p[k].active)
                src_active.p[src_active.n++] = sv.p[k];
        bool same = !rc && same_hashes(&src_active, &sg);
        if (!rc && !exact && !same) {
            /* The source's parts changed since the freeze (new rows, or a merge: a server may
             * drop merged-away parts at once, old_parts_lifetime = 0), so a staged part need not
             * match any part listed now. Such a partition is checked exactly after the switch,
             * where rounds copy until staging equals the source; a bad copy cannot survive
             * that. */
            size_t unmatched = 0;
            for (size_t j = 0; j < sg.n; j++) {
                bool found = false;
                for (size_t k = 0; k < sv.n && !found; k++)
                    found = !strcmp(sv.p[k].hash, sg.p[j].hash) && sv.p[k].rows == sg.p[j].rows;
                unmatched += !found;
            }
            if (unmatched)
                FLOG_INFO("msg=\"verify: source parts changed since the copy; checked after the "
                          "switch\" move=%s table=%s.%s partition=%s staged_unmatched=%zu",
                          x->mv.u.move.id, t->database, t->name, pid, unmatched);
        }
        if (!rc && same) {
            ferry_fingerprint a, b;
            cold_digest(&src_active, &a);
            cold_digest(&sg, &b);
            if (a.rows != b.rows) {
                x->permanent = !exact;
                rc = ferry_err_set(err, FERRY_EIO,
                                   "verify: %s.%s partition %s: same part hashes but %llu rows "
                                   "on %s and %llu on %s",
                                   t->database, t->name, pid, (unsigned long long)a.rows,
                                   x->src.name, (unsigned long long)b.rows, x->dst.name);
                free(src_active.p);
                break;
            }
            if (digest) {
                fp_add(digest, &a);
                digest->parts += a.parts;
            }
            if (all_cold(&src_active) && all_cold(&sg)) {
                x->cold_verified++;
                if (fp)
                    fp_add(fp, &a);
            } else {
                x->hot_verified++;
                if (fp && pids_add(&hot, pid))
                    rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            }
        } else if (!rc && exact) {
            *stable = false; /* other parts than the source's: another round makes them equal */
        }
        free(src_active.p);
    }
    if (!rc && fp && *stable && hot.n) {
        /* the rows of the hot partitions, on the source only: staging holds the same parts */
        rc = fingerprint_hot(x, t, &hot, fp, err);
    }
    pids_free(&pids);
    pids_free(&hot);
    mv_slice_free(&src);
    mv_slice_free(&stg);
    return rc;
}

/* The source's part digest of the slice (cold_digest over every active part) and, when rows is
 * true, its fingerprint as compare_copy journals it (cold partitions by part digest, hot ones by
 * their rows, one query). */
static int source_fingerprint(mvctx *x, const ferry_table_def *t, bool rows,
                              ferry_fingerprint *fp, ferry_fingerprint *digest, ferry_err *err)
{
    mv_slice sl = {0};
    mv_pids hot = {0};
    memset(fp, 0, sizeof *fp);
    memset(digest, 0, sizeof *digest);
    int rc = mv_slice_list(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, true,
                           &sl, err);
    for (size_t i = 0; !rc && i < sl.n_pids; i++) {
        mv_parts ps = mv_slice_parts(&sl, sl.pids[i]);
        ferry_fingerprint a;
        cold_digest(&ps, &a);
        fp_add(digest, &a);
        digest->parts += a.parts;
        if (all_cold(&ps)) {
            fp_add(fp, &a);
        } else if (pids_add(&hot, sl.pids[i])) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
    }
    if (!rc && rows && hot.n) {
        rc = fingerprint_hot(x, t, &hot, fp, err);
    }
    pids_free(&hot);
    mv_slice_free(&sl);
    return rc;
}

unsigned ferry_move_grace(const ferry_move_opts *o)
{
    if (o->grace_given)
        return o->grace_ms;
    const char *routers = o->cfg ? ferry_config_get(o->cfg, "cluster", NULL, "routers") : NULL;
    return routers && *routers ? 0 : 2000;
}

static const ferry_table_def *table_at(mvctx *x, size_t i) { return &x->tables.items[i].u.table; }

/* ---- the states ---------------------------------------------------------------------------- */

static int do_clone(mvctx *x, ferry_err *err)
{
    int rc = begin_attempt(x, err);
    char fz[160], tag[32];
    snprintf(tag, sizeof tag, "c%u", x->mv.u.move.step);
    if (!rc)
        rc = freeze_name(x, tag, fz, sizeof fz, err);
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        rc = ensure_staging(x, table_at(x, i), err);
        if (!rc)
            rc = copy_round(x, table_at(x, i), fz, true, err);
    }
    if (!rc)
        rc = remove_freeze_named(x, fz, err);
    if (!rc)
        crash_point("CLONE");
    if (!rc)
        rc = advance(x, FERRY_MOVE_VERIFY, "", err);
    return rc;
}

/* The journal's record of a table's verified source: the fingerprint CLEANUP checks (rows, sum,
 * xor) and the digest of its parts (a source whose parts are unchanged needs no row read). */
static json_t *fp_json(const ferry_fingerprint *fp, const ferry_fingerprint *dg)
{
    char sum[32], xr[32], dsum[32], dxr[32];
    snprintf(sum, sizeof sum, "%llu", (unsigned long long)fp->hash_sum);
    snprintf(xr, sizeof xr, "%llu", (unsigned long long)fp->hash_xor);
    snprintf(dsum, sizeof dsum, "%llu", (unsigned long long)dg->hash_sum);
    snprintf(dxr, sizeof dxr, "%llu", (unsigned long long)dg->hash_xor);
    return json_pack("{s:I, s:s, s:s, s:{s:I, s:I, s:s, s:s}}", "rows", (json_int_t)fp->rows,
                     "sum", sum, "xor", xr, "digest", "rows", (json_int_t)dg->rows, "parts",
                     (json_int_t)dg->parts, "sum", dsum, "xor", dxr);
}

/* Whether fp's rows, sum and xor are those of the journal record j ({"rows":N,"sum":"..",
 * "xor":".."}, as fp_json writes them). */
static bool fp_matches(const json_t *j, const ferry_fingerprint *fp)
{
    char sum[32], xr[32];
    snprintf(sum, sizeof sum, "%llu", (unsigned long long)fp->hash_sum);
    snprintf(xr, sizeof xr, "%llu", (unsigned long long)fp->hash_xor);
    return j && (uint64_t)json_integer_value(json_object_get(j, "rows")) == fp->rows &&
           !strcmp(json_string_value(json_object_get(j, "sum")) ?: "", sum) &&
           !strcmp(json_string_value(json_object_get(j, "xor")) ?: "", xr);
}

/* VERIFY, then the routing switch in one batch with the journal. */
static int do_verify(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        bool stable;
        rc = compare_copy(x, table_at(x, i), false, &stable, NULL, NULL, err);
    }
    if (rc)
        return rc;
    crash_point("VERIFY");
    /* Every router must reach the target before the route names it (a shard just added reaches
     * routers through the catalog), and no client may still be about to retry a failed write of
     * the slice: its retry must reach the shard that has the first attempt's rows
     * (lib/router/fence.c, lib/router/pending.c). */
    if ((rc = ferry_router_fence_switch(x->o->cfg, x->mv.u.move.to, x->mv.u.move.tenant,
                                        x->mv.u.move.split, 0, err)))
        return ferry_err_prefix(err, "move %s: ", x->mv.u.move.id);
    ferry_record route;
    ferry_record_init(&route, FERRY_REC_ROUTE);
    snprintf(route.u.route.tenant, sizeof route.u.route.tenant, "%s", x->mv.u.move.tenant);
    route.u.route.split = x->mv.u.move.split;
    if ((rc = ferry_catalog_get(x->cat, &route, err)))
        return rc;
    /* the slice's shards with `from` replaced by `to`; a clone keeps `from` and adds `to` */
    char *save = NULL, copy[FERRY_LIST_MAX];
    ferry_buf nl = FERRY_BUF_INIT;
    snprintf(copy, sizeof copy, "%s", route.u.route.shards);
    if (x->clone)
        ferry_buf_printf(&nl, "%s,", route.u.route.shards);
    ferry_buf_puts(&nl, x->mv.u.move.to);
    for (char *s = strtok_r(copy, ",", &save); s && !x->clone; s = strtok_r(NULL, ",", &save))
        if (strcmp(s, x->mv.u.move.from) && strcmp(s, x->mv.u.move.to))
            ferry_buf_printf(&nl, ",%s", s);
    copy_str(route.u.route.shards, sizeof route.u.route.shards, ferry_buf_cstr(&nl));
    ferry_buf_free(&nl);
    ferry_record next = x->mv;
    next.u.move.state = FERRY_MOVE_SWITCH;
    next.u.move.step = 0;
    next.u.move.updated = (int64_t)time(NULL);
    copy_str(next.u.move.detail, sizeof next.u.move.detail, "routing switched");
    uint64_t routing_version = 0;
    rc = commit_with_route(x, &next, &route, &routing_version, err);
    if (rc) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "move %s: routing switch lost a race (another mover, or the "
                                  "route changed): ", x->mv.u.move.id);
        return rc;
    }
    ferry_record_free(&x->mv);
    ferry_record_init(&x->mv, FERRY_REC_MOVE);
    snprintf(x->mv.u.move.id, sizeof x->mv.u.move.id, "%s", next.u.move.id);
    if ((rc = ferry_catalog_get(x->cat, &x->mv, err)))
        return rc;
    ferry_log(FERRY_LOG_INFO,
              "msg=\"routing switched\" move=%s tenant=%s split=%u to=%s routing_version=%llu",
              x->mv.u.move.id, x->mv.u.move.tenant, x->mv.u.move.split, x->mv.u.move.to,
              (unsigned long long)routing_version);
    progress(x);
    crash_point("SWITCH:switched");
    return FERRY_OK;
}

/* Waits until every router in [cluster] routers runs on the catalog's current routing version
 * (or later) and has nothing in flight under an older one (lib/router/fence.c). */
static int fence_routers(mvctx *x, const char *what, ferry_err *err)
{
    uint64_t now_version = 0;
    int rc = ferry_catalog_routing_version(x->cat, &now_version, err);
    if (!rc)
        rc = ferry_router_fence(x->o->cfg, now_version, 0, err);
    if (rc)
        ferry_err_prefix(err, "%s %s: ", what, x->mv.u.move.id);
    return rc;
}

/* SWITCH of a clone. The route now lists source and target, so after the grace period every
 * write reaches both; the target's real table holds only those. Each slice partition of the
 * source is then made equal on the target with rs_sync_partition (replica_sync.c): staging
 * already holds CLONE's snapshot, so only parts written or merged since are sent, and they
 * reach the real table either added (the target's parts are a subset of the source's) or by
 * REPLACE PARTITION from staging (the target's rows are a subset). Ends when every partition has
 * equal fingerprints on both; else it stops with the journal in SWITCH (resumable), the target
 * routed but possibly missing rows, which `ferry repair` also fixes. */
static int do_switch_clone(mvctx *x, ferry_err *err)
{
    int rc = begin_attempt(x, err);
    if (rc)
        return rc;
    /* as do_switch: routers must send new writes to both replicas before the sync below */
    if ((rc = fence_routers(x, "clone", err)))
        return rc;
    unsigned grace = ferry_move_grace(x->o);
    if (grace && ferry_stop_sleep_ms(grace))
        return ferry_err_set(err, FERRY_ETIMEOUT, "move %s: stopping (the process was asked to "
                             "stop during the grace period)", x->mv.u.move.id);
    char fz[160], tag[32];
    snprintf(tag, sizeof tag, "k%u", x->mv.u.move.step);
    rc = freeze_name(x, tag, fz, sizeof fz, err);
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char (*ids)[FERRY_NAME_MAX] = NULL;
        size_t n = 0;
        rc = rs_slice_pids(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &ids,
                           &n, err);
        for (size_t k = 0; !rc && k < n; k++) {
            rs_result rr;
            rc = rs_sync_partition(&x->src, &x->dst, t, ids[k], fz, 0, MV_MAX_ROUNDS, false,
                                   &rr, err);
            x->res->hot_copied += rr.hot_copied;
            x->res->cold_copied += rr.cold_copied;
            x->bytes_done += rr.hot_copied + rr.cold_copied;
            x->parts_done += rr.parts_sent;
            if (!rc && !rr.repaired)
                rc = ferry_err_set(err, FERRY_EIO,
                                   "clone %s: %s.%s partition %s on the new replica %s differs "
                                   "from %s (%s: %s); resume later or run ferry repair",
                                   x->mv.u.move.id, t->database, t->name, ids[k], x->dst.name,
                                   x->src.name, rr.action, rr.detail);
            progress(x);
        }
        free(ids);
    }
    if (!rc)
        rc = remove_freeze_named(x, fz, err);
    if (!rc)
        crash_point("SWITCH");
    if (!rc)
        rc = advance_cleanup(x, err);
    return rc;
}

/* CLEANUP of a clone: the source keeps everything; what the clone left in the target's
 * staging table and every freeze it made are removed. */
/* Empties the slice's partitions of the target's staging table (DETACH PARTITION, then the
 * detached folders and temporary folders of the agents removed). pids: more partition ids whose
 * staging leftovers go too; the staging partitions are added to it. */
static int staging_clear(mvctx *x, const ferry_table_def *t, mv_pids *pids, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    staging_name(t->name, st, sizeof st);
    mv_pids stg = {0};
    int rc = slice_pids(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, &stg, err);
    for (size_t k = 0; !rc && k < stg.n; k++) {
        ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_puts(&sql, "ALTER TABLE ");
        sql_table(&sql, t->database, st);
        ferry_buf_puts(&sql, " DETACH PARTITION ID ");
        ferry_sql_quote(stg.ids[k], &sql);
        rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
        ferry_buf_free(&sql);
        if (!rc)
            rc = pids_add(pids, stg.ids[k]);
    }
    if (!rc)
        rc = remove_detached_of(&x->dst, t->database, st, pids, true, err);
    pids_free(&stg);
    return rc;
}

/* The catalog's part records follow the slice's cold parts: the target now references what the
 * source did (a clone: as well as the source). pids: the slice's partitions on either side. */
static int records_follow(mvctx *x, const ferry_table_def *t, const mv_pids *pids, ferry_err *err)
{
    const char **ids = calloc(pids->n + 1, sizeof *ids);
    if (!ids)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; k < pids->n; k++)
        ids[k] = pids->ids[k];
    x->catalog_writes++;
    int rc = ferry_part_records_reassign(x->cat, t->name, ids, pids->n, x->mv.u.move.from,
                                         x->mv.u.move.to, x->clone, NULL, err);
    free(ids);
    if (rc)
        ferry_err_prefix(err, "move %s: updating the catalog's part records: ", x->mv.u.move.id);
    return rc;
}

static int do_cleanup_clone(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        mv_pids all = {0};
        rc = slice_pids(&x->dst, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &all, err);
        if (!rc)
            rc = staging_clear(x, t, &all, err);
        if (!rc)
            rc = records_follow(x, t, &all, err);
        pids_free(&all);
    }
    if (!rc)
        rc = remove_freezes(x, err);
    if (!rc)
        crash_point("CLEANUP");
    if (!rc)
        rc = advance(x, FERRY_MOVE_DONE, "", err);
    return rc;
}

/* A resumed publish step: drops from the target's staging every part of the slice that the real
 * table already holds (same partition, hash_of_all_files and rows). MOVE PARTITION ... TO TABLE
 * is atomic in the server's memory only: it adds the parts to the table, then removes staging's
 * from disk, so a kill -9 of the target between the two leaves both on disk, and the restarted
 * server loads staging's parts again; moving them would add the rows a second time
 * (tests/integration/move_publish_kill.sh, docs/reliability.md). Each part of the table matches
 * one staged part at most; a part written to the target since the switch cannot carry a staged
 * part's hash unless it holds the very same rows in the very same block. */
static int publish_dedup(mvctx *x, const ferry_table_def *t, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    staging_name(t->name, st, sizeof st);
    mv_slice stg = {0}, real = {0};
    bool *used = NULL;
    int rc = mv_slice_list(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, true, &stg,
                           err);
    if (!rc && stg.n_parts)
        rc = mv_slice_list(&x->dst, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, true,
                           &real, err);
    if (!rc && stg.n_parts && !(used = calloc(real.n_parts + 1, sizeof *used)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t k = 0; !rc && k < stg.n_pids; k++) {
        mv_parts sp = mv_slice_parts(&stg, stg.pids[k]), rp = mv_slice_parts(&real, stg.pids[k]);
        for (size_t i = 0; !rc && i < sp.n; i++)
            for (size_t j = 0; j < rp.n; j++) {
                size_t at = (size_t)(rp.p - real.parts) + j;
                if (used[at] || rp.p[j].rows != sp.p[i].rows || strcmp(rp.p[j].hash, sp.p[i].hash))
                    continue;
                used[at] = true;
                ferry_log(FERRY_LOG_WARN, "msg=\"staged part already in the table (a kill -9 of "
                          "the target after MOVE PARTITION brought it back); dropped from staging, "
                          "not moved again\" move=%s shard=%s table=%s.%s part=%s table_part=%s",
                          x->mv.u.move.id, x->dst.name, t->database, st, sp.p[i].name,
                          rp.p[j].name);
                rc = staging_drop_part(x, t, sp.p[i].name, err);
                break;
            }
    }
    free(used);
    mv_slice_free(&stg);
    mv_slice_free(&real);
    return rc;
}

static int do_switch(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    if (x->clone)
        return do_switch_clone(x, err);
    bool resumed_publish = x->mv.u.move.step >= MV_STEP_PUBLISH;
    if (x->mv.u.move.step < MV_STEP_PUBLISH) {
        if ((rc = begin_attempt(x, err)))
            return rc;
        /* Writers that follow the routing table: every write router listed in [cluster]
         * routers must have taken the table of the switch (or a later one) and finished every
         * write it grouped with an older table; then the grace period covers other writers. */
        if ((rc = fence_routers(x, "move", err)))
            return rc;
        unsigned grace = ferry_move_grace(x->o);
        if (grace && ferry_stop_sleep_ms(grace))
            return ferry_err_set(err, FERRY_ETIMEOUT, "move %s: stopping (the process was asked "
                                 "to stop during the grace period)", x->mv.u.move.id);
        bool stable = false;
        json_t *fps = json_object();
        for (size_t i = 0; !rc && i < x->tables.n; i++)
            rc = ensure_staging(x, table_at(x, i), err);
        for (int round = 0; !rc; round++) {
            /* Compare first: the copy made before the switch is usually equal already (nothing
             * reached the source since), and then no freeze and no send is needed. */
            stable = true;
            json_object_clear(fps);
            for (size_t i = 0; !rc && stable && i < x->tables.n; i++) {
                ferry_fingerprint fp = {0}, dg = {0};
                bool st = true;
                rc = compare_copy(x, table_at(x, i), true, &st, &fp, &dg, err);
                stable = stable && st;
                if (!rc && st)
                    json_object_set_new(fps, table_at(x, i)->name, fp_json(&fp, &dg));
            }
            if (rc || stable || round == MV_MAX_ROUNDS)
                break;
            char fz[160], tag[32];
            snprintf(tag, sizeof tag, "s%ur%d", x->mv.u.move.step, round);
            rc = freeze_name(x, tag, fz, sizeof fz, err);
            for (size_t i = 0; !rc && i < x->tables.n; i++)
                rc = copy_round(x, table_at(x, i), fz, false, err);
            if (!rc)
                rc = remove_freeze_named(x, fz, err);
        }
        if (!rc && !stable)
            rc = ferry_err_set(err, FERRY_EIO,
                               "move %s: the source still receives rows of the slice after %d "
                               "catch-up rounds; are writers still using the old route? "
                               "(resume with the same command)",
                               x->mv.u.move.id, MV_MAX_ROUNDS);
        if (!rc) {
            json_object_set(x->data, "fp", fps);
            rc = job_save(x, err);
        }
        json_decref(fps);
        if (rc)
            return rc;
        /* The publish step raises the routing version: from it on, routers stop reading the
         * union of source and target for this slice (and hold its reads until CLEANUP). */
        ferry_record next = x->mv;
        next.u.move.step = MV_STEP_PUBLISH;
        if ((rc = journal_routed(x, &next, err)))
            return rc;
        crash_point("SWITCH:caught-up");
    }
    /* The read fence (every run, so a resumed one too): no router may still read the union
     * under a version older than the publish step's when the first partition moves, or it
     * could count that partition twice (source + target real) or miss it (docs/routing.md). */
    if ((rc = fence_routers(x, "before publishing, move", err)))
        return rc;
    /* publish: staging -> real table, one atomic MOVE PARTITION per partition; the first one
     * alone, the others in one ALTER TABLE (its commands run one after another, each atomic;
     * a crash between them leaves partitions in staging that a resume moves) */
    bool first = true;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char st[FERRY_NAME_MAX + 32];
        staging_name(t->name, st, sizeof st);
        mv_pids pids = {0};
        if (resumed_publish)
            rc = publish_dedup(x, t, err);
        if (!rc)
            rc = slice_pids(&x->dst, t, st, x->mv.u.move.tenant, x->mv.u.move.split, &pids, err);
        for (size_t k = 0; !rc && k < pids.n;) {
            ferry_buf sql = FERRY_BUF_INIT;
            ferry_buf_puts(&sql, "ALTER TABLE ");
            sql_table(&sql, t->database, st);
            size_t end = first ? k + 1 : pids.n;
            for (size_t j = k; j < end; j++) {
                ferry_buf_puts(&sql, j > k ? ", MOVE PARTITION ID " : " MOVE PARTITION ID ");
                ferry_sql_quote(pids.ids[j], &sql);
                ferry_buf_puts(&sql, " TO TABLE ");
                sql_table(&sql, t->database, t->name);
            }
            rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), NULL, err);
            ferry_buf_free(&sql);
            k = end;
            if (!rc && first) {
                first = false;
                crash_point("SWITCH:published-one");
            }
        }
        pids_free(&pids);
    }
    if (!rc)
        crash_point("SWITCH");
    if (!rc)
        rc = advance_cleanup(x, err);
    return rc;
}

/* Before CLEANUP removes the source's copy: no part of the slice may have been detached as
 * broken on the target. ClickHouse rewrites a pointer file in place when it changes its
 * reference count (hard-linking it for MOVE PARTITION, unlinking staging's copy after it), and a
 * kill -9 in the middle leaves it empty; at restart the part, in staging or in the table, goes to
 * detached/ as broken-on-start and its rows are on the target nowhere else (seen with
 * tests/integration/move_publish_kill.sh's kill during the publish statement). The source still
 * has every row: stop here, naming the parts, rather than remove it. */
static int target_broken_check(mvctx *x, const ferry_table_def *t, const mv_pids *pids,
                               ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    staging_name(t->name, st, sizeof st);
    ferry_buf sql = FERRY_BUF_INIT, names = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT table, name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table IN (");
    ferry_sql_quote(t->name, &sql);
    ferry_buf_puts(&sql, ", ");
    ferry_sql_quote(st, &sql);
    ferry_buf_puts(&sql, ") AND startsWith(name, 'broken')");
    int rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), &rows, err);
    size_t n = 0;
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        const char *name = ferry_ch_rows_get(&rows, r, 1);
        for (size_t k = 0; k < pids->n; k++) {
            const char *at = strstr(name, pids->ids[k]);
            size_t len = strlen(pids->ids[k]);
            if (!at || at == name || at[-1] != '_' || at[len] != '_')
                continue;
            ferry_buf_puts(&names, n++ ? ", " : "");
            ferry_buf_puts(&names, ferry_ch_rows_get(&rows, r, 0));
            ferry_buf_puts(&names, "/detached/");
            ferry_buf_puts(&names, name);
            break;
        }
    }
    if (!rc && n)
        rc = ferry_err_set(err, FERRY_EIO,
                           "move %s: %zu part(s) of the slice were detached as broken on the "
                           "target %s (%s): their rows are there nowhere else, while the source "
                           "%s still holds every row of the slice, so CLEANUP does not run. "
                           "Rebuild those partitions on %s from %s's rows, then remove the broken "
                           "folders and resume with the same command",
                           x->mv.u.move.id, n, x->dst.name, ferry_buf_cstr(&names), x->src.name,
                           x->dst.name, x->src.name);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    ferry_buf_free(&names);
    return rc;
}

static int do_cleanup(mvctx *x, ferry_err *err)
{
    int rc = FERRY_OK;
    if (x->clone)
        return do_cleanup_clone(x, err);
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        char st[FERRY_NAME_MAX + 32];
        staging_name(t->name, st, sizeof st);
        mv_pids src = {0}, all = {0};
        rc = slice_pids(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &src, err);
        if (!rc)
            rc = slice_pids(&x->dst, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &all,
                            err);
        for (size_t k = 0; !rc && k < src.n; k++)
            rc = pids_add(&all, src.ids[k]);
        if (!rc && src.n)
            rc = target_broken_check(x, t, &src, err);
        if (!rc && src.n) {
            /* the source must hold exactly what was verified and published: its parts unchanged
             * (no row read), or else the same rows (a merge since changes parts, not rows) */
            ferry_fingerprint fp, dg;
            json_t *want = json_object_get(json_object_get(x->data, "fp"), t->name);
            rc = source_fingerprint(x, t, false, &fp, &dg, err);
            if (!rc && !fp_matches(json_object_get(want, "digest"), &dg))
                rc = source_fingerprint(x, t, true, &fp, &dg, err);
            else if (!rc)
                fp.rows = (uint64_t)json_integer_value(json_object_get(want, "rows"));
            if (!rc && want && !fp_matches(json_object_get(want, "digest"), &dg) &&
                !fp_matches(want, &fp))
                rc = ferry_err_set(err, FERRY_EIO,
                                   "move %s: %s.%s on %s changed after it was verified (%llu rows "
                                   "now, %lld verified): a write reached the old server after "
                                   "the switch and the grace period; the source is kept, nothing "
                                   "was removed",
                                   x->mv.u.move.id, t->database, t->name, x->src.name,
                                   (unsigned long long)fp.rows,
                                   (long long)json_integer_value(json_object_get(want, "rows")));
        }
        if (!rc && src.n) {
            /* every partition of the slice in one ALTER TABLE */
            ferry_buf sql = FERRY_BUF_INIT;
            ferry_buf_puts(&sql, "ALTER TABLE ");
            sql_table(&sql, t->database, t->name);
            for (size_t k = 0; k < src.n; k++) {
                ferry_buf_puts(&sql, k ? ", DETACH PARTITION ID " : " DETACH PARTITION ID ");
                ferry_sql_quote(src.ids[k], &sql);
            }
            rc = mv_sql(&x->src, ferry_buf_cstr(&sql), NULL, err);
            ferry_buf_free(&sql);
        }
        if (!rc && src.n)
            crash_point("CLEANUP:detached");
        if (!rc)
            rc = remove_detached_of(&x->src, t->database, t->name, &all, false, err);
        if (!rc)
            rc = remove_detached_of(&x->dst, t->database, st, &all, true, err);
        if (!rc)
            rc = records_follow(x, t, &all, err);
        pids_free(&src);
        pids_free(&all);
    }
    if (!rc)
        rc = remove_freezes(x, err);
    if (!rc)
        crash_point("CLEANUP");
    if (!rc)
        rc = advance(x, FERRY_MOVE_DONE, "", err);
    return rc;
}

/* FAILED: the target side of a move that never switched is removed; the source keeps all. */
static int rollback(mvctx *x, const char *why, ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && i < x->tables.n; i++) {
        const ferry_table_def *t = table_at(x, i);
        mv_pids all = {0};
        rc = slice_pids(&x->src, t, t->name, x->mv.u.move.tenant, x->mv.u.move.split, &all, err);
        if (!rc)
            rc = staging_clear(x, t, &all, err);
        pids_free(&all);
    }
    if (!rc)
        rc = remove_freezes(x, err);
    char detail[256];
    snprintf(detail, sizeof detail, "%s", why);
    if (!rc)
        rc = advance(x, FERRY_MOVE_FAILED, detail, err);
    return rc;
}

/* ---- public ------------------------------------------------------------------------------ */

static int load_shard(ferry_catalog *cat, const char *name, ferry_record *r, ferry_err *err)
{
    ferry_record_init(r, FERRY_REC_SHARD);
    snprintf(r->u.shard.name, sizeof r->u.shard.name, "%s", name);
    int rc = ferry_catalog_get(cat, r, err);
    if (rc == FERRY_ENOTFOUND)
        return ferry_err_set(err, FERRY_EINVAL,
                             "unknown shard '%s' (ferry status lists the shards; ferry shard add "
                             "adds one)", name);
    return rc;
}

static int load_tables(ferry_catalog *cat, ferry_record_list *out, ferry_err *err)
{
    int rc = ferry_catalog_list(cat, FERRY_REC_TABLE, NULL, 0, out, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < out->n; i++)
        if (out->items[i].u.table.layout != FERRY_LAYOUT_SHARED)
            return ferry_err_set(err, FERRY_EUNSUPPORTED,
                                 "table %s has layout per_tenant; moves support the shared "
                                 "layout only", out->items[i].u.table.name);
    if (out->n == 0)
        return ferry_err_set(err, FERRY_EINVAL,
                             "the catalog has no managed tables ([table \"NAME\"] in the config, "
                             "then ferry init)");
    return FERRY_OK;
}

/* Oldest first: by created, then id. */
static int move_age_cmp(const void *a, const void *b)
{
    const ferry_move *x = &((const ferry_record *)a)->u.move;
    const ferry_move *y = &((const ferry_record *)b)->u.move;
    if (x->created != y->created)
        return x->created < y->created ? -1 : 1;
    return strcmp(x->id, y->id);
}

int ferry_move_unfinished(ferry_catalog *cat, char (**ids)[64], size_t *n, ferry_err *err)
{
    ferry_record_list l = {0};
    *ids = NULL;
    *n = 0;
    int rc = ferry_catalog_list_unfinished_moves(cat, &l, err);
    if (rc)
        return rc;
    *ids = calloc(l.n + 1, sizeof **ids);
    if (!*ids) {
        ferry_record_list_free(&l);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    if (l.n > 1)
        qsort(l.items, l.n, sizeof *l.items, move_age_cmp);
    for (size_t i = 0; i < l.n; i++)
        snprintf((*ids)[(*n)++], 64, "%s", l.items[i].u.move.id);
    ferry_record_list_free(&l);
    return FERRY_OK;
}

/* The pre-flight for room on the target: every local disk of the target (its agent's statvfs of
 * the disk's path, from `status`) must hold the slice's hot bytes plus a margin (hot parts may
 * land on any local disk of the hot volume; pointer files of cold parts are small and go to the
 * object disk's local metadata folder). An agent without free_bytes (older) falls back to
 * ClickHouse's system.disks unreserved_space. */
#define MV_ROOM_MARGIN_MIN (8u << 20)
static int check_room(mv_conn *dst, json_t *status, const char *to, const char *tenant,
                      uint32_t split, uint64_t hot, ferry_err *err)
{
    uint64_t margin = hot / 10 > MV_ROOM_MARGIN_MIN ? hot / 10 : MV_ROOM_MARGIN_MIN;
    char a[32], b[32], c[32];
    json_t *disks = json_object_get(status, "disks"), *d;
    size_t i;
    bool seen = false;
    json_array_foreach(disks, i, d)
    {
        json_t *free_j = json_object_get(d, "free_bytes");
        if (json_is_true(json_object_get(d, "remote")) || !json_is_integer(free_j))
            continue;
        seen = true;
        uint64_t room = (uint64_t)json_integer_value(free_j);
        if (hot + margin > room)
            return ferry_err_set(err, FERRY_EIO,
                                 "target shard %s: disk '%s' (%s) has %s free; tenant %s split "
                                 "%u needs %s for its hot parts plus a margin of %s. Free space "
                                 "there or pick another shard; nothing was moved",
                                 to, json_string_value(json_object_get(d, "name")) ?: "?",
                                 json_string_value(json_object_get(d, "path")) ?: "?",
                                 ferry_fmt_bytes(room, a, sizeof a), tenant, split,
                                 ferry_fmt_bytes(hot, b, sizeof b),
                                 ferry_fmt_bytes(margin, c, sizeof c));
    }
    if (seen)
        return FERRY_OK;
    ferry_ch_rows rows = {0};
    int rc = mv_sql(dst, "SELECT min(unreserved_space) FROM system.disks WHERE NOT is_remote",
                    &rows, err);
    if (rc)
        return rc;
    uint64_t room = rows.n_rows ? u64_of(ferry_ch_rows_get(&rows, 0, 0)) : 0;
    ferry_ch_rows_free(&rows);
    if (hot > room)
        return ferry_err_set(err, FERRY_EIO,
                             "target shard %s has %s free on its local disks; tenant %s split %u "
                             "needs %s for its hot parts. Free space there or pick another shard",
                             to, ferry_fmt_bytes(room, a, sizeof a), tenant, split,
                             ferry_fmt_bytes(hot, b, sizeof b));
    return FERRY_OK;
}

static int move_begin(const ferry_move_opts *o, const char *tenant, uint32_t split,
                      const char *want_from, const char *to, bool clone, char id[64],
                      bool *resumed, ferry_err *err)
{
    ferry_catalog *cat = NULL;
    ferry_record trec, route, tsh, fsh;
    ferry_record_list moves = {0}, tables = {0};
    mv_conn dst = {0}, src = {0};
    json_t *dst_status = NULL;
    ferry_record_init(&trec, FERRY_REC_TENANT);
    ferry_record_init(&route, FERRY_REC_ROUTE);
    ferry_record_init(&tsh, FERRY_REC_SHARD);
    ferry_record_init(&fsh, FERRY_REC_SHARD);
    *resumed = false;
    id[0] = '\0';
    int rc = ferry_catalog_open(o->catalog_url, &cat, err);
    if (rc)
        goto out;
    snprintf(trec.u.tenant.name, sizeof trec.u.tenant.name, "%s", tenant);
    rc = ferry_catalog_get(cat, &trec, err);
    if (rc == FERRY_ENOTFOUND) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "unknown tenant '%s': no server holds data of it and the catalog does "
                           "not list it (ferry status lists tenants)", tenant);
        goto out;
    }
    if (rc)
        goto out;
    if (split >= trec.u.tenant.splits) {
        rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s has %u split(s): 0..%u; --split %u does "
                           "not exist", tenant, trec.u.tenant.splits, trec.u.tenant.splits - 1,
                           split);
        goto out;
    }
    if ((rc = load_shard(cat, to, &tsh, err)))
        goto out;
    if (!ferry_shard_placeable(tsh.u.shard.state)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "shard %s is %s; moves go to active shards only",
                           to, ferry_shard_state_name(tsh.u.shard.state));
        goto out;
    }
    snprintf(route.u.route.tenant, sizeof route.u.route.tenant, "%s", tenant);
    route.u.route.split = split;
    rc = ferry_catalog_get(cat, &route, err);
    if (rc == FERRY_ENOTFOUND) {
        rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u has no route yet (no server "
                           "holds its data)", tenant, split);
        goto out;
    }
    if (rc)
        goto out;
    /* an unfinished move of this slice: resume it when it goes to the same shard */
    if ((rc = ferry_catalog_list_unfinished_moves(cat, &moves, err)))
        goto out;
    for (size_t i = 0; i < moves.n; i++) {
        const ferry_move *m = &moves.items[i].u.move;
        if (strcmp(m->tenant, tenant) || m->split != split)
            continue;
        if (strcmp(m->to, to)) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "tenant %s split %u has an unfinished move %s to %s (state %s); "
                               "finish it first (ferry move --resume %s)", tenant, split, m->id,
                               m->to, ferry_move_state_name(m->state), m->id);
            goto out;
        }
        snprintf(id, 64, "%s", m->id);
        *resumed = true;
        goto out;
    }
    char copy[FERRY_LIST_MAX], *save = NULL;
    snprintf(copy, sizeof copy, "%s", route.u.route.shards);
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save))
        if (!strcmp(s, to)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u is already served by %s; "
                               "nothing to move", tenant, split, to);
            goto out;
        }
    char from[FERRY_NAME_MAX];
    copy_str(from, sizeof from, route.u.route.shards);
    if (strchr(from, ','))
        *strchr(from, ',') = '\0';
    if (want_from && *want_from) {
        /* a slice with several replicas: the one named (e.g. on a draining shard) */
        bool listed = false;
        snprintf(copy, sizeof copy, "%s", route.u.route.shards);
        for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save))
            listed |= !strcmp(s, want_from);
        if (!listed) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u is not served by %s (its "
                               "route: %s); nothing to move from there", tenant, split,
                               want_from, route.u.route.shards);
            goto out;
        }
        copy_str(from, sizeof from, want_from);
    }
    if ((rc = load_shard(cat, from, &fsh, err)) || (rc = load_tables(cat, &tables, err)))
        goto out;
    /* both sides must answer, and the target must have room for the hot parts */
    if ((rc = mv_conn_open(&tsh.u.shard, o->cfg, &dst, err)) ||
        (rc = mv_conn_open(&fsh.u.shard, o->cfg, &src, err)))
        goto out;
    json_t *st = NULL;
    if ((rc = mv_agent(&dst, "status", NULL, &dst_status, NULL, err)) ||
        (rc = mv_sql(&dst, "SELECT 1", NULL, err))) {
        ferry_err_prefix(err, "target shard %s is not reachable: ", to);
        goto out;
    }
    if ((rc = mv_agent(&src, "status", NULL, &st, NULL, err))) {
        ferry_err_prefix(err, "source shard %s is not reachable: ", from);
        goto out;
    }
    json_decref(st);
    uint64_t hot = 0;
    for (size_t i = 0; !rc && i < tables.n; i++) {
        const ferry_table_def *t = &tables.items[i].u.table;
        mv_slice sl = {0};
        rc = mv_slice_list(&src, t, t->name, tenant, split, true, &sl, err);
        for (size_t j = 0; !rc && j < sl.n_parts; j++)
            if (!sl.parts[j].cold)
                hot += sl.parts[j].bytes;
        mv_slice_free(&sl);
        mv_pids there = {0};
        if (!rc)
            rc = slice_pids(&dst, t, t->name, tenant, split, &there, err);
        if (!rc && there.n)
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "shard %s already holds %zu partition(s) of tenant %s split %u in "
                               "%s.%s (e.g. %s) although the route says %s; resolve that first",
                               to, there.n, tenant, split, t->database, t->name, there.ids[0],
                               from);
        pids_free(&there);
    }
    if (rc)
        goto out;
    if ((rc = check_room(&dst, dst_status, to, tenant, split, hot, err)))
        goto out;
    /* journal it */
    ferry_record mv, job;
    ferry_record_init(&mv, FERRY_REC_MOVE);
    ferry_record_init(&job, FERRY_REC_JOB);
    unsigned char rnd[4];
    FILE *ur = fopen("/dev/urandom", "rb");
    if (!ur || fread(rnd, 1, sizeof rnd, ur) != sizeof rnd) {
        if (ur)
            fclose(ur);
        rc = ferry_err_set(err, FERRY_EIO, "cannot read /dev/urandom");
        goto out;
    }
    fclose(ur);
    snprintf(mv.u.move.id, sizeof mv.u.move.id, "%s-%lld-%02x%02x%02x%02x", clone ? "cl" : "mv",
             (long long)time(NULL), rnd[0], rnd[1], rnd[2], rnd[3]);
    snprintf(mv.u.move.tenant, sizeof mv.u.move.tenant, "%s", tenant);
    mv.u.move.split = split;
    snprintf(mv.u.move.from, sizeof mv.u.move.from, "%s", from);
    snprintf(mv.u.move.to, sizeof mv.u.move.to, "%s", to);
    mv.u.move.state = FERRY_MOVE_PLANNED;
    mv.u.move.steps = 5;
    snprintf(mv.u.move.owner, sizeof mv.u.move.owner, "%s", o->owner ? o->owner : "");
    mv.u.move.created = mv.u.move.updated = (int64_t)time(NULL);
    snprintf(job.u.job.id, sizeof job.u.job.id, "move.%s", mv.u.move.id);
    snprintf(job.u.job.kind, sizeof job.u.job.kind, "move");
    snprintf(job.u.job.state, sizeof job.u.job.state, "PLANNED");
    snprintf(job.u.job.data, sizeof job.u.job.data, "{\"freezes\":[],\"fp\":{}%s}",
             clone ? ",\"mode\":\"clone\"" : "");
    job.u.job.created = job.u.job.updated = mv.u.move.created;
    ferry_batch *b = ferry_batch_new();
    if (!b) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    rc = ferry_batch_create(b, &mv, err);
    if (!rc)
        rc = ferry_batch_create(b, &job, err);
    if (!rc)
        rc = ferry_batch_check(b, &route, err); /* the route we checked is still the route */
    if (!rc)
        rc = ferry_catalog_commit(cat, b, NULL, err);
    ferry_batch_free(b);
    if (!rc)
        snprintf(id, 64, "%s", mv.u.move.id);
out:
    json_decref(dst_status);
    mv_conn_close(&dst);
    mv_conn_close(&src);
    ferry_record_list_free(&moves);
    ferry_record_list_free(&tables);
    ferry_catalog_close(cat);
    return rc;
}

int ferry_move_begin(const ferry_move_opts *o, const char *tenant, uint32_t split, const char *to,
                     char id[64], bool *resumed, ferry_err *err)
{
    return move_begin(o, tenant, split, NULL, to, false, id, resumed, err);
}

int ferry_move_begin_from(const ferry_move_opts *o, const char *tenant, uint32_t split,
                          const char *from, const char *to, bool clone, char id[64],
                          bool *resumed, ferry_err *err)
{
    return move_begin(o, tenant, split, from, to, clone, id, resumed, err);
}

int ferry_move_begin_clone(const ferry_move_opts *o, const char *tenant, uint32_t split,
                           const char *to, char id[64], bool *resumed, ferry_err *err)
{
    return move_begin(o, tenant, split, NULL, to, true, id, resumed, err);
}

int ferry_move_run(const ferry_move_opts *o, const char *id, ferry_move_result *res,
                   ferry_err *err)
{
    ferry_move_result dummy;
    mvctx x;
    memset(&x, 0, sizeof x);
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    x.o = o;
    x.res = res;
    x.rate = o->rate;
    if (!x.rate && o->max_bytes_per_second) {
        if (!(x.own_rate = ferry_rate_new(o->max_bytes_per_second)))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        x.rate = x.own_rate;
    }
    x.t0 = now_s();
    ferry_lease *lease = NULL;
    bool ran = false; /* this run worked on the move (it was not over already) */
    ferry_record fsh, tsh;
    ferry_record_init(&fsh, FERRY_REC_SHARD);
    ferry_record_init(&tsh, FERRY_REC_SHARD);
    ferry_record_init(&x.mv, FERRY_REC_MOVE);
    ferry_record_init(&x.job, FERRY_REC_JOB);
    snprintf(res->id, sizeof res->id, "%s", id);
    int rc = ferry_catalog_open(o->catalog_url, &x.cat, err);
    if (rc)
        goto out;
    char lname[96];
    snprintf(lname, sizeof lname, "move.%s", id);
    if ((rc = ferry_catalog_lease_acquire(x.cat, lname, o->owner ? o->owner : "ferry", &lease,
                                          err))) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "move %s is being run by another mover: ", id);
        goto out;
    }
    snprintf(x.mv.u.move.id, sizeof x.mv.u.move.id, "%s", id);
    rc = ferry_catalog_get(x.cat, &x.mv, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "unknown move '%s'", id);
    if (rc)
        goto out;
    snprintf(x.job.u.job.id, sizeof x.job.u.job.id, "move.%s", id);
    if ((rc = ferry_catalog_get(x.cat, &x.job, err)))
        goto out;
    x.data = json_loads(x.job.u.job.data, 0, NULL);
    if (!json_is_object(x.data) || !json_is_array(json_object_get(x.data, "freezes"))) {
        rc = ferry_err_set(err, FERRY_EINTERNAL, "move %s: malformed journal data", id);
        goto out;
    }
    x.clone = !strcmp(json_string_value(json_object_get(x.data, "mode")) ?: "", "clone");
    const ferry_move *m = &x.mv.u.move;
    snprintf(res->tenant, sizeof res->tenant, "%s", m->tenant);
    res->split = m->split;
    copy_str(res->from, sizeof res->from, m->from);
    copy_str(res->to, sizeof res->to, m->to);
    res->resumed = m->state != FERRY_MOVE_PLANNED;
    res->state = m->state;
    if (m->state == FERRY_MOVE_DONE || m->state == FERRY_MOVE_FAILED)
        goto out;
    ran = true;
    if ((rc = load_shard(x.cat, m->from, &fsh, err)) || (rc = load_shard(x.cat, m->to, &tsh, err)) ||
        (rc = load_tables(x.cat, &x.tables, err)) ||
        (rc = mv_conn_open(&fsh.u.shard, o->cfg, &x.src, err)) ||
        (rc = mv_conn_open(&tsh.u.shard, o->cfg, &x.dst, err)))
        goto out;
    x.src.cat = x.dst.cat = x.cat; /* the staging loads' lease (staging_load.h) */
    for (size_t i = 0; !rc && i < x.tables.n; i++) { /* read-only mode: a load cut by a crash */
        char st[FERRY_NAME_MAX + 32];
        staging_name(table_at(&x, i)->name, st, sizeof st);
        rc = stg_recover(&x.dst, table_at(&x, i)->database, st, err);
    }
    if (rc)
        goto out;
    ferry_log(FERRY_LOG_INFO, "msg=\"move %s\" move=%s tenant=%s split=%u from=%s to=%s state=%s",
              res->resumed ? "resumed" : "started", id, m->tenant, m->split, m->from, m->to,
              ferry_move_state_name(m->state));
    while (!rc && m->state != FERRY_MOVE_DONE) {
        if (ferry_stop_requested()) { /* a safe point: the journal holds the state reached */
            rc = ferry_err_set(err, FERRY_ETIMEOUT, "move %s: stopping (the process was asked "
                               "to stop)", id);
            break;
        }
        progress(&x);
        enum ferry_move_state was = m->state;
        double s0 = now_s();
        switch (m->state) {
        case FERRY_MOVE_PLANNED:
            rc = advance(&x, FERRY_MOVE_CLONE, "", err);
            break;
        case FERRY_MOVE_CLONE:
            rc = do_clone(&x, err);
            break;
        case FERRY_MOVE_VERIFY:
            rc = do_verify(&x, err);
            break;
        case FERRY_MOVE_SWITCH:
            rc = do_switch(&x, err);
            break;
        case FERRY_MOVE_CLEANUP:
            rc = do_cleanup(&x, err);
            break;
        default:
            rc = ferry_err_set(err, FERRY_EINTERNAL, "move %s in state %s", id,
                               ferry_move_state_name(m->state));
        }
        if ((unsigned)was < FERRY_MOVE_STATES)
            res->state_ms[was] += (now_s() - s0) * 1e3;
    }
    if (rc && x.permanent &&
        (m->state == FERRY_MOVE_CLONE || m->state == FERRY_MOVE_VERIFY)) {
        /* cannot heal by retrying, and routing never changed: undo the target side */
        ferry_err rb = {0};
        char why[256];
        copy_str(why, sizeof why, err->msg);
        ferry_log(FERRY_LOG_ERROR, "msg=\"move failed, rolling back the target side\" move=%s "
                                   "error=\"%s\"", id, why);
        int rrc = rollback(&x, why, &rb);
        if (rrc)
            ferry_err_prefix(err, "(rollback did not finish either: %s; run the move again to "
                                  "finish it) ", rb.msg);
        else
            ferry_err_prefix(err, "move %s FAILED and was rolled back (the source is unchanged): ",
                             id);
    } else if (rc && m->state != FERRY_MOVE_DONE) {
        ferry_err_prefix(err, "move %s stopped in %s (resume: ferry move --resume %s): ", id,
                         ferry_move_state_name(m->state), id);
        /* keep the last error in the journal for `ferry status` */
        ferry_record cur;
        ferry_record_init(&cur, FERRY_REC_MOVE);
        snprintf(cur.u.move.id, sizeof cur.u.move.id, "%s", id);
        ferry_err e2 = {0};
        if (!ferry_catalog_get(x.cat, &cur, &e2)) {
            snprintf(cur.u.move.detail, sizeof cur.u.move.detail, "%.255s", err->msg);
            (void)ferry_catalog_update(x.cat, &cur, &e2);
        }
    }
    if (m->state == FERRY_MOVE_DONE || m->state == FERRY_MOVE_FAILED) {
        /* jobs/move.ID mirrors the move's state only when its data is saved: a move that ends
         * without one more save would stay SWITCH or CLEANUP there for good, and whoever reads
         * the jobs (the sweep's in-flight check, an operator's catalog export) sees it in flight */
        ferry_err e3 = {0};
        if (job_save(&x, &e3))
            ferry_log(FERRY_LOG_WARN, "msg=\"move journal data not marked %s\" move=%s error=\"%s\"",
                      ferry_move_state_name(m->state), id, e3.msg);
    }
    res->state = m->state;
    if (m->state == FERRY_MOVE_DONE) {
        /* rows the target holds for the slice, for the log and the caller */
        for (size_t i = 0; i < x.tables.n; i++) {
            const ferry_table_def *t = table_at(&x, i);
            mv_slice sl = {0}; /* rows from system.parts: reading every row is the verify's job */
            ferry_err e2 = {0};
            if (mv_slice_list(&x.dst, t, t->name, m->tenant, m->split, true, &sl, &e2))
                continue;
            res->partitions += sl.n_pids;
            for (size_t j = 0; j < sl.n_parts; j++)
                res->rows += sl.parts[j].rows;
            mv_slice_free(&sl);
        }
    }
out:
    res->seconds = now_s() - x.t0;
    res->statements = x.src.n_sql + x.dst.n_sql;
    res->agent_requests = x.src.n_agent + x.dst.n_agent;
    res->catalog_writes = x.catalog_writes;
    if (x.mv.u.move.state == FERRY_MOVE_DONE && !rc)
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"move done\" move=%s tenant=%s split=%u from=%s to=%s partitions=%zu "
                  "rows=%llu hot_bytes=%llu hot_copied=%llu cold_bytes=%llu cold_copied=%llu "
                  "verified_cold=%zu verified_hot=%zu seconds=%.3f",
                  id, res->tenant, res->split, res->from, res->to, res->partitions,
                  (unsigned long long)res->rows, (unsigned long long)res->hot_bytes,
                  (unsigned long long)res->hot_copied, (unsigned long long)res->cold_bytes,
                  (unsigned long long)res->cold_copied, x.cold_verified, x.hot_verified,
                  res->seconds);
    /* the cluster's tally (include/ferry/tally.h) is bookkeeping, never the move's fate */
    if (ran) {
        ferry_err terr = {0};
        if (ferry_tally_move_add(x.cat, res, &terr))
            ferry_log(FERRY_LOG_WARN, "msg=\"move not counted in the cluster's tally\" move=%s "
                                      "error=\"%s\"", id, terr.msg);
    }
    json_decref(x.data);
    mv_conn_close(&x.src);
    mv_conn_close(&x.dst);
    ferry_rate_free(x.own_rate);
    ferry_record_list_free(&x.tables);
    ferry_record_free(&x.mv);
    ferry_record_free(&x.job);
    if (lease)
        ferry_catalog_lease_release(x.cat, lease);
    ferry_catalog_close(x.cat);
    return rc;
}
