/* The sweep's I/O: reads every server's pointer files through its agent, lists the store, reads
 * the catalog, computes the report (sweep.c) and deletes old orphans when asked. See
 * include/ferry/sweep.h. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/agent_ops.h"
#include "ferry/fleet.h"
#include "ferry/log.h"
#include "ferry/strutil.h"
#include "ferry/sweep.h"
#include "ferry/tally.h"

static void problem(json_t *problems, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(json_t *problems, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_array_append_new(problems, json_string(buf));
}

/* Reads one replica's pointer files through its agent into refs, under the shard's name (the
 * name the catalog's parts list). Anything that leaves what the replica references unknown adds
 * a problem and counts in *failed: an agent that cannot be reached or answers an error
 * (including "no object-storage disk": a server ferry manages has one, so its absence means the
 * agent looks at the wrong place, not that nothing is referenced), an answer without its file
 * lists, a file entry without a path or an object without a size, and a file under the cold
 * disk that is not a readable pointer file. Errors only for memory. */
static int read_replica(ferry_agent_client *agent, const char *server, const char *label,
                        ferry_sweep_refs *refs, json_t *problems, size_t *failed, ferry_err *err)
{
    ferry_agent_pointer_list pl;
    ferry_err aerr = {0};
    int rc = ferry_agent_pointers(agent, NULL, NULL, &pl, &aerr);
    if (rc == FERRY_ENOMEM)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc) {
        if (rc == FERRY_EUNSUPPORTED) /* an answer without its lists */
            problem(problems, "server %s: %s", label, aerr.msg);
        else
            problem(problems, "server %s: cannot read its pointer files: %s", label, aerr.msg);
        (*failed)++;
        return FERRY_OK;
    }
    for (size_t k = 0; k < pl.n_files; k++) {
        const ferry_agent_pointer_file *f = &pl.files[k];
        if (!f->path || !f->disk || !f->has_objects) {
            problem(problems, "server %s: the agent listed a pointer file without its path, "
                    "disk or objects", label);
            (*failed)++;
            continue;
        }
        for (size_t j = 0; j < f->n_objects; j++) {
            const ferry_agent_pointer_object *o = &f->objects[j];
            if (o->size < 0) {
                problem(problems, "server %s: %s: an object without a size in the agent's "
                        "answer", label, f->path);
                (*failed)++;
                continue;
            }
            if ((rc = ferry_sweep_refs_add(refs, server, f->disk, f->path, o->store_key,
                                           (uint64_t)o->size, err))) {
                ferry_agent_pointer_list_free(&pl);
                return rc;
            }
            refs->items[refs->n - 1].outdated = f->outdated;
        }
    }
    /* A file that does not parse may be a damaged pointer file (a crash during ClickHouse's
     * in-place rewrite leaves zero bytes), and one the agent could not read or list may be
     * anything: what it named is unknown, so the report cannot be complete. The files of a part
     * ClickHouse set aside as broken (detached/broken-on-start_*: such a crash, found at start)
     * are one problem per part, saying what to do, not one per file (the soak's node4: 676). */
    for (size_t k = 0; k < pl.n_invalid; k++) {
        const char *path = pl.invalid[k].path, *why = pl.invalid[k].error;
        size_t flen = path ? ferry_sweep_broken_folder(path) : 0;
        if (!flen) {
            problem(problems, "server %s: %s is not a readable pointer file (%s)", label,
                    path ? path : "(no path)", why ? why : "no reason given");
            (*failed)++;
            continue;
        }
        /* the agent walks folder by folder: the part's files are neighbours in its list */
        size_t files = 1;
        while (k + files < pl.n_invalid) {
            const char *pj = pl.invalid[k + files].path;
            if (!pj || ferry_sweep_broken_folder(pj) != flen || strncmp(pj, path, flen))
                break;
            files++;
        }
        problem(problems, "server %s: broken part %.*s: %zu pointer file(s) not readable (%s: %s); "
                "ClickHouse set the part aside at start, and the objects it named are unknown, "
                "so nothing is deleted: check that its rows are served elsewhere (`ferry verify`, "
                "`ferry repair` for a replicated slice), then remove the folder and run the sweep "
                "again", label, (int)flen, path, files, path + flen + 1,
                why ? why : "no reason given");
        (*failed)++;
        k += files - 1;
    }
    ferry_agent_pointer_list_free(&pl);
    return FERRY_OK;
}

