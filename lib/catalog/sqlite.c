/* The catalog's SQLite backend: one database file in WAL mode. Every document is a row of the
 * STRICT table `records` keyed by (parent, name); a batch is one IMMEDIATE transaction, so it is
 * atomic however large it is and a writer killed half-way leaves nothing (SQLite rolls the
 * unfinished transaction back). A lease (the coordinator's, a move's, a tiering run's) is an
 * flock(2) on a lock file beside the database, which the kernel drops when the holder dies; the
 * holder removes the file when it gives the lease up, so finished work leaves no file behind
 * (a cluster runs a lease per move: tens of thousands). */
#include "catalog/catalog_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/clock.h"

struct cat_backend {
    sqlite3 *db;
    char *path;
};

typedef struct sqlite_lease {
    int fd;
    char *path; /* the lock file, removed on release */
} sqlite_lease;

/* SQL pieces of the partition counts' triggers: whether a parent is a partition record's
 * (exactly partitions/SERVER/TABLE: the range first, for the primary key), a document's tier and
 * day as counted, and the statements adding or taking away the record of row (new / old), each
 * guarded by its own row's parent (an update may in principle move a document in or out). */
#define PC_IS(parent)                                                                             \
    "(" parent " > 'partitions/' AND " parent " < 'partitions0' AND " parent                    \
    " GLOB 'partitions/*/*' AND NOT " parent " GLOB 'partitions/*/*/*')"
#define PC_TIER(doc) "coalesce(CAST(" doc "->>'tier' AS TEXT), '')"
#define PC_DAY(doc) "coalesce(CAST(" doc "->>'day' AS INTEGER), 0)"
#define PC_PLUS(row)                                                                              \
    "INSERT INTO partition_counts(tier, day, n) SELECT " PC_TIER(row ".doc") ", "                \
    PC_DAY(row ".doc") ", 1 WHERE " PC_IS(row ".parent")                                         \
    " ON CONFLICT(tier, day) DO UPDATE SET n = n + 1;"
#define PC_MINUS(row)                                                                             \
    "UPDATE partition_counts SET n = n - 1 WHERE " PC_IS(row ".parent") " AND tier = "           \
    PC_TIER(row ".doc") " AND day = " PC_DAY(row ".doc") ";"                                      \
    "DELETE FROM partition_counts WHERE n = 0 AND tier = " PC_TIER(row ".doc") " AND day = "     \
    PC_DAY(row ".doc") ";"

/* SQL pieces of the slice packs' triggers: whether a parent is a tenant's folder of slice
 * records or routes (exactly slices/TENANT or routes/TENANT, both prefixes 7 bytes long), the
 * tenant it names, and the statement marking the tenant of row (new / old) when it is one. */
#define SP_IS(parent)                                                                             \
    "(((" parent " > 'slices/' AND " parent " < 'slices0') OR (" parent " > 'routes/' AND "      \
    parent " < 'routes0')) AND NOT " parent " GLOB '*/*/*')"
