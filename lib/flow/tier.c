/* The tiering job's state machine (tier.h): one (server, table, partition) from hot parts on the
 * local disk to pointer parts on the cold disk, journaled in a catalog job record.
 *
 * States and what each step does (every step is idempotent: a job resumed after kill -9 simply
 * runs its journaled state's step again):
 *
 *   PLANNED   nothing touched yet.
 *   FREEZE    SYSTEM STOP MERGES on the table (so no frozen part is merged away before the
 *             swap), then FREEZE PARTITION under the attempt's name. A FREEZE found journaled but
 *             not finished by this process may have been cut short, so it is redone under a fresh
 *             name (attempt + 1) after the old one is removed.
 *   UPLOAD    every file of every frozen hot part uploaded unchanged (agent, uploader role; files
 *             already there with the same size are skipped).
 *   POINTERS  the pinned pointer format checked against the server; the staging table created
 *             (CREATE TABLE IF NOT EXISTS ... AS the table: same structure and storage policy);
 *             one pointer part per frozen hot part written into staging's detached/ on the cold
 *             disk (the agent checks every object first).
 *   ATTACH    ATTACH PARTITION in staging (skipped when staging already holds the partition);
 *             the staging partition's fingerprint must equal the fingerprint of the frozen hot
 *             parts in the real table (restricted by _part), which is kept as `fp`.
 *   REPLACE   the swap. REPLACE PARTITION ... FROM staging when the partition holds exactly the
 *             frozen hot parts (atomic for readers); otherwise (cold parts from an earlier run,
 *             or rows that arrived since the freeze) ATTACH PARTITION ... FROM staging and DETACH
 *             PART of each frozen hot part in one ALTER statement, which never replaces the cold
 *             parts or the new rows. The choice and the highest block number before the swap are
 *             journaled first; a resumed swap looks at which parts are active to finish it.
 *   VERIFY    none of the frozen hot parts active; the parts the swap added (on the object
 *             disk, blocks above max_block) have exactly the fingerprint `fp`; for REPLACE, no
 *             part other than the frozen ones was dropped (a row inserted between the check and
 *             the swap would have been: reported, never silent).
 *   CLEANUP   staging's partition DETACHed and its detached folders removed (never DROP or
 *             TRUNCATE: they share pointer files); the real table's detached hot parts removed
 *             (local files); the cold parts, their objects with sizes and checksums, and the
 *             partition (tier cold) recorded in the catalog in one batch with the journal
 *             (recorded = true); the freeze folders removed; merges started again.
 *   DONE / FAILED.
 *
 * Invariants:
 *   I1  Only the worker whose compare-and-set on the job record succeeded runs a step; a lost
 *       CAS stops the worker at once (ECONFLICT), whatever it was doing.
 *   I2  Before `swapped` is journaled the real table is untouched (apart from STOP MERGES and
 *       FREEZE's hard links): any failure rolls back (staging cleaned, freezes removed, merges
 *       started) and leaves the partition hot and intact. From then on a job only goes forward.
 *   I3  The staging partition holds nothing but this job's pointer parts: a job starts by
 *       cleaning it, and it is cleaned before DONE or FAILED.
 *   I4  Every object ferry uploaded for a part that was swapped in is recorded in the catalog
 *       (FERRY_REC_PART with this server) before the freeze that could re-list it is removed.
 *   I5  No statement of the flow can remove parts: all SQL goes through ferry_guarded_exec. */
#define _DEFAULT_SOURCE
#include "flow/tier_int.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/checksums.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/pointer.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"
#include "ferry/verify.h"

/* ---- small helpers -------------------------------------------------------------------------- */

int tier_sql(tier_server *srv, const char *sql, ferry_buf *out, ferry_err *err)
{
    int rc = ferry_guarded_exec(srv->ch, sql, out, err);
    if (rc)
        ferry_err_prefix(err, "%s: ", srv->shard.name);
    return rc;
}

void tier_qualified(ferry_buf *b, const char *db, const char *table)
{
    ferry_sql_ident(db, b);
    ferry_buf_putc(b, '.');
    ferry_sql_ident(table, b);
}

