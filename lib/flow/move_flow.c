/* The move's states as a flow kind (include/ferry/flow_journal.h): what the flow engine checks
 * each journaled transition of a move record (moves/ID, FERRY_REC_MOVE) against. The numbers
 * are enum ferry_move_state's, since that is what the record stores and routers read; the
 * catalog keeps only which states are finished (ferry_move_finished), for its index of
 * unfinished moves, and the unit tests check that it agrees with the terminals here. */
#include "ferry/move.h"

#define TO(s) FERRY_FLOW_TO(FERRY_MOVE_##s)
#define FAIL TO(FAILED)
/* FAILED (the target side rolled back, or a planned move given up) only before the routing
 * switch: the switch is the commit point, after it a move only rolls forward (docs/moves.md).
 * The catalog's check that this replaces allowed FAILED from every unfinished state; nothing
 * wrote it after VERIFY. */
static const ferry_flow_state move_states[FERRY_MOVE_STATES] = {
    [FERRY_MOVE_PLANNED] = {"PLANNED", TO(CLONE) | FAIL, false},
    [FERRY_MOVE_CLONE] = {"CLONE", TO(VERIFY) | FAIL, false},
    [FERRY_MOVE_VERIFY] = {"VERIFY", TO(SWITCH) | FAIL, false},
    [FERRY_MOVE_SWITCH] = {"SWITCH", TO(CLEANUP), false},
    [FERRY_MOVE_CLEANUP] = {"CLEANUP", TO(DONE), false},
    [FERRY_MOVE_DONE] = {"DONE", 0, true},     /* a move id is never run again */
    [FERRY_MOVE_FAILED] = {"FAILED", 0, true}, /* rolled back */
};
#undef FAIL
#undef TO

/* Crash points (test-only, include/ferry/testknob.h), the engine's convention as for every flow:
 * FERRY_TEST_CRASH_BEFORE=<state> kills the mover before the transition to <state> is
 * committed, after the work of the state it leaves (CRASH_BEFORE=VERIFY: CLONE's copy made,
 * the journal still in CLONE). No crash_after: under FERRY_TEST_CRASH_AFTER a move names only
 * the points inside a state, which move.c calls itself (CLONE:sent, SWITCH:switched,
 * SWITCH:caught-up, SWITCH:published-one, CLEANUP:detached). Those knob values once named the
 * state a move leaves (CRASH_AFTER=CLONE), so with crash_after set a test still using an old
 * name would be killed at another point and pass; unset, it is never killed and fails. The
 * point after a transition adds nothing a test needs: after the switch is SWITCH:switched, and
 * after any other the journal is the one the point before the next transition leaves. */
const ferry_flow_kind ferry_move_flow = {
    .kind = "move",
    .states = move_states,
    .n_states = FERRY_MOVE_STATES,
    .start = FERRY_MOVE_PLANNED,
    .failed = FERRY_MOVE_FAILED,
    .crash_before = "FERRY_TEST_CRASH_BEFORE",
    .record = FERRY_REC_MOVE,
};
