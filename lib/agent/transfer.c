/* Sending parts to another agent (op "send", the source side; receive.c is the target's). A
 * frozen part streams from its shadow folder to the target's receive endpoint, or ("live": API
 * 3) a pointer part straight from the table's folder: its files name immutable objects that
 * ClickHouse may not delete (the store refuses it), cold volumes do not merge, and each pointer
 * file is read whole and parsed before anything is sent, so a freeze would only add its hard
 * links (each a rewrite of the file's ref_count) and their removal. Live pointer parts may go
 * several to one receive ("parts": API 5), in one stream. */
#include "agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
 * up to POINTER_SETTLE_MS; what is sent is the copy that parsed, from memory, so it cannot
 * change under the send. A file that never parses is sent as read: the target says what
 * is wrong with it. */
#define POINTER_SETTLE_MS 2000
#define POINTER_SEND_MAX (1u << 20)

/* Reads the pointer file at path as it stands settled (above) into *data (caller frees). */
static int settled_pointer_read(agent_env *env, const char *path, char **data_out,
                                size_t *len_out, ferry_err *err)
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
    *data_out = data;
    *len_out = len;
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

/* A batch's receives: at most this many parts, and about this many bytes of pointer files,
 * each (the receiver keeps a receive's pointer files in memory and refuses more than 64 MiB;
 * it holds a folder per part until the end). */
#define SEND_BATCH_PARTS 64
#define SEND_BATCH_BYTES (16u << 20)
/* Parts one send may name: all of them are read into memory before the first receive. */
#define SEND_PARTS_MAX 1024

/* One part of a batch: its pointer files read (settled) into memory. */
typedef struct batch_part {
    const char *name; /* borrowed from the request */
    char *dir;
    size_t first, n; /* its files in the batch's list */
} batch_part;

typedef struct batch_send {
    agent_env *env;
    const char *tdb, *ttable, *tdisk;
    ferry_agent_client *cl;
    ferry_agent_send_file *files;
    size_t n_files, cap_files;
    batch_part *parts;
    size_t n_parts;
    json_t *targets; /* the receivers' answers */
    uint64_t sent;
} batch_send;

/* Reads part's pointer files (checksums.txt first) into b->files; FERRY_ENOTFOUND when the
 * part is not in the table or left it while it was read (the caller counts it gone). */
static int batch_read_part(batch_send *b, const agent_table_dir *dirs, size_t ndirs,
                           const char *part, ferry_err *err)
{
    char *dir = NULL;
    const agent_disk *disk = NULL;
    agent_file *files = NULL;
    size_t nf = 0, first = b->n_files;
    int rc = agent_find_live_part(b->env, dirs, ndirs, part, &dir, &disk, err);
    if (!rc)
        rc = agent_list_part_files(dir, &files, &nf, err);
    if (!rc && b->n_files + nf > b->cap_files) {
        size_t cap = (b->n_files + nf) * 2;
        ferry_agent_send_file *f = realloc(b->files, cap * sizeof *f);
        if (!f)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        else
            b->files = f, b->cap_files = cap;
    }
    for (int pass = 0; !rc && pass < 2; pass++)
        for (size_t i = 0; !rc && i < nf; i++) {
            if ((pass == 0) != !strcmp(files[i].name, "checksums.txt"))
                continue;
            char fp[4700];
            snprintf(fp, sizeof fp, "%s/%s", dir, files[i].name);
            char *data = NULL;
            size_t len = 0;
            if ((rc = settled_pointer_read(b->env, fp, &data, &len, err)))
                break;
            ferry_agent_send_file *f = &b->files[b->n_files];
            memset(f, 0, sizeof *f);
            f->fd = -1;
            f->size = len;
            f->data = data;
            f->part = b->n_files == first ? part : NULL;
            if (!(f->name = strdup(files[i].name))) {
                free(data);
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                break;
            }
            b->n_files++;
        }
    if (rc && dir && access(dir, F_OK) != 0 && errno == ENOENT)
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "part %s left the table while it was read "
                           "(merged, moved or detached)", part);
    if (rc) { /* nothing of it is sent */
        for (size_t i = first; i < b->n_files; i++) {
            free((char *)b->files[i].data);
            free((char *)b->files[i].name);
        }
        b->n_files = first;
        free(dir);
    } else {
        b->parts[b->n_parts++] = (batch_part){.name = part, .dir = dir, .first = first, .n = nf};
    }
    agent_files_free(files, nf);
    return rc;
}

