/* Throughput of ClickHouse's part-file hash (CityHash v1.0.2 chained over 2048-byte blocks),
 * which bounds how fast an agent can verify a received part: 256 MiB fed in 64 KiB chunks. */
#include "ferry/checksums.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void)
{
    const size_t chunk = 64 * 1024, total = 256u * 1024 * 1024;
    unsigned char *buf = malloc(chunk);
    if (!buf)
        return 1;
    for (size_t i = 0; i < chunk; i++)
        buf[i] = (unsigned char)(i * 2654435761u >> 13);
    ferry_part_hasher h;
    ferry_part_hasher_init(&h);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t done = 0; done < total; done += chunk)
        ferry_part_hasher_update(&h, buf, chunk);
    uint64_t hash[2];
    ferry_part_hasher_final(&h, hash);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("{\"bench\":\"part_hash\",\"bytes\":%zu,\"seconds\":%.4f,\"mib_per_second\":%.1f,"
           "\"hash_lo\":\"%016llx\"}\n", total, secs, (double)total / 1048576.0 / secs,
           (unsigned long long)hash[0]);
    free(buf);
    return 0;
}
