/* The typed agent client (ferry/agent_ops.h): each operation of docs/agent.md as a C function.
 * Requests are packed here, answers decoded here once into structs whose strings point into the
 * answer they keep; many-part forms fall back to one request per item for an agent of API 1. */
#include "agent_client/client_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/log.h"

/* ---- common --------------------------------------------------------------------------------- */

/* Runs op with the request req (taken over; NULL with get for a GET, NULL otherwise means it
 * could not be built). On success *resp is the answer (caller decrefs); on failure NULL and the
 * message is prefixed with the client's name when it has one. */
static int call(ferry_agent_client *c, const char *op, bool get, json_t *req, json_t **resp,
                ferry_err *err)
{
    *resp = NULL;
    int rc;
    if (!get && !req) {
        c->last_status = 0;
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    } else {
        rc = ferry_agent_call(c, op, req, resp, NULL, err);
    }
    json_decref(req);
    if (rc) {
        json_decref(*resp);
        *resp = NULL;
        if (c->name[0])
            ferry_err_prefix(err, "agent of %s (%s): ", c->name, op);
    }
    return rc;
}

/* Whether a failed many-part request was refused by an agent that does not know the form. */
static bool old_form(ferry_agent_client *c, int rc)
{
    return rc == FERRY_EINVAL && c->last_status == 400;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static uint64_t u64(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* An integer field, -1 when it is missing, not an integer or negative. */
static int64_t i64_or(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
}

static json_t *str_array(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(v[i] ? v[i] : ""))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* {"database": db, "table": table} plus, when value is set, key: value (taken over). NULL when
 * out of memory (value is then released). */
static json_t *table_req(const char *db, const char *table, const char *key, json_t *value)
{
    json_t *o = json_pack("{s:s, s:s}", "database", db ? db : "", "table", table ? table : "");
    if (!key)
        return o;
    if (!o) {
        json_decref(value);
        return NULL;
    }
    if (json_object_set_new(o, key, value)) { /* takes value, also on failure */
        json_decref(o);
        return NULL;
    }
    return o;
}

static int nomem(ferry_err *err)
{
    return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* ---- status --------------------------------------------------------------------------------- */

void ferry_agent_status_info_free(ferry_agent_status_info *s)
{
    if (!s)
        return;
    free(s->disks);
    json_decref(s->raw);
    memset(s, 0, sizeof *s);
}

int ferry_agent_status(ferry_agent_client *c, ferry_agent_status_info *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *r = NULL;
    int rc = call(c, "status", true, NULL, &r, err);
    if (rc)
        return rc;
    out->raw = r;
    json_t *api = json_object_get(r, "api"), *pf = json_object_get(r, "pointer_format");
    out->api = json_is_integer(api) ? (int)json_integer_value(api) : 1;
    out->clickhouse_version = str(r, "clickhouse_version");
    out->data_path = str(r, "data_path");
    out->pointer_format = json_is_integer(pf) ? (int)json_integer_value(pf) : -1;
    out->pointer_format_error = str(r, "pointer_format_error");
    out->object_store = str(r, "object_store");
    json_t *disks = json_object_get(r, "disks"), *d;
    size_t i;
    if (!(out->disks = calloc(json_array_size(disks) + 1, sizeof *out->disks))) {
        ferry_agent_status_info_free(out);
        return nomem(err);
    }
    json_array_foreach(disks, i, d)
    {
        if (!json_is_object(d))
            continue;
        ferry_agent_disk *k = &out->disks[out->n_disks++];
        k->name = str(d, "name");
        k->path = str(d, "path");
        k->remote = json_is_true(json_object_get(d, "remote"));
        k->has_bytes = json_is_integer(json_object_get(d, "free_bytes"));
        k->free_bytes = u64(d, "free_bytes");
        k->total_bytes = u64(d, "total_bytes");
        int64_t fi = i64_or(d, "free_inodes");
        k->has_inodes = fi >= 0;
        k->free_inodes = fi >= 0 ? (uint64_t)fi : 0;
    }
    return FERRY_OK;
}

/* ---- parts ---------------------------------------------------------------------------------- */

void ferry_agent_part_list_free(ferry_agent_part_list *l)
{
    if (!l)
        return;
    free(l->data_paths);
    free(l->parts);
    free(l->detached);
    json_decref(l->raw);
    memset(l, 0, sizeof *l);
}

int ferry_agent_parts(ferry_agent_client *c, const char *db, const char *table, const char *pid,
                      ferry_agent_part_list *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *r = NULL;
    int rc = call(c, "parts", false,
                  table_req(db, table, pid ? "partition_id" : NULL, pid ? json_string(pid) : NULL),
                  &r, err);
    if (rc)
        return rc;
    out->raw = r;
    json_t *parts = json_object_get(r, "parts"), *det = json_object_get(r, "detached"), *p;
    json_t *paths = json_object_get(r, "data_paths");
    size_t i;
    out->data_paths = calloc(json_array_size(paths) + 1, sizeof *out->data_paths);
    out->parts = calloc(json_array_size(parts) + 1, sizeof *out->parts);
    out->detached = calloc(json_array_size(det) + 1, sizeof *out->detached);
    if (!out->data_paths || !out->parts || !out->detached) {
        ferry_agent_part_list_free(out);
        return nomem(err);
    }
    json_array_foreach(paths, i, p)
    {
        if (!json_is_object(p))
            continue;
        ferry_agent_data_path *d = &out->data_paths[out->n_data_paths++];
        d->disk = str(p, "disk");
        d->path = str(p, "path");
        d->remote = json_is_true(json_object_get(p, "remote"));
    }
    json_array_foreach(parts, i, p)
    {
        if (!str(p, "name"))
            continue;
        ferry_agent_part *a = &out->parts[out->n_parts++];
        a->name = str(p, "name");
        a->partition_id = str(p, "partition_id");
        a->partition = str(p, "partition");
        a->disk = str(p, "disk");
        a->path = str(p, "path");
        a->hash_of_all_files = str(p, "hash_of_all_files");
        a->rows = u64(p, "rows");
        a->bytes_on_disk = u64(p, "bytes_on_disk");
    }
    json_array_foreach(det, i, p)
    {
        if (!str(p, "name"))
            continue;
        ferry_agent_detached *d = &out->detached[out->n_detached++];
        d->name = str(p, "name");
        d->partition_id = str(p, "partition_id");
        d->partition = str(p, "partition");
        d->disk = str(p, "disk");
        d->path = str(p, "path");
        d->reason = str(p, "reason");
        d->bytes_on_disk = u64(p, "bytes_on_disk");
        d->has_rows = json_is_integer(json_object_get(p, "rows"));
        d->rows = u64(p, "rows");
    }
    return FERRY_OK;
}

bool ferry_agent_part_list_remote(const ferry_agent_part_list *l, const char *disk)
{
    for (size_t i = 0; disk && i < l->n_data_paths; i++)
        if (l->data_paths[i].disk && !strcmp(l->data_paths[i].disk, disk))
            return l->data_paths[i].remote;
    return false;
}

/* ---- freeze, frozen ------------------------------------------------------------------------- */

void ferry_agent_frozen_free(ferry_agent_frozen *f)
{
    if (!f)
        return;
    free(f->parts);
    free(f->items);
    json_decref(f->raw);
    memset(f, 0, sizeof *f);
}

/* Adds the parts of one freeze or frozen answer (taken over) to f. */
static int frozen_add(ferry_agent_frozen *f, json_t *answer, ferry_err *err)
{
    if (!f->raw && !(f->raw = json_array())) {
        json_decref(answer);
        return nomem(err);
    }
    if (json_array_append_new(f->raw, answer))
        return nomem(err);
    json_t *parts = json_object_get(answer, "parts"), *p;
    size_t n = json_array_size(parts), i;
    ferry_agent_frozen_part *np = realloc(f->parts, (f->n + n + 1) * sizeof *np);
    if (!np)
        return nomem(err);
    f->parts = np;
    f->existing = f->existing || json_is_true(json_object_get(answer, "existing"));
    json_array_foreach(parts, i, p)
    {
        if (!str(p, "name"))
            continue;
        ferry_agent_frozen_part *a = &f->parts[f->n++];
        memset(a, 0, sizeof *a);
        a->name = str(p, "name");
        a->disk = str(p, "disk");
        a->kind = str(p, "kind");
        a->path = str(p, "path");
        a->freeze = str(p, "freeze") ? str(p, "freeze") : str(answer, "name");
        a->partition_id = str(p, "partition_id") ? str(p, "partition_id")
                                                 : str(answer, "partition_id");
        a->pointer = a->kind && !strcmp(a->kind, "pointer");
        a->bytes = u64(p, "bytes");
        a->files = json_object_get(p, "files");
    }
    return FERRY_OK;
}

static json_t *freeze_one_req(const char *db, const char *table, const char *pid,
                              const char *name)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "database", db, "table", table, "partition_id", pid,
                     "name", name);
}

int ferry_agent_freeze(ferry_agent_client *c, const char *db, const char *table,
                       const char *pid, const char *name, ferry_agent_frozen *out,
                       ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *r = NULL;
    int rc = call(c, "freeze", false, freeze_one_req(db, table, pid, name), &r, err);
    if (!rc && (rc = frozen_add(out, r, err)))
        ferry_agent_frozen_free(out);
    return rc;
}

int ferry_agent_freeze_ids(ferry_agent_client *c, const char *db, const char *table,
                           const char *name, const char *const *pids, size_t n,
                           ferry_agent_frozen *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *r = NULL;
    int rc = FERRY_OK;
    if (!n)
        return FERRY_OK;
    if (!(c->one_at_a_time & AGENT_ONE_FREEZE)) {
        json_t *req = table_req(db, table, "partition_ids", str_array(pids, n));
        if (req && json_object_set_new(req, "name", json_string(name))) {
            json_decref(req);
            req = NULL;
        }
        rc = call(c, "freeze", false, req, &r, err);
        if (!rc) {
            if ((rc = frozen_add(out, r, err)))
                ferry_agent_frozen_free(out);
            return rc;
        }
        if (!old_form(c, rc))
            return rc;
        c->one_at_a_time |= AGENT_ONE_FREEZE;
        FLOG_INFO("msg=\"agent freezes one partition per request (API 1)\" agent=%s",
                  c->name[0] ? c->name : "-");
        rc = FERRY_OK;
    }
    for (size_t i = 0; !rc && i < n; i++) {
        rc = call(c, "freeze", false, freeze_one_req(db, table, pids[i], name), &r, err);
        if (rc == FERRY_ENOTFOUND && c->last_status == 404) {
            rc = FERRY_OK; /* the partition went away (nothing to freeze) */
            continue;
        }
        if (!rc)
            rc = frozen_add(out, r, err);
    }
    if (rc)
        ferry_agent_frozen_free(out);
    return rc;
}

/* Notes in f that item i failed alone (API 1) with rc and its request's error e; the message is
 * kept in f->raw. */
static int freeze_item_failed(ferry_agent_client *c, ferry_agent_frozen *f, size_t i, int rc,
                              const ferry_err *e, ferry_err *err)
{
    json_t *msg = json_string(e->msg);
    if (!msg || ((!f->raw && !(f->raw = json_array())) || json_array_append(f->raw, msg))) {
        json_decref(msg);
        return nomem(err);
    }
    f->items[i] = (ferry_agent_item){.code = rc, .status = c->last_status,
                                     .error = json_string_value(msg), .alone = true};
    json_decref(msg); /* f->raw holds it */
    return FERRY_OK;
}

int ferry_agent_freeze_each(ferry_agent_client *c, const char *db, const char *table,
                            const ferry_agent_freeze_item *items, size_t n,
                            ferry_agent_frozen *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *r = NULL;
    int rc = FERRY_OK;
    if (!n)
        return FERRY_OK;
    if (!(out->items = calloc(n, sizeof *out->items)))
        return nomem(err);
    out->n_items = n;
    for (size_t i = 0; i < n; i++)
        out->items[i].status = 200;
    if (!(c->one_at_a_time & AGENT_ONE_FREEZE)) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < n; i++)
            if (json_array_append_new(list, json_pack("{s:s, s:s}", "partition_id",
                                                      items[i].pid, "name", items[i].name))) {
                json_decref(list);
                list = NULL;
            }
        rc = call(c, "freeze", false, list ? table_req(db, table, "partitions", list) : NULL,
                  &r, err);
        if (!rc) {
            if ((rc = frozen_add(out, r, err)))
                ferry_agent_frozen_free(out);
            return rc;
        }
        if (!old_form(c, rc)) {
            ferry_agent_frozen_free(out);
            return rc;
        }
        c->one_at_a_time |= AGENT_ONE_FREEZE;
        FLOG_INFO("msg=\"agent freezes one partition per request (API 1)\" agent=%s",
                  c->name[0] ? c->name : "-");
        ferry_err_clear(err);
        rc = FERRY_OK;
    }
    for (size_t i = 0; !rc && i < n; i++) {
        ferry_err e = {0};
        int irc = call(c, "freeze", false,
                       freeze_one_req(db, table, items[i].pid, items[i].name), &r, &e);
        if (irc == FERRY_ENOTFOUND || irc == FERRY_EINVAL) {
            rc = freeze_item_failed(c, out, i, irc, &e, err); /* this partition alone */
        } else if (irc) {
            *err = e; /* the agent or ClickHouse: every partition alike */
            rc = irc;
        } else {
            rc = frozen_add(out, r, err);
        }
    }
    if (rc)
        ferry_agent_frozen_free(out);
    return rc;
}

