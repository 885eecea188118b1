/*
 * fuzz_etcd_json.c - the decoders of etcd's v3 gateway answers
 * (meta/etcd/internal.h: ec_range_kv, ec_txn_outcome, ec_keepalive_ttl,
 * ec_watch_decode, and ec_u64/ec_unb64 beneath them), whose input is
 * whatever a member, or something posing as one, answers.
 *
 * Input: one selector byte, then the answer body: 0 a kv/range answer,
 * 1 a kv/txn answer, 2 a lease/keepalive answer, 3 one line of a watch
 * stream (any other selector: taken modulo 4).
 *
 * Checks: nothing but the documented results comes back, and
 *  - range: every entry the answer holds decodes to 0, -EBADMSG, -E2BIG
 *    (longer than the caller's buffer, as kv_get() promises) or -ENOMEM; a decoded key is at most the base64 text's 3/4 and never
 *    carries the backend's prefix (it was stripped: invariant 1 of
 *    meta/etcd/internal.h); the entry past the last is -ENOENT;
 *  - txn: 0 exactly when "succeeded" is true;
 *  - keepalive: 0 with 1 <= TTL <= KV_LEASE_TTL_MAX, or -ENOLCK with 0;
 *  - watch: a known kind; EVENTS only with events, COMPACTED only with
 *    a compact revision.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/etcd/internal.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

static void range(const struct ec_be *be, json_t *j)
{
	const json_t *kvs = json_object_get(j, "kvs");
	size_t n = json_array_size(kvs);
	struct nv_buf k, v;

	nv_buf_init(&k, KV_KEY_MAX + 16);
	nv_buf_init(&v, KV_VAL_MAX);
	for (size_t i = 0; i <= n && i < 64; i++) {
		const json_t *e = json_array_get(kvs, i), *ks = json_object_get(e, "key");
		uint64_t ver = 0;
		int rc = ec_range_kv(be, j, i, &k, &v, &ver);

		if (i == n) {
			FUZZ_ASSERT(rc == -ENOENT);
			break;
		}
		FUZZ_ASSERT(rc == 0 || rc == -EBADMSG || rc == -E2BIG || rc == -ENOMEM);
		if (rc)
			continue;
		FUZZ_ASSERT(json_is_string(ks));
		FUZZ_ASSERT(k.len + be->plen <= json_string_length(ks) / 4 * 3);
		/* Only value may be asked for: the key is left alone. */
		FUZZ_ASSERT(ec_range_kv(be, j, i, NULL, &v, NULL) == 0);
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char prefix[] = "pre/";
	struct ec_be be;
	json_t *j;

	if (size < 1)
		return 0;
	memset(&be, 0, sizeof(be));
	be.prefix = prefix;
	be.plen = strlen(prefix);
	if (data[0] % 4 == 3) {
		struct ec_watch_msg m;

		ec_watch_decode((const char *)data + 1, size - 1, &m);
		FUZZ_ASSERT(m.kind == EC_WATCH_OVER || m.kind == EC_WATCH_COMPACTED ||
			    m.kind == EC_WATCH_EVENTS || m.kind == EC_WATCH_QUIET);
		FUZZ_ASSERT(m.kind != EC_WATCH_COMPACTED || m.compacted);
		FUZZ_ASSERT(m.kind == EC_WATCH_EVENTS || m.top == 0);
		return 0;
	}
	j = json_loadb((const char *)data + 1, size - 1, 0, NULL);
	switch (data[0] % 4) {
	case 0:
		range(&be, j);
		break;
	case 1: {
		uint64_t rev = 1;
		int rc = ec_txn_outcome(j, &rev);

		FUZZ_ASSERT(rc == 0 || rc == -ECANCELED);
		FUZZ_ASSERT((rc == 0) == json_is_true(json_object_get(j, "succeeded")));
		break;
	}
	default: {
		unsigned ttl = 7;
		int rc = ec_keepalive_ttl(j, &ttl);

		FUZZ_ASSERT((rc == 0 && ttl >= 1 && ttl <= KV_LEASE_TTL_MAX) ||
			    (rc == -ENOLCK && ttl == 0));
		break;
	}
	}
	json_decref(j);
	return 0;
}