int tier_table_policy(tier_server *srv, const char *db, const char *table, bool *exists,
                      char *policy, size_t policysz, bool *has_remote, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    *exists = *has_remote = false;
    ferry_buf_puts(&sql, "SELECT storage_policy FROM system.tables WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND name = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    int rc = tier_sql(srv, ferry_buf_cstr(&sql), &res, err);
    if (rc || res.len == 0)
        goto out;
    *exists = true;
    ferry_chomp(res.data);
    snprintf(policy, policysz, "%s", res.data);
    ferry_buf_reset(&sql);
    ferry_buf_puts(&sql, "SELECT count() FROM system.disks WHERE is_remote AND has((SELECT "
                         "groupArrayArray(disks) FROM system.storage_policies WHERE policy_name "
                         "= ");
    ferry_sql_quote(policy, &sql);
    ferry_buf_puts(&sql, "), name) FORMAT TabSeparated");
    ferry_buf_reset(&res);
    if ((rc = tier_sql(srv, ferry_buf_cstr(&sql), &res, err)))
        goto out;
    *has_remote = res.data && res.data[0] != '0';
out:
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *dstr(const tier_job *job, const char *key)
{
    const char *s = json_string_value(json_object_get(job->data, key));
    return s ? s : "";
}

static bool dbool(const tier_job *job, const char *key)
{
    return json_is_true(json_object_get(job->data, key));
}

static uint64_t du64(const tier_job *job, const char *key)
{
    json_t *v = json_object_get(job->data, key);
    return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

/* Test-only kill -9 (tier.h): exits without any cleanup when the variable names state. */
static void crash_point(const char *var, const char *point)
{
    const char *v = getenv(var);
    if (v && !strcmp(v, point)) {
        FLOG_WARN("msg=\"test-only crash\" %s=%s", var, v);
        _exit(137);
    }
}

/* Writes the job record (state, data, owner, detail) by CAS on its version. */
static int job_write(tier_ctx *ctx, tier_job *job, enum ferry_tier_state to, const char *detail,
                     ferry_err *err)
{
    ferry_job *j = &job->rec.u.job;
    char *text = json_dumps(job->data, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    if (strlen(text) >= sizeof j->data) {
        size_t n = strlen(text);
        free(text);
        return ferry_err_set(err, FERRY_EINVAL, "job %s: its journal state needs %zu bytes, more "
                             "than the %zu a job record holds (too many parts in the partition? "
                             "merge it first: OPTIMIZE TABLE ... PARTITION ID '%s' FINAL)",
                             j->id, n, sizeof j->data - 1, job->pid);
    }
    ferry_record next = job->rec;
    ferry_job *nj = &next.u.job;
    snprintf(nj->data, sizeof nj->data, "%s", text);
    free(text);
    snprintf(nj->state, sizeof nj->state, "%s", ferry_tier_state_name(to));
    snprintf(nj->owner, sizeof nj->owner, "%s", to == FERRY_TIER_DONE || to == FERRY_TIER_FAILED
                                                    ? ""
                                                    : ctx->owner);
    if (detail)
        snprintf(nj->detail, sizeof nj->detail, "%s", detail);
    nj->updated = (int64_t)time(NULL);
    int rc = ferry_catalog_update(ctx->cat, &next, err);
    if (rc == FERRY_ECONFLICT)
        return ferry_err_set(err, FERRY_ECONFLICT, "job %s was changed by another worker; "
                             "stopping (it owns the job now)", j->id);
    if (rc)
        return rc;
    job->rec = next;
    job->state = to;
    return FERRY_OK;
}

/* Journals state `to` (checked transition), with the test-only crash points around it. */
static int job_advance(tier_ctx *ctx, tier_job *job, enum ferry_tier_state to, ferry_err *err)
{
    if (!ferry_tier_transition_ok(job->state, to))
        return ferry_err_set(err, FERRY_EINTERNAL, "job %s: %s -> %s is not a tiering transition",
                             job->rec.u.job.id, ferry_tier_state_name(job->state),
                             ferry_tier_state_name(to));
    crash_point("FERRY_TEST_CRASH_BEFORE", ferry_tier_state_name(to));
    int rc = job_write(ctx, job, to, "", err);
    if (rc)
        return rc;
    FLOG_INFO("msg=\"tier job state\" job=%s state=%s", job->rec.u.job.id,
              ferry_tier_state_name(to));
    crash_point("FERRY_TEST_CRASH_AFTER", ferry_tier_state_name(to));
    return FERRY_OK;
}

/* ---- agent calls ------------------------------------------------------------------------------ */

static int agent(tier_job *job, const char *op, json_t *req, json_t **resp, ferry_err *err)
{
    long status = 0;
    json_t *r = NULL;
    int rc = ferry_agent_call(job->srv->agent, op, req, &r, &status, err);
    json_decref(req);
    if (rc) {
        json_decref(r);
        return ferry_err_prefix(err, "%s: agent %s: ", job->srv->shard.name, op);
    }
    if (resp)
        *resp = r;
    else
        json_decref(r);
    return FERRY_OK;
}

static int remove_freezes(tier_job *job, ferry_err *err)
{
    unsigned attempts = (unsigned)du64(job, "attempt");
    for (unsigned a = 1; a <= attempts; a++) {
        char name[64];
        ferry_tier_freeze_name(job->rec.u.job.id, a, name, sizeof name);
        int rc = agent(job, "remove-freeze", json_pack("{s:s}", "name", name), NULL, err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

/* ---- reading parts ---------------------------------------------------------------------------- */

typedef struct tier_part {
    char name[FERRY_NAME_MAX];
    bool remote;
    int64_t min_block, max_block;
    uint64_t rows, bytes;
} tier_part;

/* Parts of the partition in db.table (active ones, or inactive ones). *out: caller frees. */
static int list_parts(tier_job *job, const char *table, bool active, tier_part **out, size_t *n,
                      ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    *out = NULL;
    *n = 0;
    ferry_buf_printf(&sql, "SELECT name, disk_name IN (SELECT name FROM system.disks WHERE "
                           "is_remote), min_block_number, max_block_number, rows, bytes_on_disk "
                           "FROM system.parts WHERE %sactive AND database = ",
                     active ? "" : "NOT ");
    ferry_sql_quote(job->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(job->pid, &sql);
    ferry_buf_puts(&sql, " ORDER BY name FORMAT TabSeparated");
    int rc = tier_sql(job->srv, ferry_buf_cstr(&sql), &res, err);
    if (rc || res.len == 0)
        goto out;
    rc = ferry_ch_rows_parse(res.data, res.len, &rows, err);
    res.data = NULL; /* taken over by rows */
    res.len = res.cap = 0;
    if (rc)
        goto out;
    if (rows.n_cols != 6) {
        rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected system.parts answer");
        goto out;
    }
    *out = calloc(rows.n_rows ? rows.n_rows : 1, sizeof **out);
    if (!*out) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < rows.n_rows; i++) {
        tier_part *p = &(*out)[i];
        snprintf(p->name, sizeof p->name, "%s", ferry_ch_rows_get(&rows, i, 0));
        p->remote = !strcmp(ferry_ch_rows_get(&rows, i, 1), "1");
        if (!ferry_parse_i64(ferry_ch_rows_get(&rows, i, 2), &p->min_block) ||
            !ferry_parse_i64(ferry_ch_rows_get(&rows, i, 3), &p->max_block) ||
            !ferry_parse_u64(ferry_ch_rows_get(&rows, i, 4), &p->rows) ||
            !ferry_parse_u64(ferry_ch_rows_get(&rows, i, 5), &p->bytes)) {
            rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected system.parts answer");
            goto out;
        }
    }
    *n = rows.n_rows;
out:
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}

static bool in_json_list(json_t *list, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) if (!strcmp(json_string_value(v), name)) return true;
    return false;
}

/* Fingerprint of the rows of db.table's partition in the parts named by list (a JSON array of
 * names), the same quantities as ferry_fingerprint_partition. */
static int fingerprint_parts(tier_job *job, json_t *list, ferry_fingerprint *fp, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    memset(fp, 0, sizeof *fp);
    if (json_array_size(list) == 0)
        return FERRY_OK; /* no parts, no rows */
    ferry_buf_puts(&sql, "SELECT count(), sum(h), groupBitXor(h), uniqExact(h) FROM (SELECT "
                         "cityHash64(*) AS h FROM ");
    tier_qualified(&sql, job->db, job->table);
    ferry_buf_puts(&sql, " WHERE _partition_id = ");
    ferry_sql_quote(job->pid, &sql);
    ferry_buf_puts(&sql, " AND _part IN (");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (i)
            ferry_buf_putc(&sql, ',');
        ferry_sql_quote(json_string_value(v), &sql);
    }
    ferry_buf_puts(&sql, ")) SETTINGS max_threads = 4 FORMAT TabSeparated");
    int rc = tier_sql(job->srv, ferry_buf_cstr(&sql), &res, err);
    if (!rc) {
        char *f[8];
        char *line = res.data ? res.data : (char *)"";
        ferry_chomp(line);
        if (ferry_split(line, '\t', f, 8) != 4 || !ferry_parse_u64(f[0], &fp->rows) ||
            !ferry_parse_u64(f[1], &fp->hash_sum) || !ferry_parse_u64(f[2], &fp->hash_xor) ||
            !ferry_parse_u64(f[3], &fp->distinct))
            rc = ferry_err_set(err, FERRY_EREMOTE, "unexpected fingerprint answer");
    }
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}

static json_t *fp_json(const ferry_fingerprint *fp)
{
    char s[3][24];
    snprintf(s[0], sizeof s[0], "%llu", (unsigned long long)fp->hash_sum);
    snprintf(s[1], sizeof s[1], "%llu", (unsigned long long)fp->hash_xor);
    snprintf(s[2], sizeof s[2], "%llu", (unsigned long long)fp->distinct);
    return json_pack("{s:I, s:s, s:s, s:s}", "rows", (json_int_t)fp->rows, "sum", s[0], "xor",
                     s[1], "distinct", s[2]);
}

static void fp_from_json(json_t *o, ferry_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    fp->rows = (uint64_t)json_integer_value(json_object_get(o, "rows"));
    ferry_parse_u64(json_string_value(json_object_get(o, "sum")) ?: "0", &fp->hash_sum);
    ferry_parse_u64(json_string_value(json_object_get(o, "xor")) ?: "0", &fp->hash_xor);
    ferry_parse_u64(json_string_value(json_object_get(o, "distinct")) ?: "0", &fp->distinct);
}

/* ---- steps ------------------------------------------------------------------------------------ */

static int merges(tier_job *job, bool start, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, start ? "SYSTEM START MERGES " : "SYSTEM STOP MERGES ");
    tier_qualified(&sql, job->db, job->table);
    int rc = tier_sql(job->srv, ferry_buf_cstr(&sql), NULL, err);
    ferry_buf_free(&sql);
    return rc;
}

/* The staging partition emptied: active parts DETACHed, then every detached folder of the
 * partition removed by the agent (plain file removal; the objects are never touched). */
static int clean_staging(tier_job *job, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT, res = FERRY_BUF_INIT;
    tier_part *parts = NULL;
    size_t n = 0;
    char policy[FERRY_NAME_MAX];
    bool exists = false, remote = false;
    int rc = tier_table_policy(job->srv, job->db, job->staging, &exists, policy, sizeof policy,
                               &remote, err);
    if (rc || !exists)
        goto out;
    if ((rc = list_parts(job, job->staging, true, &parts, &n, err)))
        goto out;
    if (n) {
        ferry_buf_reset(&sql);
        ferry_buf_puts(&sql, "ALTER TABLE ");
        tier_qualified(&sql, job->db, job->staging);
        ferry_buf_puts(&sql, " DETACH PARTITION ID ");
        ferry_sql_quote(job->pid, &sql);
        if ((rc = tier_sql(job->srv, ferry_buf_cstr(&sql), NULL, err)))
            goto out;
    }
    ferry_buf_reset(&sql);
    ferry_buf_reset(&res);
    ferry_buf_puts(&sql, "SELECT name FROM system.detached_parts WHERE database = ");
    ferry_sql_quote(job->db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(job->staging, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(job->pid, &sql);
    ferry_buf_puts(&sql, " FORMAT TabSeparated");
    if ((rc = tier_sql(job->srv, ferry_buf_cstr(&sql), &res, err)))
        goto out;
    char *save = NULL;
    for (char *line = strtok_r(res.data ? res.data : (char *)"", "\n", &save); line && !rc;
         line = strtok_r(NULL, "\n", &save))
        rc = agent(job, "remove-detached",
                   json_pack("{s:s, s:s, s:s}", "database", job->db, "table", job->staging,
                             "part", line),
                   NULL, err);
out:
    free(parts);
    ferry_buf_free(&sql);
    ferry_buf_free(&res);
    return rc;
}

static int step_freeze(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    int rc;
    char name[64];
    if (!job->freeze_started_here) {
        /* Journaled FREEZE not finished by this process: the old attempt may be partial. */
        if ((rc = remove_freezes(job, err)))
            return rc;
        json_object_set_new(job->data, "attempt", json_integer((json_int_t)du64(job, "attempt") + 1));
        ferry_tier_freeze_name(job->rec.u.job.id, (unsigned)du64(job, "attempt"), name, sizeof name);
        json_object_set_new(job->data, "freeze", json_string(name));
        json_object_set_new(job->data, "merges_stopped", json_true());
        if ((rc = job_advance(ctx, job, FERRY_TIER_FREEZE, err)))
            return rc;
        job->freeze_started_here = true;
    }
    if ((rc = merges(job, false, err)))
        return rc;
    json_t *resp = NULL;
    rc = agent(job, "freeze", json_pack("{s:s, s:s, s:s, s:s}", "database", job->db, "table",
                                        job->table, "partition_id", job->pid, "name",
                                        dstr(job, "freeze")),
               &resp, err);
    if (rc == FERRY_ENOTFOUND)
        ferry_err_prefix(err, "partition %s of %s.%s is gone: ", job->pid, job->db, job->table);
    if (rc)
        return rc;
    json_t *hot = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(resp, "parts"), i, p)
    {
        if (!strcmp(json_string_value(json_object_get(p, "kind")) ?: "", "hot"))
            json_array_append(hot, json_object_get(p, "name"));
    }
    json_decref(resp);
    json_object_set_new(job->data, "hot", hot);
    return job_advance(ctx, job, FERRY_TIER_UPLOAD, err);
}

/* The objects of a frozen hot part: the upload answer of this process, or a new upload call
 * (which uploads nothing that is already there). */
static int part_objects(tier_job *job, const char *part, json_t **objects, bool count,
                        ferry_err *err)
{
    json_t *cached = json_object_get(job->objects, part);
    if (cached) {
        *objects = cached;
        return FERRY_OK;
    }
    json_t *resp = NULL;
    int rc = agent(job, "upload", json_pack("{s:s, s:s, s:s, s:s}", "database", job->db, "table",
                                            job->table, "freeze", dstr(job, "freeze"), "part",
                                            part),
                   &resp, err);
    if (rc)
        return rc;
    if (count) {
        job->bytes_uploaded += (uint64_t)json_integer_value(json_object_get(resp, "bytes_uploaded"));
        job->files_uploaded += (uint64_t)json_integer_value(json_object_get(resp, "uploaded"));
    }
    json_object_set(job->objects, part, json_object_get(resp, "objects"));
    json_decref(resp);
    *objects = json_object_get(job->objects, part);
    return FERRY_OK;
}

static int step_upload(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    size_t i;
    json_t *p, *objs;
    json_array_foreach(json_object_get(job->data, "hot"), i, p)
    {
        /* Object keys carry this job's freeze name, so no other server's part (even one of the
         * same name) owns them; a record under this origin can only be another server's if two
         * job ids hashed alike: never overwrite its objects. */
        ferry_record known;
        ferry_record_init(&known, FERRY_REC_PART);
        snprintf(known.u.part.table, sizeof known.u.part.table, "%s", job->table);
        snprintf(known.u.part.partition_id, sizeof known.u.part.partition_id, "%s", job->pid);
        snprintf(known.u.part.origin, sizeof known.u.part.origin, "%s", dstr(job, "freeze"));
        snprintf(known.u.part.name, sizeof known.u.part.name, "%s", json_string_value(p));
        ferry_err ignored = {0};
        bool taken = ferry_catalog_get(ctx->cat, &known, &ignored) == FERRY_OK &&
                     !ferry_list_has(known.u.part.servers, job->srv->shard.name);
        if (taken) {
            int r = ferry_err_set(err, FERRY_ECONFLICT, "%s: part %s of %s under freeze %s is "
                                  "already recorded for %s; uploading would overwrite its objects "
                                  "(run the tiering again: a new attempt freezes under a new name)",
                                  job->srv->shard.name, json_string_value(p), job->table,
                                  dstr(job, "freeze"), known.u.part.servers);
            ferry_record_free(&known);
            return r;
        }
        ferry_record_free(&known);
        json_object_del(job->objects, json_string_value(p)); /* always upload in this step */
        int rc = part_objects(job, json_string_value(p), &objs, true, err);
        if (rc)
            return rc;
    }
    return job_advance(ctx, job, FERRY_TIER_POINTERS, err);
}

/* The staging table: created AS the table when missing; an existing one must have the table's
 * storage policy (REPLACE/ATTACH FROM need it) and a disk on object storage. */
int tier_check_staging(tier_server *srv, const char *db, const char *table, bool must_exist,
                       ferry_err *err)
{
    char staging[FERRY_NAME_MAX], pol[FERRY_NAME_MAX], spol[FERRY_NAME_MAX];
    bool exists, sexists, remote, sremote;
    int rc = ferry_tier_staging_name(table, staging, sizeof staging, err);
    if (!rc)
        rc = tier_table_policy(srv, db, table, &exists, pol, sizeof pol, &remote, err);
    if (!rc)
        rc = tier_table_policy(srv, db, staging, &sexists, spol, sizeof spol, &sremote, err);
    if (rc)
        return rc;
    if (!exists || (must_exist && !sexists))
        return ferry_err_set(err, FERRY_ENOTFOUND, "%s: table %s.%s or its staging table %s is "
                             "missing", srv->shard.name, db, table, staging);
    if (!sexists)
        return FERRY_OK;
    if (strcmp(pol, spol))
        return ferry_err_set(err, FERRY_EINVAL, "%s: staging table %s.%s has storage policy '%s' "
                             "but %s has '%s': its cold disk is missing, and REPLACE PARTITION "
                             "needs the same policy (rename the staging table away; ferry creates "
                             "it again AS the table)", srv->shard.name, db, staging, spol, table,
                             pol);
    if (!sremote)
        return ferry_err_set(err, FERRY_EINVAL, "%s: staging table %s.%s has no object-storage "
                             "disk (storage policy '%s'); tiering needs a cold volume on one",
                             srv->shard.name, db, staging, spol);
    return FERRY_OK;
}

static int ensure_staging(tier_job *job, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_buf_puts(&sql, "CREATE TABLE IF NOT EXISTS ");
    tier_qualified(&sql, job->db, job->staging);
    ferry_buf_puts(&sql, " AS ");
    tier_qualified(&sql, job->db, job->table);
    int rc = tier_sql(job->srv, ferry_buf_cstr(&sql), NULL, err);
    if (!rc)
        rc = tier_check_staging(job->srv, job->db, job->table, true, err);
    ferry_buf_free(&sql);
    return rc;
}

/* Size of the pointer file the agent writes for one object (format 5: the full key). */
static uint64_t pointer_size(const char *clickhouse_key, uint64_t size)
{
    ferry_pointer pt = FERRY_POINTER_INIT;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_err e = {0};
    pt.ref_count = 1;
    uint64_t n = 0;
    if (ferry_pointer_add_object(&pt, clickhouse_key, size, &e) == FERRY_OK &&
        ferry_pointer_serialize(&pt, 5, "", &b, &e) == FERRY_OK)
        n = b.len;
    ferry_pointer_free(&pt);
    ferry_buf_free(&b);
    return n;
}

static int step_pointers(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    int rc;
    if ((rc = tier_server_check(ctx, job->srv, err)) || (rc = ensure_staging(job, err)))
        return rc;
    size_t i, k;
    json_t *p, *o, *objs;
    json_array_foreach(json_object_get(job->data, "hot"), i, p)
    {
        if ((rc = part_objects(job, json_string_value(p), &objs, true, err)))
            return rc;
        json_t *list = json_array();
        json_array_foreach(objs, k, o)
        {
            json_array_append_new(list, json_pack("{s:O, s:O, s:O}", "file",
                                                  json_object_get(o, "file"), "key",
                                                  json_object_get(o, "key"), "size",
                                                  json_object_get(o, "size")));
            job->pointer_bytes += pointer_size(
                json_string_value(json_object_get(o, "clickhouse_key")) ?: "",
                (uint64_t)json_integer_value(json_object_get(o, "size")));
            job->pointer_files++;
        }
        rc = agent(job, "write-pointers",
                   json_pack("{s:s, s:s, s:s, s:o}", "database", job->db, "table", job->staging,
                             "part", json_string_value(p), "objects", list),
                   NULL, err);
        if (rc)
            return rc;
    }
    return job_advance(ctx, job, FERRY_TIER_ATTACH, err);
}

static int step_attach(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    tier_part *parts = NULL;
    size_t n = 0;
    ferry_buf sql = FERRY_BUF_INIT;
    json_t *hot = json_object_get(job->data, "hot");
    int rc = list_parts(job, job->staging, true, &parts, &n, err);
    if (rc)
        goto out;
    if (n == 0) {
        ferry_buf_puts(&sql, "ALTER TABLE ");
        tier_qualified(&sql, job->db, job->staging);
        ferry_buf_puts(&sql, " ATTACH PARTITION ID ");
        ferry_sql_quote(job->pid, &sql);
        double t0 = now_ms();
        rc = tier_sql(job->srv, ferry_buf_cstr(&sql), NULL, err);
        ctx->load_ms += now_ms() - t0;
        if (rc)
            goto out;
        free(parts);
        if ((rc = list_parts(job, job->staging, true, &parts, &n, err)))
            goto out;
    }
    if (n != json_array_size(hot)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: staging %s.%s holds %zu parts of partition %s "
                           "after ATTACH, expected %zu (the pointer parts written); nothing was "
                           "swapped", job->srv->shard.name, job->db, job->staging, n, job->pid,
                           json_array_size(hot));
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (!parts[i].remote) {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: staging part %s is not on the object-"
                               "storage disk", job->srv->shard.name, parts[i].name);
            goto out;
        }
    /* Every frozen hot part must still be active (merges are stopped since the freeze). */
    tier_part *live = NULL;
    size_t nlive = 0;
    if ((rc = list_parts(job, job->table, true, &live, &nlive, err)))
        goto out;
    size_t i;
    json_t *h;
    json_array_foreach(hot, i, h)
    {
        bool found = false;
        for (size_t k = 0; k < nlive && !found; k++)
            found = !strcmp(live[k].name, json_string_value(h));
        if (!found) {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: frozen part %s of %s.%s is no longer "
                               "active (merged or detached since the freeze); nothing was "
                               "swapped, the next run tiers the partition again",
                               job->srv->shard.name, json_string_value(h), job->db, job->table);
            break;
        }
    }
    free(live);
    if (rc)
        goto out;
    ferry_fingerprint src, stg;
    double f0 = now_ms();
    rc = fingerprint_parts(job, hot, &src, err);
    if (!rc)
        rc = ferry_fingerprint_partition(job->srv->ch, job->db, job->staging, job->pid, &stg, err);
    ctx->fingerprint_ms += now_ms() - f0;
    if (rc)
        goto out;
    char why[256];
    if (!ferry_fingerprint_same(&src, &stg, why, sizeof why)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: the pointer parts in staging do not hold the "
                           "frozen rows (%s); nothing was swapped", job->srv->shard.name, why);
        goto out;
    }
    json_object_set_new(job->data, "fp", fp_json(&src));
    rc = job_advance(ctx, job, FERRY_TIER_REPLACE, err);
out:
    free(parts);
    ferry_buf_free(&sql);
    return rc;
}

static int step_replace(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    tier_part *parts = NULL;
    size_t n = 0;
    ferry_buf sql = FERRY_BUF_INIT;
    json_t *hot = json_object_get(job->data, "hot");
    int rc = merges(job, false, err); /* still stopped, unless someone started them */
    if (!rc)
        rc = list_parts(job, job->table, true, &parts, &n, err);
    if (rc)
        goto out;
    size_t hot_active = 0, added = 0, others = 0;
    int64_t max_block = 0;
    bool have_max = json_object_get(job->data, "max_block") != NULL;
    int64_t recorded_max = (int64_t)du64(job, "max_block");
    for (size_t i = 0; i < n; i++) {
        if (in_json_list(hot, parts[i].name))
            hot_active++;
        else if (have_max && parts[i].remote && parts[i].min_block > recorded_max)
            added++;
        else
            others++;
        if (parts[i].max_block > max_block)
            max_block = parts[i].max_block;
    }
    const char *swap = dstr(job, "swap");
    if (*swap && added > 0 && hot_active == 0) /* the swap ran before a crash */
        goto done;
    if (*swap && added > 0) {
        if (strcmp(swap, "attach")) {
            rc = ferry_err_set(err, FERRY_EINTERNAL, "%s: %s.%s partition %s holds both the "
                               "swapped-in cold parts and frozen hot parts after REPLACE",
                               job->srv->shard.name, job->db, job->table, job->pid);
            goto out;
        }
        /* ATTACH FROM ran; the DETACH PART half did not (or not all of it). */
        ferry_buf_puts(&sql, "ALTER TABLE ");
        tier_qualified(&sql, job->db, job->table);
        size_t i, k = 0;
        json_t *h;
        json_array_foreach(hot, i, h)
        {
            bool live = false;
            for (size_t j = 0; j < n && !live; j++)
                live = !strcmp(parts[j].name, json_string_value(h));
            if (!live)
                continue;
            ferry_buf_puts(&sql, k++ ? ", DETACH PART " : " DETACH PART ");
            ferry_sql_quote(json_string_value(h), &sql);
        }
        if ((rc = tier_sql(job->srv, ferry_buf_cstr(&sql), NULL, err)))
            goto out;
        goto done;
    }
    if (*swap && hot_active != json_array_size(hot)) {
        /* nothing was swapped, but the frozen parts changed: safe to roll back and redo */
        json_object_set_new(job->data, "swapped", json_false());
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: frozen parts of %s.%s partition %s changed "
                           "before the swap ran; nothing was swapped, the next run tiers the "
                           "partition again", job->srv->shard.name, job->db, job->table, job->pid);
        goto out;
    }
    if (hot_active != json_array_size(hot)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: only %zu of the %zu frozen parts of %s.%s "
                           "partition %s are active before the swap",
                           job->srv->shard.name, hot_active, json_array_size(hot), job->db,
                           job->table, job->pid);
        goto out;
    }
    /* Nothing swapped yet: choose, journal the choice, then run it. */
    const char *mode = others == 0 ? "replace" : "attach";
    json_object_set_new(job->data, "swap", json_string(mode));
    json_object_set_new(job->data, "max_block", json_integer((json_int_t)max_block));
    json_object_set_new(job->data, "swapped", json_true());
    if ((rc = job_write(ctx, job, FERRY_TIER_REPLACE, NULL, err)))
        goto out;
    crash_point("FERRY_TEST_CRASH_AFTER", "SWAP"); /* the choice journaled, not yet run */
    ferry_buf_puts(&sql, "ALTER TABLE ");
    tier_qualified(&sql, job->db, job->table);
    if (!strcmp(mode, "replace")) {
        ferry_buf_puts(&sql, " REPLACE PARTITION ID ");
        ferry_sql_quote(job->pid, &sql);
        ferry_buf_puts(&sql, " FROM ");
        tier_qualified(&sql, job->db, job->staging);
    } else {
        ferry_buf_puts(&sql, " ATTACH PARTITION ID ");
        ferry_sql_quote(job->pid, &sql);
        ferry_buf_puts(&sql, " FROM ");
        tier_qualified(&sql, job->db, job->staging);
        size_t i;
        json_t *h;
        json_array_foreach(hot, i, h)
        {
            ferry_buf_puts(&sql, ", DETACH PART ");
            ferry_sql_quote(json_string_value(h), &sql);
        }
    }
    double t0 = now_ms();
    rc = tier_sql(job->srv, ferry_buf_cstr(&sql), NULL, err);
    ctx->load_ms += now_ms() - t0;
    if (rc)
        goto out;
done:
    rc = job_advance(ctx, job, FERRY_TIER_VERIFY, err);
out:
    free(parts);
    ferry_buf_free(&sql);
    return rc;
}

