/*
 * change.c - see change.h: delete, trim and a rename over a stream, made
 * by its holder for another star.
 *
 * For: the three handlers and what each answers.  Not for: the errno to
 * HTTP translation (api_srv_errno(), api/server.c: one translator), the
 * row changes (engine/star.c), the client's side (api/client.c).
 *
 * A rename over a stream, as the holder Y of the target makes it:
 *
 *   stream_of(): the target by name and id --no/other--> 404 stream_moved
 *   star_stream_rename(from, to, target): Y's lease fence, then one txn
 *       (names swapped, target tombstoned, its lease row compared)
 *       --0--> target marked deleted here; 200
 *       --another star leads it--> 421 NOT_OWNER (the caller redials)
 *       --target or its lease moved--> 404 stream_moved, nothing changed
 *       --no stream `from`--> 404 not_found, nothing changed
 *
 * Locking: none of its own (the engine's calls lock).
 *
 * Invariants: those of change.h.
 */
#include "config.h"
#include "api/change.h"
#include "api/server_impl.h"
#include "api/wire.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "src/base/log.h"
#include "src/base/names.h"

#include <errno.h>
#include <stdio.h>

/* Delete (another star's unlink(2), sent here because this star leads
 * the stream: the tombstone is ordered after every append acked here,
 * and every later one fails with ENOENT): a stream this star leads, or a
 * vacant one, is deleted; 421 with the holder when another star leads
 * it.  200 {"deleted":true}. */
enum MHD_Result api_change_delete(struct MHD_Connection *c, struct api_server *srv,
				  struct nv_stream *s)
{
	struct lease_holder h;
	int rc = star_lead_check(srv->st, s, &h);

	if (rc == -STAR_ENOTOWNER)
		return api_srv_not_owner(c, &h);
	if (rc == 0 || rc == -ENOENT)
		rc = star_stream_delete(srv->st, s);
	if (rc)
		return api_srv_errno(c, srv, s, rc);
	return api_srv_json(c, MHD_HTTP_OK, "{\"deleted\":true}");
}

/* Trim (another mount's setfattr user.nova.trim or head hole punch, sent
 * here because this star leads the stream: its memory, tail and page
 * cache learn the trim as from one on its own mount): ?seq=N
 * (star_stream_trim_seq()) or ?offset=B (star_stream_trim_bytes()),
 * exactly one (400 otherwise); a stream this star leads, or a vacant
 * one (its view first raised to the row's), is trimmed here; 421 with
 * the holder when another star leads it; 400 for a seq below the trim
 * point or past the acked end.  200 {"trim":{"seq":T,"byte":U}}, the
 * trim point now. */
enum MHD_Result api_change_trim(struct MHD_Connection *c, struct api_server *srv,
				struct req *q, struct nv_stream *s)
{
	const char *vs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seq");
	const char *vo = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	struct lease_holder h;
	char doc[API_LINE_MAX];
	uint64_t pos;
	int rc;

	if (!vs == !vo || api_parse_u64(vs ? vs : vo, 0, &pos))
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
				      "give one of seq= and offset=, a decimal number");
	rc = star_lead_check(srv->st, s, &h);
	if (rc == -STAR_ENOTOWNER)
		return api_srv_not_owner(c, &h);
	if (rc == -ENOENT) /* vacant: trim the committed state, not a stale view */
		rc = star_view_refresh(srv->st, s, STAR_VIEW_READ) < 0 ? -EAGAIN : 0;
	if (rc == 0)
		rc = vs ? star_stream_trim_seq(srv->st, s, pos, NULL)
			: star_stream_trim_bytes(srv->st, s, pos, NULL);
	if (rc == -EINVAL)
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request", "never backwards: "
				      "the seq is below the trim point, or past the end");
	if (rc)
		return api_srv_errno(c, srv, s, rc);
	snprintf(doc, sizeof(doc), "{\"trim\":{\"seq\":%llu,\"byte\":%llu}}",
		 (unsigned long long)atomic_load(&s->trim_seq),
		 (unsigned long long)atomic_load(&s->trim_byte));
	return api_srv_json(c, MHD_HTTP_OK, doc);
}

/* Rename (another mount's rename(2) of ?from=NAME over this stream, sent
 * here because this star leads it: the names swap and the stream is
 * tombstoned in one metastore transaction under this star's lease, so
 * its name is never absent, and its appends here fail from then on):
 * NAME must be a stream name (400 otherwise); 421 with the holder when
 * another star leads it; 404 not_found when there is no stream NAME, and
 * 404 stream_moved when the stream under this name or its lease moved as
 * the transaction committed (nothing changed either way).
 * 200 {"renamed":true}. */
enum MHD_Result api_change_rename(struct MHD_Connection *c, struct api_server *srv,
				  struct req *q, struct nv_stream *s)
{
	const char *from = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from");
	int rc;

	if (!from || nv_stream_name_check(from))
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
				      "from= must name a stream of the bucket");
	rc = star_stream_rename(srv->st, q->r.bucket, from, q->r.stream, false, s);
	if (rc == -ENOENT)
		return api_srv_refuse(c, q, MHD_HTTP_NOT_FOUND, "not_found",
				      "no stream under the name from=: nothing renamed");
	if (rc == -ESTALE)
		return api_srv_refuse(c, q, MHD_HTTP_NOT_FOUND, API_STREAM_MOVED,
				      "the stream under this name, or its lease, moved as the "
				      "rename committed: nothing renamed");
	if (rc)
		return api_srv_errno(c, srv, s, rc); /* -STAR_ENOTOWNER: 421 */
	nv_log(NV_INFO, NV_SUB_API, "star API: %s/%s renamed over %s (%llu), which is deleted",
	       q->r.bucket, from, q->r.stream, (unsigned long long)s->id);
	return api_srv_json(c, MHD_HTTP_OK, "{\"renamed\":true}");
}
