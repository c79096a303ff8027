/* ferry's entry point: dispatches `ferry <command> [args]` through the command table. */
#include "cli.h"
#include "ferry/testknob.h"
#include "ferry/log.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_command commands[] = {
#define FERRY_COMMAND(name, fn, summary, needs) {#name, fn, summary, needs, fn##_usage},
#include "commands.def"
#undef FERRY_COMMAND
};
static const size_t n_commands = sizeof commands / sizeof commands[0];

/* Command names in the table use '_' where the user types '-' (C identifiers cannot hold a
 * dash): route_query is `ferry route-query`. */
static bool command_name_eq(const char *table_name, const char *typed)
{
    for (; *table_name && *typed; table_name++, typed++)
        if (*table_name != *typed && !(*table_name == '_' && *typed == '-'))
            return false;
    return *table_name == *typed;
}

static const cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < n_commands; i++)
        if (command_name_eq(commands[i].name, name))
            return &commands[i];
    return NULL;
}

static void print_overview(FILE *fp)
{
    fprintf(fp, "usage: ferry <command> [options]\n\n"
                "ferry places tenant slices on ClickHouse shards, tiers cold partitions to object\n"
                "storage as pointer parts, and moves slices between servers.\n\ncommands:\n");
    for (size_t i = 0; i < n_commands; i++) {
        char shown[32];
        snprintf(shown, sizeof shown, "%s", commands[i].name);
        for (char *c = shown; *c; c++)
            if (*c == '_')
                *c = '-';
        fprintf(fp, "  %-12s %s\n", shown, commands[i].summary);
    }
    fprintf(fp, "\n'ferry help <command>' shows a command's options.\n\n"
                "global options (before the command):\n"
                "  --log-format text|logfmt|json   log lines for a person (the default on a\n"
                "                                  terminal), logfmt (elsewhere), or JSON\n"
                "  --log-level L[,COMPONENT=L...]  debug|info|warn|error, per component too\n"
                "                                  (e.g. info,clickhouse=debug,agent=warn)\n"
                "  (or FERRY_LOG_FORMAT and FERRY_LOG_LEVEL in the environment)\n");
}

int cli_fail(const char *cmd, const ferry_err *err)
{
    fprintf(stderr, "ferry %s: %s\n", cmd, err->msg[0] ? err->msg : ferry_code_name(err->code));
    return ferry_exit_status(err->code ? err->code : FERRY_EINTERNAL);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ferry %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see 'ferry help %s'\n", cmd);
    va_end(ap);
    return 2;
}

const char *cli_config_path(const char *opt)
{
    if (opt && *opt)
        return opt;
    const char *env = getenv("FERRY_CONFIG");
    return env && *env ? env : NULL;
}

const char cmd_version_usage[] = "usage: ferry version\n\nPrints ferry's version.\n";

int cmd_version(int argc, char **argv)
{
    (void)argv;
    if (argc > 1)
        return cli_usage_error("version", "takes no arguments");
    printf("ferry %s\n", FERRY_VERSION);
    return 0;
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stdout);
        return 0;
    }
    const cli_command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "ferry help: unknown command '%s'; 'ferry help' lists them\n", argv[1]);
        return 2;
    }
    fputs(c->usage, stdout);
    return 0;
}

int main(int argc, char **argv)
{
    /* a peer that closed its socket (a router, an agent, ZooKeeper killed mid-request) must give
     * the writer EPIPE, not kill the process without a word: the ZooKeeper soak lost a
     * coordinator that way (router and agent already ignored it; now every command does) */
    signal(SIGPIPE, SIG_IGN);
    ferry_log_init_from_env();
    ferry_test_knobs_from_env(); /* test-only knobs (include/ferry/testknob.h) */
    /* global options before the command: --log-format text|logfmt|json,
     * --log-level LEVEL[,COMPONENT=LEVEL...] (they override FERRY_LOG_FORMAT / FERRY_LOG_LEVEL) */
    while (argc >= 3 && (!strcmp(argv[1], "--log-format") || !strcmp(argv[1], "--log-level"))) {
        char why[256];
        bool fmt = !strcmp(argv[1], "--log-format");
        if (ferry_log_configure(fmt ? NULL : argv[2], fmt ? argv[2] : NULL, why, sizeof why)) {
            fprintf(stderr, "ferry: %s\n", why);
            return 2;
        }
        argc -= 2;
        argv += 2;
    }
    if (argc < 2) {
        print_overview(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h"))
        return cmd_help(argc - 1, argv + 1);
    if (!strcmp(name, "--version"))
        name = "version";
    const cli_command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "ferry: unknown command '%s'; 'ferry help' lists them\n", name);
        return 2;
    }
    /* `ferry CMD --help` is the same as `ferry help CMD`. */
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(c->usage, stdout);
            return 0;
        }
    return c->run(argc - 1, argv + 1);
}
