/*
 * gen_corpus.c - writes the seed corpora of the fuzz targets with the
 * real encoders.
 *
 * For: regenerating tests/fuzz/corpus/<target>/ when a format changes
 * (`make fuzz-corpus`, which runs `tests/fuzz/gen_corpus
 * $(srcdir)/tests/fuzz/corpus`).  Every valid seed comes from the
 * encoder of its format (bundle_encode, meta_*_encode, the key builders,
 * chain_fence_encode), so a seed is exactly what novafs writes; each
 * target also gets a few hand-made invalid seeds (truncated, flipped,
 * oversized counts).  Output is deterministic: same tree, same files.
 * Not for: regression inputs (tests/fuzz/regressions/, kept by hand).
 *
 * Seeds carry the target's input layout (the header comment of each
 * tests/fuzz/fuzz_<target>.c): prefix bytes (fix flags, selectors, key
 * parts) come first, then the encoded bytes.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/bundle.h"
#include "engine/chain.h"
#include "engine/store/dir/segfmt.h"
#include "meta/chains.h"
#include "meta/cursors.h"
#include "meta/keys.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "meta/leases.h"
#include "meta/stars.h"
#include "meta/streams.h"
#include "meta/tuple.h"
#include "src/base/buf.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"

static const char *root;

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s\n", what);
	exit(1);
}

/* Write the concatenation of (ptr, len) pairs, ended by NULL, to
 * ROOT/target/name. */
static void put(const char *target, const char *name, ...)
{
	char path[4096];
	va_list ap;
	FILE *fp;
	const void *p;

	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0777) && errno != EEXIST)
		die(path);
	snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
	fp = fopen(path, "wb");
	if (!fp)
		die(path);
	va_start(ap, name);
	while ((p = va_arg(ap, const void *))) {
		size_t n = va_arg(ap, size_t);

		if (n && fwrite(p, 1, n, fp) != n)
			die(path);
	}
	va_end(ap);
	if (fclose(fp))
		die(path);
}

static void put_str(const char *target, const char *name, const char *s)
{
	put(target, name, s, strlen(s), NULL);
}

static void le64(uint8_t b[8], uint64_t v)
{
	nv_put_le64(b, v);
}

/* ------------------------------------------------------------------ */
/* bundles                                                             */

struct obj {
	uint8_t *p;
	size_t size;
	uint64_t footer_off;
	uint32_t n;
};

/* Frames of nrec records of stream-dependent text (compressible) or
 * pseudo-random bytes. */
static uint8_t *frames(uint32_t nrec, uint32_t body, int text, uint64_t ts0, size_t *len)
{
	uint8_t *f = malloc((size_t)nrec * (BUNDLE_FRAME_HDR + body));
	uint32_t x = 2463534242u;
	size_t o = 0;

	if (!f)
		die("ENOMEM");
	for (uint32_t r = 0; r < nrec; r++) {
		uint32_t bl = body - (r % 3); /* a little variety */

		bundle_frame_hdr(f + o, bl, ts0 + r * 1000);
		o += BUNDLE_FRAME_HDR;
		for (uint32_t i = 0; i < bl; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			f[o + i] = text ? (uint8_t)"novafs stream record "[(r + i) % 21] : (uint8_t)x;
		}
		o += bl;
	}
	*len = o;
	return f;
}

static struct obj encode(const struct bundle_run *runs, size_t n, size_t target, int level)
{
	struct bundle_enc_opts opts = { .chunk_target = target, .zstd_level = level };
	struct bundle_out out;
	struct obj o;
	size_t pos = 0;

	if (bundle_encode(runs, n, &opts, &out))
		die("bundle_encode");
	o.p = malloc(out.size ? out.size : 1);
	if (!o.p)
		die("ENOMEM");
	for (int i = 0; i < out.iovcnt; i++) {
		memcpy(o.p + pos, out.iov[i].iov_base, out.iov[i].iov_len);
		pos += out.iov[i].iov_len;
	}
	o.size = out.size;
	o.footer_off = out.footer_off;
	o.n = out.nentries;
	bundle_out_free(&out);
	return o;
}

