/* ClickHouse object-storage metadata ("pointer") files: the small local file an object-storage
 * disk keeps for each file of a part, naming the blobs that hold its bytes. Pure: parses and
 * writes text in memory, no I/O.
 *
 * Format (every line ends with '\n'):
 *   <version>                      1..5
 *   <object count>\t<total size>   total size = sum of the object sizes
 *   <size>\t<key>                  one line per object; key escaped like writeEscapedString
 *   <ref_count>                    hard links beyond the first (signed 32-bit)
 *   <read_only>                    0 or 1; versions >= 3 only
 *   <inline data>                  escaped string, usually empty; versions >= 4 only
 * Keys: v1 stores the full key, which must start with the disk's key prefix; v2..v4 store the
 * key relative to the prefix (joined like std::filesystem::path: prefix / key); v5 stores the
 * full key. In memory every key is the full object key, whatever the file's version. */
#ifndef FERRY_POINTER_H
#define FERRY_POINTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/err.h"

enum {
    FERRY_POINTER_V_ABSOLUTE_PATHS = 1,
    FERRY_POINTER_V_RELATIVE_PATHS = 2,
    FERRY_POINTER_V_READ_ONLY_FLAG = 3,
    FERRY_POINTER_V_INLINE_DATA = 4,
    FERRY_POINTER_V_FULL_OBJECT_KEY = 5,
    FERRY_POINTER_V_MIN = 1,
    FERRY_POINTER_V_MAX = 5
};

typedef struct ferry_pointer_object {
    char *key;     /* full object key (owned) */
    uint64_t size; /* bytes */
} ferry_pointer_object;

typedef struct ferry_pointer {
    int version;                  /* the version read (0 for a pointer built in memory) */
    ferry_pointer_object *objects; /* owned */
    size_t n_objects, cap_objects;
    int32_t ref_count;
    bool read_only;
    char *inline_data; /* owned, may hold NUL bytes; NULL = empty */
    size_t inline_len;
    /* where ferry_pointer_parse found the reference count in the text: its bytes (sign and
     * digits) are text[ref_count_at .. ref_count_at + ref_count_len); 0 and 0 for a pointer
     * built in memory. A count rewritten in place needs them (the agent's pin, docs/agent.md). */
    size_t ref_count_at, ref_count_len;
} ferry_pointer;

#define FERRY_POINTER_INIT {0, NULL, 0, 0, 0, false, NULL, 0, 0, 0}

/* Parses text[0..len) written for a disk whose key prefix is key_prefix (the disk's
 * key_compatibility_prefix or common key prefix; "" when none). Keys are returned in full.
 * Malformed input: FERRY_EINVAL with "line N: what is wrong". On success *out owns everything
 * (free with ferry_pointer_free); on failure *out is left empty. */
int ferry_pointer_parse(const char *text, size_t len, const char *key_prefix, ferry_pointer *out,
                        ferry_err *err);

/* Appends the file for p in format version (1..5) to out. For versions 1..4 every key must lie
 * under key_prefix (FERRY_EINVAL otherwise); inline data needs version >= 4 and a read-only flag
 * needs version >= 3 (FERRY_EINVAL rather than silently dropping them). */
int ferry_pointer_serialize(const ferry_pointer *p, int version, const char *key_prefix,
                            ferry_buf *out, ferry_err *err);

/* Appends one object (copies key). FERRY_EINVAL for an empty key or a total size overflow. */
int ferry_pointer_add_object(ferry_pointer *p, const char *key, uint64_t size, ferry_err *err);

/* Sum of the object sizes (the file's total size). */
uint64_t ferry_pointer_total_size(const ferry_pointer *p);

void ferry_pointer_free(ferry_pointer *p);

/* ClickHouse's writeEscapedString / readEscapedString, exposed for tests and other formats.
 * escape: appends s[0..n) escaped (\b \f \n \r \t \0 \\ \' get a backslash).
 * unescape: decodes s[0..n) (no raw tab or newline allowed); FERRY_EINVAL naming the bad
 * escape's byte offset. */
int ferry_ch_escape(ferry_buf *out, const char *s, size_t n);
int ferry_ch_unescape(ferry_buf *out, const char *s, size_t n, ferry_err *err);

#endif
