/*
 * auth.h - the cluster credential of the star API: loading the secret
 * (-o cluster_secret_file=) and checking a request's Authorization
 * header against it.
 *
 * For: api/server.c (every request), api/client.c and src/novafs.c
 * (loading the secret once at start).  Not for: users or per-bucket
 * keys (the Gateway's read-only API keys are a later stage).
 *
 * Invariants:
 *  1. The secret file is a regular file that neither its group nor
 *     others may read or write (like ssh's private keys); anything else
 *     is refused at start with the reason, never silently accepted.
 *  2. A credential is compared in constant time (SHA-256 of both sides,
 *     then CRYPTO_memcmp), so neither its bytes nor its length leak
 *     through timing.
 *  3. The secret is never logged.
 */
#ifndef NOVAFS_API_AUTH_H
#define NOVAFS_API_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* The longest secret file accepted (a line of base64 is ample). */
#define API_SECRET_MAX 4096
/* The shortest secret: 16 bytes, so a guess costs more than a scan. */
#define API_SECRET_MIN 16

struct api_secret;

/*
 * Load path (borrowed): one line, trailing white space dropped.  0 and
 * *out (caller frees with api_secret_free()); else -errno and *why, a
 * static sentence for the start-up refusal: the file cannot be opened,
 * is not a regular file, is readable or writable by group or others
 * (-EPERM), is empty or shorter than API_SECRET_MIN, or longer than
 * API_SECRET_MAX (-EINVAL).
 */
int api_secret_load(const char *path, struct api_secret **out, const char **why)
	__attribute__((warn_unused_result));
void api_secret_free(struct api_secret *s); /* NULL is a no-op */

/* The secret's bytes (borrowed until api_secret_free()), for a client's
 * Authorization header. */
const char *api_secret_text(const struct api_secret *s);

/* Does header (borrowed; NULL: absent) carry the secret as
 * "Bearer <secret>"?  Constant time in the secret (invariant 2). */
bool api_auth_ok(const struct api_secret *s, const char *header);

#endif
