/* Replicas of slices (rf > 1): removing one replica when the rf is lowered, and `ferry repair`,
 * which compares every replicated slice's partitions across its replicas and repairs the ones
 * that missed writes (include/ferry/replica.h, docs/replicas.md). */
#include "ferry/replica.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/fence.h"
#include "ferry/http_call.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/repair_need.h"
#include "ferry/strutil.h"
#include "ferry/stop.h"
#include "ferry/verify.h"
#include "flow/move_env.h"
#include "flow/move_state.h"
#include "flow/part_records.h"
#include "flow/repair_mirror.h"
#include "flow/replica_int.h"
#include "flow/slice_lease.h"
#include "ferry/testknob.h"
#include "ferry/tier.h"

#define RS_ROUNDS 4 /* repair rounds of one partition before it is reported unsettled */

static int load_shard(ferry_catalog *cat, const char *name, ferry_record *r, ferry_err *err)
{
    ferry_record_init(r, FERRY_REC_SHARD);
    snprintf(r->u.shard.name, sizeof r->u.shard.name, "%s", name);
    int rc = ferry_catalog_get(cat, r, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "unknown shard '%s' (ferry shard list)", name);
    return rc;
}

static int load_tables(ferry_catalog *cat, ferry_record_list *out, ferry_err *err)
{
    int rc = ferry_catalog_list(cat, FERRY_REC_TABLE, NULL, 0, out, err);
    if (!rc && out->n == 0)
        rc = ferry_err_set(err, FERRY_EINVAL, "the catalog lists no managed table ([table \"x\"] "
                           "in the config, then ferry init)");
    return rc;
}

/* ---- dropping a replica ---------------------------------------------------------------- */

