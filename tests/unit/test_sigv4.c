/* Unit tests of the SigV4 signer against AWS's published examples: the four S3 examples of
 * "Signature Calculations for the Authorization Header: Transferring Payload in a Single Chunk"
 * (GET object with Range, PUT object, GET bucket lifecycle, GET bucket / list objects) and two
 * vectors of the generic SigV4 test suite (get-vanilla, get-vanilla-query-order-key-case). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "objstore/sigv4.h"

#define AKID "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define HOST "examplebucket.s3.amazonaws.com"
#define DATE "20130524T000000Z"

static void check(const ferry_sigv4_request *rq, const char *akid, const char *secret,
                  const char *want_signed_headers, const char *want_sig, const char *want_creq)
{
    ferry_buf auth = FERRY_BUF_INIT, creq = FERRY_BUF_INIT;
    ferry_err err = {0};
    if (ferry_sigv4_sign(rq, akid, secret, &auth, &creq, &err))
        fail_msg("sign: %s", err.msg);
    char want[512];
    snprintf(want, sizeof want,
             "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, SignedHeaders=%s, "
             "Signature=%s",
             akid, rq->amz_date, rq->region, rq->service, want_signed_headers, want_sig);
    if (strcmp(auth.data, want) != 0)
        fail_msg("got  %s\nwant %s\ncanonical request:\n%s", auth.data, want, creq.data);
    if (want_creq)
        assert_string_equal(creq.data, want_creq);
    assert_null(strstr(auth.data, secret));
    ferry_buf_free(&auth);
    ferry_buf_free(&creq);
}

static void test_s3_get_object_range(void **state)
{
    (void)state;
    ferry_sigv4_header h[] = {{"Host", HOST},
                              {"Range", "bytes=0-9"},
                              {"x-amz-content-sha256", EMPTY_SHA},
                              {"x-amz-date", DATE}};
    ferry_sigv4_request rq = {"GET", "/test.txt", "", h, 4, EMPTY_SHA, DATE, "us-east-1", "s3"};
    check(&rq, AKID, SECRET, "host;range;x-amz-content-sha256;x-amz-date",
          "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
          "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
          "x-amz-content-sha256:" EMPTY_SHA "\nx-amz-date:20130524T000000Z\n\n"
          "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA);
}

static void test_s3_put_object(void **state)
{
    (void)state;
    char body_hash[65];
    ferry_sigv4_sha256_hex("Welcome to Amazon S3.", 21, body_hash);
    assert_string_equal(body_hash,
                        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    /* The key "test$file.text" is sent encoded. */
    ferry_buf path = FERRY_BUF_INIT;
    ferry_buf_putc(&path, '/');
    ferry_sigv4_uri_encode(&path, "test$file.text", 14, true);
    assert_string_equal(path.data, "/test%24file.text");
    ferry_sigv4_header h[] = {{"Host", HOST},
                              {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                              {"x-amz-date", DATE},
                              {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                              {"x-amz-content-sha256", body_hash}};
    ferry_sigv4_request rq = {"PUT", path.data, "", h, 5, body_hash, DATE, "us-east-1", "s3"};
    check(&rq, AKID, SECRET, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
          "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd", NULL);
    ferry_buf_free(&path);
}

static void test_s3_get_bucket_lifecycle(void **state)
{
    (void)state;
    ferry_buf q = FERRY_BUF_INIT;
    ferry_sigv4_param p[] = {{"lifecycle", NULL}};
    assert_int_equal(ferry_sigv4_canonical_query(p, 1, &q), 0);
    assert_string_equal(q.data, "lifecycle=");
    ferry_sigv4_header h[] = {
        {"Host", HOST}, {"x-amz-content-sha256", EMPTY_SHA}, {"x-amz-date", DATE}};
    ferry_sigv4_request rq = {"GET", "/", q.data, h, 3, EMPTY_SHA, DATE, "us-east-1", "s3"};
    check(&rq, AKID, SECRET, "host;x-amz-content-sha256;x-amz-date",
          "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", NULL);
    ferry_buf_free(&q);
}

static void test_s3_list_objects(void **state)
{
    (void)state;
    ferry_buf q = FERRY_BUF_INIT;
    /* Given out of order on purpose: the canonical form sorts them. */
    ferry_sigv4_param p[] = {{"prefix", "J"}, {"max-keys", "2"}};
    assert_int_equal(ferry_sigv4_canonical_query(p, 2, &q), 0);
    assert_string_equal(q.data, "max-keys=2&prefix=J");
    ferry_sigv4_header h[] = {
        {"x-amz-date", DATE}, {"x-amz-content-sha256", EMPTY_SHA}, {"host", HOST}};
    ferry_sigv4_request rq = {"GET", "/", q.data, h, 3, EMPTY_SHA, DATE, "us-east-1", "s3"};
    check(&rq, AKID, SECRET, "host;x-amz-content-sha256;x-amz-date",
          "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", NULL);
    ferry_buf_free(&q);
}

static void test_suite_get_vanilla(void **state)
{
    (void)state;
    ferry_sigv4_header h[] = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
    ferry_sigv4_request rq = {"GET", "/", "", h, 2, EMPTY_SHA, "20150830T123600Z", "us-east-1",
                              "service"};
    check(&rq, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "host;x-amz-date",
          "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
          "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
          "host;x-amz-date\n" EMPTY_SHA);

    ferry_buf q = FERRY_BUF_INIT;
    ferry_sigv4_param p[] = {{"Param2", "value2"}, {"Param1", "value1"}};
    ferry_sigv4_canonical_query(p, 2, &q);
    assert_string_equal(q.data, "Param1=value1&Param2=value2");
    rq.query = q.data;
    check(&rq, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "host;x-amz-date",
          "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500", NULL);
    ferry_buf_free(&q);
}

static void test_encoding_and_canonical_headers(void **state)
{
    (void)state;
    ferry_buf b = FERRY_BUF_INIT;
    ferry_sigv4_uri_encode(&b, "a b+c=d/é~._-", strlen("a b+c=d/é~._-"), false);
    assert_string_equal(b.data, "a%20b%2Bc%3Dd%2F%C3%A9~._-");
    ferry_buf_reset(&b);
    ferry_sigv4_param p[] = {{"uploadId", "x/y="}, {"partNumber", "10"}, {"uploads", ""}};
    ferry_sigv4_canonical_query(p, 3, &b);
    assert_string_equal(b.data, "partNumber=10&uploadId=x%2Fy%3D&uploads=");
    ferry_buf_free(&b);

    /* Header values are trimmed and inner runs collapsed; names lower-cased. */
    ferry_sigv4_header h[] = {{"HOST", "  h  "}, {"X-Amz-Meta-A", " a   b  c "}};
    ferry_sigv4_request rq = {"GET", "/", "", h, 2, "UNSIGNED-PAYLOAD", DATE, "r", "s3"};
    ferry_buf auth = FERRY_BUF_INIT, creq = FERRY_BUF_INIT;
    ferry_err err = {0};
    assert_int_equal(ferry_sigv4_sign(&rq, "K", "S", &auth, &creq, &err), 0);
    assert_string_equal(creq.data, "GET\n/\n\nhost:h\nx-amz-meta-a:a b c\n\nhost;x-amz-meta-a\n"
                                   "UNSIGNED-PAYLOAD");
    ferry_buf_free(&auth);
    ferry_buf_free(&creq);

    /* Missing host and a malformed date are refused. */
    ferry_sigv4_request bad = {"GET", "/", "", h + 1, 1, "UNSIGNED-PAYLOAD", DATE, "r", "s3"};
    assert_int_equal(ferry_sigv4_sign(&bad, "K", "S", &auth, NULL, &err), FERRY_EINVAL);
    bad.headers = h;
    bad.amz_date = "2013-05-24";
    assert_int_equal(ferry_sigv4_sign(&bad, "K", "S", &auth, NULL, &err), FERRY_EINVAL);
    ferry_buf_free(&auth);

    char d[17];
    ferry_sigv4_amz_date(1369353600, d);
    assert_string_equal(d, DATE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_s3_get_object_range),
        cmocka_unit_test(test_s3_put_object),
        cmocka_unit_test(test_s3_get_bucket_lifecycle),
        cmocka_unit_test(test_s3_list_objects),
        cmocka_unit_test(test_suite_get_vanilla),
        cmocka_unit_test(test_encoding_and_canonical_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
