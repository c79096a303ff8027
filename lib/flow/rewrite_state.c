/* A rewrite job's journal state (rewrite_state.h): the JSON data of its job record decoded into
 * a typed record and encoded back byte for byte as ferry wrote it when the state was a jansson
 * object (compact, keys sorted, the same types), with the keys this version does not know kept.
 * The keys are one table (KEYS) that both directions read, so a key is named once. */
#include "flow/rewrite_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a key's value is held: a string in a char array, or on the heap (NULL: absent); an
 * unsigned 32- or 64-bit integer; a flag; a list of names. */
enum rw_kind { RW_STR, RW_HEAP, RW_U32, RW_U64, RW_FLAG, RW_NAMES };

typedef struct rw_key {
    const char *name;
    enum rw_kind kind;
    size_t off;  /* of the value in rw_state */
    size_t size; /* of a char array */
    size_t has;  /* of its has_ field; NO_HAS: presence follows the value */
} rw_key;

#define NO_HAS SIZE_MAX
#define AT_OF(f) offsetof(rw_state, f)
#define ARRAY(key, f) {key, RW_STR, AT_OF(f), sizeof ((rw_state *)0)->f, NO_HAS}
#define HEAP(key, f) {key, RW_HEAP, AT_OF(f), 0, NO_HAS}
#define WITH_HAS(key, kind, f) {key, kind, AT_OF(f), 0, AT_OF(has_##f)}

