/* The catalog conformance suite: the same checks against whichever backend
 * $FERRY_TEST_CATALOG names ("zk://127.0.0.1:PORT" for a running ZooKeeper; each test gets its own
 * chroot), or SQLite in a temporary directory when it is unset. tests/integration/catalog_*.sh run
 * it against both. Races and crashes use real processes (fork, kill -9, SIGSTOP). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shards_text.h"

#include <sqlite3.h>

#include "catalog/catalog_int.h" /* raw documents: a catalog as an older ferry left it */
#include "ferry/catalog.h"
#include "ferry/catalog_scan.h"
#include "ferry/flow_journal.h"
#include "ferry/move.h"
#include "temp_catalog.h"

static temp_catalogs tc; /* tc.zk_base: "zk://host:port" or NULL for SQLite */

/* A URL for a catalog nobody has used yet. */
static void fresh_url(char *out, size_t size, int wait_ms)
{
    char query[64];
    snprintf(query, sizeof query, "timeout_ms=2000&wait_ms=%d", wait_ms);
    temp_catalogs_url(&tc, "conformance", query, out, size);
}

/* The same catalog with another wait limit (only ZooKeeper URLs carry one). */
static void with_wait(const char *url, int wait_ms, char *out, size_t size)
{
    snprintf(out, size, "%s", url);
    char *q = strstr(out, "&wait_ms=");
    if (q)
        snprintf(q, size - (size_t)(q - out), "&wait_ms=%d", wait_ms);
}

static ferry_catalog *open_ok(const char *url)
{
    ferry_catalog *c = NULL;
    ferry_err err = {0};
    int rc = ferry_catalog_open(url, &c, &err);
    if (rc)
        fail_msg("open %s: %s", url, err.msg);
    return c;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void write_byte(int fd, char ch)
{
    if (write(fd, &ch, 1) != 1)
        _exit(99);
}

/* One byte from a child writer's pipe; 0 when it closed, or when nothing came within two
 * minutes (a child stuck: the test fails saying so instead of hanging until ctest's timeout). */
static char read_byte(int fd)
{
    char ch = 0;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int ready = poll(&pf, 1, 120000);
    if (ready <= 0) {
        fprintf(stderr, "read_byte: no byte from the child writer within 120 s\n");
        return 0;
    }
    if (read(fd, &ch, 1) != 1)
        return 0;
    return ch;
}

static void sample(ferry_record *r, enum ferry_record_kind k, int i)
{
    ferry_record_init(r, k);
    char n[32];
    snprintf(n, sizeof n, "x%d", i);
    switch (k) {
    case FERRY_REC_SETTINGS:
        snprintf(r->u.settings.name, sizeof r->u.settings.name, "lab");
        snprintf(r->u.settings.hash, sizeof r->u.settings.hash, "sha256");
        r->u.settings.rf = 2;
        r->u.settings.fill = 0.85;
        snprintf(r->u.settings.clickhouse_version, sizeof r->u.settings.clickhouse_version, "26.7");
        r->u.settings.pointer_format = 5;
        r->u.settings.hot_days = 3;
        break;
    case FERRY_REC_TABLE:
        snprintf(r->u.table.name, sizeof r->u.table.name, "events%d", i);
        snprintf(r->u.table.database, sizeof r->u.table.database, "default");
        r->u.table.layout = i % 2 ? FERRY_LAYOUT_PER_TENANT : FERRY_LAYOUT_SHARED;
        snprintf(r->u.table.tenant_column, sizeof r->u.table.tenant_column, "tenant");
        snprintf(r->u.table.day_column, sizeof r->u.table.day_column, "day");
        snprintf(r->u.table.split_column, sizeof r->u.table.split_column, "split");
        break;
    case FERRY_REC_SHARD:
        snprintf(r->u.shard.name, sizeof r->u.shard.name, "node%d", i);
        r->u.shard.weight = 1.5;
        r->u.shard.capacity = 100ull << 30;
        snprintf(r->u.shard.replicas, sizeof r->u.shard.replicas, "http://127.0.0.1:8123,http://127.0.0.2:8123");
        snprintf(r->u.shard.agent, sizeof r->u.shard.agent, "http://127.0.0.1:9123");
        r->u.shard.state = FERRY_SHARD_DRAINING;
        break;
    case FERRY_REC_TENANT:
        snprintf(r->u.tenant.name, sizeof r->u.tenant.name, "acme%d", i);
        r->u.tenant.splits = 4;
        break;
    case FERRY_REC_SLICE:
        snprintf(r->u.slice.tenant, sizeof r->u.slice.tenant, "acme");
        r->u.slice.split = (uint32_t)i;
        r->u.slice.bytes = 1000 + (uint64_t)i;
        r->u.slice.rows = 10;
        shards_printf(&r->u.slice.placement, "node1");
        break;
    case FERRY_REC_ROUTE:
        snprintf(r->u.route.tenant, sizeof r->u.route.tenant, "acme");
        r->u.route.split = (uint32_t)i;
        shards_printf(&r->u.route.shards, "node1,node2");
        break;
    case FERRY_REC_PARTITION:
        snprintf(r->u.partition.server, sizeof r->u.partition.server, "node1");
        snprintf(r->u.partition.table, sizeof r->u.partition.table, "events");
        snprintf(r->u.partition.partition_id, sizeof r->u.partition.partition_id, "p%d", i);
        snprintf(r->u.partition.tenant, sizeof r->u.partition.tenant, "acme");
        r->u.partition.day = 20260101;
        r->u.partition.split = 1;
        r->u.partition.tier = FERRY_TIER_COLD;
        r->u.partition.bytes = 5;
        r->u.partition.rows = 6;
        break;
    case FERRY_REC_PART:
        snprintf(r->u.part.table, sizeof r->u.part.table, "events");
        snprintf(r->u.part.partition_id, sizeof r->u.part.partition_id, "p1");
        snprintf(r->u.part.origin, sizeof r->u.part.origin, "ferry_tier_1");
        snprintf(r->u.part.name, sizeof r->u.part.name, "all_%d_%d_0", i, i);
        r->u.part.bytes = 4096;
        r->u.part.rows = 100;
        snprintf(r->u.part.servers, sizeof r->u.part.servers, "node1,node2");
        ferry_part_add_object(&r->u.part, "parts/abc/data.bin", 4000, "sha256:00ff", NULL);
        ferry_part_add_object(&r->u.part, "parts/abc/columns.txt", 96, "sha256:11ee", NULL);
        break;
    case FERRY_REC_MOVE:
        snprintf(r->u.move.id, sizeof r->u.move.id, "m%d", i);
        snprintf(r->u.move.tenant, sizeof r->u.move.tenant, "acme");
        r->u.move.split = 2;
        shards_printf(&r->u.move.from, "node1");
        shards_printf(&r->u.move.to, "node2");
        r->u.move.state = FERRY_MOVE_CLONE;
        r->u.move.steps = 3;
        snprintf(r->u.move.owner, sizeof r->u.move.owner, "coordinator-1");
        r->u.move.created = 1700000000;
        r->u.move.updated = 1700000001;
        break;
    case FERRY_REC_JOB:
        snprintf(r->u.job.id, sizeof r->u.job.id, "tier.node1.events.p%d", i);
        snprintf(r->u.job.kind, sizeof r->u.job.kind, "tier");
        snprintf(r->u.job.state, sizeof r->u.job.state, "UPLOAD");
        snprintf(r->u.job.owner, sizeof r->u.job.owner, "coordinator-1");
        char data[128];
        snprintf(data, sizeof data,
                 "{\"freeze\":\"ferry_t%d\",\"parts\":[\"1-20260101-0_1_1_0\"]}", i);
        assert_int_equal(ferry_job_set_data(&r->u.job, data, NULL), FERRY_OK);
        r->u.job.created = 1700000000;
        r->u.job.updated = 1700000002;
        break;
    case FERRY_REC_USER:
        snprintf(r->u.user.name, sizeof r->u.user.name, "analyst%d", i);
        snprintf(r->u.user.salt, sizeof r->u.user.salt, "000102030405060708090a0b0c0d0e0f");
        snprintf(r->u.user.hash, sizeof r->u.user.hash, "%064d", i);
        snprintf(r->u.user.tenants, sizeof r->u.user.tenants, "acme,beta");
        snprintf(r->u.user.tables, sizeof r->u.user.tables, "default.dim");
        snprintf(r->u.user.networks, sizeof r->u.user.networks, "10.0.0.0/8,::1/128");
        r->u.user.max_concurrent = 4;
        r->u.user.max_rps = 10;
        r->u.user.max_execution_ms = 30000;
        r->u.user.queue_wait_ms = 500;
        break;
    default:
        break;
    }
    (void)n;
}

static void part_record(ferry_record *r, const char *partition, int i)
{
    ferry_record_init(r, FERRY_REC_PART);
    snprintf(r->u.part.table, sizeof r->u.part.table, "events");
    snprintf(r->u.part.partition_id, sizeof r->u.part.partition_id, "%s", partition);
    snprintf(r->u.part.origin, sizeof r->u.part.origin, "ferry_tier_%d", i % 3);
    snprintf(r->u.part.name, sizeof r->u.part.name, "all_%d_%d_0", i, i);
    r->u.part.bytes = 1000 + (uint64_t)i;
    r->u.part.rows = 10;
    snprintf(r->u.part.servers, sizeof r->u.part.servers, "node1");
    char key[64];
    snprintf(key, sizeof key, "parts/%s/%d/data.bin", partition, i);
    ferry_part_add_object(&r->u.part, key, 1000 + (uint64_t)i, "sha256:aa", NULL);
}

static size_t count_parts(ferry_catalog *c, const char *partition, int *rc_out)
{
    const char *prefix[2] = {"events", partition};
    ferry_record_list l = {0};
    ferry_err err = {0};
    int rc = ferry_catalog_list(c, FERRY_REC_PART, prefix, 2, &l, &err);
    if (rc_out)
        *rc_out = rc;
    size_t n = l.n;
    ferry_record_list_free(&l);
    return n;
}

/* ---- CRUD of every record kind ---- */

static void test_crud_every_kind(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    for (int k = 0; k < FERRY_REC_KIND_COUNT; k++) {
        ferry_record r, got;
        sample(&r, (enum ferry_record_kind)k, 1);
        assert_int_equal(ferry_catalog_create(c, &r, &err), FERRY_OK);
        assert_int_equal(r.version, 0);
        /* creating it again loses */
        ferry_record again;
        sample(&again, (enum ferry_record_kind)k, 1);
        assert_int_equal(ferry_catalog_create(c, &again, &err), FERRY_ECONFLICT);
        ferry_record_free(&again);
        /* read back: identical */
        sample(&got, (enum ferry_record_kind)k, 1);
        ferry_record_free(&got);
        sample(&got, (enum ferry_record_kind)k, 1);
        if (k == FERRY_REC_PART) { /* keys only: everything else must come from the store */
            free(got.u.part.objects);
            got.u.part.objects = NULL;
            got.u.part.n_objects = 0;
            got.u.part.bytes = 0;
        }
        assert_int_equal(ferry_catalog_get(c, &got, &err), FERRY_OK);
        assert_int_equal(got.version, 0);
        if (k == FERRY_REC_PART) {
            assert_int_equal(got.u.part.n_objects, 2);
            assert_string_equal(got.u.part.objects[1].key, "parts/abc/columns.txt");
            assert_int_equal(got.u.part.bytes, 4096);
        } else if (k == FERRY_REC_JOB) { /* the data by value, the rest byte for byte */
            assert_string_equal(ferry_job_data(&got.u.job), ferry_job_data(&r.u.job));
            char *gd = got.u.job.data_json, *rd = r.u.job.data_json;
            got.u.job.data_json = r.u.job.data_json = NULL;
            assert_memory_equal(&got.u, &r.u, sizeof r.u);
            got.u.job.data_json = gd;
            r.u.job.data_json = rd;
        } else {
            assert_memory_equal(&got.u, &r.u, sizeof r.u);
        }
        ferry_record_free(&got);
        /* update by CAS, then a stale update loses */
        ferry_record stale;
        ferry_record_copy(&stale, &r, &err);
        assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
        assert_int_equal(r.version, 1);
        assert_int_equal(ferry_catalog_update(c, &stale, &err), FERRY_ECONFLICT);
        assert_int_equal(ferry_catalog_delete(c, &stale, &err), FERRY_ECONFLICT);
        ferry_record_free(&stale);
        /* list */
        ferry_record_list l = {0};
        assert_int_equal(ferry_catalog_list(c, (enum ferry_record_kind)k, NULL, 0, &l, &err), FERRY_OK);
        assert_int_equal(l.n, 1);
        assert_int_equal(l.items[0].version, 1);
        ferry_record_list_free(&l);
        /* delete with the right version; then it is gone */
        assert_int_equal(ferry_catalog_delete(c, &r, &err), FERRY_OK);
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_ENOTFOUND);
        assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_ENOTFOUND);
        ferry_record_free(&r);
    }
    /* listing by key prefix, numbers in numeric order */
    for (int i = 0; i < 12; i++) {
        ferry_record r;
        sample(&r, FERRY_REC_SLICE, i);
        assert_int_equal(ferry_catalog_create(c, &r, &err), FERRY_OK);
    }
    ferry_record other;
    sample(&other, FERRY_REC_SLICE, 0);
    snprintf(other.u.slice.tenant, sizeof other.u.slice.tenant, "beta");
    assert_int_equal(ferry_catalog_create(c, &other, &err), FERRY_OK);
    const char *acme[] = {"acme"};
    ferry_record_list l = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, acme, 1, &l, &err), FERRY_OK);
    assert_int_equal(l.n, 12);
    for (size_t i = 0; i < l.n; i++)
        assert_int_equal(l.items[i].u.slice.split, i);
    ferry_record_list_free(&l);
    /* bad keys are refused before anything is written */
    ferry_record bad;
    sample(&bad, FERRY_REC_TENANT, 0);
    snprintf(bad.u.tenant.name, sizeof bad.u.tenant.name, "a/b");
    assert_int_equal(ferry_catalog_create(c, &bad, &err), FERRY_EINVAL);
    ferry_catalog_close(c);
}

