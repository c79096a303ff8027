/* A tiering job's journal state (tier_state.h): the JSON data of its job record decoded into a
 * typed record and encoded back byte for byte as ferry wrote it when the state was a jansson
 * object (compact, keys sorted, the same types), with the keys this version does not know kept.
 * The keys are one table (KEYS) that the shared codec (flow_state.h) reads in both directions,
 * so a key is named once; fp is this file's own kind. */
#include "flow/tier_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ferry/strutil.h"
#include "flow/flow_state.h"

/* ---- fp, this file's own kind ---------------------------------------------------------------- */

/* fp: rows an integer; sum, xor, distinct 64-bit unsigned numbers as decimal strings (JSON
 * integers are signed); by "parts". Other keys are kept in fp_unknown. */
static int decode_fp(const flow_state_desc *d, void *state, const flow_key *k, json_t *v,
                     ferry_err *err)
{
    static const char *const dec[] = {"sum", "xor", "distinct"};
    tier_state *st = state;
    uint64_t *field[] = {&st->fp.hash_sum, &st->fp.hash_xor, &st->fp.distinct};
    const char *key;
    json_t *x;
    if (!json_is_object(v))
        return flow_state_wrong_type(d, k->name, "an object {rows, sum, xor, distinct[, by]}",
                                     err);
    json_object_foreach(v, key, x) {
        size_t i = 0;
        int rc = FERRY_OK;
        while (i < 3 && strcmp(dec[i], key))
            i++;
        if (!strcmp(key, "rows") && !json_is_integer(x))
            rc = flow_state_wrong_type(d, "fp.rows", "an integer", err);
        else if (!strcmp(key, "rows"))
            st->fp.rows = (uint64_t)json_integer_value(x);
        else if (i < 3 && (!json_is_string(x) ||
                           !ferry_parse_u64(json_string_value(x), field[i])))
            rc = ferry_err_set(err, FERRY_EINVAL, "%s: \"fp.%s\" must be a string of a 64-bit "
                               "unsigned decimal number", d->what, key);
        else if (i < 3)
            continue;
        else if (!strcmp(key, "by") && json_is_string(x) &&
                 !strcmp(json_string_value(x), "parts"))
            st->fp_by_parts = true;
        else if (!strcmp(key, "by") && !json_is_string(x))
            rc = flow_state_wrong_type(d, "fp.by", "a string", err);
        else /* another "by" of a later version, or a key this one does not know */
            rc = flow_state_keep(&st->fp_unknown, key, x, err);
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

/* The fp object as ferry has always written it: {"rows": N, "sum": "N", "xor": "N",
 * "distinct": "N"}, "by": "parts" when by part hashes; the keys it did not know kept. */
static int encode_fp(const flow_state_desc *d, const void *state, const flow_key *k,
                     json_t **out, ferry_err *err)
{
    const tier_state *st = state;
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
        return flow_state_unwritable(d, k->name, err);
    }
    *out = o;
    return FERRY_OK;
}

static void free_fp(void *st)
{
    json_decref(((tier_state *)st)->fp_unknown);
}

static const flow_custom FP = {decode_fp, encode_fp, free_fp};

/* ---- the keys: the hot list is a FLOW_LIST, fp this file's kind ------------------------------ */

static const flow_key KEYS[] = {
    FLOW_KEYS_PARTITION_JOB(tier_state),
    FLOW_KEY_STR(tier_state, "partition", partition),
    FLOW_KEY_HAS(tier_state, "attempt", FLOW_U32, attempt),
    FLOW_KEY_STR(tier_state, "freeze", freeze),
    FLOW_KEY_HAS(tier_state, "frozen_at", FLOW_U64, frozen_at),
    FLOW_KEY_FLAG(tier_state, "merges_stopped", merges_stopped),
    FLOW_KEY_LIST(tier_state, "hot", hot, n_hot, has_hot, "part name"),
    FLOW_KEY_HAS(tier_state, "hot_in", FLOW_U32, hot_in),
    FLOW_KEY_HAS(tier_state, "hashed", FLOW_FLAG, hashed),
    FLOW_KEY_CUSTOM(tier_state, "fp", &FP, fp, offsetof(tier_state, has_fp)),
    FLOW_KEY_HAS(tier_state, "max_block", FLOW_I64, max_block),
    FLOW_KEY_STR(tier_state, "swap", swap),
    FLOW_KEY_HAS(tier_state, "swapped", FLOW_FLAG, swapped),
    FLOW_KEY_FLAG(tier_state, "mend", mend),
    FLOW_KEY_FLAG(tier_state, "recorded", recorded),
    FLOW_KEY_FLAG(tier_state, "rolled_back", rolled_back),
};

static const flow_state_desc TIER = {"tier job data", KEYS, sizeof KEYS / sizeof KEYS[0],
                                     sizeof(tier_state), offsetof(tier_state, unknown)};

int tier_state_decode(const char *json, tier_state *st, ferry_err *err)
{
    return flow_state_decode(&TIER, json, st, err);
}

int tier_state_encode(const tier_state *st, char **json_out, ferry_err *err)
{
    return flow_state_encode(&TIER, st, json_out, err);
}

/* ---- the rest -------------------------------------------------------------------------------- */

void tier_state_free(tier_state *st)
{
    flow_state_free(&TIER, st);
}

int tier_state_plan(tier_state *st, const char *server, const char *db, const char *table,
                    const char *catalog_table, const char *pid, const char *partition,
                    const char *tenant, uint32_t day, uint32_t split, ferry_err *err)
{
    const char *const what[] = {"server", server, "db", db, "table", table,
                                "catalog_table", catalog_table, "pid", pid,
                                "partition", partition, "tenant", tenant, NULL};
    memset(st, 0, sizeof *st);
    int rc = flow_state_set_strs(&TIER, st, what, err);
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
    int rc = flow_names_add(&st->hot, &st->n_hot, name, err);
    if (!rc)
        st->has_hot = true;
    return rc;
}

void tier_state_hot_clear(tier_state *st)
{
    flow_names_free(&st->hot, &st->n_hot);
    st->has_hot = false;
}

bool tier_state_hot_has(const tier_state *st, const char *name)
{
    return flow_names_has(st->hot, st->n_hot, name);
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

void tier_state_take_back(tier_state *st)
{
    st->swap[0] = '\0';
    st->max_block = 0;
    st->has_max_block = false;
    st->swapped = false;
    st->has_swapped = true;
}
