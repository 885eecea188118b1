/*
 * wire.c - see wire.h: the star API's paths, numbers and JSON forms.
 *
 * For: pure functions of bytes (no I/O, no engine state), so the router
 * can be fuzzed and unit-tested alone.  Not for: HTTP, authentication.
 *
 * JSON goes through jansson both ways (never printf with a name in it),
 * so a star id, address or error text cannot break a document.
 *
 * Invariants: those of wire.h.
 */
#include "config.h"
#include "api/wire.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAMS_PREFIX "/v1/streams/"

static const struct {
	const char *tail; /* after /v1/streams/BUCKET/STREAM/ */
	const char *method;
	enum api_endpoint ep;
} stream_eps[] = {
	{ "records", "POST", API_EP_APPEND },
	{ "bytes", "GET", API_EP_READ },
	{ "end", "GET", API_EP_END },
	{ "locate", "GET", API_EP_LOCATE },
	{ "subscribe", "GET", API_EP_SUBSCRIBE },
	{ "handoff", "POST", API_EP_HANDOFF },
	{ "delete", "POST", API_EP_DELETE },
	{ "trim", "POST", API_EP_TRIM },
	{ "rename", "POST", API_EP_RENAME },
	{ "plan", "GET", API_EP_PLAN },
};

static int route_fail(struct api_route *r, int status, const char *why)
{
	r->ep = API_EP_NONE;
	r->bucket[0] = r->stream[0] = '\0';
	r->status = status;
	r->why = why;
	return -EINVAL;
}

int api_path_segment(const char *p, const char *e, char *dst, size_t cap)
{
	size_t n = (size_t)(e - p);

	if (n == 0 || n >= cap || memchr(p, '\0', n))
		return -EINVAL;
	memcpy(dst, p, n);
	dst[n] = '\0';
	return 0;
}

static int route_fixed(const char *method, const char *path, struct api_route *r)
{
	enum api_endpoint ep = API_EP_NONE;
	const char *want = NULL;

	if (!strcmp(path, "/metrics")) {
		ep = API_EP_METRICS;
		want = "GET";
	} else if (!strcmp(path, "/v1/nudge")) {
		ep = API_EP_NUDGE;
		want = "POST";
	}
	if (ep == API_EP_NONE)
		return route_fail(r, 404, "no such path");
	if (strcmp(method, want))
		return route_fail(r, 405, "method not allowed on this path");
	r->ep = ep;
	return 0;
}

int api_route_parse(const char *method, const char *path, struct api_route *r)
{
	const char *b, *s, *t;
	size_t plen = strnlen(path, API_PATH_MAX + 1);

	memset(r, 0, sizeof(*r));
	if (plen > API_PATH_MAX)
		return route_fail(r, 414, "path too long");
	if (strncmp(path, STREAMS_PREFIX, strlen(STREAMS_PREFIX)))
		return route_fixed(method, path, r);
	b = path + strlen(STREAMS_PREFIX);
	s = strchr(b, '/');
	t = s ? strchr(s + 1, '/') : NULL;
	if (!s || !t || strchr(t + 1, '/'))
		return route_fail(r, 404, "want /v1/streams/BUCKET/STREAM/OPERATION");
	if (api_path_segment(b, s, r->bucket, sizeof(r->bucket)) ||
	    nv_bucket_name_check(r->bucket))
		return route_fail(r, 400, "bad bucket name");
	if (api_path_segment(s + 1, t, r->stream, sizeof(r->stream)) ||
	    nv_stream_name_check(r->stream))
		return route_fail(r, 400, "bad stream name");
	for (size_t i = 0; i < sizeof(stream_eps) / sizeof(stream_eps[0]); i++) {
		if (strcmp(t + 1, stream_eps[i].tail))
			continue;
		if (strcmp(method, stream_eps[i].method))
			return route_fail(r, 405, "method not allowed on this path");
		r->ep = stream_eps[i].ep;
		r->status = 0;
		return 0;
	}
	return route_fail(r, 404, "unknown stream operation");
}

