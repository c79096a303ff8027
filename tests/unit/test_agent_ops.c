/* The typed agent client (include/ferry/agent_ops.h) on loopback:
 * - against the real agent routes (ferry_agent_routes in a ferry_httpd, a temporary data
 *   directory, no ClickHouse behind it): a wrong token is FERRY_EAUTH with status 401, an
 *   operation that needs ClickHouse is the agent's 502 with the client's name in the message,
 *   a refused name is 400; every request counts in the client's stats;
 * - against a peer speaking the documented answers of each operation (docs/agent.md), as an
 *   agent of API 2 and of API 1 (400 to the many-part forms): every answer decoded into its
 *   struct, the many-part forms in one request, the API 1 fallback one request per item with a
 *   partition gone meanwhile skipped, the fallback remembered by the client, a target's 507
 *   kept as the last status, a pointers answer without its lists refused; upload and
 *   write-pointers answered per part, one bad part failing alone (also when the parts go one
 *   request each, and when the agent is gone). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ferry/agent.h"
#include "ferry/agent_ops.h"
#include "ferry/httpd.h"

#define TOKEN "0123456789abcdef-token"

/* ---- the peer --------------------------------------------------------------------------- */

typedef struct peer {
    bool api1;        /* answer 400 to the many-part forms, as an agent of API 1 */
    bool bad_lists;   /* answer pointers without its lists */
    unsigned calls[16];
    char last_op[64];
} peer;

static const char *const OPS[] = {"status",   "parts",  "freeze", "send",
                                  "remove-detached", "remove-freeze", "place-parts",
                                  "pointers", "frozen", "upload", "write-pointers", "pin",
                                  NULL};

static void answer(ferry_http_req *req, unsigned status, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    ferry_http_respond(req, status, "application/json", s, strlen(s));
    free(s);
    json_decref(o);
}

static json_t *frozen_part(const char *pid, const char *freeze)
{
    char name[128];
    snprintf(name, sizeof name, "%s_1_1_0", pid);
    return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:[]}", "name", name, "disk",
                     !strncmp(pid, "c", 1) ? "cold" : "default", "kind",
                     !strncmp(pid, "c", 1) ? "pointer" : "hot", "path", "/d/shadow/x", "bytes",
                     (json_int_t)10, "freeze", freeze, "partition_id", pid, "files");
}


/* One part's answer to upload or write-pointers; part "bad_..." fails its checks (422). */
static json_t *part_answer(const char *op, const json_t *p, unsigned *status)
{
    const char *part = json_string_value(json_object_get(p, "part"));
    *status = 200;
    if (!strncmp(part, "bad_", 4)) {
        *status = 422;
        return json_pack("{s:s, s:s, s:s, s:i}", "part", part, "error", "checksum mismatch",
                         "code", "EINVAL", "status", 422);
    }
    if (!strcmp(op, "upload"))
        return json_pack("{s:s, s:O, s:s, s:[{s:s, s:s, s:s, s:I, s:b, s:s}], s:I, s:I, s:I, "
                         "s:b, s:I}",
                         "part", part, "freeze", json_object_get(p, "freeze"), "partition_id",
                         "p1", "objects", "file", "data.bin", "key", "k1", "clickhouse_key",
                         "/blobs/k1", "size", (json_int_t)5, "uploaded", 1, "file_hash", "ab",
                         "uploaded", (json_int_t)1, "skipped", (json_int_t)0, "bytes_uploaded",
                         (json_int_t)5, "verified", 1, "rows", (json_int_t)3);
    return json_pack("{s:s, s:s, s:s, s:b, s:I}", "part", part, "disk", "cold", "path",
                     "/d/disks/cold/store/x/detached/p", "existing", 0, "objects_seen",
                     (json_int_t)json_array_size(json_object_get(p, "objects")));
}