int ferry_agent_frozen_list(ferry_agent_client *c, const char *db, const char *table,
                            const char *name, const char *pid, ferry_agent_frozen *out,
                            ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *r = NULL, *req = table_req(db, table, "name", json_string(name ? name : ""));
    if (req && pid && json_object_set_new(req, "partition_id", json_string(pid))) {
        json_decref(req);
        req = NULL;
    }
    int rc = call(c, "frozen", false, req, &r, err);
    if (!rc && (rc = frozen_add(out, r, err)))
        ferry_agent_frozen_free(out);
    return rc;
}

size_t ferry_agent_frozen_of(const ferry_agent_frozen *f, const char *pid,
                             const ferry_agent_frozen_part **out, size_t max)
{
    size_t n = 0, pl = strlen(pid);
    for (size_t i = 0; i < f->n && n < max; i++)
        if (!strncmp(f->parts[i].name, pid, pl) && f->parts[i].name[pl] == '_')
            out[n++] = &f->parts[i];
    return n;
}

/* ---- send ----------------------------------------------------------------------------------- */

void ferry_agent_sent_free(ferry_agent_sent *s)
{
    if (!s)
        return;
    json_decref(s->raw);
    memset(s, 0, sizeof *s);
}

int ferry_agent_send(ferry_agent_client *c, const ferry_agent_send_req *q, ferry_agent_sent *out,
                     ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *target = json_pack("{s:s, s:s, s:s, s:s}", "url", q->target_url ? q->target_url : "",
                               "token", q->target_token ? q->target_token : "", "database",
                               q->target_db ? q->target_db : "", "table",
                               q->target_table ? q->target_table : "");
    if (target && q->target_disk && json_object_set_new(target, "disk",
                                                        json_string(q->target_disk))) {
        json_decref(target);
        target = NULL;
    }
    json_t *req = !target ? NULL
                  : q->n_parts ? json_pack("{s:s, s:s, s:b, s:o, s:o}", "database", q->db,
                                           "table", q->table, "live", 1, "parts",
                                           str_array(q->parts, q->n_parts), "target", target)
                  : q->live ? json_pack("{s:s, s:s, s:b, s:s, s:o}", "database", q->db, "table",
                                        q->table, "live", 1, "part", q->part, "target", target)
                            : json_pack("{s:s, s:s, s:s, s:s, s:o}", "database", q->db, "table",
                                        q->table, "freeze", q->freeze, "part", q->part, "target",
                                        target);
    json_t *r = NULL;
    int rc = call(c, "send", false, req, &r, err);
    if (rc)
        return rc;
    out->raw = r;
    out->kind = str(r, "kind");
    out->pointer = out->kind && !strcmp(out->kind, "pointer");
    out->bytes_sent = u64(r, "bytes_sent");
    out->target = json_object_get(r, "target");
    out->gone = json_object_get(r, "gone");
    return FERRY_OK;
}

