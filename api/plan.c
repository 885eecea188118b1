/*
 * plan.c - see plan.h: the plan route's query and reply, both ways.
 *
 * For: pure functions of bytes (no I/O), so the reply parser can be
 * fuzzed (tests/fuzz/fuzz_api_route.c) and the round trip unit-tested.
 * JSON goes through jansson both ways.  Not for: serving (api/server.c),
 * fetching (api/vend.c).
 *
 * Invariants: those of plan.h.
 */
#include "config.h"
#include "api/plan.h"
#include "api/wire.h"
#include "engine/bundle.h"
#include "engine/store/store.h"
#include "src/base/clock.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define KEY_PREFIX "streams/"

int api_plan_query_parse(const char *seq, const char *offset, const char *max,
			 struct api_plan_query *q, const char **why)
{
	uint64_t m;

	*why = NULL;
	if (seq && offset) {
		*why = "give seq or offset, not both";
		return -EINVAL;
	}
	q->by = offset ? META_REF_BY_BYTE : META_REF_BY_SEQ;
	if (api_parse_u64(offset ? offset : seq, 0, &q->pos) ||
	    api_parse_u64(max, PLAN_ENTRIES_MAX, &m)) {
		*why = "seq, offset and max must be decimal numbers";
		return -EINVAL;
	}
	if (m < 1 || m > PLAN_ENTRIES_MAX) {
		*why = "max must be 1..256";
		return -EINVAL;
	}
	q->max = (uint32_t)m;
	return 0;
}

#define JI(v) json_integer((json_int_t)(v))

static json_t *pair(uint64_t a, uint64_t b)
{
	json_t *j = json_array();

	json_array_append_new(j, JI(a));
	json_array_append_new(j, JI(b));
	return j;
}

static json_t *entry_json(const struct plan_entry *e)
{
	json_t *o = json_object();

	json_object_set_new(o, "key", json_string(e->key));
	json_object_set_new(o, "epoch", JI(e->epoch));
	json_object_set_new(o, "revision", JI(e->rev));
	json_object_set_new(o, "first_seq", JI(e->first_seq));
	json_object_set_new(o, "end_seq", JI(e->end_seq));
	json_object_set_new(o, "first_byte", JI(e->first_byte));
	json_object_set_new(o, "end_byte", JI(e->end_byte));
	json_object_set_new(o, "footer", pair(e->footer_off, e->footer_len));
	json_object_set_new(o, "data", pair(0, e->footer_off));
	if (e->url)
		json_object_set_new(o, "url", json_string(e->url));
	return o;
}

char *api_plan_format(const struct read_plan *p)
{
	json_t *doc = json_object(), *list = json_array(), *trim = json_object();
	char *out = NULL;

	if (!doc || !list || !trim)
		goto done;
	for (uint32_t i = 0; i < p->n; i++)
		json_array_append_new(list, entry_json(&p->e[i]));
	json_object_set_new(trim, "seq", JI(p->trim_seq));
	json_object_set_new(trim, "byte", JI(p->trim_byte));
	json_object_set_new(doc, "stream_id", JI(p->stream_id));
	json_object_set_new(doc, "vending",
			    json_string(p->vending == PLAN_SIGNED ? "signed" : "raw"));
	json_object_set_new(doc, "trim", trim);
	json_object_set_new(doc, "entries", list);
	trim = list = NULL;
	json_object_set_new(doc, "residual_seq", JI(p->residual_seq));
	json_object_set_new(doc, "residual_byte", JI(p->residual_byte));
	if (p->more)
		json_object_set_new(doc, "cursor", JI(p->residual_seq));
	json_object_set_new(doc, "expires", JI(p->expires_ns / NV_NS_PER_S));
	json_object_set_new(doc, "ttl_s", JI(p->ttl_s));
	out = json_dumps(doc, JSON_COMPACT);
done:
	json_decref(trim);
	json_decref(list);
	json_decref(doc);
	return out;
}