static void gen_bundles(void)
{
	size_t l1, l2, l3;
	uint8_t *f1 = frames(6, 40, 1, 1700000000000000000ull, &l1);
	uint8_t *f2 = frames(3, 300, 0, 1700000000000500000ull, &l2);
	uint8_t *f3 = frames(1, 2000, 1, 1700000000000900000ull, &l3);
	struct bundle_run runs[3] = {
		{ .stream_id = 7, .first_seq = 0, .first_byte = 0, .frames = f1,
		  .frames_len = l1, .nrec = 6 },
		{ .stream_id = 9, .first_seq = 100, .first_byte = 30000, .frames = f2,
		  .frames_len = l2, .nrec = 3 },
		{ .stream_id = 12, .first_seq = 5, .first_byte = 4096, .frames = f3,
		  .frames_len = l3, .nrec = 1 },
	};
	struct {
		const char *name;
		struct obj o;
	} objs[] = {
		{ "raw-3streams", encode(runs, 3, 1 << 20, 0) },
		{ "zstd-3streams", encode(runs, 3, 1 << 20, 3) },
		{ "raw-small-chunks", encode(runs, 3, 100, 0) },
		{ "zstd-small-chunks", encode(runs, 2, 150, 1) },
		{ "empty", encode(NULL, 0, 1, 0) },
	};
	uint8_t fix0 = 0, fixall = 0xff, hdr[8];
	char name[128];

	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
		struct obj *o = &objs[i].o;
		size_t wlen = o->size - o->footer_off;
		uint8_t *bad;

		/* bundle_object: fix | object */
		snprintf(name, sizeof(name), "%s", objs[i].name);
		put("bundle_object", name, &fix0, (size_t)1, o->p, o->size, NULL);
		snprintf(name, sizeof(name), "%s-fixall", objs[i].name);
		put("bundle_object", name, &fixall, (size_t)1, o->p, o->size, NULL);

		/* bundle_footer: win_off | fix | window */
		le64(hdr, o->footer_off);
		snprintf(name, sizeof(name), "%s", objs[i].name);
		put("bundle_footer", name, hdr, (size_t)8, &fix0, (size_t)1,
		    o->p + o->footer_off, wlen, NULL);
		snprintf(name, sizeof(name), "%s-fixall", objs[i].name);
		put("bundle_footer", name, hdr, (size_t)8, &fixall, (size_t)1,
		    o->p + o->footer_off, wlen, NULL);

		/* Invalid: a flipped entry byte (CRC mismatch), a truncated
		 * window, a window claimed at the wrong offset. */
		bad = malloc(o->size);
		if (!bad)
			die("ENOMEM");
		memcpy(bad, o->p, o->size);
		bad[o->footer_off] ^= 0x10;
		snprintf(name, sizeof(name), "%s-flipped", objs[i].name);
		put("bundle_object", name, &fix0, (size_t)1, bad, o->size, NULL);
		put("bundle_footer", name, hdr, (size_t)8, &fix0, (size_t)1,
		    bad + o->footer_off, wlen, NULL);
		snprintf(name, sizeof(name), "%s-truncated", objs[i].name);
		put("bundle_object", name, &fix0, (size_t)1, o->p, o->size - 1, NULL);
		put("bundle_footer", name, hdr, (size_t)8, &fix0, (size_t)1,
		    o->p + o->footer_off + 1, wlen - 1, NULL);
		le64(hdr, o->footer_off + 64);
		snprintf(name, sizeof(name), "%s-wrong-offset", objs[i].name);
		put("bundle_footer", name, hdr, (size_t)8, &fix0, (size_t)1,
		    o->p + o->footer_off, wlen, NULL);
		free(bad);

		/* bundle_chunk: entry | fix | chunk, for the first entries. */
		for (uint32_t k = 0; k < o->n && k < 3; k++) {
			const uint8_t *e = o->p + o->footer_off + (size_t)k * BUNDLE_ENTRY_SIZE;
			uint64_t off = nv_get_le64(e + 24);
			uint32_t clen = nv_get_le32(e + 44);
			uint8_t fixc = 0;

			snprintf(name, sizeof(name), "%s-%u-%s", objs[i].name, k,
				 e[56] ? "zstd" : "raw");
			put("bundle_chunk", name, e, (size_t)BUNDLE_ENTRY_SIZE, &fixc, (size_t)1,
			    o->p + off, (size_t)clen, NULL);
			if (clen > 1) {
				snprintf(name, sizeof(name), "%s-%u-short", objs[i].name, k);
				put("bundle_chunk", name, e, (size_t)BUNDLE_ENTRY_SIZE, &fixc,
				    (size_t)1, o->p + off, (size_t)clen - 1, NULL);
			}
		}
		free(o->p);
	}
	free(f1);
	free(f2);
	free(f3);
}

/* ------------------------------------------------------------------ */
/* tuple keys                                                          */

