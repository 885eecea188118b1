/*
 * fuzz_xattr.c - the value parsers behind setfattr (fs/xattr.c
 * fs_xattr_set: user.nova.trim, user.nova.class) and nv_class_parse
 * (meta/streams.h).
 *
 * fs_xattr_set() is a plain function: it needs no FUSE, only a star to
 * hand parsed values to.  This file links fs/xattr.c against stubs of
 * the few star functions it calls, which record what they were given, so
 * the parsers are checked end to end without an engine.
 *
 * Input: u8 sel | rest.
 *   sel & 3   node kind: root, bucket, stream (fs/ns.c maps the follow view
 *             onto these three before calling fs_xattr_set)
 *   sel >> 2  attribute name from names[] below; the last index takes the
 *             name from the input, up to its first NUL
 *   rest      the value, exactly as setxattr(2) passes it: a byte string
 *             of `size` bytes, not NUL-terminated
 *
 * Checks:
 *  - nv_class_parse() accepts exactly "standard" and "express" (each with
 *    any trailing '\n' / NUL bytes: setfattr adds them) and the class it
 *    returns names itself back through nv_class_name().
 *  - fs_xattr_set() returns what xattr.h says for every (kind, name):
 *    -ENOTSUP outside user.nova., for unknown names and for a
 *    read-only one, and for the two writable ones parses the value:
 *      class  as nv_class_parse, and passes the class on;
 *      trim   a decimal sequence number (DESIGN.md 5: "plain decimal"):
 *             digits only, with trailing '\n' / NUL bytes dropped, at
 *             most 31 bytes: the star gets exactly that number; anything
 *             else, in particular white space, a sign or bytes after an
 *             embedded NUL, is -EINVAL and the star gets nothing.
 *  - fs_xattr_list() lists NUL-terminated user.nova. names, never a
 *    stream's trim.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/client.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "engine/stats.h"
#include "fs/remote.h"
#include "fs/xattr.h"
#include "meta/streams.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

/* ------------------------------------------------------------------ */
/* star stubs: record the call, touch nothing                          */

static struct {
	int calls;
	uint64_t seq;
	unsigned cls;
	unsigned durable;
	const char *bucket;
	struct nv_stream *stream;
} got;

int star_stream_trim_seq(struct star *st, struct nv_stream *s, uint64_t seq, uint64_t *old_byte)
{
	(void)st;
	got.calls++;
	got.stream = s;
	got.seq = seq;
	if (old_byte)
		*old_byte = 0;
	return 0;
}

int star_stream_set_class(struct star *st, struct nv_stream *s, unsigned cls)
{
	(void)st;
	got.calls++;
	got.stream = s;
	got.cls = cls;
	return 0;
}

/* As the engine's: the row (not here), then the stream's copy. */
int star_stream_set_durable(struct star *st, struct nv_stream *s, unsigned durable)
{
	(void)st;
	got.calls++;
	got.stream = s;
	got.durable = durable;
	atomic_store(&s->durable, durable);
	return 0;
}

int star_bucket_set_class(struct star *st, const char *name, unsigned cls)
{
	(void)st;
	got.calls++;
	got.bucket = name;
	got.cls = cls;
	return 0;
}

int star_release(struct star *st, struct nv_stream *s, const char *to, struct lease_holder *h)
{
	(void)st;
	memset(h, 0, sizeof(*h));
	snprintf(h->star, sizeof(h->star), "%s", to);
	got.calls++;
	got.stream = s;
	return 0;
}

/* Reached only with a cluster client, which this target never gives. */
int api_client_handoff(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		       const char *stream, uint64_t id, const char *to, struct lease_holder *out)
{
	(void)cl, (void)h, (void)bucket, (void)stream, (void)id, (void)to, (void)out;
	abort();
}
int fs_remote_name_now(struct star *st, struct nv_stream *s, const char *by,
		       const char *asked, int rc, char *buf, size_t size)
{
	(void)st, (void)s, (void)by, (void)asked, (void)rc, (void)buf, (void)size;
	abort();
}