int ferry_replica_drop(const ferry_move_opts *o, const char *tenant, uint32_t split,
                       const char *shard, ferry_move_result *res, ferry_err *err)
{
    ferry_move_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    snprintf(res->tenant, sizeof res->tenant, "%s", tenant);
    res->split = split;
    snprintf(res->from, sizeof res->from, "%s", shard);
    snprintf(res->id, sizeof res->id, "drop");
    res->state = FERRY_MOVE_FAILED;
    double t0 = ferry_clock_s();
    ferry_catalog *cat = NULL;
    ferry_record route, sh;
    ferry_record_list tables = {0}, moves = {0};
    ferry_slice_leases held = {0};
    mv_conn c = {0};
    ferry_record_init(&route, FERRY_REC_ROUTE);
    ferry_record_init(&sh, FERRY_REC_SHARD);
    int rc = ferry_catalog_open(o->catalog_url, &cat, err);
    if (rc)
        goto out;
    snprintf(route.u.route.tenant, sizeof route.u.route.tenant, "%s", tenant);
    route.u.route.split = split;
    rc = ferry_catalog_get(cat, &route, err);
    if (rc == FERRY_ENOTFOUND)
        rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u has no route", tenant, split);
    if (!rc)
        rc = load_shard(cat, shard, &sh, err);
    if (!rc)
        rc = load_tables(cat, &tables, err);
    if (!rc)
        rc = ferry_catalog_list_unfinished_moves(cat, &moves, err);
    for (size_t i = 0; !rc && i < moves.n; i++) {
        const ferry_move *m = &moves.items[i].u.move;
        if (!strcmp(m->tenant, tenant) && m->split == split)
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u has an unfinished move %s "
                               "(state %s); finish it first (ferry move --resume %s)", tenant,
                               split, m->id, ferry_move_state_name(m->state), m->id);
    }
    if (rc)
        goto out;
    /* the slice's lease, as a repair and a tiering run take it: a repair copying into this
     * replica while it is dropped would bring the slice back onto the shard (the ZooKeeper soak
     * found one doing so) */
    char owner[FERRY_NAME_MAX];
    snprintf(owner, sizeof owner, "replica drop %s", o->owner ? o->owner : "");
    if ((rc = ferry_slice_lease_take(cat, &held, tenant, split, owner, err))) {
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "tenant %s split %u is being repaired or tiered; drop the "
                             "replica on %s after that (run again): ", tenant, split, shard);
        goto out;
    }
    /* the route again, now that the slice is this run's */
    if ((rc = ferry_catalog_get(cat, &route, err)))
        goto out;
    /* a write acknowledged without every replica (min_insert_replicas) may be on this one only:
     * the replica stays until a repair made the others equal */
    ferry_repair_need need;
    bool open_need = false;
    if ((rc = ferry_repair_need_get(cat, tenant, split, &need, &open_need, err)))
        goto out;
    ferry_shard_set *rs = &route.u.route.shards;
    if (open_need && ferry_shard_set_has(rs, shard)) {
        char mtext[FERRY_SHARDS_TEXT_MAX];
        rc = ferry_err_set(err, FERRY_ECONFLICT, "tenant %s split %u has writes that only some "
                           "replicas took (acknowledged with [router] min_insert_replicas; "
                           "missed by %s); run `ferry repair --tenant %s` first, then drop the "
                           "replica on %s", tenant, split, ferry_shard_set_str(&need.missed, mtext),
                           tenant, shard);
        goto out;
    }
    if ((rc = mv_conn_open(&sh.u.shard, o->cfg, &c, err)))
        goto out;
    bool routed = ferry_shard_set_has(rs, shard);
    if (routed) {
        if (ferry_shard_set_count(rs) == 1) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u has its only replica on %s; "
                               "the last replica is never removed", tenant, split, shard);
            goto out;
        }
        /* the shard must answer before the route changes, so the removal can follow */
        ferry_agent_status_info st;
        rc = ferry_agent_status(c.ag, &st, err);
        ferry_agent_status_info_free(&st);
        if (rc || (rc = mv_sql(&c, "SELECT 1", NULL, err))) {
            ferry_err_prefix(err, "shard %s is not reachable: ", shard);
            goto out;
        }
        char nl[FERRY_SHARDS_TEXT_MAX];
        ferry_shard_set_remove(rs, shard);
        ferry_shard_set_str(rs, nl);
        rc = ferry_catalog_update(cat, &route, err);
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "the route of tenant %s split %u changed meanwhile; run again: ",
                             tenant, split);
        if (rc)
            goto out;
        ferry_log(FERRY_LOG_INFO, "msg=\"replica unrouted\" tenant=%s split=%u shard=%s route=%s",
                  tenant, split, shard, nl);
        unsigned grace = ferry_move_grace(o);
        usleep((useconds_t)grace * 1000); /* writes in flight to the shard land first */
    }
    /* The catalog's part records stop naming the shard first: until the detach the shard still
     * holds the pointer files, and the sweep never deletes an object a pointer file names, so
     * the records may go first; the other order would leave them naming a server without
     * them if the drop stopped in between. */
    for (size_t i = 0; !rc && i < tables.n; i++) {
        const ferry_table_def *t = &tables.items[i].u.table;
        char (*ids)[FERRY_NAME_MAX] = NULL;
        size_t n = 0;
        const char **names = NULL;
        rc = rs_slice_pids(&c, t, t->name, tenant, split, &ids, &n, err);
        if (!rc && !(names = calloc(n + 1, sizeof *names)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        for (size_t k = 0; !rc && k < n; k++)
            names[k] = ids[k];
        if (!rc)
            rc = ferry_part_records_reassign(cat, t->name, names, n, shard, NULL, false, NULL,
                                             err);
        free(names);
        free(ids);
    }
    /* detach and remove (also what an interrupted earlier drop left) */
    for (size_t i = 0; !rc && i < tables.n; i++)
        rc = rs_remove_slice(&c, &tables.items[i].u.table, tenant, split, &res->partitions, err);
    if (!rc) {
        res->state = FERRY_MOVE_DONE;
        ferry_log(FERRY_LOG_INFO, "msg=\"replica dropped\" tenant=%s split=%u shard=%s "
                  "partitions=%zu", tenant, split, shard, res->partitions);
    } else if (routed) {
        ferry_err_prefix(err, "%s no longer serves tenant %s split %u but removing its data "
                         "failed (run the same command again to finish): ", shard, tenant, split);
    }
out:
    res->seconds = ferry_clock_s() - t0;
    mv_conn_close(&c);
    ferry_record_list_free(&tables);
    ferry_record_list_free(&moves);
    if (cat)
        ferry_slice_leases_release(cat, &held);
    ferry_catalog_close(cat);
    return rc;
}

/* ---- repair ------------------------------------------------------------------------------ */

typedef struct rp_conn {
    char name[FERRY_NAME_MAX];
    mv_conn c;
    bool ok;  /* opened and answering */
    char why[256];
} rp_conn;

static rp_conn *get_conn(ferry_catalog *cat, const ferry_move_opts *o, rp_conn **conns, size_t *n,
                         const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*conns)[i].name, name))
            return &(*conns)[i];
    rp_conn *g = realloc(*conns, (*n + 1) * sizeof *g);
    if (!g)
        return NULL;
    *conns = g;
    rp_conn *c = &g[(*n)++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    ferry_record sh;
    ferry_err e = {0};
    int rc = load_shard(cat, name, &sh, &e);
    if (!rc)
        rc = mv_conn_open(&sh.u.shard, o->cfg, &c->c, &e);
    c->c.cat = cat; /* the staging loads' lease (staging_load.h) */
    if (!rc)
        rc = mv_sql(&c->c, "SELECT 1", NULL, &e);
    ferry_agent_status_info st = {0};
    if (!rc)
        rc = ferry_agent_status(c->c.ag, &st, &e);
    ferry_agent_status_info_free(&st);
    c->ok = rc == FERRY_OK;
    if (!c->ok)
        snprintf(c->why, sizeof c->why, "%.255s", e.msg);
    return c;
}