static void gen_tuples(void)
{
	struct nv_buf a, b;
	uint8_t pre[2];
	int rc = 0;

	nv_buf_init(&a, KV_KEY_MAX);
	nv_buf_init(&b, KV_KEY_MAX);
	/* pairs of keys of the same space, and one of two spaces */
	rc |= key_ref(&a, 7, 100);
	rc |= key_ref(&b, 7, 99);
	pre[0] = 255, pre[1] = (uint8_t)a.len;
	put("tuple", "ref-pair", pre, (size_t)2, a.ptr, a.len, b.ptr, b.len, NULL);
	rc |= key_stream_name(&a, "logs", "app");
	rc |= key_stream_name(&b, "logs", "app.1");
	pre[0] = 3, pre[1] = (uint8_t)a.len;
	put("tuple", "stream-name-pair", pre, (size_t)2, a.ptr, a.len, b.ptr, b.len, NULL);
	rc |= key_marker(&a, 1, "star-a", 3, 17);
	rc |= key_chain(&b, 1, "star-a", 3);
	pre[0] = 8, pre[1] = (uint8_t)a.len;
	put("tuple", "marker-chain", pre, (size_t)2, a.ptr, a.len, b.ptr, b.len, NULL);
	/* a string holding zero bytes (escaped 00 FF) */
	nv_buf_reset(&a);
	rc |= nv_tup_add_str(&a, "sn");
	rc |= nv_tup_add_strn(&a, "a\0b\0", 4);
	rc |= nv_tup_add_u64(&a, 0);
	pre[0] = 255, pre[1] = (uint8_t)a.len;
	put("tuple", "escaped-zeros", pre, (size_t)2, a.ptr, a.len, NULL);
	/* a prefix end (not a key: 0xFF) and junk after a zero */
	rc |= key_refs_of(&a, 7);
	rc |= nv_tup_prefix_end(&a);
	pre[0] = 255, pre[1] = 0;
	put("tuple", "prefix-end", pre, (size_t)2, a.ptr, a.len, NULL);
	put("tuple", "bad-escape", pre, (size_t)2, "\x02" "ab\x00\x01", (size_t)5, NULL);
	put("tuple", "short-u64", pre, (size_t)2, "\x15\x00\x00\x01", (size_t)4, NULL);
	if (rc)
		die("key builders");
	nv_buf_free(&a);
	nv_buf_free(&b);
}

/* ------------------------------------------------------------------ */
/* rows                                                                */

