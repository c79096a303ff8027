/* ferry's one door to libcurl: every libcurl easy handle in lib/ and src/ comes from here
 * (scripts/layers.py refuses a curl_easy_init or curl_global_init anywhere else).
 *
 * libcurl's global initialisation is not thread-safe, and curl_easy_init runs it when nobody
 * has; ferry_curl_new runs it once per process under pthread_once, whichever thread asks first.
 * Every handle gets ferry's common options: no signals (ferry is threaded, and a timed-out name
 * lookup would longjmp out of a signal handler), TCP keep-alive probes, the caller's connect
 * timeout and, when given, an error buffer. What a client needs beyond that (callbacks, the
 * whole-transfer timeout, credentials, TLS files) it sets itself.
 *
 * Ownership: the handle ferry_curl_new returns belongs to the caller, who frees it with
 * curl_easy_cleanup. The error buffer stays the caller's too: it must hold CURL_ERROR_SIZE bytes
 * and outlive every transfer on the handle (or be replaced before the next one). */
#ifndef FERRY_CURL_EASY_H
#define FERRY_CURL_EASY_H

#include <curl/curl.h>

#include "ferry/err.h"

/* libcurl's global initialisation, once per process (thread-safe). FERRY_OK, or FERRY_EINTERNAL
 * with libcurl's reason, on this call and every later one, when it failed. ferry_curl_new calls
 * it; call it directly only before using libcurl without an easy handle of ferry_curl_new. */
int ferry_curl_global_init(ferry_err *err);

/* A new easy handle with ferry's common options (ferry_curl_common) in *out (the caller's: free
 * it with curl_easy_cleanup). connect_timeout_ms > 0 bounds the TCP and TLS connect; 0 leaves
 * libcurl's default (300 s, within any whole-transfer timeout the caller sets). errbuf: NULL, or
 * CURL_ERROR_SIZE bytes of the caller that libcurl fills with the reason a transfer failed.
 * Returns FERRY_OK; FERRY_EINTERNAL when libcurl cannot initialise; FERRY_ENOMEM when libcurl
 * has no handle to give (*out is then NULL). */
int ferry_curl_new(long connect_timeout_ms, char *errbuf, CURL **out, ferry_err *err);

/* Sets ferry's common options on h again, as ferry_curl_new does: for a handle reused after
 * curl_easy_reset, which drops every option (the connection cache stays: keep-alive survives).
 * CURLOPT_NOSIGNAL, CURLOPT_TCP_KEEPALIVE, CURLOPT_CONNECTTIMEOUT_MS when connect_timeout_ms > 0,
 * CURLOPT_ERRORBUFFER when errbuf is not NULL (emptied here). */
void ferry_curl_common(CURL *h, long connect_timeout_ms, char *errbuf);

#endif
