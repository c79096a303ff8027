/* CityHash v1.0.2 (Google), the exact version ClickHouse pins for part checksums and compressed
 * block checksums. Later CityHash releases give different values: never substitute them. */
#ifndef FERRY_CITYHASH102_H
#define FERRY_CITYHASH102_H

#include <stddef.h>
#include <stdint.h>

/* A 128-bit CityHash value. lo is CityHash's Uint128Low64 ("first"), hi its Uint128High64;
 * ClickHouse stores them in that order, each little-endian. */
typedef struct ferry_city128 {
    uint64_t lo;
    uint64_t hi;
} ferry_city128;

ferry_city128 ferry_cityhash102_128_seed(const void *data, size_t len, ferry_city128 seed);
ferry_city128 ferry_cityhash102_128(const void *data, size_t len);
uint64_t ferry_cityhash102_64(const void *data, size_t len);

#endif
