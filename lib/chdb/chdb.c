/* The libchdb loader, connections, queries (buffered and streamed), inserts (streamed, or
 * spooled to a file where the library has no streaming insert) and the connection pool (see
 * include/ferry/chdb.h). The C declarations below mirror libchdb's own header for the 26.7 API;
 * only opaque handles cross the boundary. */
#include "ferry/chdb.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/buf.h"
#include "ferry/chhttp.h"
#include "ferry/clock.h"

typedef struct chdb_result_ {
    void *internal_data;
} chdb_result;
typedef struct chdb_connection_ {
    void *internal_data;
} *chdb_connection;
typedef struct chdb_insert_stream_ {
    void *internal_data;
} *chdb_insert_stream;

struct ferry_chdb {
    void *handle;
    char path[4096];
    char version[64];
    chdb_connection *(*connect)(int, char **);
    void (*close_conn)(chdb_connection *);
    chdb_result *(*query_n)(chdb_connection, const char *, size_t, const char *, size_t);
    chdb_result *(*query_params_n)(chdb_connection, const char *, size_t, const char *, size_t,
                                   const char *const *, const size_t *, const char *const *,
                                   const size_t *, size_t);
    chdb_result *(*stream_query_n)(chdb_connection, const char *, size_t, const char *, size_t);
    chdb_result *(*stream_query_params_n)(chdb_connection, const char *, size_t, const char *,
                                          size_t, const char *const *, const size_t *,
                                          const char *const *, const size_t *, size_t);
    chdb_result *(*stream_fetch)(chdb_connection, chdb_result *);
    void (*stream_cancel)(chdb_connection, chdb_result *);
    char *(*result_buffer)(chdb_result *);
    size_t (*result_length)(chdb_result *);
    const char *(*result_error)(chdb_result *);
    double (*result_elapsed)(chdb_result *);
    uint64_t (*result_rows_read)(chdb_result *);
    uint64_t (*result_bytes_read)(chdb_result *);
    uint64_t (*result_rows_written)(chdb_result *);
    void (*destroy_result)(chdb_result *);
    chdb_insert_stream (*stream_insert)(chdb_connection, const char *, const char *);
    int (*stream_append)(chdb_insert_stream, const void *, size_t);
    chdb_result *(*stream_done)(chdb_insert_stream);
    void (*stream_cancel_insert)(chdb_insert_stream);
    const char *(*stream_insert_error)(chdb_insert_stream);
    void (*destroy_insert_stream)(chdb_insert_stream);
    const char *(*version_fn)(void);
    void (*set_signal_handlers_enabled)(int);
    bool streamed_insert; /* the streaming-insert API is there (26.7); else inserts spool */
    char spool_dir[4096]; /* where spooled INSERT bodies go ("" = $TMPDIR or /tmp) */
};

struct ferry_chdb_conn {
    ferry_chdb *lib;
    chdb_connection *handle;
    ferry_chdb_conn *next_idle; /* pool bookkeeping */
};

static const char *cache_path(const char *pkg_version, char *buf, size_t bufsz)
{
    const char *cache = getenv("FERRY_CACHE");
    if (cache && *cache)
        snprintf(buf, bufsz, "%s/chdb-%s/libchdb.so", cache, pkg_version);
    else
        snprintf(buf, bufsz, "%s/.cache/ferry/chdb-%s/libchdb.so",
                 getenv("HOME") ? getenv("HOME") : "", pkg_version);
    return buf;
}

const char *ferry_chdb_default_path(char *buf, size_t bufsz)
{
    const char *env = getenv("FERRY_LIBCHDB");
    if (env && *env) {
        snprintf(buf, bufsz, "%s", env);
        return buf;
    }
    return cache_path(FERRY_CHDB_VERSION, buf, bufsz);
}

const char *ferry_chdb_version_path(const char *version, char *buf, size_t bufsz)
{
    if (!strcmp(version, "26.7") || !strcmp(version, FERRY_CHDB_VERSION))
        return cache_path(FERRY_CHDB_VERSION, buf, bufsz);
    if (!strcmp(version, "26.5") || !strcmp(version, FERRY_CHDB_OLD_VERSION))
        return cache_path(FERRY_CHDB_OLD_VERSION, buf, bufsz);
    return NULL;
}

