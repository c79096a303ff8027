/* Local directory backend, laid out like ClickHouse's local blob storage: each object is a
 * file under the root, its key the path relative to the root. Keys are resolved component by
 * component with openat(O_NOFOLLOW) from a descriptor of the root, so no key can leave the root
 * through "..", an absolute path or a symlink. Puts write a temporary file, fsync it and link
 * it into place (then fsync the directory), so readers see whole objects only and an existing
 * object is never replaced (link fails where rename would overwrite); a batch of puts
 * (put_many) does the same with one sync per directory. Names starting
 * with ".ferry-" are reserved for temporary files and multipart parts and never listed. */
#include "objstore/objstore_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferry/lines.h"
#include "ferry/strutil.h"

#define RESERVED ".ferry-"
#define MPU_DIR ".ferry-mpu"
#define COPY_CHUNK (1024 * 1024)

typedef struct local_store {
    char *root; /* absolute, ends with '/' */
    int root_fd;
} local_store;

static local_store *L(ferry_objstore *st) { return st->impl; }

int objstore_local_init(ferry_objstore *st, const char *root, ferry_err *err)
{
    if (!root || root[0] != '/')
        return ferry_err_set(err, FERRY_EINVAL,
                             "local object store path must be absolute (got '%s')",
                             root ? root : "");
    local_store *ls = calloc(1, sizeof *ls);
    if (!ls)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t n = strlen(root);
    ls->root = malloc(n + 2);
    if (!ls->root) {
        free(ls);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    memcpy(ls->root, root, n + 1);
    if (root[n - 1] != '/')
        strcpy(ls->root + n, "/");
    ls->root_fd = open(ls->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ls->root_fd < 0) {
        int e = errno;
        ferry_err_set(err, e == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO,
                      "local object store %s: %s", ls->root, strerror(e));
        free(ls->root);
        free(ls);
        return err ? err->code : FERRY_EIO;
    }
    snprintf(st->desc, sizeof st->desc, "local:%s", ls->root);
    st->impl = ls;
    return FERRY_OK;
}

static void local_close(ferry_objstore *st)
{
    local_store *ls = L(st);
    close(ls->root_fd);
    free(ls->root);
    free(ls);
}

/* The key relative to the root, or NULL (err set) when the key is not a plain path inside it. */
static const char *relative_key(local_store *ls, const char *key, ferry_err *err)
{
    const char *rel = key;
    if (key[0] == '/') {
        if (!ferry_starts_with(key, ls->root)) {
            ferry_err_set(err, FERRY_EINVAL, "key %s is outside the object store root %s", key,
                          ls->root);
            return NULL;
        }
        rel = key + strlen(ls->root);
    }
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            ferry_err_set(err, FERRY_EINVAL,
                          "key '%s' has an empty, '.' or '..' path component; keys must be plain "
                          "paths inside the store", key);
            return NULL;
        }
        if (n >= strlen(RESERVED) && strncmp(p, RESERVED, strlen(RESERVED)) == 0) {
            ferry_err_set(err, FERRY_EINVAL, "key '%s' uses the reserved name prefix '%s'", key,
                          RESERVED);
            return NULL;
        }
        if (n > 255) {
            ferry_err_set(err, FERRY_EINVAL, "key '%s' has a path component over 255 bytes", key);
            return NULL;
        }
        if (!slash)
            break;
        p = slash + 1;
    }
    return rel;
}

/* Opens the directory holding rel's last component (creating directories when create) and
 * points *last at that component. Returns a descriptor (caller closes) or -1 with err set;
 * a missing directory without create gives FERRY_ENOTFOUND. */
