/* A tier swap undone when a part it brought in was detached as broken (docs/tiering.md, "A swap
 * broken by a kill -9").
 *
 * The attach swap hard-links staging's pointer parts into the table (ATTACH PARTITION ... FROM),
 * and ClickHouse rewrites each linked pointer file in place to raise its reference count. A
 * kill -9 of the server in the middle leaves the file empty (ClickHouse #113179): at restart the
 * part, in the table and in staging alike (one inode), is set aside as detached/broken-on-start_*
 * and its rows are in neither table. The swap's first half (DETACH PART of the frozen hot parts)
 * has run, so VERIFY finds the partition short and, before this file, stopped the job for a
 * person while those rows stayed out of the table (the ZooKeeper soak of session 32).
 *
 * The frozen hot parts are intact in detached/ under their own names (DETACH PART renames a local
 * part; nothing rewrites it), so the swap is undone: the parts it added that are still active are
 * detached, the frozen parts attached back, the folders of the swap (its detached copies and the
 * broken ones) removed by the agent (local files only: the objects are the job's uploads, which
 * the rollback leaves unrecorded for the sweep), and the job is rolled back (staging emptied,
 * freezes removed, merges started). The next run tiers the partition again.
 *
 * Only a broken folder of the swap's starts it: one in staging (I3: staging holds the job's parts
 * alone), or one in the table whose blocks lie above the partition's highest block before the swap
 * (max_block: ATTACH ... FROM numbers what it adds anew). Another broken folder of the partition
 * is named in the job's error and left alone; a mismatch without a broken folder of the swap's is
 * not explained by one, and stays for a person, as before.
 *
 * Crash safety: the mend is journaled (`mend` in the job's data) before its statement, because
 * ATTACH PART gives a part a new name: once attached, a frozen part is no longer found by its
 * name, and only the journal says that its absence is the mend's doing. Every step looks before it
 * acts, so a resumed mend (or its statement arriving late) does each thing at most once: DETACH
 * PART of a part already detached and ATTACH PART of a folder already attached fail without
 * effect. */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/log.h"
#include "ferry/testknob.h"

/* One folder of detached/ that belongs to the job's partition. */
typedef struct mend_folder {
    bool staging;   /* in the staging table (else the table) */
    bool broken;    /* named broken*: set aside by ClickHouse */
    bool remote;    /* on a disk on object storage */
    bool frozen;    /* a frozen hot part of the job, by its own name (table only) */
    bool swapped;   /* the swap's: broken in staging, or above max_block on a remote disk */
    const char *name; /* borrowed from the listing's rows */
} mend_folder;

typedef struct mend_look {
    ferry_ch_rows rows; /* table, name, remote: the partition's detached folders */
    mend_folder *f;
    size_t n;
    size_t own_broken;  /* broken folders of the swap's */
    size_t other_broken; /* broken folders of the partition that are not */
} mend_look;

static void look_free(mend_look *l)
{
    ferry_ch_rows_free(&l->rows);
    free(l->f);
    memset(l, 0, sizeof *l);
}

/* The block range of a folder of partition pid from its name ([prefix_]<pid>_<min>_<max>_...):
 * system.detached_parts's own parse of a prefixed name is not relied on. False when the name
 * does not hold pid as a whole word followed by two numbers. */
static bool folder_blocks(const char *name, const char *pid, long long *lo, long long *hi)
{
    size_t plen = strlen(pid);
    for (const char *at = strstr(name, pid); at; at = strstr(at + 1, pid)) {
        if ((at != name && at[-1] != '_') || at[plen] != '_')
            continue;
        if (sscanf(at + plen + 1, "%lld_%lld_", lo, hi) == 2)
            return true;
    }
    return false;
}