/* ---- removals ------------------------------------------------------------------------------- */

static json_t *remove_detached_req(const char *db, const char *table, const char *key,
                                   json_t *value, const char *disk)
{
    json_t *req = table_req(db, table, key, value);
    if (req && disk && json_object_set_new(req, "disk", json_string(disk))) {
        json_decref(req);
        return NULL;
    }
    return req;
}

int ferry_agent_remove_detached(ferry_agent_client *c, const char *db, const char *table,
                                const char *part, const char *disk, bool *existed,
                                ferry_err *err)
{
    json_t *r = NULL;
    int rc = call(c, "remove-detached", false,
                  remove_detached_req(db, table, "part", json_string(part ? part : ""), disk), &r,
                  err);
    if (existed)
        *existed = !rc && json_is_true(json_object_get(r, "existed"));
    json_decref(r);
    return rc;
}

int ferry_agent_remove_detached_n(ferry_agent_client *c, const char *db, const char *table,
                                  const char *const *parts, size_t n, const char *disk,
                                  ferry_err *err)
{
    json_t *r = NULL;
    int rc = FERRY_OK;
    if (n > 1 && !(c->one_at_a_time & AGENT_ONE_REMOVE_DETACHED)) {
        rc = call(c, "remove-detached", false,
                  remove_detached_req(db, table, "parts", str_array(parts, n), disk), &r, err);
        json_decref(r);
        if (!rc || !old_form(c, rc))
            return rc;
        c->one_at_a_time |= AGENT_ONE_REMOVE_DETACHED;
        FLOG_INFO("msg=\"agent removes one detached part per request (API 1)\" agent=%s",
                  c->name[0] ? c->name : "-");
        rc = FERRY_OK;
    }
    for (size_t i = 0; !rc && i < n; i++)
        rc = ferry_agent_remove_detached(c, db, table, parts[i], disk, NULL, err);
    return rc;
}

