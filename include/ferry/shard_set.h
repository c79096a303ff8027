/* A list of shard names as one value (issue 18, "one domain model"): a slice's route, its
 * placement. An array of names in order, each a valid name (ferry/names.h), no name twice, at
 * most FERRY_SHARDS_MAX of them: that is the one length rule (the text's length follows from it).
 * The catalog stores the list as comma-separated text ("node1,node2") and ferry_shard_set_parse /
 * ferry_shard_set_format convert at its boundary, so the stored format is the one it always was.
 * Fixed size, copied freely (plain assignment). Pure; lib/util/shard_set.c. */
#ifndef FERRY_SHARD_SET_H
#define FERRY_SHARD_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/names.h"

/* The most names a list holds: a slice has at most rf replicas and the replication factor is
 * 1..16 (lib/catalog/config.c for [cluster] rf, `ferry tenant set-rf`); a clone adds a replica
 * only up to this count (lib/flow/move_begin.c refuses one that would pass it). */
#define FERRY_SHARDS_MAX 16
/* A buffer that holds any list as text and its NUL: FERRY_SHARDS_MAX names of at most
 * FERRY_NAME_MAX - 1 bytes and the commas between them. */
#define FERRY_SHARDS_TEXT_MAX (FERRY_SHARDS_MAX * FERRY_NAME_MAX)

typedef struct ferry_shard_set {
    uint32_t n;                                    /* names in use, 0..FERRY_SHARDS_MAX */
    char name[FERRY_SHARDS_MAX][FERRY_NAME_MAX];   /* name[0..n-1], in order */
} ferry_shard_set;

/* The empty list (a zeroed ferry_shard_set is one too). */
void ferry_shard_set_clear(ferry_shard_set *s);

/* Parses comma-separated text ("" is the empty list) into *s. FERRY_EINVAL, *s empty, and a
 * message naming the list and what was wrong when an item is empty (",a", "a,,b", "a,"), is
 * longer than FERRY_NAME_MAX - 1 bytes or otherwise not a valid name (FERRY_NAME_RULE), is
 * there twice, or there are more than FERRY_SHARDS_MAX. No blanks are trimmed.
 * ferry_shard_set_parse_n reads len bytes of text (no NUL needed). */
int ferry_shard_set_parse(ferry_shard_set *s, const char *text, ferry_err *err);
int ferry_shard_set_parse_n(ferry_shard_set *s, const char *text, size_t len, ferry_err *err);
/* The list a document of the catalog stores, read as the router reads it (lib/router/routing.c):
 * each item trimmed of blanks and the empty ones skipped (" a , ,b," is "a,b"; ferry itself
 * writes no such text, another writer may have); the rest as ferry_shard_set_parse. The
 * catalog's decoder reads routes and placements with it, so the flows see the list the routers
 * serve. */
int ferry_shard_set_parse_stored(ferry_shard_set *s, const char *text, size_t len,
                                 ferry_err *err);

/* The stored list text[0..len) item by item as ferry_shard_set_parse_stored reads it, without
 * copying or checking names: for the fast path that hands the stored text on instead of a set
 * (the router's routing table), so it reads a list as the catalog's decoder does. From *at (0 to start): true with the next item's bounds
 * [*item, *item + *n), blanks around it trimmed (*n 0: an empty item, which that reading skips),
 * and *at past its comma; false at the end. */
bool ferry_shard_text_next(const char *text, size_t len, size_t *at, const char **item,
                           size_t *n);

/* The list as comma-separated text into out (size > 0), as snprintf: returns the length of the
 * whole text; out holds it when that is below size (always with FERRY_SHARDS_TEXT_MAX), else
 * as much as fits. */
size_t ferry_shard_set_format(const ferry_shard_set *s, char *out, size_t size);
/* The text in a FERRY_SHARDS_TEXT_MAX buffer, returned for use in messages. */
const char *ferry_shard_set_str(const ferry_shard_set *s, char out[FERRY_SHARDS_TEXT_MAX]);

static inline size_t ferry_shard_set_count(const ferry_shard_set *s) { return s->n; }
/* Name i, i < count. */
const char *ferry_shard_set_at(const ferry_shard_set *s, size_t i);
/* The position of name, or -1 when it is not in the list (compared whole, case-sensitive). */
int ferry_shard_set_find(const ferry_shard_set *s, const char *name);
bool ferry_shard_set_has(const ferry_shard_set *s, const char *name);

/* Appends name. A name already there is success with the list unchanged. FERRY_EINVAL (list
 * unchanged) when name is not a valid name or the list is full. */
int ferry_shard_set_add(ferry_shard_set *s, const char *name, ferry_err *err);
/* Removes name, keeping the others' order; false when it was not there. */
bool ferry_shard_set_remove(ferry_shard_set *s, const char *name);

/* The same names in the same order. */
bool ferry_shard_set_equal(const ferry_shard_set *a, const ferry_shard_set *b);
/* The same names in any order. */
bool ferry_shard_set_same(const ferry_shard_set *a, const ferry_shard_set *b);

#endif
