/* A tiny test driver for real ClickHouse (libchdb, loaded with dlopen): opens an instance in a
 * folder and runs the queries given on the command line, printing each result. Built without
 * sanitizers and without ferrycore, because libchdb crashes under AddressSanitizer.
 *   chdb_exec LIBCHDB.so DATA_DIR QUERY...     (results in TabSeparated; exit 1 on an error) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chdb_connection_ {
    void *internal_data;
} *chdb_connection;
typedef struct chdb_result_ {
    void *internal_data;
} chdb_result;

typedef chdb_connection *(*connect_fn)(int argc, char **argv);
typedef void (*close_fn)(chdb_connection *conn);
typedef chdb_result *(*query_fn)(chdb_connection conn, const char *sql, const char *format);
typedef char *(*buffer_fn)(chdb_result *r);
typedef size_t (*length_fn)(chdb_result *r);
typedef const char *(*error_fn)(chdb_result *r);
typedef void (*destroy_fn)(chdb_result *r);

static void *need(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "chdb_exec: libchdb has no %s\n", name);
        exit(1);
    }
    return f;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: chdb_exec LIBCHDB.so DATA_DIR QUERY...\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "chdb_exec: cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    connect_fn chdb_connect = (connect_fn)need(lib, "chdb_connect");
    close_fn chdb_close_conn = (close_fn)need(lib, "chdb_close_conn");
    query_fn chdb_query = (query_fn)need(lib, "chdb_query");
    buffer_fn chdb_result_buffer = (buffer_fn)need(lib, "chdb_result_buffer");
    length_fn chdb_result_length = (length_fn)need(lib, "chdb_result_length");
    error_fn chdb_result_error = (error_fn)need(lib, "chdb_result_error");
    destroy_fn chdb_destroy_query_result = (destroy_fn)need(lib, "chdb_destroy_query_result");

    size_t plen = strlen(argv[2]) + sizeof "--path=/";
    char *path_arg = malloc(plen);
    if (!path_arg)
        return 1;
    snprintf(path_arg, plen, "--path=%s/", argv[2]);
    char *cargs[] = {"clickhouse", path_arg, NULL};
    chdb_connection *conn = chdb_connect(2, cargs);
    if (!conn) {
        fprintf(stderr, "chdb_exec: cannot open ClickHouse in %s\n", argv[2]);
        return 1;
    }
    int status = 0;
    for (int i = 3; i < argc && status == 0; i++) {
        chdb_result *r = chdb_query(*conn, argv[i], "TabSeparated");
        const char *e = r ? chdb_result_error(r) : "no result";
        if (e) {
            fprintf(stderr, "chdb_exec: query %d failed: %s\n", i - 2, e);
            status = 1;
        } else {
            fwrite(chdb_result_buffer(r), 1, chdb_result_length(r), stdout);
        }
        if (r)
            chdb_destroy_query_result(r);
    }
    fflush(stdout);
    chdb_close_conn(conn);
    free(path_arg);
    return status;
}