/* Reached only by fs_xattr_get(), which this target does not call. */
int star_leader(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	(void)st, (void)s, (void)h;
	abort();
}
int star_bucket_get(struct star *st, const char *name, struct meta_bucket *out)
{
	(void)st, (void)name, (void)out;
	abort();
}
const char *star_id(const struct star *st)
{
	(void)st;
	abort();
}
uint64_t star_epoch(const struct star *st, unsigned cls)
{
	(void)st, (void)cls;
	abort();
}
struct nv_stats *star_stats(struct star *st)
{
	(void)st;
	abort();
}
void star_get_gauges(struct star *st, struct star_gauges *g)
{
	(void)st, (void)g;
	abort();
}
char *star_stream_layout(struct star *st, struct nv_stream *s, int *err)
{
	(void)st, (void)s, (void)err;
	abort();
}
int star_lead_check(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	(void)st, (void)s, (void)h;
	abort();
}
int star_view_refresh(struct star *st, struct nv_stream *s, enum star_view what)
{
	(void)st, (void)s, (void)what;
	abort();
}
void nv_stats_visit(const struct nv_stats *st, nv_stats_fn fn, void *arg)
{
	(void)st, (void)fn, (void)arg;
	abort();
}

/* ------------------------------------------------------------------ */
/* oracles                                                             */

static const char *const names[] = {
	"user.nova.trim", "user.nova.class", "user.nova.seq", "user.nova.frontier",
	"user.nova.settled", "user.nova.epoch", "user.nova.layout", "user.nova.stats",
	"user.nova.", "user.nova.trimx", "user.nova", "user.other", "trusted.nova.trim",
	"", NULL /* from the input */,
	"user.nova.durable", /* last: the seed corpus's indexes above stay */
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static const char *const ro_stream[] = { "seq", "frontier", "settled", "epoch", "layout",
					 NULL };

/* Trailing '\n' and NUL bytes dropped, as both parsers do. */
static size_t stripped(const uint8_t *v, size_t n)
{
	while (n && (v[n - 1] == '\n' || v[n - 1] == 0))
		n--;
	return n;
}

/* user.nova.leader: 0 for a star id (1-32 of [a-z0-9-], trailing
 * newlines and NULs dropped), else -EINVAL. */
static int leader_oracle(const uint8_t *v, size_t n)
{
	n = stripped(v, n);
	if (n == 0 || n > META_STAR_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '-'))
			return -EINVAL;
	return 0;
}

/* 0 and *cls for the class words, else -EINVAL. */
static int class_oracle(const uint8_t *v, size_t n, unsigned *cls)
{
	n = stripped(v, n);
	if (n == 8 && !memcmp(v, "standard", 8)) {
		*cls = NV_CLASS_STANDARD;
		return 0;
	}
	if (n == 7 && !memcmp(v, "express", 7)) {
		*cls = NV_CLASS_EXPRESS;
		return 0;
	}
	return -EINVAL;
}

