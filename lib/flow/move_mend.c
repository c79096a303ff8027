/* A move's target with parts of the slice detached as broken, mended before CLEANUP.
 *
 * ClickHouse rewrites a pointer file in place when it changes its reference count (hard-linking
 * it for MOVE PARTITION, unlinking staging's copy after it), and a kill -9 in the middle leaves
 * it empty; at restart the part, in staging or in the table, goes to detached/ as
 * broken-on-start and its rows are on the target nowhere else (seen with
 * tests/integration/move_publish_kill.sh's kill during the publish statement, and in the chaos
 * soak). The source still has every row until CLEANUP, so each partition with such a part is
 * made equal to the source's with the repair's sync (replica_sync.c: the missing parts copied,
 * or the partition replaced by a snapshot of the source's when every target row is also there)
 * and the broken folders are removed (their pointer files only; the objects are the source's,
 * which the catalog's part records follow to the target at CLEANUP). A partition the sync
 * cannot make equal (the target holds rows the source lacks: writes since the switch) stops
 * the move, naming the parts, for a person: the source is never removed while a row of the
 * slice may exist only in a broken folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/agent_ops.h"
#include "ferry/buf.h"
#include "ferry/clickhouse.h"
#include "ferry/log.h"
#include "flow/move_env.h"
#include "flow/move_run.h"
#include "flow/replica_int.h"

typedef struct broken_part {
    char table[FERRY_NAME_MAX + 32], name[FERRY_NAME_MAX * 2];
    const char *pid; /* borrowed from the caller's pids */
} broken_part;

/* The broken folders of the slice's partitions on the target, in the table or its staging
 * table. A folder's partition is read from its name (broken..._<pid>_...), not trusted to
 * system.detached_parts's parse of a prefixed name. *out malloc'ed (the caller frees), *n. */
static int broken_parts(mvctx *x, const ferry_table_def *t, const mv_pids *pids,
                        broken_part **out, size_t *n, ferry_err *err)
{
    char st[FERRY_NAME_MAX + 32];
    mv_staging_name(t->name, st, sizeof st);
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    *out = NULL;
    *n = 0;
    ferry_buf_puts(&sql, "SELECT table, name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table IN (");
    ferry_sql_quote(t->name, &sql);
    ferry_buf_puts(&sql, ", ");
    ferry_sql_quote(st, &sql);
    ferry_buf_puts(&sql, ") AND startsWith(name, 'broken')");
    int rc = mv_sql(&x->dst, ferry_buf_cstr(&sql), &rows, err);
    if (!rc && rows.n_rows && !(*out = calloc(rows.n_rows, sizeof **out)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        const char *name = ferry_ch_rows_get(&rows, r, 1);
        for (size_t k = 0; k < pids->n; k++) {
            const char *at = strstr(name, pids->ids[k]);
            size_t len = strlen(pids->ids[k]);
            if (!at || at == name || at[-1] != '_' || at[len] != '_')
                continue;
            broken_part *b = &(*out)[(*n)++];
            snprintf(b->table, sizeof b->table, "%s", ferry_ch_rows_get(&rows, r, 0));
            snprintf(b->name, sizeof b->name, "%s", name);
            b->pid = pids->ids[k];
            break;
        }
    }
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

static void name_parts(const broken_part *bp, size_t n, ferry_buf *out)
{
    for (size_t r = 0; r < n; r++) {
        ferry_buf_puts(out, r ? ", " : "");
        ferry_buf_puts(out, bp[r].table);
        ferry_buf_puts(out, "/detached/");
        ferry_buf_puts(out, bp[r].name);
    }
}

int mv_target_broken_mend(mvctx *x, const ferry_table_def *t, const mv_pids *pids,
                          ferry_err *err)
{
    broken_part *bp = NULL;
    size_t n = 0;
    ferry_buf names = FERRY_BUF_INIT;
    int rc = pids->n ? broken_parts(x, t, pids, &bp, &n, err) : FERRY_OK;
    if (rc || !n)
        goto out;
    name_parts(bp, n, &names);
    FLOG_WARN("msg=\"move: parts of the slice were detached as broken on the target; their "
              "partitions are made equal to the source's before CLEANUP\" move=%s target=%s "
              "parts=\"%s\"", x->mv.u.move.id, x->dst.name, ferry_buf_cstr(&names));
    unsigned seq = (unsigned)time(NULL) ^ (unsigned)getpid();
    for (size_t r = 0; !rc && r < n; r++) {
        const char *pid = bp[r].pid;
        bool seen = false; /* one sync per partition */
        for (size_t q = 0; q < r && !seen; q++)
            seen = bp[q].pid == pid;
        if (seen)
            continue;
        char freeze[96];
        snprintf(freeze, sizeof freeze, "ferry_mend_%x_%zu", seq, r);
        rs_result rr;
        ferry_err e = {0};
        rc = rs_sync_partition(&x->src, &x->dst, t, pid, freeze, 0, MV_MAX_ROUNDS, false, NULL,
                               &rr, &e);
        if (!rc && !rr.repaired)
            rc = ferry_err_set(err, FERRY_EIO,
                               "move %s: %zu part(s) of the slice were detached as broken on the "
                               "target %s (%s) and partition %s could not be made equal to the "
                               "source's (%s: %s); the source %s still holds every row of the "
                               "slice, so CLEANUP does not run. Rebuild the partition on %s from "
                               "%s's rows, then remove the broken folders and resume with the "
                               "same command",
                               x->mv.u.move.id, n, x->dst.name,
                               ferry_buf_cstr(&names), pid, rr.action, rr.detail, x->src.name,
                               x->dst.name, x->src.name);
        else if (rc)
            *err = e;
        else
            ferry_log(FERRY_LOG_INFO, "msg=\"move: partition mended from the source\" move=%s "
                      "table=%s partition=%s action=%s parts_sent=%zu", x->mv.u.move.id,
                      t->name, pid, rr.action, rr.parts_sent);
    }
    /* the rows are on the target now: the broken folders go (a sync's own clean-up may have
     * removed staging's already; gone is fine) */
    for (size_t r = 0; !rc && r < n; r++)
        rc = ferry_agent_remove_detached(x->dst.ag, t->database, bp[r].table, bp[r].name, NULL,
                                         NULL, err);
out:
    free(bp);
    ferry_buf_free(&names);
    return rc;
}