static int step_verify(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    tier_part *parts = NULL, *gone = NULL;
    size_t n = 0, ngone = 0;
    json_t *hot = json_object_get(job->data, "hot");
    json_t *added = json_array();
    int64_t max_block = (int64_t)du64(job, "max_block");
    int rc = list_parts(job, job->table, true, &parts, &n, err);
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (in_json_list(hot, parts[i].name)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: frozen hot part %s is still active after "
                               "the swap (its rows would count twice)", job->srv->shard.name,
                               parts[i].name);
            goto out;
        }
        if (parts[i].remote && parts[i].min_block > max_block)
            json_array_append_new(added, json_string(parts[i].name));
    }
    ferry_fingerprint want, got;
    fp_from_json(json_object_get(job->data, "fp"), &want);
    double f0 = now_ms();
    rc = fingerprint_parts(job, added, &got, err);
    ctx->fingerprint_ms += now_ms() - f0;
    if (rc)
        goto out;
    char why[256];
    if (!ferry_fingerprint_same(&want, &got, why, sizeof why)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: after the swap the new cold parts of %s.%s "
                           "partition %s do not hold the frozen rows: %s", job->srv->shard.name,
                           job->db, job->table, job->pid, why);
        goto out;
    }
    /* REPLACE drops the whole partition: a part inserted between the check and the swap would
     * have been dropped with the frozen ones. Merges are stopped, so any dropped part that is
     * not a frozen one is such a part. */
    if (!strcmp(dstr(job, "swap"), "replace")) {
        if ((rc = list_parts(job, job->table, false, &gone, &ngone, err)))
            goto out;
        for (size_t i = 0; i < ngone; i++)
            if (!gone[i].remote && gone[i].min_block > max_block) {
                rc = ferry_err_set(err, FERRY_EINTERNAL, "%s: part %s (%llu rows) of %s.%s was "
                                   "inserted during REPLACE PARTITION and dropped by it; its "
                                   "files stay in the table's folder until ClickHouse removes "
                                   "outdated parts: copy them to detached/ and ATTACH PART now",
                                   job->srv->shard.name, gone[i].name,
                                   (unsigned long long)gone[i].rows, job->db, job->table);
                goto out;
            }
    }
    rc = job_advance(ctx, job, FERRY_TIER_CLEANUP, err);
