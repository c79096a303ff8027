/* Small string helpers with strict parsing: a number parses only when the whole field is one. */
#ifndef FERRY_STRUTIL_H
#define FERRY_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Each returns true and stores the value only when s is exactly one well-formed number. */
bool ferry_parse_u64(const char *s, uint64_t *out);
bool ferry_parse_i64(const char *s, int64_t *out);
bool ferry_parse_double(const char *s, double *out); /* finite values only */

/* Sizes with optional binary suffix: 10, 10K, 3MiB, 2G, 1T (K = 1024). */
bool ferry_parse_bytes(const char *s, uint64_t *out);
/* Durations: 90s, 15m, 3h, 7d, 2w, or plain seconds. */
bool ferry_parse_duration(const char *s, uint64_t *seconds);
/* A duration as milliseconds: ferry's durations (30s, 2m, ...) or N ms ("500ms"). */
bool ferry_parse_duration_ms(const char *s, uint64_t *ms);
/* The same, at most UINT32_MAX milliseconds (about 49 days). */
bool ferry_parse_duration_ms32(const char *s, uint32_t *ms);
/* A decimal number up to UINT32_MAX. */
bool ferry_parse_u32(const char *s, uint32_t *out);
/* ADDR:PORT (the last colon splits; ADDR not empty, shorter than hostsz; PORT 0..65535). */
bool ferry_parse_hostport(const char *s, char *host, size_t hostsz, uint16_t *port);

/* Splits line in place at every sep; stores up to max field pointers; returns the field count
 * (which may exceed max: then only max were stored). */
size_t ferry_split(char *line, char sep, char **fields, size_t max);

/* Removes trailing "\n" / "\r\n". */
void ferry_chomp(char *s);
/* Trims ASCII whitespace at both ends, in place; returns s advanced past leading space. */
char *ferry_trim(char *s);

/* Comma-separated name lists as the catalog stores them ("node1,node2"): exact, case-sensitive
 * names, no spaces. ferry_list_add leaves the list unchanged and returns false when the result
 * would not fit in size bytes (a name already there is success). */
/* The one membership test for such lists (routes, placements, repair needs...): true when name
 * is one of the items, compared whole ("a" is not in "ab,abc"; no blanks are trimmed). A NULL or
 * "" list has no items; a trailing comma adds none, but an empty item before a comma (",a",
 * "a,,b") is one, so "" is in those and in no other list. */
bool ferry_list_has(const char *list, const char *name);
/* The number of items of a comma-separated list ("" has none), and item i (0-based) trimmed of
 * blanks into out; ferry_list_item is false when the list has no item i or it does not fit. */
size_t ferry_list_count(const char *list);
bool ferry_list_item(const char *list, size_t i, char *out, size_t outsz);
bool ferry_list_add(char *list, size_t size, const char *name);
void ferry_list_remove(char *list, const char *name);

bool ferry_starts_with(const char *s, const char *prefix);
bool ferry_ends_with(const char *s, const char *suffix);

/* strdup that aborts the process on allocation failure is never used; this returns NULL. */
char *ferry_strndup(const char *s, size_t n);
/* The value of one hex digit (0-9, a-f, A-F), -1 for any other character. */
int ferry_hex_digit(char c);

/* Human-readable byte count into out ("13.0 MB", "7.7 KB"); decimal units as the blog uses. */
const char *ferry_fmt_bytes(uint64_t bytes, char *out, size_t outsz);

#endif