static int open_parent(local_store *ls, const char *key, const char *rel, bool create,
                       const char **last, ferry_err *err)
{
    int dfd = dup(ls->root_fd);
    if (dfd < 0) {
        ferry_err_set(err, FERRY_EIO, "dup: %s", strerror(errno));
        return -1;
    }
    const char *p = rel;
    char comp[256];
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        size_t n = (size_t)(slash - p);
        memcpy(comp, p, n);
        comp[n] = '\0';
        int nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            if (mkdirat(dfd, comp, 0755) != 0 && errno != EEXIST) {
                ferry_err_set(err, FERRY_EIO, "%s%.*s: mkdir: %s", ls->root,
                              (int)(slash - rel), rel, strerror(errno));
                close(dfd);
                return -1;
            }
            nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0) {
            int e = errno;
            if (e == ENOENT)
                ferry_err_set(err, FERRY_ENOTFOUND, "%s: no such object", key);
            else if (e == ELOOP || e == ENOTDIR)
                ferry_err_set(err, FERRY_EINVAL,
                              "key %s: %s%.*s is a symlink or not a directory; the local store "
                              "follows no symlinks", key, ls->root, (int)(slash - rel), rel);
            else
                ferry_err_set(err, FERRY_EIO, "%s%.*s: %s", ls->root, (int)(slash - rel), rel,
                              strerror(e));
            close(dfd);
            return -1;
        }
        close(dfd);
        dfd = nfd;
        p = slash + 1;
    }
    *last = p;
    return dfd;
}

static int open_object(local_store *ls, const char *key, int *fd_out, struct stat *sb,
                       ferry_err *err)
{
    const char *rel = relative_key(ls, key, err), *last;
    if (!rel)
        return FERRY_EINVAL;
    int dfd = open_parent(ls, key, rel, false, &last, err);
    if (dfd < 0)
        return err ? err->code : FERRY_EIO;
    int rc = FERRY_OK;
    int fd = openat(dfd, last, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        rc = ferry_err_set(err, e == ENOENT ? FERRY_ENOTFOUND : e == ELOOP ? FERRY_EINVAL : FERRY_EIO,
                           e == ENOENT ? "%s: no such object" : "%s: %s", key,
                           e == ELOOP ? "is a symlink; the local store follows no symlinks"
                                      : strerror(e));
        goto out;
    }
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
        rc = ferry_err_set(err, S_ISDIR(sb->st_mode) ? FERRY_ENOTFOUND : FERRY_EIO,
                           "%s: no such object (a %s is there)", key,
                           S_ISDIR(sb->st_mode) ? "directory" : "non-regular file");
        close(fd);
        goto out;
    }
    *fd_out = fd;
out:
    close(dfd);
    return rc;
}

static void make_etag(const struct stat *sb, char etag[80])
{
    snprintf(etag, 80, "%llx-%llx-%lx", (unsigned long long)sb->st_size,
             (unsigned long long)sb->st_mtim.tv_sec * 1000000000ULL +
                 (unsigned long long)sb->st_mtim.tv_nsec,
             (unsigned long)sb->st_ino);
}

/* Copies body into fd (already positioned at the start). */
static int write_body(int fd, const objstore_body *b, ferry_err *err)
{
    if (b->data) {
        if (ferry_write_all(fd, b->data, b->len) != 0)
            return ferry_err_set(err, FERRY_EIO, "write: %s", strerror(errno));
        return FERRY_OK;
    }
    uint64_t done = 0;
    /* copy_file_range lets the kernel move the bytes (reflink/no user copy where possible). */
    while (done < b->len) {
        loff_t in = (loff_t)(b->offset + done);
        ssize_t n = copy_file_range(b->fd, &in, fd, NULL, (size_t)(b->len - done), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break; /* EXDEV, EINVAL, ENOSYS: fall back to read/write below */
        if (n == 0)
            return ferry_err_set(err, FERRY_EIO, "the source file shrank while it was copied");
        done += (uint64_t)n;
    }
    if (done == b->len)
        return FERRY_OK;
    char *chunk = malloc(COPY_CHUNK);
    if (!chunk)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    int rc = FERRY_OK;
    while (rc == FERRY_OK && done < b->len) {
        size_t n = b->len - done < COPY_CHUNK ? (size_t)(b->len - done) : COPY_CHUNK;
        rc = objstore_body_read(b, done, chunk, n, err);
        if (rc == FERRY_OK && ferry_write_all(fd, chunk, n) != 0)
            rc = ferry_err_set(err, FERRY_EIO, "write: %s", strerror(errno));
        done += n;
    }
    free(chunk);
    return rc;
}

/* Creates an unused temporary name in dfd and opens it; name receives it. */
static int open_temp(int dfd, char name[64], ferry_err *err)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned char r[8];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            for (size_t i = 0; i < sizeof r; i++)
                r[i] = (unsigned char)(rand() & 0xff);
        snprintf(name, 64, RESERVED "tmp-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(),
                 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) {
            if (fd < 0)
                ferry_err_set(err, FERRY_EIO, "creating a temporary file: %s", strerror(errno));
            return fd;
        }
    }
    ferry_err_set(err, FERRY_EIO, "could not find a free temporary file name");
    return -1;
}

