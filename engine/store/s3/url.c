/*
 * url.c - parsing an "s3://BUCKET?OPT=VALUE&..." store URL (s3.h) into
 * the immutable configuration of a struct s3_store (S3 backend; overview
 * in internal.h).
 *
 * For: s3_url_parse(): the option table, %-decoding, bucket, region,
 * zone, prefix and endpoint checks, numbers with their ranges,
 * credentials from the URL or the environment, the request addresses.
 * Not for: contacting the server (opening does not), the curl share and
 * handle pool (ops.c, request.c).
 *
 * Invariants, here:
 *  1. Anything unknown, repeated or malformed is -EINVAL with one log
 *     line naming it (url_bad()); secrets are never logged.
 *  2. Checks run in a fixed order (split, endpoint, path_style, names,
 *     numbers, credentials), so a URL with several faults always names
 *     the same one.
 *  3. A secret_key copy is wiped before it is freed (opts_free()).
 *  4. Pure but for getenv(): no global state, no lock.
 */
#include "config.h"
#include "engine/store/s3/internal.h"
#include "src/base/log.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* ------------------------------------------------------ URL parsing */

/* The parsed options of one URL; strings owned (decoded). */
struct s3_opts {
	char *endpoint, *region, *path_style, *access_key, *secret_key;
	char *prefix, *zone, *connect_timeout_ms, *request_timeout_ms;
	char *retries, *max_connections, *sign_payload, *list_max_keys, *ca_file;
	char *cache, *cache_slice_kib, *cache_hedge_ms, *cache_eps_pct, *cache_auth_file;
};

#define OPT(name) { #name, offsetof(struct s3_opts, name) }
static const struct { const char *name; size_t off; } s3_opt_table[] = {
	OPT(endpoint), OPT(region), OPT(path_style), OPT(access_key),
	OPT(secret_key), OPT(prefix), OPT(zone), OPT(connect_timeout_ms),
	OPT(request_timeout_ms), OPT(retries), OPT(max_connections),
	OPT(sign_payload), OPT(list_max_keys), OPT(ca_file), OPT(cache),
	OPT(cache_slice_kib), OPT(cache_hedge_ms), OPT(cache_eps_pct),
	OPT(cache_auth_file),
};
#undef OPT

static void opts_free(struct s3_opts *o)
{
	for (size_t i = 0; i < sizeof(s3_opt_table) / sizeof(s3_opt_table[0]); i++) {
		char **p = (char **)((char *)o + s3_opt_table[i].off);

		if (*p && (!strcmp(s3_opt_table[i].name, "secret_key")))
			memset(*p, 0, strlen(*p));
		free(*p);
	}
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A decoded copy of s[0..n) (%XX escapes), or NULL with *err set. */
static char *pct_decode(const char *s, size_t n, int *err)
{
	char *o = malloc(n + 1);
	size_t j = 0;

	if (!o) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
			int lo = i + 2 < n ? hexval(s[i + 2]) : -1;

			/* %00 would cut the value short: refused. */
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				free(o);
				*err = -EINVAL;
				return NULL;
			}
			o[j++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			o[j++] = s[i];
		}
	}
	o[j] = '\0';
	return o;
}

static int url_bad(const char *url, const char *what, const char *detail)
{
	nv_log(NV_ERR, NV_SUB_STORE, "bad s3 store URL: %s%s%s (URL starting '%.12s...')",
	       what, detail ? ": " : "", detail ? detail : "", url);
	return -EINVAL;
}