static void peer_op(ferry_http_req *req, void *ctx)
{
    peer *p = ctx;
    const char *path = ferry_http_path(req), *op = path + strlen("/agent/v1/");
    size_t len = 0;
    const char *body = ferry_http_body(req, &len);
    json_t *in = len ? json_loadb(body, len, 0, NULL) : json_object();
    snprintf(p->last_op, sizeof p->last_op, "%s", op);
    for (size_t i = 0; OPS[i]; i++)
        if (!strcmp(OPS[i], op))
            p->calls[i]++;
    const char *bearer = ferry_http_header(req, "Authorization");
    if (!bearer || strcmp(bearer, "Bearer " TOKEN)) {
        answer(req, 401, json_pack("{s:s}", "error", "unauthorized"));
    } else if (!strcmp(op, "status")) {
        answer(req, 200, json_pack("{s:i, s:s, s:s, s:i, s:[{s:s, s:s, s:b, s:I, s:I, s:I}, "
                                   "{s:s, s:s, s:b}]}",
                                   "api", 2, "clickhouse_version", "26.7.1.1", "data_path", "/d/",
                                   "pointer_format", 5, "disks", "name", "default", "path", "/d/",
                                   "remote", 0, "free_bytes", (json_int_t)1000, "total_bytes",
                                   (json_int_t)5000, "free_inodes", (json_int_t)77, "name",
                                   "cold", "path", "/d/disks/cold/", "remote", 1));
    } else if (!strcmp(op, "parts")) {
        answer(req, 200,
               json_pack("{s:[{s:s, s:s, s:b}, {s:s, s:s, s:b}], "
                         "s:[{s:s, s:s, s:s, s:I, s:I, s:s}], s:[{s:s, s:s, s:s, s:n, s:I}, "
                         "{s:s, s:n}]}",
                         "data_paths", "disk", "default", "path", "/d/store/t/", "remote", 0,
                         "disk", "cold", "path", "/d/disks/cold/store/t/", "remote", 1,
                         "parts", "name", "p1_1_1_0", "partition_id", "p1", "disk", "default",
                         "rows", (json_int_t)10, "bytes_on_disk", (json_int_t)100,
                         "hash_of_all_files", "abc", "detached", "name", "p1_2_2_0",
                         "partition_id", "p1", "partition", "'x'", "rows", "bytes_on_disk",
                         (json_int_t)5, "name", "tmp-ferry-1-aa", "partition_id"));
    } else if (!strcmp(op, "freeze") && json_object_get(in, "partition_ids")) {
        if (p->api1) {
            answer(req, 400, json_pack("{s:s}", "error", "missing field partition_id"));
        } else {
            json_t *parts = json_array(), *id;
            size_t i;
            const char *name = json_string_value(json_object_get(in, "name"));
            json_array_foreach(json_object_get(in, "partition_ids"), i, id)
                if (strcmp(json_string_value(id), "gone"))
                    json_array_append_new(parts, frozen_part(json_string_value(id), name));
            answer(req, 200, json_pack("{s:b, s:o}", "existing", 0, "parts", parts));
        }
    } else if (!strcmp(op, "freeze") && json_object_get(in, "partitions")) {
        if (p->api1) {
            answer(req, 400, json_pack("{s:s}", "error", "missing field name"));
        } else {
            json_t *parts = json_array(), *one;
            size_t i;
            json_array_foreach(json_object_get(in, "partitions"), i, one) {
                const char *pid = json_string_value(json_object_get(one, "partition_id"));
                const char *name = json_string_value(json_object_get(one, "name"));
                if (strcmp(pid, "gone"))
                    json_array_append_new(parts, frozen_part(pid, name));
            }
            answer(req, 200, json_pack("{s:b, s:o}", "existing", 0, "parts", parts));
        }
    } else if (!strcmp(op, "freeze")) {
        const char *pid = json_string_value(json_object_get(in, "partition_id"));
        const char *name = json_string_value(json_object_get(in, "name"));
        if (!strcmp(pid, "gone"))
            answer(req, 404, json_pack("{s:s}", "error", "no active parts"));
        else
            answer(req, 200, json_pack("{s:s, s:s, s:b, s:[o]}", "name", name, "partition_id",
                                       pid, "existing", 1, "parts", frozen_part(pid, name)));
    } else if (!strcmp(op, "send")) {
        const char *part = json_string_value(json_object_get(in, "part"));
        const char *tok = json_string_value(json_object_get(json_object_get(in, "target"),
                                                            "token"));
        if (!strcmp(part, "full_1_1_0"))
            answer(req, 507, json_pack("{s:s}", "error", "no space left on device"));
        else
            answer(req, 200, json_pack("{s:s, s:s, s:I, s:{s:b, s:s, s:b, s:b}}", "part", part,
                                       "kind", part[0] == 'c' ? "pointer" : "hot", "bytes_sent",
                                       (json_int_t)123, "target", "existing", 0, "token_seen",
                                       tok ? tok : "(none)", "live_seen",
                                       json_is_true(json_object_get(in, "live")), "freeze_seen",
                                       json_object_get(in, "freeze") != NULL));
    } else if ((!strcmp(op, "remove-detached") && json_object_get(in, "parts")) ||
               (!strcmp(op, "remove-freeze") && json_object_get(in, "names"))) {
        if (p->api1)
            answer(req, 400, json_pack("{s:s}", "error", "missing field"));
        else
            answer(req, 200, json_pack("{s:[]}", "results"));
    } else if (!strcmp(op, "remove-detached") || !strcmp(op, "remove-freeze")) {
        const char *part = json_string_value(json_object_get(in, "part"));
        if (part && !strncmp(part, "tmp-ferry-", 10))
            answer(req, 409, json_pack("{s:s}", "error", "a receive is writing it"));
        else
            answer(req, 200, json_pack("{s:b}", "existed", 1));
    } else if (!strcmp(op, "upload") || !strcmp(op, "write-pointers")) {
        json_t *parts = json_object_get(in, "parts"), *one;
        unsigned st = 200;
        size_t i;
        if (parts && p->api1) {
            answer(req, 400, json_pack("{s:s}", "error", "missing field part"));
        } else if (parts) {
            json_t *results = json_array();
            json_array_foreach(parts, i, one)
                json_array_append_new(results, part_answer(op, one, &st));
            answer(req, 200, json_pack("{s:o}", "results", results));
        } else {
            json_t *a = part_answer(op, in, &st);
            answer(req, st, a);
        }
    } else if (!strcmp(op, "place-parts")) {
        size_t n = json_array_size(json_object_get(in, "parts"));
        json_t *placed = json_array();
        for (size_t i = 0; i + 1 < n; i++)
            json_array_append(placed, json_array_get(json_object_get(in, "parts"), i));
        answer(req, 200, json_pack("{s:o, s:I}", "placed", placed, "already", (json_int_t)1));
    } else if (!strcmp(op, "pin")) {
        /* one result per part ("bad_*" not held), one fewer when the last is "short" */
        json_t *parts = json_object_get(in, "parts"), *one, *res = json_array();
        size_t i, n = json_array_size(parts);
        json_array_foreach(parts, i, one) {
            const char *nm = json_string_value(one);
            if (i + 1 == n && !strcmp(nm, "short"))
                break;
            json_array_append_new(res, strncmp(nm, "bad_", 4)
                                           ? json_pack("{s:s, s:b}", "name", nm, "held", 1)
                                           : json_pack("{s:s, s:b, s:s}", "name", nm, "held", 0,
                                                       "error", "a read-only pointer file"));
        }
        answer(req, 200, json_pack("{s:o, s:I}", "parts", res, "raised", (json_int_t)7));
    } else if (!strcmp(op, "pointers") && p->bad_lists) {
        answer(req, 200, json_pack("{s:[]}", "disks"));
    } else if (!strcmp(op, "pointers")) {
        answer(req, 200,
               json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i, s:b, s:[{s:s, s:s, s:I}, {s:s}]}, "
                         "{s:s}], s:[{s:s, s:s}]}",
                         "files", "disk", "cold", "path", "store/a/b/c.bin", "version", 5,
                         "ref_count", 1, "links", 2, "size", 90, "outdated", 1, "objects", "key",
                         "k1", "store_key", "sk1", "size", (json_int_t)42, "key", "k2", "path",
                         "store/a/b/d.bin", "invalid", "path", "store/bad", "error",
                         "truncated"));
    } else {
        answer(req, 404, json_pack("{s:s}", "error", "no such operation"));
    }
    json_decref(in);
}

