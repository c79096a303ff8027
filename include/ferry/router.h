/* ferry router: a daemon speaking ClickHouse's HTTP interface that sends each row of an INSERT
 * into a managed table to the shard(s) serving the row's slice, and passes every other statement
 * through to a configured server (docs/routing.md, "Writes").
 *
 * The first half of this header is pure (no I/O, unit-tested and fuzzable): classifying a
 * statement, parsing an INSERT's head, and the row codecs that find each row's tenant and split
 * key and write it back with the split column set. The second half is the daemon. */
#ifndef FERRY_ROUTER_H
#define FERRY_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/buf.h"
#include "ferry/err.h"

/* ---- statements (pure) ------------------------------------------------------------------------ */

#define FERRY_RT_IDENT_MAX 128
#define FERRY_RT_FORMAT_MAX 64

/* What the router does with a statement; the daemon dispatches on this. SELECT-like statements
 * are the seam for the read path (issue 10): today they pass through like everything else. */
enum ferry_rt_stmt {
    FERRY_RT_STMT_INSERT,      /* INSERT INTO t [(cols)] FORMAT F: parsed, maybe managed */
    FERRY_RT_STMT_INSERT_OTHER,/* any other INSERT (VALUES, SELECT, FUNCTION, SETTINGS...) */
    FERRY_RT_STMT_SELECT,      /* SELECT, WITH, SHOW, DESCRIBE, EXISTS, EXPLAIN */
    FERRY_RT_STMT_OTHER        /* DDL, ALTER, SYSTEM, ... */
};

typedef struct ferry_rt_insert {
    char database[FERRY_RT_IDENT_MAX]; /* "" when the statement names none */
    char table[FERRY_RT_IDENT_MAX];
    char format[FERRY_RT_FORMAT_MAX];
    size_t n_columns;                  /* 0: no column list */
    char (*columns)[FERRY_RT_IDENT_MAX]; /* owned; free with ferry_rt_insert_free */
    size_t data_offset; /* where the data starts in the text given (after FORMAT name, the
                           spaces after it and one newline) */
} ferry_rt_insert;

/* More columns than this in an INSERT's column list: not routed (the list is held per request). */
#define FERRY_RT_MAX_COLUMNS 4096

/* The incremental classifier behind ferry_rt_classify (lib/router/sql.c). The daemon feeds it
 * the body's start as it grows; each byte is tokenized once (ClickHouse's token rules:
 * lib/sql/tokenize.c), so classifying costs time linear in the bytes however they arrive.
 * The fields are the scanner's; read only kind and ins once decided. */
typedef struct ferry_rt_head {
    bool decided;
    enum ferry_rt_stmt kind; /* once decided */
    ferry_rt_insert ins;     /* FERRY_RT_STMT_INSERT: the head (owned; data_offset absolute) */
    /* private */
    size_t done, seen;       /* lexed up to done; no whitespace in (done, seen) */
    int lex, state;
    size_t depth, tok_start, after, name_end, cols_cap;
    char quote;
    bool esc, paren, have_target;
} ferry_rt_head;

void ferry_rt_head_init(ferry_rt_head *h);
/* text[0..len) is the statement text so far (each call the same bytes plus more; the buffer may
 * move). complete: no more will come. Returns true once decided (h->kind, h->ins). */
bool ferry_rt_head_feed(ferry_rt_head *h, const char *text, size_t len, bool complete);
/* The target of an INSERT INTO [TABLE] [db.]table seen so far, whatever follows it. */
bool ferry_rt_head_target(const ferry_rt_head *h, char *db, char *table);
void ferry_rt_head_free(ferry_rt_head *h);

/* Classifies sql; for FERRY_RT_STMT_INSERT fills *ins (which the caller frees). A statement whose
 * end is not in the text yet (no FORMAT name followed by white space, or the text ends inside
 * the name) is FERRY_RT_STMT_INSERT_OTHER unless complete is false, in which case *need_more is
 * set (the daemon reads more of the body and asks again). */
enum ferry_rt_stmt ferry_rt_classify(const char *sql, size_t len, bool complete,
                                     ferry_rt_insert *ins, bool *need_more);
void ferry_rt_insert_free(ferry_rt_insert *ins);
/* The target of any INSERT INTO [TABLE] [db.]table ...: fills db ("" when not named) and table
 * (FERRY_RT_IDENT_MAX bytes each); false for other statements and INSERT INTO FUNCTION. */
bool ferry_rt_insert_target(const char *sql, size_t len, char *db, char *table);

/* ---- row codecs (pure) ------------------------------------------------------------------------ */

enum ferry_rt_format {
    FERRY_RT_JSONEACHROW,
    FERRY_RT_TSV,       /* TabSeparated, TSV */
    FERRY_RT_TSV_NAMES, /* TabSeparatedWithNames, TSVWithNames */
    FERRY_RT_CSV,
    FERRY_RT_CSV_NAMES, /* CSVWithNames */
    FERRY_RT_ROWBINARY
};