int ferry_sweep_read_pointers(ferry_fleet *fl, ferry_sweep_refs *refs, json_t *problems,
                              size_t *failed, ferry_err *err)
{
    *failed = 0;
    int rc = FERRY_OK;
    for (size_t i = 0; i < fl->n_servers && rc == FERRY_OK; i++) {
        ferry_fleet_server *s = &fl->servers[i];
        rc = read_replica(s->agent, s->name, s->name, refs, problems, failed, err);
        for (size_t r = 0; r < s->n_more && rc == FERRY_OK; r++) {
            const ferry_fleet_replica *x = &s->more[r];
            char label[FERRY_NAME_MAX + FERRY_URL_MAX + 32];
            snprintf(label, sizeof label, "%s (replica %s)", s->name, x->url);
            if (!x->agent) {
                /* a replica whose files nobody reads could name any object */
                problem(problems, "server %s: no agent to read its pointer files ([shard "
                        "\"%s\"] agent lists one URL; give one per replica, in the order of "
                        "replicas)", label, s->name);
                (*failed)++;
                continue;
            }
            rc = read_replica(x->agent, s->name, label, refs, problems, failed, err);
        }
    }
    return rc;
}

int ferry_sweep_list_store(ferry_objstore *st, const char *prefix, ferry_object_info **out,
                           size_t *n, ferry_err *err)
{
    ferry_object_info *all = NULL;
    size_t cnt = 0, cap = 0;
    char *token = NULL;
    int rc = FERRY_OK;
    do {
        ferry_object_list page = {0};
        if ((rc = ferry_objstore_list(st, prefix, token, 1000, &page, err)))
            break;
        if (token && page.next_token && !strcmp(token, page.next_token)) {
            /* a store that answers a page with the token it was given would loop forever */
            ferry_object_list_free(&page);
            rc = ferry_err_set(err, FERRY_EREMOTE, "listing '%s': the store answered the "
                               "continuation token it was given; the listing cannot go on",
                               prefix);
            break;
        }
        free(token);
        token = page.next_token;
        page.next_token = NULL;
        if (cnt + page.n > cap) {
            size_t nc = (cnt + page.n) * 2 + 16;
            ferry_object_info *na = realloc(all, nc * sizeof *na);
            if (!na) {
                ferry_object_list_free(&page);
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                break;
            }
            all = na;
            cap = nc;
        }
        if (page.n) /* an empty page (S3 may send one with a token) has no items array */
            memcpy(all + cnt, page.items, page.n * sizeof *all);
        cnt += page.n;
        free(page.items); /* the keys now belong to all */
    } while (token);
    free(token);
    if (rc) {
        for (size_t i = 0; i < cnt; i++)
            free(all[i].key);
        free(all);
        return rc;
    }
    *out = all;
    *n = cnt;
    return FERRY_OK;
}

void ferry_sweep_objects_free(ferry_object_info *o, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(o[i].key);
    free(o);
}

/* Moves and jobs not finished: their flows may be between "object written" and "pointer
 * written" (or the reverse) in ways the grace period does not cover. A FAILED move was rolled
 * back (the target holds nothing of it, the source never changed), so the unfinished moves, from
 * the catalog's index of them (O(moves in flight), not O(history)), are all that count. */
static int in_flight(ferry_fleet *fl, char *why, size_t whysz, ferry_err *err)
{
    ferry_record_list l = {0};
    int rc = ferry_catalog_list_unfinished_moves(fl->cat, &l, err);
    if (rc)
        return rc;
    why[0] = '\0';
    if (l.n)
        snprintf(why, whysz, "move %s is in flight (%s)", l.items[0].u.move.id,
                 ferry_move_state_name(l.items[0].u.move.state));
    ferry_record_list_free(&l);
    if (why[0])
        return FERRY_OK;
    if ((rc = ferry_catalog_list(fl->cat, FERRY_REC_JOB, NULL, 0, &l, err)))
        return rc;
    for (size_t i = 0; i < l.n && !why[0]; i++) {
        const ferry_job *j = &l.items[i].u.job;
        /* a move's job record (its journal data) is not its state: the move record is, and the
         * unfinished ones were checked above (moves that ended before ferry marked their job
         * record DONE left it at SWITCH or CLEANUP for good) */
        if (!strcmp(j->kind, "move"))
            continue;
        if (strcmp(j->state, "DONE") && strcmp(j->state, "FAILED"))
            snprintf(why, whysz, "%s job %s is in flight (%s)", j->kind, j->id, j->state);
    }
    ferry_record_list_free(&l);
    return FERRY_OK;
}

