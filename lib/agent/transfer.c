/* Moving a frozen part between servers, agent to agent. The source (op "send") streams the
 * files of a part from its shadow folder to the target's receive endpoint, or ("live": API 3) a
 * pointer part straight from the table's folder: its files name immutable objects that
 * ClickHouse may not delete (the store refuses it), cold volumes do not merge, and each pointer
 * file is read whole and parsed before anything is sent, so a freeze would only add its hard
 * links (each a rewrite of the file's ref_count) and their removal. The target writes
 * them into a temporary folder under the table's detached/, checks them while writing (a hot
 * part against its checksums.txt with ClickHouse's file hash; a pointer part by parsing every
 * pointer file and checking that its objects exist with their sizes), and only then renames the
 * folder to detached/<part>. A part that fails any check is never placed. */
#include "agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferry/checksums.h"
#include "ferry/log.h"
#include "ferry/pointer.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"

#define POINTER_FILE_MAX (1u << 20)
/* What one receive may hold. checksums.txt lists about 60 bytes per file, so 16 MiB is a part of
 * some 250,000 files; the files ClickHouse keeps beside it unlisted (columns.txt, ...) are small
 * metadata, each bounded and all together; a pointer part is kept in memory until it is
 * checked, 64 MiB of pointer files being some 500,000 objects. */
#define RECV_CHECKSUMS_MAX (16u << 20)
#define RECV_UNLISTED_MAX (16u << 20)
#define RECV_UNLISTED_TOTAL ((uint64_t)64 << 20)
#define RECV_POINTER_TOTAL ((uint64_t)64 << 20)

/* A pointer file as it stands once ClickHouse has finished writing it. ClickHouse updates an
 * object-storage metadata file (its reference count) when a hard link to it is made or dropped
 * (FREEZE, ATTACH PARTITION FROM, a detached, staging or outdated copy removed), and the frozen
 * copy the send reads shares that inode. Integration runs under load caught the sender reading
 * such a file empty (the target refused "checksums.txt: line 1: file ends where the format
 * version was expected"; a move rolled back), so the update is not atomic to a reader. A
 * pointer file is therefore read whole and parsed; one that does not parse is read again, for
 * up to POINTER_SETTLE_MS; what is sent is the copy that parsed, from memory (a memfd), so it
 * cannot change under the send. A file that never parses is sent as read: the target says what
 * is wrong with it. */
#define POINTER_SETTLE_MS 2000
#define POINTER_SEND_MAX (1u << 20)

static int settled_pointer(agent_env *env, const char *path, ferry_agent_send_file *f,
                           ferry_err *err)
{
    ferry_err serr = {0};
    const char *kp = agent_env_store(env, &serr) == FERRY_OK && env->store.disk_key_prefix
                         ? env->store.disk_key_prefix
                         : "";
    char *data = NULL;
    size_t len = 0;
    int rc = FERRY_OK;
    for (unsigned waited = 0;; waited += 10) {
        free(data);
        data = NULL;
        if ((rc = agent_read_small(path, POINTER_SEND_MAX, &data, &len, err)))
            return rc;
        ferry_pointer pt = FERRY_POINTER_INIT;
        ferry_err perr = {0};
        bool parsed = ferry_pointer_parse(data ? data : "", len, kp, &pt, &perr) == FERRY_OK;
        ferry_pointer_free(&pt);
        if (parsed)
            break;
        if (waited >= POINTER_SETTLE_MS) {
            FLOG_WARN("agent: pointer file %s does not parse after %u ms (%s); sent as read",
                      path, waited, perr.msg);
            break;
        }
        if (waited == 0)
            FLOG_INFO("agent: pointer file %s is being rewritten (%s); reading it again", path,
                      perr.msg);
        usleep(10 * 1000);
    }
    int fd = memfd_create("ferry-pointer", MFD_CLOEXEC);
    if (fd < 0) {
        free(data);
        return ferry_err_set(err, FERRY_EIO, "memfd_create: %s", strerror(errno));
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = ferry_err_set(err, FERRY_EIO, "memfd write: %s", strerror(errno));
            close(fd);
            free(data);
            return rc;
        }
        off += (size_t)w;
    }
    free(data);
    f->fd = fd;
    f->size = len;
    return FERRY_OK;
}

