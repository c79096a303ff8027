/* The catalog's record codec: where each record kind lives (its path) and how it is written as
 * a JSON document. Pure: no I/O. Both backends store exactly these documents, which is what
 * makes a dump from one backend load unchanged into the other. */
#include "catalog/catalog_int.h"
#include "ferry/strutil.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *name; /* JSON / CLI name */
    const char *dir;  /* top-level folder */
    int depth;        /* key segments */
} kinds[FERRY_REC_KIND_COUNT] = {
    [FERRY_REC_SETTINGS] = {"settings", "settings", 1},
    [FERRY_REC_TABLE] = {"table", "tables", 1},
    [FERRY_REC_SHARD] = {"shard", "shards", 1},
    [FERRY_REC_TENANT] = {"tenant", "tenants", 1},
    [FERRY_REC_SLICE] = {"slice", "slices", 2},
    [FERRY_REC_ROUTE] = {"route", "routes", 2},
    [FERRY_REC_PARTITION] = {"partition", "partitions", 3},
    [FERRY_REC_PART] = {"part", "parts", 4},
    [FERRY_REC_MOVE] = {"move", "moves", 1},
    [FERRY_REC_JOB] = {"job", "jobs", 1},
    [FERRY_REC_USER] = {"user", "users", 1},
};

static const char *const shard_states[] = {"active", "draining", "gone", "new"};
static const char *const move_states[] = {"PLANNED", "CLONE",   "VERIFY", "SWITCH",
                                          "CLEANUP", "DONE",    "FAILED"};
static const char *const tiers[] = {"hot", "cold"};
static const char *const layouts[] = {"shared", "per_tenant"};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *ferry_record_kind_name(enum ferry_record_kind k)
{
    return (unsigned)k < FERRY_REC_KIND_COUNT ? kinds[k].name : "?";
}
const char *cat_kind_dir(enum ferry_record_kind k) { return kinds[k].dir; }
int cat_kind_depth(enum ferry_record_kind k) { return kinds[k].depth; }
int cat_kind_from_dir(const char *dir)
{
    for (int k = 0; k < FERRY_REC_KIND_COUNT; k++)
        if (!strcmp(kinds[k].dir, dir))
            return k;
    return -1;
}

static int enum_parse(const char *const *names, size_t n, const char *s, int *out)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], s)) {
            *out = (int)i;
            return FERRY_OK;
        }
    return FERRY_EINVAL;
}

const char *ferry_shard_state_name(enum ferry_shard_state s)
{
    return (unsigned)s < NELEM(shard_states) ? shard_states[s] : "?";
}
bool ferry_shard_placeable(enum ferry_shard_state s)
{
    return s == FERRY_SHARD_ACTIVE || s == FERRY_SHARD_NEW;
}
void ferry_shard_reweight(ferry_shard *s, double w)
{
    assert(w > 0);
    if (s->state != FERRY_SHARD_NEW && w != s->weight && !(s->placed_weight > 0))
        s->placed_weight = s->weight;
    if (s->state == FERRY_SHARD_NEW || w == s->placed_weight)
        s->placed_weight = 0; /* a NEW shard is filled as added, whatever its weight */
    s->weight = w;
}
int ferry_shard_state_parse(const char *s, enum ferry_shard_state *out)
{
    int v, rc = enum_parse(shard_states, NELEM(shard_states), s, &v);
    if (!rc)
        *out = (enum ferry_shard_state)v;
    return rc;
}
const char *ferry_move_state_name(enum ferry_move_state s)
{
    return (unsigned)s < NELEM(move_states) ? move_states[s] : "?";
}
int ferry_move_state_parse(const char *s, enum ferry_move_state *out)
{
    int v, rc = enum_parse(move_states, NELEM(move_states), s, &v);
    if (!rc)
        *out = (enum ferry_move_state)v;
    return rc;
}
const char *ferry_tier_name(enum ferry_tier t) { return (unsigned)t < 2 ? tiers[t] : "?"; }
const char *ferry_table_layout_name(enum ferry_layout l) { return ferry_layout_name(l); }

bool ferry_move_finished(enum ferry_move_state s)
{
    return s == FERRY_MOVE_DONE || s == FERRY_MOVE_FAILED;
}

void ferry_record_init(ferry_record *r, enum ferry_record_kind kind)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->version = FERRY_VERSION_ANY;
}

