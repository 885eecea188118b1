/*
 * layout.c - see layout.h.
 */
#include "config.h"
#include "engine/layout.h"
#include "meta/refs.h"
#include "meta/streams.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>

struct layout_arg {
	json_t *spans;
	json_t *objs;
	uint64_t nspans, ncat, nobjs;
	uint64_t end_seq, end_byte, settled;
	size_t max;
	bool truncated;
};

static bool room(struct layout_arg *a, json_t *list)
{
	if (a->max && json_array_size(list) >= a->max) {
		a->truncated = true;
		return false;
	}
	return true;
}

static int layout_row(void *arg, const struct meta_ref *r)
{
	struct layout_arg *a = arg;

	a->end_seq = r->end_seq;
	a->end_byte = r->end_byte;
	if (r->kind == META_REF_CATALOG) {
		a->ncat++;
		a->settled = r->end_seq;
		for (uint32_t i = 0; i < r->nobjs; i++) {
			char key[META_SETTLED_KEY_MAX];
			json_t *o;

			a->nobjs++;
			if (!room(a, a->objs))
				continue;
			o = json_object();
			meta_settled_key(key, sizeof(key), r->bucket, r->stream_id, r->objs[i].epoch,
					 r->objs[i].first_seq, r->objs[i].rev);
			json_object_set_new(o, "key", json_string(key));
			json_object_set_new(o, "first_seq", json_integer((json_int_t)r->objs[i].first_seq));
			json_object_set_new(o, "end_seq",
					    json_integer((json_int_t)meta_ref_obj_end_seq(r, i)));
			json_object_set_new(o, "first_byte",
					    json_integer((json_int_t)r->objs[i].first_byte));
			json_object_set_new(o, "bytes",
					    json_integer((json_int_t)(meta_ref_obj_end_byte(r, i) -
								      r->objs[i].first_byte)));
			json_object_set_new(o, "stored_bytes",
					    json_integer((json_int_t)r->objs[i].footer_off));
			json_array_append_new(a->objs, o);
		}
	} else {
		json_t *o;

		a->nspans++;
		if (!room(a, a->spans))
			return 0;
		o = json_object();
		json_object_set_new(o, "first_seq", json_integer((json_int_t)r->first_seq));
		json_object_set_new(o, "end_seq", json_integer((json_int_t)r->end_seq));
		json_object_set_new(o, "bytes", json_integer((json_int_t)(r->end_byte - r->first_byte)));
		json_object_set_new(o, "epoch", json_integer((json_int_t)r->epoch));
		json_object_set_new(o, "slots", json_integer((json_int_t)r->nslots));
		json_array_append_new(a->spans, o);
	}
	return 0;
}

char *layout_json(struct kv *kv, uint64_t stream, const struct layout_live *live,
		  size_t max_entries, int *err)
{
	struct layout_arg a = { .spans = json_array(), .objs = json_array(), .max = max_entries };
	json_t *doc = json_object();
	struct meta_stream ms;
	char *out = NULL;
	int rc;

	*err = 0;
	if (!doc || !a.spans || !a.objs) {
		*err = -ENOMEM;
		goto done;
	}
	rc = meta_stream_get(kv, stream, &ms, NULL);
	if (!rc)
		rc = meta_ref_list(kv, stream, 0, 0, layout_row, &a);
	if (rc) {
		*err = rc;
		goto done;
	}
#define SETI(k, v) json_object_set_new(doc, k, json_integer((json_int_t)(v)))
	SETI("stream", stream);
	SETI("seq", live ? live->seq : a.end_seq);
	SETI("bytes", live ? live->bytes : a.end_byte);
	SETI("frontier", live ? live->frontier : a.end_seq);
	SETI("settled", live ? live->settled : a.settled);
	SETI("trim_seq", ms.trim_seq);
	SETI("trim_byte", ms.trim_byte);
	SETI("span_refs", a.nspans);
	SETI("catalog_rows", a.ncat);
	SETI("settled_object_count", a.nobjs);
#undef SETI
	json_object_set_new(doc, "settled_objects", a.objs);
	json_object_set_new(doc, "spans", a.spans);
	json_object_set_new(doc, "truncated", json_boolean(a.truncated));
	a.objs = a.spans = NULL;
	out = json_dumps(doc, JSON_COMPACT);
	if (!out)
		*err = -ENOMEM;
done:
	json_decref(a.spans);
	json_decref(a.objs);
	json_decref(doc);
	return out;
}
