/* The node agent's object-store operations (docs/agent.md): `upload` puts every file of a frozen
 * hot part unchanged into object storage, hashing each file on the way and checking it against
 * the part's checksums.txt; `write-pointers` writes a pointer part naming uploaded objects into
 * a table's detached/ on its object-storage disk. Both take one part per request, or many
 * ("parts": [...]): each part of such a request is answered on its own in "results", so one bad
 * part fails only itself, and the table, the stores and the pointer format are looked up once.
 * Split from ops.c (the operations on the server's own files). */
#include "agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/checksums.h"
#include "ferry/clock.h"
#include "ferry/log.h"
#include "ferry/pointer.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"

/* Files up to this size are read whole and also hashed with SHA-256 (the catalog's part records
 * name small files such as count.txt and columns.txt by it: docs/tiering.md). */
#define SMALL_FILE_MAX (1u << 20)
#define HASH_CHUNK (256u * 1024)
/* checksums.txt is kept in memory to be parsed (the receive side bounds it the same way). */
#define CHECKSUMS_MAX (16u << 20)

/* The answer of an upload or a pointer placement: {database, table, results}. */
static int answer_results(const char *db, const char *table, json_t *results, json_t **resp,
                          ferry_err *err)
{
    *resp = json_pack("{s:s, s:s, s:O}", "database", db, "table", table, "results", results);
    return *resp ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* {part, error, code, status} for one part of a many-part request that failed; env->status (set
 * by the failing step, e.g. 409 or 422) is consumed. */
static json_t *part_error(agent_env *env, const char *part, int rc, const ferry_err *err)
{
    unsigned status = env->status ? env->status : agent_status_for(rc);
    env->status = 0;
    return json_pack("{s:s, s:s, s:s, s:i}", "part", part, "error", err->msg, "code",
                     ferry_code_name(rc), "status", (int)status);
}

/* The "parts" array of a many-part request: every element an object whose `fields` are safe
 * path components. FERRY_EINVAL naming the first bad one. */
static int check_parts(json_t *parts, const char *const *fields, size_t nfields, ferry_err *err)
{
    size_t i;
    json_t *p;
    if (json_array_size(parts) == 0)
        return ferry_err_set(err, FERRY_EINVAL, "\"parts\" must be a non-empty array");
    json_array_foreach(parts, i, p) {
        for (size_t f = 0; f < nfields; f++) {
            const char *s = json_string_value(json_object_get(p, fields[f]));
            if (!s || !ferry_safe_component(s, false))
                return ferry_err_set(err, FERRY_EINVAL, "parts[%zu].%s must be a plain path "
                                     "component", i, fields[f]);
        }
    }
    return FERRY_OK;
}

/* ---- upload ---------------------------------------------------------------------------------- */

/* Compares the object at key with the size bytes of the file open on fd. */
typedef struct cmp_state {
    int fd;
    uint64_t pos;
    bool differs;
    char buf[64 * 1024];
} cmp_state;

static int cmp_sink(void *ud, const void *data, size_t len)
{
    cmp_state *c = ud;
    const char *d = data;
    while (len) {
        size_t n = len < sizeof c->buf ? len : sizeof c->buf;
        ssize_t r = pread(c->fd, c->buf, n, (off_t)c->pos);
        if (r <= 0 || memcmp(c->buf, d, (size_t)r)) {
            c->differs = true;
            return 1;
        }
        c->pos += (uint64_t)r;
        d += r;
        len -= (size_t)r;
    }
    return 0;
}

/* FERRY_OK when the object at key holds exactly the file's bytes; FERRY_ECONFLICT when it
 * holds others (ferry never replaces an object); other errors when it cannot be read. */
static int existing_is_same(ferry_objstore *st, const char *key, int fd, uint64_t size,
                            ferry_err *err)
{
    ferry_object_info info = {0};
    int rc = ferry_objstore_head(st, key, &info, err);
    if (rc)
        return rc;
    if (info.size != size)
        return ferry_err_set(err, FERRY_ECONFLICT, "%s exists with %llu bytes, the file has "
                             "%llu: ferry never replaces an object (remove it with the janitor "
                             "if nothing references it, e.g. ferry sweep)", key,
                             (unsigned long long)info.size, (unsigned long long)size);
    cmp_state *c = calloc(1, sizeof *c);
    if (!c)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    c->fd = fd;
    ferry_err gerr = {0};
    rc = size ? ferry_objstore_get(st, key, 0, 0, cmp_sink, c, &gerr) : FERRY_OK;
    if (c->differs || (rc == FERRY_OK && c->pos != size))
        rc = ferry_err_set(err, FERRY_ECONFLICT, "%s exists with other bytes of the same size: "
                           "ferry never replaces an object", key);
    else if (rc)
        rc = ferry_err_set(err, rc, "reading %s to compare: %s", key, gerr.msg);
    free(c);
    return rc;
}

/* What reading one file before its upload showed. */
typedef struct file_check {
    bool listed;       /* checksums.txt lists it; its size and hash matched */
    char file_hash[33];
    bool small;        /* read whole: sha256 is set */
    char sha256[65];
} file_check;

/* Reads the file on fd (size bytes) once: ClickHouse's file hash when checksums.txt lists it
 * (entry e; a size or hash other than the listed one is FERRY_EINVAL with status 422: the frozen
 * part is damaged), and SHA-256 when it is small. A large unlisted file is not read. */
static int check_file(agent_env *env, int fd, const char *part, const char *name, uint64_t size,
                      const ferry_checksum_entry *e, file_check *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    out->small = size <= SMALL_FILE_MAX;
    if (!e && !out->small)
        return FERRY_OK;
    int rc = FERRY_OK;
    size_t bufsz = out->small ? (size_t)(size ? size : 1) : HASH_CHUNK;
    unsigned char *buf = malloc(bufsz);
    ferry_part_hasher *h = e ? malloc(sizeof *h) : NULL;
    if (!buf || (e && !h)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (h)
        ferry_part_hasher_init(h);
    uint64_t pos = 0;
    while (pos < size) {
        size_t want = out->small ? (size_t)(size - pos)
                                 : (size - pos < HASH_CHUNK ? (size_t)(size - pos) : HASH_CHUNK);
        unsigned char *dst = out->small ? buf + pos : buf;
        ssize_t r = pread(fd, dst, want, (off_t)pos);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = ferry_err_set(err, FERRY_EIO, "reading %s of part %s: %s", name, part,
                               r < 0 ? strerror(errno) : "shorter than listed");
            goto out;
        }
        if (h)
            ferry_part_hasher_update(h, dst, (size_t)r);
        pos += (uint64_t)r;
    }
    if (out->small) {
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256(buf, (size_t)size, md);
        for (int b = 0; b < SHA256_DIGEST_LENGTH; b++)
            snprintf(out->sha256 + 2 * b, 3, "%02x", md[b]);
    }
    if (e) {
        uint64_t hash[2];
        ferry_part_hasher_final(h, hash);
        if (e->file_size != size || hash[0] != e->file_hash[0] || hash[1] != e->file_hash[1]) {
            env->status = 422;
            rc = ferry_err_set(err, FERRY_EINVAL, "part %s: %s does not match its checksums.txt "
                               "(%s): the frozen part is damaged, nothing more of it is "
                               "uploaded", part, name, e->file_size != size ? "size" : "hash");
            goto out;
        }
        out->listed = true;
        ferry_checksum_hex(hash, out->file_hash);
    }
out:
    free(buf);
    free(h);
    return rc;
}

/* The part's checksums.txt parsed into *sums; false (and why in the log) when it is missing or
 * unreadable: the upload then goes on unchecked and says so (verified: false). */
static bool read_sums(const char *dir, const char *part, ferry_checksums *sums)
{
    char p[4400], *data = NULL;
    size_t len = 0;
    ferry_err e = {0};
    snprintf(p, sizeof p, "%s/checksums.txt", dir);
    bool ok = agent_read_small(p, CHECKSUMS_MAX, &data, &len, &e) == FERRY_OK &&
              ferry_checksums_parse(data, len, sums, &e) == FERRY_OK;
    if (!ok)
        FLOG_INFO("agent: upload of part %s without hash checks: %s", part, e.msg);
    free(data);
    return ok;
}

/* The row count in a part folder's count.txt (JSON null when unreadable). */
static json_t *count_rows(const char *dir)
{
    char p[4400], *data = NULL;
    size_t len = 0;
    uint64_t rows = 0;
    ferry_err ignored = {0};
    snprintf(p, sizeof p, "%s/count.txt", dir);
    json_t *r = NULL;
    if (agent_read_small(p, 64, &data, &len, &ignored) == FERRY_OK) {
        ferry_chomp(data);
        if (ferry_parse_u64(data, &rows))
            r = json_integer((json_int_t)rows);
    }
    free(data);
    return r ? r : json_null();
}

/* Files uploaded together (ferry_objstore_put_fds): each holds a descriptor until its put. */
#define UPLOAD_BATCH 64

typedef struct upload_env {
    const char *db, *table;
    agent_table_dir *dirs;
    size_t ndirs;
    ferry_objstore *up;  /* uploader role: puts */
    ferry_objstore *chk; /* clickhouse role: existence checks (NULL without read credentials) */
} upload_env;

/* One file of a batch on its way to the store. */
typedef struct up_file {
    ferry_buf key;
    int fd;
    bool skip; /* already there with these bytes */
    file_check fc;
} up_file;

/* Uploads files[0..n) of the frozen part in folder dir: each read and checked first (against
 * sums when set: a listed file must match it), looked up in the store (an object already there
 * with the same bytes is skipped, one with other bytes is a conflict), then the rest put together
 * (ferry_objstore_put_fds), a put refused because the key appeared meanwhile compared the same
 * way. Appends each file's object to objs in order and adds to the counters. */
static int upload_batch(agent_env *env, upload_env *u, const char *dir, const char *freeze,
                        const char *part, const char *pid, const ferry_checksums *sums,
                        const agent_file *files, size_t n, json_t *objs, bool *verified,
                        double *check_ms, uint64_t *uploaded, uint64_t *skipped,
                        uint64_t *bytes, ferry_err *err)
{
    up_file *f = calloc(n, sizeof *f);
    const char **keys = calloc(n, sizeof *keys);
    int *fds = calloc(n, sizeof *fds), *rcs = calloc(n, sizeof *rcs);
    size_t np = 0;
    int rc = f && keys && fds && rcs ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; f && i < n; i++)
        f[i].fd = -1; /* keys: calloc'ed, empty buffers */
    for (size_t i = 0; rc == FERRY_OK && i < n; i++) {
        if ((rc = ferry_agent_object_key(env->store.prefix, u->db, u->table, pid, freeze, part,
                                         files[i].name, &f[i].key, err)))
            break;
        char fp[4700];
        if ((size_t)snprintf(fp, sizeof fp, "%s/%s", dir, files[i].name) >= sizeof fp) {
            rc = ferry_err_set(err, FERRY_EIO, "%s/%s: the path is too long", dir,
                               files[i].name);
            break;
        }
        if ((f[i].fd = open(fp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            rc = ferry_err_set(err, FERRY_EIO, "%s: %s", fp, strerror(errno));
            break;
        }
        /* The bytes are checked before they go: a listed file against checksums.txt, so the
         * object holds what the part's checksums say (the caller's verification compares part
         * hashes, which cover those checksums, instead of reading rows back). */
        const ferry_checksum_entry *e = sums ? ferry_checksums_find(sums, files[i].name) : NULL;
        if (sums && !e && !ferry_checksums_unlisted_file_ok(files[i].name))
            *verified = false; /* a file ClickHouse should have listed: let the caller read rows */
        double t0 = ferry_clock_ms();
        rc = check_file(env, f[i].fd, part, files[i].name, files[i].size, e, &f[i].fc, err);
        *check_ms += ferry_clock_ms() - t0;
        /* An object already at the key is never replaced: the same bytes (a retried upload)
         * count as uploaded, other bytes are an error. The store refuses the replacement
         * itself (conditional put); the check first also covers stores that ignore it. */
        if (rc == FERRY_OK && u->chk) {
            ferry_object_info info = {0};
            ferry_err herr = {0};
            const char *key = ferry_buf_cstr(&f[i].key);
            int hr = ferry_objstore_head(u->chk, key, &info, &herr);
            if (hr == FERRY_OK)
                rc = existing_is_same(u->chk, key, f[i].fd, files[i].size, err);
            else if (hr != FERRY_ENOTFOUND)
                rc = ferry_err_set(err, hr, "checking %s: %s", key, herr.msg);
            f[i].skip = hr == FERRY_OK && rc == FERRY_OK;
        }
        if (rc == FERRY_OK && !f[i].skip) {
            keys[np] = ferry_buf_cstr(&f[i].key);
            fds[np++] = f[i].fd;
        }
        if (rc)
            ferry_err_prefix(err, "uploading %s: ", files[i].name);
    }
    if (rc == FERRY_OK && np) {
        ferry_err perr = {0};
        ferry_objstore_put_fds(u->up, keys, fds, np, rcs, &perr);
        for (size_t i = 0, k = 0; rc == FERRY_OK && i < n; i++) {
            if (f[i].skip)
                continue;
            int prc = rcs[k++];
            if (prc == FERRY_ECONFLICT && u->chk) {
                /* created since the check (another agent uploading the same part) */
                prc = existing_is_same(u->chk, ferry_buf_cstr(&f[i].key), f[i].fd, files[i].size,
                                       err);
                f[i].skip = prc == FERRY_OK;
            } else if (prc) {
                ferry_err_set(err, prc, "%s", perr.msg);
            }
            if (prc)
                rc = ferry_err_prefix(err, "uploading %s: ", files[i].name);
        }
    }
    for (size_t i = 0; rc == FERRY_OK && i < n; i++) {
        if (f[i].skip) {
            (*skipped)++;
        } else {
            (*uploaded)++;
            *bytes += files[i].size;
        }
        char *chkey = agent_store_ch_key(&env->store, ferry_buf_cstr(&f[i].key));
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:b}", "file", files[i].name, "key",
                              ferry_buf_cstr(&f[i].key), "clickhouse_key", chkey ? chkey : "",
                              "size", (json_int_t)files[i].size, "uploaded", !f[i].skip);
        free(chkey);
        if (o && f[i].fc.listed)
            json_object_set_new(o, "file_hash", json_string(f[i].fc.file_hash));
        if (o && f[i].fc.small)
            json_object_set_new(o, "sha256", json_string(f[i].fc.sha256));
        if (!o || json_array_append_new(objs, o))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t i = 0; f && i < n; i++) {
        if (f[i].fd >= 0)
            close(f[i].fd);
        ferry_buf_free(&f[i].key);
    }
    free(f);
    free(keys);
    free(fds);
    free(rcs);
    return rc;
}

