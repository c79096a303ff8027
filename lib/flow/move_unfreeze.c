/* Removing a move's snapshot (freeze) on the source in the background (docs/moves.md, "The state
 * machine"). The CLONE snapshot is not needed once its parts are staged on the target, and its
 * removal (the agent's remove-freeze: UNFREEZE for the object disk, a rename into the trash)
 * costs about what the snapshot held in parts; run in a thread with its own agent client, it
 * overlaps VERIFY and SWITCH, which do not touch the source's freezes.
 *
 * The freeze invariant of move_journal.c holds: the name leaves x->st only when the thread
 * reports success, at the join, and reaches the catalog with the move's next write; a crash
 * while the thread runs leaves the name journaled, so CLEANUP or a rollback removes it again.
 * One removal at a time per run; mv_remove_freezes skips the name being removed, and the run
 * joins before CLEANUP's and a rollback's removals and before it closes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/agent.h"
#include "ferry/agent_ops.h"
#include "ferry/log.h"
#include "flow/move_env.h"
#include "flow/move_run.h"

struct mv_unfreeze {
    pthread_t th;
    char name[160];
    char url[FERRY_URL_MAX];
    const char *token; /* x->src.token: the run joins before it closes its connections */
    int rc;
    ferry_err err;
};

static void *unfreeze_main(void *arg)
{
    mv_unfreeze *u = arg;
    ferry_agent_client *cl = NULL;
    u->rc = ferry_agent_client_new(u->url, u->token, 600000, &cl, &u->err);
    if (!u->rc)
        u->rc = ferry_agent_remove_freeze(cl, u->name, &u->err);
    ferry_agent_client_free(cl);
    return NULL;
}

int mv_unfreeze_start(mvctx *x, const char *name, ferry_err *err)
{
    mv_unfreeze_join(x);
    mv_unfreeze *u = calloc(1, sizeof *u);
    if (!u || strlen(name) >= sizeof u->name)
        goto sync;
    memcpy(u->name, name, strlen(name) + 1);
    snprintf(u->url, sizeof u->url, "%s", x->src.agent_url);
    u->token = x->src.token;
    if (pthread_create(&u->th, NULL, unfreeze_main, u))
        goto sync;
    x->unfreeze = u;
    return FERRY_OK;
sync: /* no thread: the removal the caller would have made without one */
    free(u);
    return mv_remove_freeze_named(x, name, err);
}

void mv_unfreeze_join(mvctx *x)
{
    mv_unfreeze *u = x->unfreeze;
    if (!u)
        return;
    pthread_join(u->th, NULL);
    x->unfreeze = NULL;
    x->src.n_agent++;
    if (!u->rc)
        mv_freeze_forget(x, u->name); /* journaled with the next write */
    else
        ferry_log(FERRY_LOG_INFO, "msg=\"freeze not removed in the background; kept in the "
                  "journal, removed later\" move=%s freeze=%s error=\"%s\"", x->mv.u.move.id,
                  u->name, u->err.msg);
    free(u);
}

bool mv_unfreeze_busy(const mvctx *x, const char *name)
{
    return x->unfreeze && !strcmp(x->unfreeze->name, name);
}
