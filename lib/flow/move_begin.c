/* Starting a move or a clone (include/ferry/move.h, ferry_move_begin*): the request checked
 * against the catalog and both servers (the slice, the shards, the target's agent and room for
 * the slice's hot bytes), then journaled as PLANNED, or the unfinished move of that slice found
 * and resumed; and the list of unfinished moves. Running a move is move.c's. */
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

#include "flow/disk_room.h"
#include "ferry/agent.h"
#include "ferry/buf.h"
#include "ferry/config.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/rate.h"
#include "ferry/repair_need.h"
#include "ferry/strutil.h"
#include "ferry/tally.h"
#include "ferry/testknob.h"
#include "ferry/verify.h"
#include "flow/move_env.h"
#include "flow/move_state.h"
#include "flow/part_records.h"
#include "flow/replica_int.h"
#include "flow/staging_load.h"

#define MV_MAX_ATTEMPTS 20    /* attempts of one state before the move gives up */
#define MV_MAX_ROUNDS 5       /* catch-up rounds of one SWITCH attempt */
#define MV_STEP_PUBLISH FERRY_MOVE_STEP_PUBLISH /* SWITCH step: verified, publishing */
#define MV_STAGING_SUFFIX "_ferry_staging"

int mv_load_shard(ferry_catalog *cat, const char *name, ferry_record *r, ferry_err *err)
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

int mv_load_tables(ferry_catalog *cat, ferry_record_list *out, ferry_err *err)
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

static int source_status(void *src, ferry_err *err)
{
    ferry_agent_status_info st = {0};
    int rc = ferry_agent_status(((mv_conn *)src)->ag, &st, err);
    if (!rc)
        ((mv_conn *)src)->agent_api = st.api; /* the copy round's mv_sends_live */
    ferry_agent_status_info_free(&st);
    return rc;
}

/* Both sides must answer: the target's agent (its status into dst_status, for the room check)
 * and its ClickHouse, and the source's agent, asked side by side. The target's failure is
 * reported first. */
static int both_reachable(mv_conn *src, const char *from, mv_conn *dst, const char *to,
                          ferry_agent_status_info *dst_status, ferry_err *err)
{
    mv_side side;
    mv_side_start(&side, source_status, src);
    int rc = ferry_agent_status(dst->ag, dst_status, err);
    if (!rc)
        rc = mv_sql(dst, "SELECT 1", NULL, err);
    if (rc)
        ferry_err_prefix(err, "target shard %s is not reachable: ", to);
    ferry_err serr = {0};
    int src_rc = mv_side_join(&side, &serr);
    if (!rc && src_rc) {
        *err = serr;
        rc = src_rc;
        ferry_err_prefix(err, "source shard %s is not reachable: ", from);
    }
    return rc;
}

/* The pre-flight for room on the target: every local disk of the target (its agent's statvfs of
 * the disk's path, from `status`) must hold the slice's hot bytes plus a margin (hot parts may
 * land on any local disk of the hot volume; pointer files of cold parts are small and go to the
 * object disk's local metadata folder). An agent without free_bytes (older) falls back to
 * ClickHouse's system.disks unreserved_space. Every local disk must also keep [cluster]
 * min_free_inodes free besides an estimate of the inodes the slice's parts take (disk_room.h):
 * a file system out of inodes fails every write with bytes free. */
