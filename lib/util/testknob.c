/* Test-only knobs and crash points (include/ferry/testknob.h). */
#include "ferry/testknob.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/log.h"
#include "ferry/strutil.h"

static const char *const knob_names[] = {
    "FERRY_TEST_CRASH_AFTER",         "FERRY_TEST_CRASH_BEFORE",
    "FERRY_TEST_REWRITE_CRASH_AFTER", "FERRY_TEST_REWRITE_CRASH_BEFORE",
    "FERRY_TEST_NOW",                 "FERRY_AGENT_TEST_CORRUPT_SEND",
    "FERRY_AGENT_TEST_SLOW_RECEIVE_MS", "FERRY_AGENT_TEST_SLOW_UPLOAD_MS",
    "FERRY_TEST_AGENT_TIMEOUT_MS",    "FERRY_TEST_STOP_AFTER",
    "FERRY_AGENT_TEST_LIVE_GONE",
};
#define N_KNOBS (sizeof knob_names / sizeof knob_names[0])

static char *knob_values[N_KNOBS]; /* owned; NULL: not installed */
static pthread_mutex_t knob_mu = PTHREAD_MUTEX_INITIALIZER;

static int knob_index(const char *name)
{
    for (size_t i = 0; i < N_KNOBS; i++)
        if (!strcmp(knob_names[i], name))
            return (int)i;
    return -1;
}

void ferry_test_knob_set(const char *name, const char *value)
{
    int i = knob_index(name);
    if (i < 0)
        return;
    char *v = value && *value ? strdup(value) : NULL;
    pthread_mutex_lock(&knob_mu);
    free(knob_values[i]);
    knob_values[i] = v;
    pthread_mutex_unlock(&knob_mu);
}

void ferry_test_knobs_from_env(void)
{
    for (size_t i = 0; i < N_KNOBS; i++)
        ferry_test_knob_set(knob_names[i], getenv(knob_names[i]));
}

/* Values are set at start (or by a unit test before it runs the code under test) and not freed
 * while the process runs, so the pointer stays valid for the caller. */
const char *ferry_test_knob(const char *name)
{
    int i = knob_index(name);
    if (i < 0)
        return NULL;
    pthread_mutex_lock(&knob_mu);
    const char *v = knob_values[i];
    pthread_mutex_unlock(&knob_mu);
    return v;
}

void ferry_test_pause(const char *name)
{
    const char *e = ferry_test_knob(name);
    uint64_t ms = 0;
    if (e && *e && ferry_parse_u64(e, &ms) && ms > 0 && ms < 60000)
        usleep((useconds_t)(ms * 1000));
}

void ferry_fault_point(const char *name, const char *point)
{
    /* FERRY_TEST_STOP_AFTER names a FERRY_TEST_CRASH_AFTER point where the process stops
     * itself (SIGSTOP) instead: a test changes the servers under it, then continues it */
    static atomic_bool stopped_once; /* the first time only: a point inside a loop stops once */
    const char *stop = strcmp(name, "FERRY_TEST_CRASH_AFTER") ? NULL
                                                              : ferry_test_knob("FERRY_TEST_STOP_AFTER");
    if (stop && !strcmp(stop, point) && !atomic_exchange(&stopped_once, true)) {
        ferry_log(FERRY_LOG_WARN, "msg=\"test stop point reached, stopping myself\" "
                  "FERRY_TEST_STOP_AFTER=%s", point);
        fflush(NULL);
        raise(SIGSTOP);
    }
    const char *v = ferry_test_knob(name);
    if (!v || strcmp(v, point))
        return;
    ferry_log(FERRY_LOG_WARN, "msg=\"test crash point reached, killing myself\" %s=%s", name,
              point);
    fflush(NULL);
    raise(SIGKILL);
}
