/*
 * test_fs_remote.c - unit tests for fs/remote.c: what a user meets when
 * an append or a hot read goes to the star that leads the stream.
 *
 * fs/remote.c is linked alone against stubs of the calls it makes below
 * it: star_leader() and star_lead_check() (engine/lease.h) and the
 * cluster client (api/client.h), each answering what the case sets, and
 * recording what it was given.  Also pins invariant 3 (the holder's size
 * and bytes for a stream led elsewhere) and invariant 4 (a vacant
 * stream's view raised from its refs, star_view_refresh() stubbed) and
 * invariant 6 (the trim point: the holder's, star_view_trim() stubbed,
 * or the row's through the refresh).  Pins remote.h invariant 2 (the errno table of
 * novafs(8) ERRORS): EHOSTUNREACH without a client, for a holder without
 * a star API or out of reach; EAGAIN for NOT_OWNER after the redial and
 * for a stream that went vacant; ETIMEDOUT (in doubt) passed on; EIO
 * for a refused secret or nonsense;
 * the holder's own refusals passed on; and that the holder star_leader()
 * named is the one dialed, with the stream's bucket and name.  Pins
 * invariant 4 too (an unlink at the holder; here only when nothing
 * could be sent), with star_stream_delete() and star_stream_gone()
 * (engine/star.h) stubbed; and invariant 8 (fs_remote_rename(): a rename
 * over a stream another star leads is one request to that star, nothing
 * done here; its ESTALE is looked up and sent once more), with
 * star_stream_lookup(), star_stream_rename() and stream_put() stubbed.  And that a call the
 * holder answers ENOENT under the name at load is sent again under the
 * stream's name now (star_stream_name() stubbed: renamed elsewhere).
 * And that every call names the stream's id (api/client.h invariant 5):
 * the holder's ESTALE (another stream under the name at load: renamed,
 * then a new one created under the old name) is asked again once under
 * the name now with the same id, never by name alone; a stream whose
 * row is gone fails with ENOENT and is marked deleted here; ESTALE again
 * is EAGAIN.
 * And invariant 7 (a trim at the holder; here only when nothing could be
 * sent), with star_stream_trim_seq()/_bytes() stubbed.
 */
#include "config.h"
#include "api/client.h"
#include "engine/lease.h"
#include "engine/star.h"
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
	uint64_t refs_end;       /* star_view_refresh(): the refs' end */
	int refreshes;
	enum star_view refreshed; /* what the last refresh was asked for */
	uint64_t trim_seq, trim_byte; /* the holder's trim point */
	int trims;               /* star_view_trim() calls ... */
	uint64_t trimmed_seq, trimmed_byte; /* ... and the last one's point */
	int client_rc;
	uint64_t end;            /* the holder's acked end */
	int ends;
	size_t read_got;         /* bytes each read returns (then 0) */
	int reads;
	int appends;
	int deletes, local_deletes, gones; /* at the holder, here, marked here */
	struct lease_holder dialed;
	char bucket[64], stream[256];
	uint64_t id;             /* the id of the last call */
	int other_ids;           /* calls naming another id than s's */
	/* Stream ids: the holder has another stream (ESTALE) under
	 * moved_name; star_stream_name() answers name_rc when set. */
	char moved_name[256];
	int name_rc, name_calls;
	/* Renames: the holder answers ENOENT under gone_name; the row's name
	 * now is now_name ("": s's own); lookups of `missing` fail. */
	char gone_name[256], now_name[256], missing[256];
	int lookups, puts, renames, rename_rc, lookup_rc;
	bool noreplace;
	char from[256], to[256];
	uint64_t rename_dst;     /* the target star_stream_rename() was given (0: none) */
	int local_stale;         /* the first so many local renames answer ESTALE */
	/* Renames over a stream at its holder: how many, the source named,
	 * and how many of the first answer ESTALE. */
	int remote_renames, remote_stale;
	char rfrom[256];
	/* Trims: at the holder (its answer, the point given) and here. */
	int remote_trims, local_trims;
	bool trim_by_seq;
	uint64_t trim_pos;
} stub;

/* The ids of s (the stream under test) and dst (the one lookups load). */
#define S_ID 17
#define DST_ID 23

