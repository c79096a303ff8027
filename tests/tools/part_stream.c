/* Test tool: writes a ferry part stream (docs/agent.md, "The part stream") of the given files to
 * stdout, each with its true xxh3-64, so tests can send an agent's receive what a real sender
 * would, with file names and sizes of their choosing.
 *   part_stream NAME=FILE...      (FILE is read whole; NAME is the name sent) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int main(int argc, char **argv)
{
    fputs("ferry-part 1\n", stdout);
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "part_stream: '%s' is not NAME=FILE\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        FILE *f = fopen(eq + 1, "rb");
        if (!f) {
            perror(eq + 1);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        rewind(f);
        char *data = malloc(size > 0 ? (size_t)size : 1);
        if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
            fprintf(stderr, "part_stream: cannot read %s\n", eq + 1);
            return 1;
        }
        fclose(f);
        printf("F %ld %s\n", size, argv[i]);
        fwrite(data, 1, (size_t)size, stdout);
        printf("H %016" PRIx64 "\n", (uint64_t)XXH3_64bits(data, (size_t)size));
        free(data);
    }
    printf("E %d\n", argc - 1);
    return fflush(stdout) == 0 ? 0 : 1;
}
