/* Unit tests of S3's XML answers as ferry reads them (lib/objstore/s3xml.c, expat): numeric
 * character references, CDATA, attributes, namespaces, nested elements of the same name,
 * encoding-type=url keys, and answers that must be refused rather than misread (DOCTYPE and
 * entity declarations, bad escapes, raw line breaks, truncated listings without a token). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore/objstore_int.h"

#define HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" \
             "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
#define ENTRY(k) "<Contents><Key>" k "</Key><Size>3</Size><ETag>&quot;abc&quot;</ETag>" \
                 "<LastModified>2026-01-02T03:04:05.000Z</LastModified></Contents>"

static int list(const char *xml, ferry_object_list *l, ferry_err *err)
{
    memset(l, 0, sizeof *l);
    int rc = objstore_xml_list(xml, strlen(xml), l, err);
    if (rc)
        ferry_object_list_free(l);
    return rc;
}

static void one_key(const char *xml, const char *want)
{
    ferry_object_list l;
    ferry_err err = {0};
    int rc = list(xml, &l, &err);
    if (rc)
        fail_msg("listing refused: %s", err.msg);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].key, want);
    assert_int_equal(l.items[0].size, 3);
    assert_string_equal(l.items[0].etag, "abc");
    assert_int_equal(l.items[0].mtime, 1767323045);
    ferry_object_list_free(&l);
}

static void refused(const char *xml, const char *why)
{
    ferry_object_list l;
    ferry_err err = {0};
    assert_int_equal(list(xml, &l, &err), FERRY_EREMOTE);
    if (!strstr(err.msg, why))
        fail_msg("message '%s' lacks '%s'", err.msg, why);
}

static void test_entities_and_references(void **state)
{
    (void)state;
    one_key(HEAD ENTRY("a&amp;b&lt;c&gt;d&quot;e&apos;f") "</ListBucketResult>", "a&b<c>d\"e'f");
    /* decimal, hexadecimal, beyond ASCII (UTF-8 out), and a reference to '&' itself */
    one_key(HEAD ENTRY("&#65;&#x42;&#x4E2D;&#233;&#38;amp;") "</ListBucketResult>",
            "AB\xe4\xb8\xad\xc3\xa9&amp;");
    /* a carriage return sent as a reference is kept (only a raw one is normalised) */
    one_key(HEAD ENTRY("cr&#13;lf&#10;") "</ListBucketResult>", "cr\rlf\n");
    refused(HEAD ENTRY("bad&#1;") "</ListBucketResult>", "not well-formed");
    refused(HEAD ENTRY("amp&") "</ListBucketResult>", "not well-formed");
    refused(HEAD ENTRY("&unknown;") "</ListBucketResult>", "not well-formed");
}

static void test_cdata_attributes_namespaces(void **state)
{
    (void)state;
    one_key(HEAD ENTRY("<![CDATA[a<b&amp;c]]>") "</ListBucketResult>", "a<b&amp;c");
    one_key(HEAD ENTRY("x<![CDATA[]]>y") "</ListBucketResult>", "xy");
    one_key(HEAD "<Contents id=\"1\"><Key lang=\"en\" x='&lt;'>k</Key><Size a=\"b\">3</Size>"
                 "<ETag>\"abc\"</ETag><LastModified>2026-01-02T03:04:05.000Z</LastModified>"
                 "</Contents></ListBucketResult>",
            "k");
    one_key("<s3:ListBucketResult xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<s3:Contents><s3:Key>ns</s3:Key><s3:Size>3</s3:Size><s3:ETag>abc</s3:ETag>"
            "<s3:LastModified>2026-01-02T03:04:05.000Z</s3:LastModified></s3:Contents>"
            "</s3:ListBucketResult>",
            "ns");
}

