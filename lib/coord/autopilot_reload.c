/* Reloading the coordinator's config on SIGHUP (include/ferry/autopilot.h,
 * ferry_autopilot_reload): the file is read and checked as at the start ([cluster], [autopilot],
 * [coordinator]); only a file that passes every check becomes the autopilot's new generation
 * (autopilot_int.h), so a bad file changes nothing. */
#include "autopilot_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/catalog.h"
#include "ferry/log.h"
#include "ferry/strutil.h"

int ferry_autopilot_reload(ferry_autopilot *handle, const char *path, ferry_ap_window *window,
                           ferry_err *err)
{
    struct ap_shared *sh = handle->sh;
    ferry_autopilot *cur = ap_current(sh);
    ferry_config *cfg = calloc(1, sizeof *cfg);
    ferry_autopilot *ap = calloc(1, sizeof *ap);
    ferry_cluster_config cc = {0};
    bool have_cc = false;
    int rc = FERRY_OK;
    if (!cfg || !ap) {
        rc = ferry_err_set(err, FERRY_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = ferry_config_load(path, cfg, err)))
        goto out;
    if ((rc = ferry_cluster_config_read(cfg, &cc, err)))
        goto out;
    have_cc = true;
    if (strcmp(cc.catalog, cur->catalog_url)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [cluster] catalog changed (%s, running on "
                           "%s): a coordinator's catalog cannot change while it runs; restart it",
                           path, cc.catalog, cur->catalog_url);
        goto out;
    }
    if ((rc = ferry_autopilot_config_read(cfg, &ap->ac, err)))
        goto out;
    static const char *const ckeys[] = {"history_interval", "history_file", NULL};
    if ((rc = ferry_config_check_keys(cfg, "coordinator", ckeys, err)))
        goto out;
    const char *hi = ferry_config_get(cfg, "coordinator", NULL, "history_interval");
    uint64_t hs = 0;
    if (hi && (!ferry_parse_duration(hi, &hs) || hs == 0 || hs > 86400)) {
        rc = ferry_err_set(err, FERRY_EINVAL, "%s: [coordinator] history_interval = '%s': "
                           "expected a duration from 1s to 24h, such as 5m", path, hi);
        goto out;
    }
    /* every check passed: the new generation */
    ap->own_cfg = cfg;
    ap->cfg = cfg;
    snprintf(ap->config_path, sizeof ap->config_path, "%s", path);
    snprintf(ap->catalog_url, sizeof ap->catalog_url, "%s", cur->catalog_url);
    snprintf(ap->owner, sizeof ap->owner, "%s", cur->owner);
    ap->sh = sh;
    pthread_mutex_lock(&sh->mu);
    ap->older = sh->cur;
    sh->cur = ap;
    pthread_mutex_unlock(&sh->mu);
    if (window)
        *window = ap->ac.window;
    char win[32];
    ferry_ap_window_fmt(&ap->ac.window, win, sizeof win);
    FLOG_INFO("msg=\"config reloaded\" path=\"%s\" window=%s%s%s", path, win,
              ap->ac.notes[0] ? " older_keys=\"" : "", ap->ac.notes[0] ? ap->ac.notes : "");
    if (ap->ac.notes[0])
        FLOG_INFO("msg=\"older config keys in use\" keys=\"%s\"", ap->ac.notes);
    ap_log_schedule(ap);
    cfg = NULL;
    ap = NULL;
out:
    if (have_cc)
        ferry_cluster_config_free(&cc);
    if (cfg) {
        ferry_config_free(cfg);
        free(cfg);
    }
    free(ap);
    return rc;
}
