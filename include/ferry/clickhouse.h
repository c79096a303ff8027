/* ferry's ClickHouse client: queries over ClickHouse's HTTP interface (libcurl, keep-alive),
 * streaming results, INSERT bodies, error decoding (HTTP status, X-ClickHouse-Exception-Code,
 * in-band exceptions after a 200 in both the old "Code: NNN" form and the 25.11+ tagged
 * "__exception__" framing), a retry policy that only retries what is safe, the TabSeparated
 * parser, and helpers over system tables that work on old (18.16) and new (26.x) servers.
 *
 * Thread safety: a client owns one CURL easy handle (one keep-alive connection) and is NOT
 * thread-safe. Use one client per thread; clients are cheap. The pure functions (TSV parsing,
 * URL building, trailer detection, retry policy) are reentrant.
 *
 * Secrets: the password is given separately from the URL, sent with HTTP basic auth, never
 * logged, and scrubbed from any server message that would repeat it. */
#ifndef FERRY_CLICKHOUSE_H
#define FERRY_CLICKHOUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ferry/buf.h"
#include "ferry/err.h"

/* ---------------------------------------------------------------------------------------------
 * Client
 * ------------------------------------------------------------------------------------------- */

typedef struct ferry_ch_client ferry_ch_client;

typedef struct ferry_ch_options {
    const char *url;         /* http://host:port[/]; must carry no user:password@ */
    const char *user;        /* NULL or "": the server's default user */
    const char *password;    /* NULL: none. Never logged. */
    const char *database;    /* default database for every query; NULL: the server's */
    long connect_timeout_ms; /* 0: 5000 */
    long read_timeout_ms;    /* the longest wait for the next byte; 0: 300000 (5 min) */
    int max_attempts;        /* total attempts for a retryable failure; 0: 3; 1: no retries */
    long backoff_ms;         /* first retry delay, doubled each time, capped at 5 s; 0: 100 */
} ferry_ch_options;

/* Creates a client; *out is owned by the caller (ferry_ch_client_free). Nothing is sent yet. */
int ferry_ch_client_new(const ferry_ch_options *opt, ferry_ch_client **out, ferry_err *err);
void ferry_ch_client_free(ferry_ch_client *c);
/* The URL with credentials redacted, for messages. Owned by the client. */
const char *ferry_ch_client_url(const ferry_ch_client *c);

typedef struct ferry_ch_stats {
    uint64_t queries;        /* requests that got an HTTP response */
    uint64_t attempts;       /* requests started, including retries */
    uint64_t retries;
    uint64_t connects;       /* new TCP connections opened */
    uint64_t bytes_received; /* response body bytes */
    uint64_t bytes_sent;     /* request body bytes */
} ferry_ch_stats;

void ferry_ch_client_stats(const ferry_ch_client *c, ferry_ch_stats *out);

/* Result sink: receives the response body in order, in chunks of any size. Return FERRY_OK to go
 * on or a ferry code to stop the query (the query then fails with that code). When the query
 * fails after some chunks were delivered, the caller must treat what it got as incomplete. */
typedef int (*ferry_ch_write_fn)(const void *data, size_t len, void *arg);
/* INSERT body source: fills buf with up to cap bytes; returns the count, 0 at the end, -1 on
 * error (errno describes it). */
typedef ssize_t (*ferry_ch_read_fn)(void *buf, size_t cap, void *arg);
/* Rewinds a body source to its start so a retry can send it again; 0 on success, -1 when the
 * source cannot be replayed (a pipe). */
typedef int (*ferry_ch_rewind_fn)(void *arg);
/* A ferry_ch_read_fn reading from a file descriptor; arg points to an int holding the fd. */
ssize_t ferry_ch_read_fd(void *buf, size_t cap, void *arg);
/* A ferry_ch_rewind_fn for ferry_ch_read_fd: seeks the fd back to offset 0 (files only). */
int ferry_ch_rewind_fd(void *arg);

typedef struct ferry_ch_setting {
    const char *name;
    const char *value;
} ferry_ch_setting;

