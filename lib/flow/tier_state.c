/* A tiering job's journal state (tier_state.h): the JSON data of its job record decoded into a
 * typed record and encoded back byte for byte as ferry wrote it when the state was a jansson
 * object (compact, keys sorted, the same types), with the keys this version does not know kept.
 * The keys are one table (KEYS) that both directions read, so a key is named once. */
#include "flow/tier_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"

/* How a key's value is held: a string in a char array; an unsigned 32-bit or a signed 64-bit
 * integer; a flag (written when true, or by its has_ field); the hot list; the fingerprint. */
enum key_kind { K_STR, K_U32, K_I64, K_FLAG, K_HOT, K_FP };

typedef struct key_def {
    const char *name;
    enum key_kind kind;
    size_t off;  /* of the value in tier_state */
    size_t size; /* of a string's array */
    size_t has;  /* of its has_ field; NO_HAS: presence follows the value */
} key_def;

#define NO_HAS SIZE_MAX
#define FIELD(f) offsetof(tier_state, f)
#define STR(key, f) {key, K_STR, FIELD(f), sizeof ((tier_state *)0)->f, NO_HAS}
#define HAS(key, kind, f) {key, kind, FIELD(f), 0, FIELD(has_##f)}

static const key_def KEYS[] = {
    STR("server", server),
    STR("db", db),
    STR("table", table),
    STR("catalog_table", catalog_table),
    STR("pid", pid),
    STR("partition", partition),
    STR("tenant", tenant),
    HAS("day", K_U32, day),
    HAS("split", K_U32, split),
    HAS("attempt", K_U32, attempt),
    STR("freeze", freeze),
    {"merges_stopped", K_FLAG, FIELD(merges_stopped), 0, NO_HAS},
    HAS("hot", K_HOT, hot),
    HAS("hot_in", K_U32, hot_in),
    HAS("hashed", K_FLAG, hashed),
    HAS("fp", K_FP, fp),
    HAS("max_block", K_I64, max_block),
    STR("swap", swap),
    HAS("swapped", K_FLAG, swapped),
    {"recorded", K_FLAG, FIELD(recorded), 0, NO_HAS},
    {"rolled_back", K_FLAG, FIELD(rolled_back), 0, NO_HAS},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

#define AT(st, off, type) ((type *)((char *)(st) + (off)))
#define AT_C(st, off, type) ((const type *)((const char *)(st) + (off)))

static const key_def *key_find(const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(KEYS[i].name, name))
            return &KEYS[i];
    return NULL;
}

static int wrong_type(const char *key, const char *want, ferry_err *err)
{
    return ferry_err_set(err, FERRY_EINVAL, "tier job data: \"%s\" must be %s", key, want);
}

/* ---- decoding --------------------------------------------------------------------------------- */

static int decode_hot(tier_state *st, json_t *v, ferry_err *err)
{
    size_t i;
    json_t *h;
    if (!json_is_array(v))
        return wrong_type("hot", "an array of part names", err);
    json_array_foreach(v, i, h) {
        if (!json_is_string(h))
            return ferry_err_set(err, FERRY_EINVAL, "tier job data: \"hot\" item %zu must be a "
                                 "string (a part name)", i);
        int rc = tier_state_hot_add(st, json_string_value(h), err);
        if (rc)
            return rc;
    }
    st->has_hot = true; /* an empty list too */
    return FERRY_OK;
}

/* fp: rows an integer; sum, xor, distinct 64-bit unsigned numbers as decimal strings (JSON
 * integers are signed); by "parts". Other keys are kept in fp_unknown. */
