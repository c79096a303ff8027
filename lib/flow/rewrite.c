/* A rewrite job's journal and steps (include/ferry/rewrite.h, docs/rewrite.md): BUILD the
 * corrected partition on the hot disk of a build table, SWAP it into the real table with REPLACE
 * PARTITION, TIER it again through the tiering flow (new objects), RECORD: take the server off
 * the old parts' catalog records so the sweep deletes their objects once nothing names them.
 *
 * Invariants:
 * 1. The tiered table gets exactly one statement from this file: REPLACE PARTITION ... FROM the
 *    build table, atomic for readers. No mutation or DROP of the table's cold parts: ClickHouse
 *    drops the replaced pointer parts itself, one hard link at a time, and the pointer files
 *    ferry wrote say ref_count 1, so no object is deleted by ClickHouse. On ClickHouse before
 *    26.7, whose REPLACE leaves the replaced parts for a restart to load again, the statement is
 *    the attach form instead (DETACH PART of the source parts, ATTACH PARTITION FROM the build;
 *    the detached pointer folders removed by the agent, never an object).
 * 2. Until `swapped` is journaled the table is untouched; any error empties the build partition
 *    and marks the job FAILED. From `swapped` on, a job only goes forward.
 * 3. The swap runs only while the partition is exactly the journaled source parts (names and
 *    number), so rows that arrived since BUILD, or a merge, are never replaced away: the job fails
 *    before the swap instead.
 * 4. Every step is idempotent: a resumed job runs its state's step again. */
#define _DEFAULT_SOURCE
#include "flow/rewrite_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ferry/agent_ops.h"
#include "ferry/clickhouse.h"
#include "ferry/log.h"
#include "ferry/testknob.h"
#include "ferry/partition.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"
#include "ferry/tier.h"

#define CAS_TRIES 8

#define TO(s) FERRY_FLOW_TO(FERRY_REWRITE_##s)
#define FAIL TO(FAILED)
static const ferry_flow_state rewrite_states[FERRY_REWRITE_STATE_COUNT] = {
    [FERRY_REWRITE_PLANNED] = {"PLANNED", TO(BUILD) | TO(DONE) | FAIL, false}, /* DONE: no match */
    [FERRY_REWRITE_BUILD] = {"BUILD", TO(SWAP) | FAIL, false},
    [FERRY_REWRITE_SWAP] = {"SWAP", TO(TIER) | FAIL, false},
    [FERRY_REWRITE_TIER] = {"TIER", TO(RECORD) | FAIL, false},
    [FERRY_REWRITE_RECORD] = {"RECORD", TO(DONE) | FAIL, false},
    [FERRY_REWRITE_DONE] = {"DONE", TO(PLANNED), true},
    [FERRY_REWRITE_FAILED] = {"FAILED", TO(PLANNED), true},
};
#undef FAIL
#undef TO

const ferry_flow_kind ferry_rewrite_flow = {
    .kind = "rewrite",
    .states = rewrite_states,
    .n_states = FERRY_REWRITE_STATE_COUNT,
    .start = FERRY_REWRITE_PLANNED,
    .failed = FERRY_REWRITE_FAILED,
    .crash_before = "FERRY_TEST_REWRITE_CRASH_BEFORE",
    .crash_after = "FERRY_TEST_REWRITE_CRASH_AFTER",
};

const char *ferry_rewrite_state_name(enum ferry_rewrite_state s)
{
    return ferry_flow_state_name(&ferry_rewrite_flow, (int)s);
}

int ferry_rewrite_state_parse(const char *name, enum ferry_rewrite_state *out, ferry_err *err)
{
    int s = ferry_flow_state_parse(&ferry_rewrite_flow, name);
    if (s >= 0) {
        *out = (enum ferry_rewrite_state)s;
        return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_EINVAL, "unknown rewrite state '%s'", name);
}

int rw_sql(ferry_fleet_server *srv, const char *sql, ferry_ch_rows *rows, ferry_err *err)
{
    ferry_buf out = FERRY_BUF_INIT;
    int rc = ferry_guarded_exec(srv->ch, sql, &out, err);
    if (rc) {
        ferry_buf_free(&out);
        return ferry_err_prefix(err, "%s: ", srv->name);
    }
    if (!rows) {
        ferry_buf_free(&out);
        return FERRY_OK;
    }
    memset(rows, 0, sizeof *rows);
    if (!out.len) {
        ferry_buf_free(&out);
        return FERRY_OK;
    }
    rc = ferry_ch_rows_parse(out.data, out.len, rows, err); /* takes the buffer */
    return rc;
}

