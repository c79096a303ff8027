/* libFuzzer target for the ClickHouse client's parsers: TSV unescaping, the streaming TSV reader
 * (fed in chunks of a size taken from the input), whole-result row parsing, the system-table
 * result parsers, exception-code parsing, in-band exception detection (tagged and untagged, text
 * and binary) and statement classification. Every parser must accept any bytes without crashing
 * and keep its results inside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/clickhouse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *copy(const uint8_t *data, size_t size)
{
    char *p = malloc(size + 1);
    if (!p)
        abort();
    memcpy(p, data, size);
    p[size] = '\0';
    return p;
}

static int count_row(char **fields, const size_t *lens, const bool *nulls, size_t n, void *arg)
{
    for (size_t i = 0; i < n; i++)
        if (nulls[i] && lens[i] != 0)
            abort();
    (void)fields;
    (*(size_t *)arg)++;
    return FERRY_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;

    char *s = copy(data, size);
    size_t n;
    bool null;
    if (ferry_tsv_unescape(s, size, &n, &null, NULL) == FERRY_OK && n > size)
        abort();
    free(s);

    ferry_tsv_reader r;
    size_t rows = 0;
    ferry_tsv_reader_init(&r, count_row, &rows);
    size_t chunk = (size_t)(mode % 31) + 1;
    for (size_t off = 0; off < size; off += chunk) {
        size_t k = size - off < chunk ? size - off : chunk;
        if (ferry_tsv_feed(&r, data + off, k, NULL))
            break;
    }
    ferry_tsv_finish(&r, NULL);
    ferry_tsv_reader_free(&r);

    ferry_ch_rows rs;
    if (ferry_ch_rows_parse(copy(data, size), size, &rs, NULL) == FERRY_OK) {
        for (size_t i = 0; i < rs.n_rows * rs.n_cols; i++)
            if (rs.lens[i] > size)
                abort();
        ferry_ch_rows_free(&rs);
    }

    switch (mode % 3) {
    case 0: {
        ferry_ch_partition *p;
        if (ferry_ch_parse_partitions(copy(data, size), size, &p, &n, NULL) == FERRY_OK)
            ferry_ch_partitions_free(p, n);
        break;
    }
    case 1: {
        ferry_ch_part *p;
        if (ferry_ch_parse_parts(copy(data, size), size, &p, &n, NULL) == FERRY_OK)
            ferry_ch_parts_free(p, n);
        break;
    }
    default: {
        ferry_ch_detached_part *p;
        if (ferry_ch_parse_detached(copy(data, size), size, &p, &n, NULL) == FERRY_OK)
            ferry_ch_detached_free(p, n);
        break;
    }
    }

    (void)ferry_ch_exception_code((const char *)data, size);
    static const char *const tags[] = {NULL, "k3j5a9x0qpz7mw2e", "a"};
    int code;
    char msg[64];
    ssize_t at = ferry_ch_find_trailer((const char *)data, size, mode & 1, tags[(mode >> 1) % 3],
                                       (mode >> 3) & 1, &code, msg, sizeof msg);
    if (at < -1 || at > (ssize_t)size || strlen(msg) >= sizeof msg)
        abort();
    at = ferry_ch_find_tag_marker((const char *)data, size, "k3j5a9x0qpz7mw2e");
    if (at < -1 || at > (ssize_t)size)
        abort();

    s = copy(data, size);
    (void)ferry_ch_statement_kind(s);
    free(s);
    return 0;
}