static int decode_fp(tier_state *st, json_t *v, ferry_err *err)
{
    static const char *const dec[] = {"sum", "xor", "distinct"};
    uint64_t *field[] = {&st->fp.hash_sum, &st->fp.hash_xor, &st->fp.distinct};
    const char *key;
    json_t *x;
    if (!json_is_object(v))
        return wrong_type("fp", "an object {rows, sum, xor, distinct[, by]}", err);
    json_object_foreach(v, key, x) {
        size_t d = 0;
        while (d < 3 && strcmp(dec[d], key))
            d++;
        if (!strcmp(key, "rows")) {
            if (!json_is_integer(x))
                return wrong_type("fp.rows", "an integer", err);
            st->fp.rows = (uint64_t)json_integer_value(x);
        } else if (d < 3) {
            if (!json_is_string(x) || !ferry_parse_u64(json_string_value(x), field[d]))
                return ferry_err_set(err, FERRY_EINVAL, "tier job data: \"fp.%s\" must be a "
                                     "string of a 64-bit unsigned decimal number", key);
        } else if (!strcmp(key, "by") && json_is_string(x) &&
                   !strcmp(json_string_value(x), "parts")) {
            st->fp_by_parts = true;
        } else if (!strcmp(key, "by") && !json_is_string(x)) {
            return wrong_type("fp.by", "a string", err);
        } else { /* another "by" of a later version, or a key this one does not know */
            if (!st->fp_unknown && !(st->fp_unknown = json_object()))
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            if (json_object_set(st->fp_unknown, key, x))
                return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
    }
    st->has_fp = true;
    return FERRY_OK;
}

static int decode_key(tier_state *st, const key_def *k, json_t *v, ferry_err *err)
{
    switch (k->kind) {
    case K_STR: {
        const char *s = json_string_value(v);
        if (!json_is_string(v))
            return wrong_type(k->name, "a string", err);
        if (strlen(s) >= k->size)
            return ferry_err_set(err, FERRY_EINVAL, "tier job data: \"%s\" is longer than %zu "
                                 "bytes", k->name, k->size - 1);
        memcpy(AT(st, k->off, char), s, strlen(s) + 1);
        return FERRY_OK;
    }
    case K_U32:
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > UINT32_MAX)
            return wrong_type(k->name, "an integer from 0 to 4294967295", err);
        *AT(st, k->off, uint32_t) = (uint32_t)json_integer_value(v);
        break;
    case K_I64:
        if (!json_is_integer(v))
            return wrong_type(k->name, "an integer", err);
        *AT(st, k->off, int64_t) = (int64_t)json_integer_value(v);
        break;
    case K_FLAG:
        if (!json_is_boolean(v))
            return wrong_type(k->name, "true or false", err);
        *AT(st, k->off, bool) = json_is_true(v);
        break;
    case K_HOT:
        return decode_hot(st, v, err);
    case K_FP:
        return decode_fp(st, v, err);
    }
    if (k->has != NO_HAS)
        *AT(st, k->has, bool) = true;
    return FERRY_OK;
}

int tier_state_decode(const char *json, tier_state *st, ferry_err *err)
{
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    const char *key;
    json_t *v;
    int rc = FERRY_OK;
    memset(st, 0, sizeof *st);
    if (!json_is_object(root)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "tier job data is not a JSON object%s%s",
                           root ? "" : ": ", root ? "" : je.text);
        goto out;
    }
    json_object_foreach(root, key, v) {
        const key_def *k = key_find(key);
        if (k) {
            rc = decode_key(st, k, v, err);
        } else { /* a later version's key: written back as it is */
            if (!st->unknown && !(st->unknown = json_object()))
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
            else if (json_object_set(st->unknown, key, v))
                rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        }
        if (rc)
            break;
    }
out:
    if (rc)
        tier_state_free(st);
    json_decref(root);
    return rc;
}

/* ---- encoding --------------------------------------------------------------------------------- */

/* The fp object as ferry has always written it: {"rows": N, "sum": "N", "xor": "N",
 * "distinct": "N"}, "by": "parts" when by part hashes; the keys it did not know kept. */
