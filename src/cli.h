/* The command layer's shared pieces: the command table's row type, error printing, and the
 * options every command understands. Commands are thin: they parse options, call the library,
 * and print. */
#ifndef FERRY_CLI_H
#define FERRY_CLI_H

#include <stdbool.h>
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

#endif
