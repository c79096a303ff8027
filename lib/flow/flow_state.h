/* The codec of the flows' typed journal states (private to lib/flow): a job's JSON data read
 * into a C struct and written back from it by one table of keys, which tier_state.c,
 * move_state.c and rewrite_state.c each give for their struct. A row names a key, how its value
 * is held (a kind) and where in the struct (offsets); decoding, encoding and freeing walk the
 * rows, so a key is named once and every state reads and writes its kinds the same way.
 *
 * The JSON is an on-record format kept across versions, so what is written is fixed:
 *   compact, keys sorted (JSON_COMPACT | JSON_SORT_KEYS);
 *   FLOW_STR (a char array) when it is not empty, FLOW_HEAP (a char * on the heap) when it is
 *   not NULL, FLOW_FLAG without a has_ field when it is true, any other key when its has_
 *   field says so (decoding sets it: "" or false of the former is read as absent);
 *   the keys this version does not know, kept by decoding in the struct's json_t * (the
 *   descriptor's unknown), written back as they were.
 * A state's own kinds are FLOW_CUSTOM rows with decode, encode and free hooks (flow_custom).
 * Every message starts with the descriptor's what ("tier job data: ...") and names the key. */
#ifndef FERRY_FLOW_STATE_H
#define FERRY_FLOW_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

/* How a key's value is held in the struct. */
enum flow_kind {
    FLOW_STR,    /* a char array of size bytes ("an empty string": absent) */
    FLOW_HEAP,   /* a char *, owned, NULL: absent */
    FLOW_U32,    /* a uint32_t */
    FLOW_U64,    /* a uint64_t, at most INT64_MAX (JSON integers are signed) */
    FLOW_I64,    /* an int64_t */
    FLOW_FLAG,   /* a bool */
    FLOW_LIST,   /* a char ** of owned names, their number a size_t at count */
    FLOW_CUSTOM  /* the row's custom hooks */
};

#define FLOW_NO_HAS SIZE_MAX

typedef struct flow_key flow_key;
typedef struct flow_state_desc flow_state_desc;

/* A state's own kind. decode reads v, the value of key k, into st (any type: it refuses the
 * wrong ones with flow_state_wrong_type, or keeps a value it does not know with
 * flow_state_keep); encode sets *out to the value as JSON (a new reference, the caller's) or
 * NULL when st does not hold the key, and returns an error (flow_state_unwritable) when it
 * cannot make it; free, when not NULL, frees what st holds for the key (st is zeroed after). */
typedef struct flow_custom {
    int (*decode)(const flow_state_desc *d, void *st, const flow_key *k, json_t *v,
                  ferry_err *err);
    int (*encode)(const flow_state_desc *d, const void *st, const flow_key *k, json_t **out,
                  ferry_err *err);
    void (*free)(void *st);
} flow_custom;

/* One key: its name and kind, the offset of its value in the struct, the size of a FLOW_STR's
 * array, the offset of a FLOW_LIST's count, the offset of its has_ field or FLOW_NO_HAS
 * (presence follows the value: FLOW_STR, FLOW_HEAP, FLOW_FLAG, FLOW_CUSTOM), what a FLOW_LIST's
 * item is ("part name": "an array of part names"; NULL: "an array of strings"), the hooks of a
 * FLOW_CUSTOM. Write rows with the FLOW_KEY_* macros below. */
struct flow_key {
    const char *name;
    enum flow_kind kind;
    size_t off;
    size_t size;
    size_t count;
    size_t has;
    const char *item;
    const flow_custom *custom;
};

/* A state type: what its messages start with, its keys, the struct's size, and the offset of
 * its json_t * of unknown keys (owned by the struct, NULL until one is kept). */
struct flow_state_desc {
    const char *what;
    const flow_key *keys;
    size_t n_keys;
    size_t size;
    size_t unknown;
};

#define FLOW_KEY_STR(T, key, f)                                                                    \
    {.name = key, .kind = FLOW_STR, .off = offsetof(T, f), .size = sizeof ((T *)0)->f,             \
     .has = FLOW_NO_HAS}
#define FLOW_KEY_HEAP(T, key, f) {.name = key, .kind = FLOW_HEAP, .off = offsetof(T, f), \
                                  .has = FLOW_NO_HAS}
/* a flag written when true */
#define FLOW_KEY_FLAG(T, key, f) {.name = key, .kind = FLOW_FLAG, .off = offsetof(T, f), \
                                  .has = FLOW_NO_HAS}
