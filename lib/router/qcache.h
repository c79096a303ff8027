/* A small thread-safe LRU map from text keys to text values (lib/router/qcache.c). The read
 * path keeps in it what it learned about repeated statements, e.g. the column structure of a
 * plan's partial results, so url() needs no schema-inference round trip the next time. */
#ifndef FERRY_ROUTER_QCACHE_H
#define FERRY_ROUTER_QCACHE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct rt_qcache rt_qcache;

/* NULL: out of memory. capacity: entries kept (the least recently used is replaced). */
rt_qcache *rt_qcache_new(size_t capacity);
void rt_qcache_free(rt_qcache *c);
/* The value stored for key, copied into *value (caller frees). false: none (or out of memory). */
bool rt_qcache_get(rt_qcache *c, const char *key, size_t key_len, char **value);
/* Stores a copy of key and value (replacing an entry with the same key). Out of memory: nothing
 * is stored. */
void rt_qcache_put(rt_qcache *c, const char *key, size_t key_len, const char *value);
/* Forgets key (e.g. the value turned out wrong). */
void rt_qcache_drop(rt_qcache *c, const char *key, size_t key_len);
/* Lookups that found a value, and all lookups, since the start. */
void rt_qcache_stats(rt_qcache *c, unsigned long long *hits, unsigned long long *lookups);

#endif
