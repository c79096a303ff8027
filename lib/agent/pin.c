/* The agent's `pin` operation: raising the ref_count of an active part's pointer files to their
 * count of hard links, so that ClickHouse's removal of the part (after a REPLACE PARTITION, a
 * merge, a DROP) lowers the count and deletes none of the objects the files name.
 *
 * Why. A part ClickHouse moved to the object-storage disk itself has pointer files that say
 * ref_count 0 with one link: its removal deletes the objects. A move copies those pointer files to
 * another server, which then references the same objects; the source must let go of its part
 * without deleting them. ClickHouse's DETACH does (it hard-links every file into detached/, which
 * ferry's agent then unlinks), but it costs a clone of every file: about 0.45 s for 40 cold parts
 * (docs/benchmarks.md, "Session 32"). Pinned, the part can be released by REPLACE PARTITION from
 * an empty table instead, as ferry's own pointer parts are (lib/flow/move_release.c). The objects
 * then belong to ferry's sweep, which deletes only what no pointer file names (docs/operations.md,
 * "The sweep"), the same as every part ferry's agent writes (ref_count 1, docs/agent.md).
 *
 * How. ClickHouse reads a pointer file afresh whenever it links or unlinks it (checked on 26.7:
 * a pinned native part replaced and removed by the cleanup thread deleted no object, an unpinned
 * one tried to delete all of them), and rewrites it in place (truncate, then write). The pin
 * rewrites only the count's digits, in place and only when they keep their length (0 -> 1 is the
 * case that matters), so the file never has another length or a moment without content, and every
 * hard link of it (one inode) sees the new count. Per part: every file is read and parsed first;
 * a part with a read-only file, a file that is not a pointer, a subfolder (projection) or a count
 * whose digits would grow is refused whole, nothing written. Each file is read again right before
 * its digits are written, and left alone when it changed since (ClickHouse rewrote it: the
 * check below decides). Then every file of the parts is synced (fsync, eight at once: also a
 * count an earlier, killed pin raised and never synced), and only then is each part checked once
 * more from its files: "held" when every file's ref_count is at least its link count. A count
 * ClickHouse rewrote concurrently (a FREEZE or BACKUP of that very part at that moment) shows up
 * there as not held, and the caller then detaches the part as before. What the pin cannot
 * exclude: ClickHouse truncating a file between the agent's last read and its one-byte write,
 * which the write could then extend; ClickHouse's own write of the whole content follows at once
 * and covers it. Only a FREEZE, BACKUP, ATTACH FROM or removal of that
 * part in that microsecond does it, which a move's lease on the slice keeps ferry's own flows
 * from. */
#include "agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferry/log.h"
#include "ferry/pathsafe.h"
#include "ferry/pointer.h"

/* Parts in one request: a move releases at most MV_RELEASE_COLD_PARTS_MAX of a table. */
#define PIN_PARTS_MAX 4096

/* One pointer file of a part, read and parsed: where its count lies and what it becomes. */
typedef struct pin_file {
    char *text; /* the file as read (owned) */
    size_t len, at, n;
    char digits[16]; /* the new count's digits ("" when the file needs no pin) */
} pin_file;

static void pin_files_free(pin_file *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(f[i].text);
    free(f);
}

/* Reads name in partfd whole (a regular file of at most max bytes, not followed) into *text. */
static int read_at(int partfd, const char *name, char **text, size_t *len, struct stat *sb,
                   ferry_err *err)
{
    int fd = openat(partfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return ferry_err_set(err, errno == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO, "%s: %s", name,
                             strerror(errno));
    int rc = FERRY_OK;
    char *buf = NULL;
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode) || sb->st_size > AGENT_POINTER_FILE_MAX) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: not a regular file of at most %u bytes", name,
                           (unsigned)AGENT_POINTER_FILE_MAX);
        goto out;
    }
    size_t want = (size_t)sb->st_size, got = 0;
    if (!(buf = malloc(want + 1))) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    *text = buf;
    *len = got;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

