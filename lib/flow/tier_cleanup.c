/* Tiering's CLEANUP step for a wave of jobs, the catalog records it commits (one batch for the
 * wave), emptying the staging partitions, and the rollback of jobs that failed before their swap
 * (tier.c has the states and invariants I2-I4, I6). */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/checksums.h"
#include "flow/part_records.h"
#include "ferry/log.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"
#include "ferry/testknob.h"

/* ---- the staging partitions -------------------------------------------------------------------- */

/* " IN ('p1','p2',...)" of the jobs' partition ids into b. */
static void pid_list(ferry_buf *b, tier_job **js, size_t n)
{
    ferry_buf_puts(b, " IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_putc(b, ',');
        ferry_sql_quote(js[i]->pid, b);
    }
    ferry_buf_putc(b, ')');
}

/* The first column of each row of a statement's answer, as a JSON array of strings. */
static int first_column(tier_server *srv, const char *sql, json_t **out, ferry_err *err)
{
    ferry_ch_rows rows = {0};
    *out = NULL;
    int rc = mv_sql(&srv->conn, sql, &rows, err);
    if (!rc && !(*out = json_array()))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t r = 0; !rc && r < rows.n_rows; r++)
        if (json_array_append_new(*out, json_string(ferry_ch_rows_get(&rows, r, 0))))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    ferry_ch_rows_free(&rows);
    return rc;
}

