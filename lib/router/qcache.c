/* A small LRU map of text keys to text values for the read path (see qcache.h). Keys are found
 * by their xxh3 hash with a linear scan (a few hundred entries at most), then compared whole. */
#include "qcache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

typedef struct qc_entry {
    uint64_t hash;
    uint64_t used; /* tick of the last use; 0: empty */
    char *key;
    size_t key_len;
    char *value;
} qc_entry;

struct rt_qcache {
    pthread_mutex_t mu;
    size_t cap;
    qc_entry *v;
    uint64_t tick;
    unsigned long long hits, lookups;
};

rt_qcache *rt_qcache_new(size_t capacity)
{
    rt_qcache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap = capacity ? capacity : 1;
    c->v = calloc(c->cap, sizeof *c->v);
    if (!c->v) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void entry_clear(qc_entry *e)
{
    free(e->key);
    free(e->value);
    memset(e, 0, sizeof *e);
}

void rt_qcache_free(rt_qcache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        entry_clear(&c->v[i]);
    free(c->v);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The entry holding key, or NULL. Under mu. */
static qc_entry *find(rt_qcache *c, uint64_t h, const char *key, size_t key_len)
{
    for (size_t i = 0; i < c->cap; i++) {
        qc_entry *e = &c->v[i];
        if (e->used && e->hash == h && e->key_len == key_len && !memcmp(e->key, key, key_len))
            return e;
    }
    return NULL;
}

bool rt_qcache_get(rt_qcache *c, const char *key, size_t key_len, char **value)
{
    uint64_t h = XXH3_64bits(key, key_len);
    *value = NULL;
    pthread_mutex_lock(&c->mu);
    c->lookups++;
    qc_entry *e = find(c, h, key, key_len);
    if (e) {
        e->used = ++c->tick;
        *value = strdup(e->value);
        if (*value)
            c->hits++;
    }
    pthread_mutex_unlock(&c->mu);
    return *value != NULL;
}

void rt_qcache_put(rt_qcache *c, const char *key, size_t key_len, const char *value)
{
    uint64_t h = XXH3_64bits(key, key_len);
    char *k = malloc(key_len + 1), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return;
    }
    memcpy(k, key, key_len);
    k[key_len] = '\0';
    pthread_mutex_lock(&c->mu);
    qc_entry *e = find(c, h, key, key_len);
    if (!e) {
        e = &c->v[0];
        for (size_t i = 1; i < c->cap && e->used; i++)
            if (c->v[i].used < e->used)
                e = &c->v[i];
    }
    entry_clear(e);
    *e = (qc_entry){h, ++c->tick, k, key_len, v};
    pthread_mutex_unlock(&c->mu);
}

void rt_qcache_drop(rt_qcache *c, const char *key, size_t key_len)
{
    uint64_t h = XXH3_64bits(key, key_len);
    pthread_mutex_lock(&c->mu);
    qc_entry *e = find(c, h, key, key_len);
    if (e)
        entry_clear(e);
    pthread_mutex_unlock(&c->mu);
}

void rt_qcache_stats(rt_qcache *c, unsigned long long *hits, unsigned long long *lookups)
{
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *lookups = c->lookups;
    pthread_mutex_unlock(&c->mu);
}