/* Reads and parses every file of the part folder open on partfd (files[0..n), sorted) into
 * out[] and says what each needs: digits for a count below the file's links ("" for none). Errors
 * name what makes the part unpinnable. */
static int plan_part(int partfd, const agent_file *files, size_t n, pin_file *out, ferry_err *err)
{
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        ferry_pointer pt = FERRY_POINTER_INIT;
        int rc = read_at(partfd, files[i].name, &out[i].text, &out[i].len, &sb, err);
        if (!rc)
            rc = ferry_pointer_parse(out[i].text, out[i].len, "", &pt, err);
        if (rc) {
            ferry_err_prefix(err, "%s: ", files[i].name);
            return rc;
        }
        out[i].at = pt.ref_count_at;
        out[i].n = pt.ref_count_len;
        bool read_only = pt.read_only;
        int32_t ref = pt.ref_count;
        ferry_pointer_free(&pt);
        if (ref >= 0 && (uint64_t)ref >= (uint64_t)sb.st_nlink)
            continue; /* an owner beside ClickHouse's links already */
        if (read_only)
            return ferry_err_set(err, FERRY_EUNSUPPORTED, "%s: a read-only pointer file",
                                 files[i].name);
        int dl = snprintf(out[i].digits, sizeof out[i].digits, "%ju", (uintmax_t)sb.st_nlink);
        if (dl < 0 || (size_t)dl != out[i].n || sb.st_nlink > INT32_MAX) {
            out[i].digits[0] = '\0';
            return ferry_err_set(err, FERRY_EUNSUPPORTED, "%s: ref_count %d -> %ju changes the "
                                 "file's length", files[i].name, (int)ref,
                                 (uintmax_t)sb.st_nlink);
        }
    }
    return FERRY_OK;
}