int tier_clean_staging(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    (void)ctx;
    ferry_buf sql = FERRY_BUF_INIT;
    json_t *held = NULL, *detached = NULL;
    int rc = FERRY_OK;
    if (n == 0)
        return FERRY_OK;
    if (!w->staging_exists) {
        char policy[FERRY_NAME_MAX];
        bool remote = false;
        rc = tier_table_policy(w->srv, w->db, w->staging, &w->staging_exists, policy,
                               sizeof policy, &remote, err);
        if (rc || !w->staging_exists)
            goto out;
    }
    /* every active part, empty ones included: the partition must hold nothing afterwards */
    ferry_buf_puts(&sql, "SELECT DISTINCT partition_id FROM system.parts WHERE active AND "
                         "database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->staging, &sql);
    ferry_buf_puts(&sql, " AND partition_id");
    pid_list(&sql, js, n);
    if ((rc = first_column(w->srv, ferry_buf_cstr(&sql), &held, err)))
        goto out;
    if (json_array_size(held)) {
        size_t i;
        json_t *p;
        ferry_buf_reset(&sql);
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(w->db, w->staging, &sql);
        json_array_foreach(held, i, p) {
            ferry_buf_puts(&sql, i ? ", DETACH PARTITION ID " : " DETACH PARTITION ID ");
            ferry_sql_quote(json_string_value(p), &sql);
        }
        if ((rc = tier_sql(w->srv, ferry_buf_cstr(&sql), NULL, err)))
            goto out;
    }
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "SELECT name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->staging, &sql);
    ferry_buf_puts(&sql, " AND partition_id");
    pid_list(&sql, js, n);
    if (!(rc = first_column(w->srv, ferry_buf_cstr(&sql), &detached, err)))
        rc = tier_agent_remove_detached(w, w->staging, detached, err);
out:
    json_decref(held);
    json_decref(detached);
    ferry_buf_free(&sql);
    return rc;
}

/* Whether the staging partitions of the jobs may be emptied by REPLACE PARTITION from the empty
 * twin rather than DETACH, and which: ClickHouse then removes the replaced parts itself (after
 * old_parts_lifetime), one hard link at a time, as it removes the table's replaced hot parts and
 * as DETACH removes a part it has cloned into detached/. That removal lowers each pointer file's
 * ref_count and deletes objects only at 0: safe for exactly the pointer parts ferry wrote
 * (ref_count 1, and 2 once the swap hard-linked them into the table), not for a part ClickHouse
 * wrote itself (a merge in staging: ref_count 0, its own new objects). So a job's partition goes
 * this way only when its fp is a part digest and staging's active parts there are exactly the
 * parts it describes: every part with rows on the object disk with the journaled digest (merges
 * in staging are stopped since POINTERS), any empty covering part on a local disk. And the twin
 * must exist with staging's storage policy and hold no part (REPLACE would copy its parts into
 * staging). ok[i] is set for the jobs that qualify; the others are emptied by DETACH. */
static int replaceable(tier_wave *w, tier_job **js, size_t n, bool *ok, size_t *nok,
                       ferry_err *err)
{
    char pol[FERRY_NAME_MAX], epol[FERRY_NAME_MAX];
    bool exists = false, eexists = false, remote = false;
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    *nok = 0;
    memset(ok, 0, n * sizeof *ok);
    int rc = w->empty[0] ? tier_table_policy(w->srv, w->db, w->staging, &exists, pol, sizeof pol,
                                             &remote, err)
                         : FERRY_OK;
    if (!rc && exists)
        rc = tier_table_policy(w->srv, w->db, w->empty, &eexists, epol, sizeof epol, &remote, err);
    if (rc || !exists || !eexists || strcmp(pol, epol))
        goto out;
    ferry_buf_puts(&sql, "SELECT count() FROM system.parts WHERE database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->empty, &sql);
    if ((rc = mv_sql(&w->srv->conn, ferry_buf_cstr(&sql), &rows, err)))
        goto out;
    if (rows.n_rows != 1 || strcmp(ferry_ch_rows_get(&rows, 0, 0), "0")) {
        FLOG_WARN("msg=\"ferry's empty twin table holds parts; staging is emptied by DETACH\" "
                  "server=%s table=%s.%s", w->srv->shard.name, w->db, w->empty);
        goto out;
    }
    ferry_ch_rows_free(&rows);
    ferry_buf_reset(&sql);
    /* every active part of the partitions, empty ones included */
    ferry_buf_puts(&sql, "SELECT partition_id, hash_of_all_files, rows, bytes_on_disk, disk_name "
                         "IN (SELECT name FROM system.disks WHERE is_remote) FROM system.parts "
                         "WHERE active AND database = ");
    ferry_sql_quote(w->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(w->staging, &sql);
    ferry_buf_puts(&sql, " AND partition_id");
    pid_list(&sql, js, n);
    if ((rc = mv_sql(&w->srv->conn, ferry_buf_cstr(&sql), &rows, err)))
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (!js[i]->st.fp_by_parts)
            continue;
        ferry_fingerprint got = {0};
        bool fine = true;
        size_t parts = 0;
        for (size_t r = 0; r < rows.n_rows && fine; r++) {
            if (strcmp(ferry_ch_rows_get(&rows, r, 0), js[i]->pid))
                continue;
            uint64_t nrows = 0;
            bool cold = !strcmp(ferry_ch_rows_get(&rows, r, 4), "1");
            ferry_parse_u64(ferry_ch_rows_get(&rows, r, 2), &nrows);
            if (nrows == 0) {
                fine = !cold; /* an empty covering part: local files only */
                continue;
            }
            mv_part p = {.rows = nrows, .cold = cold};
            snprintf(p.hash, sizeof p.hash, "%s", ferry_ch_rows_get(&rows, r, 1));
            const mv_part *pp = &p;
            ferry_fingerprint one;
            tier_parts_digest(&pp, 1, &one);
            got.rows += one.rows;
            got.hash_sum += one.hash_sum;
            got.hash_xor ^= one.hash_xor;
            got.distinct += one.distinct;
            parts++;
            fine = cold;
        }
        char why[256];
        if (fine && parts && ferry_fingerprint_same(&js[i]->st.fp, &got, why, sizeof why)) {
            ok[i] = true;
            (*nok)++;
        }
    }
out:
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

/* CLEANUP's emptying of staging: the partitions that qualify (replaceable) by one REPLACE
 * PARTITION ... FROM the empty twin, the others by DETACH, and every detached leftover removed
 * (tier_clean_staging). */
static int release_staging(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    bool *ok = calloc(n + 1, sizeof *ok);
    size_t nok = 0;
    ferry_buf sql = FERRY_BUF_INIT;
    int rc = ok ? replaceable(w, js, n, ok, &nok, err)
                : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (!rc && nok) {
        ferry_buf_puts(&sql, "ALTER TABLE ");
        ferry_sql_db_table(w->db, w->staging, &sql);
        for (size_t i = 0, k = 0; i < n; i++) {
            if (!ok[i])
                continue;
            ferry_buf_puts(&sql, k++ ? ", REPLACE PARTITION ID " : " REPLACE PARTITION ID ");
            ferry_sql_quote(js[i]->pid, &sql);
            ferry_buf_puts(&sql, " FROM ");
            ferry_sql_db_table(w->db, w->empty, &sql);
        }
        ferry_buf_puts(&sql, " SETTINGS allow_replace_partition_from_empty_source = 1");
        ferry_err e = {0};
        if (tier_sql(w->srv, ferry_buf_cstr(&sql), NULL, &e))
            FLOG_WARN("msg=\"emptying staging from its empty twin failed; DETACH instead\" "
                      "server=%s table=%s.%s err=\"%s\"", w->srv->shard.name, w->db, w->staging,
                      e.msg);
    }
    /* what is left (all of it, when the REPLACE failed) is DETACHed, and detached leftovers go */
    if (!rc)
        rc = tier_clean_staging(ctx, w, js, n, err);
    free(ok);
    ferry_buf_free(&sql);
    return rc;
}

/* ---- catalog records ----------------------------------------------------------------------- */

static int open_store(tier_ctx *ctx, ferry_err *err)
{
    if (ctx->store)
        return FERRY_OK;
    int rc = ferry_objstore_open_from_config(&ctx->cfg, FERRY_ROLE_CLICKHOUSE, &ctx->store, err);
    if (rc)
        ferry_err_prefix(err, "reading part checksums back needs the clickhouse role: ");
    return rc;
}

static void sha256_hex(const char *data, size_t len, char out[65])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)data, len, md);
    for (int b = 0; b < SHA256_DIGEST_LENGTH; b++)
        snprintf(out + 2 * b, 3, "%02x", md[b]);
}

