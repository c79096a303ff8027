/* The servers list of the catalog's part records after moves, clones and replica drops
 * (part_records.h). */
#include "flow/part_records.h"

#include <stdio.h>
#include <string.h>

#include "ferry/log.h"
#include "ferry/strutil.h"

enum { REASSIGN_ATTEMPTS = 5 };

/* Queues the rewrite of every record of (table, pid) that lists from; *n counts them. */
static int queue_partition(ferry_catalog *cat, ferry_batch *b, const char *table, const char *pid,
                           const char *from, const char *to, bool keep_from, size_t *n,
                           ferry_err *err)
{
    const char *prefix[2] = {table, pid};
    ferry_record_list parts = {0};
    int rc = ferry_catalog_list(cat, FERRY_REC_PART, prefix, 2, &parts, err);
    for (size_t i = 0; !rc && i < parts.n; i++) {
        ferry_part *p = &parts.items[i].u.part;
        if (!ferry_list_has(p->servers, from))
            continue;
        char before[FERRY_LIST_MAX];
        snprintf(before, sizeof before, "%s", p->servers);
        if (to && !ferry_list_add(p->servers, sizeof p->servers, to)) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "part %s of %s (partition %s): too many servers to add %s",
                               p->name, table, pid, to);
            break;
        }
        if (!keep_from)
            ferry_list_remove(p->servers, from);
        if (!strcmp(before, p->servers))
            continue;
        rc = ferry_batch_update(b, &parts.items[i], err);
        if (!rc)
            (*n)++;
    }
    ferry_record_list_free(&parts);
    return rc;
}

/* Queues the rewrite of every record of (table, pid) whose servers list names `to` exactly when
 * it names `like` (mirror mode of ferry_part_records_reassign). */
static int queue_mirror(ferry_catalog *cat, ferry_batch *b, const char *table, const char *pid,
                        const char *like, const char *to, size_t *n, ferry_err *err)
{
    const char *prefix[2] = {table, pid};
    ferry_record_list parts = {0};
    int rc = ferry_catalog_list(cat, FERRY_REC_PART, prefix, 2, &parts, err);
    for (size_t i = 0; !rc && i < parts.n; i++) {
        ferry_part *p = &parts.items[i].u.part;
        bool want = ferry_list_has(p->servers, like), has = ferry_list_has(p->servers, to);
        if (want == has)
            continue;
        if (want && !ferry_list_add(p->servers, sizeof p->servers, to)) {
            rc = ferry_err_set(err, FERRY_EINVAL,
                               "part %s of %s (partition %s): too many servers to add %s",
                               p->name, table, pid, to);
            break;
        }
        if (!want)
            ferry_list_remove(p->servers, to);
        rc = ferry_batch_update(b, &parts.items[i], err);
        if (!rc)
            (*n)++;
    }
    ferry_record_list_free(&parts);
    return rc;
}

int ferry_part_records_mirror(ferry_catalog *cat, const char *table, const char *pid,
                              const char *like, const char *to, size_t *changed, ferry_err *err)
{
    int rc = FERRY_OK;
    size_t n = 0;
    if (changed)
        *changed = 0;
    if (!strcmp(like, to))
        return FERRY_OK;
    for (int attempt = 1; attempt <= REASSIGN_ATTEMPTS; attempt++) {
        ferry_batch *b = ferry_batch_new();
        if (!b)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        n = 0;
        rc = queue_mirror(cat, b, table, pid, like, to, &n, err);
        if (!rc && n)
            rc = ferry_catalog_commit(cat, b, NULL, err);
        ferry_batch_free(b);
        if (rc != FERRY_ECONFLICT)
            break;
        rc = FERRY_OK; /* a tier job or a sweep rewrote a record meanwhile: read them again */
        if (attempt == REASSIGN_ATTEMPTS)
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "part records of %s partition %s kept changing under %d attempts "
                               "to make %s's references %s's; run the repair again",
                               table, pid, REASSIGN_ATTEMPTS, to, like);
    }
    if (!rc && changed)
        *changed = n;
    if (!rc && n)
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"part records updated\" table=%s partition=%s records=%zu like=%s to=%s",
                  table, pid, n, like, to);
    return rc;
}

int ferry_part_records_reassign(ferry_catalog *cat, const char *table, const char *const *pids,
                                size_t n_pids, const char *from, const char *to, bool keep_from,
                                size_t *changed, ferry_err *err)
{
    int rc = FERRY_OK;
    size_t n = 0;
    if (changed)
        *changed = 0;
    if (!from || (to && !strcmp(from, to)))
        return FERRY_OK;
    for (int attempt = 1; attempt <= REASSIGN_ATTEMPTS; attempt++) {
        ferry_batch *b = ferry_batch_new();
        if (!b)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        n = 0;
        for (size_t i = 0; !rc && i < n_pids; i++)
            rc = queue_partition(cat, b, table, pids[i], from, to, keep_from, &n, err);
        if (!rc && n)
            rc = ferry_catalog_commit(cat, b, NULL, err);
        ferry_batch_free(b);
        if (rc != FERRY_ECONFLICT)
            break;
        /* a tier job or a sweep rewrote a record meanwhile: read them again */
        rc = FERRY_OK;
        if (attempt == REASSIGN_ATTEMPTS)
            rc = ferry_err_set(err, FERRY_ECONFLICT,
                               "part records of %s kept changing under %d attempts to move "
                               "%s's references to %s; run the flow again",
                               table, REASSIGN_ATTEMPTS, from, to ? to : "(none)");
    }
    if (!rc && changed)
        *changed = n;
    if (!rc && n)
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"part records updated\" table=%s partitions=%zu records=%zu from=%s "
                  "to=%s keep_from=%d",
                  table, n_pids, n, from, to ? to : "", keep_from);
    return rc;
}
