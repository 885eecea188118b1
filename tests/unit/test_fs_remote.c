/*
 * test_fs_remote.c - unit tests for fs/remote.c: what a user meets when
 * an append or a hot read goes to the star that leads the stream.
 *
 * fs/remote.c is linked alone against stubs of the calls it makes below
 * it: star_leader() and star_lead_check() (engine/lease.h) and the
 * cluster client (api/client.h), each answering what the case sets, and
 * recording what it was given.  Also pins invariant 3 (the holder's size
 * and bytes for a stream led elsewhere).  Pins remote.h invariant 2 (the errno table of
 * novafs(8) ERRORS): EHOSTUNREACH without a client, for a holder without
 * a star API or out of reach; EAGAIN for NOT_OWNER after the redial and
 * for a stream that went vacant; ETIMEDOUT (in doubt) passed on; EIO
 * for a refused secret or nonsense;
 * the holder's own refusals passed on; and that the holder star_leader()
 * named is the one dialed, with the stream's bucket and name.
 */
#include "config.h"
#include "api/client.h"
#include "engine/lease.h"
#include "fs/remote.h"
#include "fs/session.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static struct {
	int leader_rc;
	int check_rc;            /* star_lead_check(): 0 ours, -STAR_ENOTOWNER */
	int client_rc;
	uint64_t end;            /* the holder's acked end */
	int ends;
	size_t read_got;         /* bytes each read returns (then 0) */
	int reads;
	int appends;
	struct lease_holder dialed;
	char bucket[64], stream[256];
} stub;

int star_leader(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	(void)st;
	(void)s;
	memset(h, 0, sizeof(*h));
	snprintf(h->star, sizeof(h->star), "star-b");
	snprintf(h->addr, sizeof(h->addr), "10.0.0.2:7000");
	h->epoch = 3;
	return stub.leader_rc;
}

int star_lead_check(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	int rc = star_leader(st, s, h);

	return rc ? rc : stub.check_rc;
}

int api_client_end(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		   const char *stream, uint64_t *seq, uint64_t *byte)
{
	(void)cl;
	(void)h;
	(void)bucket;
	(void)stream;
	stub.ends++;
	*seq = 1;
	*byte = stub.end;
	return stub.client_rc;
}

int api_client_append(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, const void *body, size_t len,
		      struct api_append_result *res)
{
	(void)cl;
	(void)body;
	(void)len;
	(void)res;
	stub.appends++;
	stub.dialed = *h;
	snprintf(stub.bucket, sizeof(stub.bucket), "%s", bucket);
	snprintf(stub.stream, sizeof(stub.stream), "%s", stream);
	return stub.client_rc;
}

int api_client_read(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t off, void *dst, size_t len, size_t *got)
{
	(void)cl;
	(void)h;
	(void)bucket;
	(void)stream;
	(void)off;
	*got = stub.reads++ == 0 && stub.read_got <= len ? stub.read_got : 0;
	memset(dst, 'x', *got);
	return stub.client_rc;
}

static struct nova_fs fs;
static struct nv_stream s;

static void reset(bool client)
{
	memset(&stub, 0, sizeof(stub));
	memset(&fs, 0, sizeof(fs));
	fs.client = client ? (struct api_client *)&stub : NULL; /* never dereferenced */
	fs.star = (struct star *)&stub;                             /* nor this */
	memset(&s, 0, sizeof(s));
	snprintf(s.bucket, sizeof(s.bucket), "logs");
	snprintf(s.name, sizeof(s.name), "app");
}

static void test_fs_remote_append_at_holder(void **state)
{
	(void)state;
	reset(true);
	assert_int_equal(fs_remote_append(&fs, &s, "rec", 3), 0);
	assert_int_equal(stub.appends, 1);
	assert_string_equal(stub.dialed.star, "star-b");
	assert_string_equal(stub.dialed.addr, "10.0.0.2:7000");
	assert_int_equal(stub.dialed.epoch, 3);
	assert_string_equal(stub.bucket, "logs");
	assert_string_equal(stub.stream, "app");
}

