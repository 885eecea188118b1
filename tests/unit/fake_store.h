/*
 * fake_store.h - an in-memory object store for engine unit tests.
 *
 * For: tests of engine/chain.c, engine/absorb.c, engine/recover.c and
 * engine/read.c that need an object store they can steer: it implements
 * struct store_backend_ops (engine/store/store.h) in memory and is
 * wrapped with store_wrap(), so the engine reaches it through the real
 * store.c (key checks, counters, store.put/store.get failpoints).  Not
 * for: testing store.c itself (tests/unit/test_store_dir*.c do that on
 * the directory backend).
 *
 * Test hooks (all thread-safe, callable from the test thread while engine
 * threads are inside the store):
 *   - gates: a put whose key starts with a gated prefix blocks until the
 *     test opens the gate, so slot PUTs can be made to finish out of
 *     order; the test can wait until a given number of puts is parked;
 *   - injected errors: the next N puts (or gets) whose key starts with a
 *     prefix fail with a chosen errno without touching the data;
 *   - corruption: flip one byte of a stored object in place;
 *   - call log: every backend call is recorded (operation, key, offset,
 *     length, result), so tests count exactly the GETs of one object;
 *   - waits: block until a key exists (bounded).
 *
 * Semantics kept from store.h: puts are atomic (the object is replaced
 * whole, under the lock), STORE_CREATE_ONCE refuses an existing key with
 * -EEXIST, ranged gets past the end are -ERANGE, list is in byte order
 * and its callback runs with no lock held, multipart parts may arrive in
 * any order and are concatenated in part-number order at completion.
 *
 * Ownership: fake_store_open() returns a struct store that owns the fake;
 * store_close() frees both.  The struct fake_store pointer is borrowed
 * until then.  Every gate must be open (fake_store_open_all_gates()) before
 * store_close(), or a parked engine thread would never return.
 */
#ifndef NOVAFS_TESTS_FAKE_STORE_H
#define NOVAFS_TESTS_FAKE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/store/store.h"

struct fake_store;

/* Operations, for the call log and error injection.  FAKE_PUT_LATE is an
 * injection only: the put stores the object and then reports the error
 * (a response lost after the write landed). */
enum fake_op {
	FAKE_PUT, FAKE_GET, FAKE_HEAD, FAKE_DEL, FAKE_LIST, FAKE_MPU, FAKE_PUT_LATE,
	FAKE_OP_COUNT
};

/* New empty store: 0, *fs (borrowed until store_close(*out)) and *out
 * (caller owns), or -ENOMEM. */
int fake_store_open(struct fake_store **fs, struct store **out)
	__attribute__((warn_unused_result));

/* ---------------------------------------------------------------- gates */

/* Park every later put whose key starts with prefix until the gate opens.
 * Gating a prefix twice is a no-op. */
void fake_store_gate(struct fake_store *fs, const char *prefix);
/* Open the gate of prefix: parked puts proceed, later ones pass. */
void fake_store_open_gate(struct fake_store *fs, const char *prefix);
void fake_store_open_all_gates(struct fake_store *fs);
/* Wait until at least n puts are parked at the gate of prefix.  true, or
 * false after timeout_ms. */
bool fake_store_wait_parked(struct fake_store *fs, const char *prefix, unsigned n,
			    unsigned timeout_ms);
/* Puts parked at the gate of prefix now. */
unsigned fake_store_parked(struct fake_store *fs, const char *prefix);

/* ------------------------------------------------------- error injection */

/* The next n calls of op (FAKE_PUT or FAKE_GET) whose key starts with
 * prefix fail with -err (err positive), before any data moves; with
 * FAKE_PUT_LATE, after the object was stored.
 * n == UINT32_MAX: until fake_store_clear_errors(). */
void fake_store_fail(struct fake_store *fs, enum fake_op op, const char *prefix, int err,
		     uint32_t n);
void fake_store_clear_errors(struct fake_store *fs);

/* ------------------------------------------------------ object access */

/* Flip (xor 0xff) byte off of key.  0, -ENOENT, -ERANGE. */
int fake_store_flip(struct fake_store *fs, const char *key, uint64_t off);
/* A copy of the object (caller frees *data).  0, -ENOENT, -ENOMEM. */
int fake_store_copy(struct fake_store *fs, const char *key, uint8_t **data, size_t *len);
bool fake_store_exists(struct fake_store *fs, const char *key);
/* Objects whose key starts with prefix. */
unsigned fake_store_count_objects(struct fake_store *fs, const char *prefix);
/* Wait until key exists.  true, or false after timeout_ms. */
bool fake_store_wait_key(struct fake_store *fs, const char *key, unsigned timeout_ms);

/* ------------------------------------------------------------ call log */

/* Calls of op whose key starts with prefix (NULL: any key) since the last
 * reset, failed calls included.  FAKE_LIST matches on the list prefix. */
unsigned fake_store_calls(struct fake_store *fs, enum fake_op op, const char *prefix);
/* Successful calls only. */
unsigned fake_store_ok_calls(struct fake_store *fs, enum fake_op op, const char *prefix);
void fake_store_reset_calls(struct fake_store *fs);

#endif