out:
    json_decref(added);
    free(parts);
    free(gone);
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

/* One FERRY_REC_PART for a frozen hot part: objects with sizes and checksums (ClickHouse's
 * own file hash from checksums.txt where it lists the file, else SHA-256 of the object), rows
 * from count.txt. */
static int part_record(tier_ctx *ctx, tier_job *job, const char *part, ferry_record *rec,
                       bool *exists, ferry_err *err)
{
    json_t *objs;
    char *data = NULL;
    size_t len = 0;
    ferry_checksums sums = {0};
    int rc = part_objects(job, part, &objs, false, err);
    if (!rc)
        rc = open_store(ctx, err);
    if (rc)
        return rc;
    ferry_part *p = &rec->u.part;
    snprintf(p->table, sizeof p->table, "%s", job->table);
    snprintf(p->partition_id, sizeof p->partition_id, "%s", job->pid);
    snprintf(p->origin, sizeof p->origin, "%s", dstr(job, "freeze"));
    snprintf(p->name, sizeof p->name, "%s", part);
    *exists = false;
    if (ferry_catalog_get(ctx->cat, rec, err) == FERRY_OK) {
        *exists = true; /* recorded by an earlier run of this job: make sure it names us */
        if (!ferry_list_add(p->servers, sizeof p->servers, job->srv->shard.name))
            return ferry_err_set(err, FERRY_EINVAL, "part %s: too many servers to record", part);
        return FERRY_OK;
    }
    snprintf(p->servers, sizeof p->servers, "%s", job->srv->shard.name);
    size_t i;
    json_t *o;
    const char *sums_key = NULL;
    json_array_foreach(objs, i, o) if (!strcmp(json_string_value(json_object_get(o, "file")),
                                               "checksums.txt")) sums_key =
        json_string_value(json_object_get(o, "key"));
    if (!sums_key)
        return ferry_err_set(err, FERRY_EINVAL, "part %s has no checksums.txt", part);
    if ((rc = ferry_objstore_get_mem(ctx->store, sums_key, &data, &len, err)) ||
        (rc = ferry_checksums_parse(data, len, &sums, err)))
        goto out;
    free(data);
    data = NULL;
    json_array_foreach(objs, i, o)
    {
        const char *file = json_string_value(json_object_get(o, "file"));
        const char *key = json_string_value(json_object_get(o, "key"));
        uint64_t size = (uint64_t)json_integer_value(json_object_get(o, "size"));
        const ferry_checksum_entry *e = ferry_checksums_find(&sums, file);
        char sum[80];
        if (e && strcmp(file, "count.txt")) {
            char hex[33];
            ferry_checksum_hex(e->file_hash, hex);
            snprintf(sum, sizeof sum, "cityhash128:%s", hex);
        } else {
            /* small files: read back, hash, and take the row count */
            if ((rc = ferry_objstore_get_mem(ctx->store, key, &data, &len, err)))
                goto out;
            unsigned char md[SHA256_DIGEST_LENGTH];
            SHA256((const unsigned char *)data, len, md);
            int off = snprintf(sum, sizeof sum, "sha256:");
            for (int b = 0; b < SHA256_DIGEST_LENGTH; b++)
                off += snprintf(sum + off, sizeof sum - (size_t)off, "%02x", md[b]);
            if (!strcmp(file, "count.txt")) {
                char tmp[32] = "";
                snprintf(tmp, sizeof tmp, "%.*s", (int)(len < 31 ? len : 31), data);
                ferry_chomp(tmp);
                uint64_t rows = 0;
                if (ferry_parse_u64(tmp, &rows))
                    p->rows = rows;
            }
            free(data);
            data = NULL;
        }
        p->bytes += size;
        if ((rc = ferry_part_add_object(p, key, size, sum, err)))
            goto out;
    }
out:
    free(data);
    ferry_checksums_free(&sums);
    return rc;
}

