/* A rewrite job's journal state as a typed record (private to lib/flow): one field per key of
 * the JSON data its job record holds, decoded and encoded in one place (rewrite_state.c) instead
 * of keys read and written by name across rewrite.c and rewrite_run.c, where a typo compiled and
 * a wrong type read as 0 or "". The JSON is the on-record format that catalogs keep across
 * versions (a run resumes the unfinished jobs an earlier binary journaled), so rw_state_encode
 * writes exactly what the code wrote when the state was a jansson object, and keys it does not
 * know are kept and written back (an older binary keeps a newer one's keys).
 *
 * The keys (docs/rewrite.md):
 *   server, db, table (the ClickHouse table), catalog_table, pid, tenant, day, split
 *                  what is rewritten: one partition of one table on one server
 *   mode           "delete" | "update"
 *   expr           the --delete-where filter, or the --update value
 *   col, where     update: the column set to expr, and the filter of the rows it is set in
 *   rows_before, rows_matched, rows_after   the partition's rows before, the rows the filter
 *                  matches, the rows the rebuilt partition must hold
 *   src, src_n     xxh3 (16 hex digits) of the sorted names of the partition's (cold) parts
 *                  before, and their number: the swap runs only while the partition is still
 *                  exactly those
 *   old            ["origin/name", ...]: the catalog part records that listed this server for
 *                  the partition before (taken off this server in RECORD)
 *   swapped        true once the swap statement may have run (no rollback from here on)
 *   swap           "replace" | "attach": the swap's form (attach: ClickHouse before 26.7)
 *   src_parts      the attach form: the source parts' names, detached by the swap
 *
 * What is written: a string of a char array when it is not empty (ferry never writes ""; a
 * decoded "" is read as absent), a heap string (expr, where) when it is not NULL, any other key
 * when its has_ field says so. A zeroed rw_state is the empty data "{}". */
#ifndef FERRY_REWRITE_STATE_H
#define FERRY_REWRITE_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"
#include "ferry/names.h"

/* A list of names (part names, "origin/name" keys); owned strings in an owned array. */
typedef struct rw_names {
    char **v;
    size_t n;
} rw_names;

typedef struct rw_state {
    /* what is rewritten: set by rw_state_plan */
    char server[FERRY_NAME_MAX];
    char db[FERRY_NAME_MAX];
    char table[FERRY_NAME_MAX];
    char catalog_table[FERRY_NAME_MAX];
    char pid[FERRY_NAME_MAX];
    char tenant[FERRY_NAME_MAX];
    uint32_t day, split;
    bool has_day, has_split;
    /* what changes: set by rw_state_set_change. The expressions are on the heap: the command line
     * refuses one over 1024 bytes (ferry_rewrite_expr_check), but a record keeps whatever an
     * earlier or later binary accepted, and it must be resumed with exactly that. */
    char mode[16];               /* "delete" | "update" */
    char *expr;                  /* owned or NULL (absent) */
    char col[FERRY_NAME_MAX];    /* update: the column */
    char *where;                 /* owned or NULL (absent); update: the rows changed */
    uint64_t rows_before, rows_matched, rows_after;
    bool has_rows_before, has_rows_matched, has_rows_after;
    char src[FERRY_NAME_MAX];    /* digest of the source parts' names; "": not yet journaled */
    uint64_t src_n;
    bool has_src_n;
    rw_names old;                /* "origin/name" of the part records to release */
    bool has_old;                /* the list is in the data (also when empty) */
    bool swapped, has_swapped;
    char swap[16];               /* "replace" | "attach"; "": none chosen */
    rw_names src_parts;          /* the attach form's source parts */
    bool has_src_parts;
    json_t *unknown; /* owned or NULL: the data's keys this version does not know, kept */
} rw_state;

/* Reads a job record's data (a JSON object; "" counts as "{}") into *st, overwritten (free its
 * earlier contents first). FERRY_EINVAL naming the key and the type it must have when a known key
 * holds another (or the text is not a JSON object); st is then empty. */
int rw_state_decode(const char *json, rw_state *st, ferry_err *err);
/* The data text of st (compact, keys sorted: what the journal writes); *json_out is malloc'ed,
 * the caller frees it. */
int rw_state_encode(const rw_state *st, char **json_out, ferry_err *err);
/* Frees what st owns and leaves it empty ("{}"). */
void rw_state_free(rw_state *st);

/* A new job's state: what is rewritten (*st overwritten, nothing owned). FERRY_EINVAL naming the
 * key when a value is too long for its field. */
int rw_state_plan(rw_state *st, const char *server, const char *db, const char *table,
                  const char *catalog_table, const char *pid, const char *tenant, uint32_t day,
                  uint32_t split, ferry_err *err);
/* What the job changes: with update_col NULL, mode "delete" erasing the rows where expr holds
 * (col and where unused, left absent); else mode "update" setting update_col to expr where where
 * holds (a NULL where left absent). Copies the strings, replacing an earlier change; FERRY_EINVAL
 * naming "col" when the column name is too long (st unchanged), FERRY_ENOMEM. */
int rw_state_set_change(rw_state *st, const char *update_col, const char *expr,
                        const char *where, ferry_err *err);
/* Whether the job updates a column (mode "update"; else it erases rows). */
bool rw_state_is_update(const rw_state *st);

/* Appends a copy of name; FERRY_ENOMEM. */
int rw_names_add(rw_names *l, const char *name, ferry_err *err);
/* Whether name is in the list. */
bool rw_names_has(const rw_names *l, const char *name);
/* Frees the names and leaves the list empty. */
void rw_names_free(rw_names *l);

#endif