/* Writes the bodies in order to a temporary file beside rel and renames it to rel. */
static int atomic_write(local_store *ls, const char *key, const objstore_body *bodies, size_t nb,
                        ferry_err *err)
{
    const char *rel = relative_key(ls, key, err), *last;
    if (!rel)
        return FERRY_EINVAL;
    int dfd = open_parent(ls, key, rel, true, &last, err);
    if (dfd < 0)
        return err ? err->code : FERRY_EIO;
    char tmp[64];
    int rc = FERRY_OK;
    int fd = open_temp(dfd, tmp, err);
    if (fd < 0) {
        rc = FERRY_EIO;
        goto out;
    }
    for (size_t i = 0; i < nb && rc == FERRY_OK; i++)
        rc = write_body(fd, &bodies[i], err);
    if (rc == FERRY_OK && fsync(fd) != 0)
        rc = ferry_err_set(err, FERRY_EIO, "fsync: %s", strerror(errno));
    if (close(fd) != 0 && rc == FERRY_OK)
        rc = ferry_err_set(err, FERRY_EIO, "close: %s", strerror(errno));
    /* create only: link(2) fails with EEXIST where rename(2) would replace, so no role can
     * replace an object that exists; the temporary name is removed either way */
    if (rc == FERRY_OK && linkat(dfd, tmp, dfd, last, 0) != 0)
        rc = errno == EEXIST ? ferry_err_set(err, FERRY_ECONFLICT, "an object (or a directory "
                                             "of keys) exists at this key, and ferry never "
                                             "replaces one")
                             : ferry_err_set(err, FERRY_EIO, "link into place: %s",
                                             strerror(errno));
    unlinkat(dfd, tmp, 0);
    if (rc != FERRY_OK) {
        ferry_err_prefix(err, "put %s%s: ", ls->root, rel);
        goto out;
    }
    if (fsync(dfd) != 0)
        rc = ferry_err_set(err, FERRY_EIO, "put %s%s: fsync of the directory: %s", ls->root, rel,
                           strerror(errno));
out:
    close(dfd);
    return rc;
}

static int local_put(ferry_objstore *st, const char *key, const objstore_body *body,
                     ferry_err *err)
{
    return atomic_write(L(st), key, body, 1, err);
}

/* Files put by one local_put_many batch at most: each holds two descriptors until it is linked. */
#define MANY_MAX 64

/* One file of a batch between its write and its link. */
typedef struct pending_put {
    int dfd, fd;
    const char *last;
    char tmp[64];
    struct stat dir; /* the parent directory, to sync each directory once */
} pending_put;

/* The puts of a batch made durable together: every file written to a temporary name beside its
 * key and its writeback started (sync_file_range), then each one synced (by then the first sync
 * has committed the journal for all of them) and linked into place, then each directory synced
 * once. What one put alone guarantees holds for each: the object appears whole or not at all,
 * and an existing object is never replaced. */