void ferry_record_free(ferry_record *r)
{
    if (!r)
        return;
    enum ferry_record_kind k = r->kind;
    if (k == FERRY_REC_PART)
        free(r->u.part.objects);
    else if (k == FERRY_REC_JOB)
        free(r->u.job.data_json);
    memset(r, 0, sizeof *r);
    r->kind = k;
    r->version = FERRY_VERSION_ANY;
}

void ferry_record_list_free(ferry_record_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        ferry_record_free(&l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

int ferry_record_copy(ferry_record *dst, const ferry_record *src, ferry_err *err)
{
    *dst = *src;
    if (src->kind == FERRY_REC_PART && src->u.part.n_objects) {
        size_t sz = src->u.part.n_objects * sizeof(ferry_cold_object);
        dst->u.part.objects = malloc(sz);
        if (!dst->u.part.objects) {
            dst->u.part.n_objects = 0;
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory copying a part record");
        }
        memcpy(dst->u.part.objects, src->u.part.objects, sz);
    } else if (src->kind == FERRY_REC_PART) {
        dst->u.part.objects = NULL;
    } else if (src->kind == FERRY_REC_JOB && src->u.job.data_json) {
        if (!(dst->u.job.data_json = strdup(src->u.job.data_json)))
            return ferry_err_set(err, FERRY_ENOMEM, "out of memory copying a job record");
    }
    return FERRY_OK;
}

const char *ferry_job_data(const ferry_job *j)
{
    return j->data_json ? j->data_json : "";
}

int ferry_job_set_data(ferry_job *j, const char *text, ferry_err *err)
{
    size_t n = text ? strlen(text) : 0;
    if (n >= FERRY_JOB_DATA_MAX)
        return ferry_err_set(err, FERRY_EINVAL, "job %s: its data is too large (%zu bytes, at "
                             "most %d)", j->id, n, FERRY_JOB_DATA_MAX - 1);
    char *copy = NULL;
    if (n && !(copy = strdup(text)))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory setting job %s's data", j->id);
    free(j->data_json);
    j->data_json = copy;
    return FERRY_OK;
}

static int copy_str(char *dst, size_t size, const char *src, const char *what, ferry_err *err)
{
    size_t n = strlen(src);
    if (n >= size)
        return ferry_err_set(err, FERRY_EINVAL, "%s is too long (%zu bytes, at most %zu)", what,
                             n, size - 1);
    memcpy(dst, src, n + 1);
    return FERRY_OK;
}

int ferry_part_add_object(ferry_part *p, const char *key, uint64_t size, const char *checksum,
                          ferry_err *err)
{
    ferry_cold_object *o = realloc(p->objects, (p->n_objects + 1) * sizeof *o);
    if (!o)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory adding an object to a part");
    p->objects = o;
    ferry_cold_object *x = &o[p->n_objects];
    memset(x, 0, sizeof *x);
    int rc = copy_str(x->key, sizeof x->key, key, "object key", err);
    if (!rc)
        rc = copy_str(x->checksum, sizeof x->checksum, checksum, "object checksum", err);
    if (rc)
        return rc;
    x->size = size;
    p->n_objects++;
    return FERRY_OK;
}

bool cat_name_ok(const char *s)
{
    return ferry_name_ok(s); /* the one rule placement follows too (ferry/names.h) */
}

static int key_seg(char *path, size_t size, size_t *len, const char *seg, const char *what,
                   ferry_err *err)
{
    if (!cat_name_ok(seg))
        return ferry_err_set(err, FERRY_EINVAL,
                             "%s '%s' is not a valid name (" FERRY_NAME_RULE ")",
                             what, seg);
    int n = snprintf(path + *len, size - *len, "/%s", seg);
    if (n < 0 || (size_t)n >= size - *len)
        return ferry_err_set(err, FERRY_EINVAL, "key too long");
    *len += (size_t)n;
    return FERRY_OK;
}

int cat_record_path(const ferry_record *r, char *path, size_t size, ferry_err *err)
{
    if ((unsigned)r->kind >= FERRY_REC_KIND_COUNT)
        return ferry_err_set(err, FERRY_EINVAL, "unknown record kind %d", (int)r->kind);
    int n = snprintf(path, size, "%s", kinds[r->kind].dir);
    if (n < 0 || (size_t)n >= size)
        return ferry_err_set(err, FERRY_EINVAL, "path buffer too small");
    size_t len = (size_t)n;
    char num[24];
    int rc = FERRY_OK;
    switch (r->kind) {
    case FERRY_REC_SETTINGS:
        rc = key_seg(path, size, &len, "cluster", "settings", err);
        break;
    case FERRY_REC_TABLE:
        rc = key_seg(path, size, &len, r->u.table.name, "table name", err);
        break;
    case FERRY_REC_SHARD:
        rc = key_seg(path, size, &len, r->u.shard.name, "shard name", err);
        break;
    case FERRY_REC_TENANT:
        rc = key_seg(path, size, &len, r->u.tenant.name, "tenant name", err);
        break;
    case FERRY_REC_SLICE:
    case FERRY_REC_ROUTE: {
        const char *tenant = r->kind == FERRY_REC_SLICE ? r->u.slice.tenant : r->u.route.tenant;
        uint32_t split = r->kind == FERRY_REC_SLICE ? r->u.slice.split : r->u.route.split;
        snprintf(num, sizeof num, "%u", split);
        rc = key_seg(path, size, &len, tenant, "tenant name", err);
        if (!rc)
            rc = key_seg(path, size, &len, num, "split", err);
        break;
    }
    case FERRY_REC_PARTITION:
        rc = key_seg(path, size, &len, r->u.partition.server, "server name", err);
        if (!rc)
            rc = key_seg(path, size, &len, r->u.partition.table, "table name", err);
        if (!rc)
            rc = key_seg(path, size, &len, r->u.partition.partition_id, "partition id", err);
        break;
    case FERRY_REC_PART:
        rc = key_seg(path, size, &len, r->u.part.table, "table name", err);
        if (!rc)
            rc = key_seg(path, size, &len, r->u.part.partition_id, "partition id", err);
        if (!rc)
            rc = key_seg(path, size, &len, r->u.part.origin, "part origin", err);
        if (!rc)
            rc = key_seg(path, size, &len, r->u.part.name, "part name", err);
        break;
    case FERRY_REC_MOVE:
        rc = key_seg(path, size, &len, r->u.move.id, "move id", err);
        break;
    case FERRY_REC_JOB:
        rc = key_seg(path, size, &len, r->u.job.id, "job id", err);
        break;
    case FERRY_REC_USER:
        rc = key_seg(path, size, &len, r->u.user.name, "user name", err);
        break;
    default:
        break;
    }
    return rc;
}

/* ---- encoding ---- */

static void set_str(json_t *o, const char *k, const char *v) { json_object_set_new(o, k, json_string(v)); }
static void set_int(json_t *o, const char *k, int64_t v) { json_object_set_new(o, k, json_integer(v)); }
static void set_real(json_t *o, const char *k, double v) { json_object_set_new(o, k, json_real(v)); }
/* A list of shards as the text the catalog stores: "node1,node2" */
static void set_shards(json_t *o, const char *k, const ferry_shard_set *v)
{
    char text[FERRY_SHARDS_TEXT_MAX];
    set_str(o, k, ferry_shard_set_str(v, text));
}

json_t *cat_record_to_json(const ferry_record *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    switch (r->kind) {
    case FERRY_REC_SETTINGS: {
        const ferry_settings *s = &r->u.settings;
        set_str(o, "name", s->name);
        set_str(o, "hash", s->hash);
        set_int(o, "rf", s->rf);
        set_real(o, "fill", s->fill);
        set_str(o, "clickhouse_version", s->clickhouse_version);
        set_int(o, "pointer_format", s->pointer_format);
        set_int(o, "hot_days", s->hot_days);
        break;
    }
    case FERRY_REC_TABLE: {
        const ferry_table_def *t = &r->u.table;
        set_str(o, "name", t->name);
        set_str(o, "database", t->database);
        set_str(o, "layout", ferry_table_layout_name(t->layout));
        set_str(o, "tenant_column", t->tenant_column);
        set_str(o, "day_column", t->day_column);
        set_str(o, "split_column", t->split_column);
        if (t->split_key[0]) /* optional: older catalogs have none */
            set_str(o, "split_key", t->split_key);
        break;
    }
    case FERRY_REC_SHARD: {
        const ferry_shard *s = &r->u.shard;
        set_str(o, "name", s->name);
        set_real(o, "weight", s->weight);
        if (s->placed_weight > 0) /* only while a re-weight is being rebalanced */
            set_real(o, "placed_weight", s->placed_weight);
        set_int(o, "capacity", (int64_t)s->capacity);
        set_str(o, "replicas", s->replicas);
        set_str(o, "agent", s->agent);
        set_str(o, "zone", s->zone);
        set_str(o, "state", ferry_shard_state_name(s->state));
        /* connection details: optional (older catalogs have none), written only when set so
         * that a catalog without them exports as before */
        if (s->user[0])
            set_str(o, "user", s->user);
        if (s->password_file[0])
            set_str(o, "password_file", s->password_file);
        if (s->agent_token_file[0])
            set_str(o, "agent_token_file", s->agent_token_file);
        if (s->data_path[0])
            set_str(o, "data_path", s->data_path);
        break;
    }
    case FERRY_REC_TENANT:
        set_str(o, "name", r->u.tenant.name);
        set_int(o, "splits", r->u.tenant.splits);
        if (r->u.tenant.rf) /* absent = the cluster's rf (keeps older dumps identical) */
            set_int(o, "rf", r->u.tenant.rf);
        break;
    case FERRY_REC_SLICE: {
        const ferry_slice *s = &r->u.slice;
        set_str(o, "tenant", s->tenant);
        set_int(o, "split", s->split);
        set_int(o, "bytes", (int64_t)s->bytes);
        set_int(o, "rows", (int64_t)s->rows);
        set_shards(o, "placement", &s->placement);
        break;
    }
    case FERRY_REC_ROUTE:
        set_str(o, "tenant", r->u.route.tenant);
        set_int(o, "split", r->u.route.split);
        set_shards(o, "shards", &r->u.route.shards);
        break;
    case FERRY_REC_PARTITION: {
        const ferry_partition *p = &r->u.partition;
        set_str(o, "server", p->server);
        set_str(o, "table", p->table);
        set_str(o, "partition_id", p->partition_id);
        set_str(o, "tenant", p->tenant);
        set_int(o, "day", p->day);
        set_int(o, "split", p->split);
        set_str(o, "tier", ferry_tier_name(p->tier));
        set_int(o, "bytes", (int64_t)p->bytes);
        set_int(o, "rows", (int64_t)p->rows);
        break;
    }
    case FERRY_REC_PART: {
        const ferry_part *p = &r->u.part;
        set_str(o, "table", p->table);
        set_str(o, "partition_id", p->partition_id);
        set_str(o, "origin", p->origin);
        set_str(o, "name", p->name);
        set_int(o, "bytes", (int64_t)p->bytes);
        set_int(o, "rows", (int64_t)p->rows);
        set_str(o, "servers", p->servers);
        json_t *a = json_array();
        for (size_t i = 0; i < p->n_objects; i++) {
            json_t *x = json_object();
            set_str(x, "key", p->objects[i].key);
            set_int(x, "size", (int64_t)p->objects[i].size);
            set_str(x, "checksum", p->objects[i].checksum);
            json_array_append_new(a, x);
        }
        json_object_set_new(o, "objects", a);
        break;
    }
    case FERRY_REC_MOVE: {
        const ferry_move *m = &r->u.move;
        set_str(o, "id", m->id);
        set_str(o, "tenant", m->tenant);
        set_int(o, "split", m->split);
        set_shards(o, "from", &m->from);
        set_shards(o, "to", &m->to);
        set_str(o, "state", ferry_move_state_name(m->state));
        set_int(o, "step", m->step);
        set_int(o, "steps", m->steps);
        set_str(o, "owner", m->owner);
        set_str(o, "detail", m->detail);
        set_int(o, "created", m->created);
        set_int(o, "updated", m->updated);
        break;
    }
    case FERRY_REC_JOB: {
        const ferry_job *j = &r->u.job;
        set_str(o, "id", j->id);
        set_str(o, "kind", j->kind);
        set_str(o, "state", j->state);
        set_str(o, "owner", j->owner);
        set_str(o, "detail", j->detail);
        set_str(o, "data", ferry_job_data(j));
        set_int(o, "created", j->created);
        set_int(o, "updated", j->updated);
        break;
    }
    case FERRY_REC_USER: {
        /* the salted hash only: a dump never holds a password */
        const ferry_user *u = &r->u.user;
        set_str(o, "name", u->name);
        set_str(o, "salt", u->salt);
        set_str(o, "hash", u->hash);
        json_object_set_new(o, "admin", json_boolean(u->admin));
        set_str(o, "tenants", u->tenants);
        set_str(o, "tables", u->tables);
        set_str(o, "networks", u->networks);
        set_int(o, "max_concurrent", u->max_concurrent);
        set_int(o, "max_rps", u->max_rps);
        set_int(o, "max_execution_ms", u->max_execution_ms);
        set_int(o, "queue_wait_ms", u->queue_wait_ms);
        break;
    }
    default:
        json_decref(o);
        return NULL;
    }
    return o;
}

char *cat_record_encode(const ferry_record *r)
{
    json_t *o = cat_record_to_json(r);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(o);
    return s;
}

/* ---- decoding (strict: every field present with the right type, nothing else) ---- */

typedef struct dec {
    const json_t *o;
    const char *kind;
    ferry_err *err;
    int rc;
    size_t used;
} dec;

static const json_t *field(dec *d, const char *k)
{
    if (d->rc)
        return NULL;
    const json_t *v = json_object_get(d->o, k);
    if (!v)
        d->rc = ferry_err_set(d->err, FERRY_EINVAL, "%s record: field '%s' is missing", d->kind, k);
    else
        d->used++;
    return v;
}

/* The field k when it is a string; else NULL (absent, or not a string: d->rc set). */
static const json_t *string_field(dec *d, const char *k)
{
    const json_t *v = field(d, k);
    if (v && !json_is_string(v)) {
        d->rc = ferry_err_set(d->err, FERRY_EINVAL, "%s record: '%s' must be a string", d->kind, k);
        return NULL;
    }
    return v;
}

static void get_str(dec *d, const char *k, char *dst, size_t size)
{
    const json_t *v = string_field(d, k);
    if (!v)
        return;
    char what[96];
    snprintf(what, sizeof what, "%s record: '%s'", d->kind, k);
    d->rc = copy_str(dst, size, json_string_value(v), what, d->err);
}

/* A list of shards from its comma-separated text (ferry/shard_set.h's rule). */
static void get_shards(dec *d, const char *k, ferry_shard_set *dst)
{
    const json_t *v = string_field(d, k);
    if (!v)
        return;
    d->rc = ferry_shard_set_parse_stored(dst, json_string_value(v), json_string_length(v), d->err);
    if (d->rc)
        ferry_err_prefix(d->err, "%s record: '%s': ", d->kind, k);
}

static void get_u64(dec *d, const char *k, uint64_t *dst, uint64_t max)
{
    const json_t *v = field(d, k);
    if (!v)
        return;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max) {
        d->rc = ferry_err_set(d->err, FERRY_EINVAL,
                              "%s record: '%s' must be an integer from 0 to %llu", d->kind, k,
                              (unsigned long long)max);
        return;
    }
    *dst = (uint64_t)json_integer_value(v);
}

static void get_u32(dec *d, const char *k, uint32_t *dst)
{
    uint64_t v = 0;
    get_u64(d, k, &v, UINT32_MAX);
    *dst = (uint32_t)v;
}

static void get_i64(dec *d, const char *k, int64_t *dst)
{
    const json_t *v = field(d, k);
    if (!v)
        return;
    if (!json_is_integer(v)) {
        d->rc = ferry_err_set(d->err, FERRY_EINVAL, "%s record: '%s' must be an integer", d->kind, k);
        return;
    }
    *dst = json_integer_value(v);
}

static void get_real(dec *d, const char *k, double *dst)
{
    const json_t *v = field(d, k);
    if (!v)
        return;
    if (!json_is_number(v)) {
        d->rc = ferry_err_set(d->err, FERRY_EINVAL, "%s record: '%s' must be a number", d->kind, k);
        return;
    }
    *dst = json_number_value(v);
}

static void get_bool(dec *d, const char *k, bool *dst)
{
    const json_t *v = field(d, k);
    if (!v)
        return;
    if (!json_is_boolean(v)) {
        d->rc = ferry_err_set(d->err, FERRY_EINVAL, "%s record: '%s' must be true or false",
                              d->kind, k);
        return;
    }
    *dst = json_is_true(v);
}

/* A hex digest field of exactly n lower-case hex digits. */
static void get_hex(dec *d, const char *k, char *dst, size_t n)
{
    get_str(d, k, dst, n + 1);
    if (d->rc)
        return;
    size_t len = strlen(dst);
    for (size_t i = 0; i < len && len == n; i++)
        if (!((dst[i] >= '0' && dst[i] <= '9') || (dst[i] >= 'a' && dst[i] <= 'f')))
            len = 0;
    if (len != n)
        d->rc = ferry_err_set(d->err, FERRY_EINVAL, "%s record: '%s' must be %zu lower-case hex "
                              "digits", d->kind, k, n);
}

static void get_enum(dec *d, const char *k, const char *const *names, size_t n, int *dst)
{
    char buf[32];
    get_str(d, k, buf, sizeof buf);
    if (d->rc)
        return;
    if (enum_parse(names, n, buf, dst)) {
        char allowed[160] = "";
        for (size_t i = 0; i < n; i++) {
            strcat(allowed, i ? ", " : "");
            strcat(allowed, names[i]);
        }
        d->rc = ferry_err_set(d->err, FERRY_EINVAL, "%s record: '%s' is '%s' (expected one of %s)",
                              d->kind, k, buf, allowed);
    }
}

int cat_record_from_json(enum ferry_record_kind kind, const json_t *o, ferry_record *r,
                         ferry_err *err)
{
    ferry_record_init(r, kind);
    if ((unsigned)kind >= FERRY_REC_KIND_COUNT)
        return ferry_err_set(err, FERRY_EINVAL, "unknown record kind %d", (int)kind);
    dec d = {o, kinds[kind].name, err, FERRY_OK, 0};
    if (!json_is_object(o))
        return ferry_err_set(err, FERRY_EINVAL, "%s record: expected a JSON object", d.kind);
    int e = 0;
    switch (kind) {
    case FERRY_REC_SETTINGS: {
        ferry_settings *s = &r->u.settings;
        get_str(&d, "name", s->name, sizeof s->name);
        get_str(&d, "hash", s->hash, sizeof s->hash);
        get_u32(&d, "rf", &s->rf);
        get_real(&d, "fill", &s->fill);
        get_str(&d, "clickhouse_version", s->clickhouse_version, sizeof s->clickhouse_version);
        get_u32(&d, "pointer_format", &s->pointer_format);
        get_u32(&d, "hot_days", &s->hot_days);
        break;
    }
    case FERRY_REC_TABLE: {
        ferry_table_def *t = &r->u.table;
        get_str(&d, "name", t->name, sizeof t->name);
        get_str(&d, "database", t->database, sizeof t->database);
        get_enum(&d, "layout", layouts, NELEM(layouts), &e);
        t->layout = (enum ferry_layout)e;
        get_str(&d, "tenant_column", t->tenant_column, sizeof t->tenant_column);
        get_str(&d, "day_column", t->day_column, sizeof t->day_column);
        get_str(&d, "split_column", t->split_column, sizeof t->split_column);
        if (json_object_get(d.o, "split_key"))
            get_str(&d, "split_key", t->split_key, sizeof t->split_key);
        break;
    }
    case FERRY_REC_SHARD: {
        ferry_shard *s = &r->u.shard;
        get_str(&d, "name", s->name, sizeof s->name);
        get_real(&d, "weight", &s->weight);
        if (json_object_get(d.o, "placed_weight")) {
            get_real(&d, "placed_weight", &s->placed_weight);
            if (!d.rc && !(s->placed_weight > 0 && isfinite(s->placed_weight)))
                d.rc = ferry_err_set(err, FERRY_EINVAL,
                                     "shard record: 'placed_weight' must be a positive number");
        }
        get_u64(&d, "capacity", &s->capacity, INT64_MAX);
        get_str(&d, "replicas", s->replicas, sizeof s->replicas);
        get_str(&d, "agent", s->agent, sizeof s->agent);
        get_str(&d, "zone", s->zone, sizeof s->zone);
        get_enum(&d, "state", shard_states, NELEM(shard_states), &e);
        s->state = (enum ferry_shard_state)e;
        if (json_object_get(d.o, "user"))
            get_str(&d, "user", s->user, sizeof s->user);
        if (json_object_get(d.o, "password_file"))
            get_str(&d, "password_file", s->password_file, sizeof s->password_file);
        if (json_object_get(d.o, "agent_token_file"))
            get_str(&d, "agent_token_file", s->agent_token_file, sizeof s->agent_token_file);
        if (json_object_get(d.o, "data_path"))
            get_str(&d, "data_path", s->data_path, sizeof s->data_path);
        break;
    }
    case FERRY_REC_TENANT:
        get_str(&d, "name", r->u.tenant.name, sizeof r->u.tenant.name);
        get_u32(&d, "splits", &r->u.tenant.splits);
        if (json_object_get(d.o, "rf"))
            get_u32(&d, "rf", &r->u.tenant.rf);
        break;
    case FERRY_REC_SLICE: {
        ferry_slice *s = &r->u.slice;
        get_str(&d, "tenant", s->tenant, sizeof s->tenant);
        get_u32(&d, "split", &s->split);
        get_u64(&d, "bytes", &s->bytes, INT64_MAX);
        get_u64(&d, "rows", &s->rows, INT64_MAX);
        get_shards(&d, "placement", &s->placement);
        break;
    }
    case FERRY_REC_ROUTE:
        get_str(&d, "tenant", r->u.route.tenant, sizeof r->u.route.tenant);
        get_u32(&d, "split", &r->u.route.split);
        get_shards(&d, "shards", &r->u.route.shards);
        break;
    case FERRY_REC_PARTITION: {
        ferry_partition *p = &r->u.partition;
        get_str(&d, "server", p->server, sizeof p->server);
        get_str(&d, "table", p->table, sizeof p->table);
        get_str(&d, "partition_id", p->partition_id, sizeof p->partition_id);
        get_str(&d, "tenant", p->tenant, sizeof p->tenant);
        get_u32(&d, "day", &p->day);
        get_u32(&d, "split", &p->split);
        get_enum(&d, "tier", tiers, NELEM(tiers), &e);
        p->tier = (enum ferry_tier)e;
        get_u64(&d, "bytes", &p->bytes, INT64_MAX);
        get_u64(&d, "rows", &p->rows, INT64_MAX);
        break;
    }
    case FERRY_REC_PART: {
        ferry_part *p = &r->u.part;
        get_str(&d, "table", p->table, sizeof p->table);
        get_str(&d, "partition_id", p->partition_id, sizeof p->partition_id);
        get_str(&d, "origin", p->origin, sizeof p->origin);
        get_str(&d, "name", p->name, sizeof p->name);
        get_u64(&d, "bytes", &p->bytes, INT64_MAX);
        get_u64(&d, "rows", &p->rows, INT64_MAX);
        get_str(&d, "servers", p->servers, sizeof p->servers);
        const json_t *a = field(&d, "objects");
        if (d.rc)
            break;
        if (!json_is_array(a)) {
            d.rc = ferry_err_set(err, FERRY_EINVAL, "part record: 'objects' must be an array");
            break;
        }
        for (size_t i = 0; i < json_array_size(a) && !d.rc; i++) {
            ferry_cold_object x = {0};
            dec od = {json_array_get(a, i), "part object", err, FERRY_OK, 0};
            if (!json_is_object(od.o)) {
                d.rc = ferry_err_set(err, FERRY_EINVAL, "part record: objects[%zu] must be an object", i);
                break;
            }
            get_str(&od, "key", x.key, sizeof x.key);
            get_u64(&od, "size", &x.size, INT64_MAX);
            get_str(&od, "checksum", x.checksum, sizeof x.checksum);
            if (!od.rc && od.used != json_object_size(od.o))
                od.rc = ferry_err_set(err, FERRY_EINVAL, "part record: objects[%zu] has unknown fields", i);
            d.rc = od.rc;
            if (!d.rc)
                d.rc = ferry_part_add_object(p, x.key, x.size, x.checksum, err);
        }
        break;
    }
    case FERRY_REC_MOVE: {
        ferry_move *m = &r->u.move;
        get_str(&d, "id", m->id, sizeof m->id);
        get_str(&d, "tenant", m->tenant, sizeof m->tenant);
        get_u32(&d, "split", &m->split);
        get_shards(&d, "from", &m->from);
        get_shards(&d, "to", &m->to);
        get_enum(&d, "state", move_states, NELEM(move_states), &e);
        m->state = (enum ferry_move_state)e;
        get_u32(&d, "step", &m->step);
        get_u32(&d, "steps", &m->steps);
        get_str(&d, "owner", m->owner, sizeof m->owner);
        get_str(&d, "detail", m->detail, sizeof m->detail);
        get_i64(&d, "created", &m->created);
        get_i64(&d, "updated", &m->updated);
        break;
    }
    case FERRY_REC_JOB: {
        ferry_job *j = &r->u.job;
        get_str(&d, "id", j->id, sizeof j->id);
        get_str(&d, "kind", j->kind, sizeof j->kind);
        get_str(&d, "state", j->state, sizeof j->state);
        get_str(&d, "owner", j->owner, sizeof j->owner);
        get_str(&d, "detail", j->detail, sizeof j->detail);
        const json_t *data = string_field(&d, "data");
        if (data && !d.rc)
            d.rc = ferry_job_set_data(j, json_string_value(data), d.err);
        get_i64(&d, "created", &j->created);
        get_i64(&d, "updated", &j->updated);
        break;
    }
    case FERRY_REC_USER: {
        ferry_user *u = &r->u.user;
        get_str(&d, "name", u->name, sizeof u->name);
        get_hex(&d, "salt", u->salt, sizeof u->salt - 1);
        get_hex(&d, "hash", u->hash, sizeof u->hash - 1);
        get_bool(&d, "admin", &u->admin);
        get_str(&d, "tenants", u->tenants, sizeof u->tenants);
        get_str(&d, "tables", u->tables, sizeof u->tables);
        get_str(&d, "networks", u->networks, sizeof u->networks);
        get_u32(&d, "max_concurrent", &u->max_concurrent);
        get_u32(&d, "max_rps", &u->max_rps);
        get_u32(&d, "max_execution_ms", &u->max_execution_ms);
        get_u32(&d, "queue_wait_ms", &u->queue_wait_ms);
        break;
    }
    default:
        break;
    }
    if (!d.rc && d.used != json_object_size(o))
        d.rc = ferry_err_set(err, FERRY_EINVAL, "%s record has unknown fields", d.kind);
    if (!d.rc) {
        char path[1024];
        d.rc = cat_record_path(r, path, sizeof path, err);
    }
    if (d.rc)
        ferry_record_free(r);
    return d.rc;
}

int cat_record_decode(enum ferry_record_kind kind, const char *doc, ferry_record *r,
                      ferry_err *err)
{
    json_error_t je;
    json_t *o = json_loads(doc, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        ferry_record_init(r, kind);
        return ferry_err_set(err, FERRY_EINVAL, "%s record is not valid JSON: %s",
                             ferry_record_kind_name(kind), je.text);
    }
    int rc = cat_record_from_json(kind, o, r, err);
    json_decref(o);
    return rc;
}

int cat_items_push(cat_items *l, const char *path, const char *doc, size_t doc_len,
                   int64_t version)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        cat_item *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return FERRY_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    cat_item *it = &l->v[l->n];
    it->path = strdup(path);
    it->doc = ferry_strndup(doc, doc_len);
    if (!it->path || !it->doc) {
        free(it->path);
        free(it->doc);
        return FERRY_ENOMEM;
    }
    it->version = version;
    l->n++;
    return FERRY_OK;
}