/* Lists and sorts the detached folders of the job's partition in the table and staging. */
static int look(tier_wave *w, const tier_job *job, mend_look *l, ferry_err *err)
{
    const tier_state *st = &job->st;
    ferry_buf sql = FERRY_BUF_INIT;
    memset(l, 0, sizeof *l);
    ferry_buf_puts(&sql, "SELECT table, name, disk IN (SELECT name FROM system.disks WHERE "
                         "is_remote) FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table IN (");
    ferry_sql_quote(w->table, &sql);
    ferry_buf_puts(&sql, ", ");
    ferry_sql_quote(w->staging, &sql);
    ferry_buf_puts(&sql, ") AND position(name, ");
    ferry_sql_quote(job->pid, &sql);
    ferry_buf_puts(&sql, ") > 0 ORDER BY table, name");
    int rc = mv_sql(&w->srv->conn, ferry_buf_cstr(&sql), &l->rows, err);
    ferry_buf_free(&sql);
    if (!rc && l->rows.n_rows && !(l->f = calloc(l->rows.n_rows, sizeof *l->f)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t r = 0; !rc && r < l->rows.n_rows; r++) {
        const char *table = ferry_ch_rows_get(&l->rows, r, 0);
        const char *name = ferry_ch_rows_get(&l->rows, r, 1);
        long long lo, hi;
        if (!folder_blocks(name, job->pid, &lo, &hi))
            continue; /* another partition's id holds this one's as a substring */
        mend_folder *f = &l->f[l->n++];
        f->name = name;
        f->staging = !strcmp(table, w->staging);
        f->broken = !strncmp(name, "broken", 6);
        f->remote = !strcmp(ferry_ch_rows_get(&l->rows, r, 2), "1");
        f->frozen = !f->staging && tier_state_hot_has(st, name);
        f->swapped = f->staging ? f->broken
                                : !f->frozen && f->remote && st->has_max_block &&
                                      lo > st->max_block;
        if (f->broken && f->swapped)
            l->own_broken++;
        else if (f->broken)
            l->other_broken++;
    }
    return rc;
}

static void name_folders(const tier_wave *w, const mend_look *l, bool swapped, ferry_buf *out)
{
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (!l->f[i].broken || l->f[i].swapped != swapped)
            continue;
        ferry_buf_puts(out, k++ ? ", " : "");
        ferry_buf_puts(out, l->f[i].staging ? w->staging : w->table);
        ferry_buf_puts(out, "/detached/");
        ferry_buf_puts(out, l->f[i].name);
    }
}

/* How many frozen parts of the job are neither active by name (all: the table's active parts)
 * nor in detached/ by name; the first such name goes to *first. */
static size_t frozen_missing(const tier_job *job, const mv_slice *all, const mend_look *l,
                             const char **first)
{
    mv_parts ps = mv_slice_parts(all, job->pid);
    size_t missing = 0;
    *first = NULL;
    for (size_t i = 0; i < job->st.n_hot; i++) {
        const char *name = job->st.hot[i];
        const mv_part *p = mv_parts_find(&ps, name);
        bool found = p && p->active;
        for (size_t k = 0; k < l->n && !found; k++)
            found = l->f[k].frozen && !strcmp(l->f[k].name, name);
        if (!found && !missing++)
            *first = name;
    }
    return missing;
}

/* Runs the mend of a job journaled as mending, from the partition's detached folders as l
 * (look) found them: the statement, the folders' removal, the swap's choice taken back and the
 * job failed (its caller's settle_failures rolls it back). */