static ferry_httpd *peer_start(peer *p, ferry_agent_client **c)
{
    static ferry_http_route route;
    route = (ferry_http_route){.path = "/agent/", .on_complete = peer_op, .ctx = p};
    ferry_httpd_options o = {0};
    ferry_httpd *srv = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_httpd_start(&o, &route, 1, &srv, &err), FERRY_OK);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", ferry_httpd_port(srv));
    assert_int_equal(ferry_agent_client_new(url, TOKEN, 10000, c, &err), FERRY_OK);
    return srv;
}

static unsigned calls(const peer *p, const char *op)
{
    for (size_t i = 0; OPS[i]; i++)
        if (!strcmp(OPS[i], op))
            return p->calls[i];
    return 0;
}

static unsigned long requests(const ferry_agent_client *c)
{
    ferry_agent_client_stats s;
    ferry_agent_client_stats_get(c, &s);
    return s.requests;
}

/* ---- every operation's answer, decoded ----------------------------------------------------- */

static void test_decode(void **state)
{
    (void)state;
    peer p = {0};
    ferry_agent_client *c = NULL;
    ferry_httpd *srv = peer_start(&p, &c);
    ferry_err err = {0};

    ferry_agent_status_info st;
    assert_int_equal(ferry_agent_status(c, &st, &err), FERRY_OK);
    assert_int_equal(st.api, 2);
    assert_string_equal(st.clickhouse_version, "26.7.1.1");
    assert_int_equal(st.pointer_format, 5);
    assert_null(st.object_store);
    assert_int_equal(st.n_disks, 2);
    assert_string_equal(st.disks[0].name, "default");
    assert_false(st.disks[0].remote);
    assert_true(st.disks[0].has_bytes);
    assert_int_equal(st.disks[0].free_bytes, 1000);
    assert_int_equal(st.disks[0].total_bytes, 5000);
    assert_true(st.disks[0].has_inodes);
    assert_int_equal(st.disks[0].free_inodes, 77);
    assert_true(st.disks[1].remote);
    assert_false(st.disks[1].has_bytes);
    assert_false(st.disks[1].has_inodes);
    ferry_agent_status_info_free(&st);

    ferry_agent_part_list pl;
    assert_int_equal(ferry_agent_parts(c, "db", "t", NULL, &pl, &err), FERRY_OK);
    assert_int_equal(pl.n_parts, 1);
    assert_string_equal(pl.parts[0].hash_of_all_files, "abc");
    assert_int_equal(pl.parts[0].rows, 10);
    assert_int_equal(pl.parts[0].bytes_on_disk, 100);
    assert_int_equal(pl.n_detached, 2);
    assert_string_equal(pl.detached[0].partition, "'x'");
    assert_false(pl.detached[0].has_rows);
    assert_int_equal(pl.detached[0].bytes_on_disk, 5);
    assert_null(pl.detached[1].partition_id);
    assert_int_equal(pl.n_data_paths, 2);
    assert_string_equal(pl.data_paths[1].path, "/d/disks/cold/store/t/");
    assert_true(ferry_agent_part_list_remote(&pl, "cold"));
    assert_false(ferry_agent_part_list_remote(&pl, "default"));
    assert_false(ferry_agent_part_list_remote(&pl, "nope"));
    ferry_agent_part_list_free(&pl);

    ferry_agent_frozen fz;
    assert_int_equal(ferry_agent_freeze(c, "db", "t", "p1", "f1", &fz, &err), FERRY_OK);
    assert_int_equal(fz.n, 1);
    assert_true(fz.existing);
    assert_string_equal(fz.parts[0].name, "p1_1_1_0");
    assert_string_equal(fz.parts[0].freeze, "f1");
    assert_false(fz.parts[0].pointer);
    assert_int_equal(fz.parts[0].bytes, 10);
    ferry_agent_frozen_free(&fz);
    assert_int_equal(ferry_agent_freeze(c, "db", "t", "gone", "f1", &fz, &err),
                     FERRY_ENOTFOUND);
    assert_int_equal(ferry_agent_client_last_status(c), 404);
    assert_int_equal(fz.n, 0);
    ferry_agent_frozen_free(&fz);

    ferry_agent_sent sent;
    ferry_agent_send_req sr = {.db = "db", .table = "t", .freeze = "f1", .part = "c1_1_1_0",
                               .target_url = "http://127.0.0.1:1", .target_token = "tt",
                               .target_db = "db", .target_table = "t_staging"};
    assert_int_equal(ferry_agent_send(c, &sr, &sent, &err), FERRY_OK);
    assert_true(sent.pointer);
    assert_int_equal(sent.bytes_sent, 123);
    assert_string_equal(json_string_value(json_object_get(sent.target, "token_seen")), "tt");
    assert_true(json_is_true(json_object_get(sent.target, "freeze_seen")));
    assert_false(json_is_true(json_object_get(sent.target, "live_seen")));
    ferry_agent_sent_free(&sent);
    sr.live = true; /* API 3: from the table's folder, no freeze named */
    assert_int_equal(ferry_agent_send(c, &sr, &sent, &err), FERRY_OK);
    assert_true(json_is_true(json_object_get(sent.target, "live_seen")));
    assert_false(json_is_true(json_object_get(sent.target, "freeze_seen")));
    ferry_agent_sent_free(&sent);
    sr.live = false;
    sr.part = "full_1_1_0";
    sr.target_token = NULL; /* sent as "" */
    assert_int_equal(ferry_agent_send(c, &sr, &sent, &err), FERRY_EREMOTE);
    assert_int_equal(ferry_agent_client_last_status(c), 507);
    assert_non_null(strstr(err.msg, "no space left"));
    ferry_agent_sent_free(&sent);

    bool existed = false;
    assert_int_equal(ferry_agent_remove_detached(c, "db", "t", "p1_2_2_0", NULL, &existed, &err),
                     FERRY_OK);
    assert_true(existed);
    assert_int_equal(ferry_agent_remove_detached(c, "db", "t", "tmp-ferry-1-aa", NULL, &existed,
                                                 &err),
                     FERRY_ECONFLICT);
    assert_false(existed);
    assert_int_equal(ferry_agent_remove_freeze(c, "f1", &err), FERRY_OK);

    const char *paths[] = {"/d/store/x/"};
    ferry_agent_place pp[] = {{"default", "p1_2_2_0", "p1_9_9_0"},
                              {"default", "p1_3_3_0", "p1_10_10_0"}};
    size_t placed = 0, already = 0;
    assert_int_equal(ferry_agent_place_parts(c, "db", "load", "staging", paths, 1, pp, 2, &placed,
                                             &already, &err),
                     FERRY_OK);
    assert_int_equal(placed, 1);
    assert_int_equal(already, 1);

    ferry_agent_pointer_list ptr;
    assert_int_equal(ferry_agent_pointers(c, NULL, NULL, &ptr, &err), FERRY_OK);
    assert_int_equal(ptr.n_files, 2);
    assert_string_equal(ptr.files[0].disk, "cold");
    assert_true(ptr.files[0].outdated);
    assert_int_equal(ptr.files[0].links, 2);
    assert_int_equal(ptr.files[0].n_objects, 2);
    assert_string_equal(ptr.files[0].objects[0].store_key, "sk1");
    assert_int_equal(ptr.files[0].objects[0].size, 42);
    assert_int_equal(ptr.files[0].objects[1].size, -1); /* no size in the answer */
    assert_null(ptr.files[0].objects[1].store_key);
    assert_null(ptr.files[1].disk);
    assert_false(ptr.files[1].has_objects);
    assert_int_equal(ptr.n_invalid, 1);
    assert_string_equal(ptr.invalid[0].error, "truncated");
    ferry_agent_pointer_list_free(&ptr);
    p.bad_lists = true;
    assert_int_equal(ferry_agent_pointers(c, NULL, NULL, &ptr, &err), FERRY_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "no file lists"));
    ferry_agent_pointer_list_free(&ptr);

    /* pin: per part in request order; an answer without one result per part is refused */
    const char *pins[] = {"p1_1_1_0", "bad_p2", "short"};
    ferry_agent_pinned pd;
    assert_int_equal(ferry_agent_pin(c, "cold", "store/a/b/", pins, 2, &pd, &err), FERRY_OK);
    assert_int_equal(pd.n_parts, 2);
    assert_true(pd.parts[0].held);
    assert_null(pd.parts[0].error);
    assert_false(pd.parts[1].held);
    assert_string_equal(pd.parts[1].error, "a read-only pointer file");
    assert_int_equal(pd.raised, 7);
    ferry_agent_pinned_free(&pd);
    assert_int_equal(ferry_agent_pin(c, "cold", "store/a/b/", pins, 3, &pd, &err),
                     FERRY_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "one result per part"));
    assert_null(pd.parts);

    /* every request counted, failed ones included */
    assert_int_equal(requests(c), 15);
    ferry_agent_client_free(c);
    ferry_httpd_stop(srv);
}