/* A format name (ClickHouse's, case-insensitive as ClickHouse 26 is) -> codec; false for a format
 * the router does not route. */
bool ferry_rt_format_parse(const char *name, enum ferry_rt_format *out);
/* The format the router forwards rows in (headers are turned into a column list). */
const char *ferry_rt_format_forward_name(enum ferry_rt_format f);
/* Whether the codec needs the table's structure (column order, or types for RowBinary) when the
 * statement has no column list. */
bool ferry_rt_format_needs_structure(enum ferry_rt_format f, bool has_column_list);

/* The table's insertable columns in order (DESCRIBE TABLE without MATERIALIZED and ALIAS). */
typedef struct ferry_rt_schema {
    size_t n;
    char **names;
    char **types;
} ferry_rt_schema;

/* Parses DESCRIBE TABLE ... FORMAT TabSeparated output (name, type, default_type, ...), or the
 * same three columns from system.columns (name, type, default_kind), into
 * *out, which the caller frees with ferry_rt_schema_free. */
int ferry_rt_schema_parse(const char *tsv, size_t len, ferry_rt_schema *out, ferry_err *err);
void ferry_rt_schema_free(ferry_rt_schema *s);

typedef struct ferry_rt_codec ferry_rt_codec;

typedef struct ferry_rt_codec_options {
    enum ferry_rt_format format;
    const char *tenant_column;
    const char *split_column;
    const char *split_key;          /* the split key column */
    const char *const *columns;     /* the statement's column list; NULL/0: none */
    size_t n_columns;
    const ferry_rt_schema *schema;  /* the table's structure; may be NULL when not needed */
    size_t max_row_bytes;           /* a row longer than this is an error; 0: 64 MiB */
} ferry_rt_codec_options;

/* Checks the options (the tenant and split key columns must be among the columns, types must be
 * readable in RowBinary, ...) and creates a codec; FERRY_EINVAL with a message for people. For
 * formats with a header the columns are known after the header row. *out owned by the caller. */
int ferry_rt_codec_new(const ferry_rt_codec_options *opt, ferry_rt_codec **out, ferry_err *err);
void ferry_rt_codec_free(ferry_rt_codec *c);

/* One row found by ferry_rt_codec_next. tenant and key are the values' texts (unquoted and
 * unescaped; key before canonicalisation), valid until the next call. */
typedef struct ferry_rt_row {
    bool have;          /* false: no complete row in the data (read more, or the end) */
    const char *tenant;
    size_t tenant_len;
    const char *key;
    size_t key_len;
    uint64_t number;    /* 1-based row number, header rows not counted */
    /* where the row is in the data given (internal to the codec) */
    size_t start, end, split_at, split_len;
    bool split_present;
} ferry_rt_row;

/* Finds the next row in data[0..len). *used is how many bytes were consumed (the row and what
 * precedes it, such as a header or separators); the caller drops them and keeps the rest. When
 * row->have is false and eof is false, more data is needed (a row longer than max_row_bytes is an
 * error). FERRY_EINVAL for malformed input, with the row number in the message. */
int ferry_rt_codec_next(ferry_rt_codec *c, const char *data, size_t len, bool eof, size_t *used,
                        ferry_rt_row *row, ferry_err *err);
/* Appends the row (from the same data) to out with the split column set to split. FERRY_EINVAL
 * when split does not fit the split column's type. */
int ferry_rt_codec_emit(ferry_rt_codec *c, const char *data, const ferry_rt_row *row,
                        uint32_t split, ferry_buf *out, ferry_err *err);
/* The column list for the forwarded INSERT, e.g. "(`tenant`, `uid`, `split`)", or "" when none
 * is needed (JSONEachRow without a client list). Valid once the header (if any) was read. */
int ferry_rt_codec_columns(const ferry_rt_codec *c, ferry_buf *out);

/* ---- the daemon --------------------------------------------------------------------------------- */

typedef struct ferry_router ferry_router;

typedef struct ferry_router_options {
    const char *config_path; /* the cluster's config: [cluster], [shard], [table], [router] */
    const char *listen;      /* "ADDR:PORT" overriding [router] listen; NULL: the config's */
    const char *retry_journal; /* a file overriding [router] retry_journal; NULL: the config's */
} ferry_router_options;

/* Reads the config, opens the catalog, loads the routing table and starts serving. *out owned by
 * the caller (ferry_router_stop). */
int ferry_router_start(const ferry_router_options *opt, ferry_router **out, ferry_err *err);
uint16_t ferry_router_port(const ferry_router *r);
void ferry_router_stop(ferry_router *r);

#endif