/* The checksum recorded for one object (docs/tiering.md, "Catalog records"): ClickHouse's own
 * file hash for the files checksums.txt lists (count.txt aside), SHA-256 of the object for the
 * others. The agent reports both as it uploads (file_hash, checked against checksums.txt, and
 * sha256 of small files); what it did not report (an agent of API version 1) is read back from
 * the store: checksums.txt (*sums, parsed once per part) and the small objects themselves. The
 * row count comes from count.txt the same way. */
static int object_checksum(tier_ctx *ctx, json_t *o, const char *sums_key, ferry_checksums *sums,
                           bool *sums_loaded, ferry_part *p, char *sum, size_t sumsz,
                           ferry_err *err)
{
    const char *file = json_string_value(json_object_get(o, "file")) ?: "";
    const char *key = json_string_value(json_object_get(o, "key")) ?: "";
    const char *fh = json_string_value(json_object_get(o, "file_hash"));
    const char *sh = json_string_value(json_object_get(o, "sha256"));
    bool count = !strcmp(file, "count.txt");
    char *data = NULL;
    size_t len = 0;
    int rc = FERRY_OK;
    if (fh && !count) {
        snprintf(sum, sumsz, "cityhash128:%s", fh);
        return FERRY_OK;
    }
    if (sh && (!count || p->rows)) { /* count.txt: the agent reported the rows too */
        snprintf(sum, sumsz, "sha256:%s", sh);
        return FERRY_OK;
    }
    if ((rc = open_store(ctx, err)))
        return rc;
    if (!count && !*sums_loaded) {
        if (!sums_key)
            return ferry_err_set(err, FERRY_EINVAL, "part %s has no checksums.txt", p->name);
        if ((rc = ferry_objstore_get_mem(ctx->store, sums_key, &data, &len, err)) ||
            (rc = ferry_checksums_parse(data, len, sums, err)))
            goto out;
        *sums_loaded = true;
        free(data);
        data = NULL;
    }
    const ferry_checksum_entry *e = count ? NULL : ferry_checksums_find(sums, file);
    if (e) {
        char hex[33];
        ferry_checksum_hex(e->file_hash, hex);
        snprintf(sum, sumsz, "cityhash128:%s", hex);
        goto out;
    }
    /* small files: read back, hash, and take the row count */
    if ((rc = ferry_objstore_get_mem(ctx->store, key, &data, &len, err)))
        goto out;
    char hex[65];
    sha256_hex(data, len, hex);
    snprintf(sum, sumsz, "sha256:%s", hex);
    if (count) {
        char tmp[32] = "";
        snprintf(tmp, sizeof tmp, "%.*s", (int)(len < 31 ? len : 31), data);
        ferry_chomp(tmp);
        uint64_t rows = 0;
        if (ferry_parse_u64(tmp, &rows))
            p->rows = rows;
    }
out:
    free(data);
    return rc;
}