static int put_batch(local_store *ls, const char *const *keys, const objstore_body *bodies,
                     size_t n, int *rcs, ferry_err *err)
{
    pending_put p[MANY_MAX];
    int first = FERRY_OK;
    ferry_err e = {0};
    for (size_t i = 0; i < n; i++) {
        p[i].dfd = p[i].fd = -1;
        rcs[i] = FERRY_OK;
        const char *rel = relative_key(ls, keys[i], &e);
        if (!rel) {
            rcs[i] = FERRY_EINVAL;
            goto failed;
        }
        if ((p[i].dfd = open_parent(ls, keys[i], rel, true, &p[i].last, &e)) < 0) {
            rcs[i] = e.code ? e.code : FERRY_EIO;
            goto failed;
        }
        if (fstat(p[i].dfd, &p[i].dir) != 0 ||
            (p[i].fd = open_temp(p[i].dfd, p[i].tmp, &e)) < 0) {
            rcs[i] = ferry_err_set(&e, FERRY_EIO, "put %s: %s", keys[i], e.msg[0] ? e.msg
                                                                           : strerror(errno));
            goto failed;
        }
        if ((rcs[i] = write_body(p[i].fd, &bodies[i], &e)))
            goto failed;
        sync_file_range(p[i].fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a hint: fsync below decides */
        continue;
    failed:
        if (!first) {
            first = rcs[i];
            *err = e;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i].fd >= 0) {
            int rc = rcs[i];
            if (!rc && fsync(p[i].fd) != 0)
                rc = ferry_err_set(&e, FERRY_EIO, "put %s: fsync: %s", keys[i], strerror(errno));
            if (close(p[i].fd) != 0 && !rc)
                rc = ferry_err_set(&e, FERRY_EIO, "put %s: close: %s", keys[i], strerror(errno));
            /* create only: link(2) fails with EEXIST where rename(2) would replace */
            if (!rc && linkat(p[i].dfd, p[i].tmp, p[i].dfd, p[i].last, 0) != 0)
                rc = errno == EEXIST
                         ? ferry_err_set(&e, FERRY_ECONFLICT, "put %s: an object exists at this "
                                         "key, and ferry never replaces one", keys[i])
                         : ferry_err_set(&e, FERRY_EIO, "put %s: link into place: %s", keys[i],
                                         strerror(errno));
            unlinkat(p[i].dfd, p[i].tmp, 0);
            if (rc && !rcs[i]) {
                rcs[i] = rc;
                if (!first || (first == FERRY_ECONFLICT && rc != FERRY_ECONFLICT)) {
                    first = rc;
                    *err = e;
                }
            }
        }
    }
    /* each directory once (the first file linked into it syncs it for all); a directory whose
     * sync fails fails every file linked into it */
    for (size_t i = 0; i < n; i++) {
        if (p[i].dfd < 0 || rcs[i] != FERRY_OK)
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = p[j].dfd >= 0 && rcs[j] == FERRY_OK && p[j].dir.st_dev == p[i].dir.st_dev &&
                   p[j].dir.st_ino == p[i].dir.st_ino;
        if (seen || fsync(p[i].dfd) == 0)
            continue;
        ferry_err_set(&e, FERRY_EIO, "put %s: fsync of the directory: %s", keys[i],
                      strerror(errno));
        if (!first || first == FERRY_ECONFLICT) {
            first = FERRY_EIO;
            *err = e;
        }
        for (size_t j = i; j < n; j++)
            if (p[j].dfd >= 0 && rcs[j] == FERRY_OK && p[j].dir.st_dev == p[i].dir.st_dev &&
                p[j].dir.st_ino == p[i].dir.st_ino)
                rcs[j] = FERRY_EIO;
    }
    for (size_t i = 0; i < n; i++)
        if (p[i].dfd >= 0)
            close(p[i].dfd);
    return first;
}

static int local_put_many(ferry_objstore *st, const char *const *keys,
                          const objstore_body *bodies, size_t n, int *rcs, ferry_err *err)
{
    int first = FERRY_OK;
    for (size_t at = 0; at < n; at += MANY_MAX) {
        size_t k = n - at < MANY_MAX ? n - at : MANY_MAX;
        ferry_err e = {0};
        int rc = put_batch(L(st), keys + at, bodies + at, k, rcs + at, &e);
        if (rc && (!first || (first == FERRY_ECONFLICT && rc != FERRY_ECONFLICT))) {
            first = rc;
            *err = e;
        }
    }
    return first;
}

static int local_get(ferry_objstore *st, const char *key, uint64_t offset, uint64_t length,
                     ferry_objstore_sink sink, void *ud, ferry_err *err)
{
    int fd = -1;
    struct stat sb;
    int rc = open_object(L(st), key, &fd, &sb, err);
    if (rc)
        return rc;
    uint64_t size = (uint64_t)sb.st_size;
    char *chunk = NULL;
    if (offset > size || (offset == size && (offset > 0 || length > 0)) ||
        (length && offset + length > size)) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "get %s: byte range %llu+%llu is outside the object (%llu bytes)", key,
                           (unsigned long long)offset, (unsigned long long)length,
                           (unsigned long long)size);
        goto out;
    }
    uint64_t end = length ? offset + length : size;
    chunk = malloc(COPY_CHUNK);
    if (!chunk) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (uint64_t pos = offset; pos < end;) {
        size_t want = end - pos < COPY_CHUNK ? (size_t)(end - pos) : COPY_CHUNK;
        ssize_t r = pread(fd, chunk, want, (off_t)pos);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = ferry_err_set(err, FERRY_EIO, "get %s: read: %s", key,
                               r == 0 ? "file shrank" : strerror(errno));
            goto out;
        }
        if (sink(ud, chunk, (size_t)r) != 0) {
            rc = ferry_err_set(err, FERRY_EIO, "get %s: the receiver stopped the transfer", key);
            goto out;
        }
        pos += (uint64_t)r;
    }