/* ---- move transitions and CAS between two processes ---- */

/* A move's transition as its flow writes it: through the flow engine over the move record
 * (checked against ferry_move_flow, one CAS). */
static int move_advance(ferry_catalog *c, ferry_record *m, enum ferry_move_state to,
                        const char *detail, ferry_err *err)
{
    ferry_flow_journal fj;
    ferry_flow_journal_init(&fj, c, &ferry_move_flow, "test");
    return ferry_flow_advance(&fj, m, (int)to, detail, NULL, err);
}

/* A job's data is as long as the flow needs, up to FERRY_JOB_DATA_MAX - 1 bytes (a move's
 * fingerprints of hundreds of tables, a tier job's list of thousands of hot parts): stored and
 * read back whole, copied deeply, and refused past the bound with nothing written. */
static void test_job_data_large(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    size_t len = FERRY_JOB_DATA_MAX - 1;
    char *big = malloc(len + 2);
    assert_non_null(big);
    memcpy(big, "{\"hot\":\"", 8);
    for (size_t i = 8; i < len - 2; i++)
        big[i] = (char)('a' + i % 26);
    memcpy(big + len - 2, "\"}", 3);
    assert_int_equal(strlen(big), len);
    ferry_record r, got, copy;
    sample(&r, FERRY_REC_JOB, 7);
    assert_int_equal(ferry_job_set_data(&r.u.job, big, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_create(c, &r, &err), FERRY_OK);
    sample(&got, FERRY_REC_JOB, 7);
    assert_int_equal(ferry_catalog_get(c, &got, &err), FERRY_OK);
    assert_string_equal(ferry_job_data(&got.u.job), big);
    assert_int_equal(ferry_record_copy(&copy, &got, &err), FERRY_OK);
    assert_ptr_not_equal(copy.u.job.data_json, got.u.job.data_json);
    ferry_record_free(&got);
    assert_string_equal(ferry_job_data(&copy.u.job), big);
    ferry_record_free(&copy);
    /* one byte more is refused, and the data stays as it was */
    big[len - 2] = 'z';
    memcpy(big + len - 1, "\"}", 3);
    assert_int_equal(ferry_job_set_data(&r.u.job, big, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "too large"));
    assert_int_equal((int)strlen(ferry_job_data(&r.u.job)), (int)len);
    /* empty data: none */
    assert_int_equal(ferry_job_set_data(&r.u.job, "", &err), FERRY_OK);
    assert_null(r.u.job.data_json);
    assert_string_equal(ferry_job_data(&r.u.job), "");
    ferry_record_free(&r);
    free(big);
    ferry_catalog_close(c);
}

static void test_move_cas_race(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_err err = {0};
    for (int round = 0; round < 4; round++) {
        ferry_catalog *c = open_ok(url);
        ferry_record m;
        sample(&m, FERRY_REC_MOVE, round);
        assert_int_equal(ferry_catalog_create(c, &m, &err), FERRY_OK);
        /* an illegal transition is refused */
        assert_int_equal(move_advance(c, &m, FERRY_MOVE_DONE, NULL, &err), FERRY_EINTERNAL);
        ferry_catalog_close(c); /* no client threads across fork */

        int ready[2], go[2];
        assert_int_equal(pipe(ready), 0);
        assert_int_equal(pipe(go), 0);
        pid_t kids[2];
        for (int k = 0; k < 2; k++) {
            kids[k] = fork();
            assert_true(kids[k] >= 0);
            if (kids[k] == 0) {
                ferry_catalog *cc = NULL;
                ferry_err e = {0};
                if (ferry_catalog_open(url, &cc, &e))
                    _exit(3);
                ferry_record mine;
                sample(&mine, FERRY_REC_MOVE, round);
                if (ferry_catalog_get(cc, &mine, &e))
                    _exit(4);
                write_byte(ready[1], 'r');
                read_byte(go[0]);
                int rc = move_advance(cc, &mine, FERRY_MOVE_VERIFY, "verify", &e);
                ferry_catalog_close(cc);
                _exit(rc == FERRY_OK ? 0 : rc == FERRY_ECONFLICT ? 1 : 2);
            }
        }
        read_byte(ready[0]);
        read_byte(ready[0]); /* both hold the same version */
        write_byte(go[1], 'g');
        write_byte(go[1], 'g');
        int wins = 0, losses = 0;
        for (int k = 0; k < 2; k++) {
            int st;
            assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
            assert_true(WIFEXITED(st));
            wins += WEXITSTATUS(st) == 0;
            losses += WEXITSTATUS(st) == 1;
        }
        close(ready[0]);
        close(ready[1]);
        close(go[0]);
        close(go[1]);
        assert_int_equal(wins, 1);
        assert_int_equal(losses, 1);
        c = open_ok(url);
        ferry_record now;
        sample(&now, FERRY_REC_MOVE, round);
        assert_int_equal(ferry_catalog_get(c, &now, &err), FERRY_OK);
        assert_int_equal(now.u.move.state, FERRY_MOVE_VERIFY);
        assert_int_equal(now.version, 1); /* exactly one write */
        ferry_catalog_close(c);
    }
}

/* ---- batches ---- */

static void check_conflicting_batch(ferry_catalog *c, int extra_parts)
{
    ferry_err err = {0};
    ferry_record shard;
    sample(&shard, FERRY_REC_SHARD, 7);
    assert_int_equal(ferry_catalog_create(c, &shard, &err), FERRY_OK);
    ferry_record stale = shard;
    assert_int_equal(ferry_catalog_update(c, &shard, &err), FERRY_OK); /* stale is now old */

    ferry_batch *b = ferry_batch_new();
    ferry_record t;
    sample(&t, FERRY_REC_TENANT, 9);
    assert_int_equal(ferry_batch_create(b, &t, &err), FERRY_OK);
    for (int i = 0; i < extra_parts; i++) {
        ferry_record p;
        part_record(&p, "conflict", i);
        assert_int_equal(ferry_batch_create(b, &p, &err), FERRY_OK);
        ferry_record_free(&p);
    }
    ferry_record route;
    sample(&route, FERRY_REC_ROUTE, 3);
    assert_int_equal(ferry_batch_create(b, &route, &err), FERRY_OK);
    stale.u.shard.state = FERRY_SHARD_GONE;
    assert_int_equal(ferry_batch_update(b, &stale, &err), FERRY_OK); /* the conflicting op, last */
    uint64_t rv0 = 0, rv1 = 0;
    assert_int_equal(ferry_catalog_routing_version(c, &rv0, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_ECONFLICT);
    assert_non_null(strstr(err.msg, "shards/node7"));
    ferry_batch_free(b);
    /* nothing applied */
    assert_int_equal(ferry_catalog_get(c, &t, &err), FERRY_ENOTFOUND);
    assert_int_equal(ferry_catalog_get(c, &route, &err), FERRY_ENOTFOUND);
    assert_int_equal(count_parts(c, "conflict", NULL), 0);
    assert_int_equal(ferry_catalog_get(c, &shard, &err), FERRY_OK);
    assert_int_equal(shard.u.shard.state, FERRY_SHARD_DRAINING);
    assert_int_equal(ferry_catalog_routing_version(c, &rv1, &err), FERRY_OK);
    assert_int_equal(rv0, rv1);
    /* and a batch that needs no rollback still goes through afterwards (the gate is open) */
    b = ferry_batch_new();
    assert_int_equal(ferry_batch_create(b, &t, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_int_equal(ferry_catalog_delete(c, &t, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_delete(c, &shard, &err), FERRY_OK); /* at its read version */
}

static void test_batch_atomicity(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    check_conflicting_batch(c, 0);    /* one multi */
    check_conflicting_batch(c, 1000); /* chunked: rolled back from the undo journal */
    /* a chunked batch of updates whose last one is stale: every document is restored */
    ferry_err e = {0};
    ferry_batch *b = ferry_batch_new();
    ferry_record tenants[300];
    for (int i = 0; i < 300; i++) {
        sample(&tenants[i], FERRY_REC_TENANT, 100 + i);
        assert_int_equal(ferry_batch_create(b, &tenants[i], &e), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &e), FERRY_OK);
    ferry_batch_free(b);
    ferry_record bump = tenants[299];
    bump.version = 0;
    assert_int_equal(ferry_catalog_update(c, &bump, &e), FERRY_OK); /* tenants[299] is now stale */
    b = ferry_batch_new();
    for (int i = 0; i < 300; i++) {
        tenants[i].version = 0;
        tenants[i].u.tenant.splits = 9;
        assert_int_equal(ferry_batch_update(b, &tenants[i], &e), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &e), FERRY_ECONFLICT);
    ferry_batch_free(b);
    ferry_record_list l = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_TENANT, NULL, 0, &l, &e), FERRY_OK);
    assert_int_equal(l.n, 300);
    for (size_t i = 0; i < l.n; i++) {
        assert_int_equal(l.items[i].u.tenant.splits, 4);
        /* contents are restored; ZooKeeper's rollback rewrites them, which advances their
         * versions (a token, never reused: a reader of the old version then loses its CAS) */
        if (!tc.zk_base)
            assert_int_equal(l.items[i].version, strcmp(l.items[i].u.tenant.name, "acme399") ? 0 : 1);
        tenants[i].version = l.items[i].version; /* same (numeric-aware) order as tenants[] */
    }
    ferry_record_list_free(&l);
    /* the same batch at the right versions goes through, in few round trips */
    b = ferry_batch_new();
    for (int i = 0; i < 300; i++)
        assert_int_equal(ferry_batch_update(b, &tenants[i], &e), FERRY_OK);
    ferry_commit_info info = {0};
    assert_int_equal(ferry_catalog_commit(c, b, &info, &e), FERRY_OK);
    ferry_batch_free(b);
    /* ZooKeeper: the 300 records and their tenants' 300 slice packs in chunks, not a round trip
     * per record */
    if (info.round_trips > 20)
        fail_msg("300 tenant updates took %zu round trips (at most 20 expected)",
                 (size_t)info.round_trips);
    size_t n = 99;
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_recover(c, &n, &err), FERRY_OK);
    assert_int_equal(n, 0); /* nothing left behind */
    ferry_catalog_close(c);
}

static void test_chunked_10000_parts(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    ferry_batch *b = ferry_batch_new();
    for (int i = 0; i < 10000; i++) {
        ferry_record p;
        part_record(&p, "big", i);
        assert_int_equal(ferry_batch_create(b, &p, &err), FERRY_OK);
        ferry_record_free(&p);
    }
    ferry_commit_info info = {0};
    assert_int_equal(ferry_catalog_commit(c, b, &info, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_int_equal(info.ops, 10000);
    if (tc.zk_base) {
        assert_true(info.chunks >= 100);
        assert_true(info.round_trips < 250); /* not 10,000 */
    }
    assert_int_equal(count_parts(c, "big", NULL), 10000);
    /* 500 slices of 500 tenants: their 500 parent folders cost one pipelined round trip */
    b = ferry_batch_new();
    for (int i = 0; i < 500; i++) {
        ferry_record sl;
        sample(&sl, FERRY_REC_SLICE, 0);
        snprintf(sl.u.slice.tenant, sizeof sl.u.slice.tenant, "t%d", i);
        assert_int_equal(ferry_batch_create(b, &sl, &err), FERRY_OK);
    }
    memset(&info, 0, sizeof info);
    assert_int_equal(ferry_catalog_commit(c, b, &info, &err), FERRY_OK);
    ferry_batch_free(b);
    /* ZooKeeper: the 500 slice documents and their 500 packs in chunks of 100 operations,
     * the journal, and the reads (not one round trip per tenant or parent) */
    if (tc.zk_base && info.round_trips > 20)
        fail_msg("500 slices of 500 tenants took %zu round trips (at most 20 expected)",
                 (size_t)info.round_trips);
    ferry_record_list sl = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_SLICE, NULL, 0, &sl, &err), FERRY_OK);
    assert_int_equal(sl.n, 500);
    ferry_record_list_free(&sl);
    ferry_record one;
    part_record(&one, "big", 9999);
    ferry_record_free(&one);
    part_record(&one, "big", 9999);
    assert_int_equal(ferry_catalog_get(c, &one, &err), FERRY_OK);
    assert_int_equal(one.u.part.bytes, 1000 + 9999);
    ferry_record_free(&one);
    ferry_catalog_close(c);
}

/* Progress hook for writers in child processes: after the 3rd chunk, tell the parent and wait
 * (forever, when the parent means to kill us). */
typedef struct hook {
    int to_parent, from_parent;
} hook;

static void pause_after_third(size_t done, size_t total, void *arg)
{
    (void)total;
    hook *h = arg;
    if (done == 3) {
        write_byte(h->to_parent, 'p');
        read_byte(h->from_parent);
    }
}

static void partition_rec(ferry_record *r, int i, enum ferry_tier tier, uint32_t day);

/* A child process committing one batch of 2000 records (parts of partition "crash", or with
 * partitions set partition records of tier hot and day 20260301), paused after its 3rd chunk. */
static pid_t spawn_writer_of(const char *url, bool partitions, hook *h, int *to_child,
                             int *from_child)
{
    int up[2], down[2];
    if (pipe(up) || pipe(down))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        h->to_parent = up[1];
        h->from_parent = down[0];
        ferry_catalog *cc = NULL;
        ferry_err e = {0};
        if (ferry_catalog_open(url, &cc, &e))
            _exit(3);
        ferry_catalog_set_chunk_ops(cc, 50); /* more chunks, so "half-way" is well inside */
        ferry_catalog_set_progress(cc, pause_after_third, h);
        ferry_batch *b = ferry_batch_new();
        for (int i = 0; i < 2000; i++) {
            ferry_record p;
            if (partitions)
                partition_rec(&p, 1000 + i, FERRY_TIER_HOT, 20260301);
            else
                part_record(&p, "crash", i);
            if (ferry_batch_create(b, &p, &e))
                _exit(4);
            ferry_record_free(&p);
        }
        int rc = ferry_catalog_commit(cc, b, NULL, &e);
        ferry_batch_free(b);
        ferry_catalog_close(cc);
        _exit(rc == FERRY_OK ? 0 : 5);
    }
    close(up[1]);
    close(down[0]);
    *to_child = down[1];
    *from_child = up[0];
    return pid;
}

static pid_t spawn_writer(const char *url, hook *h, int *to_child, int *from_child)
{
    return spawn_writer_of(url, false, h, to_child, from_child);
}

static void test_batch_invisible_until_committed(void **state)
{
    (void)state;
    char url[512], quick[512];
    fresh_url(url, sizeof url, 20000);
    with_wait(url, 300, quick, sizeof quick);
    ferry_catalog_close(open_ok(url)); /* lay it out */
    hook h;
    int to_child, from_child;
    pid_t pid = spawn_writer(url, &h, &to_child, &from_child);
    assert_true(pid > 0);
    assert_int_equal(read_byte(from_child), 'p'); /* 3 chunks written, batch not committed */
    ferry_catalog *c = open_ok(quick);
    int rc = 0;
    size_t seen = count_parts(c, "crash", &rc);
    /* SQLite readers see the last committed state; ZooKeeper readers wait for the gate and give
     * up after wait_ms. Either way: none of the batch. */
    assert_true((rc == FERRY_OK && seen == 0) || rc == FERRY_ETIMEOUT);
    write_byte(to_child, 'g');
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(count_parts(c, "crash", &rc), 2000);
    assert_int_equal(rc, FERRY_OK);
    close(to_child);
    close(from_child);
    ferry_catalog_close(c);
}

static void test_crash_mid_batch(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 20000);
    ferry_catalog_close(open_ok(url));
    hook h;
    int to_child, from_child;
    pid_t pid = spawn_writer(url, &h, &to_child, &from_child);
    assert_true(pid > 0);
    assert_int_equal(read_byte(from_child), 'p');
    kill(pid, SIGKILL); /* half-way through the batch */
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    close(to_child);
    close(from_child);

    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    if (tc.zk_base) {
        /* The dead writer's session expires after its timeout; recovery then rolls it back. */
        size_t total = 0;
        for (int i = 0; i < 100 && total == 0; i++) {
            size_t n = 0;
            assert_int_equal(ferry_catalog_recover(c, &n, &err), FERRY_OK);
            total += n;
            if (!total)
                sleep_ms(100);
        }
        assert_int_equal(total, 1);
    }
    int rc = 0;
    assert_int_equal(count_parts(c, "crash", &rc), 0);
    assert_int_equal(rc, FERRY_OK);
    size_t n = 9;
    assert_int_equal(ferry_catalog_recover(c, &n, &err), FERRY_OK);
    assert_int_equal(n, 0);
    /* the same batch, retried, goes through completely */
    ferry_batch *b = ferry_batch_new();
    for (int i = 0; i < 2000; i++) {
        ferry_record p;
        part_record(&p, "crash", i);
        assert_int_equal(ferry_batch_create(b, &p, &err), FERRY_OK);
        ferry_record_free(&p);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_int_equal(count_parts(c, "crash", &rc), 2000);
    ferry_catalog_close(c);
}

/* ---- the lease ---- */

static pid_t spawn_holder(const char *url, int *from_child, int *to_child)
{
    int up[2], down[2];
    if (pipe(up) || pipe(down))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        ferry_catalog *cc = NULL;
        ferry_err e = {0};
        ferry_lease *l = NULL;
        if (ferry_catalog_open(url, &cc, &e) ||
            ferry_catalog_lease_acquire(cc, "coordinator", "holder-child", &l, &e))
            _exit(3);
        write_byte(up[1], 'h');
        read_byte(down[0]); /* parent: "check your lease now" */
        for (int i = 0; i < 150; i++) {
            if (!ferry_catalog_lease_valid(cc, l))
                _exit(0); /* learnt that it lost the lease */
            sleep_ms(100);
        }
        _exit(1);
    }
    close(up[1]);
    close(down[0]);
    *from_child = up[0];
    *to_child = down[1];
    return pid;
}