#define SP_TENANT(parent) "substr(" parent ", 8)"
#define SP_MARK(row)                                                                              \
    "INSERT OR IGNORE INTO slice_pack_dirty(tenant) SELECT " SP_TENANT(row ".parent")            \
    " WHERE " SP_IS(row ".parent") ";"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS records("
    " parent TEXT NOT NULL, name TEXT NOT NULL,"
    " version INTEGER NOT NULL CHECK (version >= 0),"
    " doc TEXT NOT NULL CHECK (json_valid(doc)),"
    " PRIMARY KEY (parent, name)) STRICT, WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;"
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', 1), ('routing_version', 0);"
    /* Read-only views for people inspecting the file with the sqlite3 shell. */
    "CREATE VIEW IF NOT EXISTS shard_view AS SELECT name, version, doc->>'state' AS state,"
    " doc->>'weight' AS weight, doc->>'capacity' AS capacity, doc->>'replicas' AS replicas,"
    " doc->>'agent' AS agent FROM records WHERE parent = 'shards';"
    "CREATE VIEW IF NOT EXISTS route_view AS SELECT doc->>'tenant' AS tenant,"
    " doc->>'split' AS split, doc->>'shards' AS shards, version FROM records"
    " WHERE parent LIKE 'routes/%';"
    "CREATE VIEW IF NOT EXISTS slice_view AS SELECT doc->>'tenant' AS tenant,"
    " doc->>'split' AS split, doc->>'bytes' AS bytes, doc->>'rows' AS rows,"
    " doc->>'placement' AS placement, version FROM records WHERE parent LIKE 'slices/%';"
    "CREATE VIEW IF NOT EXISTS move_view AS SELECT name AS id, doc->>'state' AS state,"
    " doc->>'tenant' AS tenant, doc->>'split' AS split, doc->>'from' AS src, doc->>'to' AS dst,"
    " doc->>'step' AS step, doc->>'owner' AS owner, version FROM records WHERE parent = 'moves';"
    "CREATE VIEW IF NOT EXISTS part_object_view AS SELECT r.doc->>'table' AS tbl,"
    " r.doc->>'partition_id' AS partition_id, r.doc->>'name' AS part, o.value->>'key' AS key,"
    " o.value->>'size' AS size, o.value->>'checksum' AS checksum, r.doc->>'servers' AS servers"
    " FROM records r, json_each(r.doc, '$.objects') o WHERE r.parent LIKE 'parts/%';"
    /* The partition counts (docs/catalog.md, "Partition counts"): how many partition records
     * (partitions/SERVER/TABLE/ID) there are of each tier and day, kept by triggers in the
     * transaction of every write to records, whoever writes (every ferry version, the sqlite3
     * shell), so `ferry status` reads a few rows instead of every partition record. A catalog
     * laid out before the counts gets them filled from its records here, once, in the same
     * transaction that adds the triggers (the meta row says it was done). */
    "CREATE TABLE IF NOT EXISTS partition_counts(tier TEXT NOT NULL, day INTEGER NOT NULL,"
    " n INTEGER NOT NULL, PRIMARY KEY (tier, day)) WITHOUT ROWID;"
    "INSERT INTO partition_counts(tier, day, n) SELECT " PC_TIER("doc") ", " PC_DAY("doc") ","
    " count(*) FROM records WHERE " PC_IS("parent") " AND NOT EXISTS (SELECT 1 FROM meta"
    " WHERE key = 'partition_counts') GROUP BY 1, 2;"
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('partition_counts', 1);"
    "CREATE TRIGGER IF NOT EXISTS partition_counts_insert AFTER INSERT ON records"
    " WHEN " PC_IS("new.parent") " BEGIN " PC_PLUS("new") " END;"
    "CREATE TRIGGER IF NOT EXISTS partition_counts_update AFTER UPDATE OF parent, doc ON records"
    " WHEN " PC_IS("old.parent") " OR " PC_IS("new.parent") " BEGIN " PC_MINUS("old")
    " " PC_PLUS("new") " END;"
    "CREATE TRIGGER IF NOT EXISTS partition_counts_delete AFTER DELETE ON records"
    " WHEN " PC_IS("old.parent") " BEGIN " PC_MINUS("old") " END;"
    /* The slice packs (lib/catalog/slice_pack.c, docs/catalog.md "Slice packs"): each tenant's
     * slice records and routes joined in one row, derived from records. The triggers mark a
     * tenant whose slice records or routes change, whoever writes; ferry's commit builds the
     * marked packs again (cat_slice_pack_refresh) and the scans use the packs only when none is
     * marked. A catalog laid out before the packs gets every tenant marked here, once. */
    "CREATE TABLE IF NOT EXISTS slice_pack(tenant TEXT PRIMARY KEY, pack TEXT NOT NULL)"
    " STRICT, WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS slice_pack_dirty(tenant TEXT PRIMARY KEY) STRICT, WITHOUT ROWID;"
    "INSERT OR IGNORE INTO slice_pack_dirty(tenant) SELECT DISTINCT " SP_TENANT("parent")
    " FROM records WHERE " SP_IS("parent") " AND NOT EXISTS (SELECT 1 FROM meta"
    " WHERE key = 'slice_pack');"
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('slice_pack', 1);"
    "CREATE TRIGGER IF NOT EXISTS slice_pack_insert AFTER INSERT ON records"
    " WHEN " SP_IS("new.parent") " BEGIN " SP_MARK("new") " END;"
    "CREATE TRIGGER IF NOT EXISTS slice_pack_update AFTER UPDATE ON records"
    " WHEN " SP_IS("old.parent") " OR " SP_IS("new.parent") " BEGIN " SP_MARK("old") " "
    SP_MARK("new") " END;"
    /* the last object of the schema: its presence says the schema is laid out (cat_sqlite_open) */
    "CREATE TRIGGER IF NOT EXISTS slice_pack_delete AFTER DELETE ON records"
    " WHEN " SP_IS("old.parent") " BEGIN " SP_MARK("old") " END;";

static int db_fail(ferry_catalog *c, int code, ferry_err *err, const char *what)
{
    return ferry_err_set(err, code, "catalog %s: %s: %s", c->be->path, what,
                         sqlite3_errmsg(c->be->db));
}

static int split_path(const char *path, char *parent, size_t psz, const char **name)
{
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= psz)
        return FERRY_EINVAL;
    memcpy(parent, path, (size_t)(slash - path));
    parent[slash - path] = '\0';
    *name = slash + 1;
    return FERRY_OK;
}

