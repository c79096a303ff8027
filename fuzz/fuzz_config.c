/* libFuzzer target for the config parser (lib/util/config.c): any bytes as a config file. Parsing
 * must not crash; a parsed config must answer every typed getter (a malformed value is an error,
 * never a crash) and list its subsections; each entry's section and key are lower-case. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    ferry_config c = {0};
    ferry_err err = {0};
    if (ferry_config_parse(text, "fuzz.conf", &c, &err) == FERRY_OK) {
        for (size_t i = 0; i < c.n; i++) {
            const ferry_config_entry *e = &c.entries[i];
            for (const char *p = e->section; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                    abort();
            for (const char *p = e->key; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                    abort();
            uint64_t u;
            double d;
            bool b;
            const char *s;
            (void)ferry_config_u64(&c, e->section, e->subsection, e->key, 0, &u, &err);
            (void)ferry_config_double(&c, e->section, e->subsection, e->key, 0, &d, &err);
            (void)ferry_config_bytes(&c, e->section, e->subsection, e->key, 0, &u, &err);
            (void)ferry_config_bool(&c, e->section, e->subsection, e->key, false, &b, &err);
            (void)ferry_config_require(&c, e->section, e->subsection, e->key, &s, &err);
            if (!ferry_config_find(&c, e->section, e->subsection, e->key))
                abort();
            const char *subs[8];
            (void)ferry_config_subsections(&c, e->section, subs, 8);
        }
        static const char *const allowed[] = {"listen", NULL};
        (void)ferry_config_check_keys(&c, "router", allowed, &err);
    }
    ferry_config_free(&c);
    free(text);
    return 0;
}
