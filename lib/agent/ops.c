/* The node agent's operations on the local server (see docs/agent.md): status, listing parts,
 * freezing partitions and listing what they froze, placing a part folder into detached/,
 * removing detached and shadow folders, and listing the pointer files of the cold disk. Each is
 * idempotent: running it again after a crash gives the same result. Uploading frozen parts and
 * writing pointer parts is in upload.c, sending and receiving parts in transfer.c. */
#include "agent_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/pointer.h"
#include "ferry/strutil.h"

static json_t *jstr(const char *s) { return json_string(s ? s : ""); }

/* ---- status --------------------------------------------------------------------------------- */

int agent_op_status(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    (void)req;
    int rc;
    if ((rc = agent_env_roots(env, err)))
        return rc;
    ferry_ch_version v;
    if ((rc = ferry_ch_server_version(env->ch, &v, err)))
        return rc;
    json_t *o = json_object();
    json_object_set_new(o, "agent", json_string("ferry"));
    json_object_set_new(o, "api", json_integer(FERRY_AGENT_API_VERSION));
    json_object_set_new(o, "data_path", jstr(env->a->data_path));
    json_object_set_new(o, "clickhouse_version", jstr(v.text));
    json_t *disks = json_array();
    for (size_t i = 0; i < env->n_disks; i++) {
        json_t *d = json_pack("{s:s, s:s, s:b}", "name", env->disks[i].name, "path",
                              env->disks[i].path, "remote", env->disks[i].is_remote);
        /* free space of the file system under a local disk (a move's pre-flight): statvfs
         * f_bavail, what an unprivileged writer could still use; and its free inodes
         * (f_favail, likewise), which run out before the bytes with many small parts */
        struct statvfs vfs;
        if (!env->disks[i].is_remote && statvfs(env->disks[i].path, &vfs) == 0) {
            json_object_set_new(d, "free_bytes", json_integer((json_int_t)((uint64_t)vfs.f_bavail *
                                                                           vfs.f_frsize)));
            json_object_set_new(d, "total_bytes", json_integer((json_int_t)((uint64_t)vfs.f_blocks *
                                                                            vfs.f_frsize)));
            if (vfs.f_files > 0) { /* 0: the file system has no inode limit (btrfs) */
                json_object_set_new(d, "free_inodes", json_integer((json_int_t)vfs.f_favail));
                json_object_set_new(d, "total_inodes", json_integer((json_int_t)vfs.f_files));
            }
        }
        json_array_append_new(disks, d);
    }
    json_object_set_new(o, "disks", disks);
    json_t *roots = json_array();
    for (size_t i = 0; i < env->roots.n; i++)
        json_array_append_new(roots, jstr(env->roots.paths[i]));
    json_object_set_new(o, "roots", roots);
    if (env->a->config_path) {
        int pv = 0;
        ferry_err perr = {0};
        if (agent_env_pointer_version(env, &pv, &perr) == FERRY_OK)
            json_object_set_new(o, "pointer_format", json_integer(pv));
        else
            json_object_set_new(o, "pointer_format_error", jstr(perr.msg));
        ferry_objstore *st = NULL;
        if (agent_env_open_store(env, FERRY_ROLE_UPLOADER, &st, &perr) == FERRY_OK)
            json_object_set_new(o, "object_store", jstr(ferry_objstore_describe(st)));
        ferry_objstore_close(st);
    }
    *resp = o;
    return FERRY_OK;
}

/* ---- parts ---------------------------------------------------------------------------------- */

static json_t *read_count_txt(const char *dir)
{
    char p[4400], *data = NULL;
    size_t len;
    uint64_t rows;
    ferry_err ignored = {0};
    snprintf(p, sizeof p, "%s/count.txt", dir);
    json_t *r = json_null();
    if (agent_read_small(p, 64, &data, &len, &ignored) == FERRY_OK) {
        ferry_chomp(data);
        if (ferry_parse_u64(data, &rows)) {
            json_decref(r);
            r = json_integer((json_int_t)rows);
        }
        free(data);
    }
    return r;
}

int agent_op_parts(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    const char *db, *table, *pid = agent_req_opt(req, "partition_id");
    int rc;
    ferry_ch_part *parts = NULL;
    ferry_ch_detached_part *det = NULL;
    size_t np = 0, nd = 0, ndirs = 0;
    agent_table_dir *dirs = NULL;
    if ((rc = agent_req_str(req, "database", &db, err)) ||
        (rc = agent_req_str(req, "table", &table, err)))
        return rc;
    if ((rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)) ||
        (rc = ferry_ch_list_parts(env->ch, db, table, &parts, &np, err)) ||
        (rc = ferry_ch_list_detached(env->ch, db, table, &det, &nd, err)))
        goto out;
    json_t *o = json_object(), *jd = json_array(), *jp = json_array(), *jx = json_array();
    json_object_set_new(o, "database", jstr(db));
    json_object_set_new(o, "table", jstr(table));
    for (size_t i = 0; i < ndirs; i++)
        json_array_append_new(jd, json_pack("{s:s, s:s, s:b}", "disk", dirs[i].disk->name,
                                            "path", dirs[i].path, "remote",
                                            dirs[i].disk->is_remote));
    for (size_t i = 0; i < np; i++) {
        const ferry_ch_part *p = &parts[i];
        if (pid && strcmp(pid, p->partition_id))
            continue;
        json_array_append_new(jp, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "name",
                                            p->name, "partition_id", p->partition_id,
                                            "partition", p->partition, "disk", p->disk_name,
                                            "path", p->path, "rows", (json_int_t)p->rows,
                                            "bytes_on_disk", (json_int_t)p->bytes_on_disk,
                                            "hash_of_all_files", p->hash_of_all_files));
    }
    for (size_t i = 0; i < nd; i++) {
        const ferry_ch_detached_part *d = &det[i];
        if (pid && (!d->partition_id || strcmp(pid, d->partition_id)))
            continue;
        const agent_disk *disk = agent_env_disk(env, d->disk);
        json_t *e = json_pack("{s:s, s:o, s:s, s:s, s:I, s:o}", "name", d->name,
                              "partition_id", d->partition_id ? json_string(d->partition_id)
                                                              : json_null(),
                              "disk", d->disk, "path", d->path, "bytes_on_disk",
                              (json_int_t)d->bytes_on_disk, "reason",
                              d->reason && *d->reason ? json_string(d->reason) : json_null());
        /* rows: count.txt of a part on a local disk (on an object disk it is a pointer) */
        json_object_set_new(e, "rows", disk && !disk->is_remote && *d->path
                                           ? read_count_txt(d->path) : json_null());
        json_array_append_new(jx, e);
    }
    json_object_set_new(o, "data_paths", jd);
    json_object_set_new(o, "parts", jp);
    json_object_set_new(o, "detached", jx);
    *resp = o;
