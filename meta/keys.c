/*
 * keys.c - see keys.h.  Each builder is a reset plus a few tuple
 * elements; the table in keys.h is the specification.
 */
#include "config.h"
#include "meta/keys.h"
#include "meta/tuple.h"

static int tag(struct nv_buf *b, const char *t)
{
	nv_buf_reset(b);
	return nv_tup_add_str(b, t);
}

/* (t, class, star, epoch): the spaces of one chain. */
static int chain_tuple(struct nv_buf *b, const char *t, unsigned cls, const char *star,
		       uint64_t epoch)
{
	int rc = tag(b, t);

	if (!rc)
		rc = nv_tup_add_u64(b, cls);
	if (!rc)
		rc = nv_tup_add_str(b, star);
	return rc ? rc : nv_tup_add_u64(b, epoch);
}

int key_bucket(struct nv_buf *b, const char *bucket)
{
	int rc = tag(b, "bkt");

	return rc ? rc : nv_tup_add_str(b, bucket);
}

int key_bucket_space(struct nv_buf *b)
{
	return tag(b, "bkt");
}

int key_stream_name(struct nv_buf *b, const char *bucket, const char *name)
{
	int rc = key_stream_names_of(b, bucket);

	return rc ? rc : nv_tup_add_str(b, name);
}

int key_stream_names_of(struct nv_buf *b, const char *bucket)
{
	int rc = tag(b, "sn");

	return rc ? rc : nv_tup_add_str(b, bucket);
}

int key_stream_id(struct nv_buf *b, uint64_t id)
{
	int rc = tag(b, "sid");

	return rc ? rc : nv_tup_add_u64(b, id);
}

int key_stream_id_space(struct nv_buf *b)
{
	return tag(b, "sid");
}

int key_id_counter(struct nv_buf *b)
{
	int rc = tag(b, "ctr");

	return rc ? rc : nv_tup_add_str(b, "ids");
}

int key_refs_of(struct nv_buf *b, uint64_t stream)
{
	int rc = tag(b, "ref");

	return rc ? rc : nv_tup_add_u64(b, stream);
}

int key_ref(struct nv_buf *b, uint64_t stream, uint64_t first_seq)
{
	int rc = key_refs_of(b, stream);

	return rc ? rc : nv_tup_add_u64(b, first_seq);
}

int key_ref_hint(struct nv_buf *b, uint64_t stream, unsigned kind)
{
	int rc = tag(b, "rhn");

	if (!rc)
		rc = nv_tup_add_u64(b, stream);
	return rc ? rc : nv_tup_add_u64(b, kind);
}

int key_ref_bytes_of(struct nv_buf *b, uint64_t stream)
{
	int rc = tag(b, "rby");

	return rc ? rc : nv_tup_add_u64(b, stream);
}

int key_ref_byte(struct nv_buf *b, uint64_t stream, uint64_t first_byte, uint64_t first_seq)
{
	int rc = key_ref_bytes_of(b, stream);

	if (!rc)
		rc = nv_tup_add_u64(b, first_byte);
	return rc ? rc : nv_tup_add_u64(b, first_seq);
}

int key_mint(struct nv_buf *b, unsigned cls, const char *star)
{
	int rc = tag(b, "mint");

	if (!rc)
		rc = nv_tup_add_u64(b, cls);
	return rc ? rc : nv_tup_add_str(b, star);
}

int key_chain_space(struct nv_buf *b)
{
	return tag(b, "chn");
}

int key_chain(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch)
{
	return chain_tuple(b, "chn", cls, star, epoch);
}

int key_markers_of(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch)
{
	return chain_tuple(b, "mrk", cls, star, epoch);
}

int key_marker(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch,
	       uint64_t first_slot)
{
	int rc = key_markers_of(b, cls, star, epoch);

	return rc ? rc : nv_tup_add_u64(b, first_slot);
}

int key_reclaim_stream_space(struct nv_buf *b)
{
	return tag(b, "rcl");
}

int key_reclaim_stream(struct nv_buf *b, uint64_t stream)
{
	int rc = tag(b, "rcl");

	return rc ? rc : nv_tup_add_u64(b, stream);
}

int key_star(struct nv_buf *b, const char *star)
{
	int rc = tag(b, "star");

	return rc ? rc : nv_tup_add_str(b, star);
}

int key_star_space(struct nv_buf *b)
{
	return tag(b, "star");
}

int key_lease_space(struct nv_buf *b)
{
	return tag(b, "lease");
}

int key_lease(struct nv_buf *b, uint64_t stream)
{
	int rc = tag(b, "lease");

	return rc ? rc : nv_tup_add_u64(b, stream);
}

int key_lease_epoch(struct nv_buf *b, uint64_t stream)
{
	int rc = tag(b, "lep");

	return rc ? rc : nv_tup_add_u64(b, stream);
}

int key_duty(struct nv_buf *b, const char *duty)
{
	int rc = tag(b, "duty");

	return rc ? rc : nv_tup_add_str(b, duty);
}

int key_duty_epoch(struct nv_buf *b, const char *duty)
{
	int rc = tag(b, "dep");

	return rc ? rc : nv_tup_add_str(b, duty);
}

int key_lease_name_epoch(struct nv_buf *b, const char *bucket, const char *name)
{
	int rc = tag(b, "lepn");

	if (!rc)
		rc = nv_tup_add_str(b, bucket);
	return rc ? rc : nv_tup_add_str(b, name);
}

int key_cursors(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch)
{
	return chain_tuple(b, "cur", cls, star, epoch);
}

int key_reclaim_space(struct nv_buf *b)
{
	return tag(b, "gc");
}

int key_reclaim(struct nv_buf *b, uint64_t due_ns, const char *object_key)
{
	int rc = tag(b, "gc");

	if (!rc)
		rc = nv_tup_add_u64(b, due_ns);
	return rc ? rc : nv_tup_add_str(b, object_key);
}
