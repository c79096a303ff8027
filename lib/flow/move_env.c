/* Connections of a move to its shards: ClickHouse and node agent clients built from the catalog's
 * shard record and the config's credentials for it; and the small helpers the move's files share
 * (partition id lists, staging names, part hash comparison, removing a slice's detached parts). */
#include "flow/move_env.h"
#include "flow/replica_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/agent_ops.h"
#include "ferry/buf.h"
#include "ferry/clock.h"
#include "ferry/config.h"
#include "ferry/fleet.h"
#include "ferry/lines.h"
#include "ferry/log.h"
#include "ferry/partition.h"
#include "ferry/sqlguard.h"
#include "ferry/strutil.h"

int mv_conn_open(const ferry_shard *sh, const struct ferry_config *cfg, mv_conn *c,
                 ferry_err *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", sh->name);
    ferry_list_item(sh->agent, 0, c->agent_url, sizeof c->agent_url);
    size_t n = strcspn(sh->replicas, ",");
    snprintf(c->ch_url, sizeof c->ch_url, "%.*s", (int)n, sh->replicas);
    ferry_shard_client_opts o = {.ch_read_timeout_ms = 600000, .agent_timeout_ms = 600000};
    int rc = ferry_object_access_readonly(cfg, &c->ro_objects, err);
    if (!rc)
        rc = ferry_shard_clients_open(cfg, sh, &o, &c->ch, &c->ag, &c->token, err);
    if (!rc) /* its errors and slow calls name the shard */
        ferry_agent_client_set_name(c->ag, c->name);
    return rc;
}

unsigned long mv_agent_requests(const mv_conn *c)
{
    ferry_agent_client_stats s;
    ferry_agent_client_stats_get(c->ag, &s);
    return s.requests + c->n_agent;
}

void mv_conn_close(mv_conn *c)
{
    ferry_ch_client_free(c->ch);
    ferry_agent_client_free(c->ag);
    if (c->token) {
        memset(c->token, 0, strlen(c->token));
        free(c->token);
    }
    memset(c, 0, sizeof *c);
}

/* A move's statements take milliseconds when the servers are well; one that takes longer than
 * this is logged with what it was, so an operator (and the benchmarks) can see where a slow move
 * waited (the agent client logs its slow calls likewise, FERRY_AGENT_SLOW_MS). */
#define MV_SLOW_MS 500

int mv_sql(mv_conn *c, const char *sql, ferry_ch_rows *rows, ferry_err *err)
{
    c->n_sql++;
    ferry_buf out = FERRY_BUF_INIT;
    double t0 = ferry_clock_ms();
    int rc = ferry_guarded_exec(c->ch, sql, &out, err);
    double ms = ferry_clock_ms() - t0;
    if (ms >= MV_SLOW_MS)
        ferry_log(FERRY_LOG_INFO, "msg=\"slow statement\" shard=%s ms=%.0f sql=\"%.160s\"",
                  c->name, ms, sql);
    if (rc) {
        ferry_err_prefix(err, "%s: ", c->name);
        ferry_buf_free(&out);
        return rc;
    }
    if (!rows) {
        ferry_buf_free(&out);
        return FERRY_OK;
    }
    /* ferry_ch_rows_parse takes the text over */
    size_t len = out.len;
    char *text = out.data ? out.data : strdup("");
    if (!text)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    rc = ferry_ch_rows_parse(text, len, rows, err);
    if (rc) {
        ferry_ch_rows_free(rows);
        ferry_err_prefix(err, "%s: ", c->name);
    }
    return rc;
}

static uint64_t u64_of(const char *s)
{
    uint64_t v = 0;
    return ferry_parse_u64(s, &v) ? v : 0;
}

