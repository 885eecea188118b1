/*
 * test_xml.c - unit tests of engine/store/s3/xml.c: the S3 documents it is
 * for, entity and character-reference decoding, refusal of malformed and
 * hostile input, and a bounded mutation loop (a poor man's fuzzer that
 * runs in every `make check`; the real fuzzing target is xml_parse()).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/s3/xml.h"

static struct xml_doc *parse_ok(const char *s)
{
	struct xml_doc *d = NULL;

	assert_int_equal(xml_parse(s, strlen(s), &d), 0);
	assert_non_null(d);
	return d;
}

static int parse_rc(const char *s, size_t n)
{
	struct xml_doc *d = NULL;
	int rc = xml_parse(s, n, &d);

	xml_free(d);
	return rc;
}

static const char list_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>bkt</Name><Prefix>a/</Prefix><KeyCount>2</KeyCount>"
	"<MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
	"<Contents>\n  <Key>a/b&amp;c</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
	"<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>\n"
	"<Contents><Key>a/c</Key><Size>12345678901</Size></Contents>"
	"</ListBucketResult>";

static void test_xml_list_result(void **state)
{
	struct xml_doc *d = parse_ok(list_doc);
	const struct xml_node *r = xml_root(d), *c;
	size_t n;

	assert_string_equal(xml_name(r), "ListBucketResult");
	assert_string_equal(xml_child_text(r, "IsTruncated", NULL), "true");
	assert_string_equal(xml_child_text(r, "NextContinuationToken", &n),
			    "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	assert_int_equal(n, strlen("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="));
	c = xml_child(r, "Contents");
	assert_non_null(c);
	assert_string_equal(xml_child_text(c, "Key", NULL), "a/b&c");
	assert_string_equal(xml_child_text(c, "ETag", NULL),
			    "\"d41d8cd98f00b204e9800998ecf8427e\"");
	/* A container's formatting text is dropped. */
	assert_string_equal(xml_text(c, &n), "");
	assert_int_equal(n, 0);
	c = xml_next(c, "Contents");
	assert_non_null(c);
	assert_string_equal(xml_child_text(c, "Size", NULL), "12345678901");
	assert_null(xml_next(c, "Contents"));
	assert_null(xml_child_text(r, "Missing", NULL));
	assert_null(xml_child(NULL, "x"));
	xml_free(d);
	xml_free(NULL);
}

static void test_xml_delete_and_error(void **state)
{
	struct xml_doc *d = parse_ok(
		"<DeleteResult><Deleted><Key>k1</Key></Deleted>"
		"<Error><Key>k2</Key><Code>AccessDenied</Code>"
		"<Message>Access Denied</Message></Error>"
		"<Deleted><Key>k3</Key></Deleted>"
		"<Error><Key>k4</Key><Code>NoSuchKey</Code><Message/></Error>"
		"</DeleteResult>");
	const struct xml_node *r = xml_root(d), *e;
	int deleted = 0;

	for (e = xml_child(r, "Deleted"); e; e = xml_next(e, "Deleted"))
		deleted++;
	assert_int_equal(deleted, 2);
	e = xml_child(r, "Error");
	assert_string_equal(xml_child_text(e, "Code", NULL), "AccessDenied");
	e = xml_next(e, "Error");
	assert_string_equal(xml_child_text(e, "Key", NULL), "k4");
	assert_string_equal(xml_child_text(e, "Message", NULL), "");
	/* Any child, in document order. */
	assert_string_equal(xml_name(xml_child(r, NULL)), "Deleted");
	assert_string_equal(xml_name(xml_next(xml_child(r, NULL), NULL)), "Error");
	xml_free(d);
}

static void test_xml_entities(void **state)
{
	struct xml_doc *d = parse_ok(
		"<r><a>&lt;&gt;&amp;&quot;&apos;</a><b>&#65;&#x42;&#x1234;&#128512;</b>"
		"<c><![CDATA[<not & markup>]]>tail</c><d attr='x&amp;y' other=\"1\">v</d>"
		"<s3:e xmlns:s3=\"u\">pre</s3:e><!-- comment --><?pi x?></r>");
	const struct xml_node *r = xml_root(d);

	assert_string_equal(xml_child_text(r, "a", NULL), "<>&\"'");
	assert_string_equal(xml_child_text(r, "b", NULL),
			    "AB\xe1\x88\xb4\xf0\x9f\x98\x80");
	assert_string_equal(xml_child_text(r, "c", NULL), "<not & markup>tail");
	assert_string_equal(xml_child_text(r, "d", NULL), "v");
	assert_string_equal(xml_child_text(r, "e", NULL), "pre");
	xml_free(d);
}