typedef struct ferry_ch_query {
    const char *sql;      /* the statement; for an INSERT with a body: "INSERT INTO t FORMAT TSV" */
    const char *query_id; /* NULL: a random UUID is generated (see ferry_ch_status.query_id) */
    const char *database; /* NULL: the client's */
    const char *format;   /* sent as default_format (TSV, JSONEachRow, Native...); NULL: server's */
    const ferry_ch_setting *settings; /* per-query settings, sent as URL parameters */
    size_t n_settings;
    ferry_ch_write_fn on_data; /* NULL: the result is read and discarded */
    void *on_data_arg;
    /* INSERT body: either from memory (body, body_len) or streamed from body_reader. */
    const void *body;
    size_t body_len;
    ferry_ch_read_fn body_reader;
    void *body_reader_arg;      /* also passed to body_rewind */
    ferry_ch_rewind_fn body_rewind; /* NULL: a consumed streamed body is never sent again */
    long read_timeout_ms; /* 0: the client's */
    bool idempotent;      /* the caller vouches the statement may run twice (e.g. CREATE ... IF
                             NOT EXISTS); SELECT-like statements and INSERTs with an
                             insert_deduplication_token are recognised without it */
} ferry_ch_query;

#define FERRY_CH_MSG_MAX 2048

/* What happened to one query; every field is filled on success and on failure. */
typedef struct ferry_ch_status {
    long http_status;               /* 0: no HTTP response */
    int ch_code;                    /* ClickHouse exception code, 0 when none */
    bool in_band;                   /* the exception came after a 200, inside the body */
    char message[FERRY_CH_MSG_MAX]; /* the server's exception text (password scrubbed) */
    char query_id[128];
    int attempts;
    long num_connects; /* new connections for the last attempt (0: a kept-alive one was reused) */
    uint64_t bytes_received; /* body bytes handed to on_data */
} ferry_ch_status;

/* Runs one statement. Returns FERRY_OK, or: FERRY_EREMOTE (the server raised an exception:
 * st->ch_code, st->message), FERRY_EAUTH (credentials refused), FERRY_ECONNECT (refused,
 * unreachable, or the connection dropped mid-response), FERRY_ETIMEOUT, FERRY_EINVAL (bad
 * arguments), or the code on_data returned. st may be NULL. */
int ferry_ch_exec(ferry_ch_client *c, const ferry_ch_query *q, ferry_ch_status *st,
                  ferry_err *err);

/* Convenience: runs sql (no body) and collects the whole response in out (appended). */
int ferry_ch_query_buf(ferry_ch_client *c, const char *sql, const char *format, ferry_buf *out,
                       ferry_ch_status *st, ferry_err *err);

/* ---------------------------------------------------------------------------------------------
 * Retry policy (pure)
 * ------------------------------------------------------------------------------------------- */

enum ferry_ch_stmt_kind {
    FERRY_CH_STMT_READ,   /* SELECT, WITH, SHOW, DESCRIBE, EXISTS, EXPLAIN: no side effects */
    FERRY_CH_STMT_INSERT,
    FERRY_CH_STMT_OTHER   /* DDL, ALTER, SYSTEM, OPTIMIZE, ...: may have executed */
};

/* Classifies a statement by its first keyword (after spaces, comments and parentheses). */
enum ferry_ch_stmt_kind ferry_ch_statement_kind(const char *sql);

enum ferry_ch_failure {
    FERRY_CH_FAIL_CONNECT,    /* no connection was made: refused, unresolvable, connect timeout */
    FERRY_CH_FAIL_NO_REPLY,   /* connected, then reset/closed before any response byte */
    FERRY_CH_FAIL_PARTIAL,    /* the response had begun when the connection broke */
    FERRY_CH_FAIL_TIMEOUT,    /* no byte within the read timeout */
    FERRY_CH_FAIL_SERVER,     /* the server answered with an error */
    FERRY_CH_FAIL_LOCAL       /* our own side: a callback stopped, a body read failed, ... */
};

