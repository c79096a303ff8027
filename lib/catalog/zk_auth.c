/* ZooKeeper digest authentication for the catalog (docs/catalog.md, "ZooKeeper ACLs"): the
 * catalog URL's auth_file names a secret file holding "user:password"; the session adds it as a
 * digest identity, and every znode ferry creates then gets a creator-only ACL (ZOO_CREATOR_ALL_ACL:
 * only sessions authenticated as that user may read or change it). The secret never reaches a
 * message or a log. */
#include "catalog_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zookeeper/zookeeper.h>

#include "ferry/lines.h"

typedef struct auth_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int rc;
} auth_wait;

static void auth_done(int rc, const void *data)
{
    auth_wait *w = (auth_wait *)data;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    w->rc = rc;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int cat_zk_add_auth(void *handle, const char *path, int timeout_ms, ferry_err *err)
{
    zhandle_t *zh = handle;
    struct stat st;
    if (stat(path, &st) != 0)
        return ferry_err_set(err, FERRY_EINVAL, "catalog URL auth_file %s: cannot read it", path);
    if (st.st_mode & 077)
        return ferry_err_set(err, FERRY_EINVAL,
                             "catalog URL auth_file %s is readable by others (chmod 600 it): it "
                             "holds the ZooKeeper digest secret", path);
    char *secret = NULL;
    size_t len = 0;
    ferry_err ferr = {0};
    if (ferry_read_file(path, &secret, &len, &ferr) != FERRY_OK)
        return ferry_err_set(err, FERRY_EINVAL, "catalog URL auth_file %s: cannot read it", path);
    while (len && (secret[len - 1] == '\n' || secret[len - 1] == '\r'))
        secret[--len] = '\0';
    const char *colon = memchr(secret, ':', len);
    int rc = FERRY_OK;
    if (!colon || colon == secret || (size_t)(colon - secret) + 1 == len ||
        memchr(secret, '\n', len) || memchr(secret, '\0', len)) {
        rc = ferry_err_set(err, FERRY_EINVAL,
                           "catalog URL auth_file %s: expected one line 'user:password'", path);
        goto out;
    }
    /* on the heap: when ZooKeeper never answers, the completion may still come later, so the
     * waiter is then left allocated for it (once per failed open) */
    auth_wait *w = calloc(1, sizeof *w);
    if (!w) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    int zrc = zoo_add_auth(zh, "digest", secret, (int)len, auth_done, w);
    bool done = zrc != ZOK;
    if (zrc == ZOK) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000 + 1;
        pthread_mutex_lock(&w->mu);
        while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0) {
        }
        done = w->done;
        zrc = done ? w->rc : ZOPERATIONTIMEOUT;
        pthread_mutex_unlock(&w->mu);
    }
    if (done) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
    }
    if (zrc != ZOK)
        rc = ferry_err_set(err, zrc == ZAUTHFAILED ? FERRY_EACCESS : FERRY_ECONNECT,
                           "ZooKeeper refused the digest identity of auth_file %s: %s", path,
                           zerror(zrc));
out:
    if (secret) {
        memset(secret, 0, len);
        free(secret);
    }
    return rc;
}
