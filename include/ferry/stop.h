/* A process-wide request to stop: a long-running process (`ferry coordinator`) sets it on
 * SIGTERM, and the journaled flows (moves, tiering) look at it at their safe points (between
 * journaled steps) and return there, so the process stops promptly and the next run resumes
 * them from the journal. Nothing else changes when it is never set. */
#ifndef FERRY_STOP_H
#define FERRY_STOP_H

#include <stdbool.h>

/* Asks every flow of the process to stop at its next safe point (async-signal-safe). */
void ferry_stop_request(void);
bool ferry_stop_requested(void);
/* Sleeps ms milliseconds, or less when a stop is requested meanwhile; true when it was. */
bool ferry_stop_sleep_ms(unsigned ms);

#endif
