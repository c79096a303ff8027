/* Catalog benchmark: single compare-and-set updates per second, batched updates per second, and
 * the cost (round trips, time) of recording one partition of 10,000 parts, listing the unfinished
 * moves among 5,000 finished ones (the router's routing reload), for SQLite and, when
 * $FERRY_BENCH_ZK names a server ("zk://127.0.0.1:2181"), for ZooKeeper. bench/catalog.sh starts a
 * ZooKeeper and runs it. Prints one JSON object. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry/catalog.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const ferry_err *err)
{
    fprintf(stderr, "bench_catalog: %s: %s\n", what, err->msg);
    exit(1);
}

static void move_record(ferry_record *r, int i)
{
    ferry_record_init(r, FERRY_REC_MOVE);
    snprintf(r->u.move.id, sizeof r->u.move.id, "m%d", i);
    snprintf(r->u.move.tenant, sizeof r->u.move.tenant, "acme");
    ferry_shard_set_add(&r->u.move.from, "node1", NULL); /* valid names: cannot fail */
    ferry_shard_set_add(&r->u.move.to, "node2", NULL);
    r->u.move.steps = 1000000;
    snprintf(r->u.move.owner, sizeof r->u.move.owner, "bench");
}

static json_t *run(const char *url, int single_n, int batches)
{
    ferry_err err = {0};
    ferry_catalog *c = NULL;
    if (ferry_catalog_open(url, &c, &err))
        die(url, &err);
    json_t *o = json_object();
    json_object_set_new(o, "backend", json_string(ferry_catalog_backend(c)));

    /* single CAS updates of one record (each a read-modify-write with the version) */
    ferry_record m;
    move_record(&m, 0);
    if (ferry_catalog_create(c, &m, &err))
        die("create", &err);
    double t0 = now_s();
    for (int i = 0; i < single_n; i++) {
        m.u.move.step = (uint32_t)i;
        if (ferry_catalog_update(c, &m, &err))
            die("cas update", &err);
    }
    double dt = now_s() - t0;
    json_object_set_new(o, "single_cas_updates", json_integer(single_n));
    json_object_set_new(o, "single_cas_per_s", json_real(single_n / dt));

    /* batched CAS updates: 100 records per batch (one multi each on ZooKeeper) */
    enum { PER = 90 };
    ferry_record recs[PER];
    ferry_batch *b = ferry_batch_new();
    for (int i = 0; i < PER; i++) {
        move_record(&recs[i], 1 + i);
        if (ferry_batch_create(b, &recs[i], &err))
            die("queue", &err);
    }
    if (ferry_catalog_commit(c, b, NULL, &err))
        die("create batch", &err);
    ferry_batch_free(b);
    for (int i = 0; i < PER; i++)
        recs[i].version = 0;
    t0 = now_s();
    for (int k = 0; k < batches; k++) {
        b = ferry_batch_new();
        for (int i = 0; i < PER; i++) {
            recs[i].u.move.step = (uint32_t)k;
            if (ferry_batch_update(b, &recs[i], &err))
                die("queue", &err);
        }
        if (ferry_catalog_commit(c, b, NULL, &err))
            die("batched update", &err);
        ferry_batch_free(b);
        for (int i = 0; i < PER; i++)
            recs[i].version++;
    }
    dt = now_s() - t0;
    json_object_set_new(o, "batch_size", json_integer(PER));
    json_object_set_new(o, "batches", json_integer(batches));
    json_object_set_new(o, "batched_updates_per_s", json_real(PER * batches / dt));
    json_object_set_new(o, "batches_per_s", json_real(batches / dt));

    /* a long history: 5,000 finished moves beside the PER + 1 unfinished ones above; what a
     * routing reload pays to learn the moves in flight, against listing every move */
    enum { HISTORY = 5000 };
    for (int k = 0; k < HISTORY; k += PER) {
        b = ferry_batch_new();
        for (int i = k; i < k + PER && i < HISTORY; i++) {
            ferry_record done;
            move_record(&done, 100000 + i);
            done.u.move.state = FERRY_MOVE_DONE;
            if (ferry_batch_create(b, &done, &err))
                die("queue", &err);
        }
        if (ferry_catalog_commit(c, b, NULL, &err))
            die("create history", &err);
        ferry_batch_free(b);
    }
    json_t *h = json_object();
    ferry_record_list all = {0}, unfinished = {0};
    /* the first call on a new catalog writes the index's marker */
    if (ferry_catalog_list_unfinished_moves(c, &unfinished, &err))
        die("list unfinished moves", &err);
    ferry_record_list_free(&unfinished);
    t0 = now_s();
    if (ferry_catalog_list(c, FERRY_REC_MOVE, NULL, 0, &all, &err))
        die("list moves", &err);
    json_object_set_new(h, "list_all_seconds", json_real(now_s() - t0));
    t0 = now_s();
    if (ferry_catalog_list_unfinished_moves(c, &unfinished, &err))
        die("list unfinished moves", &err);
    json_object_set_new(h, "list_unfinished_seconds", json_real(now_s() - t0));
    json_object_set_new(h, "moves", json_integer((json_int_t)all.n));
    json_object_set_new(h, "unfinished", json_integer((json_int_t)unfinished.n));
    ferry_record_list_free(&all);
    ferry_record_list_free(&unfinished);
    json_object_set_new(o, "moves_history", h);

    /* one partition of 10,000 parts, recorded atomically */
    b = ferry_batch_new();
    for (int i = 0; i < 10000; i++) {
        ferry_record p;
        ferry_record_init(&p, FERRY_REC_PART);
        snprintf(p.u.part.table, sizeof p.u.part.table, "events");
        snprintf(p.u.part.partition_id, sizeof p.u.part.partition_id, "big");
        snprintf(p.u.part.origin, sizeof p.u.part.origin, "ferry_tier_0");
        snprintf(p.u.part.name, sizeof p.u.part.name, "all_%d_%d_0", i, i);
        p.u.part.bytes = 1 << 20;
        snprintf(p.u.part.servers, sizeof p.u.part.servers, "node1");
        char key[96];
        snprintf(key, sizeof key, "parts/big/all_%d_%d_0/data.bin", i, i);
        ferry_part_add_object(&p.u.part, key, 1 << 20, "sha256:0123456789abcdef", &err);
        if (ferry_batch_create(b, &p, &err))
            die("queue part", &err);
        ferry_record_free(&p);
    }
    ferry_commit_info info = {0};
    t0 = now_s();
    if (ferry_catalog_commit(c, b, &info, &err))
        die("10,000 parts", &err);
    dt = now_s() - t0;
    ferry_batch_free(b);
    json_t *p = json_object();
    json_object_set_new(p, "parts", json_integer((json_int_t)info.ops));
    json_object_set_new(p, "round_trips", json_integer((json_int_t)info.round_trips));
    json_object_set_new(p, "chunks", json_integer((json_int_t)info.chunks));
    json_object_set_new(p, "seconds", json_real(dt));
    const char *prefix[2] = {"events", "big"};
    ferry_record_list l = {0};
    t0 = now_s();
    if (ferry_catalog_list(c, FERRY_REC_PART, prefix, 2, &l, &err))
        die("list parts", &err);
    json_object_set_new(p, "list_seconds", json_real(now_s() - t0));
    json_object_set_new(p, "listed", json_integer((json_int_t)l.n));
    ferry_record_list_free(&l);
    json_object_set_new(o, "partition_10000_parts", p);
    ferry_catalog_close(c);
    return o;
}

int main(void)
{
    char dir[] = "/tmp/ferry-bench-catalog-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char url[512];
    json_t *root = json_object(), *res = json_array();
    json_object_set_new(root, "bench", json_string("catalog"));
    snprintf(url, sizeof url, "sqlite:%s/catalog.db", dir);
    json_array_append_new(res, run(url, 2000, 50));
    const char *zk = getenv("FERRY_BENCH_ZK");
    if (zk && *zk) {
        snprintf(url, sizeof url, "%s/bench-%d", zk, (int)getpid());
        json_array_append_new(res, run(url, 1000, 50));
    }
    json_object_set_new(root, "results", res);
    json_dumpf(root, stdout, JSON_COMPACT | JSON_REAL_PRECISION(5));
    putchar('\n');
    json_decref(root);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