typedef struct ferry_ch_retry_case {
    enum ferry_ch_failure failure;
    enum ferry_ch_stmt_kind kind;
    bool has_dedup_token;   /* INSERT carries insert_deduplication_token */
    bool caller_idempotent; /* ferry_ch_query.idempotent */
    bool body_replayable;   /* the request body can be sent again (memory body or none, or the
                               streamed body was never read) */
    bool data_delivered;    /* some response bytes already went to on_data */
    int attempt;            /* attempts made so far, >= 1 */
    int max_attempts;
} ferry_ch_retry_case;

/* true when another attempt is safe and allowed. See docs/clickhouse-client.md. */
bool ferry_ch_should_retry(const ferry_ch_retry_case *rc);
/* Delay before attempt number attempt+1: base * 2^(attempt-1), capped at 5000 ms. */
long ferry_ch_backoff_ms(int attempt, long base_ms);

/* ---------------------------------------------------------------------------------------------
 * HTTP protocol pieces (pure)
 * ------------------------------------------------------------------------------------------- */

/* Appends base (validated: http:// or https://, no userinfo, no query string) plus "?k=v&..."
 * with keys and values percent-encoded (RFC 3986 unreserved characters kept) to out. */
int ferry_ch_build_url(const char *base, const ferry_ch_setting *params, size_t n,
                       ferry_buf *out, ferry_err *err);

/* Parses the code from an exception text such as "Code: 62. DB::Exception: ..." or
 * "Code: 60, e.displayText() = DB::Exception: ..."; 0 when there is none. */
int ferry_ch_exception_code(const char *text, size_t len);

/* Looks for an exception the server wrote into a 200 response at the end of the body.
 * body/len is the tail of the response (is_start: it begins at the first body byte). tag is the
 * X-ClickHouse-Exception-Tag value or NULL. binary: the format is binary (Native, RowBinary...),
 * so an untagged "Code: NNN" trailer may follow data without a newline; for text formats it
 * must start a line. Returns the offset in body where the exception starts (the caller must not
 * treat bytes from there on as data), or -1 when the tail is plain data; on a hit, *code and msg
 * (NUL-terminated, truncated to msgsz) are filled.
 * Servers before 25.11 give no tag, and a text result whose last line is itself an exception
 * text (e.g. SELECT exception FROM system.query_log) cannot be told apart from a real error:
 * it is reported as one. */
ssize_t ferry_ch_find_trailer(const char *body, size_t len, bool is_start, const char *tag,
                              bool binary, int *code, char *msg, size_t msgsz);

/* true for formats whose output is binary (Native, RowBinary*, Parquet, Arrow, ...). */
bool ferry_ch_format_is_binary(const char *format);

/* The opening marker of a tagged in-band exception ("__exception__\r\n" TAG); -1 when absent.
 * Searches body/len; used while streaming so no exception byte reaches on_data. */
ssize_t ferry_ch_find_tag_marker(const char *body, size_t len, const char *tag);

/* ---------------------------------------------------------------------------------------------
 * TabSeparated (pure)
 * ------------------------------------------------------------------------------------------- */

/* Unescapes one TSV field in place (\t \n \r \b \f \0 \\ \' \" \a \v \e \xHH; an unknown escape
 * gives the character after the backslash). *out_len gets the new length (embedded NULs are
 * possible); the result is NUL-terminated. A field that is exactly "\N" is NULL: *is_null set,
 * length 0. FERRY_EINVAL for a trailing lone backslash or a bad \x escape. */
int ferry_tsv_unescape(char *s, size_t len, size_t *out_len, bool *is_null, ferry_err *err);

/* Appends field escaped for TabSeparated input. */
int ferry_tsv_escape(ferry_buf *out, const char *s, size_t len);

/* Called once per row; fields point into the reader's buffer and are valid during the call. */
typedef int (*ferry_tsv_row_fn)(char **fields, const size_t *lens, const bool *nulls,
                                size_t n, void *arg);

typedef struct ferry_tsv_reader {
    ferry_tsv_row_fn on_row;
    void *arg;
    ferry_buf line;  /* an incomplete row carried between chunks */
    uint64_t row_no; /* rows delivered so far */
    char **fields;
    size_t *lens;
    bool *nulls;
    size_t cap;
} ferry_tsv_reader;

