/* catalog_tool: small catalog edits for shell tests that cannot be made with ferry's commands
 * yet. Usage:
 *   catalog_tool URL set-route TENANT SPLIT SHARDS   creates or replaces the route, raising the
 *                                                    routing version
 *   catalog_tool URL add-move ID TENANT SPLIT FROM TO   creates a move record in state PLANNED
 *                                                    (nothing runs it), as `ferry move` does
 *   catalog_tool URL advance-move ID STATE           moves the move record ID to STATE through
 *                                                    the flow engine (ferry_flow_advance over
 *                                                    ferry_move_flow: checked, CAS),
 *                                                    as a move's own flow does */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry/catalog.h"
#include "ferry/flow_journal.h"
#include "ferry/move.h"
#include "ferry/strutil.h"

static int set_route(ferry_catalog *c, char **argv, ferry_err *err)
{
    uint64_t split;
    if (!ferry_parse_u64(argv[4], &split))
        return ferry_err_set(err, FERRY_EINVAL, "bad split %s", argv[4]);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_ROUTE);
    snprintf(r.u.route.tenant, sizeof r.u.route.tenant, "%s", argv[3]);
    r.u.route.split = (uint32_t)split;
    int rc = ferry_catalog_get(c, &r, err);
    if (rc == FERRY_OK || rc == FERRY_ENOTFOUND) {
        int prc = ferry_shard_set_parse(&r.u.route.shards, argv[5], err);
        rc = prc ? prc : rc;
    }
    if (rc == FERRY_ENOTFOUND) {
        ferry_err_clear(err);
        rc = ferry_catalog_create(c, &r, err);
    } else if (!rc) {
        rc = ferry_catalog_update(c, &r, err);
    }
    ferry_record_free(&r);
    return rc;
}

static int add_move(ferry_catalog *c, char **argv, ferry_err *err)
{
    uint64_t split;
    if (!ferry_parse_u64(argv[5], &split))
        return ferry_err_set(err, FERRY_EINVAL, "bad split %s", argv[5]);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_MOVE);
    ferry_move *m = &r.u.move;
    snprintf(m->id, sizeof m->id, "%s", argv[3]);
    snprintf(m->tenant, sizeof m->tenant, "%s", argv[4]);
    m->split = (uint32_t)split;
    int rc = ferry_shard_set_parse(&m->from, argv[6], err);
    if (!rc)
        rc = ferry_shard_set_parse(&m->to, argv[7], err);
    m->state = FERRY_MOVE_PLANNED;
    m->created = m->updated = (int64_t)time(NULL);
    if (!rc)
        rc = ferry_catalog_create(c, &r, err);
    ferry_record_free(&r);
    return rc;
}

static int advance_move(ferry_catalog *c, char **argv, ferry_err *err)
{
    enum ferry_move_state to;
    int rc = ferry_move_state_parse(argv[4], &to);
    if (rc)
        return ferry_err_set(err, FERRY_EINVAL, "bad move state %s", argv[4]);
    ferry_record r;
    ferry_record_init(&r, FERRY_REC_MOVE);
    snprintf(r.u.move.id, sizeof r.u.move.id, "%s", argv[3]);
    rc = ferry_catalog_get(c, &r, err);
    ferry_flow_journal fj;
    ferry_flow_journal_init(&fj, c, &ferry_move_flow, "catalog_tool");
    if (!rc)
        rc = ferry_flow_advance(&fj, &r, (int)to, "catalog_tool", NULL, err);
    ferry_record_free(&r);
    return rc;
}

int main(int argc, char **argv)
{
    bool route = argc == 6 && !strcmp(argv[2], "set-route");
    bool add = argc == 8 && !strcmp(argv[2], "add-move");
    bool advance = argc == 5 && !strcmp(argv[2], "advance-move");
    if (!route && !add && !advance) {
        fprintf(stderr, "usage: catalog_tool URL set-route TENANT SPLIT SHARDS\n"
                        "       catalog_tool URL add-move ID TENANT SPLIT FROM TO\n"
                        "       catalog_tool URL advance-move ID STATE\n");
        return 2;
    }
    ferry_err err = {0};
    ferry_catalog *c = NULL;
    int rc = ferry_catalog_open(argv[1], &c, &err);
    if (!rc)
        rc = route ? set_route(c, argv, &err)
             : add ? add_move(c, argv, &err)
                   : advance_move(c, argv, &err);
    if (rc)
        fprintf(stderr, "catalog_tool: %s\n", err.msg);
    ferry_catalog_close(c);
    return rc == FERRY_EINVAL ? 2 : rc ? 1 : 0;
}
