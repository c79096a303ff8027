/* The SQLite backend's slice packs (docs/catalog.md, "Slice packs"): every slice record and
 * route of a tenant joined by key as ferry_catalog_scan_slices gives them, kept as one text row
 * per tenant in the table slice_pack, so that a scan of a million slices steps through 100,000
 * rows instead of 2,000,000 documents (SQLite's per-row cost was most of the rebalancing plan's
 * read, docs/benchmarks.md). The packs are derived data, never the truth:
 *
 *   marking   triggers on records (lib/catalog/sqlite.c) put a tenant's name into
 *             slice_pack_dirty in the transaction of every write to one of its slice records or
 *             routes, whoever writes (every ferry version, the sqlite3 shell);
 *   refresh   ferry's commit builds each marked tenant's pack again from its records, in the
 *             same transaction, and removes the mark (cat_slice_pack_refresh);
 *   reading   a scan uses the packs only when no tenant is marked, in one read transaction with
 *             that check (cat_slice_pack_scan); otherwise it joins the records as before.
 *
 * Invariant: at every committed state, a tenant that is not marked has a pack equal to the join
 * of its records (no row: it has none). A write that bypasses the refresh leaves a mark, which
 * makes the packs unused, never wrong.
 *
 * A pack's text is the format of lib/catalog/slice_pack_format.c (a line per slice key); a
 * tenant whose rows cannot be packed (text holding a control character) stays marked. */
#include "catalog/catalog_int.h"

#include <assert.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What rebuilds a damaged pack, for the error that names it. */
#define PACK_REBUILD                                                                             \
    "derived data: `sqlite3 FILE \"INSERT INTO slice_pack_dirty SELECT tenant FROM slice_pack\"`" \
    ", then any ferry write, builds it again"

static int pack_fail(sqlite3 *db, ferry_err *err, const char *what)
{
    return ferry_err_set(err, FERRY_EIO, "catalog: %s the slice packs: %s", what,
                         sqlite3_errmsg(db));
}

int cat_slice_pack_refresh(ferry_catalog *c, ferry_err *err)
{
    sqlite3 *db = cat_sqlite_handle(c);
    assert(db);
    sqlite3_stmt *list = NULL, *put = NULL, *drop = NULL, *unmark = NULL;
    cat_tenant_scan *ts = NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    cat_pack_buf b = {0};
    int rc = FERRY_OK;
    if (sqlite3_prepare_v2(db, "SELECT tenant FROM slice_pack_dirty", -1, &list, NULL)) {
        /* a catalog laid out before the packs, whose upgrade could not be done at open (a
         * writer's long transaction): no packs and no triggers to keep them, nothing to do */
        if (!strncmp(sqlite3_errmsg(db), "no such table", 13))
            goto out;
        rc = pack_fail(db, err, "listing the changes of");
        goto out;
    }
    /* the names first: the loop below deletes from the table being listed */
    int s;
    while ((s = sqlite3_step(list)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **q = realloc(names, nc * sizeof *q);
            if (!q) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            names = q;
            cap = nc;
        }
        const char *t = (const char *)sqlite3_column_text(list, 0);
        if (!(names[n] = strdup(t ? t : ""))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        n++;
    }
    if (s != SQLITE_DONE) {
        rc = pack_fail(db, err, "listing the changes of");
        goto out;
    }
    if (!n)
        goto out;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO slice_pack(tenant, pack) VALUES (?1, ?2)",
                           -1, &put, NULL) ||
        sqlite3_prepare_v2(db, "DELETE FROM slice_pack WHERE tenant = ?1", -1, &drop, NULL) ||
        sqlite3_prepare_v2(db, "DELETE FROM slice_pack_dirty WHERE tenant = ?1", -1, &unmark,
                           NULL)) {
        rc = pack_fail(db, err, "preparing");
        goto out;
    }
    if ((rc = cat_tenant_scan_open(c, &ts, err)))
        goto out;
    for (size_t i = 0; i < n; i++) {
        b.tenant = names[i];
        b.len = 0;
        b.refused = false;
        ferry_err scan_err = {0};
        if (!*names[i] || cat_scan_tenant_slices(ts, names[i], cat_pack_row, &b, &scan_err)) {
            /* a record the decoder refuses, or memory: the tenant stays marked, and the scans
             * read (and report) its records themselves */
            continue;
        }
        if (b.refused)
            continue;
        sqlite3_stmt *w = b.len ? put : drop;
        sqlite3_reset(w);
        sqlite3_bind_text(w, 1, names[i], -1, SQLITE_STATIC);
        if (b.len)
            sqlite3_bind_text(w, 2, b.s, (int)b.len, SQLITE_STATIC);
        sqlite3_reset(unmark);
        sqlite3_bind_text(unmark, 1, names[i], -1, SQLITE_STATIC);
        if (sqlite3_step(w) != SQLITE_DONE || sqlite3_step(unmark) != SQLITE_DONE) {
            rc = pack_fail(db, err, "writing");
            goto out;
        }
    }
out:
    cat_tenant_scan_close(ts);
    sqlite3_finalize(list);
    sqlite3_finalize(put);
    sqlite3_finalize(drop);
    sqlite3_finalize(unmark);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(b.s);
    return rc;
}

/* ---- reading the packs -------------------------------------------------------------------------- */

int cat_slice_pack_scan(sqlite3 *db, ferry_slice_row_fn fn, void *arg, bool *used,
                        ferry_err *err)
{
    *used = false;
    sqlite3_stmt *check = NULL, *st = NULL;
    cat_unpack *u = NULL;
    int rc = FERRY_OK;
    if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        return FERRY_OK;
    /* the check and the packs in one read transaction: the state the check saw. A catalog
     * without the tables (laid out by an older ferry, opened where it may only be read) has no
     * packs to use. */
    if (sqlite3_prepare_v2(db,
                           "SELECT EXISTS (SELECT 1 FROM meta WHERE key = 'slice_pack') AND NOT"
                           " EXISTS (SELECT 1 FROM slice_pack_dirty)",
                           -1, &check, NULL) != SQLITE_OK ||
        sqlite3_step(check) != SQLITE_ROW || !sqlite3_column_int(check, 0))
        goto out;
    if (sqlite3_prepare_v2(db, "SELECT tenant, pack FROM slice_pack ORDER BY tenant", -1, &st,
                           NULL) != SQLITE_OK) {
        rc = pack_fail(db, err, "reading");
        goto out;
    }
    if (!(u = malloc(sizeof *u))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    *used = true;
    int s = SQLITE_DONE;
    while (!rc && (s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        const char *pack = (const char *)sqlite3_column_text(st, 1);
        size_t len = (size_t)sqlite3_column_bytes(st, 1);
        if (!key || !pack)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory reading the slice packs");
        else
            rc = cat_unpack_rows(key, pack, len, u, fn, arg, PACK_REBUILD, err);
    }
    if (!rc && s != SQLITE_DONE)
        rc = pack_fail(db, err, "reading");
out:
    sqlite3_finalize(check);
    sqlite3_finalize(st);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    free(u);
    return rc;
}