void ferry_tsv_reader_init(ferry_tsv_reader *r, ferry_tsv_row_fn on_row, void *arg);
/* Feeds bytes in chunks of any size; calls on_row for every complete line. */
int ferry_tsv_feed(ferry_tsv_reader *r, const void *data, size_t len, ferry_err *err);
/* Ends the input: FERRY_EINVAL if it stopped in the middle of a row. */
int ferry_tsv_finish(ferry_tsv_reader *r, ferry_err *err);
void ferry_tsv_reader_free(ferry_tsv_reader *r);

/* TabSeparatedWithNames in, JSON lines out (`ferry query --json`): the first row names the
 * columns, every other row becomes one JSON object {column: value} in column order, values as
 * strings, NULL as null, a value that is not UTF-8 as "<invalid UTF-8>". Each object and its
 * newline go to write (which returns FERRY_OK or a code). A row whose field count differs from
 * the header's is FERRY_EREMOTE. */
typedef int (*ferry_write_fn)(const void *data, size_t len, void *arg);
typedef struct ferry_tsv_json {
    ferry_tsv_reader tsv;
    char **names; /* owned: the header */
    size_t n_names;
    bool have_header;
    ferry_write_fn write;
    void *write_arg;
    ferry_err *err; /* borrowed: where a feed's error goes */
} ferry_tsv_json;

void ferry_tsv_json_init(ferry_tsv_json *j, ferry_write_fn write, void *write_arg, ferry_err *err);
/* A ferry_ch_query on_data callback: arg is the ferry_tsv_json. */
int ferry_tsv_json_feed(const void *data, size_t len, void *arg);
/* Ends the input: FERRY_EINVAL if it stopped in the middle of a row. */
int ferry_tsv_json_finish(ferry_tsv_json *j);
void ferry_tsv_json_free(ferry_tsv_json *j);

/* A whole TSV result, parsed: field (r, c) is fields[r * n_cols + c] with length
 * lens[...] and NULL flag nulls[...]. All fields point into one buffer the struct owns. */
typedef struct ferry_ch_rows {
    size_t n_rows;
    size_t n_cols;
    char **fields;
    size_t *lens;
    bool *nulls;
    char *data;
} ferry_ch_rows;

/* Parses text (taken over: owned by rows afterwards, freed by ferry_ch_rows_free) as TSV; every
 * row must have the same number of fields. */
int ferry_ch_rows_parse(char *text, size_t len, ferry_ch_rows *rows, ferry_err *err);
void ferry_ch_rows_free(ferry_ch_rows *rows);
static inline const char *ferry_ch_rows_get(const ferry_ch_rows *r, size_t row, size_t col)
{
    return r->fields[row * r->n_cols + col];
}

/* Runs sql with FORMAT TabSeparated and parses the rows (caller frees with ferry_ch_rows_free). */
int ferry_ch_query_rows(ferry_ch_client *c, const char *sql, ferry_ch_rows *rows,
                        ferry_ch_status *st, ferry_err *err);

/* Quotes s as a ClickHouse string literal ('...' with \\ and \' escaped) into out. */
int ferry_ch_quote(ferry_buf *out, const char *s);

/* ---------------------------------------------------------------------------------------------
 * System-table helpers. Each works on old servers (18.16: no disks, no detached_parts) and new
 * ones (26.x), checking which columns exist. Returned arrays are owned by the caller and freed
 * with the matching free function.
 * ------------------------------------------------------------------------------------------- */

typedef struct ferry_ch_version {
    char text[64]; /* as the server prints it, e.g. "26.7.3.1" */
    int major, minor, patch;
} ferry_ch_version;

int ferry_ch_server_version(ferry_ch_client *c, ferry_ch_version *out, ferry_err *err);

/* Whether REPLACE PARTITION on this version leaves the parts it replaced on disk, outdated,
 * with no empty part covering them, so that a restart before old_parts_lifetime loads them
 * again next to the new ones (the partition's rows twice): ClickHouse before 26.7 (26.5 does,
 * 26.7 writes the covering part; docs/reliability.md). NULL (unknown version) counts as true.
 * Flows swap by DETACH PART + ATTACH PARTITION FROM on such a server. */