/* ---- send (source side) --------------------------------------------------------------------- */

/* Test-only: FERRY_AGENT_TEST_LIVE_GONE=N makes the agent answer its first N live sends as if
 * ClickHouse had removed the part since the caller listed it (410), so a test can drive a
 * mover's handling of that race (tests/integration/move_live_gone.sh). */
static bool test_live_gone(void)
{
    static atomic_long answered;
    const char *e = ferry_test_knob("FERRY_AGENT_TEST_LIVE_GONE");
    long n = e ? strtol(e, NULL, 10) : 0;
    if (n <= 0 || atomic_fetch_add(&answered, 1) >= n)
        return false;
    FLOG_WARN("agent: test knob FERRY_AGENT_TEST_LIVE_GONE: a live send answered as gone");
    return true;
}

int agent_op_send(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    const char *db, *table, *freeze = NULL, *part, *turl, *ttoken, *tdb, *ttable;
    char pid[256];
    json_t *live = json_object_get(req, "live");
    json_t *target = json_object_get(req, "target");
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0, nf = 0;
    agent_file *files = NULL;
    ferry_agent_send_file *sf = NULL;
    char *dir = NULL;
    const agent_disk *disk = NULL;
    ferry_agent_client *cl = NULL;
    json_t *tresp = NULL;
    int rc;
    if ((rc = agent_req_str(req, "database", &db, err)) ||
        (rc = agent_req_str(req, "table", &table, err)) ||
        (live && !json_is_boolean(live) &&
         (rc = ferry_err_set(err, FERRY_EINVAL, "\"live\" must be true or false"))) ||
        (!json_is_true(live) && (rc = agent_req_name(req, "freeze", &freeze, err))) ||
        (rc = agent_req_name(req, "part", &part, err)) ||
        (rc = ferry_agent_part_partition_id(part, pid, sizeof pid, err)))
        goto out;
    if (!json_is_object(target)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "\"target\" must be an object {url, token, "
                           "database, table[, disk]}");
        goto out;
    }
    if ((rc = agent_req_str(target, "url", &turl, err)) ||
        (rc = agent_req_str(target, "token", &ttoken, err)) ||
        (rc = agent_req_str(target, "database", &tdb, err)) ||
        (rc = agent_req_str(target, "table", &ttable, err))) {
        ferry_err_prefix(err, "target: ");
        goto out;
    }
    env->cached = true; /* a batch sends many parts of one table (agent_int.h, agent_cache) */
    if ((rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)))
        goto out;
    if (!freeze && test_live_gone()) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "part %s is not in this table's folders (test "
                           "knob FERRY_AGENT_TEST_LIVE_GONE)", part);
        goto read_failed;
    }
    if ((rc = freeze ? agent_find_frozen_part(env, dirs, ndirs, freeze, part, &dir, &disk, err)
                     : agent_find_live_part(env, dirs, ndirs, part, &dir, &disk, err)) ||
        (rc = agent_list_part_files(dir, &files, &nf, err)))
        goto read_failed;
    const char *kind = disk->is_remote ? "pointer" : "hot";
    sf = calloc(nf ? nf : 1, sizeof *sf);
    if (!sf) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    /* checksums.txt first, so the receiver can verify each file while it writes it */
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < nf; i++) {
            bool is_cks = !strcmp(files[i].name, "checksums.txt");
            if ((pass == 0) != is_cks)
                continue;
            char fp[4700];
            snprintf(fp, sizeof fp, "%s/%s", dir, files[i].name);
            sf[k].name = files[i].name;
            sf[k].size = files[i].size;
            if (disk->is_remote) {
                if ((rc = settled_pointer(env, fp, &sf[k], err)))
                    goto read_failed;
            } else if ((sf[k].fd = open(fp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                rc = ferry_err_set(err, FERRY_EIO, "%s: %s", fp, strerror(errno));
                goto out;
            }
            k++;
        }
    if (!disk->is_remote && (nf == 0 || strcmp(sf[0].name, "checksums.txt"))) {
        rc = ferry_err_set(err, FERRY_EINVAL, "frozen part %s has no checksums.txt", part);
        goto out;
    }
    const char *tdisk = agent_req_opt(target, "disk");
    long tstatus = 0;
    uint64_t sent = 0;
    if ((rc = ferry_agent_client_new(turl, ttoken, 0, &cl, err)))
        goto out;
    rc = ferry_agent_send_part(cl, tdb, ttable, part, kind, tdisk, sf, k, &tresp, &tstatus,
                               &sent, err);
    if (rc) {
        /* Say what the target said, with its status when it answered. */
        env->status = (tstatus >= 400 && tstatus < 500) || tstatus == 507 ? (unsigned)tstatus
                                                                          : 502;
        if (tstatus == 401)
            env->status = 502; /* our caller's token was fine; the target refused ours */
        goto out;
    }
    *resp = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:O}", "part", part, "kind", kind, "from",
                      dir, "disk", disk->name, "files", (json_int_t)k, "bytes_sent",
                      (json_int_t)sent, "target", tresp);
    goto out;