#define HOWTO                                                                                   \
    "get it with 'make deps' (runs scripts/setup.sh, which caches " FERRY_CHDB_PACKAGE          \
    "@" FERRY_CHDB_VERSION ") or point FERRY_LIBCHDB at a libchdb.so of that version"

int ferry_chdb_load(const char *path, ferry_chdb **out, ferry_err *err)
{
    static ferry_chdb *loaded; /* one engine per process */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    char pathbuf[4096];
    int rc = FERRY_OK;
    ferry_chdb *lib = NULL;
    if (!path || !*path)
        path = ferry_chdb_default_path(pathbuf, sizeof pathbuf);
    pthread_mutex_lock(&mu);
    if (loaded) {
        if (strcmp(loaded->path, path) != 0)
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "libchdb is already loaded from %s; one process loads one",
                               loaded->path);
        else
            *out = loaded;
        goto out;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "libchdb not found at %s (%s); " HOWTO, path,
                           strerror(errno));
        goto out;
    }
    lib = calloc(1, sizeof *lib);
    if (!lib) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(lib->path, sizeof lib->path, "%s", path);
    lib->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        rc = ferry_err_set(err, FERRY_EINVAL, "cannot load libchdb from %s: %s; " HOWTO, path,
                           dlerror());
        goto out;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"chdb_connect", (void **)&lib->connect},
        {"chdb_close_conn", (void **)&lib->close_conn},
        {"chdb_query_n", (void **)&lib->query_n},
        {"chdb_query_with_params_n", (void **)&lib->query_params_n},
        {"chdb_stream_query_n", (void **)&lib->stream_query_n},
        {"chdb_stream_query_with_params_n", (void **)&lib->stream_query_params_n},
        {"chdb_stream_fetch_result", (void **)&lib->stream_fetch},
        {"chdb_stream_cancel_query", (void **)&lib->stream_cancel},
        {"chdb_result_buffer", (void **)&lib->result_buffer},
        {"chdb_result_length", (void **)&lib->result_length},
        {"chdb_result_error", (void **)&lib->result_error},
        {"chdb_result_elapsed", (void **)&lib->result_elapsed},
        {"chdb_result_rows_read", (void **)&lib->result_rows_read},
        {"chdb_result_bytes_read", (void **)&lib->result_bytes_read},
        {"chdb_result_rows_written", (void **)&lib->result_rows_written},
        {"chdb_destroy_query_result", (void **)&lib->destroy_result},
        {"chdb_stream_insert", (void **)&lib->stream_insert},
        {"chdb_stream_append", (void **)&lib->stream_append},
        {"chdb_stream_done", (void **)&lib->stream_done},
        {"chdb_stream_cancel_insert", (void **)&lib->stream_cancel_insert},
        {"chdb_stream_insert_error", (void **)&lib->stream_insert_error},
        {"chdb_destroy_insert_stream", (void **)&lib->destroy_insert_stream},
        {"chdb_version", (void **)&lib->version_fn},
        {"chdb_set_signal_handlers_enabled", (void **)&lib->set_signal_handlers_enabled},
    };
    /* The streaming-insert API and chdb_version came with chdb's 26.7 builds; without them
     * (26.5) inserts are spooled to a file and the version is asked with SELECT version(). */
    static const char *const optional[] = {"chdb_stream_insert", "chdb_stream_append",
                                           "chdb_stream_done", "chdb_stream_cancel_insert",
                                           "chdb_stream_insert_error",
                                           "chdb_destroy_insert_stream", "chdb_version", NULL};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(lib->handle, syms[i].name);
        bool opt = false;
        for (size_t k = 0; optional[k]; k++)
            opt = opt || !strcmp(optional[k], syms[i].name);
        if (!*syms[i].slot && !opt) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "%s is not the libchdb ferry needs (no symbol %s); " HOWTO, path,
                               syms[i].name);
            goto out;
        }
    }
    /* all six insert functions, or the spooled mode */
    lib->streamed_insert = lib->stream_insert && lib->stream_append && lib->stream_done &&
                           lib->stream_cancel_insert && lib->stream_insert_error &&
                           lib->destroy_insert_stream;
    snprintf(lib->version, sizeof lib->version, "%s", lib->version_fn ? lib->version_fn() : "");
    if (lib->version_fn && strncmp(lib->version, "26.", 3) != 0) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s is libchdb %s, ferry needs 26.x; " HOWTO, path,
                           lib->version);
        goto out;
    }
    /* The embedding process handles its own signals (SIGTERM means a clean stop). */
    lib->set_signal_handlers_enabled(0);
    loaded = lib;
    *out = lib;
    lib = NULL;
