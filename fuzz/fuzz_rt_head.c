/* libFuzzer target for the router's statement classification (lib/router/sql.c): any bytes as
 * the start of a request body. The incremental scanner, fed the input in pieces whose sizes come
 * from the input's first byte, must reach the same decision as one look at the whole text (kind,
 * target, format, columns, where the data starts), never read past what it was given, and keep
 * the data offset inside the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_head(const ferry_rt_head *a, const ferry_rt_head *b, size_t len)
{
    if (a->kind != b->kind)
        abort();
    char da[FERRY_RT_IDENT_MAX], ta[FERRY_RT_IDENT_MAX], db[FERRY_RT_IDENT_MAX],
        tb[FERRY_RT_IDENT_MAX];
    bool ha = ferry_rt_head_target(a, da, ta), hb = ferry_rt_head_target(b, db, tb);
    if (ha != hb || (ha && (strcmp(da, db) || strcmp(ta, tb))))
        abort();
    if (a->kind != FERRY_RT_STMT_INSERT)
        return;
    if (a->ins.data_offset != b->ins.data_offset || a->ins.data_offset > len ||
        strcmp(a->ins.format, b->ins.format) || a->ins.n_columns != b->ins.n_columns)
        abort();
    for (size_t i = 0; i < a->ins.n_columns; i++)
        if (strcmp(a->ins.columns[i], b->ins.columns[i]))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = 1 + data[0] % 64;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    ferry_rt_head whole;
    ferry_rt_head_init(&whole);
    if (!ferry_rt_head_feed(&whole, text, len, true))
        abort(); /* a complete text is always decided */

    ferry_rt_head inc;
    ferry_rt_head_init(&inc);
    bool done = false;
    for (size_t n = step; n < len && !done; n += step) {
        char *piece = malloc(n); /* exactly n bytes: reading past them is caught */
        if (!piece)
            break;
        memcpy(piece, text, n);
        done = ferry_rt_head_feed(&inc, piece, n, false);
        free(piece);
    }
    if (!done) {
        char *all = malloc(len ? len : 1);
        if (all) {
            memcpy(all, text, len);
            if (!ferry_rt_head_feed(&inc, all, len, true))
                abort();
            free(all);
            done = true;
        }
    }
    if (done)
        same_head(&whole, &inc, len);
    ferry_rt_head_free(&whole);
    ferry_rt_head_free(&inc);

    bool more = false;
    ferry_rt_insert ins;
    ferry_rt_classify(text, len, false, &ins, &more);
    ferry_rt_insert_free(&ins);
    return 0;
}
