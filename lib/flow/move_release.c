/* CLEANUP's release of a move's source, and of a dropped replica (replica_sync.c,
 * rs_remove_slice): emptying the slice's partitions of the table on the server that gives it up.
 *
 * DETACH PARTITION clones every file of every part into detached/ (ClickHouse rewrites each
 * pointer file's ref_count to hard-link it) before the agent removes the folders: about 1 s for
 * 40 cold parts (docs/benchmarks.md, "Session 29"). REPLACE PARTITION ... FROM ferry's empty
 * twin table marks the parts outdated instead, and the server's cleanup thread removes them
 * later, one hard link at a time: about 50 ms for the same parts. That later removal deletes a
 * pointer file's objects when the file's ref_count is 0 (the last link of a part ClickHouse wrote
 * itself), and the target now references those objects. So a partition goes this way only when
 * every active part of it is either on a local disk or a pointer part whose every file counts
 * more references than ClickHouse's own links (ref_count >= links: the owner outside the server
 * that ferry's agent writes, docs/agent.md), as the source's agent reads them now; and only on
 * a server whose REPLACE does not bring replaced parts back at a restart (26.7 and later), with
 * objects writable by ClickHouse (not the read-only access mode), and a twin that holds no part.
 * A cold part ClickHouse wrote itself (ref_count below its links) is first pinned by the source's
 * agent (API 4, lib/agent/pin.c): its counts raised to its links and synced, then read back; a
 * part the agent does not report held keeps its partition out. Pinned, the part's objects are
 * ferry's to delete once nothing names them (the sweep), as those of every part ferry wrote.
 * Everything else, and whatever a failed REPLACE left, is detached as before by the caller. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ferry/agent_ops.h"
#include "ferry/buf.h"
#include "ferry/partition.h"
#include "ferry/clickhouse.h"
#include "ferry/log.h"
#include "ferry/testknob.h"
#include "ferry/tier.h"
#include "flow/move_env.h"
#include "flow/move_run.h"

/* The table's cold parts above this many are not read file by file (one `pointers` request
 * lists the whole table's folder): such a table is detached as before. */
#define MV_RELEASE_COLD_PARTS_MAX 4096

static ssize_t pid_index(const mv_pids *pids, const char *pid)
{
    for (size_t k = 0; k < pids->n; k++)
        if (!strcmp(pids->ids[k], pid))
            return (ssize_t)k;
    return -1;
}

/* ok[k] (k over pids) true when partition k may be emptied by REPLACE (see the file comment).
 * Any doubt (a listing that fails, a file the agent cannot read, parts on two cold disks, too
 * many cold parts) leaves ok false: the caller detaches those. */
