/*
 * errors.c - the one translation of S3 failures into store.h errors and
 * the one log line per failed call (S3 backend; overview in internal.h).
 *
 * For: s3_to_errno() (libcurl result, HTTP status, S3 error Code ->
 * -errno), s3_fail() and s3_bad_answer().
 * Not for: deciding whether to retry (request.c retryable()), answers
 * that are not faults (the callers do not log 404 on get/head nor 412 on
 * create-once).
 *
 * Invariants (internal.h 6), here:
 *  1. A known S3 error Code decides over the HTTP status; a 2xx with no
 *     Code is 0, a 2xx with a Code is -EIO.
 *  2. Transport failures map to -ETIMEDOUT / -EAGAIN (transient, see
 *     store_err_transient()), -ENOMEM, or -EIO.
 *  3. Pure: no state, no lock.
 */
#include "config.h"
#include "engine/store/s3/internal.h"
#include "src/base/log.h"

#include <errno.h>
#include <string.h>

/* ------------------------------------------------------ error mapping */

int s3_to_errno(CURLcode cc, long status, const char *code)
{
	static const struct { const char *code; int err; } codes[] = {
		{ "NoSuchKey", ENOENT },
		{ "PreconditionFailed", EEXIST },
		{ "InvalidRange", ERANGE },
		{ "NotImplemented", ENOTSUP },
		{ "AccessDenied", EACCES },
		{ "SignatureDoesNotMatch", EACCES },
		{ "InvalidAccessKeyId", EACCES },
		{ "ExpiredToken", EACCES },
		{ "InvalidToken", EACCES },
		{ "RequestTimeTooSkewed", EACCES },
		{ "SlowDown", EAGAIN },
		{ "ServiceUnavailable", EAGAIN },
		{ "InternalError", EAGAIN },
		{ "RequestTimeout", EAGAIN },
		{ "OperationAborted", EAGAIN },
		{ "QuotaExceeded", ENOSPC },
		{ "InsufficientStorage", ENOSPC },
		{ "EntityTooSmall", EINVAL },
		{ "EntityTooLarge", EINVAL },
		{ "InvalidPart", EINVAL },
		{ "InvalidPartOrder", EINVAL },
		{ "MalformedXML", EINVAL },
		{ "InvalidArgument", EINVAL },
		{ "InvalidDigest", EINVAL },
		{ "KeyTooLongError", EINVAL },
		{ "InvalidRequest", EINVAL },
		{ "InvalidBucketName", EINVAL },
		{ "BadDigest", EIO },       /* the body changed on the way */
		{ "NoSuchBucket", EIO },    /* misconfiguration, not a missing object */
		{ "NoSuchUpload", EIO },    /* the upload is gone under us */
	};

	switch (cc) {
	case CURLE_OK:
		break;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
		return -EAGAIN;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
	if (code && code[0]) {
		for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
			if (strcmp(code, codes[i].code) == 0)
				return -codes[i].err;
	}
	if (status >= 200 && status < 300)
		return code && code[0] ? -EIO : 0;
	switch (status) {
	case 404: return -ENOENT;
	case 412: return -EEXIST;
	case 416: return -ERANGE;
	case 501: return -ENOTSUP;
	case 401:
	case 403: return -EACCES;
	case 408:
	case 409:
	case 429: return -EAGAIN;
	case 507: return -ENOSPC;
	case 400: return -EINVAL;
	default:
		return status >= 500 ? -EAGAIN : -EIO;
	}
}

/* Log a failed call once (internal.h invariant 6) and return its errno. */
int s3_fail(const struct s3_store *s, const char *what, const char *key,
	    const struct s3_resp *r)
{
	int rc = s3_to_errno(r->cc, r->status, r->code);

	if (r->cc != CURLE_OK)
		nv_log(NV_ERR, NV_SUB_STORE,
		       "s3://%s %s %s: %s%s%s (after %d attempt%s)", s->bucket, what,
		       key ? key : "(bucket)", curl_easy_strerror(r->cc),
		       r->curl_err[0] ? ": " : "", r->curl_err, r->attempts,
		       r->attempts == 1 ? "" : "s");
	else
		nv_log(NV_ERR, NV_SUB_STORE,
		       "s3://%s %s %s: HTTP %ld %s: %s (request %s, after %d attempt%s)",
		       s->bucket, what, key ? key : "(bucket)", r->status,
		       r->code[0] ? r->code : "-", r->message[0] ? r->message : "-",
		       r->request_id[0] ? r->request_id : "-", r->attempts,
		       r->attempts == 1 ? "" : "s");
	return rc;
}

/* A response problem of our own finding (bad XML, wrong ETag...). */
int s3_bad_answer(const struct s3_store *s, const char *what,
		  const char *key, const char *why)
{
	nv_log(NV_ERR, NV_SUB_STORE, "s3://%s %s %s: bad answer from the server: %s",
	       s->bucket, what, key ? key : "(bucket)", why);
	return -EIO;
}