static void gen_rows(void)
{
	struct nv_buf v;
	uint8_t sel, b8[8];
	int rc = 0;

	nv_buf_init(&v, KV_VAL_MAX);

	/* streams.h */
	{
		struct meta_stream s = { .id = 42, .bucket = "logs", .name = "app.log",
					 .cls = NV_CLASS_EXPRESS, .created_ns = 1700000000000000000ull,
					 .trim_seq = 10, .trim_byte = 4096,
					 .own = { 1000, 1000, 0640 } };
		struct meta_bucket bk = { .name = "logs", .id = 3, .created_ns = 1700000000000000000ull,
					  .default_class = NV_CLASS_STANDARD,
					  .own = { 1000, 100, 02750 } };
		uint8_t l = 4;
		/* A v1 row (before owners): the v2 row without its owner
		 * (u32 uid, u32 gid, u16 mode), version byte 1. */
		const size_t own_len = 10;

		sel = 0;
		rc |= meta_stream_encode(&s, &v);
		put("row_streams", "stream", &sel, (size_t)1, v.ptr, v.len, NULL);
		v.ptr[0] = 1;
		put("row_streams", "stream-v1", &sel, (size_t)1, v.ptr, v.len - own_len, NULL);
		s.deleted_ns = 1700000000000000001ull;
		rc |= meta_stream_encode(&s, &v);
		put("row_streams", "stream-deleted", &sel, (size_t)1, v.ptr, v.len, NULL);
		put("row_streams", "stream-truncated", &sel, (size_t)1, v.ptr, v.len - 3, NULL);
		s.deleted_ns = 0;
		s.durable = META_DURABLE_FSYNC; /* v3: user.nova.durable kept */
		rc |= meta_stream_encode(&s, &v);
		put("row_streams", "stream-durable", &sel, (size_t)1, v.ptr, v.len, NULL);
		sel = 1;
		rc |= meta_bucket_encode(&bk, &v);
		put("row_streams", "bucket", &sel, (size_t)1, &l, (size_t)1, "logs", (size_t)4,
		    v.ptr, v.len, NULL);
		v.ptr[0] = 1;
		put("row_streams", "bucket-v1", &sel, (size_t)1, &l, (size_t)1, "logs", (size_t)4,
		    v.ptr, v.len - own_len, NULL);
		v.ptr[0] = 2;
		l = 64;
		put("row_streams", "bucket-long-name", &sel, (size_t)1, &l, (size_t)1,
		    "0123456789012345678901234567890123456789012345678901234567890123", (size_t)64,
		    v.ptr, v.len, NULL);
	}

	/* refs.h: a span ref and a catalog row */
	{
		struct meta_ref r;
		struct meta_ref_slot sl[3] = {
			{ .slot = 4, .first_seq = 100, .first_byte = 5000, .footer_off = 9000,
			  .footer_len = 96 },
			{ .slot = 5, .first_seq = 130, .first_byte = 6000, .footer_off = 700,
			  .footer_len = 160 },
			{ .slot = 9, .first_seq = 131, .first_byte = 6000, .footer_off = 12000,
			  .footer_len = 96 },
		};
		struct meta_ref_obj ob[2] = {
			{ .first_seq = 0, .first_byte = 0, .epoch = 2, .rev = 0, .footer_off = 80000,
			  .footer_len = 224, .max_ts = 1700000000000000000ull },
			{ .first_seq = 900, .first_byte = 8 << 20, .epoch = 3, .rev = 2,
			  .footer_off = 4000, .footer_len = 96, .max_ts = 1700000000000000009ull },
		};

		le64(b8, 7);
		meta_ref_init(&r);
		r.kind = META_REF_SPAN;
		r.first_seq = 100, r.end_seq = 140, r.first_byte = 5000, r.end_byte = 7000;
		r.max_ts = 1700000000000000000ull, r.cls = 1, r.epoch = 3;
		strcpy(r.star, "star-a");
		for (int i = 0; i < 3; i++)
			rc |= meta_ref_add_slot(&r, &sl[i]);
		rc |= meta_ref_encode(&r, &v);
		put("row_ref", "span", b8, (size_t)8, v.ptr, v.len, NULL);
		put("row_ref", "span-truncated", b8, (size_t)8, v.ptr, v.len - 1, NULL);
		meta_ref_clear(&r);
		r.kind = META_REF_CATALOG;
		r.first_seq = 0, r.end_seq = 1000, r.first_byte = 0, r.end_byte = 9 << 20;
		strcpy(r.bucket, "logs");
		for (int i = 0; i < 2; i++)
			rc |= meta_ref_add_obj(&r, &ob[i]);
		rc |= meta_ref_encode(&r, &v);
		put("row_ref", "catalog", b8, (size_t)8, v.ptr, v.len, NULL);
		v.ptr[1] = 3; /* an unknown kind */
		put("row_ref", "unknown-kind", b8, (size_t)8, v.ptr, v.len, NULL);
		meta_ref_clear(&r);
	}

	/* chains.h */
	{
		struct meta_chain c = { .cls = 0, .star = "star-a", .epoch = 3,
					.state = CHAIN_FENCED, .checkpoint = 40, .cut = 41,
					.created_ns = 1700000000000000000ull };

		rc |= meta_chain_encode(&c, &v);
		put("row_chain", "fenced", v.ptr, v.len, NULL);
		c.state = CHAIN_LIVE, c.cut = 0;
		rc |= meta_chain_encode(&c, &v);
		put("row_chain", "live", v.ptr, v.len, NULL);
		c.state = CHAIN_SETTLED, c.cut = 40, c.clean = 1;
		c.settled_ns = 1700000000000000099ull;
		rc |= meta_chain_encode(&c, &v);
		put("row_chain", "settled-clean", v.ptr, v.len, NULL);
		c.cut = 39; /* checkpoint past the cut */
		rc |= meta_chain_encode(&c, &v);
		put("row_chain", "bad-cut", v.ptr, v.len, NULL);
	}

	/* markers.h */
	{
		struct meta_marker_stream ms[3] = {
			{ .stream_id = 7, .first_seq = 100, .bytes = 2000 },
			{ .stream_id = 9, .first_seq = 3, .bytes = 9 << 20 },
			{ .stream_id = 40, .first_seq = 0, .bytes = 1 },
		};
		struct meta_marker m = { .cls = 1, .star = "star-a", .epoch = 3, .first_slot = 4,
					 .end_slot = 10, .birth_ns = 1700000000000000000ull,
					 .ripe_ns = 1700000005000000000ull, .crossed = 1,
					 .nstreams = 3, .streams = ms };

		rc |= meta_marker_encode(&m, &v);
		put("row_marker", "three-streams", v.ptr, v.len, NULL);
		m.nstreams = 0;
		rc |= meta_marker_encode(&m, &v);
		put("row_marker", "no-streams", v.ptr, v.len, NULL);
		ms[1].stream_id = 7, m.nstreams = 3; /* unsorted */
		rc |= meta_marker_encode(&m, &v);
		put("row_marker", "unsorted", v.ptr, v.len, NULL);
	}

	/* cursors.h */
	{
		struct meta_cursors c = { .cls = 0, .star = "star-b", .epoch = 9,
					  .settle_frontier = 50, .rewritten = 40, .trimmed = 20,
					  .grace_target = 30, .grace_since_ns = 1700000000000000000ull };

		rc |= meta_cursors_encode(&c, &v);
		put("row_cursors", "cursors", v.ptr, v.len, NULL);
		c.grace_target = 45;
		rc |= meta_cursors_encode(&c, &v);
		put("row_cursors", "bad-grace", v.ptr, v.len, NULL);
	}

	/* stars.h */
	{
		struct meta_star s = { .id = "star-a", .started_ns = 1700000000000000000ull,
				       .pid = 4242, .host = "host-1.example", .dir = "/var/lib/novafs",
				       .addr = "10.0.0.1:7070", .location = "z1",
				       .state = STAR_RUNNING, .epochs = { 3, 4 } };
		uint8_t l = 6;

		rc |= meta_star_encode(&s, &v);
		put("row_star", "running", &l, (size_t)1, "star-a", (size_t)6, v.ptr, v.len, NULL);
		s.state = STAR_CLOSED;
		rc |= meta_star_encode(&s, &v);
		put("row_star", "closed", &l, (size_t)1, "star-a", (size_t)6, v.ptr, v.len, NULL);
		put("row_star", "bad-id", &l, (size_t)1, "Star_A", (size_t)6, v.ptr, v.len, NULL);
	}

	/* leases.h */
	{
		struct meta_lease ls = { .star = "star-a", .addr = "10.0.0.1:7070", .epoch = 7 };

		rc |= meta_lease_encode(&ls, &v);
		put("row_lease", "held", v.ptr, v.len, NULL);
		ls.addr[0] = 0;
		rc |= meta_lease_encode(&ls, &v);
		put("row_lease", "no-api", v.ptr, v.len, NULL);
	}
	if (rc)
		die("row encoders");
	nv_buf_free(&v);
}

