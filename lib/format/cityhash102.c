/* CityHash v1.0.2: CityHash64, CityHash128 and CityHash128WithSeed, written in C for ferry from
 * the published algorithm. ClickHouse computes compressed-block checksums with CityHash128 and
 * part-file checksums with CityHash128WithSeed, both from this exact release.
 *
 * The algorithm is Google's CityHash by Geoff Pike and Jyrki Alakuijala; this file follows the
 * structure of its reference implementation closely, so its licence notice is reproduced:
 *
 *   Copyright (c) 2011 Google, Inc.
 *
 *   Permission is hereby granted, free of charge, to any person obtaining a copy
 *   of this software and associated documentation files (the "Software"), to deal
 *   in the Software without restriction, including without limitation the rights
 *   to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 *   copies of the Software, and to permit persons to whom the Software is
 *   furnished to do so, subject to the following conditions:
 *
 *   The above copyright notice and this permission notice shall be included in
 *   all copies or substantial portions of the Software.
 *
 *   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 *   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 *   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 *   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 *   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 *   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
 *   THE SOFTWARE.
 *
 * Reads are little-endian regardless of the host, as ClickHouse's x86/ARM builds produce. */
#include "format/cityhash102.h"

#include <string.h>

static const uint64_t K0 = 0xc3a5c85c97cb3127ULL;
static const uint64_t K1 = 0xb492b66fbe98f273ULL;
static const uint64_t K2 = 0x9ae16a3b2f90404fULL;
static const uint64_t K3 = 0xc949d7c7509e6557ULL;

static uint64_t load64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t load32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Right rotation; shift 0 is defined (a plain shift by 64 would not be). */
static uint64_t rotr(uint64_t v, unsigned shift)
{
    shift &= 63;
    return shift == 0 ? v : (v >> shift) | (v << (64 - shift));
}

static uint64_t shift_mix(uint64_t v)
{
    return v ^ (v >> 47);
}

/* CityHash's Hash128to64 (a Murmur-inspired 128 -> 64 bit mix). */
static uint64_t hash_len16(uint64_t lo, uint64_t hi)
{
    const uint64_t mul = 0x9ddfea08eb382d69ULL;
    uint64_t a = (lo ^ hi) * mul;
    a ^= a >> 47;
    uint64_t b = (hi ^ a) * mul;
    b ^= b >> 47;
    return b * mul;
}

static uint64_t hash_len0to16(const unsigned char *s, size_t len)
{
    if (len > 8) {
        uint64_t a = load64(s);
        uint64_t b = load64(s + len - 8);
        return hash_len16(a, rotr(b + len, (unsigned)len)) ^ b;
    }
    if (len >= 4) {
        uint64_t a = load32(s);
        return hash_len16(len + (a << 3), load32(s + len - 4));
    }
    if (len > 0) {
        uint8_t a = s[0], b = s[len >> 1], c = s[len - 1];
        uint32_t y = (uint32_t)a + ((uint32_t)b << 8);
        uint32_t z = (uint32_t)len + ((uint32_t)c << 2);
        return shift_mix(y * K2 ^ z * K3) * K2;
    }
    return K2;
}

static uint64_t hash_len17to32(const unsigned char *s, size_t len)
{
    uint64_t a = load64(s) * K1;
    uint64_t b = load64(s + 8);
    uint64_t c = load64(s + len - 8) * K2;
    uint64_t d = load64(s + len - 16) * K0;
    return hash_len16(rotr(a - b, 43) + rotr(c, 30) + d, a + rotr(b ^ K3, 20) - c + len);
}

static uint64_t hash_len33to64(const unsigned char *s, size_t len)
{
    uint64_t z = load64(s + 24);
    uint64_t a = load64(s) + (len + load64(s + len - 16)) * K0;
    uint64_t b = rotr(a + z, 52);
    uint64_t c = rotr(a, 37);
    a += load64(s + 8);
    c += rotr(a, 7);
    a += load64(s + 16);
    uint64_t vf = a + z;
    uint64_t vs = b + rotr(a, 31) + c;
    a = load64(s + 16) + load64(s + len - 32);
    z = load64(s + len - 8);
    b = rotr(a + z, 52);
    c = rotr(a, 37);
    a += load64(s + len - 24);
    c += rotr(a, 7);
    a += load64(s + len - 16);
    uint64_t wf = a + z;
    uint64_t ws = b + rotr(a, 31) + c;
    uint64_t r = shift_mix((vf + ws) * K2 + (wf + vs) * K0);
    return shift_mix(r * K0 + vs) * K2;
}

typedef struct pair64 {
    uint64_t first, second;
} pair64;

/* A 16-byte hash of the 32 bytes at s plus seeds a and b ("quick and dirty" in the original). */
static pair64 weak_hash32(const unsigned char *s, uint64_t a, uint64_t b)
{
    uint64_t w = load64(s), x = load64(s + 8), y = load64(s + 16), z = load64(s + 24);
    a += w;
    b = rotr(b + a + z, 21);
    uint64_t c = a;
    a += x;
    a += y;
    b += rotr(a, 44);
    return (pair64){a + z, b + c};
}