static void test_nested_same_name(void **state)
{
    (void)state;
    /* a <Key> or <Size> inside another element of the entry is not the entry's */
    one_key(HEAD "<Contents><Owner><Key>owner-key</Key><Size>99</Size></Owner><Key>real</Key>"
                 "<Size>3</Size><ETag>abc</ETag><LastModified>2026-01-02T03:04:05.000Z"
                 "</LastModified><Contents><Key>inner</Key></Contents></Contents>"
                 "</ListBucketResult>",
            "real");
    /* a <Contents> outside ListBucketResult/ is nothing */
    ferry_object_list l;
    ferry_err err = {0};
    assert_int_equal(list(HEAD "<Other>" ENTRY("no") "</Other></ListBucketResult>", &l, &err),
                     FERRY_OK);
    assert_int_equal(l.n, 0);
    ferry_object_list_free(&l);
    /* the top-level IsTruncated, not one nested deeper */
    assert_int_equal(list(HEAD "<X><IsTruncated>true</IsTruncated></X>" ENTRY("k")
                          "<IsTruncated>false</IsTruncated></ListBucketResult>", &l, &err),
                     FERRY_OK);
    assert_null(l.next_token);
    ferry_object_list_free(&l);
}

static void test_pages_and_tokens(void **state)
{
    (void)state;
    ferry_object_list l;
    ferry_err err = {0};
    assert_int_equal(list(HEAD ENTRY("a") ENTRY("b") "<IsTruncated>true</IsTruncated>"
                          "<NextContinuationToken>t+/=&amp;</NextContinuationToken>"
                          "<EncodingType>url</EncodingType></ListBucketResult>", &l, &err),
                     FERRY_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.next_token, "t+/=&"); /* tokens are never URL-encoded */
    ferry_object_list_free(&l);
    /* an empty truncated page is a page */
    assert_int_equal(list(HEAD "<IsTruncated>true</IsTruncated><NextContinuationToken>t"
                          "</NextContinuationToken></ListBucketResult>", &l, &err), FERRY_OK);
    assert_int_equal(l.n, 0);
    assert_string_equal(l.next_token, "t");
    ferry_object_list_free(&l);
    refused(HEAD ENTRY("a") "<IsTruncated>true</IsTruncated></ListBucketResult>",
            "NextContinuationToken");
    refused(HEAD "<IsTruncated>yes</IsTruncated></ListBucketResult>", "IsTruncated");
    refused(HEAD "<Contents><Size>3</Size></Contents></ListBucketResult>", "no <Key>");
    refused(HEAD "<Contents><Key>k</Key></Contents></ListBucketResult>", "no <Size>");
    refused(HEAD "<Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>", "Size");
    refused("<Error><Code>AccessDenied</Code></Error>", "not a ListBucketResult");
    refused(HEAD ENTRY("a"), "not well-formed"); /* cut short */
    refused("", "not well-formed");
}

static void test_url_encoded_keys(void **state)
{
    (void)state;
    one_key(HEAD "<EncodingType>url</EncodingType>"
                 ENTRY("k/ctl%01%1F%7F/sp+ace/pct%2541/plus%2B/%26%3C%3E%22%27/"
                       "%C3%A9%E4%B8%AD/cr%0Dlf%0A/tab%09")
                 "</ListBucketResult>",
            "k/ctl\x01\x1f\x7f/sp ace/pct%41/plus+/&<>\"'/\xc3\xa9\xe4\xb8\xad/cr\rlf\n/tab\t");
    /* EncodingType may come after the entries */
    one_key(HEAD ENTRY("a+b") "<EncodingType>url</EncodingType></ListBucketResult>", "a b");
    /* without it, keys are as sent */
    one_key(HEAD ENTRY("a+b%41") "</ListBucketResult>", "a+b%41");
    refused(HEAD "<EncodingType>url</EncodingType>" ENTRY("bad%4") "</ListBucketResult>",
            "bad escape");
    refused(HEAD "<EncodingType>url</EncodingType>" ENTRY("bad%zz") "</ListBucketResult>",
            "bad escape");
    refused(HEAD "<EncodingType>url</EncodingType>" ENTRY("nul%00") "</ListBucketResult>",
            "NUL");
    refused(HEAD "<EncodingType>base64</EncodingType>" ENTRY("a") "</ListBucketResult>",
            "EncodingType");
    /* a raw carriage return (a store ignoring encoding-type=url) reaches the parser as a line
     * feed: the listing is refused, never read as another key */
    refused(HEAD ENTRY("cr\rlf") "</ListBucketResult>", "cannot be trusted");
    refused(HEAD ENTRY("cr\r\nlf") "</ListBucketResult>", "cannot be trusted");
    /* a raw line feed alone in a document without carriage returns is what the store sent */
    one_key(HEAD ENTRY("lf\nlf") "</ListBucketResult>", "lf\nlf");
}

