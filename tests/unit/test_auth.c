/* The pure pieces of the router's authentication (include/ferry/auth.h): credentials taken as
 * ClickHouse takes them, password hashes, CIDR matching, the failed-login throttle and the
 * request-rate bucket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ferry/auth.h"

/* ---- credentials ---- */

static int parse(const ferry_auth_request *in, ferry_auth_cred *c, ferry_err *err)
{
    memset(err, 0, sizeof *err);
    return ferry_auth_parse(in, c, err);
}

static void test_cred_sources(void **state)
{
    (void)state;
    ferry_auth_cred c;
    ferry_err err;
    /* nothing at all: ClickHouse's user "default" with an empty password */
    ferry_auth_request none = {0};
    assert_int_equal(parse(&none, &c, &err), FERRY_OK);
    assert_string_equal(c.user, "default");
    assert_string_equal(c.password, "");
    assert_false(c.given);
    ferry_auth_cred_free(&c);
    /* headers */
    ferry_auth_request h = {.header_user = "alice", .header_key = "s3cret"};
    assert_int_equal(parse(&h, &c, &err), FERRY_OK);
    assert_string_equal(c.user, "alice");
    assert_string_equal(c.password, "s3cret");
    assert_int_equal(c.source, FERRY_AUTH_FROM_HEADERS);
    assert_true(c.given);
    ferry_auth_cred_free(&c);
    /* Basic: "alice:pa:ss" -> the user ends at the first colon */
    ferry_auth_request b = {.authorization = "Basic YWxpY2U6cGE6c3M="};
    assert_int_equal(parse(&b, &c, &err), FERRY_OK);
    assert_string_equal(c.user, "alice");
    assert_string_equal(c.password, "pa:ss");
    assert_int_equal(c.source, FERRY_AUTH_FROM_BASIC);
    ferry_auth_cred_free(&c);
    ferry_auth_request b2 = {.authorization = "basic   YWxpY2U="}; /* "alice", no password */
    assert_int_equal(parse(&b2, &c, &err), FERRY_OK);
    assert_string_equal(c.user, "alice");
    assert_string_equal(c.password, "");
    ferry_auth_cred_free(&c);
    /* a Basic password holding a NUL byte keeps its length ("u:a\0b") */
    ferry_auth_request b3 = {.authorization = "Basic dTphAGI="};
    assert_int_equal(parse(&b3, &c, &err), FERRY_OK);
    assert_int_equal(c.password_len, 3);
    assert_memory_equal(c.password, "a\0b", 3);
    ferry_auth_cred_free(&c);
    /* parameters; a password alone means user default */
    ferry_auth_request p = {.param_user = "bob", .param_password = "x"};
    assert_int_equal(parse(&p, &c, &err), FERRY_OK);
    assert_string_equal(c.user, "bob");
    assert_string_equal(c.password, "x");
    assert_true(c.given);
    ferry_auth_cred_free(&c);
    ferry_auth_request p2 = {.param_password = "x"};
    assert_int_equal(parse(&p2, &c, &err), FERRY_OK);
    assert_string_equal(c.user, "default");
    ferry_auth_cred_free(&c);
    /* empty headers count as absent (ClickHouse: has_auth_headers needs a non-empty one) */
    ferry_auth_request e = {.header_user = "", .header_key = "", .param_user = "carol"};
    assert_int_equal(parse(&e, &c, &err), FERRY_OK);
    assert_string_equal(c.user, "carol");
    ferry_auth_cred_free(&c);
}

