/* SHOW GRANTS evaluation for doctor's shard_grants check (include/ferry/grants.h): groups,
 * targets, partial revokes, the source forms of ClickHouse 26. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/grants.h"

static ferry_grants *parse(const char *text)
{
    ferry_grants *g = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_grants_parse(text, &g, &err), FERRY_OK);
    return g;
}

static void test_router_identity(void **state)
{
    (void)state;
    /* what docs/security.md recommends for the router's user */
    ferry_grants *g = parse(
        "GRANT SELECT, INSERT ON default.events TO ferry_router\n"
        "GRANT SELECT ON default.dim TO ferry_router\n"
        "GRANT KILL QUERY ON *.* TO ferry_router\n"
        "GRANT READ ON URL TO ferry_router\n"
        "GRANT ALTER FREEZE PARTITION, ALTER MOVE PARTITION ON default.* TO ferry_router\n");
    assert_true(ferry_grants_allow(g, "SELECT", "default", "events"));
    assert_true(ferry_grants_allow(g, "INSERT", "default", "events"));
    assert_false(ferry_grants_allow(g, "INSERT", "default", "dim"));
    assert_false(ferry_grants_allow(g, "SELECT", "other", "events"));
    assert_true(ferry_grants_allow(g, "KILL QUERY", NULL, NULL));
    assert_true(ferry_grants_allow(g, "URL", NULL, NULL));
    assert_false(ferry_grants_allow(g, "S3", NULL, NULL));
    assert_false(ferry_grants_allow(g, "FILE", NULL, NULL));
    assert_false(ferry_grants_allow(g, "DROP TABLE", "default", "events"));
    assert_false(ferry_grants_allow(g, "ALTER DELETE", "default", "events"));
    assert_false(ferry_grants_allow(g, "BACKUP", NULL, NULL));
    ferry_grants_free(g);
}

static void test_groups_and_revokes(void **state)
{
    (void)state;
    /* the lab's all-powerful user (26.7's output) */
    ferry_grants *g = parse(
        "GRANT SOURCES ON *.* TO default\n"
        "GRANT CHECK, SHOW, SELECT, INSERT, ALTER, CREATE, DROP, TRUNCATE, BACKUP, KILL QUERY, "
        "dictGet, displaySecretsInShowAndSelect, FILE, URL, S3 ON *.* TO default\n"
        "GRANT SHOW NAMED COLLECTIONS, NAMED COLLECTION ON * TO default\n");
    assert_true(ferry_grants_allow(g, "DROP TABLE", "default", "events"));
    assert_true(ferry_grants_allow(g, "DROP DATABASE", "default", "events"));
    assert_true(ferry_grants_allow(g, "ALTER DELETE", "default", "events"));
    assert_true(ferry_grants_allow(g, "TRUNCATE", "default", "events"));
    assert_true(ferry_grants_allow(g, "S3", NULL, NULL));
    assert_true(ferry_grants_allow(g, "NAMED COLLECTION", NULL, NULL));
    assert_true(ferry_grants_allow(g, "displaySecretsInShowAndSelect", NULL, NULL));
    assert_false(ferry_grants_allow(g, "CREATE USER", NULL, NULL));
    ferry_grants_free(g);
    /* ALL with partial revokes, in order; quoted names */
    g = parse("GRANT ALL ON *.* TO u WITH GRANT OPTION\n"
              "REVOKE DROP ON `default`.* FROM u\n"
              "REVOKE ALTER DELETE ON default.events FROM u\n"
              "REVOKE SOURCES ON *.* FROM u\n"
              "GRANT READ ON URL TO u\n");
    assert_false(ferry_grants_allow(g, "DROP TABLE", "default", "events"));
    assert_true(ferry_grants_allow(g, "DROP TABLE", "other", "t"));
    assert_false(ferry_grants_allow(g, "ALTER DELETE", "default", "events"));
    assert_true(ferry_grants_allow(g, "ALTER DELETE", "default", "dim"));
    assert_false(ferry_grants_allow(g, "S3", NULL, NULL));
    assert_true(ferry_grants_allow(g, "URL", NULL, NULL));
    assert_true(ferry_grants_allow(g, "SELECT", "default", "events"));
    assert_true(ferry_grants_allow(g, "CREATE USER", NULL, NULL));
    ferry_grants_free(g);
    /* column grants count; roles and unknown lines are ignored */
    g = parse("GRANT SELECT(tenant, x), INSERT(tenant) ON default.events TO u\n"
              "GRANT reader TO u\n"
              "something else\n"
              "GRANT READ, WRITE ON S3('https://bucket/.*') TO u\n");
    assert_true(ferry_grants_allow(g, "SELECT", "default", "events"));
    assert_true(ferry_grants_allow(g, "INSERT", "default", "events"));
    assert_true(ferry_grants_allow(g, "S3", NULL, NULL));
    assert_false(ferry_grants_allow(g, "FILE", NULL, NULL));
    ferry_grants_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_identity),
        cmocka_unit_test(test_groups_and_revokes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
