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

/* No crash knobs: a move's crash points are named by the state they leave and fire after its
 * work (FERRY_TEST_CRASH_AFTER=CLONE), so move.c calls them itself (mv_crash_point) until they
 * are renamed to the engine's convention (docs/architecture.md, "Not built yet"). */
const ferry_flow_kind ferry_move_flow = {
    .kind = "move",
    .states = move_states,
    .n_states = FERRY_MOVE_STATES,
    .start = FERRY_MOVE_PLANNED,
    .failed = FERRY_MOVE_FAILED,
    .record = FERRY_REC_MOVE,
};
