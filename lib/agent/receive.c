/* Receiving parts from another agent (the target side of `send`, docs/agent.md "receive"): the
 * part stream is written into a temporary folder under the table's detached/, checked while it
 * is written (a hot part against its checksums.txt with ClickHouse's file hash; a pointer part
 * by parsing every pointer file and checking that its objects exist with their sizes), synced,
 * and only then renamed to detached/<part>. A part that fails any check is never placed.
 *
 * A batch (API 5: no `part` argument, the stream names each part on a P line) carries several
 * pointer parts of one table. Every part is written before any is synced, so the fsyncs of all
 * their files wait for about one journal commit together instead of one per part (the 100x
 * tenant's 40 pointer parts: docs/benchmarks.md "Session 34"), and detached/ is synced once
 * after the renames. Each part is checked and placed as it would be alone; an error stops the
 * batch, and the parts placed before it stay placed (a mover's next round finds them). */
#include "agent_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/checksums.h"
#include "ferry/log.h"
#include "ferry/pointer.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"

#define POINTER_FILE_MAX (1u << 20)
/* What one receive may hold. checksums.txt lists about 60 bytes per file, so 16 MiB is a part of
 * some 250,000 files; the files ClickHouse keeps beside it unlisted (columns.txt, ...) are small
 * metadata, each bounded and all together; pointer parts are kept in memory until they are
 * checked, 64 MiB of pointer files (a whole batch's) being some 500,000 objects. */
#define RECV_CHECKSUMS_MAX (16u << 20)
#define RECV_UNLISTED_MAX (16u << 20)
#define RECV_UNLISTED_TOTAL ((uint64_t)64 << 20)
#define RECV_POINTER_TOTAL ((uint64_t)64 << 20)
/* Parts one batch may name: each holds a temporary folder and its descriptor until the end. */
#define RECV_BATCH_PARTS 256

typedef struct recv_pointer {
    char *name;
    ferry_pointer pt;
} recv_pointer;

/* One part of the stream: its temporary folder and what arrived for it. */
typedef struct recv_part {
    char *part;
    char *tmp; /* canonical path of the temporary folder; NULL once placed or dropped */
    int tmpfd;
    char **names; /* the files received, in order */
    size_t n_names;
    recv_pointer *ptrs; /* pointer parts: the parsed files */
    size_t n_ptrs;
    uint64_t bytes;
    char *final; /* detached/<part>, once placed */
    bool existing;
} recv_part;

struct agent_recv {
    agent_env *env;
    bool pointer; /* kind */
    bool batch;   /* the parts are named by the stream's P lines */
    char *db, *table, *disk_name;
    char *table_path; /* the chosen disk's table folder (canonical, ends with '/') */
    char *detached;   /* its detached/, once a temporary folder was made */
    recv_part *parts; /* parts[n_parts - 1] is the one being received */
    size_t n_parts;
    agent_stream stream;
    bool stream_ok;
    int version;         /* pointer parts: the pinned format */
    ferry_objstore *chk; /* pointer parts: the clickhouse role, for HEAD */
    /* the file being received */
    int fd;
    char name[256];
    uint64_t size, got;
    ferry_part_hasher hasher;
    const ferry_checksum_entry *entry;
    ferry_buf mem; /* checksums.txt, or a pointer file */
    /* a hot part's checksums.txt */
    ferry_checksums cks;
    bool have_cks;
    uint64_t bytes; /* every part's */
    uint64_t limit; /* what bytes may reach: see RECV_* */
};

static recv_part *cur(agent_recv *r)
{
    assert(r->n_parts > 0); /* the parser refuses a batch's file before its first P line */
    return &r->parts[r->n_parts - 1];
}