/* Records the cold parts, the partition (tier cold) and the journal's `recorded` in one batch. */
static int record_catalog(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    ferry_batch *b = ferry_batch_new();
    json_t *hot = json_object_get(job->data, "hot");
    size_t nrec = json_array_size(hot);
    ferry_record *recs = calloc(nrec ? nrec : 1, sizeof *recs);
    tier_part *parts = NULL;
    size_t n = 0;
    int rc = (!b || !recs) ? ferry_err_set(err, FERRY_ENOMEM, "out of memory") : FERRY_OK;
    size_t i;
    json_t *h;
    json_array_foreach(hot, i, h)
    {
        if (rc)
            break;
        ferry_record_init(&recs[i], FERRY_REC_PART);
        bool exists = false;
        rc = part_record(ctx, job, json_string_value(h), &recs[i], &exists, err);
        if (!rc)
            rc = exists ? ferry_batch_update(b, &recs[i], err) : ferry_batch_create(b, &recs[i], err);
    }
    if (!rc)
        rc = list_parts(job, job->table, true, &parts, &n, err);
    if (!rc) {
        ferry_record pr;
        ferry_record_init(&pr, FERRY_REC_PARTITION);
        ferry_partition *pp = &pr.u.partition;
        snprintf(pp->server, sizeof pp->server, "%s", job->srv->shard.name);
        snprintf(pp->table, sizeof pp->table, "%s", job->table);
        snprintf(pp->partition_id, sizeof pp->partition_id, "%s", job->pid);
        bool exists = ferry_catalog_get(ctx->cat, &pr, err) == FERRY_OK;
        snprintf(pp->tenant, sizeof pp->tenant, "%s", dstr(job, "tenant"));
        pp->day = (uint32_t)du64(job, "day");
        pp->split = (uint32_t)du64(job, "split");
        pp->tier = FERRY_TIER_COLD;
        pp->rows = pp->bytes = 0;
        for (size_t k = 0; k < n; k++) {
            pp->rows += parts[k].rows;
            pp->bytes += parts[k].bytes;
        }
        rc = exists ? ferry_batch_update(b, &pr, err) : ferry_batch_create(b, &pr, err);
        ferry_record_free(&pr);
    }
    ferry_record next;
    if (!rc) {
        json_object_set_new(job->data, "recorded", json_true());
        char *text = json_dumps(job->data, JSON_COMPACT | JSON_SORT_KEYS);
        next = job->rec;
        if (!text || strlen(text) >= sizeof next.u.job.data)
            rc = ferry_err_set(err, FERRY_EINVAL, "job %s: journal state too large",
                               job->rec.u.job.id);
        else {
            snprintf(next.u.job.data, sizeof next.u.job.data, "%s", text);
            next.u.job.updated = (int64_t)time(NULL);
            rc = ferry_batch_update(b, &next, err);
        }
        free(text);
    }
    if (!rc) {
        rc = ferry_catalog_commit(ctx->cat, b, NULL, err);
        if (rc == FERRY_ECONFLICT)
            ferry_err_prefix(err, "job %s: recording the cold parts lost a race: ",
                             job->rec.u.job.id);
    }
    if (!rc) /* the new version of the job record */
        rc = ferry_catalog_get(ctx->cat, &job->rec, err);
    else
        json_object_del(job->data, "recorded");
    for (size_t k = 0; k < nrec; k++)
        ferry_record_free(&recs[k]);
    free(recs);
    free(parts);
    ferry_batch_free(b);
    return rc;
}

