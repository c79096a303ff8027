/* libFuzzer target for what `ferry route-query` reads (include/ferry/route_input.h): the routes
 * TSV and a table spec (the input's first line). Both must accept any bytes without crashing;
 * parsed routes keep to their rules (a tenant, a split below 2^32, at least one shard, none
 * empty, no slice twice) and point into their own copy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/route_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_sql_routes r;
    if (ferry_sql_routes_parse((const char *)data, size, "fuzz", &r, NULL) == FERRY_OK) {
        if (!r.n)
            abort();
        for (size_t i = 0; i < r.n; i++) {
            const ferry_sql_route *v = &r.v[i];
            if (!*v->tenant || !v->n_shards)
                abort();
            for (size_t k = 0; k < v->n_shards; k++)
                if (!*v->shards[k] || v->shards[k] < r.text || v->shards[k] > r.text + size)
                    abort();
            for (size_t j = 0; j < i; j++)
                if (r.v[j].split == v->split && !strcmp(r.v[j].tenant, v->tenant))
                    abort();
        }
        ferry_sql_routes_free(&r);
    }
    const uint8_t *nl = memchr(data, '\n', size);
    size_t n = nl ? (size_t)(nl - data) : size;
    char *spec = malloc(n + 1);
    if (!spec)
        abort();
    memcpy(spec, data, n);
    spec[n] = '\0';
    ferry_sql_tables ts = {0};
    if (ferry_sql_tables_add_spec(&ts, spec, NULL) == FERRY_OK) {
        const ferry_sql_table *t = &ts.t[0];
        if (ts.n != 1 || !t->split_column ||
            (t->layout == FERRY_LAYOUT_PER_TENANT && !strstr(t->tenant_pattern, "{tenant}")))
            abort();
    }
    ferry_sql_tables_free(&ts);
    free(spec);
    return 0;
}
