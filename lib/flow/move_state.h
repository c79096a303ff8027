/* A move's journal state as a typed record (private to lib/flow): one field per key of the JSON
 * data its side record jobs/move.ID holds, decoded and encoded in one place (move_state.c)
 * instead of keys read and written by name across move*.c, where a typo compiled and a wrong
 * type read as 0 or NULL. The JSON is the on-record format that catalogs keep across versions
 * (tests/integration/mixed_version.sh runs an older ferry against newer records), so
 * mv_state_encode writes exactly what the code wrote when the state was a jansson object, and
 * keys it does not know are kept and written back (an older binary keeps a newer one's keys).
 *
 * The keys (docs/moves.md):
 *   freezes   names of the freezes the move made on the source that may still exist there (the
 *             freeze invariant of move_journal.c), in the order they were made
 *   fp        what CLEANUP checks the source against before it detaches, per table name:
 *             {rows, sum, xor, digest: {rows, parts, sum, xor}, top}: the verified source's
 *             fingerprint, the digest of its parts' hash_of_all_files and, when its table numbers
 *             blocks table-wide, the top of its parts (sum and xor as decimal strings: 64-bit
 *             unsigned; rows, parts and top integers). Records of versions before the digest
 *             have {rows, sum, xor} alone; top is absent where it was not kept.
 *   mode      "clone": keep-source mode (a clone adds a replica); absent for a move
 *
 * A new move's data is {"freezes":[],"fp":{}} (with "mode":"clone" for a clone): mv_state_init,
 * and as text mv_state_initial, the text ferry_move_begin has always written (its keys not
 * sorted: every later write, mv_state_encode, sorts them, "fp" first). freezes and fp are written
 * when their has_ field says so (also when empty), mode when clone is set; a zeroed mv_state is
 * the empty data "{}". */
#ifndef FERRY_FLOW_MOVE_STATE_H
#define FERRY_FLOW_MOVE_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/verify.h"

/* One table's entry in fp. */
typedef struct mv_fp {
    char *table;           /* owned: the table's name (the key) */
    ferry_fingerprint fp;  /* rows, hash_sum, hash_xor of the verified source */
    ferry_fingerprint dg;  /* its parts' digest: rows, parts, hash_sum, hash_xor */
    bool has_dg;           /* absent in records of versions before the digest */
    int64_t top;           /* the top of its parts (move_run.h, mv_part_top) */
    bool has_top;
    json_t *unknown;       /* owned or NULL: the entry's keys this version does not know */
    json_t *dg_unknown;    /* owned or NULL: the same inside digest */
} mv_fp;

/* The fp object: entries in no particular order (the encoding sorts the keys). */
typedef struct mv_fps {
    mv_fp *v; /* owned, n entries */
    size_t n;
} mv_fps;

typedef struct mv_state {
    char **freezes;   /* owned, n_freezes names (mv_state_freeze_add) */
    size_t n_freezes;
    bool has_freezes; /* the list is in the data (also when empty) */
    mv_fps fps;
    bool has_fp;      /* the object is in the data (also when empty) */
    bool clone;       /* "mode": "clone" */
    json_t *unknown;  /* owned or NULL: the data's keys this version does not know, kept */
} mv_state;

/* Reads a job record's data (a JSON object) into *st, overwritten (free its earlier contents
 * first). FERRY_EINVAL naming the key and the type it must have when a known key holds another,
 * or an fp entry lacks rows, sum or xor (or its digest one of its four), or the text is not a
 * JSON object; st is then empty. */
int mv_state_decode(const char *json, mv_state *st, ferry_err *err);
/* The data text of st (compact, keys sorted: what the journal writes); *json_out is malloc'ed,
 * the caller frees it. */
int mv_state_encode(const mv_state *st, char **json_out, ferry_err *err);
/* Frees what st owns and leaves it empty ("{}"). */
void mv_state_free(mv_state *st);
/* A new move's state (*st overwritten, nothing owned): no freezes, no fingerprints. */
void mv_state_init(mv_state *st, bool clone);
/* The data text of a new move as ferry_move_begin writes it (mv_state_init's state, in the key
 * order it has always had); static, not to be freed. */
const char *mv_state_initial(bool clone);

/* Appends a freeze name (has_freezes set); FERRY_ENOMEM. */
int mv_state_freeze_add(mv_state *st, const char *name, ferry_err *err);
/* Takes the first name equal to name out of the list (the others keep their order); whether
 * there was one. */
bool mv_state_freeze_remove(mv_state *st, const char *name);

/* The entry of table in st's fp, or NULL (valid until st's fp changes). */
const mv_fp *mv_state_fp(const mv_state *st, const char *table);
/* Replaces st's fp by *fps (has_fp set), which it takes: *fps is left empty. */
void mv_state_set_fps(mv_state *st, mv_fps *fps);

/* Sets table's entry in *fps (a new one, or the one of that name replaced whole: keys of it
 * this version did not know are dropped): fp's rows, sum and xor; dg's rows, parts, sum and
 * xor; top when not negative. FERRY_ENOMEM. */
int mv_fps_set(mv_fps *fps, const char *table, const ferry_fingerprint *fp,
               const ferry_fingerprint *dg, int64_t top, ferry_err *err);
/* Frees the entries and leaves *fps empty. */
void mv_fps_free(mv_fps *fps);

/* Whether fp's rows, sum and xor are the entry's (e NULL: false). */
bool mv_fp_matches(const mv_fp *e, const ferry_fingerprint *fp);
/* Whether dg's rows, sum and xor are the entry's digest (e NULL or without one: false). */
bool mv_fp_digest_matches(const mv_fp *e, const ferry_fingerprint *dg);

#endif