/* Adds "part/name" (relative to the table folder) to the names to sync. */
static int add_synced(char ***synced, size_t *n_synced, size_t *cap, const char *part,
                      const char *name, ferry_err *err)
{
    if (*n_synced == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        char **g = realloc(*synced, nc * sizeof *g);
        if (!g)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        *synced = g;
        *cap = nc;
    }
    size_t l = strlen(part) + 1 + strlen(name) + 1;
    if (!((*synced)[*n_synced] = malloc(l)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    snprintf((*synced)[(*n_synced)++], l, "%s/%s", part, name);
    return FERRY_OK;
}

/* Writes the planned digits of each file in place; a file whose bytes changed since it was
 * planned is left alone (the check after the sync decides). Every file of the part goes to
 * *synced, written now or not: a count an earlier pin wrote and a killed agent never synced is
 * already raised in the page cache, and must reach the disk before it is relied on too. */
static int write_part(int partfd, const char *part, const agent_file *files, pin_file *pf,
                      size_t n, char ***synced, size_t *n_synced, size_t *cap, size_t *wrote,
                      ferry_err *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = add_synced(synced, n_synced, cap, part, files[i].name, err);
        if (rc)
            return rc;
        if (!pf[i].digits[0])
            continue;
        int fd = openat(partfd, files[i].name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return ferry_err_set(err, FERRY_EIO, "%s/%s: %s", part, files[i].name,
                                 strerror(errno));
        char *now = malloc(pf[i].len + 1);
        ssize_t r = now ? pread(fd, now, pf[i].len + 1, 0) : -1;
        if (!now) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        } else if (r == (ssize_t)pf[i].len && !memcmp(now, pf[i].text, pf[i].len)) {
            errno = 0;
            if (pwrite(fd, pf[i].digits, pf[i].n, (off_t)pf[i].at) != (ssize_t)pf[i].n)
                rc = ferry_err_set(err, FERRY_EIO, "%s/%s: writing the count: %s", part,
                                   files[i].name, errno ? strerror(errno) : "short write");
            else
                (*wrote)++;
        }
        free(now);
        close(fd);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

/* Whether every file of the part says a count at least its links, read now. */
static bool part_held(int tablefd, const char *dir, const char *part, ferry_err *err)
{
    agent_file *files = NULL;
    size_t n = 0;
    char path[4400];
    bool held = false;
    int partfd = -1;
    snprintf(path, sizeof path, "%s%s", dir, part);
    if (agent_list_part_files(path, &files, &n, err))
        goto out;
    if ((partfd = openat(tablefd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        ferry_err_set(err, FERRY_EIO, "%s: %s", part, strerror(errno));
        goto out;
    }
    held = n > 0;
    for (size_t i = 0; i < n && held; i++) {
        struct stat sb;
        char *text = NULL;
        size_t len = 0;
        ferry_pointer pt = FERRY_POINTER_INIT;
        held = !read_at(partfd, files[i].name, &text, &len, &sb, err) &&
               !ferry_pointer_parse(text, len, "", &pt, err) && pt.ref_count >= 0 &&
               (uint64_t)pt.ref_count >= (uint64_t)sb.st_nlink;
        if (!held && !err->code)
            ferry_err_set(err, FERRY_ECONFLICT, "%s: ref_count %d is below its %ju links "
                          "(rewritten by ClickHouse meanwhile?)", files[i].name,
                          (int)pt.ref_count, (uintmax_t)sb.st_nlink);
        ferry_pointer_free(&pt);
        free(text);
    }
    if (!n)
        ferry_err_set(err, FERRY_ENOTFOUND, "%s: no files", part);
out:
    if (partfd >= 0)
        close(partfd);
    agent_files_free(files, n);
    return held;
}

/* The table folder `under` on the remote disk `disk`, checked: canonical, inside the roots, no
 * symlink on the way (*dir, caller frees, ends with '/'). */
static int table_folder(agent_env *env, const char *disk, const char *under, char **dir,
                        ferry_err *err)
{
    const agent_disk *d = agent_env_disk(env, disk);
    if (!d || !d->is_remote)
        return ferry_err_set(err, FERRY_EINVAL, "no object-storage disk named '%.200s'", disk);
    char joined[4400], *canon = NULL;
    size_t dl = strlen(d->path);
    if ((size_t)snprintf(joined, sizeof joined, "%s%s%s", d->path,
                         dl && d->path[dl - 1] == '/' ? "" : "/", under) >= sizeof joined)
        return ferry_err_set(err, FERRY_EINVAL, "\"under\" makes a path that is too long");
    size_t jl = strlen(joined);
    if (jl && joined[jl - 1] == '/')
        joined[--jl] = '\0';
    int rc = ferry_roots_check(&env->roots, joined, &canon, err);
    if (rc)
        return rc;
    char dcanon[4400];
    if (!realpath(d->path, dcanon) ||
        (size_t)snprintf(joined, sizeof joined, "%s/%s", dcanon, under) >= sizeof joined) {
        free(canon);
        return ferry_err_set(err, FERRY_EIO, "disk '%s' path %s: %s", disk, d->path,
                             strerror(errno));
    }
    jl = strlen(joined);
    if (jl && joined[jl - 1] == '/')
        joined[--jl] = '\0';
    if (strcmp(canon, joined)) {
        free(canon);
        return ferry_err_set(err, FERRY_EINVAL, "\"under\": %.200s passes through a symlink; "
                             "name the table's folder itself (system.parts' path)", under);
    }
    size_t cl = strlen(canon);
    char *out = malloc(cl + 2);
    if (!out) {
        free(canon);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    snprintf(out, cl + 2, "%s/", canon);
    free(canon);
    *dir = out;
    return FERRY_OK;
}

/* pin {"disk", "under" (a table folder relative to the disk's path), "parts": [names]}:
 * answers {"parts": [{"name", "held": true} or {"name", "held": false, "error"}], "raised": N}
 * in request order. The request fails as a whole only when it is malformed, the
 * folder is not a remote disk's, or the sync fails (nothing then counts as held). */
int agent_op_pin(agent_env *env, json_t *req, json_t **resp, ferry_err *err)
{
    const char *disk, *under;
    json_t *parts = json_object_get(req, "parts"), *results = NULL, *p;
    char *dir = NULL, **synced = NULL;
    size_t n_synced = 0, cap = 0, wrote = 0, i;
    int tablefd = -1;
    bool *refused = NULL;
    char **why = NULL;
    int rc = agent_req_str(req, "disk", &disk, err);
    if (!rc)
        rc = agent_req_str(req, "under", &under, err);
    if (!rc && !ferry_safe_relpath(under))
        rc = ferry_err_set(err, FERRY_EINVAL, "\"under\": '%.200s' is not a relative path of "
                           "plain names", under);
    if (!rc && (!json_is_array(parts) || !json_array_size(parts) ||
                json_array_size(parts) > PIN_PARTS_MAX))
        rc = ferry_err_set(err, FERRY_EINVAL, "\"parts\" must be an array of 1..%d part names",
                           PIN_PARTS_MAX);
    json_array_foreach(parts, i, p) if (!rc && (!json_string_value(p) ||
                                                !ferry_safe_component(json_string_value(p),
                                                                      false)))
        rc = ferry_err_set(err, FERRY_EINVAL, "parts[%zu] is not a part name", i);
    if (rc || (rc = agent_env_roots(env, err)) || (rc = table_folder(env, disk, under, &dir, err)))
        goto out;
    size_t np = json_array_size(parts);
    if (!(refused = calloc(np, sizeof *refused)) || !(why = calloc(np, sizeof *why)) ||
        !(results = json_array())) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if ((tablefd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        rc = ferry_err_set(err, FERRY_EIO, "%s: %s", dir, strerror(errno));
        goto out;
    }
    for (i = 0; i < np && !rc; i++) {
        const char *part = json_string_value(json_array_get(parts, i));
        char path[4400];
        agent_file *files = NULL;
        size_t nf = 0;
        pin_file *pf = NULL;
        ferry_err perr = {0};
        int partfd = -1;
        snprintf(path, sizeof path, "%s%s", dir, part);
        int prc = agent_list_part_files(path, &files, &nf, &perr);
        if (!prc && !(pf = calloc(nf + 1, sizeof *pf)))
            prc = ferry_err_set(&perr, FERRY_ENOMEM, "out of memory");
        if (!prc && (partfd = openat(tablefd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                        O_CLOEXEC)) < 0)
            prc = ferry_err_set(&perr, FERRY_EIO, "%s: %s", part, strerror(errno));
        if (!prc)
            prc = plan_part(partfd, files, nf, pf, &perr);
        if (!prc)
            rc = write_part(partfd, part, files, pf, nf, &synced, &n_synced, &cap, &wrote, err);
        if (prc) {
            refused[i] = true;
            why[i] = strdup(perr.msg);
        }
        if (partfd >= 0)
            close(partfd);
        pin_files_free(pf, nf);
        agent_files_free(files, nf);
        if (prc == FERRY_ENOMEM)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    /* the counts are on disk before anyone relies on them: a REPLACE that outlived a power loss
     * the pins did not would have the restarted server delete the objects */
    if (!rc && n_synced && (rc = agent_fsync_names(tablefd, synced, n_synced, err))) {
        agent_note_errno(env, errno);
        goto out;
    }
    for (i = 0; i < np && !rc; i++) {
        const char *part = json_string_value(json_array_get(parts, i));
        ferry_err herr = {0};
        bool held = !refused[i] && part_held(tablefd, dir, part, &herr);
        json_t *o = json_pack("{s:s, s:b}", "name", part, "held", held);
        if (o && !held)
            json_object_set_new(o, "error", json_string(refused[i] && why[i] ? why[i]
                                                                             : herr.msg));
        if (!o || json_array_append_new(results, o))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    if (!rc && !(*resp = json_pack("{s:O, s:I}", "parts", results, "raised", (json_int_t)wrote)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc)
        FLOG_INFO("agent: pin disk=%s under=%s parts=%zu files_raised=%zu", disk, under, np,
                  wrote);
out:
    if (tablefd >= 0)
        close(tablefd);
    for (i = 0; i < n_synced; i++)
        free(synced[i]);
    free(synced);
    if (why)
        for (i = 0; i < json_array_size(parts); i++)
            free(why[i]);
    free(why);
    free(refused);
    json_decref(results);
    free(dir);
    return rc;
}