static int acquire_within(const char *url, int ms, ferry_lease **l, ferry_catalog **cout)
{
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    int64_t deadline = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    deadline = ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + ms;
    int rc;
    for (;;) {
        rc = ferry_catalog_lease_acquire(c, "coordinator", "parent", l, &err);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (rc != FERRY_ECONFLICT || ts.tv_sec * 1000 + ts.tv_nsec / 1000000 > deadline)
            break;
        sleep_ms(100);
    }
    *cout = c;
    return rc;
}

static void test_lease_killed_holder(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog_close(open_ok(url));
    int from_child, to_child;
    pid_t pid = spawn_holder(url, &from_child, &to_child);
    assert_int_equal(read_byte(from_child), 'h');
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    ferry_lease *l = NULL;
    assert_int_equal(ferry_catalog_lease_acquire(c, "coordinator", "parent", &l, &err), FERRY_ECONFLICT);
    assert_non_null(strstr(err.msg, "holder-child"));
    ferry_catalog_close(c);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    close(from_child);
    close(to_child);
    assert_int_equal(acquire_within(url, 15000, &l, &c), FERRY_OK);
    assert_true(ferry_catalog_lease_valid(c, l));
    /* a second contender in this process is refused while we hold it */
    ferry_catalog *c2 = open_ok(url);
    ferry_lease *l2 = NULL;
    assert_int_equal(ferry_catalog_lease_acquire(c2, "coordinator", "other", &l2, &err), FERRY_ECONFLICT);
    ferry_catalog_lease_release(c, l);
    assert_int_equal(ferry_catalog_lease_acquire(c2, "coordinator", "other", &l2, &err), FERRY_OK);
    ferry_catalog_lease_release(c2, l2);
    ferry_catalog_close(c2);
    ferry_catalog_close(c);
}

