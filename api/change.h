/*
 * change.h - the star API's changes of a stream that a holder makes for
 * another star: delete (unlink(2)), trim (user.nova.trim, the head hole
 * punch) and a rename over it (rename(2) of another stream onto its
 * name), each sent to the stream's leader by the mount that was asked
 * (fs/remote.c through api/client.c).
 *
 * For: api/server.c's dispatch, after stream_of() found the stream of
 * the path (and of its id, server.h invariant 6).  Not for: routing,
 * credentials, bodies (api/server.c), the wire forms (api/wire.h), the
 * row changes themselves (engine/star.h).
 *
 * Invariants:
 *  1. Each change is made only by the star that leads the stream, or by
 *     any star while it is vacant; another live leader is 421 with its
 *     NOT_OWNER document, and nothing is done.
 *  2. The change is ordered after every append this star acked, and
 *     every append after it is refused here at once (the stream is
 *     marked in memory as the row commits).
 *  3. A rename over the stream is one metastore transaction under this
 *     star's lease (meta/streams.h invariant 6): the stream's name is
 *     never absent, and when the transaction cannot commit as resolved
 *     nothing changed at all.
 */
#ifndef NOVAFS_API_CHANGE_H
#define NOVAFS_API_CHANGE_H

#include <microhttpd.h>

struct api_server;
struct req;
struct nv_stream;

/* Each answers the request q (borrowed) for s (borrowed: the caller
 * drops its reference after) on c, and returns the library's result. */

/* POST .../delete: 200 {"deleted":true}. */
enum MHD_Result api_change_delete(struct MHD_Connection *c, struct api_server *srv,
				  struct nv_stream *s);
/* POST .../trim?seq=|offset=: 200 {"trim":{"seq":T,"byte":U}}. */
enum MHD_Result api_change_trim(struct MHD_Connection *c, struct api_server *srv,
				struct req *q, struct nv_stream *s);
/* POST .../rename?from=NAME: 200 {"renamed":true}. */
enum MHD_Result api_change_rename(struct MHD_Connection *c, struct api_server *srv,
				  struct req *q, struct nv_stream *s);

#endif
