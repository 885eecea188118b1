/*
 * lease.c - see lease.h.
 *
 * One star per metastore (this stage so far): the star leads every
 * stream it serves, under lease epoch 1.  The many-stars work replaces
 * this file with writer leases in the metastore (DESIGN.md section 7).
 *
 * Locking: none; reads the star's immutable id and configuration.
 */
#include "config.h"
#include "engine/lease.h"
#include "engine/star.h"

#include <stdio.h>
#include <string.h>

static void self_holder(struct star *st, struct lease_holder *h)
{
	const char *addr = star_listen_addr(st);

	memset(h, 0, sizeof(*h));
	snprintf(h->star, sizeof(h->star), "%s", star_id(st));
	snprintf(h->addr, sizeof(h->addr), "%s", addr ? addr : "");
	h->epoch = 1;
}

int star_lead(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	(void)s;
	if (h)
		self_holder(st, h);
	return 0;
}

int star_leader(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	(void)s;
	self_holder(st, h);
	return 0;
}