#define MV_ROOM_MARGIN_MIN (8u << 20)
static int check_room(mv_conn *dst, const ferry_agent_status_info *status, const char *to, const char *tenant,
                      uint32_t split, uint64_t hot, size_t parts, uint64_t min_inodes,
                      ferry_err *err)
{
    uint64_t margin = hot / 10 > MV_ROOM_MARGIN_MIN ? hot / 10 : MV_ROOM_MARGIN_MIN;
    char a[32], b[32], c[32];
    /* and inodes: every part copied is a directory of files, a cold one's pointer files too
     * (disk_room.h); an agent that reports no inode count passes */
    char who[FERRY_NAME_MAX + 32], what[2 * FERRY_NAME_MAX + 64];
    snprintf(who, sizeof who, "target shard %s", to);
    snprintf(what, sizeof what, "tenant %s split %u (%zu parts)", tenant, split, parts);
    int irc = ferry_inode_room(status, NULL, NULL, (uint64_t)parts * FERRY_INODES_PER_PART,
                               min_inodes, who, what, err);
    if (irc) {
        size_t l = strlen(err->msg);
        snprintf(err->msg + l, sizeof err->msg - l, ". Free inodes there or pick another shard; "
                 "nothing was moved");
        return irc;
    }
    bool seen = false;
    for (size_t i = 0; i < status->n_disks; i++) {
        const ferry_agent_disk *d = &status->disks[i];
        if (d->remote || !d->has_bytes)
            continue;
        seen = true;
        uint64_t room = d->free_bytes;
        if (hot + margin > room)
            return ferry_err_set(err, FERRY_EIO,
                                 "target shard %s: disk '%s' (%s) has %s free; tenant %s split "
                                 "%u needs %s for its hot parts plus a margin of %s. Free space "
                                 "there or pick another shard; nothing was moved",
                                 to, d->name ? d->name : "?", d->path ? d->path : "?",
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
    uint64_t room = rows.n_rows ? mv_u64_of(ferry_ch_rows_get(&rows, 0, 0)) : 0;
    ferry_ch_rows_free(&rows);
    if (hot > room)
        return ferry_err_set(err, FERRY_EIO,
                             "target shard %s has %s free on its local disks; tenant %s split %u "
                             "needs %s for its hot parts. Free space there or pick another shard",
                             to, ferry_fmt_bytes(room, a, sizeof a), tenant, split,
                             ferry_fmt_bytes(hot, b, sizeof b));
    return FERRY_OK;
}

/* What the moves of a batch (ferry_move_begin_batch) share: the catalog, the managed tables,
 * both shards' connections and answers, and one listing per side and table of every slice of
 * the batch; k is the slice being begun, hot_before the hot bytes of the batch's slices begun
 * before it (the target must have room for all of them). */
typedef struct begin_shared {
    ferry_catalog *cat;
    ferry_record_list tables;
    const char *from;
    mv_conn src, dst;
    ferry_agent_status_info dst_status; /* the target agent's status */
    mv_slice *src_list, *dst_list; /* [table * n + slice] */
    size_t n, k;
    uint64_t hot_before, hot; /* hot: this slice's, set by move_begin */
    size_t parts_before, parts; /* the same for the parts (inodes: disk_room.h) */
    uint64_t min_inodes;        /* [cluster] min_free_inodes */
} begin_shared;

/* The source of a move or clone of a slice with several replicas (route `shards`): never a
 * replica that missed writes the router acknowledged without it (an open repair-need record,
 * include/ferry/repair_need.h), since the copy would lack them. want_from named (NULL or "":
 * not): refused when that replica missed writes; not named: the first replica of the route
 * that missed none replaces `from` (which holds the route's first shard); refused when every
 * replica missed some. */
static int pick_clean_source(ferry_catalog *cat, const char *tenant, uint32_t split,
                             const ferry_shard_set *shards, const char *want_from, char *from,
                             size_t from_size, ferry_err *err)
{
    ferry_repair_need need;
    bool open_need = false;
    int rc = ferry_repair_need_get(cat, tenant, split, &need, &open_need, err);
    if (rc || !open_need || !ferry_shard_set_has(&need.missed, from))
        return rc;
    char text[FERRY_SHARDS_TEXT_MAX], htext[FERRY_SHARDS_TEXT_MAX];
    if (want_from && *want_from)
        return ferry_err_set(err, FERRY_ECONFLICT,
                             "tenant %s split %u: the replica on %s missed writes acknowledged "
                             "without it (open repair need; missed by %s); a copy from it would "
                             "lose them: run `ferry repair --tenant %s` first, or move from a "
                             "replica that took them (%s)", tenant, split, from,
                             ferry_shard_set_str(&need.missed, text), tenant,
                             ferry_shard_set_count(&need.held)
                                 ? ferry_shard_set_str(&need.held, htext)
                                 : "none did");
    for (size_t i = 0; i < ferry_shard_set_count(shards); i++)
        if (!ferry_shard_set_has(&need.missed, ferry_shard_set_at(shards, i))) {
            mv_copy_str(from, from_size, ferry_shard_set_at(shards, i));
            return FERRY_OK;
        }
    return ferry_err_set(err, FERRY_ECONFLICT,
                         "tenant %s split %u: every replica (%s) missed some writes acknowledged "
                         "without it (open repair need); a copy from any of them would lose "
                         "rows: run `ferry repair --tenant %s` first", tenant, split,
                         ferry_shard_set_str(shards, text), tenant);
}

static int move_begin(const ferry_move_opts *o, const char *tenant, uint32_t split,
                      const char *want_from, const char *to, bool clone, char id[64],
                      bool *resumed, begin_shared *sh, ferry_err *err)
{
    ferry_catalog *cat = NULL;
    ferry_record trec, route, tsh, fsh;
    ferry_record_list moves = {0}, tables = {0};
    mv_conn dst = {0}, src = {0};
    ferry_agent_status_info dst_status = {0};
    ferry_record_init(&trec, FERRY_REC_TENANT);
    ferry_record_init(&route, FERRY_REC_ROUTE);
    ferry_record_init(&tsh, FERRY_REC_SHARD);
    ferry_record_init(&fsh, FERRY_REC_SHARD);
    *resumed = false;
    id[0] = '\0';
    int rc = sh ? FERRY_OK : ferry_catalog_open(o->catalog_url, &cat, err);
    if (sh)
        cat = sh->cat;
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
    if ((rc = mv_load_shard(cat, to, &tsh, err)))
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
        if (ferry_shard_set_count(&m->to) != 1 || !ferry_shard_set_has(&m->to, to)) {
            char ttext[FERRY_SHARDS_TEXT_MAX];
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "tenant %s split %u has an unfinished move %s to %s (state %s); "
                               "finish it first (ferry move --resume %s)", tenant, split, m->id,
                               ferry_shard_set_str(&m->to, ttext),
                               ferry_move_state_name(m->state), m->id);
            goto out;
        }
        snprintf(id, 64, "%s", m->id);
        *resumed = true;
        goto out;
    }
    const ferry_shard_set *rs = &route.u.route.shards;
    char rtext[FERRY_SHARDS_TEXT_MAX];
    if (ferry_shard_set_has(rs, to)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u is already served by %s; "
                           "nothing to move", tenant, split, to);
        goto out;
    }
    if (clone && ferry_shard_set_count(rs) == FERRY_SHARDS_MAX) {
        rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u has %d replicas (%s), the most "
                           "a route holds; a clone would add one more", tenant, split,
                           FERRY_SHARDS_MAX, ferry_shard_set_str(rs, rtext));
        goto out;
    }
    char from[FERRY_NAME_MAX];
    mv_copy_str(from, sizeof from, ferry_shard_set_count(rs) ? ferry_shard_set_at(rs, 0) : "");
    if (want_from && *want_from) {
        /* a slice with several replicas: the one named (e.g. on a draining shard) */
        if (!ferry_shard_set_has(rs, want_from)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u is not served by %s (its "
                               "route: %s); nothing to move from there", tenant, split,
                               want_from, ferry_shard_set_str(rs, rtext));
            goto out;
        }
        mv_copy_str(from, sizeof from, want_from);
    }
    if (ferry_shard_set_count(rs) > 1 &&
        (rc = pick_clean_source(cat, tenant, split, rs, want_from, from,
                                sizeof from, err)))
        goto out;
    if (sh) { /* the batch's checks of the servers, made once for all its slices */
        if (strcmp(from, sh->from)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "tenant %s split %u is served by %s now, not "
                               "%s; plan again", tenant, split, from, sh->from);
            goto out;
        }
        for (size_t i = 0; !rc && i < sh->tables.n; i++) {
            const ferry_table_def *t = &sh->tables.items[i].u.table;
            const mv_slice *sl = &sh->src_list[i * sh->n + sh->k];
            const mv_slice *there = &sh->dst_list[i * sh->n + sh->k];
            sh->parts += sl->n_parts;
            for (size_t j = 0; j < sl->n_parts; j++)
                if (!sl->parts[j].cold)
                    sh->hot += sl->parts[j].bytes;
            if (there->n_pids)
                rc = ferry_err_set(err, FERRY_ECONFLICT,
                                   "shard %s already holds %zu partition(s) of tenant %s split "
                                   "%u in %s.%s (e.g. %s) although the route says %s; resolve "
                                   "that first", to, there->n_pids, tenant, split, t->database,
                                   t->name, there->pids[0], from);
        }
        if (!rc)
            rc = check_room(&sh->dst, &sh->dst_status, to, tenant, split,
                            sh->hot_before + sh->hot, sh->parts_before + sh->parts,
                            sh->min_inodes, err);
        if (rc)
            goto out;
        goto journal;
    }
    if ((rc = mv_load_shard(cat, from, &fsh, err)) || (rc = mv_load_tables(cat, &tables, err)))
        goto out;
    /* both sides must answer, and the target must have room for the hot parts */
    if ((rc = mv_conn_open(&tsh.u.shard, o->cfg, &dst, err)) ||
        (rc = mv_conn_open(&fsh.u.shard, o->cfg, &src, err)))
        goto out;
    if ((rc = both_reachable(&src, from, &dst, to, &dst_status, err)))
        goto out;
    uint64_t hot = 0, min_inodes = 0;
    size_t n_parts = 0;
    rc = ferry_min_free_inodes(o->cfg, &min_inodes, err);
    for (size_t i = 0; !rc && i < tables.n; i++) {
        const ferry_table_def *t = &tables.items[i].u.table;
        mv_slice sl = {0};
        rc = mv_slice_list(&src, t, t->name, tenant, split, true, &sl, err);
        n_parts += rc ? 0 : sl.n_parts;
        for (size_t j = 0; !rc && j < sl.n_parts; j++)
            if (!sl.parts[j].cold)
                hot += sl.parts[j].bytes;
        mv_slice_free(&sl);
        mv_pids there = {0};
        if (!rc)
            rc = mv_slice_pids(&dst, t, t->name, tenant, split, &there, err);
        if (!rc && there.n)
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "shard %s already holds %zu partition(s) of tenant %s split %u in "
                               "%s.%s (e.g. %s) although the route says %s; resolve that first",
                               to, there.n, tenant, split, t->database, t->name, there.ids[0],
                               from);
        mv_pids_free(&there);
    }
    if (rc)
        goto out;
    if ((rc = check_room(&dst, &dst_status, to, tenant, split, hot, n_parts, min_inodes, err)))
        goto out;
