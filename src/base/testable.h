/*
 * testable.h - the seam through which a unit test reaches a module's
 * internal functions.
 *
 * For: marking a function that is `static` in the daemon but that a
 * cmocka program in tests/unit/ calls directly.  A unit test compiles the
 * module's .c file into its own program with -DNOVA_TESTING (Makefile.am,
 * UNIT_CPPFLAGS); there NOVA_TESTABLE expands to nothing, so the function
 * has external linkage and the test declares it itself (or includes the
 * module's `*_testing` block of its header).  In every other build it is
 * `static`, so the daemon's symbol table and the optimiser see no change.
 *
 * Not for: functions other modules call (those are in the header with the
 * module prefix), or `#include "x.c"` (never done here).
 */
#ifndef NOVAFS_BASE_TESTABLE_H
#define NOVAFS_BASE_TESTABLE_H

#ifdef NOVA_TESTING
#define NOVA_TESTABLE
#else
#define NOVA_TESTABLE static
#endif

#endif
