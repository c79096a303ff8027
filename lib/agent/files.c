/* File helpers for the node agent: listing part folders (regular files only), recursive removal
 * that never follows a symlink, durable writes (fsync of files and directories), comparing two
 * part folders, and temporary folder names. */
#include "agent_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void agent_note_errno(agent_env *env, int e)
{
    if (e == ENOSPC || e == EDQUOT)
        env->status = 507;
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const agent_file *)a)->name, ((const agent_file *)b)->name);
}

void agent_files_free(agent_file *f, size_t n)
{
    for (size_t i = 0; f && i < n; i++)
        free(f[i].name);
    free(f);
}

int agent_list_part_files(const char *dir, agent_file **out, size_t *n, ferry_err *err)
{
    int rc = FERRY_OK;
    agent_file *f = NULL;
    size_t nf = 0, cap = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        rc = ferry_err_set(err, errno == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO,
                           "part folder %s: %s", dir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        goto out;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        struct stat sb;
        if (fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = ferry_err_set(err, FERRY_EIO, "%s/%s: %s", dir, e->d_name, strerror(errno));
            goto out;
        }
        if (!S_ISREG(sb.st_mode)) {
            rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "%s/%s is not a regular file (%s); "
                               "projections and links are not supported", dir, e->d_name,
                               S_ISDIR(sb.st_mode) ? "a directory" : S_ISLNK(sb.st_mode) ?
                               "a symlink" : "special");
            goto out;
        }
        if (!ferry_safe_component(e->d_name, false)) {
            rc = ferry_err_set(err, FERRY_EUNSUPPORTED, "%s: unexpected file name '%s'", dir,
                               e->d_name);
            goto out;
        }
        if (nf == cap) {
            cap = cap ? cap * 2 : 32;
            agent_file *g = realloc(f, cap * sizeof *g);
            if (!g) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            f = g;
        }
        f[nf].name = strdup(e->d_name);
        f[nf].size = (uint64_t)sb.st_size;
        nf++;
    }
    qsort(f, nf, sizeof *f, cmp_file);
    *out = f;
    *n = nf;
    f = NULL;
    nf = 0;
out:
    if (d)
        closedir(d);
    agent_files_free(f, nf);
    return rc;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    int r = (flag == FTW_DP) ? rmdir(path) : unlink(path);
    return r == 0 || errno == ENOENT ? 0 : -1;
}

int agent_rmtree(const char *path, ferry_err *err)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? FERRY_OK
                               : ferry_err_set(err, FERRY_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        if (unlink(path) != 0)
            return ferry_err_set(err, FERRY_EIO, "cannot remove %s: %s", path, strerror(errno));
        return FERRY_OK;
    }
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
        return ferry_err_set(err, FERRY_EIO, "cannot remove %s: %s", path, strerror(errno));
    return FERRY_OK;
}

int agent_mkdir(const char *path, ferry_err *err)
{
    if (mkdir(path, 0755) == 0)
        return FERRY_OK;
    struct stat sb;
    if (errno == EEXIST && lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return FERRY_OK;
    return ferry_err_set(err, errno == ENOSPC ? FERRY_EIO : FERRY_EIO, "cannot create %s: %s",
                         path, strerror(errno));
}

static int write_file(int dirfd, const char *name, const void *data, size_t len, bool sync,
                      ferry_err *err)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return ferry_err_set(err, FERRY_EIO, "cannot create %s: %s", name, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            errno = e;
            return ferry_err_set(err, FERRY_EIO, "writing %s: %s", name, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    /* the descriptor is closed whether fsync worked or not; without sync, the writeback is
     * only started (the caller syncs later: agent_fsync_files) */
    int e = 0;
    if (sync)
        e = fsync(fd) != 0 ? errno : 0;
    else
        sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    if (close(fd) != 0 && !e)
        e = errno;
    if (e)
        return ferry_err_set(err, FERRY_EIO, "writing %s: %s", name, strerror(e));
    return FERRY_OK;
}

int agent_write_file_at(int dirfd, const char *name, const void *data, size_t len,
                        ferry_err *err)
{
    return write_file(dirfd, name, data, len, true, err);
}

int agent_write_file_nosync_at(int dirfd, const char *name, const void *data, size_t len,
                               ferry_err *err)
{
    return write_file(dirfd, name, data, len, false, err);
}

/* Syncing a folder's files: ext4 (and XFS) commit the journal once for all the fsyncs that
 * wait together, so a handful of threads syncing a part's files at once costs about one commit
 * instead of one per file (25 small files: ~100 ms one by one on this machine's disk, ~10 ms
 * together). The files' writeback was started when they were written. */
#define FSYNC_THREADS 8

typedef struct fsync_job {
    int dirfd;
    char *const *names;
    size_t n;
    size_t next; /* the next name to sync, taken under mu */
    int err_no;  /* the first failure's errno, 0 if none */
    size_t err_at;
    pthread_mutex_t mu;
} fsync_job;

static void *fsync_worker(void *arg)
{
    fsync_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next < j->n && !j->err_no ? j->next++ : j->n;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n)
            return NULL;
        int fd = openat(j->dirfd, j->names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        int er = fd < 0 ? errno : fsync(fd) != 0 ? errno : 0;
        if (fd >= 0)
            close(fd);
        if (er) {
            pthread_mutex_lock(&j->mu);
            if (!j->err_no) {
                j->err_no = er;
                j->err_at = i;
            }
            pthread_mutex_unlock(&j->mu);
        }
    }
}

int agent_fsync_names(int dirfd, char *const *names, size_t n, ferry_err *err)
{
    fsync_job j = {.dirfd = dirfd, .names = names, .n = n};
    pthread_t th[FSYNC_THREADS];
    size_t nth = 0;
    pthread_mutex_init(&j.mu, NULL);
    /* this thread syncs too: one file needs no thread at all */
    for (size_t want = n > FSYNC_THREADS ? FSYNC_THREADS - 1 : n ? n - 1 : 0; nth < want; nth++)
        if (pthread_create(&th[nth], NULL, fsync_worker, &j) != 0)
            break; /* fewer threads only make it slower */
    fsync_worker(&j);
    for (size_t i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&j.mu);
    if (!j.err_no)
        return FERRY_OK;
    int rc = ferry_err_set(err, FERRY_EIO, "fsync %s: %s", names[j.err_at], strerror(j.err_no));
    errno = j.err_no; /* for the caller's agent_note_errno (507 on a full disk) */
    return rc;
}

/* Appends a copy of name to *names (n used, cap allocated). */
static int push_name(char ***names, size_t *n, size_t *cap, const char *name, ferry_err *err)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        char **nn = realloc(*names, nc * sizeof *nn);
        if (!nn)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        *names = nn;
        *cap = nc;
    }
    if (!((*names)[*n] = strdup(name)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    (*n)++;
    return FERRY_OK;
}

int agent_fsync_files(int dirfd, ferry_err *err)
{
    int rc = FERRY_OK, er = 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int dup_fd = dup(dirfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return ferry_err_set(err, FERRY_EIO, "listing a folder to sync it: %s", strerror(errno));
    }
    rewinddir(d);
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            rc = push_name(&names, &n, &cap, e->d_name, err);
    /* the folder itself too, beside its files: its entries wait for the same commit instead of
     * one of their own after it (agent_place_tmp) */
    if (!rc)
        rc = push_name(&names, &n, &cap, ".", err);
    if (!rc && (rc = agent_fsync_names(dirfd, names, n, err)))
        er = errno;
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    if (er)
        errno = er;
    return rc;
}

int agent_fsync_dir(const char *path, ferry_err *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ferry_err_set(err, FERRY_EIO, "fsync %s: %s", path, strerror(e));
    }
    close(fd);
    return FERRY_OK;
}

