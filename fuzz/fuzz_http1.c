/* libFuzzer target for the ClickHouse client's HTTP/1.1 response parser (lib/clickhouse/http1.c):
 * any bytes, fed in pieces whose sizes come from the input's first byte, must parse or be
 * refused without crashing, and never yield more body bytes than were fed. */
#include <stdint.h>
#include <stdlib.h>

#include "clickhouse/http1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_body(void *arg, const char *d, size_t len)
{
    (void)d;
    *(size_t *)arg += len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 17 + 1;
    data++;
    size--;
    size_t body = 0;
    ferry_http1 p;
    ferry_http1_init(&p, NULL, count_body, &body, false);
    size_t i = 0;
    while (i < size && !ferry_http1_done(&p)) {
        size_t n = step < size - i ? step : size - i;
        size_t used = 0;
        if (ferry_http1_feed(&p, (const char *)data + i, n, &used, NULL))
            break;
        if (used > n)
            abort();
        i += n;
    }
    ferry_http1_finish(&p, NULL);
    if (body > size || p.body_bytes != body)
        abort();
    return 0;
}