/* Reports a slice or a partition skipped because another flow works on it (a tiering run or
 * another repair holding the slice's lease, an unfinished move or tier job). */
static void report_busy(ferry_repair_fn fn, void *arg, const ferry_route *rt, const char *table,
                        const char *pid, const char *target, const char *why)
{
    ferry_repair_item it;
    memset(&it, 0, sizeof it);
    snprintf(it.tenant, sizeof it.tenant, "%s", rt->tenant);
    it.split = rt->split;
    snprintf(it.table, sizeof it.table, "%s", table);
    snprintf(it.partition_id, sizeof it.partition_id, "%s", pid);
    snprintf(it.target, sizeof it.target, "%.*s", (int)sizeof it.target - 1, target);
    snprintf(it.action, sizeof it.action, "busy");
    snprintf(it.detail, sizeof it.detail, "%.255s", why);
    FLOG_INFO("msg=\"repair: skipped, another flow works on it; the next repair takes it up\" "
              "tenant=%s split=%u table=%s partition=%s why=\"%s\"", rt->tenant, rt->split,
              table[0] ? table : "-", pid[0] ? pid : "-", why);
    if (fn)
        fn(&it, arg);
}

/* Whether unfinished move mv has switched the slice's route to its target without publishing
 * yet (state SWITCH) and is a plain move, not a clone: its target's table then holds only the
 * rows written since the switch, and the slice's earlier rows wait in the target's staging table
 * until the move publishes them (MOVE PARTITION). A repair must leave such a slice alone: copying
 * the source's rows to the target, and clearing its staging partition on the way, makes the
 * resumed move copy them again and publish them beside the repair's copy (the SQLite soak at
 * 552323e: 5,026 rows twice on the target). A clone's SWITCH is the same sync a repair makes
 * (rs_sync_partition), so a repair may do it; a job record that cannot be read counts as a
 * plain move. */
static bool move_owns_target(ferry_catalog *cat, const ferry_move *mv)
{
    if (mv->state != FERRY_MOVE_SWITCH)
        return false;
    ferry_record job;
    ferry_err e = {0};
    mv_state st;
    bool clone = false;
    ferry_record_init(&job, FERRY_REC_JOB);
    snprintf(job.u.job.id, sizeof job.u.job.id, "move.%s", mv->id);
    if (ferry_catalog_get(cat, &job, &e) == FERRY_OK &&
        mv_state_decode(ferry_job_data(&job.u.job), &st, &e) == FERRY_OK) {
        clone = st.clone;
        mv_state_free(&st);
    }
    ferry_record_free(&job);
    return !clone;
}

/* Whether a tier job of (server, table, pid) is unfinished (neither DONE nor FAILED): its swap
 * may be about to run, or have run without its VERIFY; the partition is the job's until then.
 * *id receives the job's id. */
static bool tier_job_open(ferry_catalog *cat, const char *server, const char *table,
                          const char *pid, char *id, size_t idsz)
{
    ferry_err e = {0};
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_JOB);
    if (ferry_tier_job_id(server, table, pid, r.u.job.id, sizeof r.u.job.id, &e))
        return false;
    snprintf(id, idsz, "%s", r.u.job.id);
    bool open = false;
    if (ferry_catalog_get(cat, &r, &e) == FERRY_OK) {
        enum ferry_tier_state s = FERRY_TIER_PLANNED;
        open = !ferry_tier_state_parse(r.u.job.state, &s, NULL) && s != FERRY_TIER_DONE &&
               s != FERRY_TIER_FAILED;
    }
    ferry_record_free(&r);
    return open;
}