bool ferry_ch_replace_keeps_replaced(const ferry_ch_version *v);

typedef struct ferry_ch_partition {
    char *partition_id; /* e.g. "202401" */
    char *partition;    /* the partition value as ClickHouse prints it, e.g. "202401" or "'x'" */
    char *disk_name;    /* "default" on servers without disks */
    uint64_t parts;
    uint64_t rows;
    uint64_t bytes_on_disk;
} ferry_ch_partition;

/* Active parts of db.table grouped by (partition_id, partition, disk_name), ordered by
 * partition_id then disk. A table without parts (or that does not exist) gives n = 0. */
int ferry_ch_list_partitions(ferry_ch_client *c, const char *db, const char *table,
                             ferry_ch_partition **out, size_t *n, ferry_err *err);
void ferry_ch_partitions_free(ferry_ch_partition *p, size_t n);

typedef struct ferry_ch_part {
    char *name;
    char *partition_id;
    char *partition;
    char *disk_name;         /* "default" on servers without disks */
    char *path;              /* the part's directory on the server */
    char *hash_of_all_files; /* "" where the server has no such column */
    uint64_t rows;
    uint64_t bytes_on_disk;
    int64_t min_block_number;
    int64_t max_block_number;
    uint32_t level;
} ferry_ch_part;

/* Active parts of db.table, ordered by name. */
int ferry_ch_list_parts(ferry_ch_client *c, const char *db, const char *table,
                        ferry_ch_part **out, size_t *n, ferry_err *err);
void ferry_ch_parts_free(ferry_ch_part *p, size_t n);

typedef struct ferry_ch_detached_part {
    char *name;
    char *partition_id; /* NULL when the server does not know it (Nullable) */
    char *reason;       /* NULL or "" for a plain DETACH */
    char *disk;         /* "default" where the server has no disk column */
    char *path;         /* "" where the server has no path column */
    uint64_t bytes_on_disk; /* 0 where the server has no such column */
} ferry_ch_detached_part;

/* Detached parts of db.table. FERRY_EUNSUPPORTED on servers without system.detached_parts. */
int ferry_ch_list_detached(ferry_ch_client *c, const char *db, const char *table,
                           ferry_ch_detached_part **out, size_t *n, ferry_err *err);
void ferry_ch_detached_free(ferry_ch_detached_part *p, size_t n);

typedef struct ferry_ch_data_path {
    char *disk; /* "default" on servers without disks */
    char *path; /* the table's data directory on that disk, ending in '/' */
} ferry_ch_data_path;

/* The table's data directories, one per disk (system.tables.data_paths, or data_path on old
 * servers). FERRY_ENOTFOUND when the table does not exist. */
int ferry_ch_table_data_paths(ferry_ch_client *c, const char *db, const char *table,
                              ferry_ch_data_path **out, size_t *n, ferry_err *err);
void ferry_ch_data_paths_free(ferry_ch_data_path *p, size_t n);

typedef struct ferry_ch_table_info {
    bool exists;
    char *engine;         /* e.g. "MergeTree"; NULL when !exists */
    char *storage_policy; /* "" where the server has no storage policies */
    char *engine_full;
} ferry_ch_table_info;

/* Fills info; a missing table is not an error (info->exists = false). */
int ferry_ch_table_info_get(ferry_ch_client *c, const char *db, const char *table,
                            ferry_ch_table_info *info, ferry_err *err);
void ferry_ch_table_info_free(ferry_ch_table_info *info);

/* Pure parsers behind the helpers, for tests: text is the TSV the helper's query returns (see
 * lib/clickhouse/system.c for the column order); text is taken over. */
int ferry_ch_parse_partitions(char *text, size_t len, ferry_ch_partition **out, size_t *n,
                              ferry_err *err);
int ferry_ch_parse_parts(char *text, size_t len, ferry_ch_part **out, size_t *n, ferry_err *err);
int ferry_ch_parse_detached(char *text, size_t len, ferry_ch_detached_part **out, size_t *n,
                            ferry_err *err);
int ferry_ch_parse_version(const char *text, ferry_ch_version *out, ferry_err *err);

#endif