read_failed:
    /* A live part not in the table, or removed by ClickHouse while it was read (its folder is
     * gone): 410, which no target answers, so a mover tells "not on the source any more" (its
     * listing is out of date) from any refusal of the receiving side. */
    if (!freeze && rc == FERRY_ENOTFOUND)
        env->status = 410;
    else if (!freeze && dir && access(dir, F_OK) != 0 && errno == ENOENT) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "part %s left the table while it was read "
                           "(merged, moved or detached)", part);
        env->status = 410;
    }
out:
    json_decref(tresp);
    ferry_agent_client_free(cl);
    for (size_t i = 0; sf && i < nf; i++)
        if (sf[i].fd > 0)
            close(sf[i].fd);
    free(sf);
    agent_files_free(files, nf);
    free(dir);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
}

/* ---- receive (target side) ------------------------------------------------------------------ */

typedef struct recv_pointer {
    char *name;
    ferry_pointer pt;
} recv_pointer;

struct agent_recv {
    agent_env *env;
    bool pointer; /* kind */
    char *db, *table, *part, *disk_name;
    char *detached, *tmp;
    int tmpfd;
    agent_stream stream;
    bool stream_ok;
    int version;                  /* pointer parts: the pinned format */
    ferry_objstore *chk;          /* pointer parts: the clickhouse role, for HEAD */
    /* the file being received */
    int fd;
    char name[256];
    uint64_t size, got;
    ferry_part_hasher hasher;
    const ferry_checksum_entry *entry;
    ferry_buf mem; /* checksums.txt, or a pointer file */
    /* what was received */
    ferry_checksums cks;
    bool have_cks;
    char **names;
    size_t n_names;
    recv_pointer *ptrs;
    size_t n_ptrs;
    uint64_t bytes;
    uint64_t limit; /* what bytes may reach: see RECV_* */
};