/* ------------------------------------------------------------------ */
/* fence, xattr values, option strings                                 */

static void gen_fence(void)
{
	uint8_t f[CHAIN_FENCE_SIZE], fix0 = 0, fix1 = 1;

	chain_fence_encode(f, 3, 41);
	put("fence", "valid", &fix0, (size_t)1, f, (size_t)CHAIN_FENCE_SIZE, NULL);
	put("fence", "truncated", &fix0, (size_t)1, f, (size_t)CHAIN_FENCE_SIZE - 1, NULL);
	f[31] = 1; /* reserved byte set */
	put("fence", "reserved-set", &fix1, (size_t)1, f, (size_t)CHAIN_FENCE_SIZE, NULL);
	put("fence", "bundle-magic", &fix1, (size_t)1, BUNDLE_MAGIC "\0\0\0\0\0\0\0\0\0\0\0\0"
	    "\0\0\0\0\0\0\0\0\0\0\0\0", (size_t)CHAIN_FENCE_SIZE, NULL);
}

/* A segment image of n records of the directory store (segfmt.h), as
 * seg.c writes them: header, key, payload, zeros to 8 bytes.  Returns
 * its size; buf has room for 4096 bytes. */
static size_t segment_image(uint8_t *buf, unsigned n, bool dead_first)
{
	size_t off = 0;

	memset(buf, 0, 4096);
	for (unsigned i = 0; i < n; i++) {
		char key[80], body[64];
		size_t klen, len;
		uint32_t crc;

		klen = (size_t)snprintf(key, sizeof(key),
					"chains/standard/s1/0000000000000001/%016x", i);
		len = (size_t)snprintf(body, sizeof(body), "slot %u payload", i);
		crc = dir_seg_encode_head(buf + off, key, klen, len);
		memcpy(buf + off + DIR_SEG_HDR, key, klen);
		memcpy(buf + off + DIR_SEG_HDR + klen, body, len);
		dir_seg_set_data_crc(buf + off, nv_crc32c(crc, body, len));
		if (dead_first && i == 0)
			memcpy(buf + off + DIR_SEG_STATE_OFF, "DEAD", 4);
		off += dir_seg_rec_size(klen, len);
	}
	return off;
}

static void gen_dir_segment(void)
{
	static uint8_t img[4096];
	uint8_t fix0 = 0, fix1 = 1;
	size_t n = segment_image(img, 3, false);

	put("dir_segment", "three", &fix0, (size_t)1, img, n, NULL);
	put("dir_segment", "three-zero-tail", &fix0, (size_t)1, img, n + 64, NULL);
	put("dir_segment", "torn-last", &fix0, (size_t)1, img, n - 5, NULL);
	img[40] ^= 0x10; /* a flipped key byte of the first record */
	put("dir_segment", "flipped-fixed", &fix1, (size_t)1, img, n, NULL);
	put("dir_segment", "flipped", &fix0, (size_t)1, img, n, NULL);
	n = segment_image(img, 2, true);
	put("dir_segment", "dead-first", &fix0, (size_t)1, img, n, NULL);
}

/* sel = name index << 2 | kind (0 root, 1 bucket, 2 stream): see
 * fuzz_xattr.c. */
static void xattr(const char *name, unsigned sel, const char *value, size_t n)
{
	uint8_t s = (uint8_t)sel;

	put("xattr", name, &s, (size_t)1, value, n, NULL);
}

/* sel % 8 picks the parser: see fuzz_api_route.c. */
static void api(const char *name, unsigned sel, const char *text)
{
	uint8_t s = (uint8_t)sel;

	put("api_route", name, &s, (size_t)1, text, strlen(text), NULL);
}