out:
    pthread_mutex_unlock(&mu);
    if (lib) {
        /* A library that failed the checks stays mapped: unloading a half-initialised C++
         * library is riskier than the memory. */
        free(lib);
    }
    return rc;
}

const char *ferry_chdb_lib_version(const ferry_chdb *lib) { return lib->version; }
const char *ferry_chdb_lib_path(const ferry_chdb *lib) { return lib->path; }

const char *ferry_chdb_insert_mode(const ferry_chdb *lib)
{
    return lib->streamed_insert ? "streamed" : "spooled";
}

void ferry_chdb_set_spool_dir(ferry_chdb *lib, const char *dir)
{
    snprintf(lib->spool_dir, sizeof lib->spool_dir, "%s", dir ? dir : "");
}

int ferry_chdb_connect(ferry_chdb *lib, int argc, const char *const *argv, ferry_chdb_conn **out,
                       ferry_err *err)
{
    int rc = FERRY_OK;
    char **args = calloc((size_t)argc + 2, sizeof *args);
    ferry_chdb_conn *c = calloc(1, sizeof *c);
    if (!args || !c) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    args[0] = "ferry";
    for (int i = 0; i < argc; i++)
        args[i + 1] = (char *)argv[i];
    c->lib = lib;
    c->handle = lib->connect(argc + 1, args);
    if (!c->handle || !*c->handle) {
        rc = ferry_err_set(err, FERRY_EIO,
                           "ClickHouse refused to open a connection (arguments:%s%s%s%s); see "
                           "the ClickHouse log above",
                           argc > 0 ? " " : "", argc > 0 ? argv[0] : "", argc > 1 ? " " : "",
                           argc > 1 ? argv[1] : "");
        goto out;
    }
    *out = c;
    c = NULL;
out:
    free(args);
    free(c);
    return rc;
}

void ferry_chdb_close(ferry_chdb_conn *conn)
{
    if (!conn)
        return;
    conn->lib->close_conn(conn->handle);
    free(conn);
}

/* Parameter arrays in the _n calls' shape. */
typedef struct params_n {
    const char **names, **values;
    size_t *name_lens, *value_lens;
} params_n;

static int params_prepare(const ferry_chdb_param *p, size_t n, params_n *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0)
        return FERRY_OK;
    out->names = calloc(n, sizeof *out->names);
    out->values = calloc(n, sizeof *out->values);
    out->name_lens = calloc(n, sizeof *out->name_lens);
    out->value_lens = calloc(n, sizeof *out->value_lens);
    if (!out->names || !out->values || !out->name_lens || !out->value_lens)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        out->names[i] = p[i].name;
        out->values[i] = p[i].value;
        out->name_lens[i] = strlen(p[i].name);
        out->value_lens[i] = strlen(p[i].value);
    }
    return FERRY_OK;
}

static void params_free(params_n *p)
{
    free(p->names);
    free(p->values);
    free(p->name_lens);
    free(p->value_lens);
}

static char *dup_error(const char *e)
{
    char *s = strdup(e && *e ? e : "ClickHouse reported an error without a message");
    size_t n = s ? strlen(s) : 0;
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = '\0';
    return s;
}

/* ClickHouse's error e kept in *error (the caller's to free) and said in err: FERRY_EREMOTE. */
static int remote_error(const char *e, char **error, ferry_err *err)
{
    *error = dup_error(e);
    return ferry_err_set(err, FERRY_EREMOTE, "%s", *error ? *error : "ClickHouse error");
}

/* How opening a stream went: FERRY_EIO when libchdb gave no handle, FERRY_EREMOTE with
 * ClickHouse's error e (kept in *error), else FERRY_OK. */