int api_parse_u64(const char *text, uint64_t def, uint64_t *v)
{
	uint64_t x = 0;
	size_t n = 0;

	if (!text) {
		*v = def;
		return 0;
	}
	for (; text[n]; n++) {
		unsigned d = (unsigned char)text[n] - '0';

		if (d > 9 || n >= 20 || x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	if (n == 0)
		return -EINVAL;
	*v = x;
	return 0;
}

int api_parse_stream_id(const char *text, uint64_t *id)
{
	if (api_parse_u64(text, 0, id) || (text && *id == 0)) {
		*id = 0;
		return -EINVAL;
	}
	return 0;
}

int api_parse_listen(const char *addr, char *host, size_t hostlen, unsigned *port)
{
	const char *colon = strrchr(addr, ':');
	const char *h = addr, *he = colon;
	uint64_t p;

	if (!colon || colon == addr || api_parse_u64(colon + 1, 0, &p) || p == 0 || p > 65535)
		return -EINVAL;
	if (*h == '[') { /* [v6]:port */
		if (he[-1] != ']' || he - h < 3)
			return -EINVAL;
		h++;
		he--;
	} else if (memchr(h, ':', (size_t)(he - h))) {
		return -EINVAL; /* a bare IPv6 address: ambiguous */
	}
	if ((size_t)(he - h) >= hostlen)
		return -EINVAL;
	memcpy(host, h, (size_t)(he - h));
	host[he - h] = '\0';
	*port = (unsigned)p;
	return 0;
}

/* Dump j into buf (len bytes with the NUL) and drop it. */
static int dump_into(json_t *j, char *buf, size_t len)
{
	size_t n;

	if (!j)
		return -ENOMEM;
	n = json_dumpb(j, buf, len, JSON_COMPACT);
	json_decref(j);
	if (n == 0 || n >= len)
		return -ENOSPC;
	buf[n] = '\0';
	return 0;
}

int api_fmt_not_owner(const struct lease_holder *h, char *buf, size_t len)
{
	return dump_into(json_pack("{s:s, s:s, s:s, s:I}", "error", "not_owner", "leader",
				   h->star, "address", h->addr, "epoch", (json_int_t)h->epoch),
			 buf, len);
}

int api_fmt_error(const char *code, const char *detail, char *buf, size_t len)
{
	return dump_into(json_pack("{s:s, s:s}", "error", code, "detail", detail ? detail : ""),
			 buf, len);
}

/* A string member of o into dst (cap with the NUL): 0 or -EINVAL. */
static int take_str(json_t *o, const char *key, char *dst, size_t cap)
{
	json_t *v = json_object_get(o, key);
	size_t n;

	if (!json_is_string(v))
		return -EINVAL;
	n = json_string_length(v);
	if (n >= cap || memchr(json_string_value(v), '\0', n))
		return -EINVAL;
	memcpy(dst, json_string_value(v), n + 1);
	return 0;
}

static int take_u64(json_t *o, const char *key, uint64_t *v)
{
	json_t *j = json_object_get(o, key);

	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return -EINVAL;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

static int holder_of(json_t *o, struct lease_holder *h)
{
	memset(h, 0, sizeof(*h));
	if (take_str(o, "leader", h->star, sizeof(h->star)) ||
	    take_str(o, "address", h->addr, sizeof(h->addr)) || take_u64(o, "epoch", &h->epoch) ||
	    h->epoch == 0) {
		memset(h, 0, sizeof(*h));
		return -EINVAL;
	}
	return 0;
}

int api_parse_not_owner(const char *doc, size_t len, struct lease_holder *h)
{
	json_t *o = json_loadb(doc, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *e = o ? json_object_get(o, "error") : NULL;
	int rc = -EINVAL;

	if (json_is_string(e) && !strcmp(json_string_value(e), "not_owner"))
		rc = holder_of(o, h);
	json_decref(o);
	return rc;
}

int api_parse_star_doc(const char *doc, size_t len, const char *key, char *star, size_t cap)
{
	json_t *o = doc && len <= API_LINE_MAX ? json_loadb(doc, len, JSON_REJECT_DUPLICATES, NULL)
					       : NULL;
	int rc = -EINVAL;

	if (json_is_object(o) && take_str(o, key, star, cap) == 0 && star[0] &&
	    strlen(star) <= META_STAR_MAX && strspn(star, "abcdefghijklmnopqrstuvwxyz0123456789-") ==
	    strlen(star))
		rc = 0;
	json_decref(o);
	if (rc && cap)
		star[0] = '\0';
	return rc;
}

int api_parse_reply_u64(const char *doc, size_t len, const char *key, const char *sub,
			uint64_t *v)
{
	json_t *o = doc && len <= API_LINE_MAX ? json_loadb(doc, len, JSON_REJECT_DUPLICATES, NULL)
					       : NULL;
	json_t *in = sub ? json_object_get(o, key) : o;
	int rc = json_is_object(in) ? take_u64(in, sub ? sub : key, v) : -EINVAL;

	json_decref(o);
	return rc;
}

int api_parse_reply_str(const char *doc, size_t len, const char *key, char *out, size_t cap)
{
	json_t *o = doc && len <= API_LINE_MAX ? json_loadb(doc, len, JSON_REJECT_DUPLICATES, NULL)
					       : NULL;
	int rc = json_is_object(o) ? take_str(o, key, out, cap) : -EINVAL;

	json_decref(o);
	if (rc && cap)
		out[0] = '\0';
	return rc;
}

static int frame_of(json_t *o, struct api_frame *f)
{
	json_t *e = json_object_get(o, "error");

	if (json_is_string(e)) {
		f->kind = API_FRAME_ERROR;
		if (take_str(o, "error", f->error, sizeof(f->error)))
			return -EINVAL;
		return strcmp(f->error, "not_owner") ? 0 : holder_of(o, &f->holder);
	}
	if (json_is_true(json_object_get(o, "heartbeat"))) {
		f->kind = API_FRAME_HEARTBEAT;
		return take_u64(o, "end", &f->end);
	}
	f->kind = API_FRAME_DATA;
	if (take_u64(o, "offset", &f->offset) || take_u64(o, "length", &f->length) ||
	    f->length > API_READ_MAX)
		return -EINVAL;
	return 0;
}

int api_parse_frame(const char *line, size_t len, struct api_frame *f)
{
	json_t *o;
	int rc = -EINVAL;

	memset(f, 0, sizeof(*f));
	if (len > API_LINE_MAX)
		return -EINVAL;
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (json_is_object(o))
		rc = frame_of(o, f);
	json_decref(o);
	if (rc)
		memset(f, 0, sizeof(*f));
	return rc;
}

/* Append name percent-encoded at *pos of buf. */
static int put_escaped(const char *name, char *buf, size_t len, size_t *pos)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9') || strchr("._~-", *p);

		if (*pos + (plain ? 1 : 3) >= len)
			return -ENOSPC;
		if (plain) {
			buf[(*pos)++] = (char)*p;
		} else {
			buf[(*pos)++] = '%';
			buf[(*pos)++] = hex[*p >> 4];
			buf[(*pos)++] = hex[*p & 15];
		}
	}
	buf[*pos] = '\0';
	return 0;
}

int api_fmt_path(enum api_endpoint ep, const char *bucket, const char *stream, char *buf,
		 size_t len)
{
	const char *tail = NULL;
	size_t pos;
	int n;

	for (size_t i = 0; i < sizeof(stream_eps) / sizeof(stream_eps[0]); i++)
		if (stream_eps[i].ep == ep)
			tail = stream_eps[i].tail;
	if (!tail)
		return -EINVAL;
	n = snprintf(buf, len, "%s", STREAMS_PREFIX);
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	pos = (size_t)n;
	if (put_escaped(bucket, buf, len, &pos) || pos + 1 >= len)
		return -ENOSPC;
	buf[pos++] = '/';
	if (put_escaped(stream, buf, len, &pos))
		return -ENOSPC;
	n = snprintf(buf + pos, len - pos, "/%s", tail);
	return n < 0 || (size_t)n >= len - pos ? -ENOSPC : 0;
}

int api_fmt_query(const char *key, const char *value, char *buf, size_t len)
{
	int n = snprintf(buf, len, "?%s=", key);
	size_t pos;

	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	pos = (size_t)n;
	return put_escaped(value, buf, len, &pos);
}
