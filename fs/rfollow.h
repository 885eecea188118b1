/*
 * rfollow.h - follow across hosts (DESIGN.md section 7, "Follow across
 * hosts"): one subscription per stream per mount at the stream's holder,
 * shared by every follow handle of the mount on that stream.
 *
 * For: telling fs/follow.c's parked reads that the holder's acked end
 * moved (the stream's local wake is closed), and the kernel that a stream
 * grew (its attributes and the pages past the old end are invalidated).
 * The subscription keeps no bytes: a woken read fetches them through
 * fs_remote_read() (fs/remote.h).  Not for: reading (fs/follow.c), the
 * redial rule (api/client.h), leases (engine/lease.h).
 *
 * Invariants:
 *  1. At most one subscription per stream per mount; it lives while one
 *     follow handle on the stream is open, and resumes at its cursor (the
 *     highest end it learned) wherever the stream's lease goes next.
 *  2. Bounded: the subscription holds one frame at a time (the client's
 *     API_READ_MAX); the end it learned only grows.
 *  3. While the stream is vacant (no holder) it polls the stream's refs
 *     (this star's view is raised to their end, star_view_refresh(), so
 *     a dead leader's acked records reach local followers once
 *     settlement commits them) and re-checks the lease, from 5 ms backing
 *     off to 250 ms (back to 5 ms when the refs moved); while the holder
 *     cannot be reached it re-checks the lease likewise;
 *     while this star leads the stream it re-checks every 250 ms (local
 *     acks wake local readers).
 *  4. Stopping (the last handle's close, the mount's shutdown) ends the
 *     subscription at its next frame or heartbeat (every 5 s,
 *     api/server.h), or when the client gives a silent holder up (20 s,
 *     api/client.c): the last close never waits for it (the thread ends
 *     on its own), the mount's shutdown (fs_rfollow_stop()) does.
 *  5. A holder that goes silent (stopped, hung) while the subscription
 *     is open is looked at once it has been quiet past a heartbeat, then
 *     every second (api_sub_quiet_fn): when its lease went (expired,
 *     another star or epoch holds the stream) the subscription ends and
 *     the loop looks again, instead of waiting out the client's 20 s
 *     silence bound.
 *  6. The subscription names the stream by id (api/client.h invariant
 *     5), so it never follows another stream created under the name the
 *     stream had when it was loaded here; it follows the stream under its
 *     name now, and when the stream was deleted (its row gone) it marks
 *     it deleted here (local follow reads end with end-of-file), logs
 *     once and ends.
 */
#ifndef NOVAFS_FS_RFOLLOW_H
#define NOVAFS_FS_RFOLLOW_H

#include <stdint.h>

struct nova_fs;
struct nv_stream;
struct rfollow;
struct rsub;

/* The mount's table (fs borrowed for its life).  0, -ENOMEM. */
int fs_rfollow_new(struct nova_fs *fs, struct rfollow **out) __attribute__((warn_unused_result));
/* Stop every subscription and wait for their threads (the streams must
 * still be alive; a later get returns NULL).  NULL ok. */
void fs_rfollow_stop(struct rfollow *rf);
/* After fs_rfollow_stop() and the last FUSE request.  NULL ok. */
void fs_rfollow_free(struct rfollow *rf);

/* The subscription on s (started when new; s referenced while it
 * lives).  NULL: this mount has no cluster client, or out of memory (the
 * follow view then works on local wakes alone). */
struct rsub *fs_rfollow_get(struct rfollow *rf, struct nv_stream *s);
/* Drop a handle's use; the last stops and joins the subscription. */
void fs_rfollow_put(struct rfollow *rf, struct rsub *r);

/* The holder's acked end as the subscription last learned it (0: not
 * yet). */
uint64_t fs_rfollow_end(const struct rsub *r);

#endif