static int recv_file_begin(void *ud, const char *name, uint64_t size, ferry_err *err)
{
    agent_recv *r = ud;
    for (size_t i = 0; i < r->n_names; i++)
        if (!strcmp(r->names[i], name))
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
            return ferry_err_set(err, FERRY_EINVAL, "%s: a pointer part of more than %" PRIu64
                                 " bytes is refused (its files are kept in memory)", name,
                                 r->limit);
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
    r->fd = openat(r->tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (r->fd < 0) {
        agent_note_errno(r->env, errno);
        return ferry_err_set(err, FERRY_EIO, "cannot create %s/%s: %s", r->tmp, name,
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
            return ferry_err_set(err, FERRY_EIO, "writing %s/%s: %s", r->tmp, r->name,
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

/* Test-only: FERRY_AGENT_TEST_SLOW_RECEIVE_MS=N makes the receiving agent pause N ms after each
 * file, so a test can kill a process while a part is half received (docs/agent.md). */
static void test_slow_receive(void)
{
    const char *e = ferry_test_knob("FERRY_AGENT_TEST_SLOW_RECEIVE_MS");
    uint64_t ms = 0;
    if (e && *e && ferry_parse_u64(e, &ms) && ms > 0 && ms < 60000)
        usleep((useconds_t)(ms * 1000));
}

static int recv_file_end(void *ud, ferry_err *err)
{
    agent_recv *r = ud;
    test_slow_receive();
    char **nn = realloc(r->names, (r->n_names + 1) * sizeof *nn);
    if (!nn)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    r->names = nn;
    if (!(r->names[r->n_names] = strdup(r->name)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    r->n_names++;
    if (r->pointer) {
        recv_pointer *p = realloc(r->ptrs, (r->n_ptrs + 1) * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        r->ptrs = p;
        recv_pointer *rp = &r->ptrs[r->n_ptrs];
        memset(rp, 0, sizeof *rp);
        int rc = ferry_pointer_parse(r->mem.data ? r->mem.data : "", r->mem.len,
                                     r->env->store.disk_key_prefix, &rp->pt, err);
        if (rc)
            return ferry_err_prefix(err, "pointer file %s: ", r->name);
        if (!(rp->name = strdup(r->name))) {
            ferry_pointer_free(&rp->pt);
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        r->n_ptrs++;
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
        rc = ferry_err_set(err, FERRY_EIO, "writing %s/%s: %s", r->tmp, r->name, strerror(e));
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
    if ((rc = ferry_agent_part_partition_id(part, pid, sizeof pid, err)))
        return rc;
    if (strcmp(kind, "hot") && strcmp(kind, "pointer"))
        return ferry_err_set(err, FERRY_EINVAL, "kind must be hot or pointer");
    agent_recv *r = calloc(1, sizeof *r);
    if (!r)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    r->env = env;
    r->fd = -1;
    r->tmpfd = -1;
    r->pointer = !strcmp(kind, "pointer");
    /* until checksums.txt is in, a hot part may hold only it */
    r->limit = r->pointer ? RECV_POINTER_TOTAL : RECV_CHECKSUMS_MAX;
    r->db = strdup(db);
    r->table = strdup(table);
    r->part = strdup(part);
    if (!r->db || !r->table || !r->part) {
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
    if (!(r->disk_name = strdup(td->disk->name))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (r->pointer && ((rc = agent_env_pointer_version(env, &r->version, err)) ||
                       (rc = agent_env_store(env, err)) ||
                       (rc = agent_env_open_store(env, FERRY_ROLE_CLICKHOUSE, &r->chk, err))))
        goto out;
    if ((rc = agent_make_tmp(env, td, &r->detached, &r->tmp, err)))
        goto out;
    r->tmpfd = open(r->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->tmpfd < 0) {
        rc = ferry_err_set(err, FERRY_EIO, "%s: %s", r->tmp, strerror(errno));
        goto out;
    }
    agent_stream_cb cb = {recv_file_begin, recv_file_data, recv_file_end};
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

int agent_recv_finish(agent_recv *r, json_t **resp, ferry_err *err)
{
    int rc = agent_stream_finish(&r->stream, err);
    char *final = NULL;
    bool existing = false;
    ferry_buf text = FERRY_BUF_INIT;
    uint64_t checked = 0;
    if (rc)
        goto out;
    if (r->n_names == 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "the part stream held no file");
        goto out;
    }
    if (!r->pointer) {
        for (size_t i = 0; i < r->cks.count; i++) {
            bool seen = false;
            for (size_t k = 0; k < r->n_names && !seen; k++)
                seen = !strcmp(r->names[k], r->cks.entries[i].name);
            if (!seen) {
                rc = ferry_err_set(err, FERRY_EINVAL, "%s is listed in checksums.txt but was not "
                                   "sent", r->cks.entries[i].name);
                goto out;
            }
        }
    } else {
        /* Every object must exist with its size; then the files are written again in the
         * pinned format, as owned by this server with ref_count 1 (docs/agent.md). */
        for (size_t i = 0; i < r->n_ptrs; i++) {
            ferry_pointer *pt = &r->ptrs[i].pt;
            for (size_t k = 0; k < pt->n_objects; k++) {
                char *sk = agent_store_key_of(&r->env->store, pt->objects[k].key);
                if (!sk) {
                    rc = ferry_err_set(err, FERRY_EINVAL, "pointer file %s names %s, outside "
                                       "the object store", r->ptrs[i].name, pt->objects[k].key);
                    goto out;
                }
                ferry_object_info info = {0};
                ferry_err herr = {0};
                int hr = ferry_objstore_head(r->chk, sk, &info, &herr);
                if (hr == FERRY_ENOTFOUND) {
                    r->env->status = 409;
                    rc = ferry_err_set(err, FERRY_ECONFLICT, "pointer file %s names object %s, "
                                       "which is missing; the part was not placed",
                                       r->ptrs[i].name, sk);
                } else if (hr) {
                    rc = ferry_err_set(err, hr, "checking object %s: %s", sk, herr.msg);
                } else if (info.size != pt->objects[k].size) {
                    r->env->status = 409;
                    rc = ferry_err_set(err, FERRY_ECONFLICT, "pointer file %s: object %s has %"
                                       PRIu64 " bytes, the pointer says %" PRIu64,
                                       r->ptrs[i].name, sk, info.size, pt->objects[k].size);
                }
                free(sk);
                if (rc)
                    goto out;
                checked++;
            }
            pt->ref_count = 1;
            pt->read_only = false;
            ferry_buf_reset(&text);
            if ((rc = ferry_pointer_serialize(pt, r->version, r->env->store.disk_key_prefix,
                                              &text, err)))
                goto out;
            if ((rc = agent_write_file_nosync_at(r->tmpfd, r->ptrs[i].name, text.data,
                                                 text.len, err))) {
                agent_note_errno(r->env, errno);
                goto out;
            }
        }
    }
    /* every file durable before the folder takes the part's name */
    if ((rc = agent_fsync_files(r->tmpfd, err))) {
        agent_note_errno(r->env, errno);
        goto out;
    }
    if ((rc = agent_place_tmp(r->env, r->detached, r->tmp, r->part, &final, &existing, err)))
        goto out;
    free(r->tmp);
    r->tmp = NULL; /* placed (or dropped as a duplicate): nothing to clean up */
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:b}", "database", r->db,
                          "table", r->table, "part", r->part, "kind",
                          r->pointer ? "pointer" : "hot", "disk", r->disk_name, "path", final,
                          "files", (json_int_t)r->n_names, "bytes", (json_int_t)r->bytes,
                          "existing", existing);
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
out:
    ferry_buf_free(&text);
    free(final);
    return rc;
}

void agent_recv_free(agent_recv *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    if (r->tmpfd >= 0)
        close(r->tmpfd);
    if (r->tmp) {
        ferry_err ignored = {0};
        agent_rmtree(r->tmp, &ignored);
    }
    if (r->stream_ok)
        agent_stream_free(&r->stream);
    ferry_objstore_close(r->chk);
    if (r->have_cks)
        ferry_checksums_free(&r->cks);
    for (size_t i = 0; i < r->n_names; i++)
        free(r->names[i]);
    free(r->names);
    for (size_t i = 0; i < r->n_ptrs; i++) {
        free(r->ptrs[i].name);
        ferry_pointer_free(&r->ptrs[i].pt);
    }
    free(r->ptrs);
    ferry_buf_free(&r->mem);
    free(r->db);
    free(r->table);
    free(r->part);
    free(r->disk_name);
    free(r->detached);
    free(r->tmp);
    free(r);
}