/* Streams parts [from, to) of the batch to the target in one receive. */
static int batch_flush(batch_send *b, size_t from, size_t to, ferry_err *err)
{
    if (from == to)
        return FERRY_OK;
    const batch_part *a = &b->parts[from], *z = &b->parts[to - 1];
    json_t *tresp = NULL;
    long tstatus = 0;
    uint64_t sent = 0;
    int rc = ferry_agent_send_parts(b->cl, b->tdb, b->ttable, b->tdisk, b->files + a->first,
                                    z->first + z->n - a->first, &tresp, &tstatus, &sent, err);
    b->sent += sent;
    if (rc) {
        /* Say what the target said, with its status when it answered. */
        b->env->status = (tstatus >= 400 && tstatus < 500) || tstatus == 507 ? (unsigned)tstatus
                                                                             : 502;
        if (tstatus == 401)
            b->env->status = 502; /* our caller's token was fine; the target refused ours */
        return rc;
    }
    if (json_array_append_new(b->targets, tresp))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

/* send {database, table, live: true, parts: [...], target} (API 5): the live pointer parts
 * named, in receives of several parts each. A part no longer in the table is not sent and is
 * answered under "gone" (the single form's 410). */
static int send_batch(agent_env *env, const char *db, const char *table, json_t *names,
                      json_t *target, json_t **resp, ferry_err *err)
{
    batch_send b = {.env = env};
    agent_table_dir *dirs = NULL;
    size_t ndirs = 0, n = json_array_size(names);
    const char *turl, *ttoken;
    json_t *gone = json_array(), *sent_parts = json_array();
    b.targets = json_array();
    int rc = FERRY_OK;
    if (!gone || !sent_parts || !b.targets || !(b.parts = calloc(n + 1, sizeof *b.parts))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (!json_is_array(names) || n == 0 || n > SEND_PARTS_MAX) {
        rc = ferry_err_set(err, FERRY_EINVAL, "\"parts\" must be an array of 1 to %d part "
                           "names", SEND_PARTS_MAX);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = json_string_value(json_array_get(names, i));
        char pid[256];
        if (!p || !ferry_safe_component(p, false) ||
            ferry_agent_part_partition_id(p, pid, sizeof pid, err) != FERRY_OK) {
            rc = ferry_err_set(err, FERRY_EINVAL, "parts[%zu] is not a part name", i);
            goto out;
        }
        for (size_t k = 0; k < i; k++)
            if (!strcmp(p, json_string_value(json_array_get(names, k)))) {
                rc = ferry_err_set(err, FERRY_EINVAL, "part %s is named twice", p);
                goto out;
            }
    }
    if ((rc = agent_req_str(target, "url", &turl, err)) ||
        (rc = agent_req_str(target, "token", &ttoken, err)) ||
        (rc = agent_req_str(target, "database", &b.tdb, err)) ||
        (rc = agent_req_str(target, "table", &b.ttable, err))) {
        ferry_err_prefix(err, "target: ");
        goto out;
    }
    b.tdisk = agent_req_opt(target, "disk");
    env->cached = true; /* the table's paths once for every part */
    if ((rc = agent_table_dirs(env, db, table, &dirs, &ndirs, err)))
        goto out;
    for (size_t i = 0; i < n; i++) {
        const char *p = json_string_value(json_array_get(names, i));
        ferry_err perr = {0};
        int prc = test_live_gone() ? FERRY_ENOTFOUND : batch_read_part(&b, dirs, ndirs, p, &perr);
        if (prc == FERRY_ENOTFOUND) {
            if (json_array_append_new(gone, json_string(p))) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            continue;
        }
        if (prc) {
            *err = perr;
            rc = prc;
            goto out;
        }
    }
    if (b.n_parts && (rc = ferry_agent_client_new(turl, ttoken, 0, &b.cl, err)))
        goto out;
    size_t from = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < b.n_parts; i++) {
        const batch_part *bp = &b.parts[i];
        uint64_t pb = 0;
        for (size_t k = bp->first; k < bp->first + bp->n; k++)
            pb += b.files[k].size;
        if (i > from && (i - from == SEND_BATCH_PARTS || bytes + pb > SEND_BATCH_BYTES)) {
            if ((rc = batch_flush(&b, from, i, err)))
                goto out;
            from = i;
            bytes = 0;
        }
        bytes += pb;
    }
    if ((rc = batch_flush(&b, from, b.n_parts, err)))
        goto out;
    for (size_t i = 0; i < b.n_parts; i++)
        if (json_array_append_new(sent_parts, json_pack("{s:s, s:s, s:I}", "part",
                                                        b.parts[i].name, "from", b.parts[i].dir,
                                                        "files", (json_int_t)b.parts[i].n))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
    *resp = json_pack("{s:s, s:O, s:O, s:I, s:I, s:O}", "kind", "pointer", "parts", sent_parts,
                      "gone", gone, "files", (json_int_t)b.n_files, "bytes_sent",
                      (json_int_t)b.sent, "targets", b.targets);
    if (!*resp)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
out:
    json_decref(gone);
    json_decref(sent_parts);
    json_decref(b.targets);
    ferry_agent_client_free(b.cl);
    for (size_t i = 0; i < b.n_files; i++) {
        free((char *)b.files[i].data);
        free((char *)b.files[i].name);
    }
    free(b.files);
    for (size_t i = 0; i < b.n_parts; i++)
        free(b.parts[i].dir);
    free(b.parts);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
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
    json_t *parts = json_object_get(req, "parts");
    if (parts) {
        if ((rc = agent_req_str(req, "database", &db, err)) ||
            (rc = agent_req_str(req, "table", &table, err)))
            return rc;
        if (!json_is_true(live) || json_object_get(req, "part"))
            return ferry_err_set(err, FERRY_EINVAL, "\"parts\" (a batch) goes with \"live\": "
                                 "true and without \"part\"");
        if (!json_is_object(target))
            return ferry_err_set(err, FERRY_EINVAL, "\"target\" must be an object {url, token, "
                                 "database, table[, disk]}");
        return send_batch(env, db, table, parts, target, resp, err);
    }
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
    for (size_t i = 0; i < nf; i++)
        sf[i].fd = -1; /* nothing opened yet (the cleanup closes what is >= 0) */
    /* checksums.txt first, so the receiver can verify each file while it writes it */
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < nf; i++) {
            bool is_cks = !strcmp(files[i].name, "checksums.txt");
            if ((pass == 0) != is_cks)
                continue;
            char fp[4700];
            size_t len = 0;
            snprintf(fp, sizeof fp, "%s/%s", dir, files[i].name);
            sf[k].name = files[i].name;
            sf[k].size = files[i].size;
            if (disk->is_remote) {
                char *data = NULL;
                if ((rc = settled_pointer_read(env, fp, &data, &len, err)))
                    goto read_failed;
                sf[k].data = data; /* freed at out */
                sf[k].size = len;
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
    for (size_t i = 0; sf && i < nf; i++) {
        if (sf[i].fd >= 0)
            close(sf[i].fd);
        free((char *)sf[i].data);
    }
    free(sf);
    agent_files_free(files, nf);
    free(dir);
    agent_table_dirs_free(dirs, ndirs);
    return rc;
}