static int sq_get(ferry_catalog *c, const char *path, cat_item *out, ferry_err *err)
{
    char parent[1024];
    const char *name;
    if (split_path(path, parent, sizeof parent, &name))
        return ferry_err_set(err, FERRY_EINVAL, "bad catalog path %s", path);
    sqlite3_stmt *st = NULL;
    int rc = FERRY_OK;
    if (sqlite3_prepare_v2(c->be->db,
                           "SELECT version, doc FROM records WHERE parent = ?1 AND name = ?2", -1,
                           &st, NULL) != SQLITE_OK)
        return db_fail(c, FERRY_EIO, err, "reading");
    sqlite3_bind_text(st, 1, parent, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        out->version = sqlite3_column_int64(st, 0);
        out->doc = strdup((const char *)sqlite3_column_text(st, 1));
        out->path = strdup(path);
        if (!out->doc || !out->path) {
            cat_item_free(out);
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
    } else if (s == SQLITE_DONE) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s does not exist", path);
    } else {
        rc = db_fail(c, s == SQLITE_BUSY ? FERRY_ETIMEOUT : FERRY_EIO, err, "reading");
    }
    sqlite3_finalize(st);
    return rc;
}

static int sq_scan(ferry_catalog *c, const char *prefix, int depth, cat_items *out, ferry_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = FERRY_OK;
    const char *sql =
        depth == 1 ? "SELECT parent, name, version, doc FROM records WHERE parent = ?1"
                   : "SELECT parent, name, version, doc FROM records"
                     " WHERE parent > ?1 || '/' AND parent < ?1 || '0'";
    if (sqlite3_prepare_v2(c->be->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(c, FERRY_EIO, err, "listing");
    sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    size_t plen = strlen(prefix);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *parent = (const char *)sqlite3_column_text(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (depth > 1) { /* keep only rows exactly depth levels below prefix */
            int slashes = 0;
            for (const char *p = parent + plen; *p; p++)
                slashes += *p == '/';
            if (slashes != depth - 1)
                continue;
        }
        char path[2048];
        size_t pl = (size_t)sqlite3_column_bytes(st, 0), nl = (size_t)sqlite3_column_bytes(st, 1);
        if (pl + nl + 2 > sizeof path)
            continue; /* cannot be: keys are at most 127 bytes a segment */
        memcpy(path, parent, pl);
        path[pl] = '/';
        memcpy(path + pl + 1, name, nl + 1);
        const char *doc = (const char *)sqlite3_column_text(st, 3);
        if (cat_items_push(out, path, doc, strlen(doc), sqlite3_column_int64(st, 2))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
    }
    if (!rc && s != SQLITE_DONE)
        rc = db_fail(c, s == SQLITE_BUSY ? FERRY_ETIMEOUT : FERRY_EIO, err, "listing");
    sqlite3_finalize(st);
    return rc;
}

static int exec(ferry_catalog *c, const char *sql, ferry_err *err)
{
    int s = sqlite3_exec(c->be->db, sql, NULL, NULL, NULL);
    if (s != SQLITE_OK)
        return db_fail(c, s == SQLITE_BUSY ? FERRY_ETIMEOUT : FERRY_EIO, err, sql);
    return FERRY_OK;
}

/* The current version of parent/name, or -1 when absent. */
static int64_t current_version(sqlite3 *db, const char *parent, const char *name)
{
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, "SELECT version FROM records WHERE parent = ?1 AND name = ?2", -1,
                           &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, parent, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
}

static int mismatch(const cat_op *op, int64_t have, ferry_err *err)
{
    if (have < 0)
        return ferry_err_set(err, FERRY_ENOTFOUND, "%s does not exist", op->path);
    return ferry_err_set(err, FERRY_ECONFLICT,
                         "%s changed: it is at version %lld, expected %lld", op->path,
                         (long long)have, (long long)op->version);
}

static int apply_op(ferry_catalog *c, sqlite3_stmt *const *st, const cat_op *op, int64_t *nv,
                    ferry_err *err)
{
    char parent[1024];
    const char *name;
    if (split_path(op->path, parent, sizeof parent, &name))
        return ferry_err_set(err, FERRY_EINVAL, "bad catalog path %s", op->path);
    sqlite3 *db = c->be->db;
    int64_t have;
    sqlite3_stmt *s = st[op->type];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    sqlite3_bind_text(s, 1, parent, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
    switch (op->type) {
    case CAT_CREATE: {
        sqlite3_bind_text(s, 3, op->doc, (int)op->doc_len, SQLITE_STATIC);
        int r = sqlite3_step(s);
        if (r == SQLITE_CONSTRAINT)
            return ferry_err_set(err, FERRY_ECONFLICT, "%s already exists", op->path);
        if (r != SQLITE_DONE)
            return db_fail(c, FERRY_EIO, err, "writing");
        *nv = 0;
        return FERRY_OK;
    }
    case CAT_SET:
    case CAT_DELETE: {
        if (op->type == CAT_SET)
            sqlite3_bind_text(s, 3, op->doc, (int)op->doc_len, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, op->version);
        int r = sqlite3_step(s);
        if (r == SQLITE_ROW) {
            *nv = op->type == CAT_SET ? sqlite3_column_int64(s, 0) : -1;
            while (r == SQLITE_ROW)
                r = sqlite3_step(s);
            return r == SQLITE_DONE ? FERRY_OK : db_fail(c, FERRY_EIO, err, "writing");
        }
        if (r != SQLITE_DONE)
            return db_fail(c, FERRY_EIO, err, "writing");
        have = current_version(db, parent, name);
        return mismatch(op, have, err);
    }
    case CAT_CHECK:
        have = current_version(db, parent, name);
        if (have < 0 || have != op->version)
            return mismatch(op, have, err);
        *nv = -1;
        return FERRY_OK;
    }
    return ferry_err_set(err, FERRY_EINTERNAL, "unknown operation");
}

/* In the commit's transaction: the routing change log's entry for the new routing version, and
 * the entry CAT_ROUTING_LOG_KEEP versions older goes (routing_delta.c). */
static int write_routing_log(ferry_catalog *c, const char *doc, ferry_err *err)
{
    static const char *const sql[] = {
        "INSERT OR REPLACE INTO records(parent, name, version, doc) SELECT '" CAT_ROUTING_LOG_DIR
        "', CAST(value AS TEXT), 0, ?1 FROM meta WHERE key = 'routing_version'",
        "DELETE FROM records WHERE parent = '" CAT_ROUTING_LOG_DIR "' AND name = (SELECT"
        " CAST(value - ?2 AS TEXT) FROM meta WHERE key = 'routing_version')",
    };
    int rc = FERRY_OK;
    for (size_t i = 0; i < 2 && !rc; i++) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(c->be->db, sql[i], -1, &st, NULL) != SQLITE_OK)
            return db_fail(c, FERRY_EIO, err, "preparing the routing change log");
        if (i == 0)
            sqlite3_bind_text(st, 1, doc, -1, SQLITE_STATIC);
        else
            sqlite3_bind_int64(st, 2, CAT_ROUTING_LOG_KEEP);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_fail(c, FERRY_EIO, err, "writing the routing change log");
        sqlite3_finalize(st);
    }
    return rc;
}

static int sq_commit(ferry_catalog *c, cat_commit_req *req, ferry_commit_info *info,
                     ferry_err *err)
{
    static const char *const sql[] = {
        [CAT_CREATE] = "INSERT INTO records(parent, name, version, doc) VALUES (?1, ?2, 0, ?3)",
        [CAT_SET] = "UPDATE records SET doc = ?3, version = version + 1 WHERE parent = ?1 AND"
                    " name = ?2 AND (?4 < 0 OR version = ?4) RETURNING version",
        [CAT_DELETE] = "DELETE FROM records WHERE parent = ?1 AND name = ?2 AND"
                       " (?4 < 0 OR version = ?4) RETURNING version",
        [CAT_CHECK] = "SELECT version FROM records WHERE parent = ?1 AND name = ?2",
    };
    sqlite3_stmt *st[4] = {0};
    int rc = FERRY_OK;
    bool in_tx = false;
    for (int i = 0; i < 4; i++)
        if (sqlite3_prepare_v2(c->be->db, sql[i], -1, &st[i], NULL) != SQLITE_OK) {
            rc = db_fail(c, FERRY_EIO, err, "preparing a write");
            goto out;
        }
    rc = exec(c, "BEGIN IMMEDIATE", err);
    if (rc)
        goto out;
    in_tx = true;
    size_t chunk = c->chunk_ops, chunks = req->n ? (req->n + chunk - 1) / chunk : 1;
    for (size_t i = 0; i < req->n; i++) {
        rc = apply_op(c, st, &req->ops[i], &req->new_versions[i], err);
        if (rc)
            goto out;
        if (c->progress && ((i + 1) % chunk == 0 || i + 1 == req->n))
            c->progress((i + chunk) / chunk, chunks, c->progress_arg);
    }
    /* the packs of the tenants this batch changed, in its transaction (slice_pack.c) */
    rc = cat_slice_pack_refresh(c, err);
    if (rc)
        goto out;
    if (req->routing != CAT_ROUTING_KEEP) {
        char q[128];
        if (req->routing == CAT_ROUTING_BUMP)
            snprintf(q, sizeof q, "UPDATE meta SET value = value + 1 WHERE key = 'routing_version'");
        else
            snprintf(q, sizeof q, "UPDATE meta SET value = %llu WHERE key = 'routing_version'",
                     (unsigned long long)req->routing_value);
        rc = exec(c, q, err);
        if (!rc && req->routing == CAT_ROUTING_BUMP && req->routing_log)
            rc = write_routing_log(c, req->routing_log, err);
        if (rc)
            goto out;
    }
    rc = exec(c, "COMMIT", err);
    if (!rc) {
        in_tx = false;
        info->ops = req->n;
        info->round_trips = 1;
        info->chunks = 1;
        if (req->routing != CAT_ROUTING_KEEP)
            rc = c->ops->routing_version(c, &info->routing_version, err);
    }
out:
    for (int i = 0; i < 4; i++)
        sqlite3_finalize(st[i]);
    if (in_tx)
        sqlite3_exec(c->be->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int sq_routing_version(ferry_catalog *c, uint64_t *v, ferry_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = FERRY_OK;
    if (sqlite3_prepare_v2(c->be->db, "SELECT value FROM meta WHERE key = 'routing_version'", -1,
                           &st, NULL) != SQLITE_OK)
        return db_fail(c, FERRY_EIO, err, "reading the routing version");
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *v = (uint64_t)sqlite3_column_int64(st, 0);
    else
        rc = db_fail(c, s == SQLITE_BUSY ? FERRY_ETIMEOUT : FERRY_EIO, err,
                     "reading the routing version");
    sqlite3_finalize(st);
    return rc;
}

static int sq_routing_wait(ferry_catalog *c, uint64_t known, int timeout_ms, uint64_t *now,
                           ferry_err *err)
{
    int64_t deadline = (int64_t)ferry_clock_ms_u64() + timeout_ms;
    for (;;) {
        int rc = sq_routing_version(c, now, err);
        if (rc || *now != known)
            return rc;
        if ((int64_t)ferry_clock_ms_u64() >= deadline)
            return ferry_err_set(err, FERRY_ETIMEOUT,
                                 "routing version stayed at %llu for %d ms",
                                 (unsigned long long)known, timeout_ms);
        struct timespec ts = {0, 20 * 1000000L}; /* poll every 20 ms */
        nanosleep(&ts, NULL);
    }
}

static int sq_lease_acquire(ferry_catalog *c, const char *name, const char *owner, void **token,
                            ferry_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s-lease-%s", c->be->path, name);
    int fd = -1;
    /* The holder removes the file when it releases (below). A contender that opened the file
     * before that can lock it after: it then holds a file nobody else can see, while the next
     * one creates a new file and locks that. So once locked, the file must still be the one the
     * path names; if not, start again. */
    for (int attempt = 0; attempt < 100; attempt++) {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return ferry_err_set(err, FERRY_EIO, "lease file %s: %s", path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            char holder[256] = "";
            ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
            holder[n > 0 ? n : 0] = '\0';
            close(fd);
            if (e == EWOULDBLOCK)
                return ferry_err_set(err, FERRY_ECONFLICT, "lease '%s' is held by %s", name,
                                     holder[0] ? holder : "another process");
            return ferry_err_set(err, FERRY_EIO, "lease file %s: %s", path, strerror(e));
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
            break;
        close(fd); /* released and removed meanwhile */
        fd = -1;
    }
    if (fd < 0)
        return ferry_err_set(err, FERRY_ETIMEOUT, "lease file %s kept being replaced", path);
    sqlite_lease *l = malloc(sizeof *l);
    char *p = strdup(path);
    if (!l || !p) {
        free(l);
        free(p);
        unlink(path);
        close(fd);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    /* Who holds it, for the message a contender gets. */
    if (ftruncate(fd, 0) == 0 && pwrite(fd, owner, strlen(owner), 0) < 0) {
        /* only informative */
    }
    l->fd = fd;
    l->path = p;
    *token = l;
    return FERRY_OK;
}

static bool sq_lease_valid(ferry_catalog *c, void *token)
{
    (void)c;
    return token && ((sqlite_lease *)token)->fd >= 0;
}

static void sq_lease_release(ferry_catalog *c, void *token)
{
    (void)c;
    sqlite_lease *l = token;
    if (!l)
        return;
    /* Removed while still locked: whoever locks this file after us sees it is gone and opens
     * the path again (sq_lease_acquire). */
    unlink(l->path); /* fails only when removed by hand: nothing left to clean then */
    close(l->fd); /* drops the flock */
    free(l->path);
    free(l);
}

static int sq_recover(ferry_catalog *c, size_t *n, ferry_err *err)
{
    (void)c;
    (void)err;
    *n = 0; /* SQLite rolls back unfinished transactions itself */
    return FERRY_OK;
}

static void sq_close(ferry_catalog *c)
{
    if (!c->be)
        return;
    sqlite3_close(c->be->db);
    free(c->be->path);
    free(c->be);
    c->be = NULL;
}

static const cat_backend_ops sqlite_ops;

struct sqlite3 *cat_sqlite_handle(const ferry_catalog *c)
{
    return c->ops == &sqlite_ops && c->be ? c->be->db : NULL;
}

static const cat_backend_ops sqlite_ops = {
    .name = "sqlite",
    .get = sq_get,
    .scan = sq_scan,
    .commit = sq_commit,
    .routing_version = sq_routing_version,
    .routing_wait = sq_routing_wait,
    .lease_acquire = sq_lease_acquire,
    .lease_valid = sq_lease_valid,
    .lease_release = sq_lease_release,
    .recover = sq_recover,
    .close = sq_close,
};

int cat_sqlite_open(ferry_catalog *c, const char *path, ferry_err *err)
{
    if (path[0] != '/')
        return ferry_err_set(err, FERRY_EINVAL,
                             "sqlite catalog path '%s' must be absolute (sqlite:/abs/path.db)",
                             path);
    c->ops = &sqlite_ops;
    c->be = calloc(1, sizeof *c->be);
    if (!c->be || !(c->be->path = strdup(path))) {
        free(c->be);
        c->be = NULL;
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    int rc = FERRY_OK;
    if (sqlite3_open_v2(path, &c->be->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        NULL) != SQLITE_OK) {
        rc = ferry_err_set(err, FERRY_EIO, "cannot open catalog %s: %s", path,
                           c->be->db ? sqlite3_errmsg(c->be->db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(c->be->db, 10000);
    rc = exec(c, "PRAGMA journal_mode = WAL", err);
    /* FULL, not NORMAL: in WAL mode NORMAL does not fsync at each commit, so a power loss can
     * take back transactions a caller was told were committed (a move's step, a retention
     * job's DELETE state) while their effects on servers and the store remain. Cost measured
     * in docs/benchmarks.md. */
    if (!rc)
        rc = exec(c, "PRAGMA synchronous = FULL", err);
    if (!rc)
        rc = exec(c, "PRAGMA foreign_keys = ON", err);
    /* Lay out the schema only when it is missing: taking the write lock at every open would make
     * readers wait for a writer's long transaction. */
    sqlite3_stmt *st = NULL;
    bool laid_out = false, older = false; /* older: laid out before the slice packs */
    if (!rc && sqlite3_prepare_v2(c->be->db,
                                  "SELECT name FROM sqlite_master WHERE (type = 'trigger' AND"
                                  " name = 'slice_pack_delete') OR (type = 'view' AND"
                                  " name = 'part_object_view')",
                                  -1, &st, NULL) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(st, 0);
            laid_out |= name && !strcmp(name, "slice_pack_delete");
            older |= name && !strcmp(name, "part_object_view");
        }
    sqlite3_finalize(st);
    bool upgrade = !rc && !laid_out && older;
    if (!rc && !laid_out)
        rc = exec(c, "BEGIN IMMEDIATE", err);
    if (!rc && !laid_out) {
        rc = exec(c, schema, err);
        /* an older catalog's tenants, all marked by the schema: their packs built now, once */
        if (!rc)
            rc = cat_slice_pack_refresh(c, err);
        if (!rc)
            rc = exec(c, "COMMIT", err);
        else
            sqlite3_exec(c->be->db, "ROLLBACK", NULL, NULL, NULL);
    }
    /* A catalog an older ferry laid out still opens when the partition counts and the slice
     * packs cannot be added now (a file this process may only read, a writer's long
     * transaction): the next open tries again, and meanwhile the scans read records (scan.c). */
    if (rc && upgrade) {
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
out:
    if (rc)
        sq_close(c);
    return rc;
}