out:
    free(chunk);
    close(fd);
    return rc;
}

static int local_head(ferry_objstore *st, const char *key, ferry_object_info *info,
                      ferry_err *err)
{
    int fd = -1;
    struct stat sb;
    int rc = open_object(L(st), key, &fd, &sb, err);
    if (rc)
        return rc;
    close(fd);
    info->size = (uint64_t)sb.st_size;
    info->mtime = sb.st_mtim.tv_sec;
    make_etag(&sb, info->etag);
    return FERRY_OK;
}

typedef struct walk_entry {
    char *key;
    uint64_t size;
    time_t mtime;
    char etag[80];
} walk_entry;

typedef struct walker {
    walk_entry *v;
    size_t n, cap;
    const char *prefix;     /* relative prefix to match */
    const char *after;      /* relative key; only keys > after */
} walker;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const walk_entry *)a)->key, ((const walk_entry *)b)->key);
}

/* Collects regular files below dfd (whose relative path is dir, "" or "a/b/") matching w. */
static int walk(int dfd, ferry_buf *dir, walker *w, ferry_err *err)
{
    /* A new open file description, not dup(dfd): a duplicate shares the directory offset, so
     * the root descriptor kept in the handle would be left at its end and the next listing of
     * the same directory (the second page) would read nothing. */
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return ferry_err_set(err, FERRY_EIO, "listing %s: %s", ferry_buf_cstr(dir),
                             strerror(errno));
    }
    int rc = FERRY_OK;
    size_t base = dir->len;
    struct dirent *de;
    while (rc == FERRY_OK && (de = readdir(d)) != NULL) {
        if (ferry_starts_with(de->d_name, ".") &&
            (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
             ferry_starts_with(de->d_name, RESERVED)))
            continue;
        dir->len = base;
        if (ferry_buf_puts(dir, de->d_name)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
        /* Prune subtrees that cannot match the prefix. */
        size_t cmp = dir->len < strlen(w->prefix) ? dir->len : strlen(w->prefix);
        if (strncmp(dir->data, w->prefix, cmp) != 0)
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* vanished meanwhile */
        if (S_ISDIR(sb.st_mode)) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                continue;
            if (ferry_buf_putc(dir, '/'))
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            else
                rc = walk(sub, dir, w, err);
            close(sub);
            continue;
        }
        if (!S_ISREG(sb.st_mode) || !ferry_starts_with(dir->data, w->prefix))
            continue;
        if (w->after && strcmp(dir->data, w->after) <= 0)
            continue;
        if (w->n == w->cap) {
            size_t nc = w->cap ? w->cap * 2 : 256;
            walk_entry *v = realloc(w->v, nc * sizeof *v);
            if (!v) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                break;
            }
            w->v = v;
            w->cap = nc;
        }
        walk_entry *e = &w->v[w->n];
        if (!(e->key = strdup(dir->data))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            break;
        }
        e->size = (uint64_t)sb.st_size;
        e->mtime = sb.st_mtim.tv_sec;
        make_etag(&sb, e->etag);
        w->n++;
    }
    dir->len = base;
    if (dir->data)
        dir->data[base] = '\0';
    closedir(d);
    return rc;
}

