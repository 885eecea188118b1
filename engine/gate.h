/*
 * gate.h - a waiter on the recovery gate: the one gate type a caller
 * embeds (on its stack), so fs/ can wait without including the auditor.
 *
 * For: cancelling a star_gate_wait() (engine/star.h) from another thread,
 * e.g. a FUSE interrupt.  Not for: the gate itself, which the auditor
 * owns and opens (engine/auditor.h, "State of the gate"), or waiting on
 * stream data (engine/wake.h).
 *
 * Invariants:
 *  1. `cancelled` is written and read only under the auditor's lock
 *     (auditor_gate_cancel(), auditor_gate_wait()); the caller only
 *     zero-initialises it.
 *  2. A waiter outlives every wait and cancel that names it.
 */
#ifndef NOVAFS_ENGINE_GATE_H
#define NOVAFS_ENGINE_GATE_H

#include <stdbool.h>

struct gate_waiter {
	bool cancelled; /* protected by the auditor's lock; starts false */
};

#endif