static void test_lease_session_expiry(void **state)
{
    (void)state;
    if (!tc.zk_base) {
        skip(); /* an flock lease lasts as long as its process; only sessions expire */
        return;
    }
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog_close(open_ok(url));
    int from_child, to_child;
    pid_t pid = spawn_holder(url, &from_child, &to_child);
    assert_int_equal(read_byte(from_child), 'h');
    kill(pid, SIGSTOP); /* alive but silent: its session times out */
    ferry_lease *l = NULL;
    ferry_catalog *c = NULL;
    assert_int_equal(acquire_within(url, 15000, &l, &c), FERRY_OK);
    kill(pid, SIGCONT);
    write_byte(to_child, 'c');
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0); /* the old holder saw that it lost the lease */
    assert_true(ferry_catalog_lease_valid(c, l));
    ferry_catalog_lease_release(c, l);
    ferry_catalog_close(c);
    close(from_child);
    close(to_child);
}

/* Leases of finished work leave nothing behind: a cluster takes one per move (tens of
 * thousands). SQLite: no lock file stays beside the database; ZooKeeper: no node under leases/. */
static void test_lease_leaves_nothing(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    for (int i = 0; i < 50; i++) {
        char name[32];
        snprintf(name, sizeof name, "move.m%d", i);
        ferry_lease *l = NULL;
        assert_int_equal(ferry_catalog_lease_acquire(c, name, "test", &l, &err), FERRY_OK);
        assert_true(ferry_catalog_lease_valid(c, l));
        ferry_catalog_lease_release(c, l);
    }
    /* one still held shows up, so the checks below can see a lease */
    ferry_lease *held = NULL;
    assert_int_equal(ferry_catalog_lease_acquire(c, "move.held", "test", &held, &err), FERRY_OK);
    size_t files = 0, nodes = 0;
    if (tc.zk_base) {
        cat_items items = {0};
        assert_int_equal(c->ops->scan(c, "leases", 1, &items, &err), FERRY_OK);
        nodes = items.n;
        cat_items_free(&items);
    } else {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "c%d.db-lease-", tc.counter);
        DIR *d = opendir(tc.dir);
        assert_non_null(d);
        for (struct dirent *de; (de = readdir(d));)
            files += !strncmp(de->d_name, prefix, strlen(prefix));
        closedir(d);
    }
    assert_int_equal(tc.zk_base ? nodes : files, 1);
    ferry_catalog_lease_release(c, held);
    if (tc.zk_base) {
        cat_items items = {0};
        assert_int_equal(c->ops->scan(c, "leases", 1, &items, &err), FERRY_OK);
        assert_int_equal(items.n, 0);
        cat_items_free(&items);
    }
    ferry_catalog_close(c);
}

/* Processes taking and giving up one lease in a loop never hold it together: a contender that
 * locked the file its holder was removing must see that and open the new one. */