void rw_qualified(ferry_buf *b, const char *db, const char *table)
{
    ferry_buf_printf(b, "`%s`.`%s`", db, table);
}

void rw_match_sql(ferry_buf *b, const char *mode, const char *expr, const char *where)
{
    ferry_buf_printf(b, "coalesce((%s), 0)", rw_text(!strcmp(mode, "update") ? where : expr));
}

int rw_journal(rw_ctx *x, rw_job *j, enum ferry_rewrite_state to, const char *detail,
               ferry_err *err)
{
    ferry_job *jb = &j->rec.u.job;
    char *text = NULL;
    int rc = rw_state_encode(&j->st, &text, err);
    if (rc)
        return ferry_err_prefix(err, "job %s: ", jb->id);
    size_t tlen = strlen(text);
    if (tlen >= FERRY_JOB_DATA_MAX)
        rc = ferry_err_set(err, FERRY_EINVAL, "job %s: its journal (%zu bytes with the "
                           "expression and the partition's parts) exceeds %d bytes; use a "
                           "shorter expression", jb->id, tlen, FERRY_JOB_DATA_MAX - 1);
    else if (!ferry_flow_job_stored(&j->rec) || to == FERRY_REWRITE_PLANNED)
        rc = ferry_flow_create(&x->journal, &j->rec, text, err); /* new, or a finished one */
    else if (to == j->state)
        rc = ferry_flow_note(&x->journal, &j->rec, detail, text, err);
    else
        rc = ferry_flow_advance(&x->journal, &j->rec, (int)to, detail, text, err);
    free(text);
    if (!rc)
        j->state = to;
    return rc;
}

/* ---- the partition's parts ------------------------------------------------------------------ */

typedef struct rw_parts {
    size_t n, cold, hot;
    uint64_t rows;
    char digest[17]; /* xxh3 of the sorted names, hex */
} rw_parts;

/* The active parts with rows of partition pid of db.table; list (may be NULL; empty before the
 * call) gets their names, which the caller frees with rw_names_free, also on an error. */
