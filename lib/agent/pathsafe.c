/* Name validation and root confinement for the node agent's file operations. */
#include "ferry/pathsafe.h"
#include "ferry/buf.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

bool ferry_safe_component(const char *name, bool allow_dot_prefix)
{
    size_t n = strlen(name);
    if (n == 0 || n > 255 || !strcmp(name, ".") || !strcmp(name, ".."))
        return false;
    if (name[0] == '.' && !allow_dot_prefix)
        return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

bool ferry_safe_relpath(const char *rel)
{
    if (!*rel || *rel == '/')
        return false;
    char buf[4096];
    size_t n = strlen(rel);
    if (n >= sizeof buf)
        return false;
    memcpy(buf, rel, n + 1);
    if (n && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *save = NULL;
    for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save))
        if (!ferry_safe_component(c, false))
            return false;
    return strstr(rel, "//") == NULL;
}

int ferry_roots_add(ferry_roots *roots, const char *dir, ferry_err *err)
{
    char *canon = realpath(dir, NULL);
    if (!canon)
        return ferry_err_set(err, FERRY_EINVAL, "data directory %s: %s", dir, strerror(errno));
    char **p = realloc(roots->paths, (roots->n + 1) * sizeof *p);
    if (!p) {
        free(canon);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    roots->paths = p;
    size_t len = strlen(canon);
    if (len > 1 && canon[len - 1] == '/')
        canon[len - 1] = '\0';
    roots->paths[roots->n++] = canon;
    return FERRY_OK;
}

void ferry_roots_free(ferry_roots *roots)
{
    for (size_t i = 0; i < roots->n; i++)
        free(roots->paths[i]);
    free(roots->paths);
    roots->paths = NULL;
    roots->n = 0;
}

/* Resolves the longest existing prefix of path with realpath and appends the rest, which must
 * consist of safe components. */
static int canonicalise(const char *path, char **out, ferry_err *err)
{
    int rc = FERRY_OK;
    ferry_buf b = FERRY_BUF_INIT;
    char *copy = strdup(path);
    char *resolved = NULL;
    if (!copy)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    size_t len = strlen(copy);
    while (len > 1 && copy[len - 1] == '/')
        copy[--len] = '\0';
    char *split = copy + len; /* copy[0..split) is tried as the existing prefix */
    for (;;) {
        char saved = *split;
        *split = '\0';
        resolved = realpath(copy[0] ? copy : "/", NULL);
        *split = saved;
        if (resolved)
            break;
        if (errno != ENOENT) {
            rc = ferry_err_set(err, FERRY_EINVAL, "path %s: %s", path, strerror(errno));
            goto out;
        }
        char *slash = split;
        while (slash > copy && *--slash != '/')
            ;
        if (slash == copy) {
            rc = ferry_err_set(err, FERRY_EINVAL, "path %s: no existing parent", path);
            goto out;
        }
        split = slash;
    }
    ferry_buf_puts(&b, resolved);
    if (*split) {
        /* The tail does not exist yet: each component must be a plain name. */
        char *save = NULL;
        for (char *c = strtok_r(split, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
            if (!ferry_safe_component(c, true)) {
                rc = ferry_err_set(err, FERRY_EINVAL, "path %s: component '%s' is not allowed",
                                   path, c);
                goto out;
            }
            if (b.len > 1)
                ferry_buf_putc(&b, '/');
            ferry_buf_puts(&b, c);
        }
    }
    *out = ferry_buf_detach(&b);
out:
    ferry_buf_free(&b);
    free(resolved);
    free(copy);
    return rc;
}

int ferry_roots_check(const ferry_roots *roots, const char *path, char **out, ferry_err *err)
{
    if (path[0] != '/')
        return ferry_err_set(err, FERRY_EINVAL, "path %s is not absolute", path);
    char *canon = NULL;
    int rc = canonicalise(path, &canon, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < roots->n; i++) {
        const char *r = roots->paths[i];
        size_t n = strlen(r);
        if (!strncmp(canon, r, n) && (canon[n] == '/' || canon[n] == '\0' || !strcmp(r, "/"))) {
            *out = canon;
            return FERRY_OK;
        }
    }
    rc = ferry_err_set(err, FERRY_EINVAL, "refused: %s is outside the ClickHouse data "
                       "directories", path);
    free(canon);
    return rc;
}