/* Uploads one frozen part (docs/agent.md, "upload"); *resp is its answer. */
static int upload_part(agent_env *env, upload_env *u, const char *freeze, const char *part,
                       json_t **resp, ferry_err *err)
{
    char pid[256];
    size_t nf = 0;
    agent_file *files = NULL;
    char *dir = NULL;
    const agent_disk *disk = NULL;
    ferry_checksums sums = {0};
    json_t *objs = json_array();
    uint64_t uploaded = 0, skipped = 0, bytes = 0;
    bool have_sums = false, verified = true;
    double check_ms = 0; /* reading and hashing the files: the upload's share of verification */
    int rc = objs ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc || (rc = ferry_agent_part_partition_id(part, pid, sizeof pid, err)) ||
        (rc = agent_find_frozen_part(env, u->dirs, u->ndirs, freeze, part, &dir, &disk, err)))
        goto out;
    if (disk->is_remote) {
        rc = ferry_err_set(err, FERRY_EINVAL, "part %s is on the object-storage disk '%s': its "
                           "files are pointer files, its data is already in object storage "
                           "(copy it with send)", part, disk->name);
        goto out;
    }
    if ((rc = agent_list_part_files(dir, &files, &nf, err)))
        goto out;
    have_sums = read_sums(dir, part, &sums);
    /* every file checksums.txt lists must be there (ClickHouse would not load the part) */
    for (size_t k = 0; have_sums && k < sums.count; k++) {
        bool found = false;
        for (size_t i = 0; i < nf && !found; i++)
            found = !strcmp(files[i].name, sums.entries[k].name);
        if (!found) {
            env->status = 422;
            rc = ferry_err_set(err, FERRY_EINVAL, "part %s: checksums.txt lists %s, which the "
                               "frozen part lacks: the part is damaged", part,
                               sums.entries[k].name);
            goto out;
        }
    }
    for (size_t at = 0; at < nf && rc == FERRY_OK; at += UPLOAD_BATCH) {
        size_t k = nf - at < UPLOAD_BATCH ? nf - at : UPLOAD_BATCH;
        rc = upload_batch(env, u, dir, freeze, part, pid, have_sums ? &sums : NULL, files + at,
                          k, objs, &verified, &check_ms, &uploaded, &skipped, &bytes, err);
    }
    if (rc)
        goto out;
    /* test-only: a pause after each part uploaded, as a slow object store would
     * (tier_upload_slow.sh) */
    ferry_test_pause("FERRY_AGENT_TEST_SLOW_UPLOAD_MS");
    *resp = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:I, s:I, s:I, s:b, s:o}", "database",
                      u->db, "table", u->table, "freeze", freeze, "part", part, "partition_id",
                      pid, "store", ferry_objstore_describe(u->up), "objects", objs, "uploaded",
                      (json_int_t)uploaded, "skipped", (json_int_t)skipped, "bytes_uploaded",
                      (json_int_t)bytes, "verified", have_sums && verified, "rows",
                      count_rows(dir));
    if (*resp)
        json_object_set_new(*resp, "check_ms", json_real(check_ms));
    if (!*resp)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    json_decref(objs);
    ferry_checksums_free(&sums);
    agent_files_free(files, nf);
    free(dir);
    return rc;
}