static int opened(const void *handle, const char *what, const char *e, char **error,
                  ferry_err *err)
{
    if (!handle)
        return ferry_err_set(err, FERRY_EIO, "libchdb returned no %s", what);
    return e ? remote_error(e, error, err) : FERRY_OK;
}

int ferry_chdb_query(ferry_chdb_conn *conn, const char *sql, size_t sql_len, const char *format,
                     const ferry_chdb_param *params, size_t n_params, ferry_chdb_result *res,
                     ferry_err *err)
{
    ferry_chdb *lib = conn->lib;
    memset(res, 0, sizeof *res);
    if (!format || !*format)
        format = "TabSeparated";
    params_n pn;
    int rc = FERRY_OK;
    chdb_result *r = NULL;
    if (params_prepare(params, n_params, &pn) != FERRY_OK) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if (n_params)
        r = lib->query_params_n(*conn->handle, sql, sql_len, format, strlen(format), pn.names,
                                pn.name_lens, pn.values, pn.value_lens, n_params);
    else
        r = lib->query_n(*conn->handle, sql, sql_len, format, strlen(format));
    if (!r) {
        rc = ferry_err_set(err, FERRY_EIO, "libchdb returned no result");
        goto out;
    }
    const char *e = lib->result_error(r);
    if (e) {
        rc = remote_error(e, &res->error, err);
        goto out;
    }
    size_t len = lib->result_length(r);
    res->data = malloc(len + 1);
    if (!res->data) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory for a %zu-byte result", len);
        goto out;
    }
    if (len)
        memcpy(res->data, lib->result_buffer(r), len);
    res->data[len] = '\0';
    res->len = len;
    res->elapsed = lib->result_elapsed(r);
    res->rows_read = lib->result_rows_read(r);
    res->bytes_read = lib->result_bytes_read(r);
    res->rows_written = lib->result_rows_written(r);
out:
    if (r)
        lib->destroy_result(r);
    params_free(&pn);
    return rc;
}

void ferry_chdb_result_free(ferry_chdb_result *res)
{
    if (!res)
        return;
    free(res->data);
    free(res->error);
    memset(res, 0, sizeof *res);
}

struct ferry_chdb_stream {
    ferry_chdb_conn *conn;
    chdb_result *handle;
    chdb_result *chunk; /* the chunk handed out last */
    char *error;
    bool done;
};

int ferry_chdb_stream_open(ferry_chdb_conn *conn, const char *sql, size_t sql_len,
                           const char *format, const ferry_chdb_param *params, size_t n_params,
                           ferry_chdb_stream **out, char **error, ferry_err *err)
{
    ferry_chdb *lib = conn->lib;
    if (!format || !*format)
        format = "TabSeparated";
    *error = NULL;
    params_n pn;
    int rc = FERRY_OK;
    ferry_chdb_stream *s = calloc(1, sizeof *s);
    if (!s || params_prepare(params, n_params, &pn) != FERRY_OK) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        if (s)
            params_free(&pn);
        goto out;
    }
    s->conn = conn;
    if (n_params)
        s->handle = lib->stream_query_params_n(*conn->handle, sql, sql_len, format,
                                               strlen(format), pn.names, pn.name_lens,
                                               pn.values, pn.value_lens, n_params);
    else
        s->handle = lib->stream_query_n(*conn->handle, sql, sql_len, format, strlen(format));
    params_free(&pn);
    if ((rc = opened(s->handle, "stream", s->handle ? lib->result_error(s->handle) : NULL,
                     error, err)))
        goto out;
    *out = s;
    s = NULL;
out:
    if (s) {
        if (s->handle)
            lib->destroy_result(s->handle);
        free(s);
    }
    return rc;
}

int ferry_chdb_stream_next(ferry_chdb_stream *s, const char **data, size_t *len,
                           const char **error)
{
    ferry_chdb *lib = s->conn->lib;
    if (s->chunk) {
        lib->destroy_result(s->chunk);
        s->chunk = NULL;
    }
    if (s->error) {
        *error = s->error;
        return -1;
    }
    if (s->done)
        return 0;
    for (;;) {
        chdb_result *c = lib->stream_fetch(*s->conn->handle, s->handle);
        if (!c) {
            s->error = dup_error("libchdb returned no chunk");
            *error = s->error;
            return -1;
        }
        const char *e = lib->result_error(c);
        if (e) {
            s->error = dup_error(e);
            lib->destroy_result(c);
            *error = s->error;
            return -1;
        }
        size_t n = lib->result_length(c);
        if (n == 0) {
            lib->destroy_result(c);
            s->done = true;
            return 0;
        }
        s->chunk = c;
        *data = lib->result_buffer(c);
        *len = n;
        return 1;
    }
}

