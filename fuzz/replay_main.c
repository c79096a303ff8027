/* A stand-in for libFuzzer's driver, so every fuzz target also runs in `make test` without
 * clang (tests/CMakeLists.txt builds fuzz/fuzz_*.c with this main against the sanitizer build's
 * library): replays each file of the corpus folders and files given, every prefix of each at
 * 1/32 steps, and copies with a few bytes flipped at positions derived from the file, so a
 * regression on a known input or a near one fails the test. No randomness: a failure repeats.
 * `make fuzz-smoke` runs the real fuzzer for a while on each target (clang). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t runs;

static void one(const uint8_t *data, size_t size)
{
    /* an exact-size copy: a read past the input is caught by the sanitizer */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    LLVMFuzzerTestOneInput(copy, size);
    free(copy);
    runs++;
}

static void input(const uint8_t *data, size_t size)
{
    one(data, size);
    size_t step = size / 32 ? size / 32 : 1;
    for (size_t n = 0; n < size; n += step)
        one(data, n);
    uint8_t *m = malloc(size ? size : 1);
    if (!m)
        abort();
    static const uint8_t flips[] = {0x01, 0x80, 0xff, '\n', '\'', '"', '\\', 0};
    for (size_t k = 0; size && k < 16; k++) {
        memcpy(m, data, size);
        size_t at = (k * 2654435761u + size) % size;
        m[at] = k < sizeof flips ? flips[k] : (uint8_t)(m[at] ^ (1u << (k % 8)));
        one(m, size);
    }
    free(m);
}

static int file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;
    uint8_t chunk[65536];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n > cap) {
            cap = (len + n) * 2;
            uint8_t *p = realloc(buf, cap);
            if (!p)
                abort();
            buf = p;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    input(buf ? buf : (const uint8_t *)"", len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0;
    size_t files = 0;
    static const char *const seeds[] = {"", "\n", "\x01", "\xff\xff\xff\xff"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        input((const uint8_t *)seeds[i], strlen(seeds[i]));
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "no corpus at %s\n", argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= file(argv[i]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            bad |= file(path);
            files++;
        }
        if (d)
            closedir(d);
    }
    printf("%zu corpus file(s), %zu run(s)\n", files, runs);
    return bad;
}
