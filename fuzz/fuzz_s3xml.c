/* libFuzzer target for S3's XML answers as ferry reads them (lib/objstore/s3xml.c): any input
 * is either refused with a message or read into keys that are whole C strings (no NUL inside a
 * key, none cut short); error and value lookups never fail on any input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "objstore/objstore_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    ferry_object_list l = {0};
    ferry_err err = {0};
    if (objstore_xml_list(body, size, &l, &err) != FERRY_OK) {
        if (err.msg[0] == '\0')
            abort(); /* every refusal must say why */
    } else {
        for (size_t i = 0; i < l.n; i++)
            if (!l.items[i].key)
                abort();
        if (l.next_token && !l.next_token[0])
            abort(); /* a truncated answer always names where to go on */
    }
    ferry_object_list_free(&l);
    char out[256];
    objstore_xml_error(body, size, out, sizeof out);
    ferry_buf v = FERRY_BUF_INIT;
    bool found = false;
    char root[64];
    objstore_xml_value("fuzz", body, size, "Error/Code", &v, &found, root, sizeof root, &err);
    ferry_buf_free(&v);
    return 0;
}