static int parts_named(ferry_fleet_server *srv, const char *db, const char *table,
                       const char *pid, rw_parts *out, rw_names *list, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, names = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    memset(out, 0, sizeof *out);
    ferry_buf_puts(&sql, "SELECT name, rows, disk_name IN (SELECT name FROM system.disks WHERE "
                         "is_remote) FROM system.parts WHERE active AND rows > 0 AND database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, " ORDER BY name FORMAT TabSeparated");
    int rc = rw_sql(srv, ferry_buf_cstr(&sql), &rows, err);
    for (size_t i = 0; !rc && i < rows.n_rows && rows.n_cols == 3; i++) {
        uint64_t r = 0;
        ferry_parse_u64(ferry_ch_rows_get(&rows, i, 1), &r);
        out->n++;
        out->rows += r;
        if (!strcmp(ferry_ch_rows_get(&rows, i, 2), "1"))
            out->cold++;
        else
            out->hot++;
        ferry_buf_puts(&names, ferry_ch_rows_get(&rows, i, 0));
        ferry_buf_puts(&names, "\n");
        if (list)
            rc = rw_names_add(list, ferry_ch_rows_get(&rows, i, 0), err);
    }
    snprintf(out->digest, sizeof out->digest, "%016llx",
             (unsigned long long)XXH3_64bits(names.data ? names.data : "", names.len));
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    ferry_buf_free(&names);
    return rc;
}

/* The active parts with rows of partition pid of db.table. */
static int parts_of(ferry_fleet_server *srv, const char *db, const char *table, const char *pid,
                    rw_parts *out, ferry_err *err)
{
    return parts_named(srv, db, table, pid, out, NULL, err);
}

/* Whether db.table exists on the server, and its storage policy. */
static int table_policy(ferry_fleet_server *srv, const char *db, const char *table, bool *exists,
                        char *policy, size_t policysz, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT storage_policy FROM system.tables WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND name = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    int rc = rw_sql(srv, ferry_buf_cstr(&sql), &rows, err);
    *exists = !rc && rows.n_rows == 1;
    snprintf(policy, policysz, "%s", *exists ? ferry_ch_rows_get(&rows, 0, 0) : "");
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* Empties the job's partition of the build table: its parts (hot, written by BUILD) detached,
 * then the detached folders removed by the agent (a plain file removal, never a DROP). */
static int empty_build(rw_job *j, ferry_err *err)
{
    ferry_fleet_server *srv = j->srv;
    const char *db = j->st.db, *pid = j->st.pid;
    bool exists = false;
    char policy[FERRY_NAME_MAX];
    int rc = table_policy(srv, db, j->build, &exists, policy, sizeof policy, err);
    if (rc || !exists)
        return rc;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    rw_parts p;
    if ((rc = parts_of(srv, db, j->build, pid, &p, err)))
        goto out;
    if (p.n) {
        ferry_buf_puts(&sql, "ALTER TABLE ");
        rw_qualified(&sql, db, j->build);
        ferry_buf_puts(&sql, " DETACH PARTITION ID ");
        ferry_sql_quote(pid, &sql);
        if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), NULL, err)))
            goto out;
        ferry_buf_reset(&sql);
    }
    ferry_buf_puts(&sql, "SELECT name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(j->build, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), &rows, err)) || !rows.n_rows)
        goto out;
    const char **names = calloc(rows.n_rows + 1, sizeof *names);
    for (size_t i = 0; names && i < rows.n_rows; i++)
        names[i] = ferry_ch_rows_get(&rows, i, 0);
    rc = names ? ferry_agent_remove_detached_n(srv->agent, db, j->build, names, rows.n_rows, NULL,
                                               err)
               : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    free(names);
    if (rc)
        ferry_err_prefix(err, "%s: agent remove-detached of the build table: ", srv->name);
out:
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

void rw_job_fail(rw_ctx *x, rw_job *j, int rc, const ferry_err *err)
{
    j->rc = rc;
    j->err = *err;
    j->out = true;
    ferry_err e2 = {0};
    FLOG_WARN("msg=\"rewrite job failed\" job=%s state=%s err=\"%s\"", j->rec.u.job.id,
              ferry_rewrite_state_name(j->state), err->msg);
    if (rc == FERRY_ECONFLICT && strstr(err->msg, "another worker"))
        return; /* not ours any more */
    if (j->state <= FERRY_REWRITE_SWAP && !j->st.swapped) {
        if (empty_build(j, &e2))
            FLOG_WARN("msg=\"rewrite rollback: build partition not emptied\" job=%s err=\"%s\"",
                      j->rec.u.job.id, e2.msg);
        if (ferry_flow_job_stored(&j->rec))
            rw_journal(x, j, FERRY_REWRITE_FAILED, err->msg, &e2);
    } else if (ferry_flow_job_stored(&j->rec)) {
        rw_journal(x, j, j->state, err->msg, &e2); /* stays: the next run resumes it */
    }
}

/* ---- BUILD ---------------------------------------------------------------------------------- */

/* Whether key (an object key of a catalog record, relative to the bucket or the store) is the
 * object remote names (a bucket-relative key, or a local blob store's absolute path). */
static bool same_object(const char *remote, const char *key)
{
    size_t rl = strlen(remote), kl = strlen(key);
    return rl == kl ? !strcmp(remote, key)
                    : rl > kl && remote[rl - kl - 1] == '/' && !strcmp(remote + rl - kl, key);
}

/* Every active part of the partition must read objects ferry recorded for this server: a cold
 * part whose files name only objects of ClickHouse's own (moved to the cold disk or merged there
 * by ClickHouse: pointer files with ref_count 0) would have them deleted by ClickHouse once the
 * swap replaces it, and a clone may have copied its pointer files to another replica. The files
 * of each part come from system.remote_data_paths (one read of the cold disk's metadata). */
static int check_ferry_objects(ferry_fleet_server *srv, const char *db, const char *table,
                               const char *pid, const ferry_record_list *records, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT p.name, r.remote_path FROM (SELECT name, path FROM system.parts "
                         "WHERE active AND rows > 0 AND database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, ") AS p LEFT JOIN (SELECT remote_path, concat(path, arrayStringConcat("
                         "arrayPopBack(splitByChar('/', local_path)), '/'), '/') AS dir FROM "
                         "system.remote_data_paths) AS r ON r.dir = p.path ORDER BY p.name "
                         "FORMAT TabSeparated");
    int rc = rw_sql(srv, ferry_buf_cstr(&sql), &rows, err);
    const char *bad = NULL;
    for (size_t i = 0; !rc && i < rows.n_rows && rows.n_cols == 2 && !bad;) {
        const char *part = ferry_ch_rows_get(&rows, i, 0);
        bool known = false;
        for (; i < rows.n_rows && !strcmp(ferry_ch_rows_get(&rows, i, 0), part); i++) {
            const char *remote = ferry_ch_rows_get(&rows, i, 1);
            for (size_t k = 0; !known && *remote && k < records->n; k++) {
                const ferry_part *pt = &records->items[k].u.part;
                if (!ferry_list_has(pt->servers, srv->name))
                    continue;
                for (size_t o = 0; !known && o < pt->n_objects; o++)
                    known = same_object(remote, pt->objects[o].key);
            }
        }
        if (!known)
            bad = part;
    }
    if (!rc && (bad || !rows.n_rows))
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: part %s of partition %s of %s.%s reads no "
                           "object ferry recorded for this server (moved to the cold disk or "
                           "merged there by ClickHouse itself): replacing it would let "
                           "ClickHouse delete its objects; the rewrite works on partitions "
                           "tiered by ferry", srv->name, bad ? bad : "(none)", pid, db, table);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* PLANNED -> BUILD: the partition must be cold and tiered by ferry (its parts' objects recorded
 * in the catalog for this server: ClickHouse's own cold parts would have their objects deleted by
 * ClickHouse once replaced); the rows are counted again, the source parts and the old catalog
 * records journaled. */
static int plan_source(rw_ctx *x, rw_job *j, ferry_err *err)
{
    ferry_fleet_server *srv = j->srv;
    const char *db = j->st.db, *table = j->st.table, *pid = j->st.pid;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_record_list l = {0};
    rw_parts p;
    int rc = parts_of(srv, db, table, pid, &p, err);
    if (rc)
        goto out;
    if (!p.n || p.hot) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: partition %s of %s.%s %s; rewrite works on "
                           "cold partitions (run ferry tier first: it tiers late rows too)",
                           srv->name, pid, db, table, p.n ? "has parts on the hot disk"
                                                          : "has no rows");
        goto out;
    }
    ferry_buf_puts(&sql, "SELECT count(), countIf(");
    rw_match_sql(&sql, j->st.mode, j->st.expr, j->st.where);
    ferry_buf_puts(&sql, ") FROM ");
    rw_qualified(&sql, db, table);
    ferry_buf_puts(&sql, " WHERE _partition_id = ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), &rows, err)))
        goto out;
    uint64_t total = 0, matched = 0;
    if (rows.n_rows != 1 || rows.n_cols != 2 ||
        !ferry_parse_u64(ferry_ch_rows_get(&rows, 0, 0), &total) ||
        !ferry_parse_u64(ferry_ch_rows_get(&rows, 0, 1), &matched)) {
        rc = ferry_err_set(err, FERRY_EREMOTE, "%s: unexpected answer counting partition %s",
                           srv->name, pid);
        goto out;
    }
    bool del = !strcmp(j->st.mode, "delete");
    rw_state *st = &j->st;
    st->rows_before = total;
    st->rows_matched = matched;
    st->rows_after = del ? total - matched : total;
    st->has_rows_before = st->has_rows_matched = st->has_rows_after = true;
    snprintf(st->src, sizeof st->src, "%s", p.digest);
    st->src_n = p.n;
    st->has_src_n = true;
    const char *prefix[2] = {st->table, pid}; /* tiering's key: the server table */
    if ((rc = ferry_catalog_list(x->fl->cat, FERRY_REC_PART, prefix, 2, &l, err)))
        goto out;
    rw_names_free(&st->old);
    st->has_old = true; /* also when no record lists the server */
    for (size_t i = 0; i < l.n && !rc; i++) {
        const ferry_part *pt = &l.items[i].u.part;
        if (!ferry_list_has(pt->servers, srv->name))
            continue;
        char key[2 * FERRY_NAME_MAX + 2];
        snprintf(key, sizeof key, "%s/%s", pt->origin, pt->name);
        rc = rw_names_add(&st->old, key, err);
    }
    if (!rc)
        rc = check_ferry_objects(srv, db, table, pid, &l, err);
out:
    ferry_record_list_free(&l);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

int rw_step_build(rw_ctx *x, rw_job *j, ferry_err *err)
{
    ferry_fleet_server *srv = j->srv;
    const char *db = j->st.db, *table = j->st.table, *pid = j->st.pid;
    ferry_buf sql = FERRY_BUF_INIT;
    int rc = FERRY_OK;
    if (j->state == FERRY_REWRITE_PLANNED) {
        if ((rc = plan_source(x, j, err)))
            goto out;
        if (!j->st.rows_matched) { /* changed since it was planned: nothing to do */
            rc = rw_journal(x, j, FERRY_REWRITE_DONE, "no row matches", err);
            j->out = true;
            goto out;
        }
        if ((rc = rw_journal(x, j, FERRY_REWRITE_BUILD, NULL, err)))
            goto out;
    }
    /* the build table: AS the table (REPLACE PARTITION needs the same structure and policy) */
    bool exists = false;
    char pol_t[FERRY_NAME_MAX], pol_b[FERRY_NAME_MAX];
    if ((rc = table_policy(srv, db, table, &exists, pol_t, sizeof pol_t, err)))
        goto out;
    if (!exists) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s: table %s.%s is gone", srv->name, db, table);
        goto out;
    }
    ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
    rw_qualified(&sql, db, j->build);
    ferry_buf_puts(&sql, " AS ");
    rw_qualified(&sql, db, table);
    if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), NULL, err)) ||
        (rc = table_policy(srv, db, j->build, &exists, pol_b, sizeof pol_b, err)))
        goto out;
    if (strcmp(pol_t, pol_b)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: the build table %s.%s has storage policy '%s' "
                           "but %s has '%s' (REPLACE PARTITION needs the same); rename the build "
                           "table away", srv->name, db, j->build, pol_b, table, pol_t);
        goto out;
    }
    if ((rc = empty_build(j, err)))
        goto out;
    /* the corrected partition, on the hot disk (new parts go to the policy's first volume) */
    bool upd = rw_state_is_update(&j->st);
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "INSERT INTO ");
    rw_qualified(&sql, db, j->build);
    ferry_buf_puts(&sql, " SELECT *");
    if (upd) {
        ferry_buf_printf(&sql, " REPLACE (if(coalesce((%s), 0), (%s), `%s`) AS `%s`)",
                         rw_text(j->st.where), rw_text(j->st.expr), j->st.col, j->st.col);
    }
    ferry_buf_puts(&sql, " FROM ");
    rw_qualified(&sql, db, table);
    ferry_buf_puts(&sql, " WHERE _partition_id = ");
    ferry_sql_quote(pid, &sql);
    if (!upd)
        ferry_buf_printf(&sql, " AND NOT coalesce((%s), 0)", rw_text(j->st.expr));
    /* a retried INSERT must not be dropped as a duplicate of the first one */
    ferry_buf_puts(&sql, " SETTINGS insert_deduplicate = 0");
    if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), NULL, err)))
        goto out;
    ferry_fault_point("FERRY_TEST_REWRITE_CRASH_AFTER", "INSERTED");
    rw_parts b;
    if ((rc = parts_of(srv, db, j->build, pid, &b, err)))
        goto out;
    if (b.n > 1) {
        /* one part, merged here on the hot disk: several cold parts of one partition would be
         * merged by ClickHouse on the object disk later (its own new objects, ferry's records
         * left naming parts the server no longer holds) */
        ferry_buf_reset(&sql);
        ferry_buf_puts(&sql, "OPTIMIZE TABLE ");
        rw_qualified(&sql, db, j->build);
        ferry_buf_puts(&sql, " PARTITION ID ");
        ferry_sql_quote(pid, &sql);
        ferry_buf_puts(&sql, " FINAL SETTINGS optimize_throw_if_noop = 1");
        if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), NULL, err)) ||
            (rc = parts_of(srv, db, j->build, pid, &b, err)))
            goto out;
    }
    if (b.rows != j->st.rows_after || b.cold) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: the build of partition %s holds %" PRIu64
                           " rows (%zu parts on object storage) but must hold %" PRIu64 " on the "
                           "hot disk (did the update change a partition column, or the rows "
                           "change meanwhile?)", srv->name, pid, b.rows, b.cold,
                           j->st.rows_after);
        goto out;
    }
    rc = rw_journal(x, j, FERRY_REWRITE_SWAP, NULL, err);