static int step_cleanup(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    int rc;
    if ((rc = clean_staging(job, err)))
        return rc;
    if (!strcmp(dstr(job, "swap"), "attach")) {
        /* the real table's frozen hot parts went to detached/: local files, safe to remove */
        size_t i;
        json_t *h;
        json_array_foreach(json_object_get(job->data, "hot"), i, h)
        {
            if ((rc = agent(job, "remove-detached",
                            json_pack("{s:s, s:s, s:s}", "database", job->db, "table", job->table,
                                      "part", json_string_value(h)),
                            NULL, err)))
                return rc;
        }
    }
    if (!dbool(job, "recorded")) {
        if ((rc = record_catalog(ctx, job, err)))
            return rc;
        crash_point("FERRY_TEST_CRASH_AFTER", "RECORDED"); /* the catalog batch committed */
    }
    if ((rc = remove_freezes(job, err)) || (rc = merges(job, true, err)))
        return rc;
    return job_advance(ctx, job, FERRY_TIER_DONE, err);
}

/* Undoes everything of a job that has not swapped (I2) and journals FAILED with why. */
static int job_rollback(tier_ctx *ctx, tier_job *job, const ferry_err *why, ferry_err *err)
{
    int rc = FERRY_OK;
    if (job->state != FERRY_TIER_PLANNED) {
        rc = clean_staging(job, err);
        if (!rc)
            rc = remove_freezes(job, err);
        if (!rc && dbool(job, "merges_stopped"))
            rc = merges(job, true, err);
        if (rc)
            return rc;
    }
    json_object_set_new(job->data, "rolled_back", json_true());
    return job_write(ctx, job, FERRY_TIER_FAILED, why->msg, err);
}

