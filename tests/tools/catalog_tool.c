/* catalog_tool: small catalog edits for shell tests that cannot be made with ferry's commands
 * yet. Usage: catalog_tool URL set-route TENANT SPLIT SHARDS   (creates or replaces the route,
 * raising the routing version). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/catalog.h"
#include "ferry/strutil.h"

int main(int argc, char **argv)
{
    if (argc != 6 || strcmp(argv[2], "set-route") != 0) {
        fprintf(stderr, "usage: catalog_tool URL set-route TENANT SPLIT SHARDS\n");
        return 2;
    }
    ferry_err err = {0};
    ferry_catalog *c = NULL;
    uint64_t split;
    if (!ferry_parse_u64(argv[4], &split)) {
        fprintf(stderr, "bad split %s\n", argv[4]);
        return 2;
    }
    int rc = ferry_catalog_open(argv[1], &c, &err);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_ROUTE);
    snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", argv[3]);
    r.u.route.split = (uint32_t)split;
    if (!rc) {
        rc = ferry_catalog_get(c, &r, &err);
        snprintf(r.u.route.shards, sizeof r.u.route.shards, "%s", argv[5]);
        if (rc == FERRY_ENOTFOUND) {
            ferry_err_clear(&err);
            rc = ferry_catalog_create(c, &r, &err);
        } else if (!rc) {
            rc = ferry_catalog_update(c, &r, &err);
        }
    }
    if (rc)
        fprintf(stderr, "catalog_tool: %s\n", err.msg);
    ferry_record_free(&r);
    ferry_catalog_close(c);
    return rc ? 1 : 0;
}
