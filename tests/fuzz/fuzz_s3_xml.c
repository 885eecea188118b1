/*
 * fuzz_s3_xml.c - the XML reader of S3 responses (engine/store/s3/xml.h:
 * xml_parse and the tree accessors), whose input is whatever an S3
 * endpoint answers.
 *
 * Input: the response body.
 *
 * Checks: xml_parse answers 0, -EINVAL, -E2BIG or -ENOMEM; a parsed
 * document keeps xml.h's promises, walked in full:
 *  - every element has a name of 1..XML_NAME_MAX name characters (the
 *    local name: the namespace prefix is dropped), at depth <=
 *    XML_DEPTH_MAX;
 *  - text is NUL-terminated at its reported length with no NUL inside
 *    (NUL bytes and &#0; are malformed), and empty for an element with
 *    child elements (invariant 4);
 *  - xml_child/xml_next by name find exactly the first / next child of
 *    that name, and xml_child_text agrees with xml_text of it;
 *  - the element count is bounded by the input ("memory proportional to
 *    len": an element takes at least three bytes).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine/store/s3/xml.h"
#include "tests/fuzz/fuzz.h"

static bool name_start(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' ||
	       c >= 0x80;
}

static bool name_char(unsigned char c)
{
	return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static size_t walk(const struct xml_node *n, int depth)
{
	const char *name = xml_name(n), *text;
	const struct xml_node *c;
	size_t nl, tl = (size_t)-1, count = 1;
	unsigned idx = 0;
	bool kids;

	FUZZ_ASSERT(depth <= XML_DEPTH_MAX);
	FUZZ_ASSERT(name);
	nl = strlen(name);
	FUZZ_ASSERT(nl >= 1 && nl <= XML_NAME_MAX && name_start((unsigned char)name[0]));
	for (size_t i = 0; i < nl; i++)
		FUZZ_ASSERT(name_char((unsigned char)name[i]));
	text = xml_text(n, &tl);
	FUZZ_ASSERT(text && tl == strlen(text));
	kids = xml_child(n, NULL) != NULL;
	if (kids)
		FUZZ_ASSERT(tl == 0);

	/* The by-name lookups are checked for the first 32 children: they
	 * scan siblings, so checking all would be quadratic. */
	for (c = xml_child(n, NULL); c; c = xml_next(c, NULL)) {
		const char *cn = xml_name(c);
		const struct xml_node *first, *s;
		const char *ct;
		size_t ctl = (size_t)-1;

		if (++idx > 32) {
			count += walk(c, depth + 1);
			continue;
		}
		/* The first child of that name is c or an earlier sibling. */
		first = xml_child(n, cn);
		FUZZ_ASSERT(first && !strcmp(xml_name(first), cn));
		for (s = xml_child(n, NULL); s != first; s = xml_next(s, NULL))
			FUZZ_ASSERT(s != c && strcmp(xml_name(s), cn));
		ct = xml_child_text(n, cn, &ctl);
		FUZZ_ASSERT(ct && ct == xml_text(first, NULL) && ctl == strlen(ct));
		/* The next one of that name skips the others. */
		s = xml_next(c, cn);
		if (s)
			FUZZ_ASSERT(!strcmp(xml_name(s), cn));
		count += walk(c, depth + 1);
	}
	return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xml_doc *d = NULL;
	char *buf;
	size_t n;
	int rc;

	fuzz_quiet();
	/* An exactly-sized copy (no NUL after it): overreads are ASan reports. */
	buf = (char *)fuzz_memdup(data, size);
	rc = xml_parse(buf ? buf : "", size, &d);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -E2BIG || rc == -ENOMEM);
	if (rc == 0) {
		FUZZ_ASSERT(d && xml_root(d));
		FUZZ_ASSERT(!xml_next(xml_root(d), NULL)); /* one root */
		n = walk(xml_root(d), 1);
		FUZZ_ASSERT(n <= size / 3 + 1);
		xml_free(d);
	}
	free(buf);
	return 0;
}