void ferry_chdb_stream_close(ferry_chdb_stream *s)
{
    if (!s)
        return;
    ferry_chdb *lib = s->conn->lib;
    if (s->chunk)
        lib->destroy_result(s->chunk);
    if (!s->done && !s->error)
        lib->stream_cancel(*s->conn->handle, s->handle);
    lib->destroy_result(s->handle);
    free(s->error);
    free(s);
}

struct ferry_chdb_insert {
    ferry_chdb_conn *conn;
    chdb_insert_stream handle; /* streamed mode */
    char *error;
    bool finished;
    /* spooled mode: the body goes to a private file, then one INSERT ... FROM INFILE reads it,
     * so memory stays bounded whatever the body's size */
    int fd;
    char *sql;
    char fmt[64];
    char path[4200];
};

static int insert_failed(ferry_chdb_insert *ins, const char *e, const char **error);

/* ClickHouse reports an error of a statement that read a file as "Code: N. DB::Exception:
 * Code: N. DB::Exception: ...": keep one prefix, so messages read as the streamed mode's. */
static char *dedup_prefix(char *msg)
{
    if (!msg || strncmp(msg, "Code: ", 6) != 0)
        return msg;
    const char *ex = strstr(msg, "DB::Exception: ");
    if (!ex)
        return msg;
    size_t plen = (size_t)(ex - msg) + strlen("DB::Exception: ");
    if (strncmp(msg + plen, msg, plen) == 0)
        memmove(msg, msg + plen, strlen(msg + plen) + 1);
    return msg;
}

static int spool_open(ferry_chdb_insert *ins, const char *sql, const char *format,
                      char **error, ferry_err *err)
{
    ferry_chdb *lib = ins->conn->lib;
    const char *dir = lib->spool_dir;
    if (!dir[0])
        dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(ins->path, sizeof ins->path, "%.4000s/ferry-insert-XXXXXX", dir);
    ins->fd = mkostemp(ins->path, O_CLOEXEC); /* mode 0600: the rows are the tenant's */
    if (ins->fd < 0) {
        char msg[4400];
        snprintf(msg, sizeof msg, "Code: 1001. DB::Exception: Cannot create a file for the INSERT "
                 "body in %s: %s. (STD_EXCEPTION)", dir, strerror(errno));
        *error = strdup(msg);
        ins->path[0] = '\0';
        return ferry_err_set(err, FERRY_EREMOTE, "%s", msg);
    }
    ins->sql = strdup(sql);
    snprintf(ins->fmt, sizeof ins->fmt, "%s", format);
    if (!ins->sql)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

int ferry_chdb_insert_open(ferry_chdb_conn *conn, const char *sql, const char *format,
                           ferry_chdb_insert **out, char **error, ferry_err *err)
{
    ferry_chdb *lib = conn->lib;
    *error = NULL;
    int rc = FERRY_OK;
    ferry_chdb_insert *ins = calloc(1, sizeof *ins);
    if (!ins)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    ins->conn = conn;
    ins->fd = -1;
    if (!lib->streamed_insert) {
        if ((rc = spool_open(ins, sql, format, error, err)) != FERRY_OK)
            goto out;
        *out = ins;
        ins = NULL;
        goto out;
    }
    ins->handle = lib->stream_insert(*conn->handle, sql, format);
    if ((rc = opened(ins->handle, "insert stream",
                     ins->handle ? lib->stream_insert_error(ins->handle) : NULL, error, err)))
        goto out;
    *out = ins;
    ins = NULL;
out:
    if (ins) {
        ins->finished = true; /* a stream that failed to open is destroyed, not cancelled */
        ferry_chdb_insert_close(ins);
    }
    return rc;
}

static int insert_failed(ferry_chdb_insert *ins, const char *e, const char **error)
{
    if (!ins->error)
        ins->error = dedup_prefix(dup_error(e));
    *error = ins->error;
    return FERRY_EREMOTE;
}

int ferry_chdb_insert_append(ferry_chdb_insert *ins, const void *data, size_t len,
                             const char **error)
{
    ferry_chdb *lib = ins->conn->lib;
    if (ins->error) {
        *error = ins->error;
        return FERRY_EREMOTE;
    }
    if (!lib->streamed_insert) {
        const char *p = data;
        while (len > 0) {
            ssize_t w = write(ins->fd, p, len);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                char msg[4400];
                snprintf(msg, sizeof msg, "Code: %d. DB::Exception: Cannot write the INSERT "
                         "body to %s: %s. (%s)", errno == ENOSPC ? 243 : 1001, ins->path,
                         strerror(w < 0 ? errno : EIO),
                         errno == ENOSPC ? "NOT_ENOUGH_SPACE" : "STD_EXCEPTION");
                return insert_failed(ins, msg, error);
            }
            p += w;
            len -= (size_t)w;
        }
        return FERRY_OK;
    }
    if (lib->stream_append(ins->handle, data, len) != 0)
        return insert_failed(ins, lib->stream_insert_error(ins->handle), error);
    return FERRY_OK;
}