journal:;
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
    if ((rc = ferry_shard_set_add(&mv.u.move.from, from, err)) ||
        (rc = ferry_shard_set_add(&mv.u.move.to, to, err)))
        goto out;
    mv.u.move.state = FERRY_MOVE_PLANNED;
    mv.u.move.steps = 5;
    snprintf(mv.u.move.owner, sizeof mv.u.move.owner, "%s", o->owner ? o->owner : "");
    mv.u.move.created = mv.u.move.updated = (int64_t)time(NULL);
    snprintf(job.u.job.id, sizeof job.u.job.id, "move.%s", mv.u.move.id);
    snprintf(job.u.job.kind, sizeof job.u.job.kind, "move");
    snprintf(job.u.job.state, sizeof job.u.job.state, "PLANNED");
    job.u.job.created = job.u.job.updated = mv.u.move.created;
    ferry_batch *b = ferry_batch_new();
    rc = b ? ferry_job_set_data(&job.u.job, mv_state_initial(clone), err)
           : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc)
        rc = ferry_batch_create(b, &mv, err);
    if (!rc)
        rc = ferry_batch_create(b, &job, err);
    if (!rc)
        rc = ferry_batch_check(b, &route, err); /* the route we checked is still the route */
    if (!rc)
        rc = ferry_catalog_commit(cat, b, NULL, err);
    ferry_batch_free(b);
    ferry_record_free(&job);
    if (!rc)
        snprintf(id, 64, "%s", mv.u.move.id);