uint64_t ferry_cityhash102_64(const void *data, size_t len)
{
    const unsigned char *s = data;
    if (len <= 16)
        return hash_len0to16(s, len);
    if (len <= 32)
        return hash_len17to32(s, len);
    if (len <= 64)
        return hash_len33to64(s, len);

    uint64_t x = load64(s);
    uint64_t y = load64(s + len - 16) ^ K1;
    uint64_t z = load64(s + len - 56) ^ K0;
    pair64 v = weak_hash32(s + len - 64, len, y);
    pair64 w = weak_hash32(s + len - 32, len * K1, K0);
    z += shift_mix(v.second) * K1;
    x = rotr(z + x, 39) * K1;
    y = rotr(y, 33) * K1;

    len = (len - 1) & ~(size_t)63;
    do {
        x = rotr(x + y + v.first + load64(s + 16), 37) * K1;
        y = rotr(y + v.second + load64(s + 48), 42) * K1;
        x ^= w.second;
        y ^= v.first;
        z = rotr(z ^ w.first, 33);
        v = weak_hash32(s, v.second * K1, x + w.first);
        w = weak_hash32(s + 32, z + w.second, y);
        uint64_t t = z;
        z = x;
        x = t;
        s += 64;
        len -= 64;
    } while (len != 0);
    return hash_len16(hash_len16(v.first, w.first) + shift_mix(y) * K1 + z,
                      hash_len16(v.second, w.second) + x);
}

/* CityMurmur: the 128-bit hash for inputs shorter than 128 bytes. */
static ferry_city128 city_murmur(const unsigned char *s, size_t len, ferry_city128 seed)
{
    uint64_t a = seed.lo, b = seed.hi, c, d;
    if (len <= 16) {
        a = shift_mix(a * K1) * K1;
        c = b * K1 + hash_len0to16(s, len);
        d = shift_mix(a + (len >= 8 ? load64(s) : c));
    } else {
        c = hash_len16(load64(s + len - 8) + K1, a);
        d = hash_len16(b + len, c + load64(s + len - 16));
        a += d;
        size_t left = len - 16; /* the original counts a signed len - 16 down while > 0 */
        for (;;) {
            a ^= shift_mix(load64(s) * K1) * K1;
            a *= K1;
            b ^= a;
            c ^= shift_mix(load64(s + 8) * K1) * K1;
            c *= K1;
            d ^= c;
            s += 16;
            if (left <= 16)
                break;
            left -= 16;
        }
    }
    a = hash_len16(a, c);
    b = hash_len16(d, b);
    return (ferry_city128){a ^ b, hash_len16(b, a)};
}

/* One 64-byte round of the long-input loop. */
static void long_round(const unsigned char *s, uint64_t *x, uint64_t *y, uint64_t *z, pair64 *v,
                       pair64 *w)
{
    *x = rotr(*x + *y + v->first + load64(s + 16), 37) * K1;
    *y = rotr(*y + v->second + load64(s + 48), 42) * K1;
    *x ^= w->second;
    *y ^= v->first;
    *z = rotr(*z ^ w->first, 33);
    *v = weak_hash32(s, v->second * K1, *x + w->first);
    *w = weak_hash32(s + 32, *z + w->second, *y);
    uint64_t t = *z;
    *z = *x;
    *x = t;
}

ferry_city128 ferry_cityhash102_128_seed(const void *data, size_t len, ferry_city128 seed)
{
    const unsigned char *s = data;
    if (len < 128)
        return city_murmur(s, len, seed);

    pair64 v, w;
    uint64_t x = seed.lo, y = seed.hi, z = len * K1;
    v.first = rotr(y ^ K1, 49) * K1 + load64(s);
    v.second = rotr(v.first, 42) * K1 + load64(s + 8);
    w.first = rotr(y + z, 35) * K1 + x;
    w.second = rotr(x + load64(s + 88), 53) * K1;

    do {
        long_round(s, &x, &y, &z, &v, &w);
        long_round(s + 64, &x, &y, &z, &v, &w);
        s += 128;
        len -= 128;
    } while (len >= 128);

    y += rotr(w.first, 37) * K0 + z;
    x += rotr(v.first + z, 49) * K0;
    /* Up to four 32-byte chunks from the end; they may reach back into bytes already hashed,
     * which is fine because at least 128 bytes precede s. */
    for (size_t tail_done = 0; tail_done < len;) {
        tail_done += 32;
        y = rotr(y - x, 42) * K0 + v.second;
        w.first += load64(s + len - tail_done + 16);
        x = rotr(x, 49) * K0 + w.first;
        w.first += v.first;
        v = weak_hash32(s + len - tail_done, v.first, v.second);
    }
    x = hash_len16(x, v.first);
    y = hash_len16(y, w.first);
    return (ferry_city128){hash_len16(x + v.second, w.second) + y,
                           hash_len16(x + w.second, y + v.second)};
}

ferry_city128 ferry_cityhash102_128(const void *data, size_t len)
{
    const unsigned char *s = data;
    if (len >= 16)
        return ferry_cityhash102_128_seed(s + 16, len - 16,
                                          (ferry_city128){load64(s) ^ K3, load64(s + 8)});
    if (len >= 8)
        return ferry_cityhash102_128_seed(NULL, 0,
                                          (ferry_city128){load64(s) ^ (len * K0),
                                                          load64(s + len - 8) ^ K1});
    return ferry_cityhash102_128_seed(s, len, (ferry_city128){K0, K1});
}