out:
    ferry_buf_free(&sql);
    return rc;
}

/* ---- SWAP ----------------------------------------------------------------------------------- */

/* Whether the server's REPLACE PARTITION keeps the parts it replaced for a restart to load again
 * (ferry_ch_replace_keeps_replaced: before 26.7); a version that cannot be told counts as such. */
static int replace_unsafe(ferry_fleet_server *srv, bool *unsafe, ferry_err *err)
{
    ferry_ch_rows rows = {0};
    ferry_ch_version v;
    ferry_err perr = {0};
    *unsafe = true;
    int rc = rw_sql(srv, "SELECT version() FORMAT TabSeparated", &rows, err);
    if (!rc && rows.n_rows == 1 && rows.n_cols >= 1 &&
        !ferry_ch_parse_version(ferry_ch_rows_get(&rows, 0, 0), &v, &perr))
        *unsafe = ferry_ch_replace_keeps_replaced(&v);
    ferry_ch_rows_free(&rows);
    return rc;
}

/* The swap's attach form, for a server whose REPLACE PARTITION is not crash-safe: DETACH PART of
 * each part of detach (source parts still active), then, when attach, ATTACH PARTITION pid FROM
 * the build (hard links; the build keeps its parts until empty_build). DETACH moves a cold part's
 * pointer files to detached/ and deletes no object. Not atomic for readers: a read in between
 * sees the partition without its rows. Safe to repeat (rw_step_swap): a resumed job detaches the
 * source parts still active and attaches once no other part is there. */