/* The holder's answer to a call for stream of id: ENOENT under
 * gone_name, ESTALE under moved_name (by id only: by name alone it is
 * the other stream's, the bug the id fixes). */
static int answer(const char *stream, uint64_t id)
{
	stub.id = id;
	if (id != S_ID && id != DST_ID)
		stub.other_ids++;
	if (stub.moved_name[0] && !strcmp(stream, stub.moved_name) && id)
		return -ESTALE;
	return stub.gone_name[0] && !strcmp(stream, stub.gone_name) ? -ENOENT : stub.client_rc;
}

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

int star_view_refresh(struct star *st, struct nv_stream *s, enum star_view what)
{
	(void)st;
	stub.refreshes++;
	stub.refreshed = what;
	if (stub.refs_end <= atomic_load(&s->acked_byte))
		return 0;
	atomic_store(&s->acked_byte, stub.refs_end);
	return 1;
}

int star_view_trim(struct star *st, struct nv_stream *s, uint64_t seq, uint64_t byte)
{
	(void)st;
	(void)s;
	stub.trims++;
	stub.trimmed_seq = seq;
	stub.trimmed_byte = byte;
	return 1;
}

int api_client_bounds(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, struct api_bounds *b)
{
	(void)cl;
	(void)h;
	(void)bucket;
	(void)stream;
	stub.ends++;
	memset(b, 0, sizeof(*b));
	b->end_seq = 1;
	b->end_byte = stub.end;
	b->trim_seq = stub.trim_seq;
	b->trim_byte = stub.trim_byte;
	return answer(stream, id);
}

int api_client_append(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, const void *body, size_t len,
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
	return answer(stream, id);
}

int api_client_read(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t id, uint64_t off, void *dst, size_t len,
		    size_t *got)
{
	int rc = answer(stream, id);

	(void)cl;
	(void)h;
	(void)bucket;
	(void)off;
	if (rc == -ENOENT || rc == -ESTALE) {
		*got = 0;
		return rc;
	}
	snprintf(stub.stream, sizeof(stub.stream), "%s", stream);
	*got = stub.reads++ == 0 && stub.read_got <= len ? stub.read_got : 0;
	memset(dst, 'x', *got);
	return stub.client_rc;
}

int api_client_delete(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id)
{
	(void)cl;
	stub.deletes++;
	stub.dialed = *h;
	snprintf(stub.bucket, sizeof(stub.bucket), "%s", bucket);
	snprintf(stub.stream, sizeof(stub.stream), "%s", stream);
	return answer(stream, id);
}

int api_client_rename(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, const char *from)
{
	(void)cl;
	stub.dialed = *h;
	snprintf(stub.bucket, sizeof(stub.bucket), "%s", bucket);
	snprintf(stub.stream, sizeof(stub.stream), "%s", stream);
	snprintf(stub.rfrom, sizeof(stub.rfrom), "%s", from);
	if (stub.remote_renames++ < stub.remote_stale) {
		stub.id = id;
		return -ESTALE;
	}
	return answer(stream, id);
}

int api_client_trim(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t id, bool by_seq, uint64_t pos, uint64_t *seq,
		    uint64_t *byte)
{
	(void)cl;
	stub.remote_trims++;
	stub.dialed = *h;
	stub.trim_by_seq = by_seq;
	stub.trim_pos = pos;
	snprintf(stub.bucket, sizeof(stub.bucket), "%s", bucket);
	snprintf(stub.stream, sizeof(stub.stream), "%s", stream);
	*seq = stub.trim_seq;
	*byte = stub.trim_byte;
	return answer(stream, id);
}

static int trim_here(struct nv_stream *s, bool by_seq, uint64_t pos, uint64_t *old_byte)
{
	(void)s;
	stub.local_trims++;
	stub.trim_by_seq = by_seq;
	stub.trim_pos = pos;
	if (old_byte)
		*old_byte = 0;
	return 0;
}

int star_stream_trim_seq(struct star *st, struct nv_stream *s, uint64_t seq,
			 uint64_t *old_byte)
{
	(void)st;
	return trim_here(s, true, seq, old_byte);
}