static const rw_key KEYS[] = {
    ARRAY("server", server),
    ARRAY("db", db),
    ARRAY("table", table),
    ARRAY("catalog_table", catalog_table),
    ARRAY("pid", pid),
    ARRAY("tenant", tenant),
    WITH_HAS("day", RW_U32, day),
    WITH_HAS("split", RW_U32, split),
    ARRAY("mode", mode),
    HEAP("expr", expr),
    ARRAY("col", col),
    HEAP("where", where),
    WITH_HAS("rows_before", RW_U64, rows_before),
    WITH_HAS("rows_matched", RW_U64, rows_matched),
    WITH_HAS("rows_after", RW_U64, rows_after),
    ARRAY("src", src),
    WITH_HAS("src_n", RW_U64, src_n),
    WITH_HAS("old", RW_NAMES, old),
    WITH_HAS("swapped", RW_FLAG, swapped),
    ARRAY("swap", swap),
    WITH_HAS("src_parts", RW_NAMES, src_parts),
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

#define FIELD_AT(st, off, type) ((type *)((char *)(st) + (off)))
#define FIELD_AT_C(st, off, type) ((const type *)((const char *)(st) + (off)))

static int bad_type(const char *key, const char *want, ferry_err *err)
{
    return ferry_err_set(err, FERRY_EINVAL, "rewrite job data: \"%s\" must be %s", key, want);
}

static int no_memory(ferry_err *err)
{
    return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
}

/* ---- decoding -------------------------------------------------------------------------------- */

static int decode_names(rw_names *l, const char *key, json_t *v, ferry_err *err)
{
    size_t i;
    json_t *s;
    if (!json_is_array(v))
        return bad_type(key, "an array of strings", err);
    json_array_foreach(v, i, s) {
        if (!json_is_string(s))
            return ferry_err_set(err, FERRY_EINVAL, "rewrite job data: \"%s\" item %zu must be "
                                 "a string", key, i);
        int rc = rw_names_add(l, json_string_value(s), err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

static int decode_one(rw_state *st, const rw_key *k, json_t *v, ferry_err *err)
{
    const char *s = json_string_value(v);
    json_int_t n = json_integer_value(v);
    int rc = FERRY_OK;
    switch (k->kind) {
    case RW_STR:
        if (!s)
            return bad_type(k->name, "a string", err);
        if (strlen(s) >= k->size)
            return ferry_err_set(err, FERRY_EINVAL, "rewrite job data: \"%s\" is longer than %zu "
                                 "bytes", k->name, k->size - 1);
        memcpy(FIELD_AT(st, k->off, char), s, strlen(s) + 1);
        return FERRY_OK;
    case RW_HEAP: {
        char **to = FIELD_AT(st, k->off, char *);
        if (!s)
            return bad_type(k->name, "a string", err);
        free(*to);
        return (*to = strdup(s)) ? FERRY_OK : no_memory(err);
    }
    case RW_U32:
        if (!json_is_integer(v) || n < 0 || n > UINT32_MAX)
            return bad_type(k->name, "an integer from 0 to 4294967295", err);
        *FIELD_AT(st, k->off, uint32_t) = (uint32_t)n;
        break;
    case RW_U64: /* counts ferry wrote from 64-bit unsigned values, all below 2^63 */
        if (!json_is_integer(v) || n < 0)
            return bad_type(k->name, "an integer from 0", err);
        *FIELD_AT(st, k->off, uint64_t) = (uint64_t)n;
        break;
    case RW_FLAG:
        if (!json_is_boolean(v))
            return bad_type(k->name, "true or false", err);
        *FIELD_AT(st, k->off, bool) = json_is_true(v);
        break;
    case RW_NAMES:
        rc = decode_names(FIELD_AT(st, k->off, rw_names), k->name, v, err);
        break;
    }
    if (!rc && k->has != NO_HAS)
        *FIELD_AT(st, k->has, bool) = true;
    return rc;
}

/* Keeps a key this version does not know, to write it back as it is. */
static int keep_unknown(rw_state *st, const char *key, json_t *v, ferry_err *err)
{
    if (!st->unknown && !(st->unknown = json_object()))
        return no_memory(err);
    return json_object_set(st->unknown, key, v) ? no_memory(err) : FERRY_OK;
}

int rw_state_decode(const char *json, rw_state *st, ferry_err *err)
{
    json_error_t je;
    /* a record written without data (none of ferry's) reads as a job that knows nothing yet */
    json_t *root = json_loads(json && *json ? json : "{}", 0, &je);
    const char *key;
    json_t *v;
    int rc = FERRY_OK;
    memset(st, 0, sizeof *st);
    if (!json_is_object(root)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "rewrite job data is not a JSON object%s%s",
                           root ? "" : ": ", root ? "" : je.text);
        goto out;
    }
    json_object_foreach(root, key, v) {
        const rw_key *k = NULL;
        for (size_t i = 0; i < N_KEYS && !k; i++)
            if (!strcmp(KEYS[i].name, key))
                k = &KEYS[i];
        rc = k ? decode_one(st, k, v, err) : keep_unknown(st, key, v, err);
        if (rc)
            break;
    }
out:
    if (rc)
        rw_state_free(st);
    json_decref(root);
    return rc;
}

/* ---- encoding -------------------------------------------------------------------------------- */

static json_t *names_json(const rw_names *l)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->n; i++)
        if (json_array_append_new(a, json_string(l->v[i]))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

/* Whether st holds key k (is written). */
static bool holds(const rw_state *st, const rw_key *k)
{
    if (k->kind == RW_STR)
        return *FIELD_AT_C(st, k->off, char) != '\0';
    if (k->kind == RW_HEAP)
        return *FIELD_AT_C(st, k->off, char *) != NULL;
    return *FIELD_AT_C(st, k->has, bool);
}

/* The value of key k, which st holds, as JSON (a new reference); NULL when it cannot be made
 * (out of memory, a string that is not UTF-8). */
static json_t *encode_one(const rw_state *st, const rw_key *k)
{
    switch (k->kind) {
    case RW_STR:
        return json_string(FIELD_AT_C(st, k->off, char));
    case RW_HEAP:
        return json_string(*FIELD_AT_C(st, k->off, char *));
    case RW_U32:
        return json_integer((json_int_t)*FIELD_AT_C(st, k->off, uint32_t));
    case RW_U64:
        return json_integer((json_int_t)*FIELD_AT_C(st, k->off, uint64_t));
    case RW_FLAG:
        return json_boolean(*FIELD_AT_C(st, k->off, bool));
    case RW_NAMES:
        return names_json(FIELD_AT_C(st, k->off, rw_names));
    }
    return NULL;
}

int rw_state_encode(const rw_state *st, char **json_out, ferry_err *err)
{
    json_t *o = json_object();
    int rc = FERRY_OK;
    *json_out = NULL;
    if (!o || (st->unknown && json_object_update(o, st->unknown))) {
        rc = no_memory(err);
        goto out;
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        if (!holds(st, &KEYS[i]))
            continue;
        json_t *v = encode_one(st, &KEYS[i]);
        if (!v || json_object_set_new(o, KEYS[i].name, v)) {
            rc = ferry_err_set(err, FERRY_EINVAL, "rewrite job data: \"%s\" cannot be written "
                               "(not UTF-8, or out of memory)", KEYS[i].name);
            goto out;
        }
    }
    if (!(*json_out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS)))
        rc = no_memory(err);
out:
    json_decref(o);
    return rc;
}

/* ---- the rest -------------------------------------------------------------------------------- */

void rw_state_free(rw_state *st)
{
    free(st->expr);
    free(st->where);
    rw_names_free(&st->old);
    rw_names_free(&st->src_parts);
    json_decref(st->unknown);
    memset(st, 0, sizeof *st);
}

/* Copies s into the array of key; FERRY_EINVAL naming the key when it does not fit (the array
 * is then as it was). */
static int copy_to(char *to, size_t size, const char *key, const char *s, ferry_err *err)
{
    size_t len = strlen(s);
    if (len >= size)
        return ferry_err_set(err, FERRY_EINVAL, "rewrite job data: \"%s\" is longer than %zu "
                             "bytes", key, size - 1);
    memcpy(to, s, len + 1);
    return FERRY_OK;
}

#define COPY(st, f, s, err) copy_to((st)->f, sizeof (st)->f, #f, s, err)

int rw_state_plan(rw_state *st, const char *server, const char *db, const char *table,
                  const char *catalog_table, const char *pid, const char *tenant, uint32_t day,
                  uint32_t split, ferry_err *err)
{
    int rc;
    memset(st, 0, sizeof *st);
    if ((rc = COPY(st, server, server, err)) || (rc = COPY(st, db, db, err)) ||
        (rc = COPY(st, table, table, err)) ||
        (rc = COPY(st, catalog_table, catalog_table, err)) || (rc = COPY(st, pid, pid, err)) ||
        (rc = COPY(st, tenant, tenant, err)))
        return rc;
    st->day = day;
    st->split = split;
    st->has_day = st->has_split = true;
    return FERRY_OK;
}

int rw_state_set_change(rw_state *st, const char *update_col, const char *expr,
                        const char *where, ferry_err *err)
{
    bool upd = update_col != NULL;
    int rc = COPY(st, col, upd ? update_col : "", err); /* first: on an error st is unchanged */
    if (rc)
        return rc;
    snprintf(st->mode, sizeof st->mode, "%s", upd ? "update" : "delete");
    free(st->expr);
    free(st->where);
    st->expr = expr ? strdup(expr) : NULL;
    st->where = upd && where ? strdup(where) : NULL;
    if ((expr && !st->expr) || (upd && where && !st->where))
        return no_memory(err);
    return FERRY_OK;
}

bool rw_state_is_update(const rw_state *st)
{
    return !strcmp(st->mode, "update");
}

int rw_names_add(rw_names *l, const char *name, ferry_err *err)
{
    char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    char *copy = strdup(name);
    if (v)
        l->v = v;
    if (!v || !copy) {
        free(copy);
        return no_memory(err);
    }
    l->v[l->n++] = copy;
    return FERRY_OK;
}

bool rw_names_has(const rw_names *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], name))
            return true;
    return false;
}

void rw_names_free(rw_names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}
