/* The lab node's delete guard: ferry-node exports its own unlink, unlinkat, remove, rename,
 * renameat, renameat2, rmdir and syscall, so the libchdb it loads (which calls them through its
 * PLT) binds to these instead of libc's. Any call that would delete, or replace, a path inside
 * the lab's shared blob directory is refused with EACCES and counted; everything else goes to
 * the real libc function (dlsym RTLD_NEXT). Root ignores file permissions, so this is what
 * keeps one simulated server from deleting cold objects other servers still point at. */
#include "node.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ferry/log.h"

#define EXPORT __attribute__((visibility("default")))

static char guard_root[PATH_MAX + 1]; /* canonical, with a trailing '/' */
static size_t guard_root_len;
static atomic_ulong guard_refused;

int node_guard_set_root(const char *dir)
{
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return -1;
    snprintf(guard_root, sizeof guard_root, "%s/", strcmp(real, "/") == 0 ? "" : real);
    guard_root_len = strlen(guard_root);
    return 0;
}

unsigned long node_guard_refused(void) { return atomic_load(&guard_refused); }

/* Lexically normalises an absolute path in place: removes ".", "..", and repeated '/'. */
static void normalise(char *p)
{
    char *out = p, *in = p;
    while (*in) {
        while (*in == '/')
            in++;
        if (!*in)
            break;
        char *seg = in;
        while (*in && *in != '/')
            in++;
        size_t n = (size_t)(in - seg);
        if (n == 1 && seg[0] == '.')
            continue;
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out > p && *(out - 1) != '/')
                out--;
            if (out > p)
                out--;
            continue;
        }
        *out++ = '/';
        memmove(out, seg, n);
        out += n;
    }
    if (out == p)
        *out++ = '/';
    *out = '\0';
}

/* True when path (relative to dirfd) names the blob directory or something inside it. */
static bool inside_root(int dirfd, const char *path)
{
    if (!guard_root_len || !path)
        return false;
    char abs[2 * PATH_MAX + 2];
    if (path[0] == '/') {
        snprintf(abs, sizeof abs, "%s", path);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base))
                return false;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0)
                return false;
            base[n] = '\0';
        }
        snprintf(abs, sizeof abs, "%s/%s", base, path);
    }
    normalise(abs);
    /* The last component itself is what gets removed (a symlink is removed, not followed),
     * so canonicalise only its parent. */
    char resolved[2 * PATH_MAX + 2];
    char *slash = strrchr(abs, '/');
    char parent[PATH_MAX + 1], real_parent[PATH_MAX];
    size_t plen = (size_t)(slash - abs);
    if (plen == 0)
        snprintf(parent, sizeof parent, "/");
    else
        snprintf(parent, sizeof parent, "%.*s", (int)plen, abs);
    if (realpath(parent, real_parent))
        snprintf(resolved, sizeof resolved, "%s/%s/", strcmp(real_parent, "/") ? real_parent : "",
                 slash + 1);
    else
        snprintf(resolved, sizeof resolved, "%s/", abs);
    return strncmp(resolved, guard_root, guard_root_len) == 0;
}

static int refuse(const char *what, int dirfd, const char *path)
{
    unsigned long n = atomic_fetch_add(&guard_refused, 1) + 1;
    /* The first refusals and then every 1000th are logged, so a retry loop cannot flood. */
    if (n <= 20 || n % 1000 == 0)
        FLOG_WARN("refused %s of a shared cold object path=%s dirfd=%d refused_total=%lu", what,
                  path, dirfd, n);
    errno = EACCES;
    return -1;
}

typedef int (*path_fn)(const char *);
typedef int (*at_fn)(int, const char *, int);
/* ferry's own temporary files in the blob directory (the local object store writes
 * ".ferry-tmp-..." and renames it to the object's key): never an object a pointer names, so
 * removing or renaming one is allowed (an agent inside the node uploads through them). */