/* A non-negative integer member (max: its largest value).  0 or -EINVAL. */
static int get_u64(const json_t *o, const char *k, uint64_t max, uint64_t *v)
{
	const json_t *j = json_object_get(o, k);

	if (!json_is_integer(j) || json_integer_value(j) < 0 ||
	    (uint64_t)json_integer_value(j) > max)
		return -EINVAL;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

/* A [a, b] pair of non-negative integers. */
static int get_pair(const json_t *o, const char *k, uint64_t *a, uint64_t *b)
{
	const json_t *j = json_object_get(o, k);

	if (!json_is_array(j) || json_array_size(j) != 2 ||
	    !json_is_integer(json_array_get(j, 0)) || !json_is_integer(json_array_get(j, 1)) ||
	    json_integer_value(json_array_get(j, 0)) < 0 ||
	    json_integer_value(json_array_get(j, 1)) < 0)
		return -EINVAL;
	*a = (uint64_t)json_integer_value(json_array_get(j, 0));
	*b = (uint64_t)json_integer_value(json_array_get(j, 1));
	return 0;
}

static int parse_url(const json_t *o, struct plan_entry *e)
{
	const json_t *j = json_object_get(o, "url");
	const char *s;

	if (!j)
		return 0;
	s = json_string_value(j);
	if (!s || json_string_length(j) > API_PLAN_URL_MAX || strlen(s) != json_string_length(j) ||
	    (strncmp(s, "http://", 7) && strncmp(s, "https://", 8)) || strpbrk(s, " \r\n"))
		return -EINVAL;
	e->url = strdup(s);
	return e->url ? 0 : -ENOMEM;
}

static int parse_entry(const json_t *o, struct plan_entry *e)
{
	const char *key = json_string_value(json_object_get(o, "key"));
	uint64_t rev, fo, fl, d0, d1;

	memset(e, 0, sizeof(*e));
	if (!json_is_object(o) || !key || strlen(key) >= sizeof(e->key) ||
	    strncmp(key, KEY_PREFIX, strlen(KEY_PREFIX)) || store_key_check(key))
		return -EINVAL;
	strcpy(e->key, key);
	if (get_u64(o, "epoch", UINT64_MAX, &e->epoch) ||
	    get_u64(o, "revision", UINT32_MAX, &rev) ||
	    get_u64(o, "first_seq", UINT64_MAX, &e->first_seq) ||
	    get_u64(o, "end_seq", UINT64_MAX, &e->end_seq) ||
	    get_u64(o, "first_byte", UINT64_MAX, &e->first_byte) ||
	    get_u64(o, "end_byte", UINT64_MAX, &e->end_byte) ||
	    get_pair(o, "footer", &fo, &fl) || get_pair(o, "data", &d0, &d1))
		return -EINVAL;
	/* An object holds at least one record; its footer is at least a
	 * trailer; the data extent is the chunks before it. */
	if (e->end_seq <= e->first_seq || e->end_byte < e->first_byte ||
	    fl < BUNDLE_TRAILER_SIZE || fl > UINT32_MAX || d0 != 0 || d1 != fo)
		return -EINVAL;
	e->rev = (uint32_t)rev;
	e->footer_off = fo;
	e->footer_len = (uint32_t)fl;
	return parse_url(o, e);
}

/* The entries, contiguous and below the residual (plan.h invariant 1). */
static int parse_entries(const json_t *list, struct read_plan *p)
{
	size_t n = json_array_size(list);

	if (!json_is_array(list) || n > PLAN_ENTRIES_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		struct plan_entry *e = &p->e[i];
		int rc = parse_entry(json_array_get(list, i), e);

		if (rc) {
			free(e->url);
			return rc;
		}
		p->n = (uint32_t)i + 1;
		if (i && (e->first_seq != e[-1].end_seq || e->first_byte != e[-1].end_byte))
			return -EINVAL;
	}
	return 0;
}

int api_plan_parse(const char *doc, size_t len, struct read_plan *p)
{
	json_t *j = json_loadb(doc, len, JSON_REJECT_DUPLICATES, NULL);
	const json_t *trim = json_object_get(j, "trim");
	const char *vend = json_string_value(json_object_get(j, "vending"));
	uint64_t cursor, expires, ttl;
	int rc = -EINVAL;

	p->n = 0;
	if (!json_is_object(j) || !json_is_object(trim) || !vend ||
	    plan_vending_parse(vend, &p->vending) ||
	    get_u64(j, "stream_id", UINT64_MAX, &p->stream_id) ||
	    get_u64(trim, "seq", UINT64_MAX, &p->trim_seq) ||
	    get_u64(trim, "byte", UINT64_MAX, &p->trim_byte) ||
	    get_u64(j, "residual_seq", UINT64_MAX, &p->residual_seq) ||
	    get_u64(j, "residual_byte", UINT64_MAX, &p->residual_byte) ||
	    get_u64(j, "expires", UINT64_MAX / NV_NS_PER_S, &expires) ||
	    get_u64(j, "ttl_s", UINT32_MAX, &ttl))
		goto done;
	p->expires_ns = expires * NV_NS_PER_S;
	p->ttl_s = (unsigned)ttl;
	p->more = json_object_get(j, "cursor") != NULL;
	if (p->more && (get_u64(j, "cursor", UINT64_MAX, &cursor) || cursor != p->residual_seq))
		goto done;
	rc = parse_entries(json_object_get(j, "entries"), p);
	if (rc == 0 && p->n &&
	    (p->e[p->n - 1].end_seq != p->residual_seq ||
	     p->e[p->n - 1].end_byte != p->residual_byte))
		rc = -EINVAL;
	/* A signed plan's entries all carry URLs; a raw plan's none. */
	for (uint32_t i = 0; rc == 0 && i < p->n; i++)
		if (!p->e[i].url != (p->vending == PLAN_RAW))
			rc = -EINVAL;
done:
	if (rc)
		plan_clear(p);
	json_decref(j);
	return rc;
}
