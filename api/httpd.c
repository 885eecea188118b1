/*
 * httpd.c - see httpd.h: peers and one-line JSON answers over
 * libmicrohttpd.
 *
 * For: api_http_peer(), api_http_reply(), api_http_reply_json(),
 * api_http_reply_error().  Not for: anything stateful.
 *
 * Invariants: those of httpd.h.
 */
#include "config.h"
#include "api/httpd.h"
#include "api/wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

const char *api_http_peer(struct MHD_Connection *c, char *buf, size_t len)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	snprintf(buf, len, "?");
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
			  (socklen_t)len);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
			  buf, (socklen_t)len);
	return buf;
}

enum MHD_Result api_http_reply(struct MHD_Connection *c, const struct api_http_style *st,
			       unsigned status, const char *type, const void *body, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;
	char realm[96];

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_UNAUTHORIZED) {
		snprintf(realm, sizeof(realm), "Bearer realm=\"%s\"", st->realm);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, realm);
	}
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE && st->retry_after)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

enum MHD_Result api_http_reply_json(struct MHD_Connection *c, const struct api_http_style *st,
				    unsigned status, const char *doc)
{
	char line[API_LINE_MAX + 1];
	int n = snprintf(line, sizeof(line), "%s\n", doc);

	return api_http_reply(c, st, status, "application/json", line,
			      n > 0 && (size_t)n < sizeof(line) ? (size_t)n : strlen(line));
}

enum MHD_Result api_http_reply_error(struct MHD_Connection *c, const struct api_http_style *st,
				     unsigned status, const char *code, const char *detail)
{
	char doc[API_LINE_MAX];

	if (api_fmt_error(code, detail, doc, sizeof(doc)))
		snprintf(doc, sizeof(doc), "{\"error\":\"%s\"}", code);
	return api_http_reply_json(c, st, status, doc);
}