static void replaceable(mv_conn *c, const char *flow, const char *id_kv,
                        const ferry_table_def *t, const mv_pids *pids, bool *ok)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows parts = {0}, disks = {0};
    ferry_agent_pointer_list pl = {0};
    ferry_err err = {0};
    const char **pin = NULL; /* cold parts to pin (names borrowed from parts) */
    size_t *pin_k = NULL, n_pin = 0; /* and their partitions' indexes in pids */
    char under[4096] = "", disk[FERRY_NAME_MAX] = "";
    for (size_t k = 0; k < pids->n; k++)
        ok[k] = true;
    /* the slice partitions' active parts (partition, part, disk, path, remote), each row with
     * the table's count of cold parts (what one `pointers` request of its folder lists) */
    ferry_buf_puts(&sql, "SELECT partition_id, name, disk_name, path, disk_name IN (SELECT name "
                         "FROM system.disks WHERE is_remote), (SELECT count() FROM system.parts "
                         "WHERE active AND database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(t->name, &sql);
    ferry_buf_puts(&sql, " AND disk_name IN (SELECT name FROM system.disks WHERE is_remote)) "
                         "FROM system.parts WHERE active AND database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(t->name, &sql);
    ferry_buf_puts(&sql, " AND partition_id IN (");
    for (size_t k = 0; k < pids->n; k++) {
        if (k)
            ferry_buf_putc(&sql, ',');
        ferry_sql_quote(pids->ids[k], &sql);
    }
    ferry_buf_putc(&sql, ')');
    if (mv_sql(c, ferry_buf_cstr(&sql), &parts, &err) || parts.n_cols != 6)
        goto none;
    if (parts.n_rows && strtoull(ferry_ch_rows_get(&parts, 0, 5), NULL, 10) >
                            MV_RELEASE_COLD_PARTS_MAX)
        goto none;
    /* the slice's cold parts: one disk, one table folder under its metadata path */
    if (mv_sql(c, "SELECT name, path FROM system.disks WHERE is_remote", &disks, &err))
        goto none;
    for (size_t r = 0; r < parts.n_rows; r++) {
        if (strcmp(ferry_ch_rows_get(&parts, r, 4), "1"))
            continue;
        const char *dn = ferry_ch_rows_get(&parts, r, 2), *path = ferry_ch_rows_get(&parts, r, 3);
        const char *name = ferry_ch_rows_get(&parts, r, 1), *dpath = NULL;
        for (size_t d = 0; d < disks.n_rows; d++)
            if (!strcmp(ferry_ch_rows_get(&disks, d, 0), dn))
                dpath = ferry_ch_rows_get(&disks, d, 1);
        size_t dl = dpath ? strlen(dpath) : 0, path_len = strlen(path), nl = strlen(name);
        /* path = <disk path><table folder>/<part>/ */
        if (!dpath || strncmp(path, dpath, dl) || path_len < dl + nl + 2 ||
            path[path_len - 1] != '/' || strncmp(path + path_len - 1 - nl, name, nl) ||
            path[path_len - 2 - nl] != '/')
            goto none;
        char tdir[4096];
        size_t tl = path_len - 1 - nl - dl;
        if (tl >= sizeof tdir)
            goto none;
        memcpy(tdir, path + dl, tl);
        tdir[tl] = '\0';
        if ((disk[0] && strcmp(disk, dn)) || (under[0] && strcmp(under, tdir)))
            goto none; /* two cold disks or folders: not read here */
        snprintf(disk, sizeof disk, "%s", dn);
        snprintf(under, sizeof under, "%s", tdir);
    }
    if (!under[0])
        goto out; /* no cold part in the slice: every partition qualifies */
    if (ferry_agent_pointers(c->ag, disk, under, &pl, &err) || pl.n_invalid)
        goto none;
    int api = 0;
    ferry_err aerr = {0};
    bool can_pin = !mv_agent_api(c, &api, &aerr) && api >= 4;
    if (!(pin = calloc(parts.n_rows + 1, sizeof *pin)) ||
        !(pin_k = calloc(parts.n_rows + 1, sizeof *pin_k)))
        goto none;
    for (size_t r = 0; r < parts.n_rows; r++) {
        ssize_t k = pid_index(pids, ferry_ch_rows_get(&parts, r, 0));
        if (k < 0 || !ok[k] || strcmp(ferry_ch_rows_get(&parts, r, 4), "1"))
            continue;
        char prefix[4200];
        int plen = snprintf(prefix, sizeof prefix, "%s%s/", under, ferry_ch_rows_get(&parts, r, 1));
        if (plen < 0 || (size_t)plen >= sizeof prefix) {
            ok[k] = false;
            continue;
        }
        size_t files = 0;
        bool below = false; /* a file that counts no owner beyond ClickHouse's links */
        for (size_t f = 0; f < pl.n_files && ok[k]; f++) {
            const ferry_agent_pointer_file *pf = &pl.files[f];
            if (!pf->path || strncmp(pf->path, prefix, (size_t)plen))
                continue;
            files++;
            if (pf->links < 1 || (pf->ref_count < pf->links && pf->read_only))
                ok[k] = false;
            else if (pf->ref_count < pf->links)
                below = true;
        }
        if (!files || (below && !can_pin)) {
            ok[k] = false;
        } else if (below) { /* a part ClickHouse wrote itself: pinned below */
            pin[n_pin] = ferry_ch_rows_get(&parts, r, 1);
            pin_k[n_pin++] = (size_t)k;
        }
    }
    if (n_pin) {
        /* ferry becomes an owner of those parts' objects beside the server (file comment) */
        ferry_agent_pinned pd = {0};
        ferry_err perr = {0};
        size_t held = 0;
        if (ferry_agent_pin(c->ag, disk, under, pin, n_pin, &pd, &perr)) {
            FLOG_WARN("msg=\"%s: the source's own cold parts could not be pinned; they are "
                      "detached\" %s server=%s parts=%zu err=\"%s\"", flow, id_kv, c->name,
                      n_pin, perr.msg);
            for (size_t j = 0; j < n_pin; j++)
                ok[pin_k[j]] = false;
        } else {
            for (size_t j = 0; j < n_pin; j++) {
                if (pd.parts[j].held) {
                    held++;
                    continue;
                }
                ok[pin_k[j]] = false;
                FLOG_WARN("msg=\"%s: one of the source's own cold parts is not held after "
                          "its pin; its partition is detached\" %s server=%s part=%s "
                          "err=\"%s\"", flow, id_kv, c->name, pin[j],
                          pd.parts[j].error ? pd.parts[j].error : "-");
            }
            FLOG_INFO("msg=\"%s: the source's own cold parts pinned\" %s server=%s "
                      "parts=%zu held=%zu files_raised=%lld", flow, id_kv, c->name, n_pin,
                      held, (long long)pd.raised);
        }
        ferry_agent_pinned_free(&pd);
        /* pinned and not yet replaced: a resume finds the counts raised and replaces */
        ferry_fault_point("FERRY_TEST_CRASH_AFTER", "CLEANUP:pinned");
    }
    goto out;
none:
    if (err.code)
        FLOG_INFO("msg=\"%s: the source's parts could not be checked for a release by "
                  "REPLACE; they are detached\" %s server=%s err=\"%s\"", flow, id_kv,
                  c->name, err.msg);
    for (size_t k = 0; k < pids->n; k++)
        ok[k] = false;
out:
    free(pin);
    free(pin_k);
    ferry_agent_pointer_list_free(&pl);
    ferry_ch_rows_free(&parts);
    ferry_ch_rows_free(&disks);
    ferry_buf_free(&sql);
}

size_t mv_release_replace_on(mv_conn *c, const char *flow, const char *id_kv,
                             const ferry_table_def *t, mv_pids *src)
{
    size_t done = 0;
    char twin[FERRY_NAME_MAX + 16];
    ferry_err nerr = {0};
    if (!src->n || c->ro_objects || !mv_replace_crash_safe(c) ||
        ferry_tier_empty_name(t->name, twin, sizeof twin, &nerr) ||
        !mv_twin_ready(c, t->database, t->name, twin, "the source is detached"))
        return 0;
    bool *ok = calloc(src->n, sizeof *ok);
    if (!ok)
        return 0; /* out of memory here: DETACH, which needs none of this */
    replaceable(c, flow, id_kv, t, src, ok);
    ferry_buf sql = FERRY_BUF_INIT;
    size_t n = 0;
    for (size_t k = 0; k < src->n; k++)
        n += ok[k];
    mv_twin_replace_sql(&sql, t->database, t->name, twin, src->ids, ok, src->n);
    if (n) {
        ferry_err serr = {0};
        if (mv_sql(c, ferry_buf_cstr(&sql), NULL, &serr))
            FLOG_WARN("msg=\"%s: releasing the source by REPLACE from the empty twin failed; "
                      "what is left is detached\" %s server=%s table=%s.%s err=\"%s\"", flow,
                      id_kv, c->name, t->database, t->name, serr.msg);
        else
            done = n;
    }
    FLOG_INFO("msg=\"%s: source partitions released\" %s server=%s table=%s.%s "
              "by_replace=%zu to_detach=%zu", flow, id_kv, c->name, t->database, t->name, done,
              src->n - done);
    if (done) { /* src keeps what is left for the caller's DETACH */
        size_t w = 0;
        for (size_t k = 0; k < src->n; k++)
            if (!ok[k])
                memmove(src->ids[w++], src->ids[k], sizeof src->ids[k]);
        src->n = w;
    }
    ferry_buf_free(&sql);
    free(ok);
    return done;
}

size_t mv_release_by_replace(mvctx *x, const ferry_table_def *t, mv_pids *src)
{
    char kv[FERRY_NAME_MAX + 8];
    snprintf(kv, sizeof kv, "move=%s", x->mv.u.move.id);
    return mv_release_replace_on(&x->src, "move", kv, t, src);
}