/* An INSERT's result r (destroyed here): its error, or the rows it wrote into *rows_written
 * (may be NULL). */
static int insert_result(ferry_chdb_insert *ins, chdb_result *r, uint64_t *rows_written,
                         const char **error)
{
    ferry_chdb *lib = ins->conn->lib;
    const char *e = lib->result_error(r);
    int rc = FERRY_OK;
    if (e)
        rc = insert_failed(ins, e, error);
    else if (rows_written)
        *rows_written = lib->result_rows_written(r);
    lib->destroy_result(r);
    return rc;
}

/* The spooled body is complete: run the INSERT reading it. */
static int spool_finish(ferry_chdb_insert *ins, uint64_t *rows_written, const char **error)
{
    ferry_chdb *lib = ins->conn->lib;
    if (close(ins->fd) != 0) {
        ins->fd = -1;
        char msg[4400];
        snprintf(msg, sizeof msg, "Code: 1001. DB::Exception: Cannot write the INSERT body to "
                 "%s: %s. (STD_EXCEPTION)", ins->path, strerror(errno));
        return insert_failed(ins, msg, error);
    }
    ins->fd = -1;
    ferry_buf q = FERRY_BUF_INIT;
    if (ferry_ch_insert_from_infile(&q, ins->sql, ins->path, ins->fmt) != 0) {
        ferry_buf_free(&q);
        return insert_failed(ins, "Code: 173. DB::Exception: out of memory. (CANNOT_ALLOCATE_MEMORY)",
                             error);
    }
    chdb_result *r = lib->query_n(*ins->conn->handle, q.data, q.len, "TabSeparated", 12);
    ferry_buf_free(&q);
    if (!r)
        return insert_failed(ins, "libchdb returned no result", error);
    return insert_result(ins, r, rows_written, error);
}

int ferry_chdb_insert_finish(ferry_chdb_insert *ins, uint64_t *rows_written, const char **error)
{
    ferry_chdb *lib = ins->conn->lib;
    if (ins->error) {
        *error = ins->error;
        return FERRY_EREMOTE;
    }
    ins->finished = true;
    if (!lib->streamed_insert)
        return spool_finish(ins, rows_written, error);
    chdb_result *r = lib->stream_done(ins->handle);
    if (!r)
        return insert_failed(ins, lib->stream_insert_error(ins->handle), error);
    return insert_result(ins, r, rows_written, error);
}

void ferry_chdb_insert_close(ferry_chdb_insert *ins)
{
    if (!ins)
        return;
    ferry_chdb *lib = ins->conn->lib;
    if (ins->handle) {
        if (!ins->finished)
            lib->stream_cancel_insert(ins->handle);
        lib->destroy_insert_stream(ins->handle);
    }
    if (ins->fd >= 0)
        close(ins->fd);
    if (ins->path[0])
        unlink(ins->path);
    free(ins->sql);
    free(ins->error);
    free(ins);
}