out:
    ferry_agent_status_info_free(&dst_status);
    mv_conn_close(&dst);
    mv_conn_close(&src);
    ferry_record_list_free(&moves);
    ferry_record_list_free(&tables);
    if (!sh)
        ferry_catalog_close(cat);
    return rc;
}

int ferry_move_begin(const ferry_move_opts *o, const char *tenant, uint32_t split, const char *to,
                     char id[64], bool *resumed, ferry_err *err)
{
    return move_begin(o, tenant, split, NULL, to, false, id, resumed, NULL, err);
}

int ferry_move_begin_from(const ferry_move_opts *o, const char *tenant, uint32_t split,
                          const char *from, const char *to, bool clone, char id[64],
                          bool *resumed, ferry_err *err)
{
    return move_begin(o, tenant, split, from, to, clone, id, resumed, NULL, err);
}

int ferry_move_begin_clone(const ferry_move_opts *o, const char *tenant, uint32_t split,
                           const char *to, char id[64], bool *resumed, ferry_err *err)
{
    return move_begin(o, tenant, split, NULL, to, true, id, resumed, NULL, err);
}


int ferry_move_begin_batch(const ferry_move_opts *o, const char *const *tenants,
                           const uint32_t *splits, size_t n, const char *from, const char *to,
                           char (*ids)[64], bool *resumed, int *rcs, ferry_err *errs)
{
    begin_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.from = from;
    sh.n = n;
    ferry_record fsh, tsh;
    ferry_record_init(&fsh, FERRY_REC_SHARD);
    ferry_record_init(&tsh, FERRY_REC_SHARD);
    ferry_err err = {0};
    int rc = ferry_catalog_open(o->catalog_url, &sh.cat, &err);
    if (!rc && !((rc = mv_load_shard(sh.cat, to, &tsh, &err))) &&
        !ferry_shard_placeable(tsh.u.shard.state))
        rc = ferry_err_set(&err, FERRY_EINVAL, "shard %s is %s; moves go to active shards only",
                           to, ferry_shard_state_name(tsh.u.shard.state));
    if (!rc)
        rc = mv_load_shard(sh.cat, from, &fsh, &err);
    if (!rc)
        rc = mv_load_tables(sh.cat, &sh.tables, &err);
    if (!rc)
        rc = ferry_min_free_inodes(o->cfg, &sh.min_inodes, &err);
    if (!rc && !(rc = mv_conn_open(&tsh.u.shard, o->cfg, &sh.dst, &err)))
        rc = mv_conn_open(&fsh.u.shard, o->cfg, &sh.src, &err);
    if (!rc)
        rc = both_reachable(&sh.src, from, &sh.dst, to, &sh.dst_status, &err);
    size_t nl = sh.tables.n * n;
    if (!rc && (!(sh.src_list = calloc(nl + 1, sizeof *sh.src_list)) ||
                !(sh.dst_list = calloc(nl + 1, sizeof *sh.dst_list))))
        rc = ferry_err_set(&err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < sh.tables.n; i++) {
        const ferry_table_def *t = &sh.tables.items[i].u.table;
        rc = mv_slice_list_n(&sh.src, t, t->name, tenants, splits, n, true, &sh.src_list[i * n],
                             &err);
        if (!rc)
            rc = mv_slice_list_n(&sh.dst, t, t->name, tenants, splits, n, true,
                                 &sh.dst_list[i * n], &err);
    }
    int first = rc;
    for (size_t k = 0; k < n; k++) {
        ids[k][0] = '\0';
        resumed[k] = false;
        if (rc) { /* the shared checks failed: every slice with their error */
            rcs[k] = rc;
            errs[k] = err;
            continue;
        }
        sh.k = k;
        sh.hot = 0;
        sh.parts = 0;
        memset(&errs[k], 0, sizeof errs[k]);
        rcs[k] = move_begin(o, tenants[k], splits[k], from, to, false, ids[k], &resumed[k], &sh,
                            &errs[k]);
        if (!rcs[k]) {
            sh.hot_before += sh.hot;
            sh.parts_before += sh.parts;
        }
        else if (!first)
            first = rcs[k];
    }
    for (size_t i = 0; i < nl && sh.src_list && sh.dst_list; i++) {
        mv_slice_free(&sh.src_list[i]);
        mv_slice_free(&sh.dst_list[i]);
    }
    free(sh.src_list);
    free(sh.dst_list);
    ferry_agent_status_info_free(&sh.dst_status);
    mv_conn_close(&sh.src);
    mv_conn_close(&sh.dst);
    ferry_record_list_free(&sh.tables);
    ferry_record_free(&fsh);
    ferry_record_free(&tsh);
    ferry_catalog_close(sh.cat);
    return first;
}