int ferry_agent_remove_freeze(ferry_agent_client *c, const char *name, ferry_err *err)
{
    json_t *r = NULL;
    int rc = call(c, "remove-freeze", false, json_pack("{s:s}", "name", name ? name : ""), &r,
                  err);
    json_decref(r);
    return rc;
}

int ferry_agent_remove_freeze_n(ferry_agent_client *c, const char *const *names, size_t n,
                                ferry_err *err)
{
    json_t *r = NULL;
    int rc = FERRY_OK;
    if (n > 1 && !(c->one_at_a_time & AGENT_ONE_REMOVE_FREEZE)) {
        json_t *list = str_array(names, n);
        rc = call(c, "remove-freeze", false, list ? json_pack("{s:o}", "names", list) : NULL, &r,
                  err);
        json_decref(r);
        if (!rc || !old_form(c, rc))
            return rc;
        c->one_at_a_time |= AGENT_ONE_REMOVE_FREEZE;
        FLOG_INFO("msg=\"agent removes one freeze per request (API 1)\" agent=%s",
                  c->name[0] ? c->name : "-");
        rc = FERRY_OK;
    }
    for (size_t i = 0; !rc && i < n; i++)
        rc = ferry_agent_remove_freeze(c, names[i], err);
    return rc;
}

/* ---- upload, write-pointers ---------------------------------------------------------------- */