int star_stream_trim_bytes(struct star *st, struct nv_stream *s, uint64_t byte,
			   uint64_t *old_byte)
{
	(void)st;
	return trim_here(s, false, byte, old_byte);
}

int star_stream_delete(struct star *st, struct nv_stream *s)
{
	(void)st;
	(void)s;
	stub.local_deletes++;
	return 0;
}

int star_stream_gone(struct star *st, struct nv_stream *s, const char *by)
{
	(void)st;
	(void)s;
	assert_string_equal(by, "star-b");
	stub.gones++;
	return -ENOENT;
}

static struct nova_fs fs;
static struct nv_stream s;
static struct nv_stream dst; /* what star_stream_lookup() loads */

int star_stream_name(struct star *st, const struct nv_stream *of, char *name, size_t size)
{
	(void)st;
	stub.name_calls++;
	if (stub.name_rc)
		return stub.name_rc;
	snprintf(name, size, "%s", stub.now_name[0] ? stub.now_name : of->name);
	return 0;
}

int star_stream_lookup(struct star *st, const char *bucket, const char *name,
		       struct nv_stream **out)
{
	(void)st;
	if (!strcmp(name, stub.missing))
		return stub.lookup_rc ? stub.lookup_rc : -ENOENT;
	stub.lookups++;
	snprintf(dst.bucket, sizeof(dst.bucket), "%s", bucket);
	snprintf(dst.name, sizeof(dst.name), "%s", name);
	dst.id = DST_ID;
	*out = &dst;
	return 0;
}

void stream_put(struct nv_stream *p)
{
	(void)p;
	stub.puts++;
}

int star_stream_rename(struct star *st, const char *bucket, const char *from, const char *to,
		       bool noreplace, struct nv_stream *target)
{
	(void)st;
	(void)bucket;
	stub.noreplace = noreplace;
	stub.rename_dst = target ? target->id : 0;
	snprintf(stub.from, sizeof(stub.from), "%s", from);
	snprintf(stub.to, sizeof(stub.to), "%s", to);
	if (stub.renames++ < stub.local_stale)
		return -ESTALE;
	return stub.rename_rc;
}

static void reset(bool client)
{
	memset(&stub, 0, sizeof(stub));
	memset(&fs, 0, sizeof(fs));
	fs.client = client ? (struct api_client *)&stub : NULL; /* never dereferenced */
	fs.star = (struct star *)&stub;                             /* nor this */
	memset(&s, 0, sizeof(s));
	snprintf(s.bucket, sizeof(s.bucket), "logs");
	snprintf(s.name, sizeof(s.name), "app");
	s.id = S_ID;
	memset(&dst, 0, sizeof(dst));
	dst.id = DST_ID;
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
	assert_int_equal(stub.id, 17); /* by its id too */
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
	stub.trim_seq = 4;
	stub.trim_byte = 40;
	assert_true(fs_remote_elsewhere(&fs, &s));
	assert_int_equal(fs_remote_size(&fs, &s, 100), 500);
	/* Invariant 6: the holder's trim point is the view's. */
	assert_int_equal(stub.trims, 1);
	assert_int_equal(stub.trimmed_seq, 4);
	assert_int_equal(stub.trimmed_byte, 40);
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
	assert_int_equal(stub.trims, 0); /* the holder said nothing */
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
	assert_int_equal(stub.refreshes, 0);
}

/* Invariant 5: a vacant stream's view is raised to its refs' end by
 * getattr; nobody is dialed.  Led here or elsewhere, the refs are not
 * read. */