int mv_list_parts(mv_conn *c, const char *db, const char *table, const char *pid,
                  bool active_only, mv_parts *out, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    memset(out, 0, sizeof *out);
    ferry_buf_puts(&sql, "SELECT name, hash_of_all_files, rows, bytes_on_disk, disk_name IN "
                         "(SELECT name FROM system.disks WHERE is_remote), active, "
                         "min_block_number, max_block_number FROM system.parts WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND partition_id = ");
    ferry_sql_quote(pid, &sql);
    ferry_buf_puts(&sql, " AND rows > 0");
    if (active_only)
        ferry_buf_puts(&sql, " AND active");
    ferry_buf_puts(&sql, " ORDER BY name");
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    if (!rc && rows.n_rows) {
        out->p = calloc(rows.n_rows, sizeof *out->p);
        if (!out->p)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    for (size_t r = 0; !rc && r < rows.n_rows; r++) {
        mv_part *p = &out->p[out->n++];
        snprintf(p->name, sizeof p->name, "%s", ferry_ch_rows_get(&rows, r, 0));
        snprintf(p->hash, sizeof p->hash, "%s", ferry_ch_rows_get(&rows, r, 1));
        p->rows = u64_of(ferry_ch_rows_get(&rows, r, 2));
        p->bytes = u64_of(ferry_ch_rows_get(&rows, r, 3));
        p->cold = !strcmp(ferry_ch_rows_get(&rows, r, 4), "1");
        p->active = !strcmp(ferry_ch_rows_get(&rows, r, 5), "1");
        ferry_parse_i64(ferry_ch_rows_get(&rows, r, 6), &p->min_block);
        ferry_parse_i64(ferry_ch_rows_get(&rows, r, 7), &p->max_block);
    }
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

const mv_part *mv_parts_find(const mv_parts *ps, const char *name)
{
    for (size_t i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].name, name))
            return &ps->p[i];
    return NULL;
}

/* ---- a slice's parts in one query --------------------------------------------------------- */

typedef struct slice_row {
    char pid[FERRY_NAME_MAX];
    mv_part part;
} slice_row;

static int slice_row_cmp(const void *a, const void *b)
{
    const slice_row *x = a, *y = b;
    int d = strcmp(x->pid, y->pid);
    return d ? d : strcmp(x->part.name, y->part.name);
}

/* Whether a tenant name appears unescaped in ClickHouse's text of a partition tuple (so a prefix
 * of that text can narrow the query; the parse below decides in every case). */
static bool plain_name(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return false;
    return true;
}

int mv_table_wide_blocks(mv_conn *c, const char *db, const char *table, bool *out,
                         ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT engine FROM system.tables WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND name = ");
    ferry_sql_quote(table, &sql);
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    ferry_buf_free(&sql);
    if (!rc && rows.n_rows != 1)
        rc = ferry_err_set(err, FERRY_ENOTFOUND, "table %s.%s not found on %s", db, table,
                           c->name);
    if (!rc) {
        const char *e = ferry_ch_rows_get(&rows, 0, 0);
        *out = strstr(e, "MergeTree") && strncmp(e, "Replicated", 10) && strncmp(e, "Shared", 6);
    }
    ferry_ch_rows_free(&rows);
    return rc;
}

/* The columns both listings read, in this order (parts_group parses them). */
#define PARTS_SELECT                                                                             \
    "SELECT partition_id, partition, name, hash_of_all_files, rows, bytes_on_disk, disk_name "  \
    "IN (SELECT name FROM system.disks WHERE is_remote), active, min_block_number, "            \
    "max_block_number, data_version FROM system.parts WHERE database = "

/* Groups the rows of a PARTS_SELECT answer by partition into out (see mv_slice in
 * move_env.h). With t set, only the parts of slice (tenant, split) in t's layout are kept. */