static void server_names(ferry_fleet *fl, const char **names)
{
    for (size_t i = 0; i < fl->n_servers; i++)
        names[i] = fl->servers[i].name;
}

int ferry_sweep_run(ferry_fleet *fl, const ferry_sweep_options *opt, ferry_sweep_result *res,
                    ferry_err *err)
{
    memset(res, 0, sizeof *res);
    res->problems = json_array();
    ferry_sweep_refs refs = {0}, refs2 = {0};
    ferry_refset again = {0};
    ferry_object_info *objects = NULL;
    size_t n_objects = 0, failed = 0;
    ferry_objstore *lister = NULL, *janitor = NULL;
    ferry_record_list parts = {0};
    const char **names = calloc(fl->n_servers + 1, sizeof *names);
    int rc = FERRY_OK;
    if (!names || !res->problems) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    server_names(fl, names);
    time_t now = opt->now ? opt->now : time(NULL);
    const char *scope = ferry_fleet_store_prefix(fl);

    if ((rc = ferry_sweep_read_pointers(fl, &refs, res->problems, &failed, err)))
        goto out;
    bool listed = false;
    ferry_err lerr = {0};
    if (ferry_fleet_store(fl, FERRY_ROLE_CLICKHOUSE, &lister, &lerr) == FERRY_OK &&
        ferry_sweep_list_store(lister, scope, &objects, &n_objects, &lerr) == FERRY_OK)
        listed = true;
    else
        problem(res->problems, "cannot list the object store under '%s': %s", scope, lerr.msg);
    if ((rc = ferry_catalog_list(fl->cat, FERRY_REC_PART, NULL, 0, &parts, err)))
        goto out;
    ferry_sweep_input in = {.refs = &refs, .servers = names, .n_servers = fl->n_servers,
                            .objects = objects, .n_objects = n_objects, .scope_prefix = scope,
                            .parts = parts.items, .n_parts = parts.n, .now = now,
                            .min_age_s = opt->min_age_s};
    if ((rc = ferry_sweep_compute(&in, &res->report, err)))
        goto out;
    res->complete = failed == 0 && listed;
    if (!listed) {
        /* without a listing every pointer would look dangling: report none */
        for (size_t i = 0; i < res->report.n_dangling; i++) {
            free(res->report.dangling[i].server);
            free(res->report.dangling[i].disk);
            free(res->report.dangling[i].path);
            free(res->report.dangling[i].key);
        }
        res->report.n_dangling = 0;
    }
    if (!opt->delete_orphans)
        goto out;

    size_t deletable = 0;
    for (size_t i = 0; i < res->report.n_orphans; i++)
        deletable += res->report.orphans[i].old_enough;
    if (!res->complete) {
        res->deletion_skipped = true;
        problem(res->problems, "nothing deleted: the report is incomplete");
        goto out;
    }
    if (!deletable)
        goto out;
    char why[512];
    if ((rc = in_flight(fl, why, sizeof why, err)))
        goto out;
    if (why[0]) {
        res->deletion_skipped = true;
        problem(res->problems, "nothing deleted: %s; run the sweep again when it is finished",
                why);
        goto out;
    }
    /* read every server again just before deleting: a pointer file copied to one server while
     * its source was being read could have hidden a reference in the first pass */
    if ((rc = ferry_sweep_read_pointers(fl, &refs2, res->problems, &failed, err)))
        goto out;
    if (failed) {
        res->complete = false;
        res->deletion_skipped = true;
        problem(res->problems, "nothing deleted: the second read of the pointer files failed");
        goto out;
    }
    if ((rc = ferry_refset_build(&refs2, &again, err)))
        goto out;
    ferry_err jerr = {0};
    if (ferry_fleet_store(fl, FERRY_ROLE_JANITOR, &janitor, &jerr)) {
        res->deletion_skipped = true;
        problem(res->problems, "nothing deleted: cannot open the store as janitor: %s", jerr.msg);
        goto out;
    }
    for (size_t i = 0; i < res->report.n_orphans; i++) {
        ferry_sweep_orphan *o = &res->report.orphans[i];
        if (!o->old_enough)
            continue;
        if (ferry_refset_find(&again, o->key)) {
            problem(res->problems, "kept %s: a pointer file names it now", o->key);
            continue;
        }
        ferry_err derr = {0};
        if (ferry_objstore_delete(janitor, o->key, &derr) == FERRY_OK) {
            res->deleted++;
            res->deleted_bytes += o->size;
            FLOG_INFO("sweep: deleted orphan key=%s size=%" PRIu64, o->key, o->size);
        } else {
            res->delete_failed++;
            problem(res->problems, "cannot delete %s: %s", o->key, derr.msg);
        }
    }
out:
    if (!rc) { /* the cluster's tally (include/ferry/tally.h): bookkeeping, never the sweep's */
        ferry_err terr = {0};
        if (ferry_tally_sweep_put(fl->cat, res, (int64_t)time(NULL), &terr))
            FLOG_WARN("msg=\"sweep not recorded in the cluster's tally\" err=\"%s\"", terr.msg);
    }
    ferry_refset_free(&again);
    ferry_sweep_refs_free(&refs);
    ferry_sweep_refs_free(&refs2);
    ferry_sweep_objects_free(objects, n_objects);
    ferry_objstore_close(lister);
    ferry_objstore_close(janitor);
    ferry_record_list_free(&parts);
    free(names);
    return rc;
}