static void test_fs_remote_vacant_view(void **state)
{
	char buf[64];
	size_t done = 0;

	(void)state;
	reset(true);
	stub.leader_rc = -ENOENT; /* vacant */
	atomic_store(&s.acked_byte, 100);
	stub.refs_end = 300;
	assert_int_equal(fs_remote_size(&fs, &s, 100), 300);
	assert_int_equal(stub.refreshes, 1);
	assert_int_equal(stub.refreshed, STAR_VIEW_READ); /* the end and the trim point */
	/* Not at an open, nor in a read (the refresh's hook invalidates
	 * the page a read holds locked). */
	assert_false(fs_remote_elsewhere(&fs, &s));
	assert_int_equal(fs_remote_more(&fs, &s, 300, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 0);
	assert_int_equal(stub.refreshes, 1);
	assert_int_equal(stub.ends + stub.reads, 0);
	/* Led here, or elsewhere: the refs are not read. */
	reset(true);
	stub.refs_end = 300;
	assert_int_equal(fs_remote_size(&fs, &s, 0), 0);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.end = 200;
	assert_int_equal(fs_remote_size(&fs, &s, 0), 200);
	assert_int_equal(stub.refreshes, 0);
}

/* Invariant 4: an unlink of a stream another star leads is done there
 * (and marked deleted here); when nothing could be sent, EHOSTUNREACH and
 * nothing deleted anywhere. */
static void test_fs_remote_unlink(void **state)
{
	(void)state;
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_unlink(&fs, &s), 0);
	assert_int_equal(stub.deletes, 1);
	assert_string_equal(stub.dialed.star, "star-b");
	assert_string_equal(stub.bucket, "logs");
	assert_string_equal(stub.stream, "app");
	assert_int_equal(stub.gones, 1);
	assert_int_equal(stub.local_deletes, 0);
	/* Deleted there already: ENOENT, and marked here. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.client_rc = -ENOENT;
	assert_int_equal(fs_remote_unlink(&fs, &s), -ENOENT);
	assert_int_equal(stub.gones, 1);
	assert_int_equal(stub.local_deletes, 0);
	/* The holder out of reach (nothing sent): refused, nothing deleted
	 * anywhere while its lease stands. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.client_rc = -EHOSTUNREACH;
	assert_int_equal(fs_remote_unlink(&fs, &s), -EHOSTUNREACH);
	assert_int_equal(stub.local_deletes, 0);
	assert_int_equal(stub.gones, 0);
	/* Sent and in doubt, or moving: the user's errno, nothing here. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.client_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_unlink(&fs, &s), -EAGAIN);
	assert_int_equal(stub.local_deletes + stub.gones, 0);
	/* Ours, or vacant: here, nobody asked. */
	reset(true);
	assert_int_equal(fs_remote_unlink(&fs, &s), 0);
	assert_int_equal(stub.local_deletes, 1);
	reset(false);
	assert_int_equal(fs_remote_unlink(&fs, &s), 0);
	assert_int_equal(stub.local_deletes, 1);
	/* Another star leads it and this mount has no client: refused. */
	reset(false);
	stub.check_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_unlink(&fs, &s), -EHOSTUNREACH);
	assert_int_equal(stub.local_deletes, 0);
	assert_int_equal(stub.deletes, 0);
}

/* Invariant 7: a trim of a stream star-b leads is star-b's (by seq or
 * by byte), and this star's view is raised to the point it answers;
 * here only when it is ours or vacant; EHOSTUNREACH and nothing trimmed
 * when star-b cannot be asked (no client, out of reach); its EINVAL
 * (never backwards) is the user's. */
