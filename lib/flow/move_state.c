/* A move's journal state (move_state.h): the JSON data of its side record jobs/move.ID decoded
 * into a typed record and encoded back byte for byte as ferry wrote it when the state was a
 * jansson object (compact, keys sorted, the same types: rows, parts and top integers, sums and
 * xors 64-bit unsigned as decimal strings), with the keys this version does not know kept, at
 * the top and inside fp's entries. */
#include "flow/move_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/strutil.h"
#include "flow/flow_state.h"

#define WHAT "move job data"

static int oom(ferry_err *err) { return ferry_err_set(err, FERRY_ENOMEM, "out of memory"); }

/* ---- fp: decoding ---------------------------------------------------------------------------- */

/* The counts, sum and xor of table's fp entry, or of its digest (digest: with parts), into *f;
 * the keys this version does not know into *unknown (an entry's digest and top are its
 * caller's). Each of them must be there: ferry has written them all since fp (and digest)
 * exist. */
static int decode_sums(json_t *o, const char *table, bool digest, ferry_fingerprint *f,
                       json_t **unknown, ferry_err *err)
{
    static const char *const names[] = {"rows", "sum", "xor", "parts"};
    const char *sub = digest ? ".digest" : "";
    const char *key;
    json_t *x;
    bool seen[4] = {false, false, false, !digest};
    json_object_foreach(o, key, x) {
        size_t n = digest ? 4 : 3, k = 0;
        while (k < n && strcmp(names[k], key))
            k++;
        int rc = FERRY_OK;
        if (k == n && (digest || (strcmp(key, "digest") && strcmp(key, "top"))))
            rc = flow_state_keep(unknown, key, x, err);
        else if (k == n)
            continue;
        else if ((k == 0 || k == 3) && !json_is_integer(x))
            rc = ferry_err_set(err, FERRY_EINVAL, WHAT ": \"fp.%s%s.%s\" must be an integer",
                               table, sub, key);
        else if (k == 0 || k == 3) /* written as the (json_int_t) of the count */
            *(k ? &f->parts : &f->rows) = (uint64_t)json_integer_value(x);
        else if (!json_is_string(x) ||
                 !ferry_parse_u64(json_string_value(x), k == 1 ? &f->hash_sum : &f->hash_xor))
            rc = ferry_err_set(err, FERRY_EINVAL, WHAT ": \"fp.%s%s.%s\" must be a string of a "
                               "64-bit unsigned decimal number", table, sub, key);
        if (rc)
            return rc;
        if (k < n)
            seen[k] = true;
    }
    for (size_t k = 0; k < 4; k++)
        if (!seen[k])
            return ferry_err_set(err, FERRY_EINVAL, WHAT ": \"fp.%s%s\" has no \"%s\"", table,
                                 sub, names[k]);
    return FERRY_OK;
}

/* One entry of fp: {rows, sum, xor[, digest: {rows, parts, sum, xor}][, top]}. */
static int decode_fp_entry(mv_fp *e, const char *table, json_t *v, ferry_err *err)
{
    json_t *dg = json_object_get(v, "digest"), *top = json_object_get(v, "top");
    if (!(e->table = strdup(table)))
        return oom(err);
    if (!json_is_object(v))
        return ferry_err_set(err, FERRY_EINVAL, WHAT ": \"fp.%s\" must be an object {rows, "
                             "sum, xor, digest, top}", table);
    int rc = decode_sums(v, table, false, &e->fp, &e->unknown, err);
    if (!rc && top && !json_is_integer(top))
        return ferry_err_set(err, FERRY_EINVAL, WHAT ": \"fp.%s.top\" must be an integer",
                             table);
    e->top = (int64_t)json_integer_value(top);
    e->has_top = top != NULL;
    if (!rc && dg && !json_is_object(dg))
        return ferry_err_set(err, FERRY_EINVAL, WHAT ": \"fp.%s.digest\" must be an object "
                             "{rows, parts, sum, xor}", table);
    if (!rc && dg)
        rc = decode_sums(dg, table, true, &e->dg, &e->dg_unknown, err);
    e->has_dg = dg != NULL;
    return rc;
}

