/*
 * handle.c - see handle.h: the two functions every file of fs/ calls.
 */
#include "config.h"
#include "fs/handle.h"

#include <errno.h>

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

int fs_handle_read(struct star *st, struct nv_stream *s, struct reader *rd, uint64_t off,
		 void *buf, size_t size, size_t *done)
{
	uint8_t *dst = buf;
	int rc = 0;

	*done = 0;
	while (*done < size) {
		enum read_tier tier;
		size_t got;

		rc = star_read(st, s, rd, off + *done, dst + *done, size - *done, &got, &tier);
		if (rc || got == 0)
			break;
		*done += got;
	}
	return rc;
}