static void test_lease_exclusive_under_churn(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog_close(open_ok(url));
    volatile int *shared = mmap(NULL, 2 * sizeof(int), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(shared != MAP_FAILED);
    shared[0] = shared[1] = 0; /* holder, overlaps seen */
    enum { PROCS = 4, ROUNDS = 150 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            ferry_catalog *cc = NULL;
            ferry_err e = {0};
            if (ferry_catalog_open(url, &cc, &e))
                _exit(3);
            for (int got = 0; got < ROUNDS;) {
                ferry_lease *l = NULL;
                int rc = ferry_catalog_lease_acquire(cc, "move.churn", "child", &l, &e);
                if (rc == FERRY_ECONFLICT)
                    continue;
                if (rc)
                    _exit(4);
                if (__atomic_exchange_n(&shared[0], (int)getpid(), __ATOMIC_SEQ_CST) != 0)
                    __atomic_add_fetch(&shared[1], 1, __ATOMIC_SEQ_CST);
                sleep_ms(got % 3);
                __atomic_store_n(&shared[0], 0, __ATOMIC_SEQ_CST);
                ferry_catalog_lease_release(cc, l);
                got++;
            }
            ferry_catalog_close(cc);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int st;
        assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    assert_int_equal(shared[1], 0);
    munmap((void *)shared, 2 * sizeof(int));
}

/* ---- restart, routing, dumps ---- */

static void fill_catalog(ferry_catalog *c)
{
    ferry_err err = {0};
    ferry_batch *b = ferry_batch_new();
    for (int k = 0; k < FERRY_REC_KIND_COUNT; k++)
        for (int i = 0; i < (k == FERRY_REC_SETTINGS ? 1 : 3); i++) {
            ferry_record r;
            sample(&r, (enum ferry_record_kind)k, i);
            assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
            ferry_record_free(&r);
        }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
}

static void test_restart_and_reload(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    fill_catalog(c);
    ferry_err err = {0};
    char *before = NULL, *after = NULL;
    assert_int_equal(ferry_catalog_export(c, &before, &err), FERRY_OK);
    ferry_catalog_close(c);
    c = open_ok(url);
    assert_int_equal(ferry_catalog_export(c, &after, &err), FERRY_OK);
    assert_string_equal(before, after);
    assert_non_null(strstr(after, "\"routing_version\": 1"));
    /* export -> import into a fresh catalog -> export: identical */
    char url2[512];
    fresh_url(url2, sizeof url2, 5000);
    ferry_catalog *c2 = open_ok(url2);
    assert_int_equal(ferry_catalog_import(c2, before, &err), FERRY_OK);
    free(after);
    assert_int_equal(ferry_catalog_export(c2, &after, &err), FERRY_OK);
    assert_string_equal(before, after);
    /* import never merges */
    assert_int_equal(ferry_catalog_import(c2, before, &err), FERRY_ECONFLICT);
    ferry_catalog_close(c2);
    free(before);
    free(after);
    ferry_catalog_close(c);
}

static void test_routing_version(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    uint64_t v = 99;
    assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
    assert_int_equal(v, 0);
    /* one batch of three routes: one switch */
    ferry_batch *b = ferry_batch_new();
    for (int i = 0; i < 3; i++) {
        ferry_record r;
        sample(&r, FERRY_REC_ROUTE, i);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    ferry_commit_info info = {0};
    assert_int_equal(ferry_catalog_commit(c, b, &info, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_int_equal(info.routing_version, 1);
    /* a change that is not routing state leaves it alone */
    ferry_record sl;
    sample(&sl, FERRY_REC_SLICE, 1);
    assert_int_equal(ferry_catalog_create(c, &sl, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
    assert_int_equal(v, 1);
    /* a tenant's record is: routers load tenants with their routes (and read again only the
     * tenants the routing change log names) */
    ferry_record t;
    sample(&t, FERRY_REC_TENANT, 1);
    assert_int_equal(ferry_catalog_create(c, &t, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
    assert_int_equal(v, 2);
    assert_int_equal(ferry_catalog_delete(c, &t, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
    assert_int_equal(v, 3);
    /* users are routing state: creating, changing and removing one each raise it (routers load
     * users with the routes) */
    ferry_record u;
    sample(&u, FERRY_REC_USER, 1);
    assert_int_equal(ferry_catalog_create(c, &u, &err), FERRY_OK);
    snprintf(u.u.user.tenants, sizeof u.u.user.tenants, "acme");
    assert_int_equal(ferry_catalog_update(c, &u, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_delete(c, &u, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
    assert_int_equal(v, 6);
    /* the switches below count on from 1: a fresh catalog with the three routes again */
    ferry_catalog_close(c);
    fresh_url(url, sizeof url, 5000);
    c = open_ok(url);
    b = ferry_batch_new();
    for (int i = 0; i < 3; i++) {
        ferry_record r;
        sample(&r, FERRY_REC_ROUTE, i);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, &info, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_int_equal(info.routing_version, 1);
    /* a waiter that times out */
    uint64_t now = 0;
    assert_int_equal(ferry_catalog_routing_wait(c, 1, 100, &now, &err), FERRY_ETIMEOUT);
    ferry_catalog_close(c);

    /* a watcher in another process sees each switch */
    for (uint64_t expect = 2; expect <= 4; expect++) {
        int up[2];
        assert_int_equal(pipe(up), 0);
        pid_t pid = fork();
        if (pid == 0) {
            ferry_catalog *cc = NULL;
            ferry_err e = {0};
            uint64_t seen = 0;
            if (ferry_catalog_open(url, &cc, &e))
                _exit(3);
            write_byte(up[1], 'w');
            int rc = ferry_catalog_routing_wait(cc, expect - 1, 10000, &seen, &e);
            ferry_catalog_close(cc);
            _exit(rc ? 4 : (int)seen);
        }
        assert_int_equal(read_byte(up[0]), 'w');
        c = open_ok(url);
        ferry_record r;
        sample(&r, FERRY_REC_ROUTE, 1);
        assert_int_equal(ferry_catalog_get(c, &r, &err), FERRY_OK);
        shards_printf(&r.u.route.shards, "node%d", (int)expect);
        assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), (int)expect);
        /* the JSON table agrees with the version */
        char *json = NULL;
        assert_int_equal(ferry_catalog_routing_json(c, "acme", 1, &json, &err), FERRY_OK);
        char want[128];
        snprintf(want, sizeof want,
                 "{\"version\":%d,\"slices\":[{\"tenant\":\"acme\",\"split\":1,\"shards\":[\"node%d\"]}]}",
                 (int)expect, (int)expect);
        assert_string_equal(json, want);
        free(json);
        ferry_catalog_close(c);
        close(up[0]);
        close(up[1]);
    }
    /* a stale route update loses and does not bump the version */
    c = open_ok(url);
    ferry_record r;
    sample(&r, FERRY_REC_ROUTE, 0);
    r.version = 0;
    assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    r.version = 0;
    assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_ECONFLICT);
    assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
    assert_int_equal(v, 5);
    ferry_catalog_close(c);
}

/* The routing change log (lib/catalog/routing_delta.c): each commit that raises the routing
 * version names the tenants whose record or routes it changed; a router asks for the tenants
 * changed since its version. Shard changes name none; a version the log does not reach (an
 * import sets it) is "not covered". And the rows routers load the table from. */
static int count_row(const ferry_routing_row *row, void *arg, ferry_err *err)
{
    (void)err;
    int *n = arg;
    n[row->kind == FERRY_REC_TENANT ? 0 : 1]++;
    if (row->kind == FERRY_REC_ROUTE)
        n[2] += (int)row->shards_len;
    return FERRY_OK;
}

static void changes_are(ferry_catalog *c, uint64_t since, uint64_t upto, const char *want)
{
    ferry_err err = {0};
    bool covered = false;
    char **names = NULL;
    size_t n = 0;
    assert_int_equal(ferry_catalog_routing_changes(c, since, upto, &covered, &names, &n, &err),
                     FERRY_OK);
    assert_true(covered);
    char got[256] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "", names[i]);
    assert_string_equal(got, want);
    ferry_routing_changes_free(names, n);
}

static void test_routing_changes(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    /* v1: tenants acme1, acme2 and three routes of acme */
    ferry_batch *b = ferry_batch_new();
    ferry_record r;
    for (int i = 1; i <= 2; i++) {
        sample(&r, FERRY_REC_TENANT, i);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    for (int i = 0; i < 3; i++) {
        sample(&r, FERRY_REC_ROUTE, i);
        assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
    }
    ferry_commit_info info = {0};
    assert_int_equal(ferry_catalog_commit(c, b, &info, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_int_equal(info.routing_version, 1);
    changes_are(c, 0, 1, "acme,acme1,acme2");
    /* v2: one route changed; v3: a shard; v4: a tenant removed */
    sample(&r, FERRY_REC_ROUTE, 1);
    shards_printf(&r.u.route.shards, "node3");
    assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
    sample(&r, FERRY_REC_SHARD, 1);
    assert_int_equal(ferry_catalog_create(c, &r, &err), FERRY_OK);
    sample(&r, FERRY_REC_TENANT, 2);
    assert_int_equal(ferry_catalog_delete(c, &r, &err), FERRY_OK);
    uint64_t v = 0;
    assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
    assert_int_equal(v, 4);
    changes_are(c, 1, 2, "acme");
    changes_are(c, 2, 3, "");
    changes_are(c, 3, 4, "acme2");
    changes_are(c, 1, 4, "acme,acme2");
    changes_are(c, 0, 4, "acme,acme1,acme2");
    changes_are(c, 4, 4, "");
    /* the rows: one tenant left, three routes of acme (a tenant that is not registered: its
     * routes still come, the router drops them) */
    int n[3] = {0};
    assert_int_equal(ferry_catalog_routing_rows(c, NULL, count_row, n, &err), FERRY_OK);
    assert_int_equal(n[0], 1);
    assert_int_equal(n[1], 3);
    assert_int_equal(n[2], (int)(strlen("node1,node2") * 2 + strlen("node3")));
    memset(n, 0, sizeof n);
    assert_int_equal(ferry_catalog_routing_rows(c, "acme", count_row, n, &err), FERRY_OK);
    assert_int_equal(n[0], 0);
    assert_int_equal(n[1], 3);
    memset(n, 0, sizeof n);
    assert_int_equal(ferry_catalog_routing_rows(c, "acme1", count_row, n, &err), FERRY_OK);
    assert_int_equal(n[0], 1);
    assert_int_equal(n[1], 0);
    /* a dump loaded elsewhere has the version but no log: not covered, read everything */
    char *dump = NULL;
    assert_int_equal(ferry_catalog_export(c, &dump, &err), FERRY_OK);
    char url2[512];
    fresh_url(url2, sizeof url2, 5000);
    ferry_catalog *c2 = open_ok(url2);
    assert_int_equal(ferry_catalog_import(c2, dump, &err), FERRY_OK);
    free(dump);
    bool covered = true;
    char **names = NULL;
    size_t nn = 0;
    assert_int_equal(ferry_catalog_routing_changes(c2, 3, 4, &covered, &names, &nn, &err),
                     FERRY_OK);
    assert_false(covered);
    assert_int_equal(nn, 0);
    /* and a version further back than the log keeps */
    assert_int_equal(ferry_catalog_routing_changes(c, 0, 5000, &covered, &names, &nn, &err),
                     FERRY_OK);
    assert_false(covered);
    if (!tc.zk_base) {
        /* SQLite drops the entry that falls out of the last CAT_ROUTING_LOG_KEEP in the same
         * transaction (ZooKeeper right after the commit, best effort: not waited for here) */
        sample(&r, FERRY_REC_SHARD, 1);
        cat_item it = {0};
        assert_int_equal(c->ops->get(c, CAT_ROUTING_LOG_DIR "/4", &it, &err), FERRY_OK);
        cat_item_free(&it);
        for (int i = 0; i < CAT_ROUTING_LOG_KEEP; i++) {
            r.u.shard.weight = 1 + i % 7;
            r.version = FERRY_VERSION_ANY;
            assert_int_equal(ferry_catalog_update(c, &r, &err), FERRY_OK);
        }
        assert_int_equal(c->ops->get(c, CAT_ROUTING_LOG_DIR "/4", &it, &err), FERRY_ENOTFOUND);
        assert_int_equal(c->ops->get(c, CAT_ROUTING_LOG_DIR "/5", &it, &err), FERRY_OK);
        cat_item_free(&it);
        changes_are(c, 4, 4 + CAT_ROUTING_LOG_KEEP, "");
        assert_int_equal(ferry_catalog_routing_changes(c, 3, 4 + CAT_ROUTING_LOG_KEEP, &covered,
                                                       &names, &nn, &err),
                         FERRY_OK);
        assert_false(covered);
    }
    ferry_catalog_close(c2);
    ferry_catalog_close(c);
}

/* The routing table's JSON is built from the stored documents without a JSON parser; it must be
 * the text json_dumps gives for the routes ferry_catalog_list decodes: numeric key order, lists
 * trimmed and without empty items, escapes, and documents not in the canonical encoding (an
 * older writer's spacing) decoded in full. */
static void test_routing_json_matches_records(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    ferry_batch *b = ferry_batch_new();
    const char *lists[] = {"n1", "n2,n3", "n4,n5,n6", "", "x_y.z-w"};
    for (int t = 0; t < 12; t++)
        for (uint32_t k = 0; k < 12; k += 1 + (uint32_t)t % 3) {
            ferry_record r;
            ferry_record_init(&r, FERRY_REC_ROUTE);
            snprintf(r.u.route.tenant, sizeof r.u.route.tenant, t % 4 ? "t%d" : "%d", t * 7);
            r.u.route.split = k;
            shards_printf(&r.u.route.shards, "%s", lists[(t + k) % 5]);
            assert_int_equal(ferry_batch_create(b, &r, &err), FERRY_OK);
        }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    /* one document as another writer might have spaced it, its list too (read as the router
     * reads it: "n7,n8") */
    cat_op op = {.type = CAT_CREATE, .path = (char *)"routes/odd/3",
                 .doc = (char *)"{ \"tenant\": \"odd\", \"split\": 3, \"shards\": \" n7 , ,n8,\" }",
                 .version = FERRY_VERSION_ANY};
    op.doc_len = strlen(op.doc);
    int64_t nv = 0;
    cat_commit_req req = {&op, 1, CAT_ROUTING_KEEP, 0, &nv, NULL};
    ferry_commit_info info = {0};
    assert_int_equal(c->ops->commit(c, &req, &info, &err), FERRY_OK);
    const char *tenants[] = {NULL, "t7", "odd", "0"};
    for (size_t q = 0; q < 4; q++) {
        ferry_record_list routes = {0};
        const char *prefix[] = {tenants[q]};
        assert_int_equal(ferry_catalog_list(c, FERRY_REC_ROUTE, prefix, tenants[q] ? 1 : 0,
                                            &routes, &err),
                         FERRY_OK);
        uint64_t v = 0;
        assert_int_equal(ferry_catalog_routing_version(c, &v, &err), FERRY_OK);
        json_t *root = json_object(), *slices = json_array();
        json_object_set_new(root, "version", json_integer((json_int_t)v));
        for (size_t i = 0; i < routes.n; i++) {
            const ferry_route *r = &routes.items[i].u.route;
            json_t *o = json_object(), *a = json_array();
            json_object_set_new(o, "tenant", json_string(r->tenant));
            json_object_set_new(o, "split", json_integer(r->split));
            for (size_t k = 0; k < ferry_shard_set_count(&r->shards); k++)
                json_array_append_new(a, json_string(ferry_shard_set_at(&r->shards, k)));
            json_object_set_new(o, "shards", a);
            json_array_append_new(slices, o);
        }
        json_object_set_new(root, "slices", slices);
        char *want = json_dumps(root, JSON_COMPACT), *got = NULL;
        assert_int_equal(ferry_catalog_routing_json(c, tenants[q], -1, &got, &err), FERRY_OK);
        assert_string_equal(got, want);
        if (q == 1) { /* numbers as numbers: split 2 before split 10 */
            assert_non_null(strstr(got, "\"split\":10,"));
            assert_true(strstr(got, "\"split\":2,") < strstr(got, "\"split\":10,"));
        }
        free(got);
        free(want);
        json_decref(root);
        ferry_record_list_free(&routes);
    }
    ferry_catalog_close(c);
}

/* The shards' loads: one derived document, replaced on every put, left out of dumps. */
static void test_shard_loads(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    ferry_shard_load *got = NULL;
    size_t n = 0;
    assert_int_equal(ferry_catalog_loads_get(c, &got, &n, NULL, &err), FERRY_ENOTFOUND);
    ferry_shard_load a[] = {{"s1", 10}, {"s2", 1ULL << 50}};
    assert_int_equal(ferry_catalog_loads_put(c, a, 2, &err), FERRY_OK);
    ferry_shard_load b[] = {{"s3", 7}};
    assert_int_equal(ferry_catalog_loads_put(c, b, 1, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_loads_get(c, &got, &n, NULL, &err), FERRY_OK);
    assert_int_equal(n, 1);
    assert_string_equal(got[0].shard, "s3");
    assert_int_equal(got[0].bytes, 7);
    free(got);
    assert_int_equal(ferry_catalog_loads_put(c, a, 2, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_loads_get(c, &got, &n, NULL, &err), FERRY_OK);
    assert_int_equal(n, 2);
    assert_true((got[0].bytes == 10 && got[1].bytes == 1ULL << 50) ||
                (got[1].bytes == 10 && got[0].bytes == 1ULL << 50));
    free(got);
    ferry_shard_load bad[] = {{"no/slash", 1}};
    assert_int_equal(ferry_catalog_loads_put(c, bad, 1, &err), FERRY_EINVAL);
    char *dump = NULL;
    assert_int_equal(ferry_catalog_export(c, &dump, &err), FERRY_OK);
    assert_null(strstr(dump, "shard_loads"));
    free(dump);
    ferry_catalog_close(c);
}

/* ---- the index of unfinished moves ---- */

/* The ids ferry_catalog_list_unfinished_moves returns, comma-separated, checked against get. */
static void assert_unfinished(ferry_catalog *c, const char *want)
{
    ferry_record_list l = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_list_unfinished_moves(c, &l, &err), FERRY_OK);
    char got[512] = "";
    for (size_t i = 0; i < l.n; i++) {
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "",
                 l.items[i].u.move.id);
        ferry_record now;
        ferry_record_init(&now, FERRY_REC_MOVE);
        snprintf(now.u.move.id, sizeof now.u.move.id, "%s", l.items[i].u.move.id);
        assert_int_equal(ferry_catalog_get(c, &now, &err), FERRY_OK);
        assert_int_equal(now.version, l.items[i].version); /* usable for CAS */
        assert_int_equal(now.u.move.state, l.items[i].u.move.state);
    }
    ferry_record_list_free(&l);
    assert_string_equal(got, want);
}

/* How many documents are stored directly below dir. */
static size_t count_docs(ferry_catalog *c, const char *dir)
{
    cat_items items = {0};
    ferry_err err = {0};
    assert_int_equal(c->ops->scan(c, dir, 1, &items, &err), FERRY_OK);
    size_t n = items.n;
    cat_items_free(&items);
    return n;
}

/* Writes or removes one raw document, bypassing the record layer (and so the index). */
static void raw_op(ferry_catalog *c, enum cat_op_type type, const char *path)
{
    cat_op op = {.type = type, .path = (char *)path, .version = FERRY_VERSION_ANY};
    if (type == CAT_CREATE) {
        op.doc = (char *)"{}";
        op.doc_len = 2;
    }
    int64_t nv = 0;
    cat_commit_req req = {&op, 1, CAT_ROUTING_KEEP, 0, &nv, NULL};
    ferry_commit_info info = {0};
    ferry_err err = {0};
    assert_int_equal(c->ops->commit(c, &req, &info, &err), FERRY_OK);
}

static void create_move(ferry_catalog *c, int i, enum ferry_move_state st, ferry_record *out)
{
    ferry_err err = {0};
    sample(out, FERRY_REC_MOVE, i);
    out->u.move.state = st;
    assert_int_equal(ferry_catalog_create(c, out, &err), FERRY_OK);
}

static void test_unfinished_moves(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    assert_unfinished(c, ""); /* a fresh catalog: the index is built empty */
    ferry_record m1, m2, m3, m10;
    create_move(c, 1, FERRY_MOVE_PLANNED, &m1);
    create_move(c, 2, FERRY_MOVE_DONE, &m2);
    create_move(c, 3, FERRY_MOVE_CLONE, &m3);
    create_move(c, 10, FERRY_MOVE_SWITCH, &m10);
    assert_unfinished(c, "m1,m10,m3"); /* key order, as ferry_catalog_list */
    assert_int_equal(count_docs(c, CAT_MOVE_INDEX_DIR), 3);
    /* rolled back: FAILED is finished */
    assert_int_equal(move_advance(c, &m3, FERRY_MOVE_FAILED, "rolled back", &err), FERRY_OK);
    assert_unfinished(c, "m1,m10");
    /* the switch of m1: record and route in one batch; still unfinished */
    m1.u.move.state = FERRY_MOVE_SWITCH;
    m1.u.move.step = FERRY_MOVE_STEP_PUBLISH;
    ferry_record route;
    sample(&route, FERRY_REC_ROUTE, 2);
    ferry_batch *b = ferry_batch_new();
    assert_int_equal(ferry_batch_update(b, &m1, &err), FERRY_OK);
    assert_int_equal(ferry_batch_create(b, &route, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_unfinished(c, "m1,m10");
    /* m10 finishes */
    assert_int_equal(move_advance(c, &m10, FERRY_MOVE_CLEANUP, NULL, &err), FERRY_OK);
    assert_unfinished(c, "m1,m10");
    assert_int_equal(move_advance(c, &m10, FERRY_MOVE_DONE, NULL, &err), FERRY_OK);
    assert_unfinished(c, "m1");
    /* a finished move's record rewritten (detail): no entry comes back */
    snprintf(m2.u.move.detail, sizeof m2.u.move.detail, "note");
    assert_int_equal(ferry_catalog_update(c, &m2, &err), FERRY_OK);
    assert_unfinished(c, "m1");
    assert_int_equal(count_docs(c, CAT_MOVE_INDEX_DIR), 1);
    /* the flows never make a finished move unfinished; an unconditional write (no CAS) may, and
     * the entry follows it there and back */
    ferry_record revived = m2;
    revived.version = FERRY_VERSION_ANY;
    revived.u.move.state = FERRY_MOVE_CLONE;
    assert_int_equal(ferry_catalog_update(c, &revived, &err), FERRY_OK);
    assert_unfinished(c, "m1,m2");
    revived.version = FERRY_VERSION_ANY;
    revived.u.move.state = FERRY_MOVE_DONE;
    assert_int_equal(ferry_catalog_update(c, &revived, &err), FERRY_OK);
    assert_unfinished(c, "m1");
    m2 = revived;
    /* a batch that fails writes no entry either */
    ferry_record m20, stale = m2;
    sample(&m20, FERRY_REC_MOVE, 20);
    stale.version = 0;
    b = ferry_batch_new();
    assert_int_equal(ferry_batch_create(b, &m20, &err), FERRY_OK);
    assert_int_equal(ferry_batch_check(b, &stale, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_ECONFLICT);
    ferry_batch_free(b);
    assert_int_equal(count_docs(c, CAT_MOVE_INDEX_DIR), 1);
    /* a deleted move leaves the index */
    m1.version = FERRY_VERSION_ANY;
    assert_int_equal(ferry_catalog_delete(c, &m1, &err), FERRY_OK);
    assert_unfinished(c, "");
    assert_int_equal(count_docs(c, CAT_MOVE_INDEX_DIR), 0);
    /* a batch of several moves (the index is listed once instead of read entry by entry) */
    ferry_record many[3];
    b = ferry_batch_new();
    for (int i = 0; i < 3; i++) {
        sample(&many[i], FERRY_REC_MOVE, 40 + i);
        many[i].u.move.state = i == 1 ? FERRY_MOVE_DONE : FERRY_MOVE_PLANNED;
        assert_int_equal(ferry_batch_create(b, &many[i], &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_unfinished(c, "m40,m42");
    b = ferry_batch_new();
    for (int i = 0; i < 3; i++) {
        many[i].version = 0;
        many[i].u.move.state = i == 2 ? FERRY_MOVE_FAILED : FERRY_MOVE_CLONE;
        if (i == 1)
            many[i].u.move.state = FERRY_MOVE_DONE;
        assert_int_equal(ferry_batch_update(b, &many[i], &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_unfinished(c, "m40");
    b = ferry_batch_new();
    for (int i = 0; i < 3; i++) {
        many[i].version = FERRY_VERSION_ANY;
        assert_int_equal(ferry_batch_delete(b, &many[i], &err), FERRY_OK);
    }
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_unfinished(c, "");
    assert_int_equal(count_docs(c, CAT_MOVE_INDEX_DIR), 0);
    /* the index is no record: export does not show it */
    char *dump = NULL;
    assert_int_equal(ferry_catalog_export(c, &dump, &err), FERRY_OK);
    assert_null(strstr(dump, CAT_MOVE_INDEX_DIR));
    free(dump);

    /* a catalog an older ferry wrote: moves, no index, no marker. The first listing builds the
     * index (and drops an entry whose move is finished), across a reopen. */
    ferry_record m30, m31;
    create_move(c, 30, FERRY_MOVE_VERIFY, &m30);
    create_move(c, 31, FERRY_MOVE_DONE, &m31);
    raw_op(c, CAT_DELETE, "moves_active/m30");
    raw_op(c, CAT_CREATE, "moves_active/m31");
    raw_op(c, CAT_DELETE, CAT_MOVE_INDEX_MARKER);
    ferry_catalog_close(c);
    c = open_ok(url);
    assert_int_equal(count_docs(c, CAT_MOVE_INDEX_DIR), 1); /* m31's, stale */
    assert_unfinished(c, "m30");
    assert_int_equal(count_docs(c, "indexes"), 1); /* the marker */
    assert_int_equal(count_docs(c, CAT_MOVE_INDEX_DIR), 1); /* m30's */
    assert_unfinished(c, "m30");
    /* even with a stale entry and the marker, a finished move is never listed */
    raw_op(c, CAT_CREATE, "moves_active/m31");
    assert_unfinished(c, "m30");
    ferry_catalog_close(c);
}

/* The text of a stored document (malloc'ed), bypassing the record layer. */
static char *raw_doc(ferry_catalog *c, const char *path)
{
    cat_item it = {0};
    ferry_err err = {0};
    assert_int_equal(c->ops->get(c, path, &it, &err), FERRY_OK);
    char *doc = strdup(it.doc);
    cat_item_free(&it);
    assert_non_null(doc);
    return doc;
}

/* A move's source and target are a ferry_shard_set in memory and the same text as ever in the
 * catalog: a document as an older ferry wrote it reads as one name each, and writing the record
 * back stores the same bytes. */
static void test_move_stored_text(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 5000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    ferry_record m;
    create_move(c, 77, FERRY_MOVE_DONE, &m);
    const char *old = "{\"created\":1700000000,\"detail\":\"\",\"from\":\"node1\",\"id\":\"m77\","
                      "\"owner\":\"coordinator-1\",\"split\":2,\"state\":\"DONE\",\"step\":0,"
                      "\"steps\":3,\"tenant\":\"acme\",\"to\":\"node2\",\"updated\":1700000001}";
    char *doc = raw_doc(c, "moves/m77");
    assert_string_equal(doc, old);
    free(doc);
    /* written over by the older text, read, written back unchanged */
    cat_op op = {.type = CAT_SET, .path = (char *)"moves/m77", .doc = (char *)old,
                 .doc_len = strlen(old), .version = FERRY_VERSION_ANY};
    int64_t nv = 0;
    cat_commit_req req = {&op, 1, CAT_ROUTING_KEEP, 0, &nv, NULL};
    ferry_commit_info info = {0};
    assert_int_equal(c->ops->commit(c, &req, &info, &err), FERRY_OK);
    ferry_record got;
    ferry_record_init(&got, FERRY_REC_MOVE);
    snprintf(got.u.move.id, sizeof got.u.move.id, "m77");
    assert_int_equal(ferry_catalog_get(c, &got, &err), FERRY_OK);
    assert_int_equal(ferry_shard_set_count(&got.u.move.from), 1);
    assert_string_equal(ferry_shard_set_at(&got.u.move.from, 0), "node1");
    assert_int_equal(ferry_shard_set_count(&got.u.move.to), 1);
    assert_string_equal(ferry_shard_set_at(&got.u.move.to, 0), "node2");
    assert_int_equal(ferry_catalog_update(c, &got, &err), FERRY_OK);
    doc = raw_doc(c, "moves/m77");
    assert_string_equal(doc, old);
    free(doc);
    ferry_catalog_close(c);
}

/* SQLite: WAL with synchronous = FULL, so a commit ferry was told about survives a power loss
 * (NORMAL in WAL mode fsyncs only at checkpoints). */
static void test_sqlite_durability(void **state)
{
    (void)state;
    if (tc.zk_base)
        skip();
    char url[512];
    fresh_url(url, sizeof url, 0);
    ferry_catalog *c = open_ok(url);
    sqlite3 *db = cat_sqlite_handle(c);
    assert_non_null(db);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA synchronous", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2); /* 2 = FULL (1 = NORMAL) */
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    ferry_catalog_close(c);
}

/* ---- the partition counts ---- */

/* Partition record i: on one of two servers, of tier and day as given. */
static void partition_rec(ferry_record *r, int i, enum ferry_tier tier, uint32_t day)
{
    ferry_record_init(r, FERRY_REC_PARTITION);
    ferry_partition *p = &r->u.partition;
    snprintf(p->server, sizeof p->server, "node%d", i % 2);
    snprintf(p->table, sizeof p->table, "events");
    snprintf(p->partition_id, sizeof p->partition_id, "p%d", i);
    snprintf(p->tenant, sizeof p->tenant, "t%d", i % 7);
    p->day = day;
    p->split = (uint32_t)(i % 3);
    p->tier = tier;
    p->bytes = 1000 + (uint64_t)i;
    p->rows = 10;
}

/* "tier/day=n,..." in tier then day order, from ferry_catalog_partition_counts. */
static void counts_text(ferry_catalog *c, char *out, size_t size)
{
    ferry_partition_count *pc = NULL;
    size_t n = 0;
    ferry_err err = {0};
    if (ferry_catalog_partition_counts(c, &pc, &n, &err))
        fail_msg("partition counts: %s", err.msg);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        assert_true(pc[i].n > 0);
        if (i)
            assert_true(pc[i - 1].tier < pc[i].tier ||
                        (pc[i - 1].tier == pc[i].tier && pc[i - 1].day < pc[i].day));
        snprintf(out + strlen(out), size - strlen(out), "%s%s/%u=%llu", i ? "," : "",
                 ferry_tier_name(pc[i].tier), pc[i].day, (unsigned long long)pc[i].n);
    }
    free(pc);
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The counts equal want and what counting the listed partition records gives. */
static void assert_counts(ferry_catalog *c, const char *want)
{
    ferry_record_list l = {0};
    ferry_err err = {0};
    assert_int_equal(ferry_catalog_list(c, FERRY_REC_PARTITION, NULL, 0, &l, &err), FERRY_OK);
    uint64_t *keys = calloc(l.n + 1, sizeof *keys); /* tier << 32 | day, sorted */
    assert_non_null(keys);
    for (size_t i = 0; i < l.n; i++)
        keys[i] = (uint64_t)l.items[i].u.partition.tier << 32 | l.items[i].u.partition.day;
    qsort(keys, l.n, sizeof *keys, u64_cmp);
    char listed[1024] = "", got[1024];
    for (size_t i = 0, j; i < l.n; i = j) {
        for (j = i; j < l.n && keys[j] == keys[i]; j++)
            ;
        snprintf(listed + strlen(listed), sizeof listed - strlen(listed), "%s%s/%u=%zu",
                 i ? "," : "", ferry_tier_name((enum ferry_tier)(keys[i] >> 32)),
                 (uint32_t)keys[i], j - i);
    }
    free(keys);
    ferry_record_list_free(&l);
    counts_text(c, got, sizeof got);
    assert_string_equal(listed, want);
    assert_string_equal(got, want);
}

static void test_partition_counts(void **state)
{
    (void)state;
    char url[512];
    fresh_url(url, sizeof url, 20000);
    ferry_catalog *c = open_ok(url);
    ferry_err err = {0};
    assert_counts(c, "");
    /* a batch of six */
    ferry_record p[8];
    for (int i = 0; i < 8; i++)
        ferry_record_init(&p[i], FERRY_REC_PARTITION);
    ferry_batch *b = ferry_batch_new();
    static const struct { enum ferry_tier tier; uint32_t day; } first[6] = {
        {FERRY_TIER_HOT, 20260101}, {FERRY_TIER_HOT, 20260101}, {FERRY_TIER_HOT, 20260102},
        {FERRY_TIER_COLD, 20260101}, {FERRY_TIER_COLD, 20260101}, {FERRY_TIER_COLD, 20251231}};
    for (int i = 0; i < 6; i++) {
        partition_rec(&p[i], i, first[i].tier, first[i].day);
        assert_int_equal(ferry_batch_create(b, &p[i], &err), FERRY_OK);
    }
    int64_t nv[6];
    assert_int_equal(ferry_catalog_commit_versions(c, b, nv, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    for (int i = 0; i < 6; i++)
        p[i].version = nv[i];
    assert_counts(c, "hot/20260101=2,hot/20260102=1,cold/20251231=1,cold/20260101=2");
    /* tiered (compare-and-set), a day changed (any version), one deleted */
    p[0].u.partition.tier = FERRY_TIER_COLD;
    assert_int_equal(ferry_catalog_update(c, &p[0], &err), FERRY_OK);
    assert_counts(c, "hot/20260101=1,hot/20260102=1,cold/20251231=1,cold/20260101=3");
    p[2].u.partition.day = 20260103;
    p[2].version = FERRY_VERSION_ANY;
    assert_int_equal(ferry_catalog_update(c, &p[2], &err), FERRY_OK);
    assert_counts(c, "hot/20260101=1,hot/20260103=1,cold/20251231=1,cold/20260101=3");
    assert_int_equal(ferry_catalog_delete(c, &p[5], &err), FERRY_OK);
    assert_counts(c, "hot/20260101=1,hot/20260103=1,cold/20260101=3");
    /* a batch that fails on its last operation changes nothing */
    b = ferry_batch_new();
    partition_rec(&p[6], 6, FERRY_TIER_HOT, 20260105);
    assert_int_equal(ferry_batch_create(b, &p[6], &err), FERRY_OK);
    assert_int_equal(ferry_batch_delete(b, &p[1], &err), FERRY_OK);
    ferry_record stale = p[3];
    stale.version = p[3].version + 5;
    stale.u.partition.tier = FERRY_TIER_HOT;
    assert_int_equal(ferry_batch_update(b, &stale, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_ECONFLICT);
    ferry_batch_free(b);
    assert_counts(c, "hot/20260101=1,hot/20260103=1,cold/20260101=3");
    /* the same batch corrected: a create, a delete and a move back to hot together */
    b = ferry_batch_new();
    assert_int_equal(ferry_batch_create(b, &p[6], &err), FERRY_OK);
    assert_int_equal(ferry_batch_delete(b, &p[1], &err), FERRY_OK);
    stale.version = p[3].version;
    assert_int_equal(ferry_batch_update(b, &stale, &err), FERRY_OK);
    assert_int_equal(ferry_catalog_commit(c, b, NULL, &err), FERRY_OK);
    ferry_batch_free(b);
    assert_counts(c, "hot/20260101=1,hot/20260103=1,hot/20260105=1,cold/20260101=2");
    /* a writer killed half-way through a batch of 2000 leaves the counts as they were; forked
     * with no catalog open here, as the other crash tests do (a fork beside the ZooKeeper
     * client's threads can leave the child holding a lock one of them held: the suite hung here
     * once, on a loaded machine) */
    ferry_catalog_close(c);
    hook h;
    int to_child, from_child;
    pid_t pid = spawn_writer_of(url, true, &h, &to_child, &from_child);
    c = open_ok(url);
    assert_true(pid > 0);
    assert_int_equal(read_byte(from_child), 'p');
    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    close(to_child);
    close(from_child);
    if (tc.zk_base) { /* the dead writer's session expires; recovery rolls its batch back */
        size_t total = 0;
        for (int i = 0; i < 100 && total == 0; i++) {
            size_t n = 0;
            assert_int_equal(ferry_catalog_recover(c, &n, &err), FERRY_OK);
            total += n;
            if (!total)
                sleep_ms(100);
        }
        assert_int_equal(total, 1);
    }
    assert_counts(c, "hot/20260101=1,hot/20260103=1,hot/20260105=1,cold/20260101=2");
    if (!tc.zk_base) {
        /* SQLite: documents that are not partition records do not count (deeper, or beside
         * the folder) */
        raw_op(c, CAT_CREATE, "partitions/node0/events/p9/extra");
        raw_op(c, CAT_CREATE, "partitionsx/node0/events/p9");
        assert_counts(c, "hot/20260101=1,hot/20260103=1,hot/20260105=1,cold/20260101=2");
        /* a change made beside ferry (the sqlite3 shell) is counted too */
        sqlite3 *db = cat_sqlite_handle(c);
        assert_int_equal(sqlite3_exec(db, "UPDATE records SET doc = json_set(doc, '$.tier', "
                                          "'cold') WHERE parent = 'partitions/node0/events' AND "
                                          "name = 'p6'", NULL, NULL, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_changes(db), 1);
        assert_counts(c, "hot/20260101=1,hot/20260103=1,cold/20260101=2,cold/20260105=1");
        /* a catalog laid out before the counts (no table, no triggers, and none of what came
         * after them: the slice packs) gets them at its next open, counted from its records,
         * including those written meanwhile */
        assert_int_equal(sqlite3_exec(db, "DROP TRIGGER partition_counts_insert;"
                                          "DROP TRIGGER partition_counts_update;"
                                          "DROP TRIGGER partition_counts_delete;"
                                          "DROP TABLE partition_counts;"
                                          "DELETE FROM meta WHERE key = 'partition_counts';"
                                          "DROP TRIGGER slice_pack_insert;"
                                          "DROP TRIGGER slice_pack_update;"
                                          "DROP TRIGGER slice_pack_delete;"
                                          "DROP TABLE slice_pack; DROP TABLE slice_pack_dirty;"
                                          "DELETE FROM meta WHERE key = 'slice_pack'",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        partition_rec(&p[7], 7, FERRY_TIER_COLD, 20260107);
        assert_int_equal(ferry_catalog_create(c, &p[7], &err), FERRY_OK);
        /* without the table (not reopened yet) the counts are counted by scanning */
        assert_counts(c, "hot/20260101=1,hot/20260103=1,cold/20260101=2,cold/20260105=1,"
                         "cold/20260107=1");
        ferry_catalog_close(c);
        c = open_ok(url);
        /* laid out again: the counts come from the table now, not from a scan */
        sqlite3_stmt *laid = NULL;
        assert_int_equal(sqlite3_prepare_v2(cat_sqlite_handle(c),
                                            "SELECT count(*) FROM sqlite_master WHERE name IN"
                                            " ('partition_counts', 'partition_counts_delete',"
                                            " 'slice_pack', 'slice_pack_delete')",
                                            -1, &laid, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(laid), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(laid, 0), 4);
        sqlite3_finalize(laid);
        assert_counts(c, "hot/20260101=1,hot/20260103=1,cold/20260101=2,cold/20260105=1,"
                         "cold/20260107=1");
        /* a tier ferry does not know is an error, as decoding the record would be */
        db = cat_sqlite_handle(c);
        assert_int_equal(sqlite3_exec(db, "UPDATE records SET doc = json_set(doc, '$.tier', "
                                          "'warm') WHERE parent = 'partitions/node1/events' AND "
                                          "name = 'p7'", NULL, NULL, NULL),
                         SQLITE_OK);
        ferry_partition_count *pc = NULL;
        size_t n = 0;
        assert_int_equal(ferry_catalog_partition_counts(c, &pc, &n, &err), FERRY_EINVAL);
        assert_non_null(strstr(err.msg, "warm"));
        assert_null(pc);
    }
    for (int i = 0; i < 8; i++)
        ferry_record_free(&p[i]);
    ferry_catalog_close(c);
}

int main(void)
{
    if (!temp_catalogs_init(&tc, "catalog", "catalog conformance"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crud_every_kind),
        cmocka_unit_test(test_job_data_large),
        cmocka_unit_test(test_move_cas_race),
        cmocka_unit_test(test_batch_atomicity),
        cmocka_unit_test(test_chunked_10000_parts),
        cmocka_unit_test(test_batch_invisible_until_committed),
        cmocka_unit_test(test_crash_mid_batch),
        cmocka_unit_test(test_lease_killed_holder),
        cmocka_unit_test(test_lease_session_expiry),
        cmocka_unit_test(test_lease_leaves_nothing),
        cmocka_unit_test(test_lease_exclusive_under_churn),
        cmocka_unit_test(test_restart_and_reload),
        cmocka_unit_test(test_routing_version),
        cmocka_unit_test(test_routing_json_matches_records),
        cmocka_unit_test(test_routing_changes),
        cmocka_unit_test(test_shard_loads),
        cmocka_unit_test(test_unfinished_moves),
        cmocka_unit_test(test_move_stored_text),
        cmocka_unit_test(test_sqlite_durability),
        cmocka_unit_test(test_partition_counts),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    temp_catalogs_done(&tc);
    return failed;
}