static void test_fs_remote_errnos(void **state)
{
	static const struct {
		int client_rc, user_rc;
	} map[] = {
		{ -EHOSTUNREACH, -EHOSTUNREACH },
		{ -STAR_ENOTOWNER, -EAGAIN },
		{ -EAGAIN, -EAGAIN },
		{ -ETIMEDOUT, -ETIMEDOUT }, /* in doubt at the holder */
		{ -EACCES, -EIO },
		{ -EINVAL, -EIO },
		{ -ERANGE, -EIO },
		{ -EIO, -EIO },
		{ -ENOENT, -ENOENT },
		{ -EFBIG, -EFBIG },
		{ -ENOSPC, -ENOSPC },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		reset(true);
		stub.client_rc = map[i].client_rc;
		assert_int_equal(fs_remote_append(&fs, &s, "r", 1), map[i].user_rc);
	}
	/* No cluster secret: nobody to ask. */
	reset(false);
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), -EHOSTUNREACH);
	assert_int_equal(stub.appends, 0);
	/* Vacant since the engine said NOT_OWNER: leadership is moving. */
	reset(true);
	stub.leader_rc = -ENOENT;
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), -EAGAIN);
	assert_int_equal(stub.appends, 0);
	/* The metastore cannot say: its error. */
	reset(true);
	stub.leader_rc = -ETIMEDOUT;
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), -ETIMEDOUT);
}

static void test_fs_remote_read(void **state)
{
	char buf[64];
	size_t done = 99;

	(void)state;
	reset(true);
	stub.read_got = 10;
	assert_int_equal(fs_remote_read(&fs, &s, 5, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 10); /* short: the holder's acked end */
	assert_int_equal(stub.reads, 2);
	reset(false);
	assert_int_equal(fs_remote_read(&fs, &s, 5, buf, sizeof(buf), &done), -EHOSTUNREACH);
	assert_int_equal(done, 0);
	reset(true);
	stub.client_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_read(&fs, &s, 0, buf, sizeof(buf), &done), -EAGAIN);
}

/* Invariant 3: a stream another star leads has the holder's size, its
 * reads past the local view come from the holder, its read-only opens
 * bypass the page cache; a stream this star leads, or a mount without a
 * client, keeps the local view and asks nobody. */
static void test_fs_remote_view(void **state)
{
	char buf[64];
	size_t done = 4;

	(void)state;
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.end = 500;
	assert_true(fs_remote_elsewhere(&fs, &s));
	assert_int_equal(fs_remote_size(&fs, &s, 100), 500);
	stub.end = 50; /* never below the local view */
	assert_int_equal(fs_remote_size(&fs, &s, 100), 100);
	stub.read_got = 10;
	assert_int_equal(fs_remote_more(&fs, &s, 4, buf + 4, sizeof(buf) - 4, &done), 0);
	assert_int_equal(done, 14);
	/* The holder unreachable: stat keeps the local view, a read fails. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.client_rc = -EHOSTUNREACH;
	assert_int_equal(fs_remote_size(&fs, &s, 100), 100);
	done = 0;
	assert_int_equal(fs_remote_more(&fs, &s, 0, buf, sizeof(buf), &done), -EHOSTUNREACH);
	/* Ours: nobody asked. */
	reset(true);
	assert_false(fs_remote_elsewhere(&fs, &s));
	assert_int_equal(fs_remote_size(&fs, &s, 100), 100);
	done = 0;
	assert_int_equal(fs_remote_more(&fs, &s, 0, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 0);
	assert_int_equal(stub.ends + stub.reads, 0);
	/* No client: nobody to ask. */
	reset(false);
	stub.check_rc = -STAR_ENOTOWNER;
	assert_false(fs_remote_elsewhere(&fs, &s));
	assert_int_equal(fs_remote_size(&fs, &s, 100), 100);
	assert_int_equal(stub.ends, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fs_remote_append_at_holder),
		cmocka_unit_test(test_fs_remote_errnos),
		cmocka_unit_test(test_fs_remote_read),
		cmocka_unit_test(test_fs_remote_view),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
