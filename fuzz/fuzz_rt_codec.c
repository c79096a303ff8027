/* libFuzzer target for the router's insert codecs (lib/router/codec.c: JSONEachRow, TSV,
 * TSVWithNames, CSV, CSVWithNames, RowBinary): any bytes as an INSERT's data. The first byte picks
 * the format, the second the chunk size. The data fed whole and fed in chunks (as a body arrives,
 * each chunk in a buffer of exactly its size) must give the same rows written back and the same
 * verdict (error or not); nothing may be read past the data. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/buf.h"
#include "ferry/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char schema_tsv[] = "tenant\tString\t\nuid\tUInt64\t\nv\tNullable(String)\t\n"
                                 "a\tArray(Tuple(UInt8, String))\t\nsplit\tUInt16\t\n";

/* Runs the codec over data in chunks of step bytes (step >= len: at once). Returns whether it
 * failed; the rows written back go to out. */
static bool run(enum ferry_rt_format f, const ferry_rt_schema *schema, const char *data,
                size_t len, size_t step, ferry_buf *out)
{
    ferry_rt_codec_options o = {.format = f, .tenant_column = "tenant", .split_column = "split",
                                .split_key = "uid", .schema = schema};
    ferry_rt_codec *c = NULL;
    ferry_err err = {0};
    if (ferry_rt_codec_new(&o, &c, &err))
        abort(); /* the options are fixed and valid */
    ferry_buf carry = {0};
    bool failed = false;
    size_t fed = 0;
    while (!failed) {
        size_t n = len - fed < step ? len - fed : step;
        if (ferry_buf_append(&carry, data + fed, n))
            abort();
        fed += n;
        bool eof = fed == len;
        /* the unconsumed data in a buffer of exactly its size */
        char *view = malloc(carry.len ? carry.len : 1);
        if (!view)
            abort();
        memcpy(view, carry.data, carry.len);
        size_t off = 0;
        for (;;) {
            ferry_rt_row row;
            size_t used = 0;
            if (ferry_rt_codec_next(c, view + off, carry.len - off, eof, &used, &row, &err)) {
                failed = true;
                break;
            }
            if (used > carry.len - off || (row.have && row.end > used))
                abort();
            if (!row.have) {
                off += used;
                break;
            }
            if (ferry_rt_codec_emit(c, view + off, &row, (uint32_t)row.key_len, out, &err)) {
                failed = true;
                break;
            }
            off += used;
        }
        free(view);
        memmove(carry.data, carry.data + off, carry.len - off);
        carry.len -= off;
        if (eof)
            break;
    }
    ferry_buf_free(&carry);
    ferry_rt_codec_free(c);
    return failed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const enum ferry_rt_format formats[] = {FERRY_RT_JSONEACHROW, FERRY_RT_TSV,
                                                   FERRY_RT_TSV_NAMES,   FERRY_RT_CSV,
                                                   FERRY_RT_CSV_NAMES,   FERRY_RT_ROWBINARY};
    enum ferry_rt_format f = formats[data[0] % 6];
    size_t step = 1 + data[1];
    const char *d = (const char *)data + 2;
    size_t len = size - 2;
    ferry_rt_schema schema = {0};
    ferry_err err = {0};
    if (ferry_rt_schema_parse(schema_tsv, sizeof schema_tsv - 1, &schema, &err))
        abort();
    ferry_buf whole = {0}, chunked = {0};
    bool fw = run(f, &schema, d, len, len + 1, &whole);
    bool fc = run(f, &schema, d, len, step, &chunked);
    if (fw != fc || whole.len != chunked.len ||
        (whole.len && memcmp(whole.data, chunked.data, whole.len)))
        abort();
    ferry_buf_free(&whole);
    ferry_buf_free(&chunked);
    ferry_rt_schema_free(&schema);
    return 0;
}
