/* The agent's trash: folders it removes (detached parts, freezes) are renamed into
 * <disk path>/ferry_trash/ and deleted there by a background thread, so a request that removes
 * parts answers after one rename per folder instead of after unlinking every file (a move's
 * cleanup of 40 cold parts spent about 0.6 s unlinking on a busy disk).
 *
 * Why this is safe: a rename is atomic, so the folder is either still where ClickHouse looks or
 * gone from there; the trash is outside every table's folder, so no ClickHouse statement sees
 * it. Removing pointer files never touches the objects they name. The pointer walk (`pointers`)
 * skips the trash: what is in it is removed, exactly as if the unlinks had already run.
 *
 * Invariants:
 *   T1  a folder enters the trash only by rename(2) on the same filesystem; when that fails
 *       (EXDEV, a read-only trash, ENOSPC for the trash folder) the folder is removed in place,
 *       synchronously, as before;
 *   T2  a trash entry's name is unique (time, pid, counter, random), never reused;
 *   T3  every trash folder the agent put something in is emptied by the reaper; one left by a
 *       killed agent is emptied once a request of the new agent lists the disks (agent_env_roots
 *       registers every disk's trash and wakes the reaper: an empty trash costs a readdir). */
#include "agent_int.h"

#include <dirent.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry/log.h"

#define TRASH_DIR "ferry_trash"

/* Empties one trash folder: every entry removed (never following a link: agent_rmtree). */
static void empty_trash(const char *trash)
{
    DIR *d = opendir(trash);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[4600];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", trash, e->d_name) >= sizeof p)
            continue;
        ferry_err err = {0};
        if (agent_rmtree(p, &err))
            FLOG_WARN("agent: trash: %s", err.msg);
    }
    closedir(d);
}

static void *reaper_main(void *arg)
{
    agent_trash *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->pending && !t->stopping)
            pthread_cond_wait(&t->cv, &t->mu);
        bool stop = t->stopping;
        t->pending = false;
        /* the list only grows, and its strings are never freed before the thread ends */
        size_t n = t->n_dirs;
        char **dirs = t->dirs;
        pthread_mutex_unlock(&t->mu);
        for (size_t i = 0; i < n; i++)
            empty_trash(dirs[i]);
        pthread_mutex_lock(&t->mu);
        if (stop)
            break;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int agent_trash_init(agent_trash *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, reaper_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        return -1;
    }
    t->running = true;
    return 0;
}

void agent_trash_destroy(agent_trash *t)
{
    if (!t->running)
        return;
    pthread_mutex_lock(&t->mu);
    t->stopping = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL); /* its last round empties what is in the trash */
    for (size_t i = 0; i < t->n_dirs; i++)
        free(t->dirs[i]);
    free(t->dirs);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    t->running = false;
}

/* Adds a trash folder to the reaper's list (once) and wakes it. The list has a fixed capacity
 * (a server has a few disks): the array is allocated once so the reaper may read it unlocked. */
static void trash_register(agent_trash *t, const char *trash)
{
    pthread_mutex_lock(&t->mu);
    bool known = false;
    for (size_t i = 0; i < t->n_dirs && !known; i++)
        known = !strcmp(t->dirs[i], trash);
    if (!known && !t->dirs)
        t->dirs = calloc(AGENT_TRASH_DIRS, sizeof *t->dirs);
    if (!known && t->dirs && t->n_dirs < AGENT_TRASH_DIRS) {
        char *s = strdup(trash);
        if (s)
            t->dirs[t->n_dirs++] = s;
    }
    t->pending = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void agent_trash_register_disk(agent_env *env, const char *disk_path)
{
    if (!env->a->trash.running || disk_path[0] != '/')
        return;
    char trash[4400];
    if ((size_t)snprintf(trash, sizeof trash, "%s%s", disk_path, TRASH_DIR) >= sizeof trash)
        return;
    struct stat sb;
    if (lstat(trash, &sb) == 0 && S_ISDIR(sb.st_mode))
        trash_register(&env->a->trash, trash);
}

bool agent_trash_skip(const char *rel)
{
    return !strcmp(rel, TRASH_DIR);
}

int agent_trash_remove(agent_env *env, const char *disk_path, const char *canon, ferry_err *err)
{
    static unsigned long counter;
    agent_trash *t = &env->a->trash;
    char trash[4400], dst[4600];
    if (t->running && disk_path[0] == '/' &&
        (size_t)snprintf(trash, sizeof trash, "%s%s", disk_path, TRASH_DIR) < sizeof trash &&
        (mkdir(trash, 0700) == 0 || errno == EEXIST)) {
        struct stat sb;
        const char *base = strrchr(canon, '/');
        base = base ? base + 1 : canon;
        unsigned long k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        unsigned r = 0;
        (void)RAND_bytes((unsigned char *)&r, sizeof r); /* k and the pid already make it unique */
        /* the base name stays in the entry's name so a listing says what it was */
        if (lstat(trash, &sb) == 0 && S_ISDIR(sb.st_mode) &&
            (size_t)snprintf(dst, sizeof dst, "%s/%lld-%d-%lu-%08x-%.100s", trash,
                             (long long)time(NULL), (int)getpid(), k, r, base) < sizeof dst &&
            rename(canon, dst) == 0) {
            trash_register(t, trash);
            return FERRY_OK;
        }
    }
    /* T1: no trash here; remove in place */
    return agent_rmtree(canon, err);
}
