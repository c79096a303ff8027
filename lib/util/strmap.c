/* A map from borrowed strings to 64-bit values (include/ferry/strmap.h): open addressing with
 * linear probing on FNV-1a, at most half full, doubled when an add would pass that. The map owns
 * its slot array only; keys stay the caller's. */
#include "ferry/strmap.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/err.h"

#define FIRST_CAP 64

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The slot of key in slots[cap] (cap a power of two, some slot free): its entry, or the free
 * slot where it goes. */
static size_t slot_of(const ferry_strmap_slot *slots, size_t cap, const char *key)
{
    size_t k = (size_t)fnv1a(key) & (cap - 1);
    while (slots[k].key && strcmp(slots[k].key, key))
        k = (k + 1) & (cap - 1);
    return k;
}

bool ferry_strmap_get(const ferry_strmap *m, const char *key, uint64_t *val)
{
    if (!m->n)
        return false;
    const ferry_strmap_slot *s = &m->slots[slot_of(m->slots, m->cap, key)];
    if (!s->key)
        return false;
    if (val)
        *val = s->val;
    return true;
}

int ferry_strmap_add(ferry_strmap *m, const char *key, uint64_t val)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : FIRST_CAP;
        ferry_strmap_slot *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return FERRY_ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].key)
                slots[slot_of(slots, cap, m->slots[i].key)] = m->slots[i];
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    ferry_strmap_slot *s = &m->slots[slot_of(m->slots, m->cap, key)];
    assert(!s->key); /* not in the map yet */
    s->key = key;
    s->val = val;
    m->n++;
    return FERRY_OK;
}

size_t ferry_strmap_count(const ferry_strmap *m)
{
    return m->n;
}

void ferry_strmap_free(ferry_strmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->n = m->cap = 0;
}