/* The answers of a many-part operation, one per requested part in request order: the "results"
 * of one many-part answer, or (API 1) one answer per part, where a part whose request failed
 * gets {part, error, status, rc} of its own ("rc", which no agent answers, marks the error as
 * its request's whole message: ferry_agent_item.alone). *raw (an array) keeps them; the request
 * as a whole failing is the only error. */
static int per_part(ferry_agent_client *c, const char *op, unsigned one_bit, json_t *many,
                    json_t *(*single)(const void *parts, size_t i, const void *arg),
                    const void *parts, size_t n, const void *arg, const char *const *names,
                    json_t **raw, ferry_err *err)
{
    json_t *r = NULL;
    int rc;
    *raw = NULL;
    if (!(c->one_at_a_time & one_bit)) {
        rc = call(c, op, false, many, &r, err);
        if (!rc) {
            json_t *results = json_object_get(r, "results");
            *raw = json_is_array(results) ? json_incref(results) : json_array();
            json_decref(r);
            return *raw ? FERRY_OK : nomem(err);
        }
        if (!old_form(c, rc))
            return rc;
        c->one_at_a_time |= one_bit;
        FLOG_INFO("msg=\"agent takes one part per request (API 1)\" agent=%s op=%s",
                  c->name[0] ? c->name : "-", op);
    } else {
        json_decref(many);
    }
    if (!(*raw = json_array()))
        return nomem(err);
    for (size_t i = 0; i < n; i++) {
        ferry_err perr = {0};
        rc = call(c, op, false, single(parts, i, arg), &r, &perr);
        if (rc)
            r = json_pack("{s:s, s:s, s:I, s:i}", "part", names[i], "error", perr.msg, "status",
                          (json_int_t)c->last_status, "rc", rc);
        if (!r || json_array_append_new(*raw, r)) {
            json_decref(*raw);
            *raw = NULL;
            return nomem(err);
        }
    }
    return FERRY_OK;
}