static void test_fs_remote_trim(void **state)
{
	uint64_t old = 99;

	(void)state;
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.trim_seq = 80;
	stub.trim_byte = 4000;
	atomic_store(&s.trim_byte, 100);
	assert_int_equal(fs_remote_trim(&fs, &s, true, 80, &old), 0);
	assert_int_equal(stub.remote_trims, 1);
	assert_int_equal(stub.local_trims, 0);
	assert_string_equal(stub.dialed.star, "star-b");
	assert_string_equal(stub.bucket, "logs");
	assert_string_equal(stub.stream, "app");
	assert_true(stub.trim_by_seq);
	assert_int_equal(stub.trim_pos, 80);
	assert_int_equal(stub.trims, 1);
	assert_int_equal(stub.trimmed_seq, 80);
	assert_int_equal(stub.trimmed_byte, 4000);
	assert_int_equal(old, 100);
	/* The hole punch, by byte. */
	assert_int_equal(fs_remote_trim(&fs, &s, false, 5000, NULL), 0);
	assert_false(stub.trim_by_seq);
	assert_int_equal(stub.trim_pos, 5000);
	assert_int_equal(stub.remote_trims, 2);
	/* Backwards at the holder: EINVAL, nothing here. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.client_rc = -EINVAL;
	assert_int_equal(fs_remote_trim(&fs, &s, true, 40, NULL), -EINVAL);
	assert_int_equal(stub.local_trims + stub.trims, 0);
	/* Renamed on another star: asked again under the name now. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	snprintf(stub.gone_name, sizeof(stub.gone_name), "app");
	snprintf(stub.now_name, sizeof(stub.now_name), "log");
	assert_int_equal(fs_remote_trim(&fs, &s, true, 3, NULL), 0);
	assert_int_equal(stub.remote_trims, 2);
	assert_string_equal(stub.stream, "log");
	/* Moving: EAGAIN, nothing here. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.client_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_trim(&fs, &s, true, 3, NULL), -EAGAIN);
	assert_int_equal(stub.local_trims, 0);
	/* Out of reach: refused, nothing trimmed here. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.client_rc = -EHOSTUNREACH;
	assert_int_equal(fs_remote_trim(&fs, &s, true, 3, NULL), -EHOSTUNREACH);
	assert_int_equal(stub.local_trims + stub.trims, 0);
	/* Ours, vacant, or no client: here, nobody asked. */
	reset(true);
	assert_int_equal(fs_remote_trim(&fs, &s, false, 7, NULL), 0);
	reset(true);
	stub.leader_rc = -ENOENT;
	assert_int_equal(fs_remote_trim(&fs, &s, true, 7, NULL), 0);
	assert_int_equal(stub.local_trims, 1);
	reset(false);
	assert_int_equal(fs_remote_trim(&fs, &s, true, 7, NULL), 0);
	assert_int_equal(stub.local_trims, 1);
	reset(false);
	stub.check_rc = -STAR_ENOTOWNER; /* led elsewhere, no client: refused */
	assert_int_equal(fs_remote_trim(&fs, &s, true, 7, NULL), -EHOSTUNREACH);
	assert_int_equal(stub.local_trims + stub.remote_trims, 0);
}

/* Invariant 8, renames: `mv app log` over a stream log that star-b
 * leads is one rename request to star-b naming log (id 23) and the
 * source app, and nothing here (no delete anywhere, no rename here: so
 * log never reads ENOENT, and when star-b refuses nothing changed); log
 * is marked deleted here once star-b did it. */
