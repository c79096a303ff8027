/* The embedded ClickHouse engine (libchdb.so, ClickHouse 26.7 from the npm package
 * @chdb/lib-linux-x64-gnu; its 26.5 builds load too, with inserts spooled), loaded with
 * dlopen so ferry builds without it.
 *
 * One process holds one engine (one data path). Queries on one connection run one after
 * another; separate connections to the same path run at the same time, so anything that
 * answers concurrent requests takes connections from a pool (ferry_chdb_pool) rather than
 * sharing one. A connection keeps session state (SET, USE): a caller that changed it releases
 * the connection with discard = true so the next user gets a clean one.
 *
 * libchdb crashes under AddressSanitizer: only processes linked with ferrycore_plain (the lab
 * node, its benchmark) may call ferry_chdb_load. */
#ifndef FERRY_CHDB_H
#define FERRY_CHDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/err.h"

#define FERRY_CHDB_PACKAGE "@chdb/lib-linux-x64-gnu"
#define FERRY_CHDB_VERSION "26.7.3-stable.1"
/* the older engine a lab node can run (ClickHouse 26.5.1.1): `scripts/setup.sh --chdb 26.5` */
#define FERRY_CHDB_OLD_VERSION "26.5.3"

typedef struct ferry_chdb ferry_chdb;
typedef struct ferry_chdb_conn ferry_chdb_conn;
typedef struct ferry_chdb_pool ferry_chdb_pool;
typedef struct ferry_chdb_stream ferry_chdb_stream;
typedef struct ferry_chdb_insert ferry_chdb_insert;

/* The library path ferry uses when none is configured: $FERRY_LIBCHDB, else
 * $FERRY_CACHE/chdb-<version>/libchdb.so (FERRY_CACHE defaults to ~/.cache/ferry). Writes into
 * buf and returns it. */
const char *ferry_chdb_default_path(char *buf, size_t bufsz);
/* The cached library of a version a lab node can run: "26.7" (or FERRY_CHDB_VERSION) and "26.5"
 * (or FERRY_CHDB_OLD_VERSION), under $FERRY_CACHE like the default; NULL for other versions. */
const char *ferry_chdb_version_path(const char *version, char *buf, size_t bufsz);

/* Loads the library (path NULL or "" = ferry_chdb_default_path). A missing or foreign file
 * gives FERRY_ENOTFOUND / FERRY_EINVAL with a message saying how to get the right one. The
 * handle lives until the process ends (the engine cannot be unloaded). */
int ferry_chdb_load(const char *path, ferry_chdb **out, ferry_err *err);
/* e.g. "26.7.3"; "" when the library does not say (no chdb_version: ask SELECT version()) */
const char *ferry_chdb_lib_version(const ferry_chdb *lib);
const char *ferry_chdb_lib_path(const ferry_chdb *lib);

/* Opens a connection with clickhouse-local style arguments (e.g. "--path=/data/",
 * "--config-file=/data/config.xml"; "--<setting>=<value>" sets a setting for this connection
 * only). argv[0] is not a program name: pass only arguments. */
int ferry_chdb_connect(ferry_chdb *lib, int argc, const char *const *argv, ferry_chdb_conn **out,
                       ferry_err *err);
void ferry_chdb_close(ferry_chdb_conn *conn); /* NULL is fine */

/* Named query parameters ({name:Type} placeholders), bound server-side. */
typedef struct ferry_chdb_param {
    const char *name;
    const char *value;
} ferry_chdb_param;

typedef struct ferry_chdb_result {
    char *data;   /* owned; NUL-terminated; NULL on error */
    size_t len;
    char *error;  /* owned; ClickHouse's full message ("Code: 62. DB::Exception: ..."), or NULL */
    uint64_t rows_read, bytes_read, rows_written;
    double elapsed;
} ferry_chdb_result;

/* Runs sql (sql_len bytes; it may carry inline INSERT data) and buffers the whole result in
 * format (NULL = TabSeparated). A ClickHouse error gives FERRY_EREMOTE with res->error set
 * (err->msg holds a possibly shortened copy). */