/* The outcome of result i of raw (NULL when there is none). */
static const json_t *item_of(const json_t *raw, size_t i, ferry_agent_item *it)
{
    const json_t *r = json_array_get(raw, i);
    memset(it, 0, sizeof *it);
    if (!json_is_object(r)) {
        it->code = FERRY_EREMOTE;
        it->error = "the agent's answer has no result for this part";
        return NULL;
    }
    if (!str(r, "error")) {
        it->status = 200;
        return r;
    }
    json_t *rc = json_object_get(r, "rc"); /* only per_part's own note of a failed request */
    it->status = (long)u64(r, "status");
    it->error = str(r, "error");
    it->alone = json_is_integer(rc);
    it->code = it->alone ? (int)json_integer_value(rc) : ferry_agent_code_for_status(it->status);
    return r;
}

static json_t *upload_one(const void *parts, size_t i, const void *arg)
{
    const ferry_agent_part_ref *p = parts;
    const char *const *t = arg;
    return json_pack("{s:s, s:s, s:s, s:s}", "database", t[0], "table", t[1], "freeze",
                     p[i].freeze, "part", p[i].part);
}

void ferry_agent_upload_list_free(ferry_agent_upload_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; l->parts && i < l->n; i++)
        free(l->parts[i].objects);
    free(l->parts);
    json_decref(l->raw);
    memset(l, 0, sizeof *l);
}

int ferry_agent_upload(ferry_agent_client *c, const char *db, const char *table,
                       const ferry_agent_part_ref *parts, size_t n, ferry_agent_upload_list *out,
                       ferry_err *err)
{
    memset(out, 0, sizeof *out);
    const char **names = calloc(n + 1, sizeof *names);
    json_t *list = json_array();
    int rc = names && list ? FERRY_OK : nomem(err);
    for (size_t i = 0; !rc && i < n; i++) {
        names[i] = parts[i].part;
        if (json_array_append_new(list, json_pack("{s:s, s:s}", "freeze", parts[i].freeze,
                                                  "part", parts[i].part)))
            rc = nomem(err);
    }
    const char *t[2] = {db, table};
    if (!rc)
        rc = per_part(c, "upload", AGENT_ONE_UPLOAD, table_req(db, table, "parts", list),
                      upload_one, parts, n, t, names, &out->raw, err);
    else
        json_decref(list);
    free(names);
    if (rc)
        return rc;
    if (!(out->parts = calloc(n + 1, sizeof *out->parts))) {
        ferry_agent_upload_list_free(out);
        return nomem(err);
    }
    out->n = n;
    for (size_t i = 0; i < n; i++) {
        ferry_agent_uploaded *u = &out->parts[i];
        const json_t *r = item_of(out->raw, i, &u->item);
        u->part = parts[i].part;
        u->freeze = parts[i].freeze;
        if (u->item.code)
            continue;
        json_t *objs = json_object_get(r, "objects"), *o;
        u->partition_id = str(r, "partition_id");
        u->objects_json = objs;
        u->answer = r;
        u->check_ms = json_number_value(json_object_get(r, "check_ms"));
        u->verified = json_is_true(json_object_get(r, "verified"));
        u->has_rows = json_is_integer(json_object_get(r, "rows"));
        u->rows = u64(r, "rows");
        u->uploaded = u64(r, "uploaded");
        u->skipped = u64(r, "skipped");
        u->bytes_uploaded = u64(r, "bytes_uploaded");
        if (!(u->objects = calloc(json_array_size(objs) + 1, sizeof *u->objects))) {
            ferry_agent_upload_list_free(out);
            return nomem(err);
        }
        size_t j;
        json_array_foreach(objs, j, o)
        {
            ferry_agent_object *b = &u->objects[u->n_objects++];
            b->file = str(o, "file");
            b->key = str(o, "key");
            b->clickhouse_key = str(o, "clickhouse_key");
            b->size = u64(o, "size");
            b->uploaded = json_is_true(json_object_get(o, "uploaded"));
            b->file_hash = str(o, "file_hash");
            b->sha256 = str(o, "sha256");
        }
    }
    return FERRY_OK;
}