int agent_op_upload(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    static const char *const fields[] = {"freeze", "part"};
    const char *freeze = NULL, *part = NULL;
    upload_env u = {0};
    json_t *parts = json_object_get(req, "parts"), *results = NULL;
    int rc;
    if ((rc = agent_req_str(req, "database", &u.db, err)) ||
        (rc = agent_req_str(req, "table", &u.table, err)))
        goto out;
    if (json_is_array(parts))
        rc = check_parts(parts, fields, 2, err);
    else if (!(rc = agent_req_name(req, "freeze", &freeze, err)) &&
             !(rc = agent_req_name(req, "part", &part, err))) {
        char pid[256];
        rc = ferry_agent_part_partition_id(part, pid, sizeof pid, err);
    }
    if (rc || (rc = agent_table_dirs(env, u.db, u.table, &u.dirs, &u.ndirs, err)) ||
        (rc = agent_env_open_store(env, FERRY_ROLE_UPLOADER, &u.up, err)))
        goto out;
    ferry_err cerr = {0};
    if (agent_env_open_store(env, FERRY_ROLE_CLICKHOUSE, &u.chk, &cerr) != FERRY_OK) {
        /* No read credentials: every file is written again (same key, same bytes). */
        FLOG_INFO("agent: upload without existence checks (no clickhouse role): %s", cerr.msg);
        u.chk = NULL;
    }
    if (!json_is_array(parts)) {
        rc = upload_part(env, &u, freeze, part, resp, err);
        goto out;
    }
    if (!(results = json_array())) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    size_t i;
    json_t *p;
    json_array_foreach(parts, i, p) {
        const char *fz = json_string_value(json_object_get(p, "freeze"));
        const char *pn = json_string_value(json_object_get(p, "part"));
        json_t *one = NULL;
        ferry_err perr = {0};
        int prc = upload_part(env, &u, fz, pn, &one, &perr);
        if (prc)
            one = part_error(env, pn, prc, &perr);
        if (!one || json_array_append_new(results, one)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }
    rc = answer_results(u.db, u.table, results, resp, err);
out:
    json_decref(results);
    ferry_objstore_close(u.up);
    ferry_objstore_close(u.chk);
    agent_table_dirs_free(u.dirs, u.ndirs);
    return rc;
}

/* ---- write-pointers ------------------------------------------------------------------------- */

/* The objects of a write-pointers part: a non-empty array of {file, key, size}, files unique. */
static int check_objects(json_t *objs, ferry_err *err)
{
    if (!json_is_array(objs) || json_array_size(objs) == 0)
        return ferry_err_set(err, FERRY_EINVAL, "\"objects\" must be a non-empty array of "
                             "{file, key, size} (the upload's answer)");
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) {
        const char *file = json_string_value(json_object_get(o, "file"));
        const char *key = json_string_value(json_object_get(o, "key"));
        json_t *sz = json_object_get(o, "size");
        if (!file || !ferry_safe_component(file, false) || !key || !*key ||
            !json_is_integer(sz) || json_integer_value(sz) < 0)
            return ferry_err_set(err, FERRY_EINVAL, "objects[%zu]: needs \"file\" (a plain file "
                                 "name), \"key\" and \"size\" (>= 0)", i);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(file, json_string_value(json_object_get(json_array_get(objs, k),
                                                                "file"))))
                return ferry_err_set(err, FERRY_EINVAL, "objects: file %s given twice", file);
    }
    return FERRY_OK;
}