static int parts_group(const ferry_ch_rows *rows, const ferry_table_def *t, const char *tenant,
                       uint32_t split, mv_slice *out, ferry_err *err)
{
    slice_row *sr = NULL;
    size_t n = 0;
    int rc = FERRY_OK;
    if (rows->n_rows && !(sr = calloc(rows->n_rows, sizeof *sr)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t r = 0; !rc && r < rows->n_rows; r++) {
        if (t) {
            ferry_partition_key k;
            ferry_err perr = {0};
            if (ferry_partition_parse(t->layout, ferry_ch_rows_get(rows, r, 1), &k, &perr))
                continue; /* not a managed partition */
            if (k.split != split ||
                (t->layout == FERRY_LAYOUT_SHARED && strcmp(k.tenant, tenant)))
                continue;
        }
        slice_row *x = &sr[n++];
        snprintf(x->pid, sizeof x->pid, "%s", ferry_ch_rows_get(rows, r, 0));
        mv_part *p = &x->part;
        snprintf(p->name, sizeof p->name, "%s", ferry_ch_rows_get(rows, r, 2));
        snprintf(p->hash, sizeof p->hash, "%s", ferry_ch_rows_get(rows, r, 3));
        p->rows = u64_of(ferry_ch_rows_get(rows, r, 4));
        p->bytes = u64_of(ferry_ch_rows_get(rows, r, 5));
        p->cold = !strcmp(ferry_ch_rows_get(rows, r, 6), "1");
        p->active = !strcmp(ferry_ch_rows_get(rows, r, 7), "1");
        ferry_parse_i64(ferry_ch_rows_get(rows, r, 8), &p->min_block);
        ferry_parse_i64(ferry_ch_rows_get(rows, r, 9), &p->max_block);
        ferry_parse_i64(ferry_ch_rows_get(rows, r, 10), &p->version);
    }
    if (!rc && n) {
        qsort(sr, n, sizeof *sr, slice_row_cmp);
        out->parts = calloc(n, sizeof *out->parts);
        out->pids = calloc(n, sizeof *out->pids);
        out->first = calloc(n + 1, sizeof *out->first);
        if (!out->parts || !out->pids || !out->first)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    /* group by partition; a partition is listed only while it has an active part */
    for (size_t i = 0; !rc && i < n;) {
        size_t j = i;
        bool active = false;
        for (; j < n && !strcmp(sr[j].pid, sr[i].pid); j++)
            active = active || sr[j].part.active;
        if (active) {
            memcpy(out->pids[out->n_pids], sr[i].pid, FERRY_NAME_MAX);
            out->first[out->n_pids++] = out->n_parts;
            for (size_t k = i; k < j; k++)
                out->parts[out->n_parts++] = sr[k].part;
        }
        i = j;
    }
    if (!rc && out->first)
        out->first[out->n_pids] = out->n_parts;
    if (rc)
        mv_slice_free(out);
    free(sr);
    return rc;
}

int mv_slice_list(mv_conn *c, const ferry_table_def *t, const char *table, const char *tenant,
                  uint32_t split, bool active_only, mv_slice *out, ferry_err *err)
{
    return mv_slice_list_n(c, t, table, &tenant, &split, 1, active_only, out, err);
}

int mv_slice_list_n(mv_conn *c, const ferry_table_def *t, const char *table,
                    const char *const *tenants, const uint32_t *splits, size_t n,
                    bool active_only, mv_slice *outs, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    for (size_t k = 0; k < n; k++)
        memset(&outs[k], 0, sizeof outs[k]);
    ferry_buf_puts(&sql, PARTS_SELECT);
    ferry_sql_quote(t->database, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND rows > 0");
    if (active_only)
        ferry_buf_puts(&sql, " AND active");
    bool plain = t->layout == FERRY_LAYOUT_SHARED && n > 0;
    for (size_t k = 0; plain && k < n; k++)
        plain = plain_name(tenants[k]);
    if (plain) {
        /* only the tenants' partitions: ('acme',DAY,SPLIT), or (42,DAY,SPLIT) for a number */
        ferry_buf_puts(&sql, " AND (");
        for (size_t k = 0; k < n; k++) {
            bool again = false;
            for (size_t j = 0; j < k && !again; j++)
                again = !strcmp(tenants[j], tenants[k]);
            if (again)
                continue;
            ferry_buf_printf(&sql, "%sstartsWith(partition, '(''%s'',') OR "
                                   "startsWith(partition, '(%s,')", k ? " OR " : "", tenants[k],
                             tenants[k]);
        }
        ferry_buf_putc(&sql, ')');
    }
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    for (size_t k = 0; !rc && k < n; k++)
        rc = parts_group(&rows, t, tenants[k], splits[k], &outs[k], err);
    if (rc)
        for (size_t k = 0; k < n; k++)
            mv_slice_free(&outs[k]);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

int mv_pids_list(mv_conn *c, const char *db, const char *table, const char *const *pids,
                 size_t n, bool active_only, mv_slice *out, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    memset(out, 0, sizeof *out);
    if (n == 0)
        return FERRY_OK;
    ferry_buf_puts(&sql, PARTS_SELECT);
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " AND rows > 0");
    if (active_only)
        ferry_buf_puts(&sql, " AND active");
    ferry_buf_puts(&sql, " AND partition_id IN (");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ferry_buf_putc(&sql, ',');
        ferry_sql_quote(pids[i], &sql);
    }
    ferry_buf_putc(&sql, ')');
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    if (!rc)
        rc = parts_group(&rows, NULL, NULL, 0, out, err);
    ferry_ch_rows_free(&rows);
    ferry_buf_free(&sql);
    return rc;
}

void mv_slice_free(mv_slice *s)
{
    free(s->pids);
    free(s->first);
    free(s->parts);
    memset(s, 0, sizeof *s);
}

long mv_slice_pid(const mv_slice *s, const char *pid)
{
    size_t lo = 0, hi = s->n_pids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(s->pids[mid], pid);
        if (!d)
            return (long)mid;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

mv_parts mv_slice_parts(const mv_slice *s, const char *pid)
{
    long k = mv_slice_pid(s, pid);
    mv_parts v = {0};
    if (k >= 0) {
        v.p = s->parts + s->first[k];
        v.n = s->first[k + 1] - s->first[k];
    }
    return v;
}

/* ---- shared by the move's files (move_env.h) ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Copies src into dst (size dstsz), truncating; names in the catalog always fit. */
void mv_copy_str(char *dst, size_t dstsz, const char *src)
{
    size_t n = strlen(src);
    if (n >= dstsz)
        n = dstsz - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void mv_staging_name(const char *table, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s%s", table, MV_STAGING_SUFFIX);
}

uint64_t mv_u64_of(const char *s)
{
    uint64_t v = 0;
    return ferry_parse_u64(s, &v) ? v : 0;
}

void mv_pids_free(mv_pids *p)
{
    free(p->ids);
    memset(p, 0, sizeof *p);
}

bool mv_pids_has(const mv_pids *p, const char *id)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->ids[i], id))
            return true;
    return false;
}

int mv_pids_add(mv_pids *p, const char *id)
{
    if (mv_pids_has(p, id))
        return FERRY_OK;
    void *n = realloc(p->ids, (p->n + 1) * sizeof *p->ids);
    if (!n)
        return FERRY_ENOMEM;
    p->ids = n;
    snprintf(p->ids[p->n++], FERRY_NAME_MAX, "%s", id);
    return FERRY_OK;
}

/* The partition ids of the slice in db.table on c (active parts with rows), added to out
 * (replica_sync.c reads them for both flows). */
int mv_slice_pids(mv_conn *c, const ferry_table_def *t, const char *table, const char *tenant,
                      uint32_t split, mv_pids *out, ferry_err *err)
{
    return rs_slice_pids(c, t, table, tenant, split, &out->ids, &out->n, err);
}

int mv_agent_api(mv_conn *c, int *api, ferry_err *err)
{
    if (!c->agent_api) {
        ferry_agent_status_info st = {0};
        int rc = ferry_agent_status(c->ag, &st, err);
        if (!rc)
            c->agent_api = st.api;
        ferry_agent_status_info_free(&st);
        if (rc) {
            ferry_err_prefix(err, "agent of %s (status): ", c->name);
            return rc;
        }
    }
    *api = c->agent_api;
    return FERRY_OK;
}

int mv_sends_live(mv_conn *c, bool *out, ferry_err *err)
{
    int api = 0, rc = mv_agent_api(c, &api, err);
    *out = !rc && api >= 3;
    return rc;
}

/* Whether two lists of parts hold the same multiset of hash_of_all_files. */
bool mv_same_hashes(const mv_parts *a, const mv_parts *b)
{
    if (a->n != b->n)
        return false;
    bool same = true;
    char **x = calloc(a->n + 1, sizeof *x), **y = calloc(b->n + 1, sizeof *y);
    if (!x || !y) {
        same = false;
        goto out;
    }
    for (size_t i = 0; i < a->n; i++) {
        x[i] = (char *)a->p[i].hash;
        y[i] = (char *)b->p[i].hash;
    }
    qsort(x, a->n, sizeof *x, cmp_str);
    qsort(y, b->n, sizeof *y, cmp_str);
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(x[i], y[i]))
            same = false;
out:
    free(x);
    free(y);
    return same;
}