static int mend_run(tier_wave *w, tier_job *job, const mv_slice *all, const mend_look *l,
                    ferry_err *err)
{
    tier_state *st = &job->st;
    ferry_buf cmds = FERRY_BUF_INIT, sql = FERRY_BUF_INIT, broken = FERRY_BUF_INIT;
    json_t *in_table = json_array(), *in_staging = json_array();
    size_t ncmds = 0, detached_now = 0, attached = 0;
    int rc = in_table && in_staging ? FERRY_OK
                                    : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc)
        goto out;
    name_folders(w, l, true, &broken);
    /* the swap's parts still active: cold, above max_block (what VERIFY counts as added) */
    mv_parts ps = mv_slice_parts(all, job->pid);
    for (size_t i = 0; i < ps.n; i++) {
        const mv_part *p = &ps.p[i];
        if (!p->active || !p->cold || p->min_block <= st->max_block ||
            tier_state_hot_has(st, p->name))
            continue;
        ferry_buf_puts(&cmds, ncmds++ ? ", DETACH PART " : " DETACH PART ");
        ferry_sql_quote(p->name, &cmds);
        if (json_array_append_new(in_table, json_string(p->name)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        detached_now++;
    }
    /* then the frozen parts back, after the copies left: never a row twice */
    for (size_t i = 0; i < l->n; i++) {
        if (!l->f[i].frozen)
            continue;
        ferry_buf_puts(&cmds, ncmds++ ? ", ATTACH PART " : " ATTACH PART ");
        ferry_sql_quote(l->f[i].name, &cmds);
        attached++;
    }
    if (!rc && ncmds) {
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(w->db, w->table, &sql);
        ferry_buf_puts(&sql, ferry_buf_cstr(&cmds));
        FLOG_INFO("msg=\"tier swap undone: statement\" server=%s sql=\"%s\"", w->srv->shard.name,
                  ferry_buf_cstr(&sql));
        rc = tier_sql(w->srv, ferry_buf_cstr(&sql), NULL, err);
    }
    if (rc)
        goto out;
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "VERIFY:mend-ran");
    /* the swap's folders: its copies just detached, any left by an earlier try, the broken */
    for (size_t i = 0; !rc && i < l->n; i++)
        if (l->f[i].swapped &&
            json_array_append_new(l->f[i].staging ? in_staging : in_table,
                                  json_string(l->f[i].name)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc && json_array_size(in_table))
        rc = tier_agent_remove_detached(w, w->table, in_table, err);
    if (!rc && json_array_size(in_staging))
        rc = tier_agent_remove_detached(w, w->staging, in_staging, err);
    if (rc)
        goto out;
    FLOG_WARN("msg=\"tier swap undone: a part it brought in was detached as broken; the frozen "
              "parts are attached back and the job rolled back\" job=%s server=%s table=%s.%s "
              "partition=%s detached=%zu attached=%zu broken=\"%s\"", job->rec.u.job.id,
              w->srv->shard.name, w->db, w->table, job->pid, detached_now, attached,
              ferry_buf_cstr(&broken));
    ferry_err why = {0};
    ferry_err_set(&why, FERRY_EIO, "%s: tier swap undone for %s.%s partition %s: a part it "
                  "brought in was detached as broken at a restart (%s: a pointer file emptied by "
                  "a kill -9 while ClickHouse rewrote it); the frozen hot parts are attached back, "
                  "the partition is whole and hot, and it is tiered again",
                  w->srv->shard.name, w->db, w->table, job->pid,
                  broken.len ? ferry_buf_cstr(&broken) : "removed by an earlier try");
    st->mend = false;
    tier_state_take_back(st); /* rolled back by the caller (I2 holds again: the table is as
                                 before) */
    tier_job_fail(job, FERRY_EIO, &why);
    job->swap_undone = true;
out:
    json_decref(in_table);
    json_decref(in_staging);
    ferry_buf_free(&cmds);
    ferry_buf_free(&sql);
    ferry_buf_free(&broken);
    return rc;
}

int tier_mend_broken(tier_ctx *ctx, tier_wave *w, tier_job *job, const mv_slice *all,
                     const ferry_err *why, ferry_err *err)
{
    tier_state *st = &job->st;
    mend_look l = {0};
    ferry_buf names = FERRY_BUF_INIT;
    int rc = FERRY_OK;
    assert(!job->rc && !job->moving);
    if (!st->mend && (strcmp(st->swap, "attach") || !st->has_max_block)) {
        assert(why && why->code);
        tier_job_fail(job, why->code, why);
        return FERRY_OK;
    }
    if ((rc = look(w, job, &l, err)))
        goto out;
    if (st->mend) { /* resumed: the journal says the mend began */
        rc = mend_run(w, job, all, &l, err);
        goto out;
    }
    assert(why && why->code);
    const char *missing_name = NULL;
    size_t missing = frozen_missing(job, all, &l, &missing_name);
    if (!l.own_broken || missing) {
        /* not explained by a broken part of the swap's, or not undoable from detached/: for a
         * person, as before, with what was seen */
        ferry_buf msg = FERRY_BUF_INIT;
        ferry_buf_puts(&msg, why->msg);
        name_folders(w, &l, false, &names);
        if (l.other_broken)
            ferry_buf_printf(&msg, "; broken folders of the partition that are not the swap's "
                             "(left alone): %s", ferry_buf_cstr(&names));
        if (l.own_broken && missing)
            ferry_buf_printf(&msg, "; a part the swap brought in is broken, but %zu frozen "
                             "part(s) (%s, ...) are neither active nor in detached/, so the swap "
                             "is not undone", missing, missing_name);
        ferry_err e = {0};
        ferry_err_set(&e, why->code, "%s", ferry_buf_cstr(&msg));
        ferry_buf_free(&msg);
        tier_job_fail(job, why->code, &e);
        goto out;
    }
    st->mend = true;
    if ((rc = tier_journal_detail(ctx, &job, 1, FERRY_TIER_VERIFY, err)))
        goto out;
    ferry_fault_point("FERRY_TEST_CRASH_AFTER", "VERIFY:mend");
    rc = mend_run(w, job, all, &l, err);
out:
    look_free(&l);
    ferry_buf_free(&names);
    return rc;
}