/* Parse "s3://BUCKET?k=v&..." into *bucket and o.  0 or -EINVAL/-ENOMEM. */
static int url_split(const char *url, char **bucket, struct s3_opts *o)
{
	const char *b = url + 5, *q = strchr(b, '?'), *p;
	size_t bn = q ? (size_t)(q - b) : strlen(b);
	int err = 0;

	if (strncmp(url, "s3://", 5) != 0)
		return url_bad(url, "not an s3:// URL", NULL);
	if (memchr(b, '/', bn))
		return url_bad(url, "a path after the bucket", "use prefix=P");
	*bucket = strndup(b, bn);
	if (!*bucket)
		return -ENOMEM;
	for (p = q ? q + 1 : NULL; p && *p;) {
		const char *amp = strchr(p, '&'), *eq;
		size_t n = amp ? (size_t)(amp - p) : strlen(p), i;
		char **slot = NULL, name[32];

		eq = memchr(p, '=', n);
		if (!eq || eq == p || (size_t)(eq - p) >= sizeof(name)) {
			snprintf(name, sizeof(name), "%.*s", (int)(n < 31 ? n : 31), p);
			return url_bad(url, "option without value", name);
		}
		snprintf(name, sizeof(name), "%.*s", (int)(eq - p), p);
		for (i = 0; i < sizeof(s3_opt_table) / sizeof(s3_opt_table[0]); i++)
			if (!strcmp(name, s3_opt_table[i].name))
				slot = (char **)((char *)o + s3_opt_table[i].off);
		if (!slot)
			return url_bad(url, "unknown option", name);
		if (*slot)
			return url_bad(url, "option given twice", name);
		*slot = pct_decode(eq + 1, n - (size_t)(eq + 1 - p), &err);
		if (!*slot)
			return err == -ENOMEM ? err : url_bad(url, "bad %-escape in", name);
		p = amp ? amp + 1 : NULL;
		if (amp && !*p)
			return url_bad(url, "trailing '&'", NULL);
	}
	return 0;
}

/* A bucket name: 3..63 of [a-z0-9.-], alphanumeric at both ends (the S3
 * rules; path-style endpoints also allow upper case and '_'). */
static bool bucket_ok(const char *b, bool path_style)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) ||
	    !isalnum((unsigned char)b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		    c == '.')
			continue;
		if (path_style && ((c >= 'A' && c <= 'Z') || c == '_'))
			continue;
		return false;
	}
	return true;
}

/* internal.h */
int s3_parse_long(const char *url, const char *name, const char *v, long lo,
		  long hi, long *out)
{
	char *end;
	long x;

	if (!v)
		return 0;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi) {
		char msg[96];

		snprintf(msg, sizeof(msg), "%s=%.20s (want %ld..%ld)", name, v, lo, hi);
		return url_bad(url, "bad number", msg);
	}
	*out = x;
	return 0;
}

/* Split "http(s)://host[:port][/]" into scheme, host (IPv6 in []), port. */
static int parse_endpoint(const char *url, const char *ep, bool *https,
			  char **host, long *port, bool *is_ip)
{
	const char *h, *end, *colon;
	size_t hn;

	if (!strncmp(ep, "https://", 8)) {
		*https = true;
		h = ep + 8;
	} else if (!strncmp(ep, "http://", 7)) {
		*https = false;
		h = ep + 7;
	} else {
		return url_bad(url, "endpoint must start with http:// or https://", NULL);
	}
	end = h + strlen(h);
	if (end > h && end[-1] == '/')
		end--;
	if (memchr(h, '/', (size_t)(end - h)) || memchr(h, '?', (size_t)(end - h)) ||
	    memchr(h, '@', (size_t)(end - h)))
		return url_bad(url, "endpoint must be scheme://host[:port]", NULL);
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));

		if (!rb)
			return url_bad(url, "endpoint: unclosed [IPv6]", NULL);
		colon = rb + 1 < end ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return url_bad(url, "endpoint: junk after [IPv6]", NULL);
		hn = (size_t)(rb + 1 - h);
		*is_ip = true;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		hn = colon ? (size_t)(colon - h) : (size_t)(end - h);
		*is_ip = true;
		for (size_t i = 0; i < hn; i++)
			if (!isdigit((unsigned char)h[i]) && h[i] != '.')
				*is_ip = false;
	}
	if (hn == 0)
		return url_bad(url, "endpoint without a host", NULL);
	for (size_t i = 0; i < hn; i++)
		if (!isalnum((unsigned char)h[i]) && !strchr(".-_[]:", h[i]))
			return url_bad(url, "endpoint: bad character in host", NULL);
	*port = *https ? 443 : 80;
	if (colon) {
		char pb[8];
		size_t pn = (size_t)(end - colon - 1);
		char *pe;

		if (pn == 0 || pn >= sizeof(pb))
			return url_bad(url, "endpoint: bad port", NULL);
		memcpy(pb, colon + 1, pn);
		pb[pn] = '\0';
		*port = strtol(pb, &pe, 10);
		if (*pe || *port < 1 || *port > 65535)
			return url_bad(url, "endpoint: bad port", pb);
	}
	*host = strndup(h, hn);
	return *host ? 0 : -ENOMEM;
}

