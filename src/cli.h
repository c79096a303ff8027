/* The command layer's shared pieces: the command table's row type, error printing, and the
 * options every command understands. Commands are thin: they parse options, call the library,
 * and print. */
#ifndef FERRY_CLI_H
#define FERRY_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ferry/err.h"

enum cli_needs { NEEDS_NOTHING = 0, NEEDS_CONFIG = 1, NEEDS_LIBCHDB = 2 };

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command name; returns exit status */
    const char *summary;
    int needs;
    const char *usage; /* full help text, printed by `ferry help NAME` */
} cli_command;

#define FERRY_COMMAND(name, fn, summary, needs)                                                \
    int fn(int argc, char **argv);                                                               \
    extern const char fn##_usage[];
#include "commands.def"
#undef FERRY_COMMAND

/* Prints "ferry CMD: MESSAGE" to stderr and returns the exit status for err's code. */
int cli_fail(const char *cmd, const ferry_err *err);
/* Prints a usage error ("ferry CMD: MESSAGE; see 'ferry help CMD'") and returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The config path: the --config value if given, else $FERRY_CONFIG, else NULL. */
const char *cli_config_path(const char *opt);

/* The options many commands share (--json, --config FILE, --catalog URL, --dry-run): put the
 * ones a command takes in its option table, and its own options' values above CLI_O_LAST. */
enum { CLI_O_JSON = 200, CLI_O_CONFIG, CLI_O_CATALOG, CLI_O_DRY_RUN, CLI_O_LAST };
#define CLI_OPT_JSON {"json", no_argument, NULL, CLI_O_JSON}
#define CLI_OPT_CONFIG {"config", required_argument, NULL, CLI_O_CONFIG}
#define CLI_OPT_CATALOG {"catalog", required_argument, NULL, CLI_O_CATALOG}
#define CLI_OPT_DRY_RUN {"dry-run", no_argument, NULL, CLI_O_DRY_RUN}
typedef struct cli_common {
    bool json, dry_run;
    const char *config;  /* the --config value, or NULL */
    const char *catalog; /* the --catalog value, or NULL */
    bool positional;     /* set by the caller: the command takes arguments after its options
                          * (left at argv[optind...]), so they are not "unexpected" */
} cli_common;

/* getopt_long over argv (set optind = 1 before the first call): returns the command's next own
 * option (optarg set), taking the shared ones into c on the way, and 0 at the end. At the end
 * *status is 0, or 2 with a usage error printed for an unknown option, a missing value or
 * (unless c->positional) an argument left over. */
int cli_next_option(const char *cmd, int argc, char **argv, const struct option *opts,
                    cli_common *c, int *status);

/* An option's value (--NAME ARG) as a whole number in lo..hi (ferry_parse_u64) into *out:
 * returns 0, or prints the usage error "--NAME 'ARG' is not WHAT" and returns its status 2. */
int cli_opt_u64(const char *cmd, const char *name, const char *arg, uint64_t lo, uint64_t hi,
                const char *what, uint64_t *out);
/* The same for a size above 0 with an optional suffix such as 64M (ferry_parse_bytes): "is not
 * a size". */
int cli_opt_size(const char *cmd, const char *name, const char *arg, uint64_t *out);

/* Prints a flow's report: indented JSON with sorted keys when json, else through text. */
void cli_print_report(json_t *report, bool json, void (*text)(json_t *report));

#endif