/* rs_sync_partition's hooks: before the first change the intent to mirror is durable
 * (repair_mirror.h), unless an earlier cut run's is still open; before each round's change no
 * router has a write to the slice open since the round began waiting, nor awaits a retry
 * (open_writes_check). */
typedef struct mirror_announce_arg {
    ferry_catalog *cat;
    const struct ferry_config *cfg;
    repair_mirror m;
    bool open;    /* an intent for (table, pid, target) is in the catalog */
} mirror_announce_arg;

/* A write open before the target's parts are listed may have stored rows there and still fail:
 * its retry, after those parts were detached (their block ids with them) or copies added beside
 * them (which carry none), would be stored again (ferry_router_wait_open_writes). Found by the
 * SQLite soak at a2541f0 and again at 67af25b (docs/reliability.md): a write stored on the
 * target during a repair's first round, failed on another shard, was detached by the second
 * round, and its retry stored it twice. */
static int open_writes_check(void *arg, ferry_err *err)
{
    mirror_announce_arg *a = arg;
    return ferry_router_wait_open_writes(a->cfg, a->m.tenant, a->m.split,
                                         FERRY_OPEN_WRITES_WAIT_MS, err);
}

static int mirror_announce(void *arg, ferry_err *err)
{
    mirror_announce_arg *a = arg;
    if (a->open)
        return FERRY_OK;
    int rc = repair_mirror_open(a->cat, &a->m, err);
    if (!rc)
        a->open = true;
    return rc;
}

/* Replays an earlier run's open intent on target (repair_mirror.h): that run was cut after
 * changing the target's partition and before (or while) mirroring the records, and the source's
 * records may have moved on since (each replica tiers on its own), so the target's own pointer
 * files are the truth: staging's leftovers go, the records are made to agree with them, then
 * the intent is removed. Only when the partition is equal on the replicas now (the caller's
 * sync found it so, or target is the source the others are made equal to). */
static int replay_intent(ferry_catalog *cat, mv_conn *target, const ferry_table_def *t,
                         const char *pid, ferry_err *err)
{
    size_t n = 0;
    FLOG_INFO("msg=\"repair: an earlier run was cut between copying and recording; the records "
              "follow the target's pointer files\" table=%s partition=%s target=%s",
              t->name, pid, target->name);
    int rc = rs_staging_clear(target, t, pid, err);
    if (!rc)
        rc = ferry_part_records_reconcile(cat, target->ag, t->database, t->name, pid,
                                          target->name, &n, err);
    if (!rc)
        rc = repair_mirror_close(cat, t->name, pid, target->name, err);
    return rc;
}

/* After the sync of (t, pid) from source to target ended with both equal: a sync that changed
 * the target mirrors the source's records (the target's partition is a copy of the source's
 * now), then makes them agree with the target's own pointer files, and removes the intent it
 * opened; one that found them equal replays an earlier run's intent. Equal rows are not equal
 * parts: a part of the source that ferry tiered can be byte-identical to a hot part the target
 * wrote itself (the same insert on both replicas), so the sync counts it as held and copies
 * nothing, and the mirror alone would name the target for objects no pointer file of it
 * references (the sweep's catalog_only drift, seen in the chaos soak); likewise a cold part of
 * the target's own that the source holds hot would lose the target (server_only). */
static int mirror_records(ferry_catalog *cat, mv_conn *target, const ferry_table_def *t,
                          const char *pid, const char *source, bool changed, bool intent_open,
                          ferry_err *err)
{
    if (!changed)
        return intent_open ? replay_intent(cat, target, t, pid, err) : FERRY_OK;
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "REPAIR:copied");
    int rc = ferry_part_records_mirror(cat, t->name, pid, source, target->name, NULL, err);
    if (!rc)
        rc = ferry_part_records_reconcile(cat, target->ag, t->database, t->name, pid,
                                          target->name, NULL, err);
    if (!rc && intent_open)
        rc = repair_mirror_close(cat, t->name, pid, target->name, err);
    return rc;
}

