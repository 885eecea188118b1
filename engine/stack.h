/*
 * stack.h - the storage stack a star stands on, built from its
 * configuration: the standard bucket, the express bucket set behind a
 * class router, the testing fault wrapper, and the metastore.
 *
 * For: star_open() (engine/star.c) and novactl (src/novactl.c), so the
 * daemon and the admin tool cannot assemble the stack differently.  Not
 * for: the star's own state (lock, star id, chains), or opening one
 * backend (store_open(), store_set_open(), kv_open() do that).
 *
 * The stack, bottom up:
 *
 *   store_open(store_url)             the standard bucket
 *   + store_set_open(express_urls)    the express bucket set, one bucket
 *     store_route_new(std, express)   per zone, behind a class router
 *   + fault_store_wrap(store_faults)  testing only: injected faults
 *   kv_open(meta_url)                 the metastore
 *
 * Invariants:
 *  1. The defaults live here only: dir:DATA_DIR/objects for the standard
 *     bucket, sqlite:DATA_DIR/meta.db for the metastore; no express set
 *     and no faults unless named.
 *  2. stack_open() is all or nothing: on failure nothing stays open and
 *     *out is zeroed.
 */
#ifndef NOVAFS_ENGINE_STACK_H
#define NOVAFS_ENGINE_STACK_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/store/store.h"
#include "meta/kv.h"

/* stack_cfg.slot_segments.  Only one process may write a directory
 * store's segments (dir.h), and a store=dir: URL may be shared by several
 * stars, so the default keeps them to the data directory's own store. */
#define STACK_SEGMENTS_OFF 0u /* every slot a file of its own */
#define STACK_SEGMENTS_ON 1u  /* segments on any directory store */
#define STACK_SEGMENTS_OWN 2u /* segments on DATA_DIR/objects only */

struct stack_cfg {
	const char *data_dir;     /* required: where the defaults live */
	const char *store_url;    /* NULL: dir:DATA_DIR/objects */
	const char *express_urls; /* NULL or "": no express set; else ';'-separated
				   * URLs, one per zone (set.h) */
	const char *location;     /* the star's zone in the set; NULL: the first */
	const char *store_faults; /* NULL or "": none; else a fault.h spec */
	const char *meta_url;     /* NULL: sqlite:DATA_DIR/meta.db */
	bool meta_must_exist;     /* the default metastore must exist already
				   * (a tool must not create an empty one) */
	const char *meta_check;   /* NULL or "off": none; "quick": refuse a
				   * metastore whose kv_quick_check() finds
				   * damage; "warn": log the damage, open anyway */
	unsigned slot_segments;   /* STACK_SEGMENTS_*: which directory store
				   * (dir:/path or /path) keeps chain slots in
				   * segment files (dir.h) */
};

/* The stack: the store every module writes through (router and faults
 * included) and the metastore.  Caller owns both; stack_close(). */
struct stack {
	struct store *store;
	struct kv *kv;
	bool slot_segments; /* the standard store is a directory store with
			     * its chain slots in segment files */
};

/* Which layer stack_open() failed at, and the URL it was opening (the
 * caller words the error; backends log their own details). */
enum stack_part {
	STACK_STORE,        /* the standard bucket */
	STACK_EXPRESS,      /* the express bucket set */
	STACK_ROUTE,        /* the class router over the two */
	STACK_FAULTS,       /* the fault wrapper */
	STACK_META_MISSING, /* meta_must_exist, and no sqlite:DATA_DIR/meta.db */
	STACK_META,         /* the metastore */
	STACK_META_DAMAGED, /* meta_check=quick found damage (logged, -EIO) */
};
struct stack_failure {
	enum stack_part part;
	char url[4096 + 16];
};

/* Open the stack (invariant 2).  0 and *out, or the failing layer's
 * error (-ENOENT for STACK_META_MISSING, -EIO for STACK_META_DAMAGED)
 * and, when why is not NULL, *why.  cfg's strings are borrowed for the
 * call only. */
int stack_open(const struct stack_cfg *cfg, struct stack *out, struct stack_failure *why)
	__attribute__((warn_unused_result));

/* cfg.meta_check's values: 0 when v is NULL, "off", "quick" or "warn",
 * else -EINVAL. */
int stack_meta_check_valid(const char *v);

/* Close the metastore, then the store; NULL members are skipped. */
void stack_close(struct stack *s);

#endif
