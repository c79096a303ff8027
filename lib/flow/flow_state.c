/* The codec of the flows' typed journal states (flow_state.h): a job's JSON data decoded into a
 * struct by a table of keys and encoded back as ferry has always written it (compact, keys
 * sorted, each kind with its JSON type), the keys the table does not know kept as they were. */
#include "flow/flow_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(st, off, type) ((type *)((char *)(st) + (off)))
#define AT_C(st, off, type) ((type const *)((const char *)(st) + (off)))

static int oom(ferry_err *err) { return ferry_err_set(err, FERRY_ENOMEM, "out of memory"); }

int flow_state_wrong_type(const flow_state_desc *d, const char *key, const char *want,
                          ferry_err *err)
{
    return ferry_err_set(err, FERRY_EINVAL, "%s: \"%s\" must be %s", d->what, key, want);
}

int flow_state_unwritable(const flow_state_desc *d, const char *key, ferry_err *err)
{
    return ferry_err_set(err, FERRY_EINVAL, "%s: \"%s\" cannot be written (not UTF-8, or out "
                         "of memory)", d->what, key);
}

int flow_state_keep(json_t **unknown, const char *key, json_t *v, ferry_err *err)
{
    if (!*unknown && !(*unknown = json_object()))
        return oom(err);
    return json_object_set(*unknown, key, v) ? oom(err) : FERRY_OK;
}

static const flow_key *key_find(const flow_state_desc *d, const char *name)
{
    for (size_t i = 0; i < d->n_keys; i++)
        if (!strcmp(d->keys[i].name, name))
            return &d->keys[i];
    return NULL;
}

/* Copies s into key k's array; FERRY_EINVAL naming the key when it does not fit. */
static int put_str(const flow_state_desc *d, void *st, const flow_key *k, const char *s,
                   ferry_err *err)
{
    size_t len = strlen(s);
    if (len >= k->size)
        return ferry_err_set(err, FERRY_EINVAL, "%s: \"%s\" is longer than %zu bytes", d->what,
                             k->name, k->size - 1);
    memcpy(AT(st, k->off, char), s, len + 1);
    return FERRY_OK;
}

/* ---- names ----------------------------------------------------------------------------------- */

int flow_names_add(char ***v, size_t *n, const char *name, ferry_err *err)
{
    char **grown = realloc(*v, (*n + 1) * sizeof *grown);
    char *copy = strdup(name);
    if (grown)
        *v = grown;
    if (!grown || !copy) {
        free(copy);
        return oom(err);
    }
    (*v)[(*n)++] = copy;
    return FERRY_OK;
}

bool flow_names_has(char *const *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], name))
            return true;
    return false;
}

void flow_names_free(char ***v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
    *n = 0;
}

/* ---- decoding -------------------------------------------------------------------------------- */

