/* A map from NUL-terminated strings to 64-bit values: open addressing (linear probing on the
 * key's FNV-1a hash), kept at most half full, for the lookups that would otherwise each write
 * their own hash table (the catalog view's shard names and shard-list texts).
 *
 * Ownership: the map borrows its keys: each key passed to ferry_strmap_add must stay unchanged
 * and alive until ferry_strmap_free (keep them in a pool or array the caller owns). The map owns
 * only its slot array; a zero-initialised map (FERRY_STRMAP_INIT) is empty and valid. Not
 * thread-safe. Pure; lib/util/strmap.c. */
#ifndef FERRY_STRMAP_H
#define FERRY_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ferry_strmap_slot {
    const char *key; /* borrowed; NULL: a free slot */
    uint64_t val;
} ferry_strmap_slot;

typedef struct ferry_strmap {
    ferry_strmap_slot *slots;
    size_t n, cap; /* keys, slots (0 or a power of two) */
} ferry_strmap;

#define FERRY_STRMAP_INIT {NULL, 0, 0}

/* true and *val (when val is not NULL) when key is in the map. */
bool ferry_strmap_get(const ferry_strmap *m, const char *key, uint64_t *val);

/* Enters key, which must not be in the map yet (look with ferry_strmap_get first), with val.
 * FERRY_OK, or FERRY_ENOMEM with the map unchanged. */
int ferry_strmap_add(ferry_strmap *m, const char *key, uint64_t val);

/* The number of keys. */
size_t ferry_strmap_count(const ferry_strmap *m);

/* Frees the slots (not the keys); the map is empty again. */
void ferry_strmap_free(ferry_strmap *m);

#endif
