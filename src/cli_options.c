/* The command layer's shared option loop and report printing (src/cli.h): the options many
 * commands share, the words for an unknown option, a leftover argument or a bad number or
 * size, and a report as JSON or text. */
#include "cli.h"

#include <stdlib.h>

#include "ferry/strutil.h"

int cli_next_option(const char *cmd, int argc, char **argv, const struct option *opts,
                    cli_common *c, int *status)
{
    opterr = 0;
    *status = 0;
    for (;;) {
        int ch = getopt_long(argc, argv, "", opts, NULL);
        switch (ch) {
        case CLI_O_JSON: c->json = true; break;
        case CLI_O_CONFIG: c->config = optarg; break;
        case CLI_O_CATALOG: c->catalog = optarg; break;
        case CLI_O_DRY_RUN: c->dry_run = true; break;
        case -1:
            if (optind != argc && !c->positional)
                *status = cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
            return 0;
        case '?':
        case ':':
            *status = cli_usage_error(cmd, "unknown option or missing value: %s",
                                      argv[optind - 1]);
            return 0;
        default: return ch;
        }
    }
}

int cli_opt_u64(const char *cmd, const char *name, const char *arg, uint64_t lo, uint64_t hi,
                const char *what, uint64_t *out)
{
    uint64_t v;
    if (!ferry_parse_u64(arg, &v) || v < lo || v > hi)
        return cli_usage_error(cmd, "--%s '%s' is not %s", name, arg, what);
    *out = v;
    return 0;
}

int cli_opt_size(const char *cmd, const char *name, const char *arg, uint64_t *out)
{
    uint64_t v;
    if (!ferry_parse_bytes(arg, &v) || v == 0)
        return cli_usage_error(cmd, "--%s '%s' is not a size", name, arg);
    *out = v;
    return 0;
}

void cli_print_report(json_t *report, bool json, void (*text)(json_t *report))
{
    if (!json) {
        text(report);
        return;
    }
    char *s = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (s)
        puts(s);
    free(s);
}