int ferry_repair_run(const ferry_move_opts *o, const char *tenant, bool dry_run,
                     ferry_repair_fn fn, void *arg, ferry_repair_summary *sum, ferry_err *err)
{
    ferry_repair_summary dummy;
    if (!sum)
        sum = &dummy;
    memset(sum, 0, sizeof *sum);
    ferry_catalog *cat = NULL;
    ferry_record_list routes = {0}, tables = {0}, moves = {0};
    repair_mirror_set intents = {0}; /* earlier runs' open intents to mirror records */
    rp_conn *conns = NULL;
    size_t nconns = 0;
    int rc = ferry_catalog_open(o->catalog_url, &cat, err);
    const char *prefix[] = {tenant};
    if (!rc)
        rc = ferry_catalog_list(cat, FERRY_REC_ROUTE, tenant ? prefix : NULL, tenant ? 1 : 0,
                                &routes, err);
    if (!rc)
        rc = load_tables(cat, &tables, err);
    if (!rc && !dry_run)
        rc = repair_mirror_list(cat, &intents, err);
    if (rc)
        goto out;
    unsigned seq = (unsigned)time(NULL) ^ (unsigned)getpid();
    char owner[FERRY_NAME_MAX];
    snprintf(owner, sizeof owner, "repair %s", o->owner ? o->owner : "");
    ferry_slice_leases held = {0};
    for (size_t r = 0; !rc && r < routes.n; r++) {
        ferry_slice_leases_release(cat, &held); /* the previous slice's */
        const ferry_route *rt = &routes.items[r].u.route;
        if (ferry_shard_set_count(&rt->shards) < 2)
            continue;
        if (ferry_stop_requested()) { /* between slices: each slice's repair is whole */
            rc = ferry_err_set(err, FERRY_ETIMEOUT, "repair: stopping (the process was asked to "
                               "stop); the next run checks the slices left");
            break;
        }
        sum->slices++;
        /* the replicas, in route order */
        char names[FERRY_SHARDS_MAX][FERRY_NAME_MAX], rtext[FERRY_SHARDS_TEXT_MAX];
        rp_conn *cs[FERRY_SHARDS_MAX];
        size_t nr = 0;
        ferry_shard_set_str(&rt->shards, rtext);
        bool reachable = true;
        for (; nr < ferry_shard_set_count(&rt->shards); ) {
            const char *s = ferry_shard_set_at(&rt->shards, nr);
            snprintf(names[nr], FERRY_NAME_MAX, "%s", s);
            cs[nr] = get_conn(cat, o, &conns, &nconns, s);
            if (!cs[nr]) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                break;
            }
            nr++;
        }
        /* get_conn may move the array: look the entries up again */
        for (size_t k = 0; !rc && k < nr; k++) {
            cs[k] = get_conn(cat, o, &conns, &nconns, names[k]);
            if (!cs[k]->ok)
                reachable = false;
        }
        if (rc)
            break;
        /* the slice is this repair's until the next one: its lease (a tiering run and another
         * repair take it too), and the lease of each unfinished move of the slice, so no mover
         * resumes it meanwhile (a clone's SWITCH syncs the same partitions through the same
         * staging table: a repair beside it doubled rows on the new replica in the chaos soak) */
        if (!dry_run) {
            ferry_record_list_free(&moves);
            if ((rc = ferry_catalog_list_unfinished_moves(cat, &moves, err)))
                break;
            /* the leases of the slice's unfinished moves, then the slice's own: one held by
             * another process makes the slice busy (skipped), another failure stops */
            ferry_err le = {0};
            int lrc = FERRY_OK;
            const char *switched = NULL; /* an unfinished move that owns the slice's target */
            for (size_t m = 0; !lrc && !switched && m < moves.n; m++) {
                const ferry_move *mv = &moves.items[m].u.move;
                if (mv->split != rt->split || strcmp(mv->tenant, rt->tenant))
                    continue;
                if (move_owns_target(cat, mv))
                    switched = mv->id;
                else
                    lrc = ferry_move_lease_take(cat, &held, mv->id, owner, &le);
            }
            if (switched) {
                char why[256];
                snprintf(why, sizeof why, "move %s switched the slice and has not published it "
                         "yet (ferry move --resume %s finishes it)", switched, switched);
                ferry_slice_leases_release(cat, &held);
                sum->busy++;
                report_busy(fn, arg, rt, "", "", rtext, why);
                continue;
            }
            if (!lrc)
                lrc = ferry_slice_lease_take(cat, &held, rt->tenant, rt->split, owner, &le);
            if (lrc == FERRY_ECONFLICT) {
                sum->busy++;
                report_busy(fn, arg, rt, "", "", rtext, le.msg);
                continue;
            }
            if (lrc) {
                rc = lrc;
                *err = le;
                break;
            }
            /* the route as it is now that the slice is this repair's: a replica dropped (or a
             * move switched) since the list was read must not be written to (the ZooKeeper soak:
             * a repair copied a dropped replica's partitions back onto its shard) */
            ferry_record now;
            ferry_record_init(&now, FERRY_REC_ROUTE);
            snprintf(now.u.route.tenant, sizeof now.u.route.tenant, "%s", rt->tenant);
            now.u.route.split = rt->split;
            lrc = ferry_catalog_get(cat, &now, &le);
            if (!lrc && !ferry_shard_set_same(&now.u.route.shards, &rt->shards)) {
                char was[FERRY_SHARDS_TEXT_MAX], is[FERRY_SHARDS_TEXT_MAX], why[2 * FERRY_SHARDS_TEXT_MAX + 64];
                ferry_shard_set_str(&rt->shards, was);
                ferry_shard_set_str(&now.u.route.shards, is);
                snprintf(why, sizeof why, "the route changed from %s to %s since the repair read it",
                         was, is);
                ferry_record_free(&now);
                sum->busy++;
                report_busy(fn, arg, rt, "", "", rtext, why);
                continue;
            }
            ferry_record_free(&now);
            if (lrc == FERRY_ENOTFOUND) { /* the tenant went meanwhile */
                sum->busy++;
                report_busy(fn, arg, rt, "", "", rtext, "the route is gone");
                continue;
            }
            if (lrc) {
                rc = lrc;
                *err = le;
                break;
            }
        }
        /* a failed write of the slice that a client will send again: its retry brings the rows
         * to the replica that missed them (deduplicated where they are); copying them first
         * would store them twice there */
        if (!dry_run) {
            char why[400];
            if (ferry_router_retry_pending(o->cfg, rt->tenant, rt->split, 0, why, sizeof why)) {
                sum->busy++;
                report_busy(fn, arg, rt, "", "", rtext, why);
                continue;
            }
        }
        /* an open repair-need record (writes acknowledged without every replica): its shards
         * that took every such write are the sources, and it is cleared once the slice is equal
         * everywhere */
        ferry_repair_need need;
        bool open_need = false;
        size_t failed_before = sum->failed, busy_before = sum->busy;
        /* a partition's sync gave up waiting for writes to the slice (a router's open write,
         * open_writes_check, or an INSERT still running on the target): the slice's other
         * partitions would wait as long, holding its lease, for nothing */
        bool writes_open = false;
        if ((rc = ferry_repair_need_get(cat, rt->tenant, rt->split, &need, &open_need, err)))
            break;
        bool held_routed = false;
        for (size_t k = 0; open_need && k < nr; k++)
            held_routed |= ferry_shard_set_has(&need.held, names[k]);
        if (!reachable) {
            for (size_t k = 0; k < nr; k++)
                if (!cs[k]->ok) {
                    ferry_repair_item it;
                    memset(&it, 0, sizeof it);
                    snprintf(it.tenant, sizeof it.tenant, "%s", rt->tenant);
                    it.split = rt->split;
                    snprintf(it.target, sizeof it.target, "%.*s", (int)sizeof it.target - 1, names[k]);
                    snprintf(it.action, sizeof it.action, "error");
                    snprintf(it.detail, sizeof it.detail, "replica unreachable: %.200s", cs[k]->why);
                    sum->unreachable++;
                    if (fn)
                        fn(&it, arg);
                }
            continue;
        }
        for (size_t ti = 0; !rc && ti < tables.n; ti++) {
            const ferry_table_def *t = &tables.items[ti].u.table;
            char (*pids)[FERRY_NAME_MAX] = NULL;
            size_t np = 0;
            for (size_t k = 0; !rc && k < nr; k++)
                rc = rs_slice_pids(&cs[k]->c, t, t->name, rt->tenant, rt->split, &pids, &np, err);
            for (size_t p = 0; !rc && p < np; p++) {
                /* a tier job left unfinished on a replica (a killed run, a swap without an
                 * answer) owns the partition there until it is resumed */
                char jid[FERRY_NAME_MAX] = "", why[FERRY_NAME_MAX + 96];
                bool open_job = false;
                for (size_t k = 0; k < nr && !open_job; k++)
                    open_job = tier_job_open(cat, names[k], t->name, pids[p], jid, sizeof jid);
                if (open_job) {
                    snprintf(why, sizeof why, "tier job %s is unfinished (ferry tier resumes "
                             "it)", jid);
                    sum->busy++;
                    report_busy(fn, arg, rt, t->name, pids[p], rtext, why);
                    continue;
                }
                if (writes_open) {
                    sum->busy++;
                    report_busy(fn, arg, rt, t->name, pids[p], rtext,
                                "an earlier partition of the slice gave up waiting for writes to "
                                "it (see above); the next run takes it up");
                    continue;
                }
                /* the source: the replica holding the most rows of the partition */
                uint64_t rows[16] = {0};
                bool broken[16] = {false}; /* unreadable: broken parts (never the source) */
                size_t best = 0;
                for (size_t k = 0; !rc && k < nr; k++) {
                    ferry_fingerprint fp = {0};
                    ferry_err fe = {0};
                    int frc = rs_fingerprint(&cs[k]->c, t, pids[p], false, &fp, NULL, &fe);
                    if (frc == FERRY_EIO) {
                        broken[k] = true;
                        FLOG_WARN("msg=\"repair: a replica's partition has broken parts; it is "
                                  "repaired from another one\" err=\"%s\"", fe.msg);
                    } else if (frc) {
                        rc = frc;
                        *err = fe;
                    }
                    rows[k] = fp.rows;
                }
                /* among the replicas that took every acknowledged write when a record names
                 * some (a replica that missed one may hold more rows of other writes: then
                 * the pair is reported diverged, never repaired from the one that missed) */
                bool chosen = false;
                for (size_t k = 0; !rc && k < nr; k++) {
                    if (held_routed && !ferry_shard_set_has(&need.held, names[k]))
                        continue;
                    if (broken[k] && chosen && !broken[best])
                        continue;
                    if (!chosen || (broken[best] && !broken[k]) || rows[k] > rows[best])
                        best = k;
                    chosen = true;
                }
                /* the source's own intent, left by a cut run that repaired it from another
                 * replica: nothing changes it now, so it is replayed first */
                if (!dry_run && repair_mirror_find(&intents, t->name, pids[p], names[best])) {
                    ferry_err e = {0};
                    if (replay_intent(cat, &cs[best]->c, t, pids[p], &e)) {
                        FLOG_WARN("msg=\"repair: cannot replay the source's open intent; the "
                                  "next run tries again\" table=%s partition=%s server=%s "
                                  "err=\"%s\"", t->name, pids[p], names[best], e.msg);
                        sum->failed++;
                    }
                }
                for (size_t k = 0; !rc && k < nr; k++) {
                    if (k == best)
                        continue;
                    char freeze[96];
                    snprintf(freeze, sizeof freeze, "ferry_repair_%x_%zu", seq, p);
                    rs_result rr;
                    ferry_err e = {0};
                    /* the target's partition becomes the source's: so do its references to
                     * cold objects (a replace drops the target's own cold parts, a copy adds
                     * the source's); else the sweep reports drift and the replaced parts'
                     * objects stay recorded for good. The intent is journaled before the
                     * first change, so a run cut before the records follow is replayed. */
                    mirror_announce_arg ma = {.cat = cat, .cfg = o->cfg};
                    ma.open = repair_mirror_find(&intents, t->name, pids[p], names[k]) != NULL;
                    snprintf(ma.m.tenant, sizeof ma.m.tenant, "%s", rt->tenant);
                    ma.m.split = rt->split;
                    snprintf(ma.m.table, sizeof ma.m.table, "%s", t->name);
                    snprintf(ma.m.partition_id, sizeof ma.m.partition_id, "%s", pids[p]);
                    snprintf(ma.m.target, sizeof ma.m.target, "%s", names[k]);
                    snprintf(ma.m.source, sizeof ma.m.source, "%s", names[best]);
                    rs_before_change before = {.fn = mirror_announce, .check = open_writes_check,
                                               .arg = &ma};
                    int src = rs_sync_partition(&cs[best]->c, &cs[k]->c, t, pids[p], freeze,
                                                ferry_move_grace(o), RS_ROUNDS, dry_run,
                                                dry_run ? NULL : &before, &rr, &e);
                    if (src == FERRY_ETIMEOUT)
                        writes_open = true;
                    /* only a round that changed the target makes it a copy of the source
                     * (found by the ZooKeeper soak: a replace round that left off because the
                     * source's parts changed under it, with the target equal at the end by
                     * its own writes, mirrored the records and took the target off those of
                     * its own cold parts); an intent announced for nothing is replayed, which
                     * also closes it */
                    if (!src && rr.repaired && !dry_run)
                        src = mirror_records(cat, &cs[k]->c, t, pids[p], names[best], rr.changed,
                                             ma.open, &e);
                    ferry_repair_item it;
                    memset(&it, 0, sizeof it);
                    snprintf(it.tenant, sizeof it.tenant, "%s", rt->tenant);
                    it.split = rt->split;
                    snprintf(it.table, sizeof it.table, "%s", t->name);
                    snprintf(it.partition_id, sizeof it.partition_id, "%s", pids[p]);
                    snprintf(it.source, sizeof it.source, "%.*s", (int)sizeof it.source - 1,
                             names[best]);
                    snprintf(it.target, sizeof it.target, "%.*s", (int)sizeof it.target - 1,
                             names[k]);
                    it.source_rows = rr.src_rows;
                    it.target_rows_before = rr.dst_rows_before;
                    it.target_rows_after = rr.dst_rows_after;
                    snprintf(it.action, sizeof it.action, "%s", src ? "error" : rr.action);
                    it.repaired = !src && rr.repaired;
                    it.parts_sent = rr.parts_sent;
                    it.hot_copied = rr.hot_copied;
                    it.cold_copied = rr.cold_copied;
                    snprintf(it.detail, sizeof it.detail, "%.255s", src ? e.msg : rr.detail);
                    sum->partitions++;
                    sum->hot_copied += rr.hot_copied;
                    sum->cold_copied += rr.cold_copied;
                    if (!src && !strcmp(rr.action, "in-sync"))
                        sum->in_sync++;
                    else if (!src && rr.repaired)
                        sum->repaired++;
                    else
                        sum->failed++; /* with dry_run: differs, would be repaired */
                    if (fn)
                        fn(&it, arg);
                }
            }
            free(pids);
        }
        if (!rc && open_need && !dry_run && sum->failed == failed_before &&
            sum->busy == busy_before) {
            ferry_err e = {0};
            char mtext[FERRY_SHARDS_TEXT_MAX];
            int crc = ferry_repair_need_clear(cat, &need, &e);
            if (crc == FERRY_ECONFLICT)
                FLOG_INFO("msg=\"repair: a newer write was acknowledged without every replica "
                          "meanwhile; the slice stays marked\" tenant=%s split=%u",
                          rt->tenant, rt->split);
            else if (crc)
                FLOG_WARN("msg=\"repair: cannot clear the repair-need record\" tenant=%s "
                          "split=%u err=\"%s\"", rt->tenant, rt->split, e.msg);
            else
                FLOG_INFO("msg=\"repair: writes acknowledged without every replica are on "
                          "every replica now\" tenant=%s split=%u writes=%llu missed=%s",
                          rt->tenant, rt->split, (unsigned long long)need.writes,
                          ferry_shard_set_str(&need.missed, mtext));
        }
    }
    ferry_slice_leases_release(cat, &held);
    if (!rc && (sum->failed || sum->unreachable || sum->busy))
        rc = ferry_err_set(err, FERRY_EIO,
                           "%zu partition(s) %s, %zu replica(s) unreachable, %zu skipped while "
                           "another flow works on them (see the lines above; run again)",
                           sum->failed, dry_run ? "differ (dry run: nothing changed)"
                                                : "not repaired",
                           sum->unreachable, sum->busy);
out:
    for (size_t i = 0; i < nconns; i++)
        mv_conn_close(&conns[i].c);
    free(conns);
    ferry_record_list_free(&routes);
    ferry_record_list_free(&tables);
    ferry_record_list_free(&moves);
    repair_mirror_set_free(&intents);
    ferry_catalog_close(cat);
    return rc;
}
