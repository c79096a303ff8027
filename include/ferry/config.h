/* ferry's configuration file: git-config syntax, parsed without I/O (ferry_config_parse) so it
 * can be tested and fuzzed.
 *
 *   # comment            ; comment
 *   [cluster]
 *   name = lab
 *   [shard "node1"]
 *   http = http://127.0.0.1:8123
 *   password = "quoted \"value\" with # inside"
 *
 * Section and key names are case-insensitive ASCII [a-z0-9_-]; a subsection is a quoted string.
 * A key given twice in one section keeps the last value. Every entry remembers its line so
 * consumers can report "FILE:LINE: ..." for values they reject. */
#ifndef FERRY_CONFIG_H
#define FERRY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ferry/err.h"

typedef struct ferry_config_entry {
    char *section;    /* lower-cased */
    char *subsection; /* NULL when absent; case kept */
    char *key;        /* lower-cased */
    char *value;
    int line;
} ferry_config_entry;

typedef struct ferry_config {
    char *path; /* for messages */
    ferry_config_entry *entries;
    size_t n, cap;
} ferry_config;

/* Parses text; path names the source in messages. On success *out owns everything. */
int ferry_config_parse(const char *text, const char *path, ferry_config *out, ferry_err *err);
int ferry_config_load(const char *path, ferry_config *out, ferry_err *err);
void ferry_config_free(ferry_config *c);

/* The entry for section/subsection/key (subsection NULL = none), or NULL. Last one wins. */
const ferry_config_entry *ferry_config_find(const ferry_config *c, const char *section,
                                            const char *subsection, const char *key);
const char *ferry_config_get(const ferry_config *c, const char *section, const char *subsection,
                             const char *key);

/* Typed getters: absent -> *out = def, FERRY_OK; present but malformed -> FERRY_EINVAL with
 * "PATH:LINE: section.key: ... (expected ...)". */
int ferry_config_u64(const ferry_config *c, const char *section, const char *subsection,
                     const char *key, uint64_t def, uint64_t *out, ferry_err *err);
int ferry_config_double(const ferry_config *c, const char *section, const char *subsection,
                        const char *key, double def, double *out, ferry_err *err);
int ferry_config_bytes(const ferry_config *c, const char *section, const char *subsection,
                       const char *key, uint64_t def, uint64_t *out, ferry_err *err);
int ferry_config_bool(const ferry_config *c, const char *section, const char *subsection,
                      const char *key, bool def, bool *out, ferry_err *err);
/* Present and non-empty, or FERRY_EINVAL naming the missing key. */
int ferry_config_require(const ferry_config *c, const char *section, const char *subsection,
                         const char *key, const char **out, ferry_err *err);

/* Distinct subsections of section, in order of first appearance. Pointers borrowed from c;
 * returns the count (all of them, even if more than max). */
size_t ferry_config_subsections(const ferry_config *c, const char *section, const char **out,
                                size_t max);

/* Rejects keys of section (any subsection) not in allowed (NULL-terminated), naming the line. */
int ferry_config_check_keys(const ferry_config *c, const char *section,
                            const char *const *allowed, ferry_err *err);

/* Writes value quoted when it needs quoting, for config files ferry generates. */
void ferry_config_fput_value(FILE *fp, const char *value);

#endif