static bool ferry_temp(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, ".ferry-tmp-", 11) == 0;
}

typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned int);
typedef long (*syscall_fn)(long, ...);

#define REAL(name, type)                                                                        \
    static type real_fn;                                                                         \
    if (!real_fn)                                                                               \
        real_fn = (type)dlsym(RTLD_NEXT, name);

EXPORT int unlink(const char *path)
{
    REAL("unlink", path_fn);
    if (inside_root(AT_FDCWD, path) && !ferry_temp(path))
        return refuse("unlink", AT_FDCWD, path);
    return real_fn(path);
}

EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
    REAL("unlinkat", at_fn);
    if (inside_root(dirfd, path) && !ferry_temp(path))
        return refuse("unlinkat", dirfd, path);
    return real_fn(dirfd, path, flags);
}

EXPORT int rmdir(const char *path)
{
    REAL("rmdir", path_fn);
    if (inside_root(AT_FDCWD, path))
        return refuse("rmdir", AT_FDCWD, path);
    return real_fn(path);
}

EXPORT int remove(const char *path)
{
    REAL("remove", path_fn);
    if (inside_root(AT_FDCWD, path))
        return refuse("remove", AT_FDCWD, path);
    return real_fn(path);
}

/* A rename out of the blob directory deletes the object there; a rename onto an existing
 * object replaces it. New objects may still be renamed into place, and ferry's temporary files
 * may become new objects. */
static bool rename_refused(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    if (inside_root(olddirfd, oldpath) &&
        !(ferry_temp(oldpath) && inside_root(newdirfd, newpath)))
        return true;
    if (inside_root(newdirfd, newpath)) {
        struct stat st;
        if (fstatat(newdirfd, newpath, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return true;
    }
    return false;
}

EXPORT int rename(const char *oldpath, const char *newpath)
{
    REAL("rename", rename_fn);
    if (rename_refused(AT_FDCWD, oldpath, AT_FDCWD, newpath))
        return refuse("rename", AT_FDCWD, oldpath);
    return real_fn(oldpath, newpath);
}

EXPORT int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    REAL("renameat", renameat_fn);
    if (rename_refused(olddirfd, oldpath, newdirfd, newpath))
        return refuse("renameat", olddirfd, oldpath);
    return real_fn(olddirfd, oldpath, newdirfd, newpath);
}

EXPORT int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                     unsigned int flags)
{
    REAL("renameat2", renameat2_fn);
    if (rename_refused(olddirfd, oldpath, newdirfd, newpath))
        return refuse("renameat2", olddirfd, oldpath);
    return real_fn(olddirfd, oldpath, newdirfd, newpath, flags);
}

/* ClickHouse issues renameat2 (RENAME_NOREPLACE) through syscall(2); check the path-taking
 * calls that remove or replace, pass the rest through untouched. */
EXPORT long syscall(long number, ...)
{
    REAL("syscall", syscall_fn);
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    switch (number) {
    case SYS_unlink:
    case SYS_rmdir:
        if (inside_root(AT_FDCWD, (const char *)a[0]))
            return refuse("syscall unlink", AT_FDCWD, (const char *)a[0]);
        break;
    case SYS_unlinkat:
        if (inside_root((int)a[0], (const char *)a[1]))
            return refuse("syscall unlinkat", (int)a[0], (const char *)a[1]);
        break;
    case SYS_rename:
        if (rename_refused(AT_FDCWD, (const char *)a[0], AT_FDCWD, (const char *)a[1]))
            return refuse("syscall rename", AT_FDCWD, (const char *)a[0]);
        break;
    case SYS_renameat:
    case SYS_renameat2:
        if (rename_refused((int)a[0], (const char *)a[1], (int)a[2], (const char *)a[3]))
            return refuse("syscall renameat", (int)a[0], (const char *)a[1]);
        break;
    default:
        break;
    }
    return real_fn(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