static bool label_ok(const char *z, size_t max)
{
	size_t n = strlen(z);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)z[i]) && !strchr("._-", z[i]))
			return false;
	return true;
}

/* The numeric options of o into s; an option not given keeps its default. */
static int parse_numbers(const char *url, const struct s3_opts *o, struct s3_store *s)
{
	long v;
	int rc;

	if ((rc = s3_parse_long(url, "connect_timeout_ms", o->connect_timeout_ms, 1,
			     600000, &s->connect_timeout_ms)) ||
	    (rc = s3_parse_long(url, "request_timeout_ms", o->request_timeout_ms, 1,
			     86400000, &s->request_timeout_ms)))
		return rc;
	v = s->retries;
	if ((rc = s3_parse_long(url, "retries", o->retries, 0, S3_RETRIES_MAX, &v)))
		return rc;
	s->retries = (int)v;
	v = s->max_connections;
	if ((rc = s3_parse_long(url, "max_connections", o->max_connections, 1,
			     S3_MAX_CONNECTIONS_MAX, &v)))
		return rc;
	s->max_connections = (int)v;
	v = s->list_max_keys;
	if ((rc = s3_parse_long(url, "list_max_keys", o->list_max_keys, 1,
			     S3_LIST_MAX_KEYS, &v)))
		return rc;
	s->list_max_keys = (int)v;
	v = 0;
	if ((rc = s3_parse_long(url, "sign_payload", o->sign_payload, 0, 1, &v)))
		return rc;
	s->sign_payload = v == 1;
	return 0;
}

/* Credentials: both from the URL, or both from the environment (with its
 * session token). */
static int parse_credentials(const char *url, const struct s3_opts *o,
			     struct s3_store *s)
{
	const char *ak, *sk, *token = getenv("AWS_SESSION_TOKEN");

	if (!o->access_key != !o->secret_key)
		return url_bad(url, "access_key and secret_key go together", NULL);
	ak = o->access_key ? o->access_key : getenv("AWS_ACCESS_KEY_ID");
	sk = o->secret_key ? o->secret_key : getenv("AWS_SECRET_ACCESS_KEY");
	if (!ak || !sk || !ak[0] || !sk[0])
		return url_bad(url, "no credentials",
			       "give access_key= and secret_key= or set AWS_ACCESS_KEY_ID "
			       "and AWS_SECRET_ACCESS_KEY");
	if (strpbrk(ak, "/, \r\n") || strpbrk(sk, "\r\n"))
		return url_bad(url, "malformed credentials", NULL);
	s->access_key = strdup(ak);
	s->secret_key = strdup(sk);
	if (!o->access_key && token && token[0]) {
		s->session_token = strdup(token);
		if (!s->session_token)
			return -ENOMEM;
		if (strpbrk(s->session_token, "\r\n"))
			return url_bad(url, "malformed AWS_SESSION_TOKEN", NULL);
	}
	return s->access_key && s->secret_key ? 0 : -ENOMEM;
}

/* Where requests go: s->host, s->base_url and s->path_base, from the
 * endpoint's host (borrowed; NULL: AWS's endpoint of the region). */