static json_t *encode_fp(const tier_state *st)
{
    char s[3][24];
    snprintf(s[0], sizeof s[0], "%" PRIu64, st->fp.hash_sum);
    snprintf(s[1], sizeof s[1], "%" PRIu64, st->fp.hash_xor);
    snprintf(s[2], sizeof s[2], "%" PRIu64, st->fp.distinct);
    json_t *o = json_object();
    if (!o || (st->fp_unknown && json_object_update(o, st->fp_unknown)) ||
        json_object_set_new(o, "rows", json_integer((json_int_t)st->fp.rows)) ||
        json_object_set_new(o, "sum", json_string(s[0])) ||
        json_object_set_new(o, "xor", json_string(s[1])) ||
        json_object_set_new(o, "distinct", json_string(s[2])) ||
        (st->fp_by_parts && json_object_set_new(o, "by", json_string("parts")))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The value of key k in st as JSON (a new reference); NULL with *absent when st does not hold
 * it, NULL alone when it cannot be made (out of memory, a string that is not UTF-8). */
static json_t *encode_key(const tier_state *st, const key_def *k, bool *absent)
{
    *absent = k->has != NO_HAS && !*AT_C(st, k->has, bool);
    switch (k->kind) {
    case K_STR:
        *absent = !*AT_C(st, k->off, char);
        return *absent ? NULL : json_string(AT_C(st, k->off, char));
    case K_FLAG:
        *absent = *absent || (k->has == NO_HAS && !*AT_C(st, k->off, bool));
        return *absent ? NULL : json_boolean(*AT_C(st, k->off, bool));
    case K_U32:
        return *absent ? NULL : json_integer((json_int_t)*AT_C(st, k->off, uint32_t));
    case K_I64:
        return *absent ? NULL : json_integer((json_int_t)*AT_C(st, k->off, int64_t));
    case K_FP:
        return *absent ? NULL : encode_fp(st);
    case K_HOT:
        break;
    }
    if (*absent)
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; a && i < st->n_hot; i++)
        if (json_array_append_new(a, json_string(st->hot[i]))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

int tier_state_encode(const tier_state *st, char **json_out, ferry_err *err)
{
    json_t *o = json_object();
    int rc = o ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    *json_out = NULL;
    if (!rc && st->unknown && json_object_update(o, st->unknown))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < N_KEYS; i++) {
        bool absent;
        json_t *v = encode_key(st, &KEYS[i], &absent);
        if (!absent && (!v || json_object_set_new(o, KEYS[i].name, v)))
            rc = ferry_err_set(err, FERRY_EINVAL, "tier job data: \"%s\" cannot be written "
                               "(not UTF-8, or out of memory)", KEYS[i].name);
    }
    if (!rc && !(*json_out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS)))
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    json_decref(o);
    return rc;
}

/* ---- the rest --------------------------------------------------------------------------------- */

void tier_state_free(tier_state *st)
{
    tier_state_hot_clear(st);
    json_decref(st->fp_unknown);
    json_decref(st->unknown);
    memset(st, 0, sizeof *st);
}

/* Copies s into a key's array; FERRY_EINVAL naming the key when it does not fit. */
static int put_str(char *out, size_t size, const char *key, const char *s, ferry_err *err)
{
    size_t len = strlen(s);
    if (len >= size)
        return ferry_err_set(err, FERRY_EINVAL, "tier job data: \"%s\" is longer than %zu bytes",
                             key, size - 1);
    memcpy(out, s, len + 1);
    return FERRY_OK;
}

int tier_state_plan(tier_state *st, const char *server, const char *db, const char *table,
                    const char *catalog_table, const char *pid, const char *partition,
                    const char *tenant, uint32_t day, uint32_t split, ferry_err *err)
{
    memset(st, 0, sizeof *st);
    int rc = put_str(st->server, sizeof st->server, "server", server, err);
    if (!rc)
        rc = put_str(st->db, sizeof st->db, "db", db, err);
    if (!rc)
        rc = put_str(st->table, sizeof st->table, "table", table, err);
    if (!rc)
        rc = put_str(st->catalog_table, sizeof st->catalog_table, "catalog_table", catalog_table,
                     err);
    if (!rc)
        rc = put_str(st->pid, sizeof st->pid, "pid", pid, err);
    if (!rc)
        rc = put_str(st->partition, sizeof st->partition, "partition", partition, err);
    if (!rc)
        rc = put_str(st->tenant, sizeof st->tenant, "tenant", tenant, err);
    st->day = day;
    st->split = split;
    st->has_day = st->has_split = st->has_attempt = true; /* attempt 0 */
    return rc;
}

void tier_state_identity(const tier_state *from, tier_state *to)
{
    memset(to, 0, sizeof *to);
    memcpy(to->server, from->server, sizeof to->server);
    memcpy(to->db, from->db, sizeof to->db);
    memcpy(to->table, from->table, sizeof to->table);
    memcpy(to->catalog_table, from->catalog_table, sizeof to->catalog_table);
    memcpy(to->pid, from->pid, sizeof to->pid);
    memcpy(to->partition, from->partition, sizeof to->partition);
    memcpy(to->tenant, from->tenant, sizeof to->tenant);
    to->day = from->day;
    to->has_day = from->has_day;
    to->split = from->split;
    to->has_split = from->has_split;
    to->attempt = from->attempt;
    to->has_attempt = from->has_attempt;
}

int tier_state_hot_add(tier_state *st, const char *name, ferry_err *err)
{
    char **h = realloc(st->hot, (st->n_hot + 1) * sizeof *h);
    char *copy = strdup(name);
    if (h)
        st->hot = h;
    if (!h || !copy) {
        free(copy);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    st->hot[st->n_hot++] = copy;
    st->has_hot = true;
    return FERRY_OK;
}

void tier_state_hot_clear(tier_state *st)
{
    for (size_t i = 0; i < st->n_hot; i++)
        free(st->hot[i]);
    free(st->hot);
    st->hot = NULL;
    st->n_hot = 0;
    st->has_hot = false;
}

bool tier_state_hot_has(const tier_state *st, const char *name)
{
    for (size_t i = 0; i < st->n_hot; i++)
        if (!strcmp(st->hot[i], name))
            return true;
    return false;
}

void tier_state_set_fp(tier_state *st, const ferry_fingerprint *fp, bool by_parts)
{
    json_decref(st->fp_unknown);
    st->fp_unknown = NULL;
    memset(&st->fp, 0, sizeof st->fp);
    st->fp.rows = fp->rows;
    st->fp.hash_sum = fp->hash_sum;
    st->fp.hash_xor = fp->hash_xor;
    st->fp.distinct = fp->distinct;
    st->fp_by_parts = by_parts;
    st->has_fp = true;
}