static void gen_api(void)
{
	api("append", 1, "/v1/streams/logs/app/records");
	api("rename", 1, "/v1/streams/logs/app/rename");
	api("read", 0, "/v1/streams/logs/app/bytes");
	api("subscribe", 0, "/v1/streams/logs/app/subscribe");
	api("escaped", 0, "/v1/streams/logs/a%20b/end");
	api("dotdot", 0, "/v1/streams/../app/end");
	api("metrics", 0, "/metrics");
	api("nudge-get", 0, "/v1/nudge");
	api("frame-data", 2, "{\"offset\":5,\"length\":3}");
	api("frame-heartbeat", 2, "{\"heartbeat\":true,\"end\":9}");
	api("frame-not-owner", 2,
	    "{\"error\":\"not_owner\",\"leader\":\"b\",\"address\":\"h:1\",\"epoch\":2}");
	api("not-owner", 3,
	    "{\"error\":\"not_owner\",\"leader\":\"b\",\"address\":\"h:1\",\"epoch\":2}");
	api("u64-max", 4, "18446744073709551615");
	api("listen-v6", 4, "[::1]:8080");
	api("handoff", 5, "{\"to\":\"star-2\"}");
	api("reply", 5, "{\"seq\":3,\"end\":{\"seq\":4,\"byte\":10}}");
	api("plan-path", 0, "/v1/streams/logs/app/plan");
	api("plan-query-seq", 6, "12\n\n256");
	api("plan-query-offset", 6, "\n4096\n1");
	api("plan-query-both", 6, "1\n2\n");
	api("plan-raw", 7,
	    "{\"stream_id\":7,\"vending\":\"raw\",\"trim\":{\"seq\":0,\"byte\":0},"
	    "\"entries\":[{\"key\":\"streams/b/7/0000000000000001/0000000000000000\","
	    "\"epoch\":1,\"revision\":0,\"first_seq\":0,\"end_seq\":3,\"first_byte\":0,"
	    "\"end_byte\":30,\"footer\":[90,96],\"data\":[0,90]}],\"residual_seq\":3,"
	    "\"residual_byte\":30,\"expires\":1700000030,\"ttl_s\":30}");
	api("plan-signed-cursor", 7,
	    "{\"stream_id\":7,\"vending\":\"signed\",\"trim\":{\"seq\":0,\"byte\":0},"
	    "\"entries\":[{\"key\":\"streams/b/7/0000000000000001/0000000000000000~1\","
	    "\"epoch\":1,\"revision\":1,\"first_seq\":0,\"end_seq\":3,\"first_byte\":0,"
	    "\"end_byte\":30,\"footer\":[90,96],\"data\":[0,90],"
	    "\"url\":\"http://127.0.0.1:9000/b/k?X-Amz-Signature=00\"}],\"residual_seq\":3,"
	    "\"residual_byte\":30,\"cursor\":3,\"expires\":1700000030,\"ttl_s\":30}");
}

/* sel & 1: keys; else sel >> 1 the present query values: see
 * fuzz_gw_req.c.  fields is n bytes of NUL-separated fields. */
static void gw(const char *name, unsigned sel, const char *fields, size_t n)
{
	uint8_t s = (uint8_t)sel;

	put("gw_req", name, &s, (size_t)1, fields, n, NULL);
}

#define GW(name, sel, lit) gw(name, sel, lit, sizeof(lit) - 1)

static void gen_gw(void)
{
	GW("records-seq", (1 | 4 | 8) << 1, "GET\0/v1/streams/logs/app/records\0" "42\0\0" "10\0" "4096");
	GW("records-offset", (2) << 1, "GET\0/v1/streams/logs/app/records\0\0" "1234");
	GW("records-both", (1 | 2) << 1, "GET\0/v1/streams/logs/app/records\0" "1\0" "2");
	GW("records-limit-0", (4) << 1, "GET\0/v1/streams/logs/app/records\0\0\0" "0");
	GW("events-resume", (1 | 16) << 1, "GET\0/v1/streams/logs/app/events\0" "3\0\0\0\0" "999");
	GW("events-bad-id", (16) << 1, "GET\0/v1/streams/logs/app/events\0\0\0\0\0" "12abc");
	GW("end", 0, "GET\0/v1/streams/logs/a%20b/end");
	GW("dotdot", 0, "GET\0/v1/streams/logs/../records");
	GW("post", 0, "POST\0/v1/streams/logs/app/records");
	GW("healthz", 0, "GET\0/healthz");
	GW("keys", 1, "# keys\nlogs 0123456789abcdef-one\n* 0123456789abcdef-all\n");
	GW("keys-other-bucket", 1, "other 0123456789abcdef-one\r\n");
	GW("keys-short", 1, "logs short\n");
	GW("keys-bad-bucket", 1, "Bad*Bucket 0123456789abcdef-one\n");
}

