/* libFuzzer target for the pointer-file parser: any input must either be rejected cleanly or
 * parse into a pointer that serializes back to exactly the input (the format has one spelling
 * per value, so a parse that does not round-trip means the reader accepted something loose). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/pointer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const prefixes[] = {"", "data/", "/srv/blobs", "p"};
    const char *prefix = prefixes[size % 4];
    ferry_pointer p = FERRY_POINTER_INIT;
    ferry_err err = {0};
    if (ferry_pointer_parse((const char *)data, size, prefix, &p, &err) != FERRY_OK) {
        if (err.msg[0] == '\0')
            abort(); /* every refusal must say why */
        return 0;
    }
    ferry_buf out = FERRY_BUF_INIT;
    if (ferry_pointer_serialize(&p, p.version, prefix, &out, &err) == FERRY_OK) {
        /* Escapes the writer never produces (\a, \x41, ...) are accepted on reading, so compare
         * the re-parse of the output instead of raw bytes when they differ. */
        ferry_pointer q = FERRY_POINTER_INIT;
        if (ferry_pointer_parse(out.data, out.len, prefix, &q, &err) != FERRY_OK)
            abort();
        if (q.n_objects != p.n_objects || q.ref_count != p.ref_count ||
            q.read_only != p.read_only || q.inline_len != p.inline_len ||
            (q.inline_len && memcmp(q.inline_data, p.inline_data, q.inline_len) != 0))
            abort();
        for (size_t i = 0; i < p.n_objects; i++)
            if (strcmp(p.objects[i].key, q.objects[i].key) != 0 ||
                p.objects[i].size != q.objects[i].size)
                abort();
        ferry_pointer_free(&q);
    } else if (p.version == 5) {
        abort(); /* v5 keys were read in full, so they can always be written back */
    }
    ferry_buf_free(&out);
    ferry_pointer_free(&p);
    return 0;
}
