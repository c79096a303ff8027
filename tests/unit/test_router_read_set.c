/* rt_read_set (lib/router/routing.c): which shards serve reads of a slice, by the slice's route
 * and its move in SWITCH: complete copies (one), the union of source and target before the
 * publish step, a hold while publishing, a clone's target never before CLEANUP, and replicas
 * that missed acknowledged writes after the others. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "../../lib/router/router_int.h"

/* shards: 0 = node1, 1 = node2, 2 = node3 */
static rt_route route_of(const uint32_t *shards, uint32_t n)
{
    rt_route r;
    memset(&r, 0, sizeof r);
    r.shards = (uint32_t *)shards;
    r.n_shards = n;
    r.missing = "";
    return r;
}

/* the slice's move in SWITCH, kept in the snapshot beside the routes; n_moves 0: none */
static rt_move mv;
static size_t n_moves;

static void read_set_of(rt_route *rr, rt_readers *out)
{
    rt_tenant t = {.name = "acme", .splits = 1, .n_routes = 1, .routes = rr};
    rt_snapshot s = {.version = 7, .n_tenants = 1, .tenants = &t, .n_moves = n_moves,
                     .moves = &mv};
    rt_read_set(&s, &t, 0, out);
}

static void moving(rt_route *rr, long from, long to, bool publishing)
{
    (void)rr;
    memset(&mv, 0, sizeof mv);
    mv.tenant = "acme";
    mv.split = 0;
    mv.publishing = publishing;
    mv.move_from = from;
    mv.move_to = to;
    strcpy(mv.move_id, "mv-1");
    n_moves = 1;
}

static int no_move(void **state)
{
    (void)state;
    n_moves = 0;
    return 0;
}

static void test_no_move(void **state)
{
    (void)state;
    uint32_t sh[] = {2, 0};
    rt_route rr = route_of(sh, 2);
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.shards[0], 2);
    assert_int_equal(rs.shards[1], 0);
}

static void test_unrouted(void **state)
{
    (void)state;
    rt_route rr = route_of(NULL, 0);
    rr.missing = "node9";
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_NONE);
    assert_string_equal(rs.missing, "node9");
    /* a split beyond the known routes */
    rt_tenant t = {.name = "acme", .splits = 2, .n_routes = 1, .routes = &rr};
    rt_snapshot s = {.version = 7, .n_tenants = 1, .tenants = &t};
    rt_read_set(&s, &t, 1, &rs);
    assert_int_equal(rs.mode, RT_READ_NONE);
}

static void test_switch_union(void **state)
{
    (void)state;
    uint32_t sh[] = {1}; /* moved node1 -> node2: the route names the target */
    rt_route rr = route_of(sh, 1);
    moving(&rr, 0, 1, false);
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_UNION);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.shards[0], 0);
    assert_int_equal(rs.shards[1], 1);
    assert_string_equal(rs.move_id, "mv-1");
}

static void test_publish_hold(void **state)
{
    (void)state;
    uint32_t sh[] = {1};
    rt_route rr = route_of(sh, 1);
    moving(&rr, 0, 1, true);
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_HOLD);
    assert_int_equal(rs.n, 1);
    assert_int_equal(rs.shards[0], 1);
    assert_string_equal(rs.move_id, "mv-1");
}

static void test_source_unknown(void **state)
{
    (void)state;
    uint32_t sh[] = {1};
    rt_route rr = route_of(sh, 1);
    moving(&rr, -1, 1, false); /* a source the router's config does not name */
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_NONE);
}

static void test_clone_target_excluded(void **state)
{
    (void)state;
    /* a clone node1 -> node3 keeps the source; even with the target listed first, it is not a
     * candidate while the move is in SWITCH (its real table has only the new writes) */
    uint32_t sh[] = {2, 0};
    rt_route rr = route_of(sh, 2);
    moving(&rr, 0, 2, false);
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.n, 1);
    assert_int_equal(rs.shards[0], 0);
    /* and while it publishes: still the source, nothing held */
    mv.publishing = true;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.shards[0], 0);
}

static void test_other_replica_serves(void **state)
{
    (void)state;
    /* rf 2, one replica moved node1 -> node2, node3 keeps a complete copy: read node3 */
    uint32_t sh[] = {1, 2};
    rt_route rr = route_of(sh, 2);
    moving(&rr, 0, 1, false);
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.n, 1);
    assert_int_equal(rs.shards[0], 2);
    mv.publishing = true;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.shards[0], 2);
}

/* replicas that missed acknowledged writes (rt_route.stale, a repair need) come after every
 * up-to-date one, in route order within each group; n_fresh counts the up-to-date ones */
static void test_stale_replicas_last(void **state)
{
    (void)state;
    uint32_t sh[] = {0, 1, 2};
    rt_route rr = route_of(sh, 3);
    rr.stale = 1u << 0; /* node1 missed writes */
    rt_readers rs;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.n, 3);
    assert_int_equal(rs.n_fresh, 2);
    assert_int_equal(rs.shards[0], 1);
    assert_int_equal(rs.shards[1], 2);
    assert_int_equal(rs.shards[2], 0);
    /* every replica missed some: all stale, none fresh */
    rr.stale = 7;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.n, 3);
    assert_int_equal(rs.n_fresh, 0);
    assert_int_equal(rs.shards[0], 0);
    /* none: all fresh */
    rr.stale = 0;
    read_set_of(&rr, &rs);
    assert_int_equal(rs.n_fresh, 3);
    /* a clone's target in SWITCH is still left out, stale or not */
    rr.stale = 1u << 2;
    moving(&rr, 0, 1, false);
    read_set_of(&rr, &rs);
    assert_int_equal(rs.mode, RT_READ_ONE);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.n_fresh, 1);
    assert_int_equal(rs.shards[0], 0);
    assert_int_equal(rs.shards[1], 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_move, no_move),
        cmocka_unit_test_setup(test_unrouted, no_move),
        cmocka_unit_test_setup(test_switch_union, no_move),
        cmocka_unit_test_setup(test_publish_hold, no_move),
        cmocka_unit_test_setup(test_source_unknown, no_move),
        cmocka_unit_test_setup(test_clone_target_excluded, no_move),
        cmocka_unit_test_setup(test_other_replica_serves, no_move),
        cmocka_unit_test_setup(test_stale_replicas_last, no_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