int tier_job_run(tier_ctx *ctx, tier_job *job, ferry_err *err)
{
    int rc = FERRY_OK;
    if (!job->objects)
        job->objects = json_object();
    while (job->state != FERRY_TIER_DONE && job->state != FERRY_TIER_FAILED) {
        enum ferry_tier_state s = job->state;
        double t0 = now_ms();
        switch (s) {
        case FERRY_TIER_PLANNED:
            rc = clean_staging(job, err); /* I3 */
            job->freeze_started_here = false;
            if (!rc)
                rc = step_freeze(ctx, job, err);
            s = FERRY_TIER_FREEZE;
            break;
        case FERRY_TIER_FREEZE: rc = step_freeze(ctx, job, err); break;
        case FERRY_TIER_UPLOAD: rc = step_upload(ctx, job, err); break;
        case FERRY_TIER_POINTERS: rc = step_pointers(ctx, job, err); break;
        case FERRY_TIER_ATTACH: rc = step_attach(ctx, job, err); break;
        case FERRY_TIER_REPLACE: rc = step_replace(ctx, job, err); break;
        case FERRY_TIER_VERIFY: rc = step_verify(ctx, job, err); break;
        case FERRY_TIER_CLEANUP: rc = step_cleanup(ctx, job, err); break;
        default: rc = ferry_err_set(err, FERRY_EINTERNAL, "bad state"); break;
        }
        double ms = now_ms() - t0;
        job->step_ms[s] += ms;
        ctx->step_ms[s] += ms;
        if (rc)
            break;
    }
    if (!rc || rc == FERRY_ECONFLICT)
        return rc;
    /* A failure: before the swap everything is undone (I2); after it the job stays where it is
     * and the next run finishes it. */
    ferry_err ignored = {0};
    if (!dbool(job, "swapped")) {
        ferry_err rb = {0};
        if (job_rollback(ctx, job, err, &rb) != FERRY_OK) {
            FLOG_WARN("msg=\"tier rollback failed; the next run resumes the job\" job=%s err=\"%s\"",
                      job->rec.u.job.id, rb.msg);
            job_write(ctx, job, job->state, err->msg, &ignored);
        }
    } else {
        job_write(ctx, job, job->state, err->msg, &ignored);
    }
    return rc;
}