/* a FLOW_U32, FLOW_U64, FLOW_I64 or FLOW_FLAG value f written when has_f says so */
#define FLOW_KEY_HAS(T, key, kind_, f)                                                            \
    {.name = key, .kind = kind_, .off = offsetof(T, f), .has = offsetof(T, has_##f)}
/* a list: names v, their number n, has_field (also when empty), what an item is */
#define FLOW_KEY_LIST(T, key, v, n, has_field, item_)                                             \
    {.name = key, .kind = FLOW_LIST, .off = offsetof(T, v), .count = offsetof(T, n),             \
     .has = offsetof(T, has_field), .item = item_}
/* a custom kind whose value starts at field f (what its hooks use it for is theirs);
 * has_field's offset, or FLOW_NO_HAS */
#define FLOW_KEY_CUSTOM(T, key, hooks, f, has_off)                                                \
    {.name = key, .kind = FLOW_CUSTOM, .off = offsetof(T, f), .has = has_off, .custom = hooks}

/* The keys that say which partition of which table on which server a job works on, shared by
 * the tiering and the rewrite jobs: T has char arrays server, db, table, catalog_table, pid,
 * tenant and uint32_t day, split with has_day, has_split. */
#define FLOW_KEYS_PARTITION_JOB(T)                                                                \
    FLOW_KEY_STR(T, "server", server), FLOW_KEY_STR(T, "db", db),                                 \
    FLOW_KEY_STR(T, "table", table), FLOW_KEY_STR(T, "catalog_table", catalog_table),             \
    FLOW_KEY_STR(T, "pid", pid), FLOW_KEY_STR(T, "tenant", tenant),                               \
    FLOW_KEY_HAS(T, "day", FLOW_U32, day), FLOW_KEY_HAS(T, "split", FLOW_U32, split)

/* Reads json (the text of a JSON object) into *st, overwritten (the caller frees its earlier
 * contents first); the keys d does not know are kept in st's unknown. FERRY_EINVAL naming the
 * key and the type it must have when a known key holds another, or a string too long for its
 * array, or when the text is not a JSON object; st is then freed and zeroed. What st owns
 * afterwards (heap strings, lists, unknown, a custom key's) is freed by flow_state_free. */
int flow_state_decode(const flow_state_desc *d, const char *json, void *st, ferry_err *err);
/* The data text of st: compact, keys sorted. *json_out is malloc'ed, the caller frees it
 * (NULL after an error). FERRY_EINVAL naming a key whose value cannot be written (not UTF-8, or
 * out of memory), FERRY_ENOMEM. */
int flow_state_encode(const flow_state_desc *d, const void *st, char **json_out,
                      ferry_err *err);
/* Frees what st owns (per row, then unknown) and zeroes it: the empty data "{}". */
void flow_state_free(const flow_state_desc *d, void *st);

/* Copies s into the FLOW_STR array of key; FERRY_EINVAL naming the key when it does not fit
 * (the array is then as it was), FERRY_EINTERNAL when d has no such FLOW_STR key. */
int flow_state_set_str(const flow_state_desc *d, void *st, const char *key, const char *s,
                       ferry_err *err);
/* flow_state_set_str for each pair of kv: key, value, ..., NULL; stops at the first error. */
int flow_state_set_strs(const flow_state_desc *d, void *st, const char *const *kv,
                        ferry_err *err);

/* Appends a copy of name to the list *v of *n names; FERRY_ENOMEM (the list as it was). */
int flow_names_add(char ***v, size_t *n, const char *name, ferry_err *err);
/* Whether name is in the list. */
bool flow_names_has(char *const *v, size_t n, const char *name);
/* Frees the names and the array and leaves the list empty. */
void flow_names_free(char ***v, size_t *n);

/* For custom hooks. FERRY_EINVAL "<what>: \"key\" must be <want>". */
int flow_state_wrong_type(const flow_state_desc *d, const char *key, const char *want,
                          ferry_err *err);
/* FERRY_EINVAL "<what>: \"key\" cannot be written (not UTF-8, or out of memory)". */
int flow_state_unwritable(const flow_state_desc *d, const char *key, ferry_err *err);
/* Keeps key: v in *unknown (an object made on first use, owned by the caller's struct, which
 * takes a reference to v); FERRY_ENOMEM. */
int flow_state_keep(json_t **unknown, const char *key, json_t *v, ferry_err *err);

#endif
