/*
 * server_impl.h - what api/server.c shares with the handlers it keeps in
 * other files (api/change.c): the server and request structs, and the
 * server's answers.
 *
 * For: api/server.c (it defines every function below) and api/change.c.
 * Not for: anything outside api/'s server (api/server.h is its face).
 *
 * Invariants: those of api/server.h; in particular every errno becomes
 * an HTTP status in api_srv_errno() alone (STYLE.md: one translator).
 */
#ifndef NOVAFS_API_SERVER_IMPL_H
#define NOVAFS_API_SERVER_IMPL_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/wire.h"
#include "engine/lease.h"

struct api_subs;
struct nv_stream;

/* Immutable after api_server_start(). */
struct api_server {
	struct MHD_Daemon *d;
	struct star *st;                /* borrowed */
	const struct api_secret *secret; /* borrowed */
	size_t max_body;
	struct api_subs *subs;
	char listen[LEASE_ADDR_MAX + 1];
};

/* One request across the library's calls (one connection's thread). */
struct req {
	const char *method, *url; /* the library's, valid until on_completed() */
	struct api_route r;
	uint64_t stream_id; /* API_STREAM_ID_HEADER; 0: named by bucket/stream alone */
	char *body;       /* max_body bytes; NULL without a body */
	size_t len;
	bool too_big;
	bool answered;    /* refused in the first call: discard the rest */
};

/* Each queues one answer on c and returns the library's result. */

/* A refusal the client provoked: status (a 4xx), {"error":code,
 * "detail":why}, and one rate-limited line naming q's stream. */
enum MHD_Result api_srv_refuse(struct MHD_Connection *c, const struct req *q, unsigned status,
			       const char *code, const char *why);
/* 421 with the NOT_OWNER document of h (borrowed). */
enum MHD_Result api_srv_not_owner(struct MHD_Connection *c, const struct lease_holder *h);
/* An engine error (-errno) as a reply; -STAR_ENOTOWNER asks who leads s
 * (may be NULL). */
enum MHD_Result api_srv_errno(struct MHD_Connection *c, struct api_server *srv,
			      struct nv_stream *s, int rc);
/* 200 or another status with the JSON document doc (borrowed). */
enum MHD_Result api_srv_json(struct MHD_Connection *c, unsigned status, const char *doc);
/* status with {"error":code,"detail":detail} (both borrowed). */
enum MHD_Result api_srv_error(struct MHD_Connection *c, unsigned status, const char *code,
			      const char *detail);

#endif