out:
    agent_table_dirs_free(dirs, ndirs);
    ferry_ch_parts_free(parts, np);
    ferry_ch_detached_free(det, nd);
    return rc;
}

/* ---- freeze and frozen ------------------------------------------------------------------- */

/* The pointer file at path, parsed, as JSON objects; NULL (and err) when it is not one. */
static json_t *pointer_objects(agent_env *env, const char *path, ferry_pointer *pt, ferry_err *err)
{
    char *data = NULL;
    size_t len = 0;
    ferry_err serr = {0};
    const char *kp = agent_env_store(env, &serr) == FERRY_OK ? env->store.disk_key_prefix : "";
    if (agent_read_small(path, AGENT_POINTER_FILE_MAX, &data, &len, err))
        return NULL;
    int rc = ferry_pointer_parse(data, len, kp, pt, err);
    free(data);
    if (rc)
        return NULL;
    json_t *objs = json_array();
    for (size_t i = 0; i < pt->n_objects; i++) {
        json_t *o = json_pack("{s:s, s:I}", "key", pt->objects[i].key, "size",
                              (json_int_t)pt->objects[i].size);
        char *sk = env->store_loaded ? agent_store_key_of(&env->store, pt->objects[i].key) : NULL;
        if (sk)
            json_object_set_new(o, "store_key", json_string(sk));
        free(sk);
        json_array_append_new(objs, o);
    }
    return objs;
}

/* How long one request (a pointer walk, a listing of frozen parts) may spend re-reading files
 * that did not parse. ClickHouse rewrites a pointer file in place (truncate, then write) whenever
 * its ref_count changes: a hard link made by MOVE / REPLACE PARTITION or FREEZE, a removal of one
 * of the links. A walk that reads the file in that window sees zero or half its bytes, and read
 * once, such a file made the sweep's and retention's live check incomplete (nothing deleted, the
 * run failed) though nothing was wrong. The rewrite takes microseconds; a damaged file stays
 * damaged. The budget is per request so that a server with hundreds of truly damaged files (a
 * crash's broken parts) answers in bounded time. */
#define POINTER_REREAD_BUDGET_MS 1000
#define POINTER_REREAD_TRIES 6

/* pointer_objects, re-read while the file does not parse and the request's budget lasts (1, 4, 16,
 * 64, 256 ms apart: a loaded machine may not run the rewriting thread for a while). A file that
 * vanished (FERRY_ENOTFOUND) is not re-read. */
static json_t *pointer_objects_settled(agent_env *env, const char *path, ferry_pointer *pt,
                                       unsigned *budget_ms, ferry_err *err)
{
    unsigned wait_ms = 1;
    for (int tries = 0;; tries++) {
        ferry_err perr = {0};
        json_t *objs = pointer_objects(env, path, pt, &perr);
        if (objs)
            return objs;
        if (perr.code == FERRY_ENOTFOUND || tries + 1 >= POINTER_REREAD_TRIES ||
            *budget_ms < wait_ms) {
            *err = perr;
            return NULL;
        }
        ferry_pointer_free(pt);
        *pt = (ferry_pointer)FERRY_POINTER_INIT;
        usleep(wait_ms * 1000u);
        *budget_ms -= wait_ms;
        wait_ms *= 4;
    }
}

/* Appends the parts frozen under shadow/<name> for this table (of partition pid, or all) to
 * arr. */
