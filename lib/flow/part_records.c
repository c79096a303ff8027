/* The servers list of the catalog's part records after moves, clones and replica drops
 * (part_records.h). */
#include "flow/part_records.h"

#include <stdio.h>
#include <string.h>

#include "ferry/log.h"
#include "ferry/strutil.h"
#include "ferry/sweep.h"
#include "flow/partition_pointers.h"

enum { REASSIGN_ATTEMPTS = 5 };

/* One record's servers list, decided by a flow: *changed when it rewrote p->servers. */
typedef int (*edit_fn)(ferry_part *p, void *arg, bool *changed, ferry_err *err);

/* Adds server to p's list (a full list is an error naming the part). */
static int add_server(ferry_part *p, const char *server, ferry_err *err)
{
    if (ferry_list_add(p->servers, sizeof p->servers, server))
        return FERRY_OK;
    return ferry_err_set(err, FERRY_EINVAL, "part %s of %s (partition %s): too many servers to "
                         "add %s", p->name, p->table, p->partition_id, server);
}

/* Queues the update of every record of (table, pid) that edit changes; *n counts them. */
static int queue_edits(ferry_catalog *cat, ferry_batch *b, const char *table, const char *pid,
                       edit_fn edit, void *arg, size_t *n, ferry_err *err)
{
    const char *prefix[2] = {table, pid};
    ferry_record_list parts = {0};
    int rc = ferry_catalog_list(cat, FERRY_REC_PART, prefix, 2, &parts, err);
    for (size_t i = 0; !rc && i < parts.n; i++) {
        bool changed = false;
        rc = edit(&parts.items[i].u.part, arg, &changed, err);
        if (!rc && changed && !(rc = ferry_batch_update(b, &parts.items[i], err)))
            (*n)++;
    }
    ferry_record_list_free(&parts);
    return rc;
}

/* The edits of the partitions pids[0..n_pids) of table, in one batch and committed; when another
 * writer changed a record meanwhile (a tier job, a sweep) they are read again, up to
 * REASSIGN_ATTEMPTS times: then FERRY_ECONFLICT with err unset (the caller says what kept
 * changing). *n: records rewritten. */
static int commit_edits(ferry_catalog *cat, const char *table, const char *const *pids,
                        size_t n_pids, edit_fn edit, void *arg, size_t *n, ferry_err *err)
{
    for (int attempt = 1; attempt <= REASSIGN_ATTEMPTS; attempt++) {
        ferry_batch *b = ferry_batch_new();
        if (!b)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        *n = 0;
        int rc = FERRY_OK;
        for (size_t i = 0; !rc && i < n_pids; i++)
            rc = queue_edits(cat, b, table, pids[i], edit, arg, n, err);
        if (!rc && *n)
            rc = ferry_catalog_commit(cat, b, NULL, err);
        ferry_batch_free(b);
        if (rc != FERRY_ECONFLICT)
            return rc;
        ferry_err_clear(err);
    }
    return FERRY_ECONFLICT;
}

/* ---- reassign: a move, a clone, a replica drop ---------------------------------------------- */

typedef struct reassign_arg {
    const char *from, *to;
    bool keep_from;
} reassign_arg;

/* A record that lists from: add to (when not NULL) and, unless keep_from, remove from. */
static int edit_reassign(ferry_part *p, void *arg, bool *changed, ferry_err *err)
{
    const reassign_arg *a = arg;
    if (!ferry_list_has(p->servers, a->from))
        return FERRY_OK;
    char before[FERRY_LIST_MAX];
    snprintf(before, sizeof before, "%s", p->servers);
    int rc = a->to ? add_server(p, a->to, err) : FERRY_OK;
    if (!rc && !a->keep_from)
        ferry_list_remove(p->servers, a->from);
    *changed = !rc && strcmp(before, p->servers) != 0;
    return rc;
}

int ferry_part_records_reassign(ferry_catalog *cat, const char *table, const char *const *pids,
                                size_t n_pids, const char *from, const char *to, bool keep_from,
                                size_t *changed, ferry_err *err)
{
    size_t n = 0;
    if (changed)
        *changed = 0;
    if (!from || (to && !strcmp(from, to)))
        return FERRY_OK;
    reassign_arg a = {.from = from, .to = to, .keep_from = keep_from};
    int rc = commit_edits(cat, table, pids, n_pids, edit_reassign, &a, &n, err);
    if (rc == FERRY_ECONFLICT)
        return ferry_err_set(err, FERRY_ECONFLICT,
                             "part records of %s kept changing under %d attempts to move "
                             "%s's references to %s; run the flow again",
                             table, REASSIGN_ATTEMPTS, from, to ? to : "(none)");
    if (!rc && changed)
        *changed = n;
    if (!rc && n)
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"part records updated\" table=%s partitions=%zu records=%zu from=%s "
                  "to=%s keep_from=%d",
                  table, n_pids, n, from, to ? to : "", keep_from);
    return rc;
}

/* ---- mirror: a repair made to's partition equal to like's ----------------------------------- */

typedef struct mirror_arg {
    const char *like, *to;
} mirror_arg;

/* A record names to exactly when it names like. */
static int edit_mirror(ferry_part *p, void *arg, bool *changed, ferry_err *err)
{
    const mirror_arg *a = arg;
    bool want = ferry_list_has(p->servers, a->like), has = ferry_list_has(p->servers, a->to);
    if (want == has)
        return FERRY_OK;
    int rc = want ? add_server(p, a->to, err) : FERRY_OK;
    if (!want)
        ferry_list_remove(p->servers, a->to);
    *changed = !rc;
    return rc;
}