/* 0 and *seq for a trim value, else -EINVAL (see the top comment). */
static int trim_oracle(const uint8_t *v, size_t n, uint64_t *seq)
{
	size_t i = 0, digits = 0;
	uint64_t x = 0;

	n = stripped(v, n);
	if (n == 0 || n >= 32)
		return -EINVAL;
	for (; i < n; i++, digits++) {
		if (v[i] < '0' || v[i] > '9')
			return -EINVAL;
		if (x > (UINT64_MAX - (uint64_t)(v[i] - '0')) / 10)
			return -EINVAL; /* ERANGE */
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (!digits)
		return -EINVAL;
	*seq = x;
	return 0;
}

/* 0 and *d for a durable value, else -EINVAL. */
static int durable_oracle(const uint8_t *v, size_t n, enum fs_durable *d)
{
	n = stripped(v, n);
	if (n == 5 && !memcmp(v, "write", 5))
		*d = FS_DURABLE_WRITE;
	else if (n == 5 && !memcmp(v, "fsync", 5))
		*d = FS_DURABLE_FSYNC;
	else
		return -EINVAL;
	return 0;
}

static bool in_list(const char *const *l, const char *n)
{
	for (; *l; l++)
		if (!strcmp(*l, n))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum fs_node_kind kinds[] = { FS_NODE_ROOT, FS_NODE_BUCKET,
						   FS_NODE_STREAM, FS_NODE_STREAM };
	/* The stubs never look inside but for star_stream_set_durable(). */
	static struct nv_stream stream_dummy;
	struct fs_xattr_target t = { .bucket = "bkt", .stream = &stream_dummy };
	struct fuzz_in in;
	struct nv_buf list;
	const uint8_t *val;
	const char *name, *n;
	char *owned = NULL;
	uint64_t want_seq = 0;
	unsigned sel, cls = 99, want_cls = 0;
	enum fs_durable want_dur = FS_DURABLE_DEFAULT;
	size_t vlen;
	int rc, want;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	sel = fuzz_u8(&in);
	t.kind = kinds[sel & 3];
	name = names[(sel >> 2) % NNAMES];
	if (!name) {
		const uint8_t *p = in.p + in.off;
		const uint8_t *z = memchr(p, 0, in.len - in.off);
		size_t l = z ? (size_t)(z - p) : in.len - in.off;

		name = owned = fuzz_strndup(p, l);
		in.off += z ? l + 1 : l;
	}
	val = fuzz_rest(&in, &vlen);
	/* An exactly-sized copy: setxattr values are not NUL-terminated. */
	val = fuzz_memdup(val, vlen);

	/* nv_class_parse on its own. */
	if (vlen) {
		want = class_oracle(val, vlen, &want_cls);
		rc = nv_class_parse((const char *)val, vlen, &cls);
		FUZZ_ASSERT(rc == want);
		if (rc == 0) {
			FUZZ_ASSERT(cls == want_cls);
			FUZZ_ASSERT(nv_class_parse(nv_class_name(cls), strlen(nv_class_name(cls)),
						   &cls) == 0 && cls == want_cls);
		}
	}

	/* fs_xattr_set, against what xattr.h and DESIGN.md say. */
	n = strncmp(name, "user.nova.", 10) ? NULL : name + 10;
	if (!n)
		want = -ENOTSUP;
	else if (!strcmp(n, "trim") && t.kind == FS_NODE_STREAM)
		want = vlen ? trim_oracle(val, vlen, &want_seq) : -EINVAL;
	else if (!strcmp(n, "class") && t.kind != FS_NODE_ROOT)
		want = vlen ? class_oracle(val, vlen, &want_cls) : -EINVAL;
	else if (!strcmp(n, "durable") && t.kind == FS_NODE_STREAM)
		want = durable_oracle(val, vlen, &want_dur);
	else if (!strcmp(n, "leader") && t.kind == FS_NODE_STREAM)
		want = leader_oracle(val, vlen);
	else if ((t.kind == FS_NODE_STREAM && in_list(ro_stream, n)) ||
		 (t.kind == FS_NODE_ROOT && !strcmp(n, "stats")))
		want = -ENOTSUP; /* read-only */
	else
		want = -ENOTSUP;
	memset(&got, 0, sizeof(got));
	rc = fs_xattr_set(NULL, &t, name, vlen ? (const char *)val : "", vlen);
	if (rc != want)
		fprintf(stderr, "fs_xattr_set(kind %d, '%s', %zu bytes) = %d, want %d\n",
			(int)t.kind, name, vlen, rc, want);
	FUZZ_ASSERT(rc == want);
	FUZZ_ASSERT(got.calls == (rc == 0));
	if (rc == 0 && !strcmp(n, "durable")) {
		FUZZ_ASSERT(got.durable == want_dur && got.stream == t.stream &&
			    fs_stream_durable(&stream_dummy) == want_dur);
	} else if (rc == 0 && !strcmp(n, "trim")) { /* rc == 0: n is set */
		if (got.seq != want_seq)
			fprintf(stderr, "trim value parsed as %llu, want %llu\n",
				(unsigned long long)got.seq, (unsigned long long)want_seq);
		FUZZ_ASSERT(got.seq == want_seq && got.stream == t.stream);
	} else if (rc == 0) {
		FUZZ_ASSERT(got.cls == want_cls);
		FUZZ_ASSERT(t.kind == FS_NODE_BUCKET ? got.bucket == t.bucket
						     : got.stream == t.stream);
	}

	/* fs_xattr_remove: only a stream's durable goes (to the default). */
	if (!n)
		want = -ENODATA;
	else if (!strcmp(n, "durable") && t.kind == FS_NODE_STREAM)
		want = 0;
	else
		want = -EPERM;
	memset(&got, 0, sizeof(got));
	rc = fs_xattr_remove(NULL, &t, name);
	FUZZ_ASSERT(rc == want && got.calls == (rc == 0));
	if (rc == 0)
		FUZZ_ASSERT(got.durable == FS_DURABLE_DEFAULT &&
			    fs_stream_durable(&stream_dummy) == FS_DURABLE_DEFAULT);

	/* The listing of the same node. */
	nv_buf_init(&list, 4096);
	FUZZ_ASSERT(fs_xattr_list(&t, &list) == 0);
	for (size_t o = 0; o < list.len;) {
		const char *e = memchr(list.ptr + o, 0, list.len - o);

		FUZZ_ASSERT(e && !strncmp((const char *)list.ptr + o, "user.nova.", 10));
		FUZZ_ASSERT(t.kind != FS_NODE_STREAM ||
			    strcmp((const char *)list.ptr + o, "user.nova.trim"));
		o = (size_t)((const uint8_t *)e - list.ptr) + 1;
	}
	nv_buf_free(&list);
	free((void *)val);
	free(owned);
	return 0;
}