static void test_fs_remote_rename(void **state)
{
	static const struct {
		int client_rc, user_rc, gones;
	} over[] = {
		{ 0, 0, 1 },
		{ -ENOENT, -ENOENT, 0 },             /* no source there: nothing changed */
		{ -EHOSTUNREACH, -EHOSTUNREACH, 0 }, /* nothing sent: nothing renamed */
		{ -STAR_ENOTOWNER, -EAGAIN, 0 },     /* moving: nothing renamed */
		{ -ETIMEDOUT, -ETIMEDOUT, 0 },       /* in doubt */
		{ -EACCES, -EIO, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
		reset(true);
		stub.check_rc = -STAR_ENOTOWNER;
		stub.client_rc = over[i].client_rc;
		assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), over[i].user_rc);
		assert_int_equal(stub.remote_renames, 1);
		assert_string_equal(stub.dialed.star, "star-b");
		assert_string_equal(stub.bucket, "logs");
		assert_string_equal(stub.stream, "log"); /* the target's leader, by the target */
		assert_int_equal(stub.id, DST_ID);
		assert_string_equal(stub.rfrom, "app");
		assert_int_equal(stub.renames + stub.deletes + stub.local_deletes, 0);
		assert_int_equal(stub.gones, over[i].gones);
		assert_int_equal(stub.puts, stub.lookups);
	}
	/* The target or its lease moved as star-b committed (ESTALE): looked
	 * up and sent again once, then EAGAIN with nothing changed. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.remote_stale = 1;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), 0);
	assert_int_equal(stub.remote_renames, 2);
	assert_int_equal(stub.lookups, 2);
	assert_int_equal(stub.gones, 1);
	assert_int_equal(stub.puts, stub.lookups);
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.remote_stale = 2;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), -EAGAIN);
	assert_int_equal(stub.remote_renames, 2);
	assert_int_equal(stub.renames + stub.deletes + stub.gones, 0);
	assert_int_equal(stub.puts, stub.lookups);
	/* The metastore cannot say whether the target exists: its error,
	 * nothing renamed, nobody asked. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	snprintf(stub.missing, sizeof(stub.missing), "log");
	stub.lookup_rc = -ETIMEDOUT;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), -ETIMEDOUT);
	assert_int_equal(stub.remote_renames + stub.renames, 0);
	/* RENAME_NOREPLACE, a rename to itself: here, no target named. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	stub.rename_rc = -EEXIST;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", true), -EEXIST);
	assert_true(stub.noreplace);
	assert_int_equal(stub.rename_dst, 0);
	assert_int_equal(stub.remote_renames, 0);
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "app", false), 0);
	assert_int_equal(stub.remote_renames, 0);
	/* No target: here, expecting none; one created meanwhile (ESTALE):
	 * looked up again. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	snprintf(stub.missing, sizeof(stub.missing), "log");
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), 0);
	assert_int_equal(stub.remote_renames, 0);
	assert_int_equal(stub.renames, 1);
	assert_int_equal(stub.rename_dst, 0);
	reset(true);
	snprintf(stub.missing, sizeof(stub.missing), "log");
	stub.local_stale = 1;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), 0);
	assert_int_equal(stub.renames, 2);
	/* A target this star leads, or nobody does: here, naming it (its
	 * lease is compared there); taken by another star meanwhile
	 * (STAR_ENOTOWNER from the rename): looked up again, then EAGAIN. */
	reset(true); /* ours */
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), 0);
	assert_int_equal(stub.remote_renames, 0);
	assert_int_equal(stub.renames, 1);
	assert_int_equal(stub.rename_dst, DST_ID);
	assert_false(stub.noreplace);
	assert_string_equal(stub.from, "app");
	assert_string_equal(stub.to, "log");
	assert_int_equal(stub.puts, stub.lookups);
	reset(true);
	stub.leader_rc = -ENOENT; /* vacant */
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), 0);
	assert_int_equal(stub.remote_renames, 0);
	assert_int_equal(stub.rename_dst, DST_ID);
	reset(true);
	stub.rename_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), -EAGAIN);
	assert_int_equal(stub.renames, 2);
	assert_int_equal(stub.puts, stub.lookups);
	/* No client, and another star leads the target: nothing renamed
	 * (deleting it here would let that star ack appends to it). */
	reset(false);
	stub.check_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), -EHOSTUNREACH);
	assert_int_equal(stub.remote_renames + stub.renames + stub.deletes, 0);
	assert_int_equal(stub.puts, stub.lookups);
	/* No client, the target ours: the rename here. */
	reset(false);
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), 0);
	assert_int_equal(stub.renames, 1);
}

/* A stream renamed since this star loaded it (s->name "app", its row
 * "app2" now): the holder's ENOENT under "app" is asked again under
 * "app2", for every call; under its own name it stands (deleted). */
static void test_fs_remote_renamed_elsewhere(void **state)
{
	char buf[64];
	size_t done = 0;

	(void)state;
	reset(true);
	snprintf(stub.gone_name, sizeof(stub.gone_name), "app");
	snprintf(stub.now_name, sizeof(stub.now_name), "app2");
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), 0);
	assert_int_equal(stub.appends, 2);
	assert_string_equal(stub.stream, "app2");
	stub.read_got = 10;
	assert_int_equal(fs_remote_read(&fs, &s, 0, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 10);
	assert_string_equal(stub.stream, "app2");
	stub.reads = 0;
	done = 0;
	stub.check_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_more(&fs, &s, 0, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 10);
	stub.end = 300;
	assert_int_equal(fs_remote_size(&fs, &s, 0), 300);
	assert_int_equal(stub.ends, 2);
	assert_int_equal(fs_remote_unlink(&fs, &s), 0);
	assert_string_equal(stub.stream, "app2");
	assert_int_equal(stub.gones, 1);
	/* Not renamed (its row's name is s's): the ENOENT stands, once. */
	reset(true);
	snprintf(stub.gone_name, sizeof(stub.gone_name), "app");
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), -ENOENT);
	assert_int_equal(stub.appends, 1);
	stub.end = 300;
	stub.check_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_size(&fs, &s, 7), 7);
	assert_int_equal(stub.ends, 1);
}