static int list_frozen(agent_env *env, const agent_table_dir *dirs, size_t ndirs,
                       const char *name, const char *pid, json_t *arr, ferry_err *err)
{
    int rc = FERRY_OK;
    unsigned reread_ms = POINTER_REREAD_BUDGET_MS; /* FREEZE links rewrite the files too */
    for (size_t i = 0; i < ndirs && rc == FERRY_OK; i++) {
        char sh[4400];
        snprintf(sh, sizeof sh, "%sshadow/%s/%s", dirs[i].disk->path, name, dirs[i].rel);
        struct stat sb;
        if (lstat(sh, &sb) != 0)
            continue;
        char *canon = NULL;
        if ((rc = ferry_roots_check(&env->roots, sh, &canon, err)))
            return rc;
        DIR *d = opendir(canon);
        if (!d) {
            free(canon);
            return ferry_err_set(err, FERRY_EIO, "%s: %s", sh, strerror(errno));
        }
        struct dirent *e;
        size_t pl = pid ? strlen(pid) : 0;
        while ((e = readdir(d)) != NULL && rc == FERRY_OK) {
            if (e->d_name[0] == '.' || (pid && (strncmp(e->d_name, pid, pl) ||
                                                e->d_name[pl] != '_')))
                continue;
            char pdir[4700];
            snprintf(pdir, sizeof pdir, "%s/%s", canon, e->d_name);
            if (lstat(pdir, &sb) != 0 || !S_ISDIR(sb.st_mode))
                continue;
            agent_file *files = NULL;
            size_t nf = 0;
            if ((rc = agent_list_part_files(pdir, &files, &nf, err)))
                break;
            json_t *jf = json_array();
            uint64_t bytes = 0;
            for (size_t k = 0; k < nf; k++) {
                json_t *f = json_pack("{s:s, s:I}", "name", files[k].name, "size",
                                      (json_int_t)files[k].size);
                bytes += files[k].size;
                if (dirs[i].disk->is_remote) {
                    char fp[4900];
                    snprintf(fp, sizeof fp, "%s/%s", pdir, files[k].name);
                    ferry_pointer pt = FERRY_POINTER_INIT;
                    ferry_err perr = {0};
                    json_t *objs = pointer_objects_settled(env, fp, &pt, &reread_ms, &perr);
                    if (objs) {
                        json_object_set_new(f, "objects", objs);
                        json_object_set_new(f, "data_size",
                                            json_integer((json_int_t)ferry_pointer_total_size(&pt)));
                    } else {
                        json_object_set_new(f, "pointer_error", json_string(perr.msg));
                    }
                    ferry_pointer_free(&pt);
                }
                json_array_append_new(jf, f);
            }
            agent_files_free(files, nf);
            json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:I, s:o}", "name",
                                                 e->d_name, "disk", dirs[i].disk->name, "kind",
                                                 dirs[i].disk->is_remote ? "pointer" : "hot",
                                                 "path", pdir, "bytes", (json_int_t)bytes,
                                                 "files", jf));
        }
        closedir(d);
        free(canon);
    }
    return rc;
}

static int count_active(agent_env *env, const char *db, const char *table, const char *pid,
                        uint64_t *n, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf out = FERRY_BUF_INIT;
    /* a statement cut short by a failed append is never sent */
    int b = ferry_buf_puts(&sql, "SELECT count() FROM system.parts WHERE active AND "
                                 "database = ");
    b |= ferry_ch_quote(&sql, db);
    b |= ferry_buf_puts(&sql, " AND table = ");
    b |= ferry_ch_quote(&sql, table);
    b |= ferry_buf_puts(&sql, " AND partition_id = ");
    b |= ferry_ch_quote(&sql, pid);
    int rc = b ? ferry_err_set(err, FERRY_ENOMEM, "out of memory")
               : ferry_ch_query_buf(env->ch, ferry_buf_cstr(&sql), "TabSeparated", &out, NULL,
                                    err);
    if (rc == FERRY_OK) {
        char *s = (char *)ferry_buf_cstr(&out);
        ferry_chomp(s);
        if (!ferry_parse_u64(s, n))
            rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected count from system.parts");
    }
    ferry_buf_free(&sql);
    ferry_buf_free(&out);
    return rc;
}

/* freeze with "partition_ids": [...]: every listed partition frozen by one ALTER TABLE (one
 * FREEZE command each, all WITH NAME name), then the frozen parts of all of them listed (a part's
 * name starts with its partition id). A partition already frozen under the name, or without
 * parts, is left out of the ALTER. The caller's mover freezes a whole slice in one request. */
/* ALTER TABLE db.table, then FREEZE PARTITION ID 'pid' WITH NAME 'name' after the n-th: one
 * statement freezes every partition that needs it. 0 or FERRY_ENOMEM. */
static int freeze_head(ferry_buf *sql, const char *db, const char *table)
{
    return ferry_buf_puts(sql, "ALTER TABLE ") || ferry_sql_ident(db, sql) ||
                   ferry_buf_putc(sql, '.') || ferry_sql_ident(table, sql)
               ? FERRY_ENOMEM
               : FERRY_OK;
}

static int freeze_one(ferry_buf *sql, size_t n, const char *pid, const char *name)
{
    return ferry_buf_puts(sql, n ? ", FREEZE PARTITION ID " : " FREEZE PARTITION ID ") ||
                   ferry_ch_quote(sql, pid) || ferry_buf_puts(sql, " WITH NAME ") ||
                   ferry_ch_quote(sql, name)
               ? FERRY_ENOMEM
               : FERRY_OK;
}

static int freeze_many(agent_env *env, json_t *req, json_t *ids, json_t **resp, ferry_err *err)
{
    const char *db, *table, *name;
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0, todo = 0, i;
    ferry_buf sql = FERRY_BUF_INIT;
    json_t *parts = json_array(), *frozen = json_array(), *id;
    int rc;
    if ((rc = agent_req_str(req, "database", &db, err)) ||
        (rc = agent_req_str(req, "table", &table, err)) ||
        (rc = agent_req_name(req, "name", &name, err)) ||
        (rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)) ||
        (rc = list_frozen(env, dirs, ndirs, name, NULL, frozen, err)))
        goto out;
    if (!parts || !frozen) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (freeze_head(&sql, db, table)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    json_array_foreach(ids, i, id) {
        const char *pid = json_string_value(id);
        if (!pid || !ferry_safe_component(pid, false)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "partition_ids[%zu] is not a partition id", i);
            goto out;
        }
        size_t pl = strlen(pid), k;
        json_t *fp;
        bool have = false;
        json_array_foreach(frozen, k, fp) {
            const char *pn = json_string_value(json_object_get(fp, "name"));
            have = have || (pn && !strncmp(pn, pid, pl) && pn[pl] == '_');
        }
        if (have)
            continue; /* frozen by an earlier attempt under this name */
        if (freeze_one(&sql, todo++, pid, name)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }
    if (todo && (rc = ferry_ch_query_buf(env->ch, ferry_buf_cstr(&sql), NULL, NULL, NULL, err)))
        goto out;
    if (todo && (rc = list_frozen(env, dirs, ndirs, name, NULL, parts, err)))
        goto out;
    *resp = json_pack("{s:s, s:s, s:s, s:b, s:O}", "database", db, "table", table, "name", name,
                      "existing", todo == 0, "parts", todo ? parts : frozen);
    if (!*resp)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    json_decref(parts);
    json_decref(frozen);
    ferry_buf_free(&sql);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
}