static void gen_xattr(void)
{
	xattr("trim-42", 0 << 2 | 2, "42", 2);
	xattr("trim-42-newline", 0 << 2 | 2, "42\n", 3);
	xattr("trim-max", 0 << 2 | 2, "18446744073709551615", 20);
	xattr("trim-overflow", 0 << 2 | 2, "18446744073709551616", 20);
	xattr("trim-negative", 0 << 2 | 2, "-1", 2);
	xattr("trim-on-bucket", 0 << 2 | 1, "5", 1);
	xattr("class-express", 1 << 2 | 2, "express\n", 8);
	xattr("class-standard-bucket", 1 << 2 | 1, "standard", 8);
	xattr("class-on-root", 1 << 2 | 0, "standard", 8);
	xattr("class-bad", 1 << 2 | 2, "fast", 4);
	xattr("seq-read-only", 2 << 2 | 2, "1", 1);
	xattr("stats-read-only", 7 << 2 | 0, "{}", 2);
	xattr("other-namespace", 11 << 2 | 2, "x", 1);
	xattr("name-from-input", 14 << 2 | 2, "user.nova.trim\0" "7", 16);
	xattr("durable-fsync", 15 << 2 | 2, "fsync\n", 6);
	xattr("durable-bad", 15 << 2 | 3, "bogus", 5);
}

static void gen_options(void)
{
	put_str("failpoint", "crash", "chain.before_put=crash");
	put_str("failpoint", "error-range", "store.get=error:5@2-4,meta.commit=error");
	put_str("failpoint", "delay", "absorb.after_refs=delay:10@3");
	put_str("failpoint", "unknown", "nosuch.point=crash");
	put_str("failpoint", "empty-items", ",,trim.before_delete=error,");

	put_str("log_debug", "two", "absorb,chain");
	put_str("log_debug", "plus-colon", "read+store:meta");
	put_str("log_debug", "all", "all");
	put_str("log_debug", "unknown", "absorb,bogus,chain");

	put_str("store_names", "slot-key", "chains/standard/star-a/0000000000000003/0000000000000029");
	put_str("store_names", "settled-key", "streams/logs/42/0000000000000003/0000000000000000~2");
	put_str("store_names", "dotdot", "streams/../etc");
	put_str("store_names", "empty-component", "a//b");
	put_str("store_names", "dir-relative", "dir:relative/path");
	put_str("store_names", "s3-path-after-bucket", "s3://bucket/prefix?region=x");
	put_str("store_names", "s3-endpoint",
		"s3://my-bucket?endpoint=http://127.0.0.1:9000&access_key=ak&secret_key=sk"
		"&path_style=1&prefix=novafs/a&zone=z1&retries=2&max_connections=4");
	put_str("store_names", "s3-aws",
		"s3://my.bucket-1?region=eu-west-1&access_key=AKIA&secret_key=s%2Fk"
		"&sign_payload=1&list_max_keys=500&connect_timeout_ms=100");
	put_str("store_names", "s3-ipv6", "s3://bkt?endpoint=https://[::1]:8443&access_key=a"
		"&secret_key=b&ca_file=/etc/ssl/ca.pem&request_timeout_ms=1000");
	put_str("store_names", "s3-no-credentials", "s3://bucket");
	put_str("store_names", "s3-twice", "s3://bucket?region=a&region=b");
	put_str("store_names", "set-two-zones",
		"s3://b-one?access_key=a&secret_key=b&zone=z1;s3://b-two?access_key=a"
		"&secret_key=b&zone=z2");
	put_str("store_names", "set-empty-members", ";;s3://bkt?access_key=a&secret_key=b;");

	put_str("fault_spec", "all-items",
		"put_error=0.1:get_error=0.05,flip=0.01,short=0.2,full_after=100000,"
		"latency_ms=1,prefix=chains/,seed=7");
	put_str("fault_spec", "full", "full=1");
	put_str("fault_spec", "bad-prob", "flip=2");
	put_str("fault_spec", "unknown", "bogus=1");
}