/* ---- many-part forms, API 2 and API 1 ------------------------------------------------------ */

static void many_forms(bool api1)
{
    peer p = {.api1 = api1};
    ferry_agent_client *c = NULL;
    ferry_httpd *srv = peer_start(&p, &c);
    ferry_err err = {0};
    ferry_agent_client_set_name(c, "s1");

    const char *pids[] = {"p1", "gone", "c2"};
    ferry_agent_frozen fz;
    assert_int_equal(ferry_agent_freeze_ids(c, "db", "t", "f1", pids, 3, &fz, &err), FERRY_OK);
    assert_int_equal(fz.n, 2); /* "gone" froze nothing */
    const ferry_agent_frozen_part *of[4];
    assert_int_equal(ferry_agent_frozen_of(&fz, "c2", of, 4), 1);
    assert_true(of[0]->pointer);
    assert_string_equal(of[0]->freeze, "f1");
    assert_int_equal(ferry_agent_frozen_of(&fz, "p", of, 4), 0); /* a prefix is no partition */
    ferry_agent_frozen_free(&fz);
    /* API 2: one request; API 1: the refused form, then one per partition */
    assert_int_equal(calls(&p, "freeze"), api1 ? 4 : 1);
    /* the fallback is remembered: no second refused request */
    assert_int_equal(ferry_agent_freeze_ids(c, "db", "t", "f2", pids, 3, &fz, &err), FERRY_OK);
    ferry_agent_frozen_free(&fz);
    assert_int_equal(calls(&p, "freeze"), api1 ? 7 : 2);

    const char *parts[] = {"p1_2_2_0", "p1_3_3_0"};
    assert_int_equal(ferry_agent_remove_detached_n(c, "db", "t", parts, 2, NULL, &err), FERRY_OK);
    assert_int_equal(calls(&p, "remove-detached"), api1 ? 3 : 1);
    assert_int_equal(ferry_agent_remove_detached_n(c, "db", "t", parts, 1, NULL, &err), FERRY_OK);
    assert_int_equal(calls(&p, "remove-detached"), api1 ? 4 : 2);
    /* one bad part stops the one-at-a-time removal with its own error */
    const char *bad[] = {"p1_2_2_0", "tmp-ferry-1-aa", "p1_3_3_0"};
    int rc = ferry_agent_remove_detached_n(c, "db", "t", bad, 3, NULL, &err);
    if (api1) {
        assert_int_equal(rc, FERRY_ECONFLICT);
        assert_int_equal(calls(&p, "remove-detached"), 6);
        assert_non_null(strstr(err.msg, "agent of s1 (remove-detached): "));
    } else {
        assert_int_equal(rc, FERRY_OK);
    }

    const char *names[] = {"f1", "f2"};
    assert_int_equal(ferry_agent_remove_freeze_n(c, names, 2, &err), FERRY_OK);
    assert_int_equal(calls(&p, "remove-freeze"), api1 ? 3 : 1);

    ferry_agent_client_stats s;
    ferry_agent_client_stats_get(c, &s);
    unsigned total = 0;
    for (size_t i = 0; OPS[i]; i++)
        total += p.calls[i];
    assert_int_equal(s.requests, total);
    ferry_agent_client_free(c);
    ferry_httpd_stop(srv);
}