static int set_addresses(struct s3_store *s, const char *ep_host, bool https,
			 long port, bool path_style)
{
	bool default_port = port == (https ? 443 : 80);
	const char *host = ep_host;
	char *aws = NULL;
	size_t n;

	if (!host) {
		aws = malloc(strlen(s->region) + 32);
		if (!aws)
			return -ENOMEM;
		sprintf(aws, "s3.%s.amazonaws.com", s->region);
		host = aws;
	}
	n = strlen(host) + strlen(s->bucket) + 32;
	s->host = malloc(n);
	s->base_url = malloc(n + 16);
	if (s->host && s->base_url) {
		snprintf(s->host, n, "%s%s%s", path_style ? "" : s->bucket,
			 path_style ? "" : ".", host);
		if (!default_port)
			snprintf(s->host + strlen(s->host), n - strlen(s->host), ":%ld",
				 port);
		snprintf(s->base_url, n + 16, "%s://%s", https ? "https" : "http",
			 s->host);
	}
	free(aws);
	if (!s->host || !s->base_url)
		return -ENOMEM;
	if (path_style) {
		s->path_base = malloc(strlen(s->bucket) + 2);
		if (s->path_base)
			sprintf(s->path_base, "/%s", s->bucket);
	} else {
		s->path_base = strdup("");
	}
	return s->path_base ? 0 : -ENOMEM;
}

/* The checks of the names in o (bucket, region, zone, prefix), in the
 * order they are reported.  Sets s->region. */
static int check_names(const char *url, const struct s3_opts *o,
		       struct s3_store *s, bool path_style, bool is_ip)
{
	if (!bucket_ok(s->bucket, path_style))
		return url_bad(url, "bad bucket name", s->bucket);
	if (!path_style && is_ip)
		return url_bad(url, "virtual-host style needs a DNS endpoint",
			       "set path_style=1");
	s->region = strdup(o->region ? o->region : "us-east-1");
	if (!s->region)
		return -ENOMEM;
	if (!label_ok(s->region, 64))
		return url_bad(url, "bad region", o->region);
	if (o->zone && !label_ok(o->zone, 64))
		return url_bad(url, "bad zone", o->zone);
	if (o->prefix && o->prefix[0] && store_key_check(o->prefix) < 0)
		return url_bad(url, "prefix is no valid key", o->prefix);
	return 0;
}

int s3_url_parse(const char *url, struct s3_store *s, bool *path_style_out)
{
	struct s3_opts o = { 0 };
	char *host = NULL;
	bool https = true, is_ip = false, path_style;
	long port = 443;
	int rc;

	s->connect_timeout_ms = S3_CONNECT_TIMEOUT_MS;
	s->request_timeout_ms = S3_REQUEST_TIMEOUT_MS;
	s->retries = S3_RETRIES;
	s->max_connections = S3_MAX_CONNECTIONS;
	s->list_max_keys = S3_LIST_MAX_KEYS;

	rc = url_split(url, &s->bucket, &o);
	if (rc)
		goto out;
	if (o.endpoint &&
	    (rc = parse_endpoint(url, o.endpoint, &https, &host, &port, &is_ip)))
		goto out;
	if (o.path_style && strcmp(o.path_style, "0") && strcmp(o.path_style, "1")) {
		rc = url_bad(url, "path_style must be 0 or 1", o.path_style);
		goto out;
	}
	path_style = o.path_style ? o.path_style[0] == '1' : o.endpoint != NULL;
	rc = check_names(url, &o, s, path_style, is_ip);
	if (rc == 0)
		rc = parse_numbers(url, &o, s);
	if (rc == 0)
		rc = parse_credentials(url, &o, s);
	if (rc)
		goto out;
	rc = -ENOMEM;
	if (o.prefix && o.prefix[0]) {
		s->prefix = malloc(strlen(o.prefix) + 2);
		if (s->prefix)
			sprintf(s->prefix, "%s/", o.prefix);
	} else {
		s->prefix = strdup("");
	}
	s->zone = xstrdup(o.zone);
	s->ca_file = xstrdup(o.ca_file);
	if (!s->prefix || (o.zone && !s->zone) || (o.ca_file && !s->ca_file))
		goto out;
	rc = set_addresses(s, host, https, port, path_style);
	if (rc == 0) {
		struct s3_cache_opts co = { o.cache, o.cache_slice_kib, o.cache_hedge_ms,
					    o.cache_eps_pct, o.cache_auth_file };

		rc = s3_cache_parse(s, url, &co);
	}
	*path_style_out = path_style;
out:
	opts_free(&o);
	free(host);
	return rc;
}