/* Removes every detached part of db.table on c whose partition is in pids. With tmp_too, also
 * the agents' temporary folders (tmp-ferry-<pid>-...) left by a receive whose agent was killed;
 * the agent refuses (409) those whose writer still runs: another move's receive in progress.
 * The folders are listed by one statement on the server (the agent's `parts` listing asks the
 * server three things more: its disks, the table's paths and its active parts); the agent
 * checks every name it is given before it removes anything. */
int mv_remove_detached_of(mv_conn *c, const char *db, const char *table, const mv_pids *pids,
                          bool tmp_too, ferry_err *err)
{
    ferry_buf sql = FERRY_BUF_INIT;
    ferry_ch_rows rows = {0};
    ferry_buf_puts(&sql, "SELECT name, ifNull(partition_id, '') FROM system.detached_parts "
                         "WHERE database = ");
    ferry_sql_quote(db, &sql);
    ferry_buf_puts(&sql, " AND table = ");
    ferry_sql_quote(table, &sql);
    ferry_buf_puts(&sql, " ORDER BY name");
    int rc = mv_sql(c, ferry_buf_cstr(&sql), &rows, err);
    ferry_buf_free(&sql);
    if (rc)
        return rc;
    const char **batch = calloc(rows.n_rows + 1, sizeof *batch);
    size_t nb = 0;
    if (!batch)
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    /* the parts of the slice's partitions in one request (an older agent takes one each) */
    for (size_t i = 0; !rc && i < rows.n_rows; i++) {
        const char *name = ferry_ch_rows_get(&rows, i, 0), *pid = ferry_ch_rows_get(&rows, i, 1);
        if (strncmp(name, "tmp-ferry-", 10) && *pid && mv_pids_has(pids, pid))
            batch[nb++] = name;
    }
    if (!rc)
        rc = ferry_agent_remove_detached_n(c->ag, db, table, batch, nb, NULL, err);
    for (size_t i = 0; !rc && tmp_too && i < rows.n_rows; i++) {
        const char *name = ferry_ch_rows_get(&rows, i, 0);
        if (strncmp(name, "tmp-ferry-", 10))
            continue;
        rc = ferry_agent_remove_detached(c->ag, db, table, name, NULL, NULL, err);
        if (rc && ferry_agent_client_last_status(c->ag) == 409) {
            ferry_log(FERRY_LOG_DEBUG, "msg=\"receive in progress, kept\" shard=%s folder=%s",
                      c->name, name);
            rc = FERRY_OK;
            continue;
        }
        if (!rc)
            ferry_log(FERRY_LOG_INFO, "msg=\"removed a half-received part left by a killed "
                      "agent\" shard=%s table=%s.%s folder=%s", c->name, db, table, name);
    }
    free(batch);
    ferry_ch_rows_free(&rows);
    return rc;
}