static void test_many_api2(void **state)
{
    (void)state;
    many_forms(false);
}

static void test_many_api1(void **state)
{
    (void)state;
    many_forms(true);
}


/* ---- per-part results ---------------------------------------------------------------------- */

static void per_part(bool api1)
{
    peer p = {.api1 = api1};
    ferry_agent_client *c = NULL;
    ferry_httpd *srv = peer_start(&p, &c);
    ferry_err err = {0};
    ferry_agent_client_set_name(c, "s1");

    /* freeze, a name per partition: a partition gone freezes nothing (API 2) or fails alone
     * (API 1: its own request answered 404) */
    ferry_agent_freeze_item fi[] = {{"p1", "fa"}, {"gone", "fb"}, {"c2", "fc"}};
    ferry_agent_frozen fz;
    assert_int_equal(ferry_agent_freeze_each(c, "db", "t", fi, 3, &fz, &err), FERRY_OK);
    assert_int_equal(fz.n, 2);
    assert_string_equal(fz.parts[0].freeze, "fa");
    assert_string_equal(fz.parts[1].freeze, "fc");
    assert_string_equal(fz.parts[1].partition_id, "c2");
    assert_int_equal(fz.n_items, 3);
    assert_int_equal(fz.items[0].code, FERRY_OK);
    assert_int_equal(fz.items[1].code, api1 ? FERRY_ENOTFOUND : FERRY_OK);
    if (api1) {
        assert_int_equal(fz.items[1].status, 404);
        assert_true(fz.items[1].alone);
        assert_non_null(strstr(fz.items[1].error, "agent of s1 (freeze): "));
    }
    ferry_agent_frozen_free(&fz);
    assert_int_equal(calls(&p, "freeze"), api1 ? 4 : 1);
    assert_int_equal(ferry_agent_freeze_each(c, "db", "t", fi, 0, &fz, &err), FERRY_OK);
    assert_int_equal(calls(&p, "freeze"), api1 ? 4 : 1); /* nothing asked: no request */

    ferry_agent_part_ref refs[] = {{"f1", "p1_1_1_0"}, {"f1", "bad_1_1_0"}, {"f2", "p1_2_2_0"}};
    ferry_agent_upload_list ul;
    assert_int_equal(ferry_agent_upload(c, "db", "t", refs, 3, &ul, &err), FERRY_OK);
    assert_int_equal(ul.n, 3);
    assert_int_equal(ul.parts[0].item.code, FERRY_OK);
    assert_int_equal(ul.parts[0].item.status, 200);
    assert_true(ul.parts[0].verified);
    assert_int_equal(ul.parts[0].rows, 3);
    assert_int_equal(ul.parts[0].n_objects, 1);
    assert_string_equal(ul.parts[0].objects[0].clickhouse_key, "/blobs/k1");
    assert_string_equal(ul.parts[0].objects[0].file_hash, "ab");
    assert_null(ul.parts[0].objects[0].sha256);
    assert_true(ul.parts[0].objects[0].uploaded);
    /* the bad part fails alone, with the status it has alone */
    assert_int_equal(ul.parts[1].item.code, FERRY_EINVAL);
    assert_int_equal(ul.parts[1].item.status, 422);
    assert_non_null(strstr(ul.parts[1].item.error, "checksum mismatch"));
    assert_int_equal(ul.parts[1].item.alone, api1); /* API 1: its own request's whole error */
    assert_non_null(ul.parts[0].answer);
    assert_string_equal(json_string_value(json_object_get(ul.parts[0].answer, "part")),
                        "p1_1_1_0");
    assert_int_equal(ul.parts[2].item.code, FERRY_OK);
    assert_string_equal(ul.parts[2].freeze, "f2");
    assert_int_equal(calls(&p, "upload"), api1 ? 4 : 1);

    ferry_agent_pointer_part pp[] = {{"p1_1_1_0", ul.parts[0].objects_json},
                                     {"bad_1_1_0", ul.parts[0].objects_json}};
    ferry_agent_written_list wl;
    assert_int_equal(ferry_agent_write_pointers(c, "db", "t", NULL, pp, 2, &wl, &err), FERRY_OK);
    assert_int_equal(wl.n, 2);
    assert_int_equal(wl.parts[0].item.code, FERRY_OK);
    assert_string_equal(wl.parts[0].disk, "cold");
    assert_false(wl.parts[0].existing);
    assert_int_equal(wl.parts[1].item.code, FERRY_EINVAL);
    assert_int_equal(wl.parts[1].item.status, 422);
    assert_int_equal(calls(&p, "write-pointers"), api1 ? 3 : 1);
    ferry_agent_written_list_free(&wl);
    /* remembered: the second time no refused request */
    assert_int_equal(ferry_agent_write_pointers(c, "db", "t", "cold", pp, 1, &wl, &err),
                     FERRY_OK);
    assert_int_equal(calls(&p, "write-pointers"), api1 ? 4 : 2);
    ferry_agent_written_list_free(&wl);
    ferry_agent_upload_list_free(&ul);

    /* an agent that is gone: the request as a whole fails (API 2), or each part on its own */
    uint16_t port = ferry_httpd_port(srv);
    ferry_httpd_stop(srv);
    (void)port;
    int rc = ferry_agent_upload(c, "db", "t", refs, 2, &ul, &err);
    if (api1) {
        assert_int_equal(rc, FERRY_OK);
        assert_int_equal(ul.parts[0].item.code, FERRY_ECONNECT);
        assert_int_equal(ul.parts[0].item.status, 0);
        assert_non_null(ul.parts[1].item.error);
    } else {
        assert_int_equal(rc, FERRY_ECONNECT);
        assert_int_equal(ul.n, 0);
    }
    ferry_agent_upload_list_free(&ul);
    ferry_agent_client_free(c);
}