typedef struct pointers_env {
    const char *db, *table;
    int version;                /* the pinned pointer format */
    const agent_table_dir *td;  /* the table's folder on its object-storage disk */
    ferry_objstore *chk;        /* clickhouse role: HEAD of every object */
} pointers_env;

/* One pointer part of a write-pointers request, from its write to its placing. */
typedef struct pointer_job {
    const char *part;
    json_t *objs;
    char *detached, *tmp; /* owned */
    int tmpfd;
    unsigned status; /* the HTTP status of its failure, when set by the step that failed */
} pointer_job;

static void pointer_job_free(pointer_job *j)
{
    if (j->tmpfd >= 0)
        close(j->tmpfd);
    if (j->tmp) {
        ferry_err ignored = {0};
        agent_rmtree(j->tmp, &ignored);
    }
    free(j->tmp);
    free(j->detached);
    j->tmp = j->detached = NULL;
    j->tmpfd = -1;
}

/* The first half of writing a pointer part (docs/agent.md, "write-pointers"): every object
 * checked with a HEAD, then the pointer files written into a fresh temporary folder under
 * detached/, their writeback started but not waited for (pointer_place syncs them). */
static int pointer_write(agent_env *env, pointers_env *w, pointer_job *j, ferry_err *err)
{
    char pid[256];
    ferry_buf text = FERRY_BUF_INIT;
    size_t i;
    json_t *o;
    int rc;
    if ((rc = ferry_agent_part_partition_id(j->part, pid, sizeof pid, err)) ||
        (rc = check_objects(j->objs, err)))
        goto out;
    /* Every object must exist with its size before ClickHouse is shown the part. */
    json_array_foreach(j->objs, i, o) {
        const char *key = json_string_value(json_object_get(o, "key"));
        uint64_t size = (uint64_t)json_integer_value(json_object_get(o, "size"));
        ferry_object_info info = {0};
        ferry_err herr = {0};
        int hr = ferry_objstore_head(w->chk, key, &info, &herr);
        if (hr == FERRY_ENOTFOUND) {
            env->status = 409;
            rc = ferry_err_set(err, FERRY_ECONFLICT, "object %s (file %s) is missing from the "
                               "object store; the part was not written", key,
                               json_string_value(json_object_get(o, "file")));
            goto out;
        }
        if (hr) {
            rc = ferry_err_set(err, hr, "checking object %s: %s", key, herr.msg);
            goto out;
        }
        if (info.size != size) {
            rc = ferry_err_set(err, FERRY_ECONFLICT, "object %s has %" PRIu64 " bytes, the "
                               "request says %" PRIu64 "; the part was not written", key,
                               info.size, size);
            goto out;
        }
    }
    if ((rc = agent_make_tmp(env, w->td, &j->detached, &j->tmp, err)))
        goto out;
    j->tmpfd = open(j->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->tmpfd < 0) {
        rc = ferry_err_set(err, FERRY_EIO, "%s: %s", j->tmp, strerror(errno));
        goto out;
    }
    json_array_foreach(j->objs, i, o) {
        const char *file = json_string_value(json_object_get(o, "file"));
        char *chkey = agent_store_ch_key(&env->store,
                                         json_string_value(json_object_get(o, "key")));
        ferry_pointer pt = FERRY_POINTER_INIT;
        /* ref_count 1: one owner outside this server (ferry); see docs/agent.md */
        pt.ref_count = 1;
        ferry_buf_reset(&text);
        rc = chkey ? ferry_pointer_add_object(&pt, chkey,
                                              (uint64_t)json_integer_value(
                                                  json_object_get(o, "size")), err)
                   : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (rc == FERRY_OK)
            rc = ferry_pointer_serialize(&pt, w->version, env->store.disk_key_prefix, &text, err);
        ferry_pointer_free(&pt);
        free(chkey);
        if (rc == FERRY_OK &&
            (rc = agent_write_file_nosync_at(j->tmpfd, file, text.data, text.len, err)))
            agent_note_errno(env, errno);
        if (rc)
            goto out;
    }
out:
    ferry_buf_free(&text);
    return rc;
}