/* One FERRY_REC_PART for a frozen hot part (rec: kind and key set by the caller): a new record
 * with its objects, or the recorded one (from `known`) with this server added to it. */
static int part_record(tier_ctx *ctx, tier_job *job, const char *part,
                       const ferry_record_list *known, ferry_record *rec, bool *exists,
                       ferry_err *err)
{
    json_t *answer = json_object_get(job->objects, part);
    json_t *objs = json_object_get(answer, "objects");
    ferry_checksums sums = {0};
    bool sums_loaded = false;
    ferry_part *p = &rec->u.part;
    int rc = FERRY_OK;
    *exists = false;
    for (size_t i = 0; i < known->n; i++)
        if (!strcmp(known->items[i].u.part.name, part)) {
            /* recorded by an earlier run of this job: make sure it names us */
            ferry_record_free(rec);
            if ((rc = ferry_record_copy(rec, &known->items[i], err)))
                return rc;
            *exists = true;
            if (!ferry_list_add(rec->u.part.servers, sizeof rec->u.part.servers,
                                job->srv->shard.name))
                return ferry_err_set(err, FERRY_EINVAL, "part %s: too many servers to record",
                                     part);
            return FERRY_OK;
        }
    if (!json_is_array(objs))
        return ferry_err_set(err, FERRY_EINTERNAL, "part %s: no upload answer", part);
    snprintf(p->servers, sizeof p->servers, "%s", job->srv->shard.name);
    json_t *rows = json_object_get(answer, "rows");
    if (json_is_integer(rows))
        p->rows = (uint64_t)json_integer_value(rows);
    const char *sums_key = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) if (!strcmp(json_string_value(json_object_get(o, "file")) ?: "",
                                               "checksums.txt")) sums_key =
        json_string_value(json_object_get(o, "key"));
    json_array_foreach(objs, i, o) {
        char sum[80];
        uint64_t size = (uint64_t)json_integer_value(json_object_get(o, "size"));
        if ((rc = object_checksum(ctx, o, sums_key, &sums, &sums_loaded, p, sum, sizeof sum,
                                  err)))
            break;
        p->bytes += size;
        if ((rc = ferry_part_add_object(p, json_string_value(json_object_get(o, "key")) ?: "",
                                        size, sum, err)))
            break;
    }
    ferry_checksums_free(&sums);
    return rc;
}

/* Records staged for a batch: a job's records are made first and go into the wave's batch only
 * when all of them could be made. */
typedef struct staged {
    ferry_record rec;
    bool create;
} staged;

typedef struct staged_list {
    staged *v;
    size_t n, cap;
} staged_list;

static int stage(staged_list *l, const ferry_record *rec, bool create, ferry_err *err)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        staged *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    int rc = ferry_record_copy(&l->v[l->n].rec, rec, err);
    if (!rc)
        l->v[l->n++].create = create;
    return rc;
}