/* Opens the next part: a fresh temporary folder under detached/. */
static int part_open(agent_recv *r, const char *part, ferry_err *err)
{
    char pid[256];
    int rc = ferry_agent_part_partition_id(part, pid, sizeof pid, err);
    if (rc)
        return rc;
    if (r->n_parts >= RECV_BATCH_PARTS)
        return ferry_err_set(err, FERRY_EINVAL, "a batch may hold at most %d parts",
                             RECV_BATCH_PARTS);
    for (size_t i = 0; i < r->n_parts; i++)
        if (!strcmp(r->parts[i].part, part))
            return ferry_err_set(err, FERRY_EINVAL, "part %s sent twice", part);
    recv_part *np = realloc(r->parts, (r->n_parts + 1) * sizeof *np);
    if (!np)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    r->parts = np;
    recv_part *p = &r->parts[r->n_parts];
    memset(p, 0, sizeof *p);
    p->tmpfd = -1;
    if (!(p->part = strdup(part)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    r->n_parts++;
    agent_table_dir td = {.path = r->table_path};
    char *detached = NULL;
    if ((rc = agent_make_tmp(r->env, &td, &detached, &p->tmp, err)))
        return rc;
    if (!r->detached)
        r->detached = detached;
    else
        free(detached); /* the same folder: one disk, one table */
    p->tmpfd = open(p->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->tmpfd < 0)
        return ferry_err_set(err, FERRY_EIO, "%s: %s", p->tmp, strerror(errno));
    return FERRY_OK;
}

static int recv_part_begin(void *ud, const char *part, ferry_err *err)
{
    return part_open(ud, part, err);
}

static int recv_file_begin(void *ud, const char *name, uint64_t size, ferry_err *err)
{
    agent_recv *r = ud;
    recv_part *p = cur(r);
    for (size_t i = 0; i < p->n_names; i++)
        if (!strcmp(p->names[i], name))
            return ferry_err_set(err, FERRY_EINVAL, "%s sent twice", name);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->size = size;
    r->got = 0;
    r->entry = NULL;
    ferry_buf_reset(&r->mem);
    if (r->pointer) {
        if (size > POINTER_FILE_MAX)
            return ferry_err_set(err, FERRY_EINVAL, "%s: %" PRIu64 " bytes is too large for a "
                                 "pointer file", name, size);
        if (size > r->limit - r->bytes)
            return ferry_err_set(err, FERRY_EINVAL, "%s: pointer parts of more than %" PRIu64
                                 " bytes in one receive are refused (their files are kept in "
                                 "memory)", name, r->limit);
        return FERRY_OK;
    }
    bool is_cks = !strcmp(name, "checksums.txt");
    if (!r->have_cks && !is_cks)
        return ferry_err_set(err, FERRY_EINVAL, "a hot part must start with checksums.txt "
                             "(got %s)", name);
    /* checksums.txt is kept in memory to be parsed, and files it does not list are ClickHouse's
     * small metadata files: both are bounded, so a sender cannot fill memory or the disk with
     * what checksums.txt does not account for */
    if (is_cks && size > RECV_CHECKSUMS_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "checksums.txt: %" PRIu64 " bytes is more than "
                             "the %u a part's checksums.txt may have", size, RECV_CHECKSUMS_MAX);
    if (!is_cks) {
        r->entry = ferry_checksums_find(&r->cks, name);
        if (!r->entry && !ferry_checksums_unlisted_file_ok(name))
            return ferry_err_set(err, FERRY_EINVAL, "%s is not listed in checksums.txt", name);
        if (r->entry && r->entry->file_size != size)
            return ferry_err_set(err, FERRY_EINVAL, "%s: %" PRIu64 " bytes sent, checksums.txt "
                                 "says %" PRIu64, name, size, r->entry->file_size);
        if (!r->entry && size > RECV_UNLISTED_MAX)
            return ferry_err_set(err, FERRY_EINVAL, "%s: %" PRIu64 " bytes is more than the %u "
                                 "a metadata file not listed in checksums.txt may have", name,
                                 size, RECV_UNLISTED_MAX);
    }
    if (size > r->limit - r->bytes)
        return ferry_err_set(err, FERRY_EINVAL, "%s: %" PRIu64 " more bytes would make the part "
                             "larger than the %" PRIu64 " its checksums.txt allows", name, size,
                             r->limit);
    ferry_part_hasher_init(&r->hasher);
    r->fd = openat(p->tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (r->fd < 0) {
        agent_note_errno(r->env, errno);
        return ferry_err_set(err, FERRY_EIO, "cannot create %s/%s: %s", p->tmp, name,
                             strerror(errno));
    }
    return FERRY_OK;
}

static int recv_file_data(void *ud, const char *data, size_t len, ferry_err *err)
{
    agent_recv *r = ud;
    if (len > r->size - r->got || len > r->limit - r->bytes) /* the stream parser bounds it */
        return ferry_err_set(err, FERRY_EINVAL, "%s: more bytes than announced", r->name);
    r->got += len;
    r->bytes += len;
    cur(r)->bytes += len;
    if (r->pointer || !strcmp(r->name, "checksums.txt"))
        if (ferry_buf_append(&r->mem, data, len))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (r->pointer)
        return FERRY_OK;
    ferry_part_hasher_update(&r->hasher, data, len);
    while (len > 0) {
        ssize_t w = write(r->fd, data, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            agent_note_errno(r->env, errno);
            return ferry_err_set(err, FERRY_EIO, "writing %s/%s: %s", cur(r)->tmp, r->name,
                                 strerror(errno));
        }
        data += w;
        len -= (size_t)w;
    }
    if (r->got == r->size && r->entry) {
        /* The last byte is in: compare with checksums.txt before the stream's own hash. */
        uint64_t h[2];
        ferry_part_hasher_final(&r->hasher, h);
        if (h[0] != r->entry->file_hash[0] || h[1] != r->entry->file_hash[1]) {
            char want[33], got[33];
            ferry_checksum_hex(r->entry->file_hash, want);
            ferry_checksum_hex(h, got);
            return ferry_err_set(err, FERRY_EINVAL, "%s: content does not match checksums.txt "
                                 "(hash %s, expected %s): damaged in transit; the part was not "
                                 "placed", r->name, got, want);
        }
    }
    return FERRY_OK;
}

static int recv_file_end(void *ud, ferry_err *err)
{
    agent_recv *r = ud;
    recv_part *p = cur(r);
    /* test-only: a pause after each file, so a test can kill a process while a part is half
     * received (docs/agent.md) */
    ferry_test_pause("FERRY_AGENT_TEST_SLOW_RECEIVE_MS");
    char **nn = realloc(p->names, (p->n_names + 1) * sizeof *nn);
    if (!nn)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    p->names = nn;
    if (!(p->names[p->n_names] = strdup(r->name)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    p->n_names++;
    if (r->pointer) {
        recv_pointer *np = realloc(p->ptrs, (p->n_ptrs + 1) * sizeof *np);
        if (!np)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        p->ptrs = np;
        recv_pointer *rp = &p->ptrs[p->n_ptrs];
        memset(rp, 0, sizeof *rp);
        int rc = ferry_pointer_parse(r->mem.data ? r->mem.data : "", r->mem.len,
                                     r->env->store.disk_key_prefix, &rp->pt, err);
        if (rc)
            return ferry_err_prefix(err, "part %s: pointer file %s: ", p->part, r->name);
        if (!(rp->name = strdup(r->name))) {
            ferry_pointer_free(&rp->pt);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        p->n_ptrs++;
        return FERRY_OK;
    }
    int rc = FERRY_OK;
    /* only the writeback starts here: agent_recv_finish syncs all the part's files together
     * (one journal commit for them, not one per file) */
    int e = 0;
    sync_file_range(r->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    if (close(r->fd) != 0)
        e = errno;
    r->fd = -1;
    if (e) {
        agent_note_errno(r->env, e);
        rc = ferry_err_set(err, FERRY_EIO, "writing %s/%s: %s", p->tmp, r->name, strerror(e));
    }
    if (rc == FERRY_OK && !strcmp(r->name, "checksums.txt")) {
        if ((rc = ferry_checksums_parse(r->mem.data, r->mem.len, &r->cks, err)))
            return ferry_err_prefix(err, "checksums.txt: ");
        r->have_cks = true;
        /* from now on the part may hold what checksums.txt lists, and the unlisted metadata
         * files (each bounded) */
        uint64_t total = r->bytes;
        for (size_t i = 0; i < r->cks.count; i++) {
            if (r->cks.entries[i].file_size > UINT64_MAX - total - RECV_UNLISTED_TOTAL)
                return ferry_err_set(err, FERRY_EINVAL, "checksums.txt: the sizes it lists do "
                                     "not add up to a possible part");
            total += r->cks.entries[i].file_size;
        }
        r->limit = total + RECV_UNLISTED_TOTAL;
    }
    return rc;
}

int agent_recv_begin(agent_env *env, const char *db, const char *table, const char *part,
                     const char *kind, const char *disk, agent_recv **out, ferry_err *err)
{
    char pid[256];
    int rc;
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0;
    const agent_table_dir *td = NULL;
    if (part && (rc = ferry_agent_part_partition_id(part, pid, sizeof pid, err)))
        return rc;
    if (strcmp(kind, "hot") && strcmp(kind, "pointer"))
        return ferry_err_set(err, FERRY_EINVAL, "kind must be hot or pointer");
    if (!part && strcmp(kind, "pointer"))
        return ferry_err_set(err, FERRY_EINVAL, "a batch (no part argument) holds pointer "
                             "parts only");
    agent_recv *r = calloc(1, sizeof *r);
    if (!r)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    r->env = env;
    r->fd = -1;
    r->pointer = !strcmp(kind, "pointer");
    r->batch = !part;
    /* until checksums.txt is in, a hot part may hold only it */
    r->limit = r->pointer ? RECV_POINTER_TOTAL : RECV_CHECKSUMS_MAX;
    r->db = strdup(db);
    r->table = strdup(table);
    if (!r->db || !r->table) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    env->cached = true; /* a batch receives many parts of one table (agent_cache) */
    if ((rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)) ||
        (rc = agent_pick_dir(dirs, ndirs, disk, r->pointer, &td, err)))
        goto out;
    if (td->disk->is_remote != r->pointer) {
        rc = ferry_err_set(err, FERRY_EINVAL, "a %s part cannot go to disk '%s' (%s)", kind,
                           td->disk->name, td->disk->is_remote ? "object storage" : "local");
        goto out;
    }
    if (!(r->disk_name = strdup(td->disk->name)) || !(r->table_path = strdup(td->path))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (r->pointer && ((rc = agent_env_pointer_version(env, &r->version, err)) ||
                       (rc = agent_env_store(env, err)) ||
                       (rc = agent_env_open_store(env, FERRY_ROLE_CLICKHOUSE, &r->chk, err))))
        goto out;
    if (part && (rc = part_open(r, part, err)))
        goto out;
    agent_stream_cb cb = {r->batch ? recv_part_begin : NULL, recv_file_begin, recv_file_data,
                          recv_file_end};
    if ((rc = agent_stream_init(&r->stream, &cb, r, err)))
        goto out;
    r->stream_ok = true;
out:
    agent_table_dirs_free(dirs, ndirs);
    if (rc) {
        agent_recv_free(r);
        r = NULL;
    }
    *out = r;
    return rc;
}

int agent_recv_feed(agent_recv *r, const char *data, size_t len, ferry_err *err)
{
    return agent_stream_feed(&r->stream, data, len, err);
}

/* A pointer part: every object it names must exist with its size; then its files are written
 * again in the pinned format, as owned by this server with ref_count 1 (docs/agent.md). *checked
 * counts the objects. */
static int check_pointer_part(agent_recv *r, recv_part *p, ferry_buf *text, uint64_t *checked,
                              ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; i < p->n_ptrs; i++) {
        ferry_pointer *pt = &p->ptrs[i].pt;
        for (size_t k = 0; k < pt->n_objects; k++) {
            char *sk = agent_store_key_of(&r->env->store, pt->objects[k].key);
            if (!sk)
                return ferry_err_set(err, FERRY_EINVAL, "part %s: pointer file %s names %s, "
                                     "outside the object store", p->part, p->ptrs[i].name,
                                     pt->objects[k].key);
            ferry_object_info info = {0};
            ferry_err herr = {0};
            int hr = ferry_objstore_head(r->chk, sk, &info, &herr);
            if (hr == FERRY_ENOTFOUND) {
                r->env->status = 409;
                rc = ferry_err_set(err, FERRY_ECONFLICT, "part %s: pointer file %s names object "
                                   "%s, which is missing; the part was not placed", p->part,
                                   p->ptrs[i].name, sk);
            } else if (hr) {
                rc = ferry_err_set(err, hr, "checking object %s: %s", sk, herr.msg);
            } else if (info.size != pt->objects[k].size) {
                r->env->status = 409;
                rc = ferry_err_set(err, FERRY_ECONFLICT, "part %s: pointer file %s: object %s "
                                   "has %" PRIu64 " bytes, the pointer says %" PRIu64, p->part,
                                   p->ptrs[i].name, sk, info.size, pt->objects[k].size);
            }
            free(sk);
            if (rc)
                return rc;
            (*checked)++;
        }
        pt->ref_count = 1;
        pt->read_only = false;
        ferry_buf_reset(text);
        if ((rc = ferry_pointer_serialize(pt, r->version, r->env->store.disk_key_prefix, text,
                                          err)))
            return rc;
        if ((rc = agent_write_file_nosync_at(p->tmpfd, p->ptrs[i].name, text->data, text->len,
                                             err))) {
            agent_note_errno(r->env, errno);
            return rc;
        }
    }
    return FERRY_OK;
}

/* A hot part: every file checksums.txt lists was sent (each was checked as it arrived). */
static int check_hot_part(agent_recv *r, const recv_part *p, ferry_err *err)
{
    for (size_t i = 0; i < r->cks.count; i++) {
        bool seen = false;
        for (size_t k = 0; k < p->n_names && !seen; k++)
            seen = !strcmp(p->names[k], r->cks.entries[i].name);
        if (!seen)
            return ferry_err_set(err, FERRY_EINVAL, "%s is listed in checksums.txt but was not "
                                 "sent", r->cks.entries[i].name);
    }
    return FERRY_OK;
}

static json_t *part_answer(const recv_part *p)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:b}", "part", p->part, "path", p->final, "files",
                     (json_int_t)p->n_names, "bytes", (json_int_t)p->bytes, "existing",
                     p->existing);
}

int agent_recv_finish(agent_recv *r, json_t **resp, ferry_err *err)
{
    int rc = agent_stream_finish(&r->stream, err);
    ferry_buf text = FERRY_BUF_INIT;
    uint64_t checked = 0;
    bool renamed = false;
    json_t *o = NULL;
    if (rc)
        goto out;
    if (r->n_parts == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "the part stream held no part");
        goto out;
    }
    for (size_t i = 0; i < r->n_parts; i++)
        if (r->parts[i].n_names == 0) {
            rc = ferry_err_set(err, FERRY_EINVAL, "the part stream held no file%s%s",
                               r->batch ? " for part " : "", r->batch ? r->parts[i].part : "");
            goto out;
        }
    /* every part checked and written before any is synced */
    for (size_t i = 0; i < r->n_parts; i++) {
        recv_part *p = &r->parts[i];
        rc = r->pointer ? check_pointer_part(r, p, &text, &checked, err)
                        : check_hot_part(r, p, err);
        if (rc)
            goto out;
    }
    /* every file durable before its folder takes the part's name; the first part's fsyncs
     * commit the journal with every part's files in it, the others' find them committed */
    for (size_t i = 0; i < r->n_parts; i++)
        if ((rc = agent_fsync_files(r->parts[i].tmpfd, err))) {
            agent_note_errno(r->env, errno);
            goto out;
        }
    for (size_t i = 0; i < r->n_parts; i++) {
        recv_part *p = &r->parts[i];
        if ((rc = agent_place_tmp(r->env, r->detached, p->tmp, p->part, false, &p->final,
                                  &p->existing, err)))
            goto out;
        free(p->tmp);
        p->tmp = NULL; /* placed (or dropped as a duplicate): nothing to clean up */
        renamed = renamed || !p->existing;
    }
    /* the renames durable, all of them in one sync of detached/ */
    if (renamed && (rc = agent_fsync_dir(r->detached, err)))
        goto out;
    if (r->batch) {
        json_t *parts = json_array();
        for (size_t i = 0; parts && i < r->n_parts; i++)
            if (json_array_append_new(parts, part_answer(&r->parts[i]))) {
                json_decref(parts);
                parts = NULL;
            }
        uint64_t files = 0;
        for (size_t i = 0; i < r->n_parts; i++)
            files += r->parts[i].n_names;
        o = parts ? json_pack("{s:s, s:s, s:s, s:s, s:o, s:I, s:I}", "database", r->db, "table",
                              r->table, "kind", "pointer", "disk", r->disk_name, "parts", parts,
                              "files", (json_int_t)files, "bytes", (json_int_t)r->bytes)
                  : NULL;
    } else {
        const recv_part *p = &r->parts[0];
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:b}", "database", r->db,
                      "table", r->table, "part", p->part, "kind", r->pointer ? "pointer" : "hot",
                      "disk", r->disk_name, "path", p->final, "files", (json_int_t)p->n_names,
                      "bytes", (json_int_t)r->bytes, "existing", p->existing);
    }
    if (!o) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (r->pointer) {
        json_object_set_new(o, "verified", json_string("pointer files parsed, objects exist "
                                                       "with their sizes"));
        json_object_set_new(o, "objects_checked", json_integer((json_int_t)checked));
        json_object_set_new(o, "pointer_format", json_integer(r->version));
        json_object_set_new(o, "ref_count", json_integer(1));
    } else {
        json_object_set_new(o, "verified", json_string("checksums.txt"));
        json_object_set_new(o, "files_checked", json_integer((json_int_t)r->cks.count));
    }
    *resp = o;
    o = NULL;
out:
    json_decref(o);
    ferry_buf_free(&text);
    return rc;
}

void agent_recv_free(agent_recv *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    for (size_t i = 0; i < r->n_parts; i++) {
        recv_part *p = &r->parts[i];
        if (p->tmpfd >= 0)
            close(p->tmpfd);
        if (p->tmp) {
            ferry_err ignored = {0};
            agent_rmtree(p->tmp, &ignored);
        }
        for (size_t k = 0; k < p->n_names; k++)
            free(p->names[k]);
        free(p->names);
        for (size_t k = 0; k < p->n_ptrs; k++) {
            free(p->ptrs[k].name);
            ferry_pointer_free(&p->ptrs[k].pt);
        }
        free(p->ptrs);
        free(p->part);
        free(p->tmp);
        free(p->final);
    }
    free(r->parts);
    if (r->stream_ok)
        agent_stream_free(&r->stream);
    ferry_objstore_close(r->chk);
    if (r->have_cks)
        ferry_checksums_free(&r->cks);
    ferry_buf_free(&r->mem);
    free(r->db);
    free(r->table);
    free(r->disk_name);
    free(r->table_path);
    free(r->detached);
    free(r);
}
