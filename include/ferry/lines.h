/* Reads a text file line by line, counting lines, so parsers can name file and line in errors.
 * Lines starting with '#' and blank lines are skipped when skip_comments is set. */
#ifndef FERRY_LINES_H
#define FERRY_LINES_H

#include <stdbool.h>
#include <stdio.h>

#include "ferry/err.h"

typedef struct ferry_lines {
    FILE *fp;
    const char *path; /* borrowed, for messages */
    char *line;       /* owned; valid until the next call */
    size_t cap;
    long lineno;
    bool skip_comments;
    bool owns_fp;
} ferry_lines;

/* path "-" reads standard input. */
int ferry_lines_open(ferry_lines *r, const char *path, bool skip_comments, ferry_err *err);
/* Returns 1 with r->line set (newline removed), 0 at end of file, or -1 with err set. */
int ferry_lines_next(ferry_lines *r, ferry_err *err);
void ferry_lines_close(ferry_lines *r);

/* Writes all len bytes to fd (again after EINTR or a short write): 0, or -1 with errno set. */
int ferry_write_all(int fd, const void *data, size_t len);

/* Reads a whole file into a NUL-terminated buffer (caller frees *out). */
int ferry_read_file(const char *path, char **out, size_t *len, ferry_err *err);

/* A secret kept in a file (a password, a token): its first line without the line end ("" for an
 * empty file; path "-" reads standard input). *out is the caller's, to wipe and free; errors
 * name the file, never its content. */
int ferry_read_secret_line(const char *path, char **out, ferry_err *err);

#endif