static void test_xml_malformed(void **state)
{
	static const char *const bad[] = {
		"", "   ", "text", "<a>", "<a></b>", "<a><b></a></b>", "</a>",
		"<a/><b/>", "<a/>junk", "<a>&unknown;</a>", "<a>&#0;</a>",
		"<a>&#xD800;</a>", "<a>&#x110000;</a>", "<a>&#;</a>", "<a>&#x;</a>",
		"<a>&#99999999999;</a>", "<a>&amp</a>", "<a b></a>", "<a b=c></a>",
		"<a b=\"<\"></a>", "<a b=\"x\"c=\"y\"></a>", "<1a/>", "<a/ >",
		"<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>", "<![CDATA[x]]><a/>",
		"<a><![CDATA[x</a>", "<a><!-- x</a>", "<a><?pi</a>", "<a:/>",
		"<p:/>", "<a></a ", "<a", "<", "<a>x</a><",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse_rc(bad[i], strlen(bad[i]));

		if (rc >= 0)
			fail_msg("accepted malformed #%zu: %s", i, bad[i]);
	}
	/* A NUL byte inside is malformed, not an end of input. */
	assert_int_equal(parse_rc("<a>x\0y</a>", 10), -EINVAL);
	assert_int_equal(parse_rc("<a\0/>", 5), -EINVAL);
	assert_int_equal(parse_rc(NULL, 3), -EINVAL);
	/* The length bounds the read: a valid prefix is not enough. */
	assert_int_equal(parse_rc("<a/>", 3), -EINVAL);
	assert_int_equal(parse_rc("<a>xy</a>", 8), -EINVAL);
}

static void test_xml_limits(void **state)
{
	char deep[(XML_DEPTH_MAX + 2) * 7 + 1], name[XML_NAME_MAX + 8];
	size_t o = 0;
	int depth;

	/* XML_DEPTH_MAX levels parse, one more does not. */
	for (int extra = 0; extra < 2; extra++) {
		depth = XML_DEPTH_MAX + extra;
		o = 0;
		for (int i = 0; i < depth; i++)
			o += (size_t)sprintf(deep + o, "<a>");
		for (int i = 0; i < depth; i++)
			o += (size_t)sprintf(deep + o, "</a>");
		assert_int_equal(parse_rc(deep, o), extra ? -E2BIG : 0);
	}
	memset(name, 'n', sizeof(name));
	name[0] = '<';
	name[XML_NAME_MAX + 1] = '/';
	name[XML_NAME_MAX + 2] = '>';
	assert_int_equal(parse_rc(name, XML_NAME_MAX + 3), 0);
	name[XML_NAME_MAX + 1] = 'n';
	name[XML_NAME_MAX + 2] = 'n';
	name[XML_NAME_MAX + 3] = '/';
	name[XML_NAME_MAX + 4] = '>';
	assert_int_equal(parse_rc(name, XML_NAME_MAX + 5), -E2BIG);
}

/* Many siblings, each the shortest possible: the arena bound holds. */
static void test_xml_many_small(void **state)
{
	enum { N = 20000 };
	char *s = malloc(N * 18 + 16);
	size_t o = 0;
	struct xml_doc *d = NULL;
	int count = 0;

	assert_non_null(s);
	o += (size_t)sprintf(s, "<r>");
	for (int i = 0; i < N; i++)
		o += (size_t)sprintf(s + o, i % 2 ? "<x/>" : "<x>&#x10FFFF;</x>");
	o += (size_t)sprintf(s + o, "</r>");
	assert_int_equal(xml_parse(s, o, &d), 0);
	for (const struct xml_node *c = xml_child(xml_root(d), "x"); c;
	     c = xml_next(c, "x"))
		count++;
	assert_int_equal(count, N);
	assert_string_equal(xml_text(xml_child(xml_root(d), "x"), NULL),
			    "\xf4\x8f\xbf\xbf");
	xml_free(d);
	free(s);
}

/* Mutations of valid documents: every answer is 0 or a clean error, and
 * (under valgrind or ASan) nothing is read outside the buffer. */
static void test_xml_mutations(void **state)
{
	static const char *const seeds[] = {
		list_doc,
		"<Error><Code>NoSuchKey</Code><Message>a &amp; b</Message></Error>",
		"<r><a x='1'>&#x41;<![CDATA[z]]></a><!--c--><b/></r>",
	};
	static const char alphabet[] = "<>/&;#x!-[]?='\" a0\n:";
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	for (int round = 0; round < 20000; round++) {
		const char *seed = seeds[round % 3];
		size_t n = strlen(seed);
		char *buf = malloc(n + 1);
		struct xml_doc *d = NULL;
		int rc;

		assert_non_null(buf);
		memcpy(buf, seed, n);
		for (int k = 0; k < 1 + round % 4; k++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			size_t at = (size_t)(rng % n);

			switch ((rng >> 32) % 3) {
			case 0: /* replace a byte */
				buf[at] = alphabet[(rng >> 40) % (sizeof(alphabet) - 1)];
				break;
			case 1: /* truncate */
				n = at ? at : 1;
				break;
			default: /* any byte at all */
				buf[at] = (char)(rng >> 48);
				break;
			}
		}
		rc = xml_parse(buf, n, &d);
		assert_true(rc == 0 || rc == -EINVAL || rc == -E2BIG);
		if (rc == 0) {
			const struct xml_node *r = xml_root(d);

			for (const struct xml_node *c = xml_child(r, NULL); c;
			     c = xml_next(c, NULL))
				(void)strlen(xml_text(c, NULL));
		}
		xml_free(d);
		free(buf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xml_list_result),
		cmocka_unit_test(test_xml_delete_and_error),
		cmocka_unit_test(test_xml_entities),
		cmocka_unit_test(test_xml_malformed),
		cmocka_unit_test(test_xml_limits),
		cmocka_unit_test(test_xml_many_small),
		cmocka_unit_test(test_xml_mutations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