/* freeze with "partitions": [{partition_id, name}, ...]: every partition frozen under its own
 * name by one ALTER TABLE (one FREEZE command each), so a caller that journals one job per
 * partition keeps one freeze per job (removed, or redone under a new name, on its own) and still
 * pays one statement. A partition already frozen under its name is left out of the ALTER; one
 * without parts freezes nothing (the answer lists no part of it). Each frozen part of the answer
 * carries its freeze name ("freeze") and partition ("partition_id"). */
static int freeze_named(agent_env *env, json_t *req, json_t *list, json_t **resp, ferry_err *err)
{
    const char *db, *table;
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0, todo = 0, i;
    ferry_buf sql = FERRY_BUF_INIT;
    json_t *parts = json_array(), *one = json_array(), *e;
    int rc;
    if ((rc = agent_req_str(req, "database", &db, err)) ||
        (rc = agent_req_str(req, "table", &table, err)))
        goto out;
    if (!parts || !one) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (json_array_size(list) == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "\"partitions\" must be a non-empty array");
        goto out;
    }
    json_array_foreach(list, i, e) {
        const char *pid = json_string_value(json_object_get(e, "partition_id"));
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!pid || !name || !ferry_safe_component(pid, false) ||
            !ferry_safe_component(name, false)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "partitions[%zu] needs \"partition_id\" and "
                               "\"name\", plain path components", i);
            goto out;
        }
    }
    if ((rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)))
        goto out;
    if (freeze_head(&sql, db, table)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    json_array_foreach(list, i, e) {
        const char *pid = json_string_value(json_object_get(e, "partition_id"));
        const char *name = json_string_value(json_object_get(e, "name"));
        json_array_clear(one);
        if ((rc = list_frozen(env, dirs, ndirs, name, pid, one, err)))
            goto out;
        if (json_array_size(one))
            continue; /* frozen by an earlier request under this name */
        if (freeze_one(&sql, todo++, pid, name)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }
    if (todo && (rc = ferry_ch_query_buf(env->ch, ferry_buf_cstr(&sql), NULL, NULL, NULL, err)))
        goto out;
    json_array_foreach(list, i, e) {
        const char *pid = json_string_value(json_object_get(e, "partition_id"));
        const char *name = json_string_value(json_object_get(e, "name"));
        size_t k;
        json_t *fp;
        json_array_clear(one);
        if ((rc = list_frozen(env, dirs, ndirs, name, pid, one, err)))
            goto out;
        json_array_foreach(one, k, fp) {
            json_object_set_new(fp, "freeze", json_string(name));
            json_object_set_new(fp, "partition_id", json_string(pid));
        }
        if (json_array_extend(parts, one)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }
    *resp = json_pack("{s:s, s:s, s:b, s:I, s:O}", "database", db, "table", table, "existing",
                      todo == 0, "frozen_now", (json_int_t)todo, "parts", parts);
    if (!*resp)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    json_decref(parts);
    json_decref(one);
    ferry_buf_free(&sql);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
}

static int frozen_common(agent_env *env, json_t *req, json_t **resp, bool do_freeze,
                         ferry_err *err)
{
    json_t *ids = json_object_get(req, "partition_ids");
    json_t *named = json_object_get(req, "partitions");
    if (do_freeze && json_is_array(named))
        return freeze_named(env, req, named, resp, err);
    if (do_freeze && json_is_array(ids))
        return freeze_many(env, req, ids, resp, err);
    const char *db, *table, *name, *pid = NULL;
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0;
    ferry_buf sql = FERRY_BUF_INIT;
    json_t *parts = json_array();
    bool existing = false;
    int rc;
    if ((rc = agent_req_str(req, "database", &db, err)) ||
        (rc = agent_req_str(req, "table", &table, err)) ||
        (rc = agent_req_name(req, "name", &name, err)))
        goto out;
    if (do_freeze || json_object_get(req, "partition_id"))
        if ((rc = agent_req_name(req, "partition_id", &pid, err)))
            goto out;
    if ((rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)) ||
        (rc = list_frozen(env, dirs, ndirs, name, pid, parts, err)))
        goto out;
    existing = json_array_size(parts) > 0;
    if (do_freeze && !existing) {
        uint64_t active = 0;
        if ((rc = count_active(env, db, table, pid, &active, err)))
            goto out;
        if (active == 0) {
            rc = ferry_err_set(err, FERRY_ENOTFOUND, "partition ID '%s' of %s.%s has no parts",
                               pid, db, table);
            goto out;
        }
        int b = ferry_buf_puts(&sql, "ALTER TABLE ");
        b |= ferry_sql_ident(db, &sql);
        b |= ferry_buf_putc(&sql, '.');
        b |= ferry_sql_ident(table, &sql);
        b |= ferry_buf_puts(&sql, " FREEZE PARTITION ID ");
        b |= ferry_ch_quote(&sql, pid);
        b |= ferry_buf_puts(&sql, " WITH NAME ");
        b |= ferry_ch_quote(&sql, name);
        if (b) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = ferry_ch_query_buf(env->ch, ferry_buf_cstr(&sql), NULL, NULL, NULL, err)))
            goto out;
        if ((rc = list_frozen(env, dirs, ndirs, name, pid, parts, err)))
            goto out;
    } else if (!do_freeze && !existing) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "nothing of %s.%s is frozen under '%s'%s%s",
                           db, table, name, pid ? " for partition ID " : "", pid ? pid : "");
        goto out;
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:b, s:O}", "database", db, "table", table, "name",
                          name, "existing", existing, "parts", parts);
    if (pid)
        json_object_set_new(o, "partition_id", json_string(pid));
    *resp = o;
