/* Path safety for code that touches a server's files (the node agent): names that come from a
 * request are checked before they are joined to a directory, and every resulting path must lie
 * inside one of the allowed roots (the ClickHouse data directories) after symlinks are resolved. */
#ifndef FERRY_PATHSAFE_H
#define FERRY_PATHSAFE_H

#include <stdbool.h>
#include <stddef.h>

#include "ferry/err.h"

/* A single path component that is safe to join: 1..255 bytes of [A-Za-z0-9_.-], not "." or "..",
 * not starting with '.' unless allow_dot_prefix. Pure. */
bool ferry_safe_component(const char *name, bool allow_dot_prefix);

/* A relative path of safe components separated by single '/', e.g. "store/abc/<uuid>/". Pure. */
bool ferry_safe_relpath(const char *rel);

typedef struct ferry_roots {
    char **paths; /* canonical (realpath) roots, each ending without '/' */
    size_t n;
} ferry_roots;

/* Adds a root directory (must exist); stored canonicalised. */
int ferry_roots_add(ferry_roots *roots, const char *dir, ferry_err *err);
void ferry_roots_free(ferry_roots *roots);

/* Checks that path (absolute) lies inside one of the roots once every existing prefix of it is
 * resolved (symlinks included); the last components may not exist yet. On success stores the
 * canonical path in out (caller frees). FERRY_EAUTH-like refusal is FERRY_EINVAL with a message
 * naming the path. */
int ferry_roots_check(const ferry_roots *roots, const char *path, char **out, ferry_err *err);

#endif