struct ferry_chdb_pool {
    ferry_chdb *lib;
    int argc;
    char **argv;
    unsigned max_size, open, in_use;
    ferry_chdb_conn *idle;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

int ferry_chdb_pool_create(ferry_chdb *lib, int argc, const char *const *argv, unsigned max_size,
                           ferry_chdb_pool **out, ferry_err *err)
{
    int rc = FERRY_OK;
    ferry_chdb_pool *p = calloc(1, sizeof *p);
    if (!p)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    p->lib = lib;
    p->max_size = max_size ? max_size : 1;
    p->argv = calloc((size_t)argc + 1, sizeof *p->argv);
    if (!p->argv) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < argc; i++) {
        p->argv[i] = strdup(argv[i]);
        if (!p->argv[i]) {
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            goto out;
        }
        p->argc = i + 1;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    ferry_chdb_conn *first = NULL;
    rc = ferry_chdb_connect(lib, p->argc, (const char *const *)p->argv, &first, err);
    if (rc != FERRY_OK) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        goto out;
    }
    p->idle = first;
    p->open = 1;
    *out = p;
    p = NULL;
out:
    if (p) {
        for (int i = 0; i < p->argc; i++)
            free(p->argv[i]);
        free(p->argv);
        free(p);
    }
    return rc;
}

int ferry_chdb_pool_acquire(ferry_chdb_pool *p, unsigned timeout_ms, ferry_chdb_conn **out,
                            ferry_err *err)
{
    struct timespec deadline = ferry_clock_after_ms(timeout_ms); /* p->cond's clock */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->idle) {
            ferry_chdb_conn *c = p->idle;
            p->idle = c->next_idle;
            c->next_idle = NULL;
            p->in_use++;
            pthread_mutex_unlock(&p->mu);
            *out = c;
            return FERRY_OK;
        }
        if (p->open < p->max_size) {
            p->open++;
            p->in_use++;
            pthread_mutex_unlock(&p->mu);
            int rc = ferry_chdb_connect(p->lib, p->argc, (const char *const *)p->argv, out, err);
            if (rc != FERRY_OK) {
                pthread_mutex_lock(&p->mu);
                p->open--;
                p->in_use--;
                pthread_cond_signal(&p->cv);
                pthread_mutex_unlock(&p->mu);
            }
            return rc;
        }
        if (pthread_cond_timedwait(&p->cv, &p->mu, &deadline) == ETIMEDOUT && !p->idle &&
            p->open >= p->max_size) {
            unsigned n = p->max_size;
            pthread_mutex_unlock(&p->mu);
            return ferry_err_set(err, FERRY_ETIMEOUT,
                                 "all %u ClickHouse connections stayed busy for %u ms", n,
                                 timeout_ms);
        }
    }
}

void ferry_chdb_pool_release(ferry_chdb_pool *p, ferry_chdb_conn *conn, bool discard)
{
    if (!conn)
        return;
    if (discard)
        ferry_chdb_close(conn);
    pthread_mutex_lock(&p->mu);
    p->in_use--;
    if (discard) {
        p->open--;
    } else {
        conn->next_idle = p->idle;
        p->idle = conn;
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int ferry_chdb_pool_connect_extra(ferry_chdb_pool *p, int argc, const char *const *argv,
                                  ferry_chdb_conn **out, ferry_err *err)
{
    const char **all = calloc((size_t)(p->argc + argc) + 1, sizeof *all);
    if (!all)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (int i = 0; i < p->argc; i++)
        all[i] = p->argv[i];
    for (int i = 0; i < argc; i++)
        all[p->argc + i] = argv[i];
    int rc = ferry_chdb_connect(p->lib, p->argc + argc, all, out, err);
    free(all);
    return rc;
}

unsigned ferry_chdb_pool_in_use(ferry_chdb_pool *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned n = p->in_use;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void ferry_chdb_pool_destroy(ferry_chdb_pool *p)
{
    if (!p)
        return;
    while (p->idle) {
        ferry_chdb_conn *c = p->idle;
        p->idle = c->next_idle;
        ferry_chdb_close(c);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    for (int i = 0; i < p->argc; i++)
        free(p->argv[i]);
    free(p->argv);
    free(p);
}
