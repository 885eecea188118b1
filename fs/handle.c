/*
 * handle.c - see handle.h: the two functions every file of fs/ calls.
 */
#include "config.h"
#include "fs/handle.h"

#include <errno.h>
#include <stdint.h>

int nova_fs_errno(int rc)
{
	if (rc >= 0)
		return 0;
	switch (rc) {
	case -ESHUTDOWN:
	case -EBADMSG:
	case -ECANCELED:
		return EIO;
	case -EBUSY:
		return EAGAIN;
	default:
		return -rc;
	}
}

void fs_handle_sink_add(struct read_sink *sink, void *buf, size_t n)
{
	struct iovec *last = sink->niov ? &sink->iov[sink->niov - 1] : NULL;

	if (n == 0)
		return;
	if (last && (uint8_t *)last->iov_base + last->iov_len == (uint8_t *)buf) {
		last->iov_len += n;
		return;
	}
	sink->iov[sink->niov].iov_base = buf;
	sink->iov[sink->niov++].iov_len = n;
}

int fs_handle_read(struct star *st, struct nv_stream *s, struct reader *rd, uint64_t off,
		   void *buf, size_t size, struct read_sink *sink, size_t *done)
{
	uint8_t *dst = buf;
	int rc = 0;

	*done = 0;
	while (*done < size) {
		enum read_tier tier;
		size_t got;

		if (sink) {
			int pins = sink->npins; /* a sunk page pins one more chunk */

			/* One iovec stays free for a page copied after a sunk one. */
			sink->maxiov--;
			rc = star_read_sink(st, s, rd, off + *done, dst + *done, size - *done, sink,
					    &got, &tier);
			sink->maxiov++;
			if (!rc && got && sink->npins == pins)
				fs_handle_sink_add(sink, dst + *done, got);
		} else {
			rc = star_read(st, s, rd, off + *done, dst + *done, size - *done, &got,
				       &tier);
		}
		if (rc || got == 0)
			break;
		*done += got;
	}
	return rc;
}