out:
    json_decref(parts);
    ferry_buf_free(&sql);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
}

/* ClickHouse keeps FREEZE's counter in shadow/increment.txt and, on a server that never froze
 * anything, creates it on the first FREEZE: a second FREEZE at that moment (two moves from one
 * fresh server, a tier wave beside a move) can read the file created but not yet written and
 * fail with "File .../shadow/increment.txt is empty. You must fill it manually" (code 32,
 * ATTEMPT_TO_READ_AFTER_EOF) before it froze anything. Seen in `make test-loaded`
 * (move_bandwidth_shard). The file is written by then: the whole operation runs again (it looks
 * again at what is frozen under the name), a few times. */
#define FREEZE_COUNTER_TRIES 5

static bool freeze_counter_race(const ferry_err *err)
{
    return strstr(err->msg, "increment.txt is empty") != NULL;
}

int agent_op_freeze(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    /* the sends of the frozen parts come next, several at once: the table's paths, looked up
     * here, are in the cache before them (each would look them up again, side by side) */
    env->cache_fill = true;
    int rc = frozen_common(env, req, resp, true, err);
    for (int i = 1; rc && i < FREEZE_COUNTER_TRIES && freeze_counter_race(err); i++) {
        FLOG_INFO("msg=\"agent: FREEZE raced ClickHouse's first write of its counter; "
                  "again\" try=%d", i + 1);
        ferry_err_clear(err);
        usleep(20000u * (unsigned)i);
        rc = frozen_common(env, req, resp, true, err);
    }
    return rc;
}

int agent_op_frozen(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    return frozen_common(env, req, resp, false, err);
}

/* ---- placing a part folder into detached/ ------------------------------------------------- */

