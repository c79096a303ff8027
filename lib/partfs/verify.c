/* Verifying a MergeTree part folder against its checksums.txt: the file I/O half of the
 * checksums module (the parser in checksums.c stays pure). */
#include "ferry/part_verify.h"
#include "ferry/buf.h"
#include "ferry/lines.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK (256 * 1024)
/* Projections hold parts of their own; nothing nests deeper than that. */
#define MAX_DEPTH 2

const char *ferry_part_file_status_name(int status)
{
    switch (status) {
    case FERRY_PART_FILE_OK: return "ok";
    case FERRY_PART_FILE_MISSING: return "missing";
    case FERRY_PART_FILE_SIZE_MISMATCH: return "size mismatch";
    case FERRY_PART_FILE_HASH_MISMATCH: return "hash mismatch";
    case FERRY_PART_FILE_UNEXPECTED: return "unexpected";
    case FERRY_PART_FILE_UNREADABLE: return "unreadable";
    default: return "?";
    }
}

int ferry_part_hash_file(const char *path, uint64_t hash[2], uint64_t *size, ferry_err *err)
{
    int rc = FERRY_OK;
    unsigned char *chunk = NULL;
    ferry_part_hasher *h = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = ferry_err_set(err, errno == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO, "cannot open %s: "
                           "%s", path, strerror(errno));
        goto out;
    }
    chunk = malloc(READ_CHUNK);
    h = malloc(sizeof *h);
    if (!chunk || !h) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory hashing %s", path);
        goto out;
    }
    ferry_part_hasher_init(h);
    for (;;) {
        ssize_t n = read(fd, chunk, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = ferry_err_set(err, FERRY_EIO, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        ferry_part_hasher_update(h, chunk, (size_t)n);
    }
    ferry_part_hasher_final(h, hash);
    *size = h->total;
out:
    if (fd >= 0)
        close(fd);
    free(chunk);
    free(h);
    return rc;
}

static int add_result(ferry_part_verify_report *r, size_t *cap, const char *prefix,
                      const char *name, int status, ferry_err *err)
{
    if (r->n_files == *cap) {
        size_t ncap = *cap ? *cap * 2 : 32;
        ferry_part_file_result *p = realloc(r->files, ncap * sizeof *p);
        if (!p)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        r->files = p;
        *cap = ncap;
    }
    ferry_part_file_result *f = &r->files[r->n_files];
    memset(f, 0, sizeof *f);
    ferry_buf b = FERRY_BUF_INIT;
    if (ferry_buf_printf(&b, "%s%s", prefix, name)) {
        ferry_buf_free(&b);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    f->name = ferry_buf_detach(&b);
    f->status = status;
    r->n_files++;
    if (status != FERRY_PART_FILE_OK)
        r->n_bad++;
    return FERRY_OK;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files in dir that checksums.txt does not list and ClickHouse would not write unlisted. */
static int find_unexpected(const char *dir, const ferry_checksums *sums, const char *prefix,
                           ferry_part_verify_report *r, size_t *cap, ferry_err *err)
{
    int rc = FERRY_OK;
    char **names = NULL;
    size_t n = 0, ncap = 0;
    DIR *d = opendir(dir);
    if (!d) {
        rc = ferry_err_set(err, FERRY_EIO, "cannot list %s: %s", dir, strerror(errno));
        goto out;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || ferry_checksums_find(sums, nm) ||
            ferry_checksums_unlisted_file_ok(nm))
            continue;
        if (n == ncap) {
            ncap = ncap ? ncap * 2 : 8;
            char **p = realloc(names, ncap * sizeof *p);
            if (!p) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
            names = p;
        }
        if (!(names[n] = strdup(nm))) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        n++;
    }
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_cstr);
    for (size_t i = 0; i < n && !rc; i++)
        rc = add_result(r, cap, prefix, names[i], FERRY_PART_FILE_UNEXPECTED, err);
out:
    if (d)
        closedir(d);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static int verify_dir(const char *dir, const char *prefix, int depth, ferry_part_verify_report *r,
                      size_t *cap, ferry_err *err);

static int verify_entry(const char *dir, const char *prefix, int depth,
                        const ferry_checksum_entry *e, ferry_part_verify_report *r, size_t *cap,
                        ferry_err *err)
{
    int rc = FERRY_OK;
    ferry_buf path = FERRY_BUF_INIT, sub = FERRY_BUF_INIT;
    if (ferry_buf_printf(&path, "%s/%s", dir, e->name)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    struct stat st;
    if (stat(path.data, &st) != 0) {
        int status = errno == ENOENT ? FERRY_PART_FILE_MISSING : FERRY_PART_FILE_UNREADABLE;
        int saved = errno;
        if ((rc = add_result(r, cap, prefix, e->name, status, err)))
            goto out;
        ferry_part_file_result *f = &r->files[r->n_files - 1];
        f->expected_size = e->file_size;
        memcpy(f->expected_hash, e->file_hash, sizeof f->expected_hash);
        if (status == FERRY_PART_FILE_UNREADABLE)
            f->message = strdup(strerror(saved));
        goto out;
    }
    if (S_ISDIR(st.st_mode) && depth < MAX_DEPTH) {
        /* A projection: a part of its own, listed with a summary hash ferry does not recompute;
         * its files are checked one by one against its own checksums.txt instead. */
        if (ferry_buf_printf(&sub, "%s%s/", prefix, e->name)) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        rc = verify_dir(path.data, sub.data, depth + 1, r, cap, err);
        goto out;
    }
    uint64_t size = 0, hash[2] = {0, 0};
    ferry_err herr = {0};
    int status = FERRY_PART_FILE_OK;
    if (!S_ISREG(st.st_mode)) {
        status = FERRY_PART_FILE_UNREADABLE;
        ferry_err_set(&herr, FERRY_EIO, "not a regular file");
    } else if ((uint64_t)st.st_size != e->file_size) {
        status = FERRY_PART_FILE_SIZE_MISMATCH;
        size = (uint64_t)st.st_size;
    } else if (ferry_part_hash_file(path.data, hash, &size, &herr) != FERRY_OK) {
        status = FERRY_PART_FILE_UNREADABLE;
    } else {
        r->bytes_hashed += size;
        if (size != e->file_size)
            status = FERRY_PART_FILE_SIZE_MISMATCH; /* changed while we read it */
        else if (hash[0] != e->file_hash[0] || hash[1] != e->file_hash[1])
            status = FERRY_PART_FILE_HASH_MISMATCH;
    }
    if ((rc = add_result(r, cap, prefix, e->name, status, err)))
        goto out;
    ferry_part_file_result *f = &r->files[r->n_files - 1];
    f->expected_size = e->file_size;
    f->actual_size = size;
    memcpy(f->expected_hash, e->file_hash, sizeof f->expected_hash);
    memcpy(f->actual_hash, hash, sizeof f->actual_hash);
    if (status == FERRY_PART_FILE_UNREADABLE)
        f->message = strdup(herr.msg);
out:
    ferry_buf_free(&path);
    ferry_buf_free(&sub);
    return rc;
}

static int verify_dir(const char *dir, const char *prefix, int depth, ferry_part_verify_report *r,
                      size_t *cap, ferry_err *err)
{
    int rc = FERRY_OK;
    char *text = NULL;
    size_t len = 0;
    ferry_checksums sums = {0};
    ferry_buf path = FERRY_BUF_INIT;
    if (ferry_buf_printf(&path, "%s/checksums.txt", dir)) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    ferry_err ferr = {0};
    int frc = ferry_read_file(path.data, &text, &len, &ferr);
    if (frc == FERRY_OK)
        frc = ferry_checksums_parse(text, len, &sums, &ferr);
    if (frc != FERRY_OK) {
        if (depth == 0) { /* the part itself: the caller cannot verify anything */
            if (ferr.code == FERRY_ENOTFOUND)
                rc = ferry_err_set(err, FERRY_ENOTFOUND, "%s has no checksums.txt: not a "
                                   "MergeTree part folder", dir);
            else if (text)
                rc = ferry_err_set(err, frc, "%s: %s", dir, ferr.msg);
            else
                rc = ferry_err_set(err, frc, "%s", ferr.msg);
            goto out;
        }
        /* A projection whose checksums.txt is missing or damaged: report it as a bad file. */
        int status = ferr.code == FERRY_ENOTFOUND ? FERRY_PART_FILE_MISSING
                                                  : FERRY_PART_FILE_UNREADABLE;
        if ((rc = add_result(r, cap, prefix, "checksums.txt", status, err)))
            goto out;
        if (status == FERRY_PART_FILE_UNREADABLE)
            r->files[r->n_files - 1].message = strdup(ferr.msg);
        goto out;
    }
    for (size_t i = 0; i < sums.count && !rc; i++)
        rc = verify_entry(dir, prefix, depth, &sums.entries[i], r, cap, err);
    if (!rc)
        rc = find_unexpected(dir, &sums, prefix, r, cap, err);
out:
    free(text);
    ferry_checksums_free(&sums);
    ferry_buf_free(&path);
    return rc;
}

int ferry_part_verify_dir(const char *dir, ferry_part_verify_report *report, ferry_err *err)
{
    memset(report, 0, sizeof *report);
    struct stat st;
    if (stat(dir, &st) != 0)
        return ferry_err_set(err, errno == ENOENT ? FERRY_ENOTFOUND : FERRY_EIO, "cannot open "
                             "part folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ferry_err_set(err, FERRY_EINVAL, "%s is not a folder (give a part's folder, the "
                             "one holding checksums.txt)", dir);
    size_t cap = 0;
    return verify_dir(dir, "", 0, report, &cap, err);
}

void ferry_part_verify_report_free(ferry_part_verify_report *report)
{
    if (!report)
        return;
    for (size_t i = 0; i < report->n_files; i++) {
        free(report->files[i].name);
        free(report->files[i].message);
    }
    free(report->files);
    memset(report, 0, sizeof *report);
}
