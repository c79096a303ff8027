/* Writes acknowledged with a replica missing ([router] min_insert_replicas, docs/replicas.md
 * "Writes with a replica down"): ClickHouse's insert_quorum as its users expect it. An insert
 * some shards failed is answered 200 when every slice it wrote reached at least
 * min_insert_replicas of its replicas, and only after each slice a replica missed is recorded
 * in the catalog (include/ferry/repair_need.h): repair then copies from a replica that took
 * every acknowledged write, and the slice's replicas are not dropped until it has. Without the
 * record the write is answered as failed, as before, so nothing acknowledged goes unrecorded. */
#include "router_int.h"

#include <stdio.h>
#include <string.h>

#include "ferry/log.h"
#include "ferry/repair_need.h"
#include "ferry/strutil.h"


bool rt_quorum_accept(ferry_router *r, const rt_touched *t, const rt_out *o, char *missed,
                      size_t missed_sz)
{
    missed[0] = '\0';
    if (!r->min_insert_replicas || !t->n)
        return false;
    size_t degraded = 0;
    for (size_t i = 0; i < t->n; i++) {
        const rt_touched_slice *s = &t->items[i];
        uint32_t ok = 0, bad = 0;
        for (uint32_t k = 0; k < s->n_shards; k++) {
            uint32_t slot = s->shards[k];
            if (slot < o->n && o->shards[slot].failed)
                bad++;
            else
                ok++;
        }
        if (!bad)
            continue;
        /* rows of a slice sent with two routing tables: the replicas that took them are not
         * one set, so no count says every row reached enough of them */
        if (s->mixed || ok < r->min_insert_replicas)
            return false;
        degraded++;
    }
    if (!degraded)
        return false;
    /* one handle for every such record, kept open: during an outage every write is degraded,
     * and a ZooKeeper session per request would load the ensemble */
    ferry_err err = {0};
    int rc = FERRY_OK;
    pthread_mutex_lock(&r->quorum_mu);
    if (!r->quorum_cat)
        rc = ferry_catalog_open(r->catalog_url, &r->quorum_cat, &err);
    ferry_catalog *cat = r->quorum_cat;
    for (size_t i = 0; !rc && i < t->n; i++) {
        const rt_touched_slice *s = &t->items[i];
        ferry_shard_set miss = {0}, held = {0};
        for (uint32_t k = 0; !rc && k < s->n_shards; k++) {
            uint32_t slot = s->shards[k];
            const char *name = r->shards[slot]->name;
            rc = ferry_shard_set_add(slot < o->n && o->shards[slot].failed ? &miss : &held, name,
                                     &err);
        }
        if (!rc && !ferry_shard_set_count(&miss))
            continue;
        if (!rc)
            rc = ferry_repair_need_mark(cat, s->tenant, s->split, &miss, &held, &err);
        if (rc) {
            ferry_err_prefix(&err, "slice %s/%u: ", s->tenant, s->split);
            break;
        }
        /* the log's list of every slice's missed shards: what does not fit is left out */
        for (size_t k = 0; k < ferry_shard_set_count(&miss); k++)
            ferry_list_add(missed, missed_sz, ferry_shard_set_at(&miss, k));
    }
    if (rc && r->quorum_cat) { /* a broken session is opened again next time */
        ferry_catalog_close(r->quorum_cat);
        r->quorum_cat = NULL;
    }
    pthread_mutex_unlock(&r->quorum_mu);
    if (rc) {
        FLOG_ERROR("msg=\"router: an insert reached min_insert_replicas but the slices its "
                   "failed replicas missed cannot be recorded for repair; answered as failed\" "
                   "err=\"%s\"", err.msg);
        return false;
    }
    FLOG_WARN("msg=\"router: insert acknowledged with replicas missing; recorded for repair\" "
              "slices=%zu missed=%s min_insert_replicas=%u",
              degraded, missed, r->min_insert_replicas);
    return true;
}