static int decode_fp(const flow_state_desc *d, void *state, const flow_key *k, json_t *v,
                     ferry_err *err)
{
    mv_state *st = state;
    const char *table;
    json_t *x;
    if (!json_is_object(v))
        return flow_state_wrong_type(d, k->name, "an object of table name: fingerprint", err);
    json_object_foreach(v, table, x) {
        mv_fp *grown = realloc(st->fps.v, (st->fps.n + 1) * sizeof *grown);
        if (!grown)
            return oom(err);
        st->fps.v = grown;
        memset(&grown[st->fps.n], 0, sizeof *grown);
        int rc = decode_fp_entry(&grown[st->fps.n++], table, x, err); /* freed with st */
        if (rc)
            return rc;
    }
    return FERRY_OK;
}

static void free_fp(void *st)
{
    mv_fps_free(&((mv_state *)st)->fps);
}

/* ---- fp: encoding ---------------------------------------------------------------------------- */

/* rows, sum, xor (and parts) into o as mv_fp_json wrote them: counts as (json_int_t), sums and
 * xors as decimal strings. Nonzero when out of memory. */
static int encode_sums(json_t *o, const ferry_fingerprint *f, bool with_parts)
{
    char sum[24], xr[24];
    snprintf(sum, sizeof sum, "%" PRIu64, f->hash_sum);
    snprintf(xr, sizeof xr, "%" PRIu64, f->hash_xor);
    return json_object_set_new(o, "rows", json_integer((json_int_t)f->rows)) ||
           json_object_set_new(o, "sum", json_string(sum)) ||
           json_object_set_new(o, "xor", json_string(xr)) ||
           (with_parts && json_object_set_new(o, "parts", json_integer((json_int_t)f->parts)));
}

/* An entry of fp as JSON (a new reference), NULL when out of memory. */
static json_t *encode_fp_entry(const mv_fp *e)
{
    json_t *o = json_object(), *dg = e->has_dg ? json_object() : NULL;
    if (!o || (e->has_dg && !dg) || (e->unknown && json_object_update(o, e->unknown)) ||
        encode_sums(o, &e->fp, false) ||
        (e->has_top && json_object_set_new(o, "top", json_integer((json_int_t)e->top))))
        goto fail;
    if (dg && ((e->dg_unknown && json_object_update(dg, e->dg_unknown)) ||
               encode_sums(dg, &e->dg, true) || json_object_set(o, "digest", dg)))
        goto fail;
    json_decref(dg);
    return o;
fail:
    json_decref(dg);
    json_decref(o);
    return NULL;
}

/* The fp object: table name: entry. */
static int encode_fp(const flow_state_desc *d, const void *state, const flow_key *k, json_t **out,
                     ferry_err *err)
{
    const mv_state *st = state;
    json_t *fp = json_object();
    if (!fp)
        return oom(err);
    for (size_t i = 0; i < st->fps.n; i++)
        if (json_object_set_new(fp, st->fps.v[i].table, encode_fp_entry(&st->fps.v[i]))) {
            json_decref(fp);
            return ferry_err_set(err, FERRY_EINVAL, "%s: \"%s.%s\" cannot be written (not "
                                 "UTF-8, or out of memory)", d->what, k->name, st->fps.v[i].table);
        }
    *out = fp;
    return FERRY_OK;
}

/* ---- mode ------------------------------------------------------------------------------------ */

/* "clone" sets clone; another mode (a later version's) is kept as it is. */
static int decode_mode(const flow_state_desc *d, void *state, const flow_key *k, json_t *v,
                       ferry_err *err)
{
    mv_state *st = state;
    if (!json_is_string(v))
        return flow_state_wrong_type(d, k->name, "a string", err);
    if (strcmp(json_string_value(v), "clone"))
        return flow_state_keep(&st->unknown, k->name, v, err);
    st->clone = true;
    return FERRY_OK;
}

static int encode_mode(const flow_state_desc *d, const void *state, const flow_key *k,
                       json_t **out, ferry_err *err)
{
    const mv_state *st = state;
    if (st->clone && !(*out = json_string("clone")))
        return oom(err);
    return FERRY_OK;
}

/* ---- the keys: freezes is a FLOW_LIST, fp and mode this file's kinds ------------------------- */

static const flow_custom FP = {decode_fp, encode_fp, free_fp};
static const flow_custom MODE = {decode_mode, encode_mode, NULL};

static const flow_key KEYS[] = {
    FLOW_KEY_LIST(mv_state, "freezes", freezes, n_freezes, has_freezes, "freeze name"),
    FLOW_KEY_CUSTOM(mv_state, "fp", &FP, fps, offsetof(mv_state, has_fp)),
    FLOW_KEY_CUSTOM(mv_state, "mode", &MODE, clone, FLOW_NO_HAS),
};

