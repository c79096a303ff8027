/* The per-slice lease shared by tiering, repair and moves (slice_lease.h has the contract). */
#include "flow/slice_lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ferry_slice_lease_item {
    char name[FERRY_NAME_MAX];
    ferry_lease *lease;
};

static int take_named(ferry_catalog *cat, ferry_slice_leases *held, const char *name,
                      const char *owner, ferry_err *err)
{
    for (size_t i = 0; i < held->n; i++)
        if (!strcmp(held->items[i].name, name))
            return FERRY_OK;
    if (held->n == held->cap) {
        size_t cap = held->cap ? held->cap * 2 : 8;
        struct ferry_slice_lease_item *g = realloc(held->items, cap * sizeof *g);
        if (!g)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        held->items = g;
        held->cap = cap;
    }
    ferry_lease *l = NULL;
    int rc = ferry_catalog_lease_acquire(cat, name, owner, &l, err);
    if (rc)
        return rc;
    struct ferry_slice_lease_item *it = &held->items[held->n++];
    snprintf(it->name, sizeof it->name, "%s", name);
    it->lease = l;
    return FERRY_OK;
}

int ferry_slice_lease_take(ferry_catalog *cat, ferry_slice_leases *held, const char *tenant,
                           uint32_t split, const char *owner, ferry_err *err)
{
    char name[FERRY_NAME_MAX];
    int len = snprintf(name, sizeof name, "slice.%s.%u", tenant, split);
    if (len < 0 || (size_t)len >= sizeof name)
        return ferry_err_set(err, FERRY_EINVAL, "tenant name '%s' too long for a slice lease",
                             tenant);
    return take_named(cat, held, name, owner, err);
}

int ferry_move_lease_take(ferry_catalog *cat, ferry_slice_leases *held, const char *move_id,
                          const char *owner, ferry_err *err)
{
    char name[FERRY_NAME_MAX];
    int len = snprintf(name, sizeof name, "move.%s", move_id);
    if (len < 0 || (size_t)len >= sizeof name)
        return ferry_err_set(err, FERRY_EINVAL, "move id '%s' too long for a lease", move_id);
    return take_named(cat, held, name, owner, err);
}

void ferry_slice_leases_release(ferry_catalog *cat, ferry_slice_leases *held)
{
    for (size_t i = 0; i < held->n; i++)
        ferry_catalog_lease_release(cat, held->items[i].lease);
    free(held->items);
    memset(held, 0, sizeof *held);
}