/* A list: an array of strings, appended to the row's names. */
static int decode_list(const flow_state_desc *d, void *st, const flow_key *k, json_t *v,
                       ferry_err *err)
{
    char ***names = AT(st, k->off, char **);
    size_t *n = AT(st, k->count, size_t);
    size_t i;
    json_t *s;
    if (!json_is_array(v)) {
        char want[64];
        snprintf(want, sizeof want, "an array of %ss", k->item ? k->item : "string");
        return flow_state_wrong_type(d, k->name, want, err);
    }
    json_array_foreach(v, i, s) {
        if (!json_is_string(s))
            return ferry_err_set(err, FERRY_EINVAL, "%s: \"%s\" item %zu must be a string%s%s%s",
                                 d->what, k->name, i, k->item ? " (a " : "",
                                 k->item ? k->item : "", k->item ? ")" : "");
        int rc = flow_names_add(names, n, json_string_value(s), err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

static int decode_key(const flow_state_desc *d, void *st, const flow_key *k, json_t *v,
                      ferry_err *err)
{
    const char *s = json_string_value(v);
    json_int_t n = json_integer_value(v);
    int rc = FERRY_OK;
    switch (k->kind) {
    case FLOW_STR:
        rc = s ? put_str(d, st, k, s, err) : flow_state_wrong_type(d, k->name, "a string", err);
        break;
    case FLOW_HEAP: {
        char **to = AT(st, k->off, char *);
        if (!s)
            return flow_state_wrong_type(d, k->name, "a string", err);
        free(*to);
        rc = (*to = strdup(s)) ? FERRY_OK : oom(err);
        break;
    }
    case FLOW_U32:
        if (!json_is_integer(v) || n < 0 || n > UINT32_MAX)
            return flow_state_wrong_type(d, k->name, "an integer from 0 to 4294967295", err);
        *AT(st, k->off, uint32_t) = (uint32_t)n;
        break;
    case FLOW_U64: /* counts ferry wrote from 64-bit unsigned values, all below 2^63 */
        if (!json_is_integer(v) || n < 0)
            return flow_state_wrong_type(d, k->name, "an integer from 0", err);
        *AT(st, k->off, uint64_t) = (uint64_t)n;
        break;
    case FLOW_I64:
        if (!json_is_integer(v))
            return flow_state_wrong_type(d, k->name, "an integer", err);
        *AT(st, k->off, int64_t) = (int64_t)n;
        break;
    case FLOW_FLAG:
        if (!json_is_boolean(v))
            return flow_state_wrong_type(d, k->name, "true or false", err);
        *AT(st, k->off, bool) = json_is_true(v);
        break;
    case FLOW_LIST:
        rc = decode_list(d, st, k, v, err);
        break;
    case FLOW_CUSTOM:
        rc = k->custom->decode(d, st, k, v, err);
        break;
    }
    if (!rc && k->has != FLOW_NO_HAS)
        *AT(st, k->has, bool) = true; /* an empty list too */
    return rc;
}

int flow_state_decode(const flow_state_desc *d, const char *json, void *st, ferry_err *err)
{
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    const char *key;
    json_t *v;
    int rc = FERRY_OK;
    memset(st, 0, d->size);
    if (!json_is_object(root)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s is not a JSON object%s%s", d->what,
                           root ? "" : ": ", root ? "" : je.text);
        goto out;
    }
    json_object_foreach(root, key, v) {
        const flow_key *k = key_find(d, key);
        /* a later version's key: written back as it is */
        rc = k ? decode_key(d, st, k, v, err)
               : flow_state_keep(AT(st, d->unknown, json_t *), key, v, err);
        if (rc)
            break;
    }
out:
    if (rc)
        flow_state_free(d, st);
    json_decref(root);
    return rc;
}

/* ---- encoding -------------------------------------------------------------------------------- */

/* Whether st holds key k (it is written). */
static bool holds(const void *st, const flow_key *k)
{
    if (k->has != FLOW_NO_HAS)
        return *AT_C(st, k->has, bool);
    switch (k->kind) {
    case FLOW_STR:
        return *AT_C(st, k->off, char) != '\0';
    case FLOW_HEAP:
        return *AT_C(st, k->off, char *) != NULL;
    case FLOW_FLAG:
        return *AT_C(st, k->off, bool);
    default: /* a custom kind says so itself; the others have a has_ field */
        return k->kind == FLOW_CUSTOM;
    }
}

static json_t *encode_list(const void *st, const flow_key *k)
{
    char *const *names = *AT_C(st, k->off, char **);
    size_t n = *AT_C(st, k->count, size_t);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(names[i]))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

/* The value of key k, which st holds, as JSON in *out (a new reference; NULL from a custom
 * kind: not held after all). */
static int encode_key(const flow_state_desc *d, const void *st, const flow_key *k, json_t **out,
                      ferry_err *err)
{
    switch (k->kind) {
    case FLOW_STR:
        *out = json_string(AT_C(st, k->off, char));
        break;
    case FLOW_HEAP:
        *out = json_string(*AT_C(st, k->off, char *));
        break;
    case FLOW_U32:
        *out = json_integer((json_int_t)*AT_C(st, k->off, uint32_t));
        break;
    case FLOW_U64:
        *out = json_integer((json_int_t)*AT_C(st, k->off, uint64_t));
        break;
    case FLOW_I64:
        *out = json_integer((json_int_t)*AT_C(st, k->off, int64_t));
        break;
    case FLOW_FLAG:
        *out = json_boolean(*AT_C(st, k->off, bool));
        break;
    case FLOW_LIST:
        *out = encode_list(st, k);
        break;
    case FLOW_CUSTOM:
        return k->custom->encode(d, st, k, out, err);
    }
    return *out ? FERRY_OK : flow_state_unwritable(d, k->name, err);
}

int flow_state_encode(const flow_state_desc *d, const void *st, char **json_out,
                      ferry_err *err)
{
    json_t *o = json_object();
    json_t *unknown = *AT_C(st, d->unknown, json_t *);
    int rc = FERRY_OK;
    *json_out = NULL;
    if (!o || (unknown && json_object_update(o, unknown))) {
        rc = oom(err);
        goto out;
    }
    for (size_t i = 0; i < d->n_keys; i++) {
        const flow_key *k = &d->keys[i];
        json_t *v = NULL;
        if (!holds(st, k))
            continue;
        if ((rc = encode_key(d, st, k, &v, err)))
            goto out;
        if (v && json_object_set_new(o, k->name, v)) {
            rc = flow_state_unwritable(d, k->name, err);
            goto out;
        }
    }
    if (!(*json_out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS)))
        rc = oom(err);
out:
    json_decref(o);
    return rc;
}

/* ---- the rest -------------------------------------------------------------------------------- */

void flow_state_free(const flow_state_desc *d, void *st)
{
    for (size_t i = 0; i < d->n_keys; i++) {
        const flow_key *k = &d->keys[i];
        if (k->kind == FLOW_HEAP)
            free(*AT(st, k->off, char *));
        else if (k->kind == FLOW_LIST)
            flow_names_free(AT(st, k->off, char **), AT(st, k->count, size_t));
        else if (k->kind == FLOW_CUSTOM && k->custom->free)
            k->custom->free(st);
    }
    json_decref(*AT(st, d->unknown, json_t *));
    memset(st, 0, d->size);
}

int flow_state_set_str(const flow_state_desc *d, void *st, const char *key, const char *s,
                       ferry_err *err)
{
    const flow_key *k = key_find(d, key);
    if (!k || k->kind != FLOW_STR)
        return ferry_err_set(err, FERRY_EINTERNAL, "%s: no string key \"%s\"", d->what, key);
    return put_str(d, st, k, s, err);
}

int flow_state_set_strs(const flow_state_desc *d, void *st, const char *const *kv,
                        ferry_err *err)
{
    int rc = FERRY_OK;
    for (size_t i = 0; !rc && kv[i]; i += 2)
        rc = flow_state_set_str(d, st, kv[i], kv[i + 1], err);
    return rc;
}