/* S3 response bodies for the XML reader (engine/store/s3/xml.h). */
static void gen_xml(void)
{
	put_str("s3_xml", "list",
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		"<Name>bkt</Name><Prefix>chains/</Prefix><KeyCount>2</KeyCount>"
		"<MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>"
		"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
		"<Contents><Key>chains/standard/a/0000000000000001/0000000000000000</Key>"
		"<LastModified>2026-11-29T12:00:00.000Z</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag>"
		"<Size>4096</Size><StorageClass>STANDARD</StorageClass></Contents>"
		"<Contents><Key>a&amp;b&#x20;&#169;&#65536;</Key><Size>0</Size></Contents>"
		"</ListBucketResult>");
	put_str("s3_xml", "error",
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
		"<Message>The resource you requested does not exist</Message>"
		"<Resource>/bkt/x</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>");
	put_str("s3_xml", "delete-result",
		"<DeleteResult><Deleted><Key>a</Key></Deleted><Error><Key>b</Key>"
		"<Code>AccessDenied</Code><Message>Access Denied</Message></Error></DeleteResult>");
	put_str("s3_xml", "initiate",
		"<InitiateMultipartUploadResult><Bucket>bkt</Bucket><Key>streams/k</Key>"
		"<UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>"
		"</InitiateMultipartUploadResult>");
	put_str("s3_xml", "complete-namespaced",
		"<s3:CompleteMultipartUploadResult xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		"<s3:Location>http://bkt.s3.amazonaws.com/k</s3:Location><s3:ETag>\"3858f62230ac3c915f300c664312c11f-9\"</s3:ETag>"
		"</s3:CompleteMultipartUploadResult>");
	put_str("s3_xml", "copy-part-cdata-comment",
		"<!-- a comment --><?pi data?><CopyPartResult><LastModified>2026-11-29T12:00:00Z"
		"</LastModified><ETag><![CDATA[\"b54357faf0632cce46e942fa68356b38\"]]></ETag>"
		"</CopyPartResult>\n<!-- trailing -->\n");
	put_str("s3_xml", "doctype", "<!DOCTYPE x [<!ENTITY a \"b\">]><x>&a;</x>");
	put_str("s3_xml", "unclosed", "<a><b>text</b>");
	put_str("s3_xml", "mismatched", "<a><b></a></b>");
	put_str("s3_xml", "bad-reference", "<a>&#0;</a>");
	put_str("s3_xml", "two-roots", "<a/><b/>");
}

/* etcd gateway answers (meta/etcd/internal.h decoders): a selector byte
 * (0 range, 1 txn, 2 keepalive, 3 watch line), then the body.  Keys are
 * base64 of "pre/" + key, the prefix fuzz_etcd_json.c gives its backend. */
static void put_etcd(const char *name, uint8_t sel, const char *body)
{
	put("etcd_json", name, &sel, (size_t)1, body, strlen(body), NULL);
}

static void gen_etcd(void)
{
	put_etcd("keepalive-huge", 2,
		 "{\"ID\":\"1\",\"TTL\":\"99999999999\"}");
	put_etcd("keepalive-lost", 2,
		 "{\"result\":{\"header\":{\"revision\":\"8\"},\"ID\":\"7587862\"}}");
	put_etcd("keepalive-ok", 2,
		 "{\"result\":{\"header\":{\"revision\":\"8\"},\"ID\":\"7587862\",\"TTL\":\"10\"}}");
	put_etcd("range-empty", 0,
		 "{\"header\":{\"revision\":\"3\"}}");
	put_etcd("range-foreign", 0,
		 "{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"key\":\"b3RoZXIvaw==\",\"value\":\"!!!!\"}]}");
	put_etcd("range-two", 0,
		 "{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":\"17\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"cHJlL3JlZjE=\",\"create_revision\":\"5\",\"mod_revision\":\"9\",\"version\":\"2\",\"value\":\"dmFsdWU=\"},{\"key\":\"cHJlL3g=\",\"mod_revision\":\"12\",\"value\":\"\"}],\"count\":\"2\"}");
	put_etcd("txn-failed", 1,
		 "{\"header\":{\"revision\":\"44\"}}");
	put_etcd("txn-ok", 1,
		 "{\"header\":{\"revision\":\"44\"},\"succeeded\":true,\"responses\":[{\"response_put\":{\"header\":{\"revision\":\"44\"}}}]}");
	put_etcd("watch-compacted", 3,
		 "{\"result\":{\"header\":{\"revision\":\"30\"},\"compact_revision\":\"25\",\"canceled\":true}}");
	put_etcd("watch-created", 3,
		 "{\"result\":{\"header\":{\"revision\":\"20\"},\"created\":true}}");
	put_etcd("watch-error", 3,
		 "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"etcdserver: no leader\",\"http_status\":\"Service Unavailable\"}}");
	put_etcd("watch-events", 3,
		 "{\"result\":{\"header\":{\"revision\":\"21\"},\"events\":[{\"kv\":{\"key\":\"cHJlL2E=\",\"mod_revision\":\"21\",\"value\":\"eA==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"cHJlL2I=\",\"mod_revision\":\"22\"}}]}}");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus CORPUS_DIR\n");
		return 2;
	}
	root = argv[1];
	if (mkdir(root, 0777) && errno != EEXIST)
		die(root);
	gen_bundles();
	gen_tuples();
	gen_rows();
	gen_fence();
	gen_dir_segment();
	gen_xattr();
	gen_api();
	gen_gw();
	gen_options();
	gen_xml();
	gen_etcd();
	return 0;
}