int agent_make_tmp(agent_env *env, const agent_table_dir *td, char **detached, char **tmp,
                   ferry_err *err)
{
    char p[4400];
    snprintf(p, sizeof p, "%sdetached", td->path);
    int rc = ferry_roots_check(&env->roots, p, detached, err);
    if (rc)
        return rc;
    if ((rc = agent_mkdir(*detached, err)))
        return rc;
    char name[64];
    agent_tmp_name(name, sizeof name);
    snprintf(p, sizeof p, "%s/%s", *detached, name);
    if (mkdir(p, 0755) != 0) {
        agent_note_errno(env, errno);
        return ferry_err_set(err, FERRY_EIO, "cannot create %s: %s", p, strerror(errno));
    }
    if (!(*tmp = strdup(p))) {
        rmdir(p);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    return FERRY_OK;
}

int agent_place_tmp(agent_env *env, const char *detached, const char *tmp, const char *part,
                    bool sync_detached, char **final_out, bool *existing, ferry_err *err)
{
    char final[4400];
    snprintf(final, sizeof final, "%s/%s", detached, part);
    int rc = FERRY_OK;
    *existing = false;
    struct stat sb;
    if (lstat(final, &sb) == 0) {
        ferry_err ignored = {0};
        bool same = S_ISDIR(sb.st_mode) && agent_dirs_equal(tmp, final);
        agent_rmtree(tmp, &ignored);
        if (!same)
            return ferry_err_set(err, FERRY_ECONFLICT, "%s already exists with other content; "
                                 "remove it first (remove-detached)", final);
        *existing = true;
    } else if (rename(tmp, final) != 0) {
        return ferry_err_set(err, FERRY_EIO, "rename %s to %s: %s", tmp, final, strerror(errno));
    } else if (sync_detached && (rc = agent_fsync_dir(detached, err))) {
        return rc;
    }
    (void)env;
    if (!(*final_out = strdup(final)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

/* ---- remove-detached ------------------------------------------------------------------------ */

/* Removes detached/<part> on every disk of the table (dirs; or on `disk`) and answers it. */
static int remove_detached_one(agent_env *env, const agent_table_dir *dirs, size_t ndirs,
                               const char *db, const char *table, const char *part,
                               const char *disk, json_t **resp, ferry_err *err)
{
    int rc = FERRY_OK;
    json_t *removed = json_array();
    if (!removed)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < ndirs; i++) {
        if (disk && strcmp(disk, dirs[i].disk->name))
            continue;
        char p[4400], *canon = NULL;
        struct stat sb;
        snprintf(p, sizeof p, "%sdetached/%s", dirs[i].path, part);
        if (lstat(p, &sb) != 0)
            continue;
        if (S_ISLNK(sb.st_mode)) {
            /* the check of the roots below would follow it, and the removal would take its
             * target (a live part, another table): ClickHouse never makes one here */
            rc = ferry_err_set(err, FERRY_EINVAL, "%s is a symlink; ferry never removes through "
                               "one (check where it points, then remove the link by hand)", p);
            goto out;
        }
        if (agent_tmp_in_use(part)) {
            env->status = 409;
            rc = ferry_err_set(err, FERRY_ECONFLICT, "%s is being written by a live agent "
                               "(a receive in progress); not removed", p);
            goto out;
        }
        if ((rc = ferry_roots_check(&env->roots, p, &canon, err)))
            goto out;
        /* A plain file removal: pointer files go, the objects they name are never touched. */
        rc = agent_trash_remove(env, dirs[i].disk->path, canon, err);
        if (rc == FERRY_OK)
            json_array_append_new(removed, json_pack("{s:s, s:s}", "disk", dirs[i].disk->name,
                                                     "path", canon));
        free(canon);
        if (rc)
            goto out;
    }
    *resp = json_pack("{s:s, s:s, s:s, s:b, s:O}", "database", db, "table", table, "part", part,
                      "existed", json_array_size(removed) > 0, "removed", removed);
out:
    json_decref(removed);
    return rc;
}

/* remove-detached {part} or {parts: [...]}: the second removes each part as if asked alone, in
 * order (the table looked up once), stops at the first error, and answers each part in
 * "results". */
int agent_op_remove_detached(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    const char *db, *table, *part = NULL, *disk = agent_req_opt(req, "disk");
    json_t *parts = json_object_get(req, "parts"), *results = NULL, *p;
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0, i;
    int rc;
    if ((rc = agent_req_str(req, "database", &db, err)) ||
        (rc = agent_req_str(req, "table", &table, err)))
        goto out;
    if (json_is_array(parts)) {
        json_array_foreach(parts, i, p) if (!rc && (!json_string_value(p) ||
                                                    !ferry_safe_component(json_string_value(p),
                                                                          false)))
            rc = ferry_err_set(err, FERRY_EINVAL, "parts[%zu] is not a part name", i);
    } else {
        rc = agent_req_name(req, "part", &part, err);
    }
    if (rc || (rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)))
        goto out;
    if (part) {
        rc = remove_detached_one(env, dirs, ndirs, db, table, part, disk, resp, err);
        goto out;
    }
    if (!(results = json_array())) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    json_array_foreach(parts, i, p) {
        json_t *r = NULL;
        if ((rc = remove_detached_one(env, dirs, ndirs, db, table, json_string_value(p), disk,
                                      &r, err)))
            break;
        json_array_append_new(results, r);
    }
    if (!rc)
        *resp = json_pack("{s:O}", "results", results);
out:
    json_decref(results);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
}

/* ---- remove-freeze -------------------------------------------------------------------------- */

/* Runs ALTER TABLE ... UNFREEZE WITH NAME for the table whose uuid names a folder of the
 * shadow tree, so ClickHouse undoes FREEZE's ref_count increment on object-disk pointers. */
static int unfreeze_uuid(agent_env *env, const char *uuid, const char *name, json_t *done,
                         ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    /* by data path: system.tables.uuid is zero for tables of chdb's Overlay database */
    char needle[300];
    snprintf(needle, sizeof needle, "/%s/", uuid);
    int b = ferry_buf_puts(&sql, "SELECT DISTINCT database, name FROM system.tables WHERE "
                                 "arrayExists(p -> position(p, ");
    b |= ferry_ch_quote(&sql, needle);
    b |= ferry_buf_puts(&sql, ") > 0, data_paths)");
    int rc = b ? ferry_err_set(err, FERRY_ENOMEM, "out of memory")
               : ferry_ch_query_rows(env->ch, ferry_buf_cstr(&sql), &rows, NULL, err);
    if (rc || rows.n_rows != 1 || rows.n_cols != 2)
        goto out;
    const char *db = ferry_ch_rows_get(&rows, 0, 0), *t = ferry_ch_rows_get(&rows, 0, 1);
    char label[1024];
    snprintf(label, sizeof label, "%s.%s", db, t);
    size_t i;
    json_t *x;
    json_array_foreach(done, i, x) if (!strcmp(json_string_value(x), label)) goto out;
    ferry_buf_reset(&sql);
    b = ferry_buf_puts(&sql, "ALTER TABLE ");
    b |= ferry_sql_ident(db, &sql);
    b |= ferry_buf_putc(&sql, '.');
    b |= ferry_sql_ident(t, &sql);
    b |= ferry_buf_puts(&sql, " UNFREEZE WITH NAME ");
    b |= ferry_ch_quote(&sql, name);
    if (b) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = ferry_ch_query_buf(env->ch, ferry_buf_cstr(&sql), NULL, NULL, NULL, err)) ==
        FERRY_OK)
        json_array_append_new(done, json_string(label));
out:
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* Removes shadow/<name>/ on every disk (UNFREEZE first where it holds pointer files), adding
 * what it removed and unfroze to the two arrays. */
static int remove_freeze_one(agent_env *env, const char *name, json_t *removed, json_t *unfrozen,
                             ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; i < env->n_disks; i++) {
        const agent_disk *d = &env->disks[i];
        char p[4400], *canon = NULL;
        struct stat sb;
        snprintf(p, sizeof p, "%sshadow/%s", d->path, name);
        if (d->path[0] != '/' || lstat(p, &sb) != 0)
            continue;
        if (S_ISLNK(sb.st_mode))
            /* FREEZE makes a directory; a link would lead the removal to its target */
            return ferry_err_set(err, FERRY_EINVAL, "%s is a symlink; ferry never removes "
                                 "through one (check where it points, then remove the link by "
                                 "hand)", p);
        if ((rc = ferry_roots_check(&env->roots, p, &canon, err)))
            return rc;
        if (d->is_remote) {
            /* shadow/<name>/store/<xxx>/<uuid>/ */
            char sp[4500];
            snprintf(sp, sizeof sp, "%s/store", canon);
            DIR *s1 = opendir(sp);
            struct dirent *e1, *e2;
            while (s1 && (e1 = readdir(s1)) != NULL && rc == FERRY_OK) {
                if (e1->d_name[0] == '.')
                    continue;
                char p2[4800];
                snprintf(p2, sizeof p2, "%s/%s", sp, e1->d_name);
                DIR *s2 = opendir(p2);
                while (s2 && (e2 = readdir(s2)) != NULL && rc == FERRY_OK)
                    if (e2->d_name[0] != '.')
                        rc = unfreeze_uuid(env, e2->d_name, name, unfrozen, err);
                if (s2)
                    closedir(s2);
            }
            if (s1)
                closedir(s1);
            if (rc) {
                free(canon);
                return rc;
            }
        }
        rc = agent_trash_remove(env, d->path, canon, err);
        if (rc == FERRY_OK)
            json_array_append_new(removed, json_pack("{s:s, s:s}", "disk", d->name, "path",
                                                     canon));
        free(canon);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

/* remove-freeze {name} or {names: [...]}: the second removes each freeze as if asked alone, in
 * order, stops at the first error, and answers each one in "results". */
int agent_op_remove_freeze(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    const char *name = NULL;
    json_t *names = json_object_get(req, "names"), *results = json_array(), *n;
    json_t *removed = NULL, *unfrozen = NULL;
    size_t i;
    int rc = results ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc)
        goto out;
    if (json_is_array(names)) {
        if (json_array_size(names) == 0)
            rc = ferry_err_set(err, FERRY_EINVAL, "\"names\" must be a non-empty array");
        json_array_foreach(names, i, n) if (!rc && (!json_string_value(n) ||
                                                    !ferry_safe_component(json_string_value(n),
                                                                          false)))
            rc = ferry_err_set(err, FERRY_EINVAL, "names[%zu] is not a freeze name", i);
    } else {
        rc = agent_req_name(req, "name", &name, err);
    }
    if (rc || (rc = agent_env_roots(env, err)))
        goto out;
    size_t count = json_is_array(names) ? json_array_size(names) : 1;
    for (i = 0; i < count; i++) {
        const char *nm = name ? name : json_string_value(json_array_get(names, i));
        json_decref(removed);
        json_decref(unfrozen);
        removed = json_array();
        unfrozen = json_array();
        if (!removed || !unfrozen) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = remove_freeze_one(env, nm, removed, unfrozen, err)))
            goto out;
        json_t *one = json_pack("{s:s, s:b, s:O, s:O}", "name", nm, "existed",
                                json_array_size(removed) > 0, "removed", removed, "unfrozen",
                                unfrozen);
        if (!one || json_array_append_new(results, one)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }
    *resp = name ? json_incref(json_array_get(results, 0)) : json_pack("{s:O}", "results",
                                                                       results);
    if (!*resp)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    json_decref(removed);
    json_decref(unfrozen);
    json_decref(results);
    return rc;
}