static void test_refused_documents(void **state)
{
    (void)state;
    /* entity declarations, external entities and the billion laughs all need a DOCTYPE */
    refused("<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"x\">]>"
            "<ListBucketResult>" ENTRY("&a;") "</ListBucketResult>", "document type");
    refused("<!DOCTYPE l SYSTEM \"file:///etc/passwd\"><ListBucketResult/>", "document type");
    char deep[2048] = HEAD;
    for (int i = 0; i < 40; i++)
        strcat(deep, "<a>");
    refused(deep, "nests more than");
    /* one element's text is bounded */
    size_t n = 70 * 1024;
    char *big = malloc(n + 256);
    strcpy(big, HEAD "<Contents><Key>");
    size_t at = strlen(big);
    memset(big + at, 'k', n);
    strcpy(big + at + n, "</Key><Size>1</Size></Contents></ListBucketResult>");
    refused(big, "text is over");
    free(big);
}

static void test_values_and_errors(void **state)
{
    (void)state;
    ferry_buf v = FERRY_BUF_INIT;
    bool found = false;
    char root[64];
    ferry_err err = {0};
    const char *init = "<?xml version=\"1.0\"?><InitiateMultipartUploadResult xmlns=\"x\">"
                       "<Bucket>b</Bucket><Key>k</Key><UploadId>u&amp;1</UploadId>"
                       "</InitiateMultipartUploadResult>";
    assert_int_equal(objstore_xml_value("t", init, strlen(init),
                                        "InitiateMultipartUploadResult/UploadId", &v, &found, root,
                                        sizeof root, &err), FERRY_OK);
    assert_true(found);
    assert_string_equal(ferry_buf_cstr(&v), "u&1");
    assert_string_equal(root, "InitiateMultipartUploadResult");
    assert_int_equal(objstore_xml_value("t", init, strlen(init), "X/UploadId", &v, &found, NULL,
                                        0, &err), FERRY_OK);
    assert_false(found);
    const char *ver = "<VersioningConfiguration xmlns=\"x\"/>";
    assert_int_equal(objstore_xml_value("t", ver, strlen(ver), "VersioningConfiguration/Status",
                                        &v, &found, root, sizeof root, &err), FERRY_OK);
    assert_false(found);
    assert_string_equal(root, "VersioningConfiguration");
    ferry_buf_free(&v);

    char out[256];
    const char *e = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The key "
                    "&lt;k&gt; <![CDATA[does not]]> exist</Message><Resource><Code>no</Code>"
                    "</Resource></Error>";
    objstore_xml_error(e, strlen(e), out, sizeof out);
    assert_string_equal(out, "NoSuchKey: The key <k> does not exist");
    objstore_xml_error("not xml", 7, out, sizeof out);
    assert_string_equal(out, "");
    objstore_xml_error("", 0, out, sizeof out);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entities_and_references),
        cmocka_unit_test(test_cdata_attributes_namespaces),
        cmocka_unit_test(test_nested_same_name),
        cmocka_unit_test(test_pages_and_tokens),
        cmocka_unit_test(test_url_encoded_keys),
        cmocka_unit_test(test_refused_documents),
        cmocka_unit_test(test_values_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