/* The second half: the pointer files synced, the folder renamed to detached/<part>; *resp is
 * the part's answer. */
static int pointer_place(agent_env *env, pointers_env *w, pointer_job *j, json_t **resp,
                         ferry_err *err)
{
    char *final = NULL;
    bool existing = false;
    int rc = agent_fsync_files(j->tmpfd, err);
    if (rc == FERRY_OK)
        rc = agent_place_tmp(env, j->detached, j->tmp, j->part, true, &final, &existing, err);
    if (rc == FERRY_OK) {
        free(j->tmp); /* placed (or dropped as a copy of what is there) */
        j->tmp = NULL;
        *resp = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:b, s:i, s:i}", "database", w->db,
                          "table", w->table, "part", j->part, "disk", w->td->disk->name, "path",
                          final, "files", (json_int_t)json_array_size(j->objs), "existing",
                          existing, "pointer_format", w->version, "ref_count", 1);
        if (!*resp)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    free(final);
    return rc;
}

int agent_op_write_pointers(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    static const char *const fields[] = {"part"};
    const char *part = NULL, *disk = agent_req_opt(req, "disk");
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0;
    pointers_env w = {0};
    json_t *parts = json_object_get(req, "parts"), *results = NULL;
    pointer_job *jobs = NULL;
    int *prcs = NULL;
    ferry_err *perrs = NULL;
    size_t n = 0, i;
    int rc;
    if ((rc = agent_req_str(req, "database", &w.db, err)) ||
        (rc = agent_req_str(req, "table", &w.table, err)))
        goto out;
    if (json_is_array(parts)) {
        if ((rc = check_parts(parts, fields, 1, err)))
            goto out;
    } else {
        char pid[256];
        if ((rc = agent_req_name(req, "part", &part, err)) ||
            (rc = ferry_agent_part_partition_id(part, pid, sizeof pid, err)) ||
            (rc = check_objects(json_object_get(req, "objects"), err)))
            goto out;
    }
    if ((rc = agent_env_pointer_version(env, &w.version, err)) ||
        (rc = agent_env_store(env, err)) ||
        (rc = agent_table_dirs(env, w.db, w.table, &dirs, &ndirs, err)) ||
        (rc = agent_pick_dir(dirs, ndirs, disk, true, &w.td, err)))
        goto out;
    if (!w.td->disk->is_remote) {
        rc = ferry_err_set(err, FERRY_EINVAL, "disk '%s' is not an object-storage disk",
                           w.td->disk->name);
        goto out;
    }
    if ((rc = agent_env_open_store(env, FERRY_ROLE_CLICKHOUSE, &w.chk, err))) {
        ferry_err_prefix(err, "checking the objects needs the clickhouse role: ");
        goto out;
    }
    if (!json_is_array(parts)) {
        pointer_job one = {.part = part, .objs = json_object_get(req, "objects"), .tmpfd = -1};
        rc = pointer_write(env, &w, &one, err);
        if (rc == FERRY_OK)
            rc = pointer_place(env, &w, &one, resp, err);
        pointer_job_free(&one);
        goto out;
    }
    /* every part written first, then every part synced and placed: the syncs of all the
     * request's files share journal commits */
    n = json_array_size(parts);
    if (!(results = json_array()) || !(jobs = calloc(n, sizeof *jobs)) ||
        !(prcs = calloc(n, sizeof *prcs)) || !(perrs = calloc(n, sizeof *perrs))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) {
        json_t *p = json_array_get(parts, i);
        jobs[i] = (pointer_job){.part = json_string_value(json_object_get(p, "part")),
                                .objs = json_object_get(p, "objects"), .tmpfd = -1};
        prcs[i] = pointer_write(env, &w, &jobs[i], &perrs[i]);
        jobs[i].status = env->status; /* the part's own, for its answer below */
        env->status = 0;
    }
    for (i = 0; i < n; i++) {
        json_t *one = NULL;
        if (!prcs[i])
            prcs[i] = pointer_place(env, &w, &jobs[i], &one, &perrs[i]);
        else
            env->status = jobs[i].status;
        if (prcs[i])
            one = part_error(env, jobs[i].part, prcs[i], &perrs[i]);
        if (!one || json_array_append_new(results, one)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    }
    rc = answer_results(w.db, w.table, results, resp, err);
out:
    for (i = 0; jobs && i < n; i++)
        pointer_job_free(&jobs[i]);
    free(jobs);
    free(prcs);
    free(perrs);
    json_decref(results);
    ferry_objstore_close(w.chk);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
}