void ferry_sweep_result_free(ferry_sweep_result *res)
{
    ferry_sweep_report_free(&res->report);
    json_decref(res->problems);
    memset(res, 0, sizeof *res);
}

json_t *ferry_sweep_result_json(const ferry_sweep_result *res)
{
    const ferry_sweep_report *r = &res->report;
    json_t *o = json_object(), *orphans = json_array(), *od = json_array(),
           *dangling = json_array(), *dd = json_array(), *drift = json_array(),
           *cat = json_array();
    for (size_t i = 0; i < r->n_orphans; i++) {
        json_array_append_new(orphans, json_string(r->orphans[i].key));
        json_array_append_new(od, json_pack("{s:s, s:I, s:I, s:b}", "key", r->orphans[i].key,
                                            "size", (json_int_t)r->orphans[i].size, "mtime",
                                            (json_int_t)r->orphans[i].mtime, "old_enough",
                                            r->orphans[i].old_enough));
    }
    for (size_t i = 0; i < r->n_dangling; i++) {
        const ferry_sweep_dangling *d = &r->dangling[i];
        char p[4500];
        snprintf(p, sizeof p, "%s:%s:%s", d->server, d->disk, d->path);
        json_array_append_new(dangling, json_string(p));
        json_t *x = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "server", d->server, "disk",
                              d->disk, "path", d->path, "key", d->key, "size",
                              (json_int_t)d->want_size, "problem",
                              d->missing ? "missing" : "wrong_size");
        if (!d->missing)
            json_object_set_new(x, "object_size", json_integer((json_int_t)d->have_size));
        json_array_append_new(dd, x);
    }
    for (size_t i = 0; i < r->n_drift; i++) {
        const ferry_sweep_drift *d = &r->drift[i];
        json_t *x = json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind",
                              d->kind == FERRY_DRIFT_CATALOG_ONLY ? "catalog_only"
                                                                  : "server_only",
                              "server", d->server, "table", d->table, "partition_id",
                              d->partition_id, "part", d->part);
        if (d->path)
            json_object_set_new(x, "path", json_string(d->path));
        json_array_append_new(drift, x);
    }
    for (size_t i = 0; i < r->n_catalog_only_keys; i++)
        json_array_append_new(cat, json_string(r->catalog_only_keys[i]));
    json_object_set_new(o, "complete", json_boolean(res->complete));
    json_object_set_new(o, "orphans", orphans);
    json_object_set_new(o, "orphan_details", od);
    json_object_set_new(o, "orphan_bytes", json_integer((json_int_t)r->orphan_bytes));
    json_object_set_new(o, "dangling", dangling);
    json_object_set_new(o, "dangling_details", dd);
    json_object_set_new(o, "drift", drift);
    json_object_set_new(o, "catalog_only", cat);
    json_object_set_new(o, "pointer_files", json_integer((json_int_t)r->n_pointer_files));
    json_object_set_new(o, "referenced_objects", json_integer((json_int_t)r->n_referenced));
    json_object_set_new(o, "outside_references", json_integer((json_int_t)r->n_outside));
    json_object_set_new(o, "deleted", json_integer((json_int_t)res->deleted));
    json_object_set_new(o, "deleted_bytes", json_integer((json_int_t)res->deleted_bytes));
    json_object_set_new(o, "delete_failed", json_integer((json_int_t)res->delete_failed));
    json_object_set_new(o, "deletion_skipped", json_boolean(res->deletion_skipped));
    json_object_set_new(o, "problems", json_incref(res->problems));
    return o;
}