int agent_read_small(const char *path, size_t max, char **data, size_t *len, ferry_err *err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return ferry_err_set(err, errno == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO, "%s: %s", path,
                             strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
        close(fd);
        return ferry_err_set(err, FERRY_EINVAL, "%s: not a regular file of at most %zu bytes",
                             path, max);
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        close(fd);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return FERRY_OK;
}

bool agent_dirs_equal(const char *a, const char *b)
{
    agent_file *fa = NULL, *fb = NULL;
    size_t na = 0, nb = 0;
    ferry_err err = {0};
    bool eq = false;
    if (agent_list_part_files(a, &fa, &na, &err) || agent_list_part_files(b, &fb, &nb, &err) ||
        na != nb)
        goto out;
    for (size_t i = 0; i < na; i++) {
        if (strcmp(fa[i].name, fb[i].name) || fa[i].size != fb[i].size)
            goto out;
        char pa[4200], pb[4200];
        snprintf(pa, sizeof pa, "%s/%s", a, fa[i].name);
        snprintf(pb, sizeof pb, "%s/%s", b, fb[i].name);
        FILE *x = fopen(pa, "rb"), *y = fopen(pb, "rb");
        bool same = x && y;
        char bx[65536], by[65536];
        while (same) {
            size_t rx = fread(bx, 1, sizeof bx, x), ry = fread(by, 1, sizeof by, y);
            if (rx != ry || memcmp(bx, by, rx))
                same = false;
            if (rx == 0)
                break;
        }
        if (x)
            fclose(x);
        if (y)
            fclose(y);
        if (!same)
            goto out;
    }
    eq = true;
out:
    agent_files_free(fa, na);
    agent_files_free(fb, nb);
    return eq;
}

void agent_tmp_name(char *out, size_t outsz)
{
    unsigned char r[8] = {0};
    if (RAND_bytes(r, sizeof r) != 1) {
        unsigned long long t = (unsigned long long)getpid() ^ (unsigned long long)time(NULL);
        memcpy(r, &t, sizeof t);
    }
    /* the writer's pid in the name: a folder whose writer died (kill -9 mid-receive) can be
     * told from one still being written (agent_tmp_in_use) */
    snprintf(out, outsz, "tmp-ferry-%ld-%02x%02x%02x%02x%02x%02x%02x%02x", (long)getpid(), r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

bool agent_tmp_in_use(const char *name)
{
    const char *pfx = "tmp-ferry-";
    if (strncmp(name, pfx, strlen(pfx)))
        return false;
    char *end = NULL;
    long pid = strtol(name + strlen(pfx), &end, 10);
    if (!end || *end != '-' || pid <= 0)
        return false; /* an older name without a pid: nobody can be writing it any more */
    if (pid == (long)getpid())
        return true;
    /* another process of this host: alive unless it is gone or a zombie */
    char p[64], st = 0;
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    int n = fscanf(f, "%*d (%*[^)]) %c", &st);
    fclose(f);
    return n == 1 && st != 'Z' && st != 'X';
}
