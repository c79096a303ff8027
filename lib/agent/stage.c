/* The agent's place-parts operation: the middle step of the strictly read-only load of a staging
 * table (lib/flow/staging_load.c). With the target table DETACHed, each named part folder is
 * renamed from detached/ of the source table (from_table, attached; the target itself when
 * absent) into the target's data directory on the same disk, under the name the caller chose, so
 * that ATTACH TABLE loads it as a server start would. Nothing is copied and the object store is
 * never contacted: pointer files stay the same files (a rename on one file system), and
 * ClickHouse never runs a partition statement on them.
 *
 * Request: {database, table, [from_table,] data_paths: [the target's data paths as system.tables
 * gave them before DETACH TABLE], parts: [{disk, name, to}]}. Refused unless the target is
 * detached (an attached table's directory belongs to ClickHouse), every data path is inside the
 * roots, on the disk it is named for and no attached table's, and each `to` is a part name of the
 * same partition. Answer: {placed: [{disk, name, to}], already: N (parts found placed, not in
 * detached/)}. */
#include "agent_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ferry/buf.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

typedef struct stage_dir {
    const agent_disk *disk;
    char *path; /* canonical, ending with '/' */
} stage_dir;

/* The partition id of a part name: what precedes its first '_' (ClickHouse's partition ids
 * never hold one); 0 when the name has none. */
static size_t pid_len(const char *name)
{
    const char *u = strchr(name, '_');
    return u ? (size_t)(u - name) : 0;
}

/* Whether an attached table has `path` among its data paths (canonical or as given): such a
 * directory is ClickHouse's, whatever table the request names. */
