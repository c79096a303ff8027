/* The shards' loads as the inventory sync last measured them: one document, indexes/shard_loads,
 * {"measured": UNIX_SECONDS, "loads": {"SHARD": BYTES, ...}}. Derived data, like the index of
 * unfinished moves: not a record, left out of dumps, rewritten by every sync. It lets a tenant's
 * registration check the fill target without reading every slice and route of the cluster. */
#include "catalog/catalog_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOADS_PATH CAT_INDEXES_DIR "/shard_loads"

int ferry_catalog_loads_put(ferry_catalog *c, const ferry_shard_load *loads, size_t n,
                            ferry_err *err)
{
    json_t *o = json_object(), *l = json_object();
    int rc = o && l ? FERRY_OK : ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        if (!cat_name_ok(loads[i].shard))
            rc = ferry_err_set(err, FERRY_EINVAL, "'%s' is not a shard name", loads[i].shard);
        else if (json_object_set_new(l, loads[i].shard, json_integer((json_int_t)loads[i].bytes)))
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    char *doc = NULL;
    if (!rc) {
        json_object_set_new(o, "measured", json_integer((json_int_t)time(NULL)));
        json_object_set(o, "loads", l);
        doc = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        if (!doc)
            rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    /* create it, or replace whatever is there (the newest measurement wins) */
    for (int attempt = 0; !rc && attempt < 2; attempt++) {
        cat_item it = {0};
        int grc = c->ops->get(c, LOADS_PATH, &it, err);
        cat_item_free(&it);
        if (grc && grc != FERRY_ENOTFOUND) {
            rc = grc;
            break;
        }
        ferry_err_clear(err);
        cat_op op = {.type = grc ? CAT_CREATE : CAT_SET, .path = (char *)LOADS_PATH, .doc = doc,
                     .doc_len = strlen(doc), .version = FERRY_VERSION_ANY};
        int64_t nv = 0;
        cat_commit_req req = {&op, 1, CAT_ROUTING_KEEP, 0, &nv, NULL};
        ferry_commit_info info = {0};
        rc = c->ops->commit(c, &req, &info, err);
        if ((rc == FERRY_ECONFLICT || rc == FERRY_ENOTFOUND) && attempt == 0) {
            ferry_err_clear(err); /* created or removed meanwhile: once more */
            rc = FERRY_OK;
            continue;
        }
        break;
    }
    free(doc);
    json_decref(l);
    json_decref(o);
    return rc;
}

int ferry_catalog_loads_get(ferry_catalog *c, ferry_shard_load **out, size_t *n,
                            int64_t *measured, ferry_err *err)
{
    *out = NULL;
    *n = 0;
    cat_item it = {0};
    int rc = c->ops->get(c, LOADS_PATH, &it, err);
    if (rc)
        return rc; /* FERRY_ENOTFOUND: no sync recorded them yet */
    json_error_t je;
    json_t *o = json_loads(it.doc, 0, &je), *l = json_object_get(o, "loads");
    cat_item_free(&it);
    if (!json_is_object(l)) {
        json_decref(o);
        return ferry_err_set(err, FERRY_EREMOTE, "%s is damaged (delete it; the next inventory "
                             "sync writes it again)", LOADS_PATH);
    }
    if (measured)
        *measured = (int64_t)json_integer_value(json_object_get(o, "measured"));
    *out = calloc(json_object_size(l) + 1, sizeof **out);
    if (!*out) {
        json_decref(o);
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory");
    }
    const char *k;
    json_t *v;
    json_object_foreach(l, k, v)
    {
        snprintf((*out)[*n].shard, sizeof (*out)[*n].shard, "%s", k);
        (*out)[*n].bytes = (uint64_t)json_integer_value(v);
        (*n)++;
    }
    json_decref(o);
    return FERRY_OK;
}