static const flow_state_desc MOVE = {WHAT, KEYS, sizeof KEYS / sizeof KEYS[0], sizeof(mv_state),
                                     offsetof(mv_state, unknown)};

int mv_state_decode(const char *json, mv_state *st, ferry_err *err)
{
    return flow_state_decode(&MOVE, json, st, err);
}

int mv_state_encode(const mv_state *st, char **json_out, ferry_err *err)
{
    return flow_state_encode(&MOVE, st, json_out, err);
}

/* ---- the rest -------------------------------------------------------------------------------- */

void mv_fps_free(mv_fps *fps)
{
    for (size_t i = 0; i < fps->n; i++) {
        free(fps->v[i].table);
        json_decref(fps->v[i].unknown);
        json_decref(fps->v[i].dg_unknown);
    }
    free(fps->v);
    fps->v = NULL;
    fps->n = 0;
}

void mv_state_free(mv_state *st)
{
    flow_state_free(&MOVE, st);
}

void mv_state_init(mv_state *st, bool clone)
{
    memset(st, 0, sizeof *st);
    st->has_freezes = st->has_fp = true;
    st->clone = clone;
}

const char *mv_state_initial(bool clone)
{
    /* not mv_state_encode's text: this one was always written as a literal, unsorted, and the
     * PLANNED record keeps its bytes */
    return clone ? "{\"freezes\":[],\"fp\":{},\"mode\":\"clone\"}"
                 : "{\"freezes\":[],\"fp\":{}}";
}

int mv_state_freeze_add(mv_state *st, const char *name, ferry_err *err)
{
    int rc = flow_names_add(&st->freezes, &st->n_freezes, name, err);
    if (!rc)
        st->has_freezes = true;
    return rc;
}

bool mv_state_freeze_remove(mv_state *st, const char *name)
{
    for (size_t i = 0; i < st->n_freezes; i++)
        if (!strcmp(st->freezes[i], name)) {
            free(st->freezes[i]);
            memmove(&st->freezes[i], &st->freezes[i + 1],
                    (st->n_freezes - i - 1) * sizeof *st->freezes);
            st->n_freezes--;
            return true;
        }
    return false;
}

const mv_fp *mv_state_fp(const mv_state *st, const char *table)
{
    for (size_t i = 0; i < st->fps.n; i++)
        if (!strcmp(st->fps.v[i].table, table))
            return &st->fps.v[i];
    return NULL;
}

void mv_state_set_fps(mv_state *st, mv_fps *fps)
{
    mv_fps_free(&st->fps);
    st->fps = *fps;
    st->has_fp = true;
    memset(fps, 0, sizeof *fps);
}

int mv_fps_set(mv_fps *fps, const char *table, const ferry_fingerprint *fp,
               const ferry_fingerprint *dg, int64_t top, ferry_err *err)
{
    size_t i = 0;
    while (i < fps->n && strcmp(fps->v[i].table, table))
        i++;
    if (i == fps->n) { /* a new entry */
        mv_fp *grown = realloc(fps->v, (fps->n + 1) * sizeof *grown);
        if (!grown)
            return oom(err);
        fps->v = grown;
        memset(&grown[i], 0, sizeof *grown);
        if (!(grown[i].table = strdup(table)))
            return oom(err);
        fps->n++;
    }
    mv_fp *e = &fps->v[i];
    json_decref(e->unknown);
    json_decref(e->dg_unknown);
    char *name = e->table;
    *e = (mv_fp){.table = name, .has_dg = true, .top = top, .has_top = top >= 0};
    e->fp.rows = fp->rows;
    e->fp.hash_sum = fp->hash_sum;
    e->fp.hash_xor = fp->hash_xor;
    e->dg.rows = dg->rows;
    e->dg.parts = dg->parts;
    e->dg.hash_sum = dg->hash_sum;
    e->dg.hash_xor = dg->hash_xor;
    return FERRY_OK;
}

static bool sums_equal(const ferry_fingerprint *a, const ferry_fingerprint *b)
{
    return a->rows == b->rows && a->hash_sum == b->hash_sum && a->hash_xor == b->hash_xor;
}

bool mv_fp_matches(const mv_fp *e, const ferry_fingerprint *fp)
{
    return e && sums_equal(&e->fp, fp);
}

bool mv_fp_digest_matches(const mv_fp *e, const ferry_fingerprint *dg)
{
    return e && e->has_dg && sums_equal(&e->dg, dg);
}