static int path_of_attached(agent_env *env, const char *path, const char *canon, bool *taken,
                            ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    int b = ferry_buf_puts(&sql, "SELECT count() FROM system.tables ARRAY JOIN data_paths AS p "
                                 "WHERE trimRight(p, '/') IN (trimRight(");
    b |= ferry_ch_quote(&sql, path);
    b |= ferry_buf_puts(&sql, ", '/'), trimRight(");
    b |= ferry_ch_quote(&sql, canon);
    b |= ferry_buf_puts(&sql, ", '/'))");
    int rc = b ? ferry_err_set(err, FERRY_ENOMEM, "out of memory")
               : ferry_ch_query_rows(env->ch, ferry_buf_cstr(&sql), &rows, NULL, err);
    *taken = !rc && rows.n_rows == 1 && strcmp(ferry_ch_rows_get(&rows, 0, 0), "0");
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* Each data path checked against the roots, matched to its disk, and refused when an attached
 * table uses it. */
static int stage_dirs(agent_env *env, json_t *paths, stage_dir **out, size_t *n, ferry_err *err)
{
    size_t np = json_array_size(paths), i;
    json_t *v;
    stage_dir *d = calloc(np + 1, sizeof *d);
    int rc = d ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    *n = 0;
    if (!rc && np == 0)
        rc = ferry_err_set(err, FERRY_EINVAL, "\"data_paths\" (a non-empty array) is required");
    json_array_foreach(paths, i, v) {
        const char *p = json_string_value(v);
        char *canon = NULL;
        if (rc)
            break;
        if (!p || !*p) {
            rc = ferry_err_set(err, FERRY_EINVAL, "data_paths[%zu] is not a path", i);
            break;
        }
        if ((rc = ferry_roots_check(&env->roots, p, &canon, err)))
            break;
        bool taken = false;
        if ((rc = path_of_attached(env, p, canon, &taken, err)) == FERRY_OK && taken) {
            env->status = 409;
            rc = ferry_err_set(err, FERRY_ECONFLICT, "data path %s belongs to an attached table; "
                               "place-parts only fills a detached table's directories", p);
        }
        if (rc) {
            free(canon);
            break;
        }
        /* the disk whose path is the longest prefix: a disk's path may lie inside another's
         * (the lab's cold metadata under disks/cold/ of the default disk's path) */
        const agent_disk *disk = NULL;
        for (size_t k = 0; k < env->n_disks; k++)
            if (ferry_starts_with(p, env->disks[k].path) &&
                ferry_safe_relpath(p + strlen(env->disks[k].path)) &&
                (!disk || strlen(env->disks[k].path) > strlen(disk->path)))
                disk = &env->disks[k];
        if (!disk) {
            free(canon);
            rc = ferry_err_set(err, FERRY_EINVAL, "data path %s is under no disk of the server",
                               p);
            break;
        }
        size_t len = strlen(canon);
        d[*n].disk = disk;
        d[*n].path = malloc(len + 2);
        if (!d[*n].path) {
            free(canon);
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
        snprintf(d[*n].path, len + 2, "%s%s", canon, len && canon[len - 1] == '/' ? "" : "/");
        free(canon);
        (*n)++;
    }
    *out = d;
    return rc;
}

static void stage_dirs_free(stage_dir *d, size_t n)
{
    for (size_t i = 0; d && i < n; i++)
        free(d[i].path);
    free(d);
}

/* Moves <from>detached/<name> to <to> in dir. *already when it is not in detached/ but placed. */
static int place_one(agent_env *env, const char *from, const stage_dir *dir, const char *name,
                     const char *to, bool *already, ferry_err *err)
{
    char src[4400], dst[4400];
    struct stat sb;
    snprintf(src, sizeof src, "%sdetached/%s", from, name);
    snprintf(dst, sizeof dst, "%s%s", dir->path, to);
    *already = false;
    if (lstat(src, &sb) != 0) {
        if (errno == ENOENT && lstat(dst, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            *already = true; /* a repeated request: placed by the first */
            return FERRY_OK;
        }
        env->status = 404;
        return ferry_err_set(err, FERRY_ENOTFOUND, "%s: %s", src, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return ferry_err_set(err, FERRY_EINVAL, "%s is not a directory (a symlink or a file); "
                             "ferry places only part folders", src);
    if (lstat(dst, &sb) == 0) {
        env->status = 409;
        return ferry_err_set(err, FERRY_ECONFLICT, "%s exists already; nothing was placed over "
                             "it", dst);
    }
    if (rename(src, dst) != 0) {
        agent_note_errno(env, errno);
        return ferry_err_set(err, FERRY_EIO, "rename %s to %s: %s", src, dst, strerror(errno));
    }
    return FERRY_OK;
}

int agent_op_place_parts(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    const char *db, *table, *from_table = agent_req_opt(req, "from_table");
    agent_table_dir *from = NULL;
    size_t nfrom = 0;
    json_t *parts = json_object_get(req, "parts"), *placed = NULL, *p;
    stage_dir *dirs = NULL;
    size_t ndirs = 0, i, already = 0;
    ferry_ch_data_path *live = NULL;
    size_t nlive = 0;
    int rc;
    if ((rc = agent_req_str(req, "database", &db, err)) ||
        (rc = agent_req_name(req, "table", &table, err)) || (rc = agent_env_roots(env, err)))
        goto out;
    if (!json_is_array(parts) || json_array_size(parts) == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "\"parts\" (a non-empty array) is required");
        goto out;
    }
    /* the table must be detached: an attached table's folders are ClickHouse's */
    rc = ferry_ch_table_data_paths(env->ch, db, table, &live, &nlive, err);
    if (rc == FERRY_OK && nlive > 0) {
        env->status = 409;
        rc = ferry_err_set(err, FERRY_ECONFLICT, "table %s.%s is attached; place-parts needs it "
                           "detached (DETACH TABLE first)", db, table);
        goto out;
    }
    if (rc != FERRY_OK && rc != FERRY_ENOTFOUND)
        goto out;
    rc = FERRY_OK;
    if ((rc = stage_dirs(env, json_object_get(req, "data_paths"), &dirs, &ndirs, err)))
        goto out;
    if (from_table && !ferry_safe_component(from_table, false)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "\"from_table\": '%.200s' is not a table name",
                           from_table);
        goto out;
    }
    if (from_table && (rc = agent_table_dirs(env, db, from_table, &from, &nfrom, err)))
        goto out; /* the source is attached: its directories come from ClickHouse */
    /* every entry checked before the first rename */
    json_array_foreach(parts, i, p) {
        const char *disk = json_string_value(json_object_get(p, "disk"));
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *to = json_string_value(json_object_get(p, "to"));
        if (!disk || !name || !to || !ferry_safe_component(name, false) ||
            !ferry_safe_component(to, false) || !pid_len(name) || pid_len(name) != pid_len(to) ||
            strncmp(name, to, pid_len(name)))
            rc = ferry_err_set(err, FERRY_EINVAL, "parts[%zu]: expected {disk, name, to} with "
                               "part names of one partition", i);
        bool found = false, found_from = !from_table;
        for (size_t k = 0; !rc && k < ndirs && !found; k++)
            found = !strcmp(dirs[k].disk->name, disk);
        for (size_t k = 0; !rc && k < nfrom && !found_from; k++)
            found_from = !strcmp(from[k].disk->name, disk);
        if (!rc && (!found || !found_from))
            rc = ferry_err_set(err, FERRY_EINVAL, "parts[%zu]: %s has no data path on disk '%s'",
                               i, found ? from_table : table, disk);
        if (rc)
            goto out;
    }
    if (!(placed = json_array())) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    json_array_foreach(parts, i, p) {
        const char *disk = json_string_value(json_object_get(p, "disk"));
        const stage_dir *d = NULL;
        const char *src = NULL;
        for (size_t k = 0; k < ndirs && !d; k++)
            if (!strcmp(dirs[k].disk->name, disk))
                d = &dirs[k];
        for (size_t k = 0; k < nfrom && !src; k++)
            if (!strcmp(from[k].disk->name, disk))
                src = from[k].path;
        bool was = false;
        if ((rc = place_one(env, src ? src : d->path, d,
                            json_string_value(json_object_get(p, "name")),
                            json_string_value(json_object_get(p, "to")), &was, err)))
            break;
        already += was;
        if (!was)
            json_array_append(placed, p);
    }
    /* the renames made durable, whatever happened: each data directory and the detached/ the
     * folders left */
    for (size_t k = 0; k < ndirs; k++) {
        char det[4400];
        ferry_err e = {0};
        const char *src = dirs[k].path;
        for (size_t f = 0; f < nfrom; f++)
            if (from[f].disk == dirs[k].disk)
                src = from[f].path;
        snprintf(det, sizeof det, "%sdetached", src);
        int frc = agent_fsync_dir(dirs[k].path, &e);
        struct stat sb;
        if (!frc && lstat(det, &sb) == 0)
            frc = agent_fsync_dir(det, &e);
        if (frc && !rc) {
            rc = frc;
            *err = e;
        }
    }
    if (!rc) {
        FLOG_INFO("msg=\"parts placed into a detached table\" table=%s.%s placed=%zu already=%zu",
                  db, table, json_array_size(placed), already);
        *resp = json_pack("{s:s, s:s, s:O, s:I}", "database", db, "table", table, "placed",
                          placed, "already", (json_int_t)already);
    }
out:
    json_decref(placed);
    stage_dirs_free(dirs, ndirs);
    agent_table_dirs_free(from, nfrom);
    ferry_ch_data_paths_free(live, nlive);
    return rc;
}