static void staged_free(staged_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        ferry_record_free(&l->v[i].rec);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* The records of one job, staged in out: its parts and, when its server still serves the slice
 * (served), its partition (tier cold; a server the slice moved away from holds no partition of
 * it any more); on success `recorded` is set in its data (its journal goes into the same batch:
 * record_catalog). */
static int job_records(tier_ctx *ctx, tier_job *job, const mv_slice *live, bool served,
                       staged_list *out, ferry_err *err)
{
    ferry_record_list known = {0};
    const char *prefix[3] = {job->table, job->pid, job->st.freeze};
    int rc = ferry_catalog_list(ctx->cat, FERRY_REC_PART, prefix, 3, &known, err);
    for (size_t i = 0; !rc && i < job->st.n_hot; i++) {
        const char *name = job->st.hot[i];
        ferry_record rec;
        bool exists = false;
        ferry_record_init(&rec, FERRY_REC_PART);
        ferry_part *p = &rec.u.part;
        snprintf(p->table, sizeof p->table, "%s", job->table);
        snprintf(p->partition_id, sizeof p->partition_id, "%s", job->pid);
        snprintf(p->origin, sizeof p->origin, "%s", job->st.freeze);
        snprintf(p->name, sizeof p->name, "%s", name);
        rc = part_record(ctx, job, name, &known, &rec, &exists, err);
        if (!rc)
            rc = stage(out, &rec, !exists, err);
        ferry_record_free(&rec);
    }
    ferry_record_list_free(&known);
    if (rc || !served) {
        if (!rc)
            job->st.recorded = true;
        return rc;
    }
    ferry_record pr;
    ferry_record_init(&pr, FERRY_REC_PARTITION);
    ferry_partition *pp = &pr.u.partition;
    snprintf(pp->server, sizeof pp->server, "%s", job->srv->shard.name);
    snprintf(pp->table, sizeof pp->table, "%s", job->table);
    snprintf(pp->partition_id, sizeof pp->partition_id, "%s", job->pid);
    ferry_err ignored = {0};
    bool exists = ferry_catalog_get(ctx->cat, &pr, &ignored) == FERRY_OK;
    snprintf(pp->tenant, sizeof pp->tenant, "%s", job->st.tenant);
    pp->day = job->st.day;
    pp->split = job->st.split;
    pp->tier = FERRY_TIER_COLD;
    pp->rows = pp->bytes = 0;
    mv_parts ps = mv_slice_parts(live, job->pid);
    for (size_t k = 0; k < ps.n; k++) {
        pp->rows += ps.p[k].rows;
        pp->bytes += ps.p[k].bytes;
    }
    rc = stage(out, &pr, !exists, err);
    ferry_record_free(&pr);
    if (!rc)
        job->st.recorded = true;
    return rc;
}

/* Where the job's slice is served now, for the part records (found by the ZooKeeper soak): a
 * job cut in CLEANUP before its records were written (a lost ZooKeeper connection) can resume
 * after a move took the slice to another shard. That move handed its source's part records to
 * its target (part_records.h) while this job's did not exist yet, and the records the job then
 * wrote named its own server, which no longer holds a pointer file of them, and not the target,
 * which does: the sweep's drift (catalog_only on one, server_only on the other). So a job whose
 * server serves the slice commits its records with a check of the route (a routing switch in
 * between fails the batch; the job resumes and looks again), and a job whose server does not
 * has its records reconciled with the pointer files of its server and of the route's. */
typedef struct job_route {
    ferry_record route; /* FERRY_REC_ROUTE; version < 0: the slice has no route */
    bool served;        /* the job's server is in it */
    bool checked;       /* this job's batch entry checks the route's version */
    bool read;          /* route and served are set */
} job_route;

static int read_job_route(tier_ctx *ctx, tier_job *job, job_route *out, ferry_err *err)
{
    ferry_record_init(&out->route, FERRY_REC_ROUTE);
    out->checked = out->read = false;
    ferry_route *r = &out->route.u.route;
    snprintf(r->tenant, sizeof r->tenant, "%s", job->st.tenant);
    r->split = job->st.split;
    int rc = ferry_catalog_get(ctx->cat, &out->route, err);
    if (rc == FERRY_ENOTFOUND) {
        out->route.version = -1;
        rc = FERRY_OK;
    }
    /* no route at all (tiering needs none: a lab or a table outside routing): nothing moved */
    out->served = !rc && (out->route.version < 0 ||
                          ferry_shard_set_has(&r->shards, job->srv->shard.name));
    return rc;
}

int tier_job_served(tier_ctx *ctx, tier_job *job, bool *served, ferry_err *err)
{
    job_route jr;
    int rc = read_job_route(ctx, job, &jr, err);
    *served = !rc && jr.served;
    ferry_record_free(&jr.route);
    return rc;
}

/* The server of ctx named name, opened; NULL (err set) when there is none or it cannot be. */
static tier_server *server_named(tier_ctx *ctx, const char *name, ferry_err *err)
{
    for (size_t i = 0; i < ctx->n_servers; i++)
        if (!strcmp(ctx->servers[i].shard.name, name))
            return tier_server_open(ctx, &ctx->servers[i], err) ? NULL : &ctx->servers[i];
    ferry_err_set(err, FERRY_EINVAL, "shard %s of the route is not in the cluster", name);
    return NULL;
}

/* The records of a job whose server no longer serves its slice, made true to the pointer files
 * of that server and of each shard of the route (ferry_part_records_reconcile). */
static int reconcile_moved_away(tier_ctx *ctx, tier_job *job, const job_route *jr,
                                ferry_err *err)
{
    const ferry_shard_set *rs = &jr->route.u.route.shards;
    size_t n = jr->route.version >= 0 ? ferry_shard_set_count(rs) : 0;
    int rc = FERRY_OK;
    for (size_t k = 0; !rc && k <= n; k++) {
        tier_server *s = k == n ? job->srv : server_named(ctx, ferry_shard_set_at(rs, k), err);
        size_t changed = 0;
        if (!s)
            return err->code ? err->code : FERRY_EINVAL;
        rc = ferry_part_records_reconcile(ctx->cat, s->conn.ag, job->db, job->table, job->pid,
                                          s->shard.name, &changed, err);
        if (!rc && changed)
            FLOG_INFO("msg=\"tier job's part records follow the slice's move\" job=%s "
                      "server=%s changed=%zu", job->rec.u.job.id, s->shard.name, changed);
    }
    return rc;
}

/* Records the cold parts, the partitions (tier cold) and the journals' `recorded` of the jobs in
 * one catalog batch (I4: before the freezes are removed). A job whose records cannot be made
 * fails on its own; the batch carries the others. */
static int record_catalog(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    mv_slice live = {0};
    ferry_batch *b = ferry_batch_new();
    ferry_flow_change *ch = calloc(n + 1, sizeof *ch);
    char **text = calloc(n + 1, sizeof *text);
    job_route *jr = calloc(n + 1, sizeof *jr);
    size_t nch = 0;
    int rc = b && ch && text && jr ? FERRY_OK
                                   : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; jr && i < n; i++)
        ferry_record_init(&jr[i].route, FERRY_REC_ROUTE);
    /* the upload answers of parts this process did not upload (a resumed job): the agent finds
     * every object there and uploads nothing */
    if (rc || (rc = tier_agent_upload(ctx, w, js, n, false, err)) ||
        (rc = tier_list(w, w->table, js, n, true, &live, err)))
        goto out;
    for (size_t i = 0; !rc && i < n; i++) {
        staged_list l = {0};
        ferry_err e = {0};
        if (js[i]->rc)
            continue;
        /* a wave is one server's: the jobs of one slice (its days) read its route once, and
         * the batch checks it once */
        size_t same = i;
        for (size_t k = 0; same == i && k < i; k++)
            if (jr[k].read &&
                !strcmp(jr[k].route.u.route.tenant, js[i]->st.tenant) &&
                jr[k].route.u.route.split == js[i]->st.split)
                same = k;
        if (same == i && (rc = read_job_route(ctx, js[i], &jr[i], err)))
            break;
        if (same != i) {
            jr[i].route = jr[same].route; /* a route record owns no memory */
            jr[i].served = jr[same].served;
        }
        jr[i].read = true;
        bool checked = same != i && jr[same].checked;
        int jrc = job_records(ctx, js[i], &live, jr[i].served, &l, &e);
        if (!jrc && jr[i].served && jr[i].route.version >= 0 && !checked &&
            !(jrc = ferry_batch_check(b, &jr[i].route, &e)))
            jr[i].checked = jr[same].checked = true;
        if (!jrc && !jr[i].served) /* recorded once reconciled, below */
            js[i]->st.recorded = false;
        if (!jrc) /* its journal, with `recorded`, in its own state (a note) */
            jrc = tier_hot_text(js[i], &text[nch], &e);
        for (size_t k = 0; !jrc && k < l.n; k++) {
            jrc = l.v[k].create ? ferry_batch_create(b, &l.v[k].rec, &e)
                                : ferry_batch_update(b, &l.v[k].rec, &e);
            if (jrc) /* the batch holds part of this job: it cannot be committed */
                rc = ferry_err_set(err, jrc, "%s", e.msg);
        }
        if (jrc) {
            free(text[nch]);
            text[nch] = NULL;
            js[i]->st.recorded = false;
            tier_job_fail(js[i], jrc, &e);
        } else {
            ch[nch] = (ferry_flow_change){.rec = &js[i]->rec, .to = (int)js[i]->state,
                                          .data = text[nch]};
            nch++;
        }
        staged_free(&l);
    }
    if (rc || (nch == 0 && ferry_batch_size(b) == 0))
        goto out;
    ctx->catalog_writes++;
    rc = ferry_flow_write(&ctx->journal, b, ch, nch, FERRY_FLOW_NOTE, err);
    if (rc == FERRY_ECONFLICT) {
        /* the batch carries the journals: another worker changed one, or the route it checks
         * changed (a move switched the slice): the jobs resume in a later run */
        ctx->lost = true;
        ferry_err_prefix(err, "%s: recording the cold parts lost a race: ", w->srv->shard.name);
    }
    for (size_t i = 0; !rc && i < n; i++) {
        ferry_err e = {0};
        if (js[i]->rc || jr[i].served)
            continue;
        int jrc = reconcile_moved_away(ctx, js[i], &jr[i], &e);
        if (!jrc) { /* journaled before the freeze goes: a resumed CLEANUP needs no upload */
            tier_job *one = js[i];
            one->st.recorded = true;
            jrc = tier_journal_detail(ctx, &one, 1, one->state, &e);
            if (jrc == FERRY_ECONFLICT) {
                *err = e;
                rc = jrc;
                break;
            }
        }
        if (jrc) { /* the records stay unreconciled: the job resumes CLEANUP and tries again */
            js[i]->st.recorded = false;
            tier_job_fail(js[i], jrc, &e);
        }
    }
out:
    if (rc)
        for (size_t i = 0; i < n; i++)
            js[i]->st.recorded = false;
    for (size_t i = 0; text && i <= nch; i++)
        free(text[i]);
    free(text);
    free(ch);
    for (size_t i = 0; jr && i < n; i++)
        ferry_record_free(&jr[i].route);
    free(jr);
    mv_slice_free(&live);
    ferry_batch_free(b);
    return rc;
}

