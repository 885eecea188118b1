/*
 * xml.h - a minimal, hostile-input-safe XML reader for S3 responses.
 *
 * For: pulling the text of named elements out of the small documents an
 * S3 server answers (ListBucketResult, DeleteResult, Error,
 * InitiateMultipartUploadResult, CopyPartResult,
 * CompleteMultipartUploadResult) and iterating repeated elements
 * (Contents, Deleted, Error, Part).
 * Not for: general XML.  There is no DTD support (a document with a
 * DOCTYPE is refused, so no entity expansion of any kind), no namespace
 * resolution (element names are matched by local name: "s3:Key" is
 * "Key"), and attributes are checked for form but not kept.
 *
 * The whole document is parsed at once into an immutable tree owned by
 * struct xml_doc; nodes and strings are borrowed from it until
 * xml_free().  xml_parse() is the fuzzing entry point: any (buf, len)
 * gives 0 or a negative errno, never a crash, never a read outside buf,
 * and memory proportional to len.
 *
 * Invariants:
 *  1. The input is read only inside [buf, buf + len); NUL bytes in it are
 *     malformed.
 *  2. Well-formedness that matters is checked: one root element, tags
 *     nest and match, attribute values are quoted, entities are the five
 *     predefined ones or numeric references to XML characters, no
 *     markup after the root but comments and processing instructions.
 *  3. Nesting deeper than XML_DEPTH_MAX or a name longer than
 *     XML_NAME_MAX is -E2BIG.
 *  4. Text is decoded (entities, character references, CDATA) to UTF-8
 *     and NUL-terminated; it is kept for elements without child
 *     elements only (the text between child elements of a container is
 *     formatting in every S3 document, and dropped).
 */
#ifndef NOVAFS_S3_XML_H
#define NOVAFS_S3_XML_H

#include <stddef.h>

#define XML_DEPTH_MAX 32
#define XML_NAME_MAX 256

struct xml_doc;  /* a parsed document; opaque */
struct xml_node; /* one element of it; opaque */

/* Parse buf[0..len) (borrowed for the call).  0 and *out (caller owns;
 * xml_free()), -EINVAL when malformed, -E2BIG past a limit, -ENOMEM. */
int xml_parse(const char *buf, size_t len, struct xml_doc **out)
	__attribute__((warn_unused_result));

/* Free a document; NULL is a no-op. */
void xml_free(struct xml_doc *d);

/* The root element (never NULL for a parsed document). */
const struct xml_node *xml_root(const struct xml_doc *d);

/* The local name of n ("Key" for <s3:Key>). */
const char *xml_name(const struct xml_node *n);

/* The first child element of n named name (NULL: any name), or NULL. */
const struct xml_node *xml_child(const struct xml_node *n, const char *name);

/* The next sibling element of n named name (NULL: any name), or NULL. */
const struct xml_node *xml_next(const struct xml_node *n, const char *name);

/* The decoded text of n (invariant 4; "" for an element with children
 * or none); *len (may be NULL) gets its length in bytes. */
const char *xml_text(const struct xml_node *n, size_t *len);

/* Text of the first child of n named name, or NULL when there is none. */
const char *xml_child_text(const struct xml_node *n, const char *name, size_t *len);

#endif