/* ---- pointers ------------------------------------------------------------------------------- */

/* Adds {path, error} to invalid: something under the cold disk that could not be read, so
 * what it references is unknown (the sweep and retention then count the read as incomplete). */
static void walk_invalid(json_t *invalid, const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void walk_invalid(json_t *invalid, const char *rel, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    json_array_append_new(invalid, json_pack("{s:s, s:s}", "path", rel, "error", why));
}

/* Lists every file under base/rel as a pointer file (files) or as something that could not be
 * read (invalid). Only a name that vanished while the walk ran (ENOENT: ClickHouse removed a
 * part's folder) is skipped; any other error, or a path too long for its buffer, is an invalid
 * entry, never a silent gap. Errors only for the walk itself (memory). */
static int walk_pointers(agent_env *env, const char *base, const char *rel, json_t *files,
                         json_t *invalid, int depth, unsigned *reread_ms, ferry_err *err)
{
    char p[4400];
    if ((size_t)snprintf(p, sizeof p, "%s%s", base, rel) >= sizeof p) {
        walk_invalid(invalid, rel, "the path is longer than %zu bytes", sizeof p - 1);
        return FERRY_OK;
    }
    if (depth > 32) {
        walk_invalid(invalid, rel, "more than 32 directories deep");
        return FERRY_OK;
    }
    DIR *d = opendir(p);
    if (!d) {
        if (errno != ENOENT)
            walk_invalid(invalid, rel, "cannot open the directory: %s", strerror(errno));
        return FERRY_OK;
    }
    struct dirent *e;
    int rc = FERRY_OK;
    for (;;) {
        errno = 0;
        if (!(e = readdir(d))) {
            if (errno)
                walk_invalid(invalid, rel, "cannot read the directory: %s", strerror(errno));
            break;
        }
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char r2[4400], full[4400];
        if ((size_t)snprintf(r2, sizeof r2, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
                sizeof r2 ||
            (size_t)snprintf(full, sizeof full, "%s%s", base, r2) >= sizeof full) {
            walk_invalid(invalid, rel, "a name in it makes a path longer than %zu bytes",
                         sizeof full - 1);
            continue;
        }
        struct stat sb;
        if (lstat(full, &sb) != 0) {
            if (errno != ENOENT)
                walk_invalid(invalid, r2, "lstat: %s", strerror(errno));
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            if (depth == 0 && agent_trash_skip(r2))
                continue; /* removed folders on their way out (trash.c) */
            if ((rc = walk_pointers(env, base, r2, files, invalid, depth + 1, reread_ms, err)))
                break;
            continue;
        }
        if (S_ISLNK(sb.st_mode))
            continue; /* Atomic databases link data/DB/TABLE to store/...: walked there */
        if (!S_ISREG(sb.st_mode)) {
            /* a fifo or device under the metadata path is not ClickHouse's: say so rather than
             * guess what it names */
            walk_invalid(invalid, r2, "not a regular file, directory or symlink");
            continue;
        }
        ferry_pointer pt = FERRY_POINTER_INIT;
        ferry_err perr = {0};
        json_t *objs = pointer_objects_settled(env, full, &pt, reread_ms, &perr);
        if (objs)
            json_array_append_new(files, json_pack("{s:s, s:i, s:i, s:b, s:I, s:I, s:o}", "path",
                                                   r2, "version", pt.version, "ref_count",
                                                   (int)pt.ref_count, "read_only", pt.read_only,
                                                   "links", (json_int_t)sb.st_nlink, "size",
                                                   (json_int_t)ferry_pointer_total_size(&pt),
                                                   "objects", objs));
        else if (perr.code != FERRY_ENOTFOUND) /* removed since readdir: names nothing now */
            json_array_append_new(invalid, json_pack("{s:s, s:s}", "path", r2, "error",
                                                     perr.msg));
        ferry_pointer_free(&pt);
    }
    closedir(d);
    return rc;
}

/* Marks the files of parts ClickHouse no longer counts as active (outdated: replaced by a merge,
 * a MOVE / REPLACE PARTITION, a DETACH; their folders stay until the server's cleanup thread
 * removes them, old_parts_lifetime later) with "outdated": true. They still name objects, so the
 * sweep keeps them as references; they are not where the server reads the part from, so they
 * are not drift. Best effort: when system.parts cannot be read nothing is marked (the sweep
 * then reports such folders as it did before). */
static void mark_outdated(agent_env *env, json_t *files)
{
    ferry_ch_rows rows = {0};
    ferry_err qerr = {0};
    if (ferry_ch_query_rows(env->ch, "SELECT disk_name, path FROM system.parts WHERE NOT active",
                            &rows, NULL, &qerr)) {
        FLOG_WARN("agent: pointers: cannot list outdated parts: %s", qerr.msg);
        return;
    }
    size_t k;
    json_t *f;
    json_array_foreach(files, k, f)
    {
        const char *disk = json_string_value(json_object_get(f, "disk"));
        const char *path = json_string_value(json_object_get(f, "path"));
        const agent_disk *d = disk ? agent_env_disk(env, disk) : NULL;
        if (!d || !path)
            continue;
        size_t dl = strlen(d->path);
        for (size_t r = 0; r < rows.n_rows; r++) {
            /* by path alone (not disk_name): a cache disk and the disk it wraps share one
             * metadata path, and the file may be listed under either */
            const char *ppath = ferry_ch_rows_get(&rows, r, 1);
            if (strncmp(ppath, d->path, dl))
                continue;
            const char *rel = ppath + dl; /* store/xxx/uuid/part/ */
            size_t rl = strlen(rel);
            if (rl && !strncmp(path, rel, rl) && rel[rl - 1] == '/') {
                json_object_set_new(f, "outdated", json_true());
                break;
            }
        }
    }
    ferry_ch_rows_free(&rows);
}

int agent_op_pointers(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    const char *disk = agent_req_opt(req, "disk"), *under = agent_req_opt(req, "under");
    int rc;
    if (under && !ferry_safe_relpath(under))
        return ferry_err_set(err, FERRY_EINVAL, "\"under\": '%.200s' is not a relative path of "
                             "plain names", under);
    if ((rc = agent_env_roots(env, err)))
        return rc;
    /* without the store's layout no key can be named in ferry's terms, and a listing whose
     * keys are all "outside the store" would make every object look unreferenced */
    if ((rc = agent_env_store(env, err))) {
        ferry_err_prefix(err, "pointers: cannot name the objects' store keys: ");
        return rc;
    }
    json_t *files = json_array(), *invalid = json_array(), *disks = json_array();
    if (!files || !invalid || !disks) {
        json_decref(files);
        json_decref(invalid);
        json_decref(disks);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    bool any = false;
    unsigned reread_ms = POINTER_REREAD_BUDGET_MS;
    for (size_t i = 0; i < env->n_disks && rc == FERRY_OK; i++) {
        const agent_disk *d = &env->disks[i];
        if (!d->is_remote || (disk ? strcmp(disk, d->name) != 0 : !agent_disk_walks(env, d)))
            continue;
        any = true;
        char *canon = NULL;
        if ((rc = ferry_roots_check(&env->roots, d->path, &canon, err)))
            break;
        char base[4400];
        snprintf(base, sizeof base, "%s/", canon);
        free(canon);
        size_t before = json_array_size(files);
        char rel[4400];
        snprintf(rel, sizeof rel, "%s", under ? under : "");
        size_t rl = strlen(rel);
        if (rl && rel[rl - 1] == '/')
            rel[rl - 1] = '\0';
        rc = walk_pointers(env, base, rel, files, invalid, 0, &reread_ms, err);
        for (size_t k = before; k < json_array_size(files); k++)
            json_object_set_new(json_array_get(files, k), "disk", json_string(d->name));
        json_array_append_new(disks, json_pack("{s:s, s:s}", "name", d->name, "path", base));
    }
    if (rc == FERRY_OK && !any)
        rc = ferry_err_set(err, FERRY_EINVAL, disk ? "no object-storage disk named '%s'"
                                                   : "the server has no object-storage disk%s",
                           disk ? disk : "");
    if (rc == FERRY_OK)
        mark_outdated(env, files);
    if (rc == FERRY_OK)
        *resp = json_pack("{s:O, s:O, s:O}", "disks", disks, "files", files, "invalid", invalid);
    json_decref(files);
    json_decref(invalid);
    json_decref(disks);
    return rc;
}