static int local_list(ferry_objstore *st, const char *prefix, const char *token,
                      size_t max_keys, ferry_object_list *out, ferry_err *err)
{
    local_store *ls = L(st);
    bool absolute = prefix[0] == '/';
    const char *rel = prefix;
    if (absolute) {
        if (!ferry_starts_with(prefix, ls->root) && strncmp(prefix, ls->root, strlen(prefix)) != 0)
            return ferry_err_set(err, FERRY_EINVAL, "prefix %s is outside the object store root %s",
                                 prefix, ls->root);
        rel = strlen(prefix) >= strlen(ls->root) ? prefix + strlen(ls->root) : "";
    }
    if (token && token[0] == '/')
        token = ferry_starts_with(token, ls->root) ? token + strlen(ls->root) : token;
    walker w = {NULL, 0, 0, rel, token};
    ferry_buf dir = FERRY_BUF_INIT;
    int rc = FERRY_OK, dfd = -1;
    /* Start at the deepest directory the prefix names, if it exists and is a plain path. */
    const char *slash = strrchr(rel, '/');
    if (slash) {
        ferry_buf dirkey = FERRY_BUF_INIT;
        ferry_buf_append(&dirkey, rel, (size_t)(slash - rel + 1));
        ferry_buf_puts(&dirkey, "x"); /* a last component so open_parent opens the directory */
        ferry_err ignored = {0};
        const char *last;
        if (relative_key(ls, dirkey.data, &ignored))
            dfd = open_parent(ls, dirkey.data, dirkey.data, false, &last, &ignored);
        ferry_buf_free(&dirkey);
        if (dfd < 0)
            goto done; /* no such directory (or not a plain path): nothing matches */
        ferry_buf_append(&dir, rel, (size_t)(slash - rel + 1));
    } else {
        dfd = dup(ls->root_fd);
    }
    if ((rc = walk(dfd, &dir, &w, err)))
        goto done;
    if (w.n)
        qsort(w.v, w.n, sizeof *w.v, cmp_entry);
    size_t cap = 0, take = w.n < max_keys ? w.n : max_keys;
    for (size_t i = 0; i < take && rc == FERRY_OK; i++) {
        char *k = w.v[i].key;
        if (absolute) {
            size_t rl = strlen(ls->root), kl = strlen(k);
            char *a = malloc(rl + kl + 1);
            if (a) {
                memcpy(a, ls->root, rl);
                memcpy(a + rl, k, kl + 1);
            }
            free(k);
            k = a;
        }
        w.v[i].key = NULL;
        if (!k || objstore_list_push(out, &cap, k, w.v[i].size, w.v[i].mtime, w.v[i].etag)) {
            free(k);
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
    }
    if (rc == FERRY_OK && w.n > max_keys && take > 0 &&
        !(out->next_token = strdup(out->items[take - 1].key)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
done:
    for (size_t i = 0; i < w.n; i++)
        free(w.v[i].key);
    free(w.v);
    ferry_buf_free(&dir);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

static int local_del(ferry_objstore *st, const char *key, ferry_err *err)
{
    local_store *ls = L(st);
    const char *rel = relative_key(ls, key, err), *last;
    if (!rel)
        return FERRY_EINVAL;
    ferry_err perr = {0};
    int dfd = open_parent(ls, key, rel, false, &last, &perr);
    if (dfd < 0) {
        if (perr.code == FERRY_ENOTFOUND)
            return FERRY_OK;
        return ferry_err_set(err, perr.code, "%s", perr.msg);
    }
    int rc = FERRY_OK;
    if (unlinkat(dfd, last, 0) != 0 && errno != ENOENT)
        rc = ferry_err_set(err, errno == EISDIR ? FERRY_EINVAL : FERRY_EIO, "delete %s: %s", key,
                           strerror(errno));
    else if (fsync(dfd) != 0)
        rc = ferry_err_set(err, FERRY_EIO, "delete %s: fsync of the directory: %s", key,
                           strerror(errno));
    close(dfd);
    return rc;
}

/* Multipart uploads keep their parts in <root>/.ferry-mpu/<upload id>/<part number>. */
static int mpu_dir(local_store *ls, const char *upload_id, bool create, ferry_err *err)
{
    if (create && mkdirat(ls->root_fd, MPU_DIR, 0700) != 0 && errno != EEXIST)
        return ferry_err_set(err, FERRY_EIO, "%s" MPU_DIR ": mkdir: %s", ls->root,
                             strerror(errno)), -1;
    char path[128];
    snprintf(path, sizeof path, MPU_DIR "/%s", upload_id);
    if (create && mkdirat(ls->root_fd, path, 0700) != 0)
        return ferry_err_set(err, FERRY_EIO, "%s%s: mkdir: %s", ls->root, path,
                             strerror(errno)), -1;
    int fd = openat(ls->root_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        ferry_err_set(err, errno == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO,
                      "multipart upload %s: %s", upload_id, strerror(errno));
    return fd;
}

static int local_mpu_begin(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    local_store *ls = L(st);
    if (!relative_key(ls, mpu->key, err))
        return FERRY_EINVAL;
    unsigned char r[12];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return ferry_err_set(err, FERRY_EIO, "getrandom: %s", strerror(errno));
    char id[32];
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(id + 2 * i, 3, "%02x", r[i]);
    int fd = mpu_dir(ls, id, true, err);
    if (fd < 0)
        return err ? err->code : FERRY_EIO;
    close(fd);
    if (!(mpu->upload_id = strdup(id)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

static int local_mpu_part(ferry_objstore *st, ferry_objstore_mpu *mpu, int number,
                          const objstore_body *body, char etag[80], ferry_err *err)
{
    local_store *ls = L(st);
    int dfd = mpu_dir(ls, mpu->upload_id, false, err);
    if (dfd < 0)
        return err ? err->code : FERRY_EIO;
    char name[16], tmp[64];
    snprintf(name, sizeof name, "%d", number);
    int rc = FERRY_OK;
    int fd = open_temp(dfd, tmp, err);
    if (fd < 0) {
        close(dfd);
        return FERRY_EIO;
    }
    rc = write_body(fd, body, err);
    struct stat sb;
    if (rc == FERRY_OK && fstat(fd, &sb) == 0)
        make_etag(&sb, etag);
    close(fd);
    if (rc == FERRY_OK && renameat(dfd, tmp, dfd, name) != 0)
        rc = ferry_err_set(err, FERRY_EIO, "multipart part %d: rename: %s", number,
                           strerror(errno));
    if (rc)
        unlinkat(dfd, tmp, 0);
    close(dfd);
    return rc;
}

static void remove_mpu_dir(local_store *ls, const char *upload_id)
{
    char path[128];
    snprintf(path, sizeof path, MPU_DIR "/%s", upload_id);
    int dfd = openat(ls->root_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
        DIR *d = fdopendir(dfd);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                unlinkat(dirfd(d), de->d_name, 0);
        if (d)
            closedir(d);
        else
            close(dfd);
    }
    unlinkat(ls->root_fd, path, AT_REMOVEDIR);
}

static int local_mpu_complete(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    local_store *ls = L(st);
    int rc = FERRY_OK;
    int dfd = mpu_dir(ls, mpu->upload_id, false, err);
    if (dfd < 0)
        return err ? err->code : FERRY_EIO;
    objstore_body *bodies = calloc(mpu->n, sizeof *bodies);
    int *fds = calloc(mpu->n, sizeof *fds);
    if (!bodies || !fds) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < mpu->n; i++)
        fds[i] = -1;
    for (size_t i = 0; i < mpu->n && rc == FERRY_OK; i++) {
        char name[16];
        struct stat sb;
        snprintf(name, sizeof name, "%d", mpu->parts[i].number);
        fds[i] = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fds[i] < 0 || fstat(fds[i], &sb) != 0) {
            rc = ferry_err_set(err, FERRY_EIO, "multipart %s: part %d: %s", mpu->key,
                               mpu->parts[i].number, strerror(errno));
            break;
        }
        bodies[i] = (objstore_body){NULL, fds[i], 0, (uint64_t)sb.st_size};
    }
    if (rc == FERRY_OK)
        rc = atomic_write(ls, mpu->key, bodies, mpu->n, err);
out:
    for (size_t i = 0; fds && i < mpu->n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    free(bodies);
    close(dfd);
    if (rc == FERRY_OK)
        remove_mpu_dir(ls, mpu->upload_id);
    return rc;
}

static int local_mpu_abort(ferry_objstore *st, ferry_objstore_mpu *mpu, ferry_err *err)
{
    remove_mpu_dir(L(st), mpu->upload_id);
    return FERRY_OK;
}

const objstore_ops objstore_local_ops = {
    .kind = "local",
    .put = local_put,
    .put_many = local_put_many,
    .get = local_get,
    .head = local_head,
    .list = local_list,
    .del = local_del,
    .mpu_begin = local_mpu_begin,
    .mpu_part = local_mpu_part,
    .mpu_complete = local_mpu_complete,
    .mpu_abort = local_mpu_abort,
    .close = local_close,
};
