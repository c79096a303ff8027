/* Line reader with line numbers, whole-file reads, and whole writes to a descriptor. */
#define _POSIX_C_SOURCE 200809L
#include "ferry/lines.h"
#include "ferry/strutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ferry_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int ferry_lines_open(ferry_lines *r, const char *path, bool skip_comments, ferry_err *err)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->skip_comments = skip_comments;
    if (strcmp(path, "-") == 0) {
        r->fp = stdin;
        return FERRY_OK;
    }
    r->fp = fopen(path, "r");
    if (!r->fp)
        return ferry_err_set(err, FERRY_EINVAL, "%s: cannot open: %s", path, strerror(errno));
    r->owns_fp = true;
    return FERRY_OK;
}

int ferry_lines_next(ferry_lines *r, ferry_err *err)
{
    for (;;) {
        errno = 0;
        ssize_t n = getline(&r->line, &r->cap, r->fp);
        if (n < 0) {
            if (ferror(r->fp)) {
                ferry_err_set(err, FERRY_EIO, "%s: read error after line %ld: %s", r->path,
                              r->lineno, strerror(errno));
                return -1;
            }
            return 0;
        }
        r->lineno++;
        if ((size_t)n != strlen(r->line)) {
            ferry_err_set(err, FERRY_EINVAL, "%s:%ld: line contains a NUL byte", r->path,
                          r->lineno);
            return -1;
        }
        ferry_chomp(r->line);
        if (r->skip_comments) {
            const char *p = r->line;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '#' || *p == '\0')
                continue;
        }
        return 1;
    }
}

void ferry_lines_close(ferry_lines *r)
{
    if (r->owns_fp && r->fp)
        fclose(r->fp);
    free(r->line);
    memset(r, 0, sizeof *r);
}

int ferry_read_file(const char *path, char **out, size_t *len, ferry_err *err)
{
    int rc = FERRY_OK;
    char *data = NULL;
    size_t used = 0, cap = 0;
    FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!fp)
        return ferry_err_set(err, errno == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO,
                             "%s: cannot open: %s", path, strerror(errno));
    for (;;) {
        if (cap - used < 4096) {
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(data, cap);
            if (!p) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "%s: out of memory", path);
                goto out;
            }
            data = p;
        }
        size_t n = fread(data + used, 1, cap - used - 1, fp);
        used += n;
        if (n == 0) {
            if (ferror(fp)) {
                rc = ferry_err_set(err, FERRY_EIO, "%s: read error: %s", path, strerror(errno));
                goto out;
            }
            break;
        }
    }
    data[used] = '\0';
    *out = data;
    data = NULL;
    if (len)
        *len = used;
out:
    free(data);
    if (fp != stdin)
        fclose(fp);
    return rc;
}

int ferry_read_secret_line(const char *path, char **out, ferry_err *err)
{
    size_t len = 0;
    *out = NULL;
    int rc = ferry_read_file(path, out, &len, err);
    if (rc)
        return rc;
    size_t first = strcspn(*out, "\r\n");
    memset(*out + first, 0, len - first); /* the rest of the file goes too */
    return FERRY_OK;
}