typedef struct wp_arg {
    const char *db, *table, *disk;
} wp_arg;

static json_t *wp_one(const void *parts, size_t i, const void *arg)
{
    const ferry_agent_pointer_part *p = parts;
    const wp_arg *a = arg;
    json_t *o = json_pack("{s:s, s:s, s:s, s:O}", "database", a->db, "table", a->table, "part",
                          p[i].part, "objects", (json_t *)p[i].objects);
    if (o && a->disk && json_object_set_new(o, "disk", json_string(a->disk))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void ferry_agent_written_list_free(ferry_agent_written_list *l)
{
    if (!l)
        return;
    free(l->parts);
    json_decref(l->raw);
    memset(l, 0, sizeof *l);
}

int ferry_agent_write_pointers(ferry_agent_client *c, const char *db, const char *table,
                               const char *disk, const ferry_agent_pointer_part *parts, size_t n,
                               ferry_agent_written_list *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    const char **names = calloc(n + 1, sizeof *names);
    json_t *list = json_array();
    int rc = names && list ? FERRY_OK : nomem(err);
    for (size_t i = 0; !rc && i < n; i++) {
        names[i] = parts[i].part;
        if (!parts[i].objects ||
            json_array_append_new(list, json_pack("{s:s, s:O}", "part", parts[i].part,
                                                  "objects", (json_t *)parts[i].objects)))
            rc = parts[i].objects ? nomem(err)
                                  : ferry_err_set(err, FERRY_EINVAL, "part %s: no objects to "
                                                  "point to", parts[i].part);
    }
    json_t *many = rc ? NULL : remove_detached_req(db, table, "parts", list, disk);
    if (rc)
        json_decref(list);
    wp_arg a = {db, table, disk};
    if (!rc)
        rc = per_part(c, "write-pointers", AGENT_ONE_WRITE_POINTERS, many, wp_one, parts, n, &a,
                      names, &out->raw, err);
    free(names);
    if (rc)
        return rc;
    if (!(out->parts = calloc(n + 1, sizeof *out->parts))) {
        ferry_agent_written_list_free(out);
        return nomem(err);
    }
    out->n = n;
    for (size_t i = 0; i < n; i++) {
        ferry_agent_written *w = &out->parts[i];
        const json_t *r = item_of(out->raw, i, &w->item);
        w->part = parts[i].part;
        if (w->item.code)
            continue;
        w->disk = str(r, "disk");
        w->path = str(r, "path");
        w->existing = json_is_true(json_object_get(r, "existing"));
    }
    return FERRY_OK;
}

/* ---- place-parts ---------------------------------------------------------------------------- */

int ferry_agent_place_parts(ferry_agent_client *c, const char *db, const char *table,
                            const char *from_table, const char *const *data_paths,
                            size_t n_paths, const ferry_agent_place *parts, size_t n,
                            size_t *placed, size_t *already, ferry_err *err)
{
    json_t *req = table_req(db, table, "data_paths", str_array(data_paths, n_paths));
    json_t *list = req ? json_array() : NULL;
    for (size_t i = 0; list && i < n; i++)
        if (json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "disk", parts[i].disk,
                                                  "name", parts[i].name, "to", parts[i].to))) {
            json_decref(list);
            list = NULL;
        }
    if (req && (json_object_set_new(req, "parts", list) ||
                (from_table && json_object_set_new(req, "from_table", json_string(from_table))))) {
        json_decref(req);
        req = NULL;
    }
    json_t *r = NULL;
    int rc = call(c, "place-parts", false, req, &r, err);
    if (placed)
        *placed = rc ? 0 : json_array_size(json_object_get(r, "placed"));
    if (already)
        *already = rc ? 0 : (size_t)u64(r, "already");
    json_decref(r);
    return rc;
}

/* ---- pointers ------------------------------------------------------------------------------- */

