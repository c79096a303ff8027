/* Private to `ferry demo` (src/cmd_demo.c, src/demo_placement.c). */
#ifndef FERRY_CLI_DEMO_PLACEMENT_H
#define FERRY_CLI_DEMO_PLACEMENT_H

/* `ferry demo --placement-only [--hash H] [--json]`: the in-memory placement experiment.
 * argv[0] is the command name; the remaining options are parsed here. Returns the exit
 * status. */
int demo_placement_run(int argc, char **argv);

#endif