void cat_item_free(cat_item *it)
{
    free(it->path);
    free(it->doc);
    it->path = it->doc = NULL;
}

void cat_items_free(cat_items *l)
{
    for (size_t i = 0; i < l->n; i++)
        cat_item_free(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

int cat_flat_span(cat_flat *f, const cat_span *s)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 1024;
        cat_span *v = realloc(f->v, cap * sizeof *v);
        if (!v)
            return FERRY_ENOMEM;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = *s;
    return FERRY_OK;
}

int cat_flat_block(cat_flat *f, char *block)
{
    if (f->n_blocks == f->cap_blocks) {
        size_t cap = f->cap_blocks ? f->cap_blocks * 2 : 1024;
        char **v = realloc(f->blocks, cap * sizeof *v);
        if (!v) {
            free(block);
            return FERRY_ENOMEM;
        }
        f->blocks = v;
        f->cap_blocks = cap;
    }
    f->blocks[f->n_blocks++] = block;
    return FERRY_OK;
}

int cat_flat_take_items(cat_flat *f, cat_items *items, size_t dir_len)
{
    int rc = FERRY_OK;
    for (size_t i = 0; i < items->n; i++) {
        cat_item *it = &items->v[i];
        char *path = it->path, *doc = it->doc;
        it->path = it->doc = NULL;
        if (rc) { /* an earlier one failed: give the rest back */
            free(path);
            free(doc);
            continue;
        }
        if ((rc = cat_flat_block(f, path))) { /* path was freed */
            free(doc);
            continue;
        }
        if ((rc = cat_flat_block(f, doc)))
            continue;
        const char *m = path + dir_len + (path[dir_len] == '/');
        const char *slash = strrchr(m, '/');
        cat_span s = {.mid = m, .mid_len = slash ? (uint32_t)(slash - m) : 0,
                      .name = slash ? slash + 1 : m, .doc = doc, .version = it->version};
        s.name_len = (uint32_t)strlen(s.name);
        s.doc_len = (uint32_t)strlen(doc);
        rc = cat_flat_span(f, &s);
    }
    cat_items_free(items);
    return rc;
}

void cat_flat_free(cat_flat *f)
{
    for (size_t i = 0; i < f->n_blocks; i++)
        free(f->blocks[i]);
    free(f->blocks);
    free(f->v);
    memset(f, 0, sizeof *f);
}
