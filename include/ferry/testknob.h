/* Test-only knobs: fault injection and fixed clocks that integration tests turn on, with one
 * crash semantics. Library code never reads the environment for them: it asks for a knob by
 * name (ferry_test_knob) or names a crash point (ferry_fault_point), and nothing happens unless
 * the program installed knobs. `ferry` and `ferry-node` install them from their environment at
 * start (ferry_test_knobs_from_env); a unit test may set one (ferry_test_knob_set).
 *
 * The knobs (where each point is: docs/moves.md, tiering.md "Crash recovery", rewrite.md "Crash
 * recovery", operations.md (retention), object-store.md (staging loads)):
 *   FERRY_TEST_CRASH_AFTER / FERRY_TEST_CRASH_BEFORE   move, tiering, retention and
 *                                                      staging-load points
 *   FERRY_TEST_REWRITE_CRASH_AFTER / _BEFORE           rewrite points
 *   FERRY_TEST_NOW                                     tiering's clock and doctor's
 *                                                      tier_holds clock (unix seconds)
 *   FERRY_AGENT_TEST_CORRUPT_SEND                      a sender flips a byte (name:offset)
 *   FERRY_AGENT_TEST_SLOW_RECEIVE_MS                   a receiver pauses after each file
 *   FERRY_AGENT_TEST_SLOW_UPLOAD_MS                    an uploader pauses after each part
 *   FERRY_AGENT_TEST_LIVE_GONE                         a sender answers its first N live
 *                                                      sends 410, as for a removed part
 *   FERRY_TEST_AGENT_TIMEOUT_MS                        tiering's agent requests time out
 *   FERRY_TEST_STOP_AFTER                              at a FERRY_TEST_CRASH_AFTER point called
 *                                                      directly, SIGSTOP instead of the kill,
 *                                                      the first time the process reaches it
 *                                                      (the test changes the servers, then
 *                                                      sends SIGCONT)
 * The journaled flows (moves, tiering, retention, rewrite) reach theirs through the flow engine,
 * at each journaled transition with the state's name as the point (include/ferry/flow_journal.h;
 * a move declares only the point before: FERRY_TEST_CRASH_BEFORE=<state>); points inside a step
 * (e.g. tiering's SWAP:ran, a move's SWITCH:switched) call ferry_fault_point directly.
 * A crash point stops the process as kill -9 would: stdio flushed (so the test sees the log
 * line saying where), then SIGKILL to itself. */
#ifndef FERRY_TESTKNOB_H
#define FERRY_TESTKNOB_H

/* Installs every known knob set in the environment. The one place that reads them. */
void ferry_test_knobs_from_env(void);
/* Sets (value not NULL) or clears a knob; name must be one of the known knobs. */
void ferry_test_knob_set(const char *name, const char *value);
/* The knob's value, or NULL when not installed. */
const char *ferry_test_knob(const char *name);
/* Sleeps the milliseconds knob `name` holds (1 to 59,999; anything else: no pause), for the
 * knobs that slow a step down so a test can act in the middle of it. */
void ferry_test_pause(const char *name);
/* Kills the process (as kill -9) when knob `name` is installed with the value `point`; stops it
 * (SIGSTOP) when name is FERRY_TEST_CRASH_AFTER and FERRY_TEST_STOP_AFTER names point. */
void ferry_fault_point(const char *name, const char *point);

#endif
