/* ferry's one door to libcurl (include/ferry/curl_easy.h): the process's single, thread-safe
 * curl_global_init and the easy handles with ferry's common options. Returned handles belong to
 * the caller (curl_easy_cleanup); error buffers stay the caller's. The only file of lib/ and src/
 * that may call curl_global_init or curl_easy_init (scripts/layers.py checks). */
#include "ferry/curl_easy.h"

#include <pthread.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int ferry_curl_global_init(ferry_err *err)
{
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return ferry_err_set(err, FERRY_EINTERNAL, "libcurl failed to initialise: %s",
                             curl_easy_strerror(global_rc));
    return FERRY_OK;
}

void ferry_curl_common(CURL *h, long connect_timeout_ms, char *errbuf)
{
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (connect_timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    if (errbuf) {
        errbuf[0] = '\0';
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    }
}

int ferry_curl_new(long connect_timeout_ms, char *errbuf, CURL **out, ferry_err *err)
{
    *out = NULL;
    int rc = ferry_curl_global_init(err);
    if (rc)
        return rc;
    CURL *h = curl_easy_init();
    if (!h)
        return ferry_err_set(err, FERRY_ENOMEM, "out of memory (a libcurl handle)");
    ferry_curl_common(h, connect_timeout_ms, errbuf);
    *out = h;
    return FERRY_OK;
}
