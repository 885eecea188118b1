/*
 * plan_read.c - a test tool: a stream's settled history read by read
 * plans (api/vend.h), the record bodies to stdout.
 *
 * For: tests/integration/t_plan.sh, which compares what it writes with
 * `cat` of the stream.  Not for: users (the Gateway is the consumer).
 *
 *   plan_read ADDR SECRET_FILE STORE_URL|- BUCKET STREAM seq|offset POS
 *
 * STORE_URL: the consumer's own handle on the standard bucket for raw
 * plans (dir:/path, s3://...); "-" for signed plans (presigned URLs).
 * Prints "next_seq=N next_byte=B records=R first_seq=S first_byte=F"
 * (F: the stream byte of the first record's body) on stderr and exits 0, or
 * prints the error and exits 1.
 */
#include "config.h"
#include "api/auth.h"
#include "api/client.h"
#include "api/vend.h"
#include "engine/store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	uint64_t records;
	uint64_t last_seq;
	uint64_t first_seq, first_byte; /* of the first record */
};

static int on_record(void *arg, uint64_t seq, uint64_t byte, const void *body, size_t len)
{
	struct out *o = arg;

	if (!o->records) {
		o->first_seq = seq;
		o->first_byte = byte;
	}
	if (o->records && seq != o->last_seq + 1) {
		fprintf(stderr, "plan_read: seq %llu after %llu\n", (unsigned long long)seq,
			(unsigned long long)o->last_seq);
		return -EIO;
	}
	o->records++;
	o->last_seq = seq;
	return fwrite(body, 1, len, stdout) == len ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	struct api_secret *sec = NULL;
	struct api_client *cl = NULL;
	struct store *st = NULL;
	struct out o = { 0 };
	uint64_t next_seq = 0, next_byte = 0;
	int rc;

	if (argc != 8 || (strcmp(argv[6], "seq") && strcmp(argv[6], "offset"))) {
		fprintf(stderr, "usage: plan_read ADDR SECRET_FILE STORE_URL|- BUCKET STREAM "
			"seq|offset POS\n");
		return 2;
	}
	const char *why = NULL;

	rc = api_secret_load(argv[2], &sec, &why);
	if (rc && why)
		fprintf(stderr, "plan_read: %s: %s\n", argv[2], why);
	if (rc == 0) {
		struct api_client_cfg cc = { .secret = sec };

		rc = api_client_new(&cc, &cl);
	}
	if (rc == 0 && strcmp(argv[3], "-"))
		rc = store_open(argv[3], &st);
	if (rc == 0) {
		struct api_vend_cfg vc = { .cl = cl, .addr = argv[1], .bucket = st };

		rc = api_vend_read(&vc, argv[4], argv[5],
				   strcmp(argv[6], "seq") ? META_REF_BY_BYTE : META_REF_BY_SEQ,
				   strtoull(argv[7], NULL, 10), on_record, &o, &next_seq, &next_byte);
	}
	if (fflush(stdout))
		rc = -EIO;
	store_close(st);
	api_client_free(cl);
	api_secret_free(sec);
	if (rc) {
		fprintf(stderr, "plan_read: %s\n", strerror(rc < 0 ? -rc : rc));
		return 1;
	}
	fprintf(stderr, "next_seq=%llu next_byte=%llu records=%llu first_seq=%llu first_byte=%llu\n",
		(unsigned long long)next_seq, (unsigned long long)next_byte,
		(unsigned long long)o.records, (unsigned long long)o.first_seq,
		(unsigned long long)o.first_byte);
	return 0;
}