static int swap_attach(rw_job *j, const rw_names *detach, bool attach, ferry_err *err)
{
    const char *db = j->st.db, *pid = j->st.pid;
    ferry_buf sql = FERRY_BUF_INIT;
    size_t k = 0;
    ferry_buf_puts(&sql, "ALTER TABLE ");
    rw_qualified(&sql, db, j->st.table);
    for (size_t i = 0; i < detach->n; i++) {
        ferry_buf_puts(&sql, k++ ? ", DETACH PART " : " DETACH PART ");
        ferry_sql_quote(detach->v[i], &sql);
    }
    if (attach) {
        ferry_buf_puts(&sql, k++ ? ", ATTACH PARTITION ID " : " ATTACH PARTITION ID ");
        ferry_sql_quote(pid, &sql);
        ferry_buf_puts(&sql, " FROM ");
        rw_qualified(&sql, db, j->build);
    }
    int rc = k ? rw_sql(j->srv, ferry_buf_cstr(&sql), NULL, err) : FERRY_OK;
    ferry_buf_free(&sql);
    return rc;
}

/* Removes the source parts the attach form left in detached/: their pointer files only, by the
 * agent; the objects stay for the sweep, once RECORD has taken the server off their records. */
static int remove_detached_sources(rw_job *j, ferry_err *err)
{
    ferry_fleet_server *srv = j->srv;
    const char *db = j->st.db, *table = j->st.table;
    const char **gone = NULL;
    size_t n_gone = 0;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    int rc = FERRY_OK;
    ferry_buf_puts(&sql, "SELECT name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(j->st.pid, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    if ((rc = rw_sql(srv, ferry_buf_cstr(&sql), &rows, err)))
        goto out;
    if (!(gone = calloc(rows.n_rows + 1, sizeof *gone))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < rows.n_rows; i++)
        if (rw_names_has(&j->st.src_parts, ferry_ch_rows_get(&rows, i, 0)))
            gone[n_gone++] = ferry_ch_rows_get(&rows, i, 0);
    if (!n_gone)
        goto out;
    rc = ferry_agent_remove_detached_n(srv->agent, db, table, gone, n_gone, NULL, err);
    if (rc)
        ferry_err_prefix(err, "%s: agent remove-detached of the replaced parts: ", srv->name);
out:
    free(gone);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

int rw_step_swap(rw_ctx *x, rw_job *j, ferry_err *err)
{
    ferry_fleet_server *srv = j->srv;
    const char *db = j->st.db, *table = j->st.table, *pid = j->st.pid;
    rw_state *st = &j->st;
    uint64_t after = st->rows_after;
    ferry_buf sql = FERRY_BUF_INIT;
    rw_names names = {0}, detach = {0};
    rw_parts cur, b;
    int rc = parts_named(srv, db, table, pid, &cur, &names, err);
    if (rc)
        goto out;
    bool source = cur.n == st->src_n && !cur.hot && !strcmp(cur.digest, st->src);
    if (source) {
        if ((rc = parts_of(srv, db, j->build, pid, &b, err)))
            goto out;
        if (b.rows != after || b.cold) {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: the build of partition %s no longer holds "
                               "the %" PRIu64 " rebuilt rows; run the rewrite again", srv->name,
                               pid, after);
            goto out;
        }
        bool unsafe = true;
        if ((rc = replace_unsafe(srv, &unsafe, err)))
            goto out;
        st->swapped = st->has_swapped = true;
        snprintf(st->swap, sizeof st->swap, "%s", unsafe ? "attach" : "replace");
        if (unsafe) { /* the names the attach form detaches, for a resumed job */
            rw_names_free(&st->src_parts);
            st->src_parts = names;
            st->has_src_parts = true;
            memset(&names, 0, sizeof names); /* moved */
        }
        if ((rc = rw_journal(x, j, FERRY_REWRITE_SWAP, NULL, err)))
            goto out;
        ferry_fault_point("FERRY_TEST_REWRITE_CRASH_AFTER", "SWAP_JOURNALED");
        if (unsafe) {
            FLOG_INFO("msg=\"ClickHouse before 26.7: the rewrite swaps by DETACH PART and ATTACH, "
                      "no REPLACE PARTITION (a restart would load the replaced parts again)\" "
                      "server=%s pid=%s", srv->name, pid);
            rc = swap_attach(j, &st->src_parts, after > 0, err);
        } else {
            ferry_buf_puts(&sql, "ALTER TABLE ");
            rw_qualified(&sql, db, table);
            ferry_buf_puts(&sql, " REPLACE PARTITION ID ");
            ferry_sql_quote(pid, &sql);
            ferry_buf_puts(&sql, " FROM ");
            rw_qualified(&sql, db, j->build);
            if (!after) /* every row erased: the partition becomes empty */
                ferry_buf_puts(&sql, " SETTINGS allow_replace_partition_from_empty_source = 1");
            rc = rw_sql(srv, ferry_buf_cstr(&sql), NULL, err);
        }
        if (rc)
            goto out;
        ferry_fault_point("FERRY_TEST_REWRITE_CRASH_AFTER", "REPLACED");
        if ((rc = parts_of(srv, db, table, pid, &cur, err)))
            goto out;
    } else if (st->swapped && !strcmp(st->swap, "attach")) {
        /* resumed inside the attach form (stopped between its DETACH PARTs and its ATTACH): the
         * source parts still active go, and the build is attached unless something else (the
         * rebuilt parts) is there already */
        size_t others = 0;
        for (size_t i = 0; i < names.n && !rc; i++) {
            if (rw_names_has(&st->src_parts, names.v[i]))
                rc = rw_names_add(&detach, names.v[i], err);
            else
                others++;
        }
        if (rc)
            goto out;
        bool attach = after > 0 && others == 0;
        if (detach.n || attach) {
            FLOG_INFO("msg=\"rewrite: resuming the attach form of the swap\" server=%s pid=%s "
                      "detach=%zu attach=%d", srv->name, pid, detach.n, attach);
            if ((rc = swap_attach(j, &detach, attach, err)) ||
                (rc = parts_of(srv, db, table, pid, &cur, err)))
                goto out;
        }
    }
    if (cur.cold || cur.rows != after) {
        bool swapped = st->swapped;
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: partition %s of %s.%s %s (%zu parts, %zu on "
                           "object storage, %" PRIu64 " rows; the rebuilt one has %" PRIu64 ")%s",
                           srv->name, pid, db, table,
                           swapped ? "is not the rebuilt partition after the swap"
                                   : "changed since the rewrite began (late rows or a merge)",
                           cur.n, cur.cold, cur.rows, after,
                           swapped ? "; look at the partition, then run the rewrite again"
                                   : "; nothing was swapped, run the rewrite again");
        goto out;
    }
    if (!st->swapped) {
        /* resumed with nothing swapped but no source either: only a rebuilt partition counts */
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: partition %s no longer holds its source "
                           "parts, and the swap was never journaled", srv->name, pid);
        goto out;
    }
    if (!strcmp(st->swap, "attach") && (rc = remove_detached_sources(j, err)))
        goto out;
    if ((rc = empty_build(j, err)))
        goto out;
    rc = rw_journal(x, j, FERRY_REWRITE_TIER, NULL, err);
out:
    rw_names_free(&names);
    rw_names_free(&detach);
    ferry_buf_free(&sql);
    return rc;
}

