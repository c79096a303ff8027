/* Temporary catalogs for the catalog tests (test_catalog_conformance.c, test_plan_scan.c): on the
 * backend $FERRY_TEST_CATALOG names ("zk://host:port": each catalog a chroot of its own, named
 * after the test program, its pid and a counter) or, when it is unset or empty, SQLite files in a
 * temporary directory under $TMPDIR (or /tmp) that temp_catalogs_done removes. One set-up for
 * both programs, header-only (each test program is one file). */
#ifndef FERRY_TEST_TEMP_CATALOG_H
#define FERRY_TEST_TEMP_CATALOG_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct temp_catalogs {
    const char *zk_base; /* "zk://host:port", or NULL for SQLite */
    char dir[256];       /* SQLite: the directory of the files */
    int counter;         /* catalogs handed out so far */
} temp_catalogs;

/* Reads $FERRY_TEST_CATALOG, makes the directory (named after tag) and says which backend the
 * suite what runs against; false when the directory cannot be made (perror said why). */
static inline bool temp_catalogs_init(temp_catalogs *t, const char *tag, const char *what)
{
    t->counter = 0;
    t->zk_base = getenv("FERRY_TEST_CATALOG");
    if (t->zk_base && !*t->zk_base)
        t->zk_base = NULL;
    const char *tmp = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/ferry-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(t->dir)) {
        perror("mkdtemp");
        return false;
    }
    printf("# %s against %s\n", what, t->zk_base ? t->zk_base : "sqlite");
    return true;
}

/* The URL of a catalog nobody has used yet: BASE/TAG-PID-N?ZK_QUERY on ZooKeeper (zk_query: its
 * session parameters), sqlite:DIR/cN.db on SQLite. */
static inline void temp_catalogs_url(temp_catalogs *t, const char *tag, const char *zk_query,
                                     char *out, size_t size)
{
    t->counter++;
    if (t->zk_base)
        snprintf(out, size, "%s/%s-%d-%d?%s", t->zk_base, tag, (int)getpid(), t->counter,
                 zk_query);
    else
        snprintf(out, size, "sqlite:%s/c%d.db", t->dir, t->counter);
}

/* Removes the directory; false when it could not. */
static inline bool temp_catalogs_done(temp_catalogs *t)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", t->dir);
        return false;
    }
    return true;
}

#endif