int ferry_part_records_mirror(ferry_catalog *cat, const char *table, const char *pid,
                              const char *like, const char *to, size_t *changed, ferry_err *err)
{
    size_t n = 0;
    if (changed)
        *changed = 0;
    if (!strcmp(like, to))
        return FERRY_OK;
    mirror_arg a = {.like = like, .to = to};
    int rc = commit_edits(cat, table, &pid, 1, edit_mirror, &a, &n, err);
    if (rc == FERRY_ECONFLICT)
        return ferry_err_set(err, FERRY_ECONFLICT,
                             "part records of %s partition %s kept changing under %d attempts "
                             "to make %s's references %s's; run the repair again",
                             table, pid, REASSIGN_ATTEMPTS, to, like);
    if (!rc && changed)
        *changed = n;
    if (!rc && n)
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"part records updated\" table=%s partition=%s records=%zu like=%s to=%s",
                  table, pid, n, like, to);
    return rc;
}

/* ---- reconcile: the records of one partition from one server's pointer files ------------- */

typedef struct collect_arg {
    ferry_sweep_refs *refs;
    const char *server;
} collect_arg;

static int collect_part(void *arg, const char *part, bool active,
                        const ferry_agent_pointer_list *files, ferry_err *err)
{
    (void)part;
    (void)active; /* the path says it: ferry_sweep_path_is_live */
    collect_arg *c = arg;
    for (size_t i = 0; i < files->n_files; i++) {
        const ferry_agent_pointer_file *f = &files->files[i];
        if (!f->path || !f->disk || !f->has_objects)
            return ferry_err_set(err, FERRY_EIO, "server %s: the agent listed a pointer file "
                                 "without its path, disk or objects", c->server);
        for (size_t k = 0; k < f->n_objects; k++) {
            const ferry_agent_pointer_object *o = &f->objects[k];
            if (!o->store_key)
                continue; /* outside ferry's store: no record names it */
            int rc = ferry_sweep_refs_add(c->refs, c->server, f->disk, f->path, o->store_key,
                                          o->size > 0 ? (uint64_t)o->size : 0, err);
            if (rc)
                return rc;
            c->refs->items[c->refs->n - 1].outdated = f->outdated;
        }
    }
    /* a file the agent could not read names objects nobody knows: the server's references are
     * not complete, and a record must not lose the server on a guess */
    if (files->n_invalid)
        return ferry_err_set(err, FERRY_EIO, "server %s: %s is not a readable pointer file (%s); "
                             "its part records are left as they are",
                             c->server, files->invalid[0].path ? files->invalid[0].path : "?",
                             files->invalid[0].error ? files->invalid[0].error : "no reason");
    return FERRY_OK;
}

typedef struct reconcile_arg {
    const char *server;
    const ferry_refset *refs; /* the server's pointer files of the partition, by object key */
} reconcile_arg;

/* A record whose listing of server disagrees with its pointer files: held by a live pointer
 * file and not listed (the sweep's server_only): add it; listed and named by no pointer file of
 * the server at all (catalog_only): remove it. */
static int edit_reconcile(ferry_part *p, void *arg, bool *changed, ferry_err *err)
{
    const reconcile_arg *a = arg;
    if (!p->n_objects)
        return FERRY_OK;
    bool any = false, live = false;
    for (size_t k = 0; k < p->n_objects && !live; k++) {
        size_t first, m = ferry_refset_range(a->refs, p->objects[k].key, &first);
        for (size_t j = first; j < first + m && !live; j++) {
            const ferry_sweep_ref *r = a->refs->by_key[j];
            any = true;
            live = ferry_sweep_path_is_live(r->path) && !r->outdated;
        }
    }
    bool listed = ferry_list_has(p->servers, a->server);
    int rc = FERRY_OK;
    if (live && !listed)
        *changed = !(rc = add_server(p, a->server, err));
    else if (!any && listed) {
        ferry_list_remove(p->servers, a->server);
        *changed = true;
    }
    return rc;
}

int ferry_part_records_reconcile(ferry_catalog *cat, ferry_agent_client *ag, const char *db,
                                 const char *table, const char *pid, const char *server,
                                 size_t *changed, ferry_err *err)
{
    ferry_sweep_refs refs = {0};
    ferry_refset set = {0};
    size_t n = 0;
    if (changed)
        *changed = 0;
    collect_arg c = {.refs = &refs, .server = server};
    int rc = ferry_partition_pointers_each(ag, server, db, table, pid, collect_part, &c, err);
    if (!rc)
        rc = ferry_refset_build(&refs, &set, err);
    reconcile_arg a = {.server = server, .refs = &set};
    if (!rc)
        rc = commit_edits(cat, table, &pid, 1, edit_reconcile, &a, &n, err);
    if (rc == FERRY_ECONFLICT)
        rc = ferry_err_set(err, FERRY_ECONFLICT,
                           "part records of %s partition %s kept changing under %d attempts to "
                           "make them agree with %s's pointer files; run the repair again",
                           table, pid, REASSIGN_ATTEMPTS, server);
    if (!rc && changed)
        *changed = n;
    if (!rc && n)
        ferry_log(FERRY_LOG_INFO,
                  "msg=\"part records made to agree with the server's pointer files\" table=%s "
                  "partition=%s records=%zu server=%s",
                  table, pid, n, server);
    ferry_refset_free(&set);
    ferry_sweep_refs_free(&refs);
    return rc;
}