static void test_per_part_api2(void **state)
{
    (void)state;
    per_part(false);
}

static void test_per_part_api1(void **state)
{
    (void)state;
    per_part(true);
}

/* ---- the real agent routes ------------------------------------------------------------------ */

static void test_real_routes(void **state)
{
    (void)state;
    char dir[] = "/tmp/ferry-test.agentops.XXXXXX";
    assert_non_null(mkdtemp(dir));
    ferry_agent_options ao = {.clickhouse_url = "http://127.0.0.1:1", .data_path = dir,
                              .token = TOKEN};
    ferry_agent *a = NULL;
    ferry_err err = {0};
    assert_int_equal(ferry_agent_new(&ao, &a, &err), FERRY_OK);
    ferry_http_route routes[FERRY_AGENT_N_ROUTES];
    size_t n = ferry_agent_routes(a, routes, FERRY_AGENT_N_ROUTES);
    assert_int_equal(n, FERRY_AGENT_N_ROUTES);
    ferry_httpd_options o = {0};
    ferry_httpd *srv = NULL;
    assert_int_equal(ferry_httpd_start(&o, routes, n, &srv, &err), FERRY_OK);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", ferry_httpd_port(srv));

    ferry_agent_client *wrong = NULL, *c = NULL;
    assert_int_equal(ferry_agent_client_new(url, "wrong-token-0123456789", 10000, &wrong, &err),
                     FERRY_OK);
    ferry_agent_status_info st;
    assert_int_equal(ferry_agent_status(wrong, &st, &err), FERRY_EAUTH);
    assert_int_equal(ferry_agent_client_last_status(wrong), 401);
    ferry_agent_status_info_free(&st);

    assert_int_equal(ferry_agent_client_new(url, TOKEN, 10000, &c, &err), FERRY_OK);
    ferry_agent_client_set_name(c, "s1");
    /* no ClickHouse behind the agent: its 502, named */
    assert_int_equal(ferry_agent_status(c, &st, &err), FERRY_EREMOTE);
    assert_int_equal(ferry_agent_client_last_status(c), 502);
    assert_true(!strncmp(err.msg, "agent of s1 (status): agent http://127.0.0.1:", 45));
    ferry_agent_status_info_free(&st);
    /* a freeze name that is not a plain path component is refused before anything else */
    assert_int_equal(ferry_agent_remove_freeze(c, "../x", &err), FERRY_EINVAL);
    assert_int_equal(ferry_agent_client_last_status(c), 400);
    ferry_agent_frozen fz;
    const char *pids[] = {"p1"};
    assert_int_equal(ferry_agent_freeze_ids(c, "db", "t", "f/1", pids, 1, &fz, &err),
                     FERRY_EINVAL);
    ferry_agent_frozen_free(&fz);
    ferry_agent_client_stats s;
    ferry_agent_client_stats_get(c, &s);
    assert_true(s.requests >= 3);
    ferry_agent_client_free(c);
    ferry_agent_client_free(wrong);
    ferry_httpd_stop(srv);
    ferry_agent_free(a);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_many_api2),
        cmocka_unit_test(test_many_api1),
        cmocka_unit_test(test_per_part_api2),
        cmocka_unit_test(test_per_part_api1),
        cmocka_unit_test(test_real_routes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
