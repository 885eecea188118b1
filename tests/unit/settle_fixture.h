/*
 * settle_fixture.h - the shared harness of the settle unit tests
 * (tests/unit/test_settle.c, tests/unit/test_settle_rows.c), over the
 * engine fixture (tests/unit/engine_fixture.h).
 *
 * For: a settle configuration on the fixture's fake store and metastore
 * (st_start()), running settle_chain() at a chosen time, reading a
 * stream's rows back, and checking settled objects byte by byte from the
 * stored bytes (expect_object(), expect_settled()).  Not for: the era
 * and job phases themselves (each test drives those).
 *
 * Threads: everything here runs on the test thread (cmocka assertions).
 */
#ifndef NOVAFS_TESTS_SETTLE_FIXTURE_H
#define NOVAFS_TESTS_SETTLE_FIXTURE_H

#include <stdint.h>

#include "engine/settle.h"
#include "engine/settle/job.h"
#include "meta/refs.h"
#include "tests/unit/engine_fixture.h"

/* Every marker ripe (even after a resolve re-ripened it at birth + the
 * settle's age cap of UINT64_MAX / 2), and every stream past its age cap. */
#define NOW_ALL (UINT64_MAX / 4 * 3)
/* A re-run after a pass whose jobs failed: past their retry delay. */
#define NOW_RETRY (NOW_ALL + 2 * ERA_RETRY_NS)

/* One settle configuration on a fixture; st_start() .. st_stop(). */
struct st {
	struct efx *f;
	struct fetch_cache *fc;
	struct settle_cfg cfg;
	/* cfg.settled calls */
	uint64_t settled_id[8], settled_seq[8], settled_byte[8];
	unsigned nsettled;
};

/* The rows of one stream (scalars and objects; slots are not kept). */
#define ROWS_MAX 64
#define OBJS_MAX META_REF_OBJS_MAX

struct row {
	uint8_t kind;
	uint64_t first_seq, end_seq, first_byte, end_byte;
	uint32_t nobjs;
	struct meta_ref_obj objs[OBJS_MAX];
	char bucket[64];
};

struct rows {
	struct row r[ROWS_MAX];
	int n;
};

/* t ready on f: the settle configuration of efx_start_settle(), with
 * cfg.settled recording into t. */
void st_start(struct efx *f, struct st *t);
void st_stop(struct st *t);
/* settle_chain() of the fixture's chain at now. */
int settle_now(struct st *t, uint64_t now);
/* The rows of stream id (at most ROWS_MAX, each of at most OBJS_MAX). */
void get_rows(struct kv *kv, uint64_t id, struct rows *rs);
/* Object i of catalog row r, from the stored bytes: trailer and footer
 * where the row says, every record as efx_fill() wrote it.  Advances
 * *seq / *byte over its records. */
void expect_object(struct efx *f, uint64_t id, const struct row *r, uint32_t i,
		   uint64_t *seq, uint64_t *byte);
/* Stream id is settled whole: one catalog row [0, end), its objects
 * hold every record, and no span ref is left.  *out (may be NULL) gets
 * the row. */
void expect_settled(struct efx *f, uint64_t id, uint64_t end_seq, uint64_t end_byte,
		    struct row *out);
void expect_same_row(const struct row *a, const struct row *b);
unsigned count_markers(struct efx *f);
/* Every ref row has its byte twin and no twin is left alone. */
void expect_twins(struct efx *f);
unsigned span_refs(struct efx *f, uint64_t id);

#endif
