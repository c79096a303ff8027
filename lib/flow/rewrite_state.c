/* A rewrite job's journal state (rewrite_state.h): the JSON data of its job record decoded into
 * a typed record and encoded back byte for byte as ferry wrote it when the state was a jansson
 * object (compact, keys sorted, the same types), with the keys this version does not know kept.
 * The keys are one table (KEYS) that the shared codec (flow_state.h) reads in both directions,
 * so a key is named once. */
#include "flow/rewrite_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_state.h"

static const flow_key KEYS[] = {
    FLOW_KEYS_PARTITION_JOB(rw_state),
    FLOW_KEY_STR(rw_state, "mode", mode),
    FLOW_KEY_HEAP(rw_state, "expr", expr),
    FLOW_KEY_STR(rw_state, "col", col),
    FLOW_KEY_HEAP(rw_state, "where", where),
    FLOW_KEY_HAS(rw_state, "rows_before", FLOW_U64, rows_before),
    FLOW_KEY_HAS(rw_state, "rows_matched", FLOW_U64, rows_matched),
    FLOW_KEY_HAS(rw_state, "rows_after", FLOW_U64, rows_after),
    FLOW_KEY_STR(rw_state, "src", src),
    FLOW_KEY_HAS(rw_state, "src_n", FLOW_U64, src_n),
    FLOW_KEY_LIST(rw_state, "old", old.v, old.n, has_old, NULL),
    FLOW_KEY_HAS(rw_state, "swapped", FLOW_FLAG, swapped),
    FLOW_KEY_STR(rw_state, "swap", swap),
    FLOW_KEY_LIST(rw_state, "src_parts", src_parts.v, src_parts.n, has_src_parts, NULL),
};

static const flow_state_desc RW = {"rewrite job data", KEYS, sizeof KEYS / sizeof KEYS[0],
                                   sizeof(rw_state), offsetof(rw_state, unknown)};

int rw_state_decode(const char *json, rw_state *st, ferry_err *err)
{
    /* a record written without data (none of ferry's) reads as a job that knows nothing yet */
    return flow_state_decode(&RW, json && *json ? json : "{}", st, err);
}

int rw_state_encode(const rw_state *st, char **json_out, ferry_err *err)
{
    return flow_state_encode(&RW, st, json_out, err);
}

void rw_state_free(rw_state *st)
{
    flow_state_free(&RW, st);
}

int rw_state_plan(rw_state *st, const char *server, const char *db, const char *table,
                  const char *catalog_table, const char *pid, const char *tenant, uint32_t day,
                  uint32_t split, ferry_err *err)
{
    const char *const what[] = {"server", server, "db", db, "table", table,
                                "catalog_table", catalog_table, "pid", pid, "tenant", tenant,
                                NULL};
    memset(st, 0, sizeof *st);
    int rc = flow_state_set_strs(&RW, st, what, err);
    if (rc)
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
    /* first: on an error st is unchanged */
    int rc = flow_state_set_str(&RW, st, "col", upd ? update_col : "", err);
    if (rc)
        return rc;
    snprintf(st->mode, sizeof st->mode, "%s", upd ? "update" : "delete");
    free(st->expr);
    free(st->where);
    st->expr = expr ? strdup(expr) : NULL;
    st->where = upd && where ? strdup(where) : NULL;
    if ((expr && !st->expr) || (upd && where && !st->where))
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    return FERRY_OK;
}

bool rw_state_is_update(const rw_state *st)
{
    return !strcmp(st->mode, "update");
}

int rw_names_add(rw_names *l, const char *name, ferry_err *err)
{
    return flow_names_add(&l->v, &l->n, name, err);
}

bool rw_names_has(const rw_names *l, const char *name)
{
    return flow_names_has(l->v, l->n, name);
}

void rw_names_free(rw_names *l)
{
    flow_names_free(&l->v, &l->n);
}
