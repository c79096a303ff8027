/* A tiering job's journal state as a typed record (private to lib/flow): one field per key of
 * the JSON data its job record holds, decoded and encoded in one place (tier_state.c) instead of
 * keys read and written by name across tier*.c, where a typo compiled and a wrong type read as
 * 0 or NULL. The JSON is the on-record format that catalogs keep across versions
 * (tests/integration/mixed_version.sh runs an older ferry against newer records), so
 * tier_state_encode writes exactly what the code wrote when the state was a jansson object, and
 * keys it does not know are kept and written back (an older binary keeps a newer one's keys).
 *
 * The keys (docs/tiering.md):
 *   server, db, table, catalog_table, pid, partition, tenant, day, split   what is tiered
 *   attempt, freeze      the FREEZE attempt and its name
 *   merges_stopped       SYSTEM STOP MERGES on the table was (about to be) sent: by the swap, or
 *                        from FREEZE in a wave that holds merges
 *   hot                  names of the frozen hot parts (after FREEZE); on the record "hot_in":
 *                        <companion records> instead when the list outgrows it (tier_hot.c)
 *   hashed               every hot part's upload was checked against its checksums.txt by the
 *                        agent (so verification compares part hashes; absent: rows)
 *   fp                   what the swap must bring in: {rows,sum,xor,distinct}, a digest of the
 *                        frozen parts' hash_of_all_files when "by":"parts", else a fingerprint of
 *                        their rows (sum, xor, distinct as decimal strings: 64-bit unsigned)
 *   max_block            the partition's highest block number before the swap
 *   swap                 "replace" | "attach": the swap chosen (journaled before it runs)
 *   swapped              true once the swap may have happened (no rollback after that); false
 *                        written when a chosen swap was taken back
 *   mend                 VERIFY found a part the swap brought in detached as broken and is
 *                        undoing the swap (tier_mend.c); written before its statement
 *   recorded             the catalog records of CLEANUP were committed
 *   rolled_back          the job was rolled back before its swap (FAILED)
 *
 * What is written: a string key when the string is not empty, a flag without a has_ field when it
 * is true, any other key when its has_ field says so (a decoded "" or false of the former is read
 * as absent; ferry never writes one). A zeroed tier_state is the empty data "{}". */
#ifndef FERRY_TIER_STATE_H
#define FERRY_TIER_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/catalog.h"
#include "ferry/err.h"
#include "ferry/names.h"
#include "ferry/verify.h"

/* A partition's literal as system.parts gives it: ferry's layouts partition by (tenant, day,
 * split), so a tenant name of FERRY_NAME_MAX bytes, escaped, and two numbers fit. */
#define TIER_PARTITION_MAX 1024

typedef struct tier_state {
    /* what is tiered: set by tier_state_plan, kept by tier_state_identity */
    char server[FERRY_NAME_MAX];
    char db[FERRY_NAME_MAX];
    char table[FERRY_NAME_MAX];
    char catalog_table[FERRY_NAME_MAX];
    char pid[FERRY_NAME_MAX];
    /* the literal of system.parts, e.g. ('acme', 20261101, 0) */
    char partition[TIER_PARTITION_MAX];
    char tenant[FERRY_NAME_MAX];
    uint32_t day, split;
    bool has_day, has_split;
    uint32_t attempt; /* FREEZE attempts made (0 until the first) */
    bool has_attempt;
    char freeze[FERRY_NAME_MAX]; /* "": none yet */
    uint64_t frozen_at;          /* Unix ms just after the freeze: a router's write open since
                                    then may hold rows of the frozen parts (tier_job_open_since) */
    bool has_frozen_at;
    bool merges_stopped;
    char **hot;       /* owned, n_hot names (tier_state_hot_add) */
    size_t n_hot;
    bool has_hot;     /* the list is in the data (also when empty) */
    uint32_t hot_in;  /* on the record only: the companions holding hot (tier_hot.c) */
    bool has_hot_in;
    bool hashed, has_hashed;
    ferry_fingerprint fp; /* rows, hash_sum, hash_xor, distinct */
    bool fp_by_parts;     /* "by":"parts" */
    bool has_fp;
    json_t *fp_unknown;   /* owned or NULL: fp's keys this version does not know */
    int64_t max_block;
    bool has_max_block;
    char swap[16]; /* "replace" | "attach"; "": none chosen */
    bool swapped, has_swapped;
    bool mend; /* undoing a swap a broken part spoiled (tier_mend.c) */
    bool recorded;
    bool rolled_back;
    json_t *unknown; /* owned or NULL: the data's keys this version does not know, kept */
} tier_state;

/* Reads a job record's data (a JSON object) into *st, overwritten (free its earlier contents
 * first). FERRY_EINVAL naming the key and the type it must have when a known key holds another
 * (or the text is not a JSON object); st is then empty. */
int tier_state_decode(const char *json, tier_state *st, ferry_err *err);
/* The data text of st (compact, keys sorted: what the journal writes); *json_out is malloc'ed,
 * the caller frees it. */
int tier_state_encode(const tier_state *st, char **json_out, ferry_err *err);
/* Frees what st owns and leaves it empty ("{}"). */
void tier_state_free(tier_state *st);

/* A new job's state: what is tiered and attempt 0 (*st overwritten, nothing owned).
 * FERRY_EINVAL naming the key when a value is too long for its field. */
int tier_state_plan(tier_state *st, const char *server, const char *db, const char *table,
                    const char *catalog_table, const char *pid, const char *partition,
                    const char *tenant, uint32_t day, uint32_t split, ferry_err *err);
/* *to (overwritten, nothing owned): only the fields of from that say what is tiered, and its
 * attempt (a job taken back to PLANNED for its second try keeps counting its freezes). */
void tier_state_identity(const tier_state *from, tier_state *to);

/* Appends a name to the hot list (has_hot set); FERRY_ENOMEM. */
int tier_state_hot_add(tier_state *st, const char *name, ferry_err *err);
/* Empties the hot list and takes it out of the data. */
void tier_state_hot_clear(tier_state *st);
/* Whether name is in the hot list. */
bool tier_state_hot_has(const tier_state *st, const char *name);
/* Takes the swap choice back: no swap chosen, no block maximum, `swapped` false (written, so a
 * job whose swap may have run is told from one whose choice was withdrawn). For a choice whose
 * statement never ran, or a swap undone (tier_mend.c); a later run chooses again. */
void tier_state_take_back(tier_state *st);
/* Sets fp (written whole: keys of an earlier fp this version did not know are dropped). */
void tier_state_set_fp(tier_state *st, const ferry_fingerprint *fp, bool by_parts);

#endif
