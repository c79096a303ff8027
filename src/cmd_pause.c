/* `ferry pause` / `ferry resume`: the cluster-wide pause in the catalog (include/ferry/pause.h),
 * which every coordinator's autopilot and the commands that move data obey. */
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_catalog.h"
#include "ferry/pause.h"

const char cmd_pause_usage[] =
    "usage: ferry pause [--reason TEXT] [--config FILE | --catalog URL]\n"
    "\n"
    "Pauses the cluster: records the pause in the catalog. Every coordinator's autopilot then\n"
    "skips its actions and starts no further move (within one interval; moves in flight\n"
    "finish), and `ferry rebalance`, `ferry move` and `ferry tier` refuse to start unless given\n"
    "--force. `ferry status` shows who paused, when and why. Pausing again replaces the reason.\n"
    "\n"
    "  --reason TEXT   why (shown by ferry status and in the refusals)\n";

const char cmd_resume_usage[] =
    "usage: ferry resume [--config FILE | --catalog URL]\n"
    "\n"
    "Ends a pause (ferry pause): the autopilot's next runs and the commands go on.\n";

static int pause_or_resume(const char *cmd, bool pause, int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"catalog", required_argument, NULL, 'C'},
                                         {"reason", required_argument, NULL, 'r'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL, *catalog = NULL, *reason = "";
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'c')
            config = optarg;
        else if (ch == 'C')
            catalog = optarg;
        else if (ch == 'r' && pause)
            reason = optarg;
        else
            return cli_usage_error(cmd, "unknown option or missing value: %s", argv[optind - 1]);
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (strlen(reason) > 200)
        return cli_usage_error(cmd, "--reason is %zu characters long: at most 200",
                               strlen(reason));
    ferry_err err = {0};
    ferry_catalog *cat = NULL;
    int rc = cli_open_catalog(config, catalog, true, &cat, &err);
    if (rc)
        goto out;
    if (pause) {
        char host[64] = "localhost", by[FERRY_NAME_MAX];
        const char *user = getenv("USER");
        struct passwd *pw = user ? NULL : getpwuid(geteuid()); /* services run without $USER */
        if (pw)
            user = pw->pw_name;
        gethostname(host, sizeof host - 1);
        snprintf(by, sizeof by, "%.40s@%.60s:%ld", user ? user : "?", host, (long)getpid());
        if (!(rc = ferry_pause_set(cat, reason, by, &err)))
            printf("paused%s%s: no autopilot action or new move starts until `ferry resume`\n",
                   reason[0] ? ": " : "", reason);
    } else {
        bool was = false;
        if (!(rc = ferry_pause_clear(cat, &was, &err)))
            printf("%s\n", was ? "resumed" : "not paused: nothing to resume");
    }
out:
    ferry_catalog_close(cat);
    return rc ? cli_fail(cmd, &err) : 0;
}

int cmd_pause(int argc, char **argv) { return pause_or_resume("pause", true, argc, argv); }
int cmd_resume(int argc, char **argv) { return pause_or_resume("resume", false, argc, argv); }