/* ---- a call beside the caller's work ---------------------------------------------------------- */

static void *side_main(void *p)
{
    mv_side *s = p;
    s->rc = s->fn(s->arg, &s->err);
    return NULL;
}

void mv_side_start(mv_side *s, int (*fn)(void *arg, ferry_err *err), void *arg)
{
    memset(&s->err, 0, sizeof s->err);
    s->fn = fn;
    s->arg = arg;
    s->rc = FERRY_OK;
    s->threaded = pthread_create(&s->th, NULL, side_main, s) == 0;
    if (!s->threaded)
        side_main(s);
}

int mv_side_join(mv_side *s, ferry_err *err)
{
    if (s->threaded)
        pthread_join(s->th, NULL);
    s->threaded = false;
    if (s->rc && err)
        *err = s->err;
    return s->rc;
}

typedef struct detached_job {
    mv_conn *c;
    const char *db, *table;
    const mv_pids *pids;
} detached_job;

static int detached_job_run(void *p, ferry_err *err)
{
    detached_job *j = p;
    return mv_remove_detached_of(j->c, j->db, j->table, j->pids, true, err);
}

int mv_remove_detached_both(mv_conn *src, const char *src_table, mv_conn *dst,
                            const char *dst_table, const char *db, const mv_pids *pids,
                            ferry_err *err)
{
    detached_job j = {.c = dst, .db = db, .table = dst_table, .pids = pids};
    mv_side side;
    mv_side_start(&side, detached_job_run, &j);
    int rc = mv_remove_detached_of(src, db, src_table, pids, false, err);
    ferry_err derr = {0};
    int drc = mv_side_join(&side, &derr);
    if (!rc && drc) {
        *err = derr;
        rc = drc;
    }
    return rc;
}