/* Renamed at the holder, and a new stream created there under the old
 * name: app (id 17) is app2 now, and "app" names another stream (the
 * holder's ESTALE for id 17).  Every call reaches app2 with id 17, none
 * goes by name alone or to another id; a stream whose row is gone fails
 * with ENOENT after one call and is marked deleted here; ESTALE after the
 * one call under the name now is EAGAIN, as is a metastore that cannot
 * say. */
static void test_fs_remote_stream_moved(void **state)
{
	char buf[64];
	size_t done = 0;

	(void)state;
	reset(true);
	snprintf(stub.moved_name, sizeof(stub.moved_name), "app");
	snprintf(stub.now_name, sizeof(stub.now_name), "app2");
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), 0);
	assert_int_equal(stub.appends, 2);
	assert_string_equal(stub.stream, "app2");
	assert_int_equal(stub.id, 17);
	stub.read_got = 10;
	assert_int_equal(fs_remote_read(&fs, &s, 0, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 10);
	assert_string_equal(stub.stream, "app2");
	stub.reads = 0;
	done = 0;
	stub.check_rc = -STAR_ENOTOWNER;
	assert_int_equal(fs_remote_more(&fs, &s, 0, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 10);
	stub.end = 300;
	assert_int_equal(fs_remote_size(&fs, &s, 0), 300);
	assert_int_equal(stub.ends, 2);
	assert_int_equal(fs_remote_unlink(&fs, &s), 0);
	assert_string_equal(stub.stream, "app2");
	assert_int_equal(stub.other_ids, 0);
	assert_int_equal(stub.gones, 1); /* the unlink's */
	/* Deleted there (its row is gone): ENOENT after one call, marked
	 * deleted here (star_stream_gone(): the one log line). */
	reset(true);
	snprintf(stub.moved_name, sizeof(stub.moved_name), "app");
	stub.name_rc = -ENOENT;
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), -ENOENT);
	assert_int_equal(stub.appends, 1);
	assert_int_equal(stub.gones, 1);
	done = 0;
	assert_int_equal(fs_remote_read(&fs, &s, 0, buf, sizeof(buf), &done), -ENOENT);
	assert_int_equal(done, 0);
	/* Still not s under the name now: one more call, then EAGAIN. */
	reset(true);
	snprintf(stub.moved_name, sizeof(stub.moved_name), "app"); /* its name now too */
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), -EAGAIN);
	assert_int_equal(stub.appends, 2);
	assert_int_equal(stub.gones, 0);
	/* The metastore cannot say where s is: EAGAIN, nothing sent again. */
	reset(true);
	snprintf(stub.moved_name, sizeof(stub.moved_name), "app");
	stub.name_rc = -ETIMEDOUT;
	assert_int_equal(fs_remote_append(&fs, &s, "r", 1), -EAGAIN);
	assert_int_equal(stub.appends, 1);
	/* A rename over log (id 23 at its lookup), which is another stream at
	 * its leader by now (23 renamed away): nothing deleted or renamed
	 * there or here; asked once more by id 23 after a new lookup, then
	 * EAGAIN. */
	reset(true);
	stub.check_rc = -STAR_ENOTOWNER;
	snprintf(stub.moved_name, sizeof(stub.moved_name), "log");
	snprintf(stub.now_name, sizeof(stub.now_name), "log2");
	assert_int_equal(fs_remote_rename(&fs, "logs", "app", "log", false), -EAGAIN);
	assert_int_equal(stub.remote_renames, 2);
	assert_int_equal(stub.id, 23);
	assert_int_equal(stub.other_ids, 0);
	assert_int_equal(stub.deletes + stub.renames + stub.gones, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fs_remote_append_at_holder),
		cmocka_unit_test(test_fs_remote_errnos),
		cmocka_unit_test(test_fs_remote_read),
		cmocka_unit_test(test_fs_remote_view),
		cmocka_unit_test(test_fs_remote_unlink),
		cmocka_unit_test(test_fs_remote_trim),
		cmocka_unit_test(test_fs_remote_rename),
		cmocka_unit_test(test_fs_remote_renamed_elsewhere),
		cmocka_unit_test(test_fs_remote_vacant_view),
		cmocka_unit_test(test_fs_remote_stream_moved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