/* ---- TIER ----------------------------------------------------------------------------------- */

int rw_step_tier(rw_ctx *x, rw_job **js, size_t n, ferry_err *err)
{
    const char **pids = calloc(n ? n : 1, sizeof *pids);
    json_t *report = NULL;
    ferry_err terr = {0};
    int trc = FERRY_OK;
    size_t np = 0;
    if (!pids)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (js[i]->st.rows_after)
            pids[np++] = js[i]->st.pid;
    if (np) {
        ferry_tier_options o = {0};
        o.config_path = x->opt->config_path;
        o.server = js[0]->srv->name;
        o.table = js[0]->st.catalog_table;
        o.older_than = 1; /* any finished day: the partition was cold before the rewrite */
        o.owner = x->owner;
        o.partition_ids = pids;
        o.n_partition_ids = np;
        o.atomic_swap = true; /* as the rewrite's own swap: readers see old or new */
        trc = ferry_tier_run(&o, &report, &terr);
        json_decref(report);
    }
    for (size_t i = 0; i < n; i++) {
        rw_job *j = js[i];
        rw_parts cur;
        int rc = parts_of(j->srv, j->st.db, j->st.table, j->st.pid, &cur, err);
        if (!rc && (cur.hot || cur.rows != j->st.rows_after))
            rc = trc ? (*err = terr, ferry_err_prefix(err, "tiering the rebuilt partition: "), trc)
                     : ferry_err_set(err, FERRY_EINVAL, "%s: partition %s is not cold after the "
                                     "tiering run (%zu hot parts, %" PRIu64 " rows); run the "
                                     "rewrite again", j->srv->name, j->st.pid, cur.hot,
                                     cur.rows);
        if (!rc)
            rc = rw_journal(x, j, FERRY_REWRITE_RECORD, NULL, err);
        if (rc)
            rw_job_fail(x, j, rc, err);
    }
    free(pids);
    return FERRY_OK;
}