static void test_cred_refused(void **state)
{
    (void)state;
    ferry_auth_cred c;
    ferry_err err;
    struct {
        ferry_auth_request in;
        const char *msg;
    } cases[] = {
        {{.header_user = "a", .authorization = "Basic YTpi"},
         "not allowed to use X-ClickHouse HTTP headers and Authorization HTTP header"},
        {{.header_user = "a", .param_user = "b"},
         "not allowed to use X-ClickHouse HTTP headers and authentication via parameters"},
        {{.authorization = "Basic YTpi", .param_password = "p"},
         "not allowed to use Authorization HTTP header and authentication via parameters"},
        {{.header_key = "k"}, "Got an empty user name from X-ClickHouse HTTP headers"},
        {{.param_user = ""}, "Got an empty user name from authentication via parameters"},
        {{.authorization = "Basic OnB3"}, "Got an empty user name from Authorization HTTP header"},
        {{.authorization = "Bearer abc"}, "'Bearer' HTTP Authorization scheme is not supported"},
        {{.authorization = "Basic !!!!"}, "not base64"},
        {{.authorization = "Basic YWJj="}, "not base64"},
        {{.authorization = "Basic YQ"}, "not base64"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(parse(&cases[i].in, &c, &err), FERRY_EAUTH);
        if (!strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
        ferry_auth_cred_free(&c);
    }
    /* a user name of FERRY_AUTH_USER_MAX bytes is refused, one byte less is fine */
    char longname[FERRY_AUTH_USER_MAX + 1];
    memset(longname, 'u', FERRY_AUTH_USER_MAX);
    longname[FERRY_AUTH_USER_MAX] = '\0';
    ferry_auth_request l = {.header_user = longname, .header_key = "k"};
    assert_int_equal(parse(&l, &c, &err), FERRY_EAUTH);
    ferry_auth_cred_free(&c);
    longname[FERRY_AUTH_USER_MAX - 1] = '\0';
    assert_int_equal(parse(&l, &c, &err), FERRY_OK);
    ferry_auth_cred_free(&c);
}

static void test_base64(void **state)
{
    (void)state;
    unsigned char out[64];
    size_t n;
    assert_true(ferry_base64_decode("", out, &n));
    assert_int_equal(n, 0);
    assert_true(ferry_base64_decode("Zm9vYmFy", out, &n));
    assert_int_equal(n, 6);
    assert_memory_equal(out, "foobar", 6);
    assert_true(ferry_base64_decode("Zm9vYg==", out, &n));
    assert_int_equal(n, 4);
    assert_true(ferry_base64_decode("Zm9vYmE=", out, &n));
    assert_int_equal(n, 5);
    assert_false(ferry_base64_decode("Zm9vY===", out, &n));
    assert_false(ferry_base64_decode("Zm=vYmE=", out, &n));
    assert_false(ferry_base64_decode("Zm9vYmE", out, &n));
    assert_false(ferry_base64_decode("Zm9v\nYmE=", out, &n));
}

/* ---- passwords ---- */

static void test_password_hash(void **state)
{
    (void)state;
    ferry_err err = {0};
    char h[65], h2[65], sha[65];
    /* the standard vector: SHA-256("abc") */
    ferry_auth_sha256_hex("abc", 3, sha);
    assert_string_equal(sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *salt = "000102030405060708090a0b0c0d0e0f";
    assert_int_equal(ferry_auth_hash_password(salt, "abc", 3, h, &err), FERRY_OK);
    /* the same from the password's SHA-256 (ClickHouse's password_sha256_hex), either case */
    assert_int_equal(ferry_auth_hash_from_sha256(salt, sha, h2, &err), FERRY_OK);
    assert_string_equal(h, h2);
    char upper[65];
    for (int i = 0; i < 65; i++)
        upper[i] = (char)(sha[i] >= 'a' && sha[i] <= 'f' ? sha[i] - 32 : sha[i]);
    assert_int_equal(ferry_auth_hash_from_sha256(salt, upper, h2, &err), FERRY_OK);
    assert_string_equal(h, h2);
    assert_true(ferry_auth_verify(salt, h, "abc", 3));
    assert_false(ferry_auth_verify(salt, h, "abd", 3));
    assert_false(ferry_auth_verify(salt, h, "abc", 2));
    assert_false(ferry_auth_verify(salt, h, "", 0));
    /* another salt, another hash: the salt is part of it */
    char h3[65];
    assert_int_equal(ferry_auth_hash_password("ff0102030405060708090a0b0c0d0e0f", "abc", 3, h3,
                                              &err), FERRY_OK);
    assert_string_not_equal(h, h3);
    assert_false(ferry_auth_verify("ff0102030405060708090a0b0c0d0e0f", h, "abc", 3));
    /* malformed records never match, also for the right password */
    assert_false(ferry_auth_verify("0001", h, "abc", 3));
    assert_false(ferry_auth_verify(salt, "00", "abc", 3));
    assert_false(ferry_auth_verify(salt, "", "", 0));
    assert_int_equal(ferry_auth_hash_password("xyz", "abc", 3, h, &err), FERRY_EINVAL);
    assert_int_equal(ferry_auth_hash_from_sha256(salt, "abc", h, &err), FERRY_EINVAL);
    /* salts are random */
    char s1[33], s2[33];
    assert_int_equal(ferry_auth_new_salt(s1, &err), FERRY_OK);
    assert_int_equal(ferry_auth_new_salt(s2, &err), FERRY_OK);
    assert_int_equal(strlen(s1), 32);
    assert_string_not_equal(s1, s2);
}

/* ---- networks ---- */

static bool in(const char *net, const char *addr)
{
    ferry_cidr c;
    ferry_err err = {0};
    int fam;
    uint8_t a[16];
    if (ferry_cidr_parse(net, &c, &err))
        fail_msg("%s: %s", net, err.msg);
    if (!ferry_addr_parse(addr, &fam, a))
        fail_msg("address %s", addr);
    return ferry_cidr_match(&c, fam, a);
}

static void test_cidr(void **state)
{
    (void)state;
    assert_true(in("10.0.0.0/8", "10.255.1.2"));
    assert_false(in("10.0.0.0/8", "11.0.0.1"));
    assert_true(in("192.168.1.7", "192.168.1.7"));
    assert_false(in("192.168.1.7", "192.168.1.8"));
    assert_true(in("172.16.0.0/12", "172.31.255.255"));
    assert_false(in("172.16.0.0/12", "172.32.0.0"));
    assert_true(in("0.0.0.0/0", "8.8.8.8"));
    assert_true(in("10.1.2.0/23", "10.1.3.200"));
    assert_false(in("10.1.2.0/23", "10.1.4.0"));
    assert_true(in("::1/128", "::1"));
    assert_false(in("::1/128", "::2"));
    assert_true(in("fd00::/8", "fdab:1::5"));
    assert_false(in("fd00::/8", "fe80::1"));
    /* IPv4-mapped IPv6 addresses match IPv4 ranges, not the other way round */
    assert_true(in("127.0.0.0/8", "::ffff:127.0.0.1"));
    assert_false(in("::ffff:0:0/96", "127.0.0.1"));
    assert_false(in("10.0.0.0/8", "::a00:1")); /* not mapped */
    ferry_cidr c;
    ferry_err err = {0};
    assert_int_equal(ferry_cidr_parse("10.1.0.0/8", &c, &err), FERRY_EINVAL);
    assert_non_null(strstr(err.msg, "host bits"));
    assert_int_equal(ferry_cidr_parse("10.0.0.0/33", &c, &err), FERRY_EINVAL);
    assert_int_equal(ferry_cidr_parse("::/129", &c, &err), FERRY_EINVAL);
    assert_int_equal(ferry_cidr_parse("10.0.0/8", &c, &err), FERRY_EINVAL);
    assert_int_equal(ferry_cidr_parse("", &c, &err), FERRY_EINVAL);
    assert_int_equal(ferry_cidr_parse("10.0.0.0/", &c, &err), FERRY_EINVAL);
    assert_int_equal(ferry_cidr_parse("10.0.0.0/8x", &c, &err), FERRY_EINVAL);
    ferry_cidr *v = NULL;
    size_t n = 0;
    assert_int_equal(ferry_cidr_list_parse(" 10.0.0.0/8 , ::1/128,", &v, &n, &err), FERRY_OK);
    assert_int_equal(n, 2);
    free(v);
    assert_int_equal(ferry_cidr_list_parse("", &v, &n, &err), FERRY_OK);
    assert_int_equal(n, 0);
    free(v);
    assert_int_equal(ferry_cidr_list_parse("10.0.0.0/8,bogus", &v, &n, &err), FERRY_EINVAL);
    assert_null(v);
    int fam;
    uint8_t a[16];
    assert_true(ferry_addr_parse("127.0.0.53", &fam, a));
    assert_true(ferry_addr_loopback(fam, a));
    assert_true(ferry_addr_parse("::1", &fam, a));
    assert_true(ferry_addr_loopback(fam, a));
    assert_true(ferry_addr_parse("::ffff:127.1.2.3", &fam, a));
    assert_true(ferry_addr_loopback(fam, a));
    assert_true(ferry_addr_parse("10.0.0.1", &fam, a));
    assert_false(ferry_addr_loopback(fam, a));
    assert_false(ferry_addr_parse("localhost", &fam, a));
}

/* ---- throttle ---- */

static void addr4(uint8_t a[16], unsigned x)
{
    memset(a, 0, 16);
    a[0] = 10;
    a[1] = (uint8_t)(x >> 16);
    a[2] = (uint8_t)(x >> 8);
    a[3] = (uint8_t)x;
}

static void test_throttle(void **state)
{
    (void)state;
    ferry_auth_throttle_policy p = {.slots = 64, .free_failures = 3, .base_ms = 100,
                                    .max_ms = 1000, .decay_ms = 10000};
    ferry_auth_throttle *t = ferry_auth_throttle_new(&p);
    assert_non_null(t);
    uint8_t a[16], b[16];
    addr4(a, 1);
    addr4(b, 2);
    uint64_t now = 1000000;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ferry_auth_throttle_delay(t, 4, a, now), 0);
        ferry_auth_throttle_fail(t, 4, a, now);
    }
    /* the 3 free failures cost nothing; the 4th doubles from 100 ms, capped at 1 s */
    assert_int_equal(ferry_auth_throttle_delay(t, 4, a, now), 0);
    ferry_auth_throttle_fail(t, 4, a, now);
    assert_int_equal(ferry_auth_throttle_delay(t, 4, a, now), 100);
    ferry_auth_throttle_fail(t, 4, a, now);
    assert_int_equal(ferry_auth_throttle_delay(t, 4, a, now), 200);
    for (int i = 0; i < 10; i++)
        ferry_auth_throttle_fail(t, 4, a, now);
    assert_int_equal(ferry_auth_throttle_delay(t, 4, a, now), 1000);
    /* another address is not slowed down */
    assert_int_equal(ferry_auth_throttle_delay(t, 4, b, now), 0);
    /* decay: one failure forgotten per 10 s; 15 failures, 12 of them gone after 120 s */
    assert_int_equal(ferry_auth_throttle_delay(t, 4, a, now + 120000), 0);
    assert_int_equal(ferry_auth_throttle_delay(t, 4, a, now + 110000), 100);
    /* failures of other addresses do not slow this one */
    assert_int_equal(ferry_auth_throttle_count(t), 1);
    /* bounded memory: 10,000 addresses in 64 slots */
    for (unsigned x = 0; x < 10000; x++) {
        addr4(a, x);
        ferry_auth_throttle_fail(t, 4, a, now + x);
    }
    assert_true(ferry_auth_throttle_count(t) <= 64);
    /* the most recent ones are remembered; an address hammering keeps its entry */
    for (int i = 0; i < 6; i++)
        ferry_auth_throttle_fail(t, 4, b, now + 20000);
    for (unsigned x = 0; x < 1000; x++) {
        addr4(a, 20000 + x);
        ferry_auth_throttle_fail(t, 4, a, now + 10000 + x); /* older than b's failures */
    }
    assert_true(ferry_auth_throttle_delay(t, 4, b, now + 20000) > 0);
    ferry_auth_throttle_free(t);
}

static void test_rate(void **state)
{
    (void)state;
    ferry_bucket r = {0};
    uint64_t now = 5000;
    int ok = 0;
    for (int i = 0; i < 20; i++)
        ok += ferry_bucket_take(&r, 5, now);
    assert_int_equal(ok, 5); /* a one-second burst */
    assert_false(ferry_bucket_take(&r, 5, now + 100));
    assert_true(ferry_bucket_take(&r, 5, now + 200)); /* 200 ms at 5/s: one token */
    assert_false(ferry_bucket_take(&r, 5, now + 200));
    /* a long pause refills to the burst, not beyond */
    ok = 0;
    for (int i = 0; i < 20; i++)
        ok += ferry_bucket_take(&r, 5, now + 60000);
    assert_int_equal(ok, 5);
    ferry_bucket u = {0};
    for (int i = 0; i < 1000; i++)
        assert_true(ferry_bucket_take(&u, 0, now));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cred_sources), cmocka_unit_test(test_cred_refused),
        cmocka_unit_test(test_base64),       cmocka_unit_test(test_password_hash),
        cmocka_unit_test(test_cidr),         cmocka_unit_test(test_throttle),
        cmocka_unit_test(test_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