/* ---- CLEANUP ------------------------------------------------------------------------------------ */

int tier_step_cleanup(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    tier_job **rec = calloc(n + 1, sizeof *rec), **ok = calloc(n + 1, sizeof *ok);
    json_t *detached = json_array();
    size_t nr = 0, nok = 0;
    int rc = rec && ok && detached ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* I6: these swaps are verified; merges start again first, so they are stopped for the swap
     * and VERIFY only (a resumed CLEANUP starts them too: the run that stopped them may have been
     * killed after VERIFY) */
    bool stopped = false;
    for (size_t i = 0; i < n; i++)
        stopped = stopped || js[i]->st.merges_stopped;
    if (!rc && stopped && !tier_merges_needed(ctx, w, js, n))
        rc = tier_table_merges(w, true, err);
    if (rc || (rc = release_staging(ctx, w, js, n, err)))
        goto out;
    /* the real table's frozen hot parts that an ATTACH-FROM swap DETACHed: local files */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; !strcmp(js[i]->st.swap, "attach") && k < js[i]->st.n_hot; k++)
            if (json_array_append_new(detached, json_string(js[i]->st.hot[k]))) {
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
                goto out;
            }
    if ((rc = tier_agent_remove_detached(w, w->table, detached, err)))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (!js[i]->st.recorded)
            rec[nr++] = js[i];
    if (nr) {
        if ((rc = record_catalog(ctx, w, rec, nr, err)))
            goto out;
        ferry_fault_point("FERRY_TEST_CRASH_AFTER", "RECORDED"); /* the catalog batch committed */
    }
    for (size_t i = 0; i < n; i++)
        if (!js[i]->rc)
            ok[nok++] = js[i];
    if ((rc = tier_agent_remove_freezes(w, ok, nok, err)))
        goto out;
    rc = tier_journal(ctx, ok, nok, FERRY_TIER_DONE, err);
out:
    json_decref(detached);
    free(rec);
    free(ok);
    return rc;
}

/* ---- rollback ------------------------------------------------------------------------------------ */

int tier_rollback(tier_ctx *ctx, tier_wave *w, tier_job **js, size_t n, ferry_err *err)
{
    tier_job **started = calloc(n + 1, sizeof *started);
    size_t ns = 0;
    bool stopped = false;
    int rc = started ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        if (js[i]->state != FERRY_TIER_PLANNED) {
            started[ns++] = js[i];
            stopped = stopped || js[i]->st.merges_stopped;
        }
    if (!rc && ns) {
        rc = tier_clean_staging(ctx, w, started, ns, err);
        if (!rc)
            rc = tier_agent_remove_freezes(w, started, ns, err);
        /* I6: unless another job of the wave still needs its frozen parts unmerged */
        if (!rc && stopped && !tier_merges_needed(ctx, w, js, n))
            rc = tier_table_merges(w, true, err);
    }
    for (size_t i = 0; !rc && i < n; i++)
        js[i]->st.rolled_back = true;
    if (!rc)
        rc = tier_journal_detail(ctx, js, n, FERRY_TIER_FAILED, err);
    free(started);
    return rc;
}