int ferry_chdb_query(ferry_chdb_conn *conn, const char *sql, size_t sql_len, const char *format,
                     const ferry_chdb_param *params, size_t n_params, ferry_chdb_result *res,
                     ferry_err *err);
void ferry_chdb_result_free(ferry_chdb_result *res);

/* Streaming SELECT: results arrive chunk by chunk (about 1 MB each), so a large result is
 * never held whole in memory. The connection is busy until ferry_chdb_stream_close. */
int ferry_chdb_stream_open(ferry_chdb_conn *conn, const char *sql, size_t sql_len,
                           const char *format, const ferry_chdb_param *params, size_t n_params,
                           ferry_chdb_stream **out, char **error, ferry_err *err);
/* 1: *data and *len hold the next chunk (valid until the next call); 0: the end; -1: the
 * query failed (*error is owned by the stream and holds the ClickHouse message). */
int ferry_chdb_stream_next(ferry_chdb_stream *s, const char **data, size_t *len,
                           const char **error);
/* Cancels the query if it did not finish; frees s. NULL is fine. */
void ferry_chdb_stream_close(ferry_chdb_stream *s);

/* Streaming INSERT: sql is the INSERT without FORMAT and data ("INSERT INTO db.t (a, b)"),
 * format the data's format. Append pieces as they come, then finish. The connection is busy
 * until ferry_chdb_insert_close. Errors carry ClickHouse's message in *error (owned by ins).
 * A library without chdb's streaming-insert API (the 26.5 builds) gets the same calls
 * "spooled": the pieces go to a private file (mode 0600) in the spool directory, and finish
 * runs "INSERT ... FROM INFILE 'file' FORMAT f"; the file is removed by close. */
const char *ferry_chdb_insert_mode(const ferry_chdb *lib); /* "streamed" | "spooled" */
/* Where spooled bodies go (NULL or "": $TMPDIR, else /tmp); set it before inserts start. */
void ferry_chdb_set_spool_dir(ferry_chdb *lib, const char *dir);
int ferry_chdb_insert_open(ferry_chdb_conn *conn, const char *sql, const char *format,
                           ferry_chdb_insert **out, char **error, ferry_err *err);
int ferry_chdb_insert_append(ferry_chdb_insert *ins, const void *data, size_t len,
                             const char **error);
/* Commits; on success fills rows_written. */
int ferry_chdb_insert_finish(ferry_chdb_insert *ins, uint64_t *rows_written, const char **error);
void ferry_chdb_insert_close(ferry_chdb_insert *ins); /* cancels if not finished */

/* A pool of up to max_size connections opened with the same arguments (argv copied). The
 * first connection is opened now (so a bad path or config fails here), others on demand. */
int ferry_chdb_pool_create(ferry_chdb *lib, int argc, const char *const *argv, unsigned max_size,
                           ferry_chdb_pool **out, ferry_err *err);
/* Waits up to timeout_ms for a free connection; FERRY_ETIMEOUT when none came. */
int ferry_chdb_pool_acquire(ferry_chdb_pool *pool, unsigned timeout_ms, ferry_chdb_conn **out,
                            ferry_err *err);
/* Returns conn; discard = true closes it (its session state was changed) and the slot is
 * refilled on demand. */
void ferry_chdb_pool_release(ferry_chdb_pool *pool, ferry_chdb_conn *conn, bool discard);
/* Opens an extra connection outside the pool, with the pool's arguments plus extra ones
 * (e.g. per-request settings); close it with ferry_chdb_close. */
int ferry_chdb_pool_connect_extra(ferry_chdb_pool *pool, int argc, const char *const *argv,
                                  ferry_chdb_conn **out, ferry_err *err);
unsigned ferry_chdb_pool_in_use(ferry_chdb_pool *pool);
/* Closes every idle connection and frees the pool; connections still out must be released
 * first. */
void ferry_chdb_pool_destroy(ferry_chdb_pool *pool);

#endif