void ferry_agent_pointer_list_free(ferry_agent_pointer_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; l->files && i < l->n_files; i++)
        free(l->files[i].objects);
    free(l->files);
    free(l->invalid);
    json_decref(l->raw);
    memset(l, 0, sizeof *l);
}

int ferry_agent_pointers(ferry_agent_client *c, const char *disk, const char *under,
                         ferry_agent_pointer_list *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *req = json_object(), *r = NULL;
    if (req && ((disk && json_object_set_new(req, "disk", json_string(disk))) ||
                (under && json_object_set_new(req, "under", json_string(under))))) {
        json_decref(req);
        req = NULL;
    }
    int rc = call(c, "pointers", false, req, &r, err);
    if (rc)
        return rc;
    out->raw = r;
    json_t *files = json_object_get(r, "files"), *invalid = json_object_get(r, "invalid"), *f;
    if (!json_is_array(files) || !json_is_array(invalid)) {
        ferry_agent_pointer_list_free(out);
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "the agent's answer to 'pointers' has no "
                             "file lists (an agent of another version?)");
    }
    out->files = calloc(json_array_size(files) + 1, sizeof *out->files);
    out->invalid = calloc(json_array_size(invalid) + 1, sizeof *out->invalid);
    if (!out->files || !out->invalid) {
        ferry_agent_pointer_list_free(out);
        return nomem(err);
    }
    size_t i;
    json_array_foreach(files, i, f)
    {
        ferry_agent_pointer_file *a = &out->files[out->n_files++];
        json_t *objects = json_object_get(f, "objects"), *o;
        a->disk = str(f, "disk");
        a->path = str(f, "path");
        a->outdated = json_is_true(json_object_get(f, "outdated"));
        a->read_only = json_is_true(json_object_get(f, "read_only"));
        a->version = i64_or(f, "version");
        a->ref_count = i64_or(f, "ref_count");
        a->links = i64_or(f, "links");
        a->size = i64_or(f, "size");
        a->has_objects = json_is_array(objects);
        if (!a->has_objects)
            continue;
        if (!(a->objects = calloc(json_array_size(objects) + 1, sizeof *a->objects))) {
            ferry_agent_pointer_list_free(out);
            return nomem(err);
        }
        size_t j;
        json_array_foreach(objects, j, o)
        {
            ferry_agent_pointer_object *b = &a->objects[a->n_objects++];
            b->key = str(o, "key");
            b->store_key = str(o, "store_key");
            b->size = i64_or(o, "size");
        }
    }
    json_array_foreach(invalid, i, f)
    {
        out->invalid[out->n_invalid].path = str(f, "path");
        out->invalid[out->n_invalid++].error = str(f, "error");
    }
    return FERRY_OK;
}

/* ---- pin ------------------------------------------------------------------------------------ */

void ferry_agent_pinned_free(ferry_agent_pinned *p)
{
    free(p->parts);
    json_decref(p->raw);
    memset(p, 0, sizeof *p);
}

int ferry_agent_pin(ferry_agent_client *c, const char *disk, const char *under,
                    const char *const *parts, size_t n, ferry_agent_pinned *out, ferry_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *list = str_array(parts, n), *r = NULL, *p;
    int rc = call(c, "pin", false, list ? json_pack("{s:s, s:s, s:o}", "disk", disk, "under",
                                                    under, "parts", list) : NULL, &r, err);
    if (rc)
        return rc;
    out->raw = r;
    json_t *res = json_object_get(r, "parts");
    if (!json_is_array(res) || json_array_size(res) != n) {
        ferry_agent_pinned_free(out);
        return ferry_err_set(err, FERRY_EUNSUPPORTED, "the agent's answer to 'pin' does not "
                             "list one result per part (an agent of another version?)");
    }
    if (!(out->parts = calloc(n + 1, sizeof *out->parts))) {
        ferry_agent_pinned_free(out);
        return nomem(err);
    }
    size_t i;
    json_array_foreach(res, i, p)
    {
        out->parts[i].name = str(p, "name");
        out->parts[i].held = json_is_true(json_object_get(p, "held"));
        out->parts[i].error = str(p, "error");
    }
    out->n_parts = n;
    out->raised = i64_or(r, "raised");
    return FERRY_OK;
}