/* ---- RECORD --------------------------------------------------------------------------------- */

static bool in_old(const rw_names *old, const ferry_part *p)
{
    char key[2 * FERRY_NAME_MAX + 2];
    snprintf(key, sizeof key, "%s/%s", p->origin, p->name);
    return rw_names_has(old, key);
}

int rw_step_record(rw_ctx *x, rw_job *j, ferry_err *err)
{
    const char *server = j->srv->name, *pid = j->st.pid;
    const rw_names *old = &j->st.old;
    int rc = FERRY_OK;
    for (int attempt = 0; attempt < CAS_TRIES; attempt++) {
        ferry_record_list l = {0};
        const char *prefix[2] = {j->st.table, pid}; /* tiering's key: the server table */
        if ((rc = ferry_catalog_list(x->fl->cat, FERRY_REC_PART, prefix, 2, &l, err)))
            return rc;
        ferry_batch *b = ferry_batch_new();
        if (!b)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        for (size_t k = 0; !rc && k < l.n; k++) {
            ferry_part *p = &l.items[k].u.part;
            if (!in_old(old, p) || !ferry_list_has(p->servers, server))
                continue;
            ferry_list_remove(p->servers, server);
            /* a record no server lists any more goes: its objects become orphans, which the
             * sweep deletes once no pointer file names them (the replaced parts' folders stay
             * until ClickHouse removes them) */
            rc = p->servers[0] ? ferry_batch_update(b, &l.items[k], err)
                               : ferry_batch_delete(b, &l.items[k], err);
        }
        if (!rc && !j->st.rows_after) { /* the partition is gone from this server */
            ferry_record pr;
            ferry_record_init(&pr, FERRY_REC_PARTITION);
            snprintf(pr.u.partition.server, sizeof pr.u.partition.server, "%s", server);
            snprintf(pr.u.partition.table, sizeof pr.u.partition.table, "%s", j->st.table);
            snprintf(pr.u.partition.partition_id, sizeof pr.u.partition.partition_id, "%s", pid);
            int g = ferry_catalog_get(x->fl->cat, &pr, err);
            if (g == FERRY_ENOTFOUND)
                ferry_err_clear(err);
            else
                rc = g ? g : ferry_batch_delete(b, &pr, err);
        }
        if (!rc && ferry_batch_size(b))
            rc = ferry_catalog_commit(x->fl->cat, b, NULL, err);
        ferry_batch_free(b);
        ferry_record_list_free(&l);
        if (rc != FERRY_ECONFLICT)
            break;
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    if (rc)
        return rc;
    char detail[128];
    snprintf(detail, sizeof detail, "%" PRIu64 " rows %s", j->st.rows_matched,
             rw_state_is_update(&j->st) ? "updated" : "erased");
    j->out = true;
    return rw_journal(x, j, FERRY_REWRITE_DONE, detail, err);
}
