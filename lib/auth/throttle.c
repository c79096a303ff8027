/* Slowing down repeated failed logins from one client address (include/ferry/auth.h), in a
 * fixed table: memory never grows with the number of addresses an attacker uses; when the
 * table is full the entry whose last failure is oldest makes room. Pure: time comes in. */
#include "ferry/auth.h"

#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

typedef struct slot {
    uint8_t addr[16];
    uint8_t family;     /* 0: free */
    uint32_t failures;
    uint64_t last_ms;   /* last failure */
} slot;

#define PROBES 8

struct ferry_auth_throttle {
    ferry_auth_throttle_policy p;
    slot *slots;
    size_t used;
};

ferry_auth_throttle *ferry_auth_throttle_new(const ferry_auth_throttle_policy *p)
{
    ferry_auth_throttle *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (p)
        t->p = *p;
    if (!t->p.slots)
        t->p.slots = 4096;
    if (!t->p.free_failures)
        t->p.free_failures = 5;
    if (!t->p.base_ms)
        t->p.base_ms = 100;
    if (!t->p.max_ms)
        t->p.max_ms = 5000;
    if (!t->p.decay_ms)
        t->p.decay_ms = 30000;
    t->slots = calloc(t->p.slots, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    return t;
}

void ferry_auth_throttle_free(ferry_auth_throttle *t)
{
    if (!t)
        return;
    free(t->slots);
    free(t);
}

static size_t home(const ferry_auth_throttle *t, int family, const uint8_t addr[16])
{
    uint8_t key[17];
    key[0] = (uint8_t)family;
    memcpy(key + 1, addr, 16);
    return (size_t)(XXH3_64bits(key, sizeof key) % t->p.slots);
}

static slot *find(ferry_auth_throttle *t, int family, const uint8_t addr[16])
{
    size_t h = home(t, family, addr);
    for (size_t k = 0; k < PROBES && k < t->p.slots; k++) {
        slot *s = &t->slots[(h + k) % t->p.slots];
        if (s->family == family && !memcmp(s->addr, addr, 16))
            return s;
    }
    return NULL;
}

/* The failures left after decay (one forgotten per decay_ms since the last failure). */
static uint32_t decayed(const ferry_auth_throttle *t, const slot *s, uint64_t now_ms)
{
    uint64_t gone = now_ms > s->last_ms ? (now_ms - s->last_ms) / t->p.decay_ms : 0;
    return gone >= s->failures ? 0 : s->failures - (uint32_t)gone;
}

uint64_t ferry_auth_throttle_delay(ferry_auth_throttle *t, int family, const uint8_t addr[16],
                                   uint64_t now_ms)
{
    slot *s = find(t, family, addr);
    if (!s)
        return 0;
    uint32_t f = decayed(t, s, now_ms);
    if (f <= t->p.free_failures)
        return 0;
    uint32_t over = f - t->p.free_failures - 1;
    uint64_t d = t->p.base_ms;
    for (uint32_t i = 0; i < over && d < t->p.max_ms; i++)
        d *= 2;
    return d < t->p.max_ms ? d : t->p.max_ms;
}

void ferry_auth_throttle_fail(ferry_auth_throttle *t, int family, const uint8_t addr[16],
                              uint64_t now_ms)
{
    slot *s = find(t, family, addr);
    if (!s) {
        /* a free slot near home, else the one that failed longest ago there */
        size_t h = home(t, family, addr);
        slot *victim = NULL;
        for (size_t k = 0; k < PROBES && k < t->p.slots; k++) {
            slot *c = &t->slots[(h + k) % t->p.slots];
            if (!c->family) {
                victim = c;
                break;
            }
            if (!victim || c->last_ms < victim->last_ms)
                victim = c;
        }
        if (!victim->family)
            t->used++;
        memset(victim, 0, sizeof *victim);
        victim->family = (uint8_t)family;
        memcpy(victim->addr, addr, 16);
        s = victim;
    }
    uint32_t f = decayed(t, s, now_ms);
    s->failures = f < UINT32_MAX ? f + 1 : f;
    s->last_ms = now_ms;
}

size_t ferry_auth_throttle_count(const ferry_auth_throttle *t) { return t->used; }
