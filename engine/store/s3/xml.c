/*
 * xml.c - the minimal XML reader of xml.h.
 *
 * For: S3 response documents, read defensively.  Not for: anything that
 * needs DTDs, namespaces or attributes (xml.h).
 *
 * Design: one pass over the input with an explicit cursor that never
 * moves past the end (every access goes through more()/at()), building
 * an array of nodes linked as first-child / next-sibling.  Names and
 * decoded text go into one arena allocated up front: decoding never
 * grows a string (every entity is longer than its UTF-8 form), so the
 * arena needs at most len bytes plus one NUL per name and per text,
 * i.e. len + 2 * (number of elements) + 1 with at most len / 3 + 1
 * elements ("<a/>" is the shortest element, four bytes, but "<a>" open
 * tags followed by text are three).  Nodes grow by doubling.
 *
 * Invariants: those of xml.h, plus
 *  1. arena_len + (bytes about to be written) <= arena_cap is checked
 *     before every write, so even a bug in the bound above is an error,
 *     not an overflow.
 *  2. A node index is < nnodes; index 0 is never a child or sibling of
 *     anything, so 0 doubles as "none" in the links.
 */
#include "config.h"
#include "engine/store/s3/xml.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct xml_node {
	const struct xml_doc *doc;
	size_t name;        /* arena offset */
	size_t text;        /* arena offset; text_len bytes + NUL */
	size_t text_len;
	uint32_t first_child, last_child, next; /* node indices, 0 = none */
	uint32_t parent;
	bool has_children;
};

struct xml_doc {
	struct xml_node *nodes; /* owned; nodes[0] is the root */
	uint32_t nnodes, cap;
	char *arena;            /* owned */
	size_t arena_len, arena_cap;
};

struct parser {
	const char *p;
	size_t len, pos;
	struct xml_doc *d;
	uint32_t stack[XML_DEPTH_MAX];
	int depth;
	bool root_done;
};

static inline bool more(const struct parser *ps, size_t n)
{
	return ps->len - ps->pos >= n;
}

/* The byte at pos + i, or 0 past the end (NUL is refused as input). */
static inline unsigned char at(const struct parser *ps, size_t i)
{
	return more(ps, i + 1) ? (unsigned char)ps->p[ps->pos + i] : 0;
}

static bool starts(const struct parser *ps, const char *s)
{
	size_t n = strlen(s);

	return more(ps, n) && memcmp(ps->p + ps->pos, s, n) == 0;
}

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void skip_space(struct parser *ps)
{
	while (more(ps, 1) && is_space(at(ps, 0)))
		ps->pos++;
}

static bool name_start(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
	       c == ':' || c >= 0x80;
}

static bool name_char(unsigned char c)
{
	return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* Scan a name at the cursor: its start and length.  -EINVAL, -E2BIG. */
static int scan_name(struct parser *ps, size_t *start, size_t *n)
{
	size_t s = ps->pos;

	if (!name_start(at(ps, 0)))
		return -EINVAL;
	while (more(ps, 1) && name_char(at(ps, 0)))
		ps->pos++;
	*start = s;
	*n = ps->pos - s;
	return *n > XML_NAME_MAX ? -E2BIG : 0;
}

static int arena_add(struct xml_doc *d, const void *s, size_t n)
{
	if (n > d->arena_cap - d->arena_len)
		return -E2BIG; /* invariant 1: cannot happen, but never overflow */
	memcpy(d->arena + d->arena_len, s, n);
	d->arena_len += n;
	return 0;
}

/* The XML 1.0 Char production (NUL and most controls are not chars). */
static bool xml_char_ok(uint32_t cp)
{
	return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
	       (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

/* Append the UTF-8 form of code point cp (a valid Char). */
static int add_utf8(struct xml_doc *d, uint32_t cp)
{
	unsigned char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xC0 | (cp >> 6));
		u[1] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xE0 | (cp >> 12));
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xF0 | (cp >> 18));
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
		u[3] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return arena_add(d, u, n);
}

/* Decode the reference at the cursor ('&' ... ';') and, when keep,
 * append it.  -EINVAL for anything but the five entities and character
 * references. */
static int entity(struct parser *ps, bool keep)
{
	static const struct { const char *name; char ch; } ents[] = {
		{ "&lt;", '<' }, { "&gt;", '>' }, { "&amp;", '&' },
		{ "&quot;", '"' }, { "&apos;", '\'' },
	};
	uint32_t cp = 0;
	int digits = 0;

	for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
		if (starts(ps, ents[i].name)) {
			ps->pos += strlen(ents[i].name);
			return keep ? arena_add(ps->d, &ents[i].ch, 1) : 0;
		}
	}
	if (!starts(ps, "&#"))
		return -EINVAL;
	ps->pos += 2;
	if (at(ps, 0) == 'x') {
		ps->pos++;
		for (unsigned char c; (c = at(ps, 0)) != ';'; ps->pos++, digits++) {
			int v = c >= '0' && c <= '9' ? c - '0'
			      : c >= 'a' && c <= 'f' ? c - 'a' + 10
			      : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

			/* 8 digits keep cp below 2^32; larger is invalid anyway */
			if (v < 0 || digits >= 8)
				return -EINVAL;
			cp = cp * 16 + (uint32_t)v;
		}
	} else {
		for (unsigned char c; (c = at(ps, 0)) != ';'; ps->pos++, digits++) {
			if (c < '0' || c > '9' || digits >= 8)
				return -EINVAL;
			cp = cp * 10 + (uint32_t)(c - '0');
		}
	}
	/* A bad reference is malformed wherever it is, kept or not. */
	if (digits == 0 || !xml_char_ok(cp))
		return -EINVAL;
	ps->pos++; /* ';' */
	return keep ? add_utf8(ps->d, cp) : 0;
}

static struct xml_node *cur(struct parser *ps)
{
	return ps->depth ? &ps->d->nodes[ps->stack[ps->depth - 1]] : NULL;
}

/* Text belongs to the innermost open element while it has no children. */
static bool keep_text(struct parser *ps)
{
	struct xml_node *n = cur(ps);

	return n && !n->has_children;
}

/* Character data up to the next '<'. */
static int chars(struct parser *ps)
{
	bool keep = keep_text(ps);
	int rc;

	while (more(ps, 1) && at(ps, 0) != '<') {
		unsigned char c = at(ps, 0);

		if (c == '\0')
			return -EINVAL;
		if (!ps->depth) { /* outside the root: whitespace only */
			if (!is_space(c))
				return -EINVAL;
			ps->pos++;
			continue;
		}
		if (c == '&') {
			rc = entity(ps, keep);
			if (rc)
				return rc;
			continue;
		}
		if (keep) {
			rc = arena_add(ps->d, &ps->p[ps->pos], 1);
			if (rc)
				return rc;
		}
		ps->pos++;
	}
	return 0;
}

/* Skip past the terminator term, refusing NUL bytes on the way. */
static int skip_past(struct parser *ps, const char *term, bool keep)
{
	size_t tl = strlen(term);

	while (!starts(ps, term)) {
		if (!more(ps, 1) || at(ps, 0) == '\0')
			return -EINVAL;
		if (keep) {
			int rc = arena_add(ps->d, &ps->p[ps->pos], 1);

			if (rc)
				return rc;
		}
		ps->pos++;
	}
	ps->pos += tl;
	return 0;
}

static int new_node(struct parser *ps, size_t name_start_off, size_t name_len)
{
	struct xml_doc *d = ps->d;
	struct xml_node *n, *parent = cur(ps);
	const char *name = ps->p + name_start_off;
	const char *colon = memchr(name, ':', name_len);
	uint32_t idx;
	int rc;

	if (ps->depth == XML_DEPTH_MAX)
		return -E2BIG;
	if (!parent && ps->root_done)
		return -EINVAL; /* a second root */
	if (d->nnodes == d->cap) {
		uint32_t ncap = d->cap ? d->cap * 2 : 16;
		struct xml_node *nn;

		if (d->cap > UINT32_MAX / 4)
			return -E2BIG;
		nn = realloc(d->nodes, ncap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		d->nodes = nn;
		d->cap = ncap;
		parent = cur(ps); /* the array moved */
	}
	if (colon) { /* local name: drop the namespace prefix */
		name_len -= (size_t)(colon + 1 - name);
		name = colon + 1;
		if (name_len == 0 || !name_start((unsigned char)name[0]))
			return -EINVAL;
	}
	idx = d->nnodes++;
	n = &d->nodes[idx];
	memset(n, 0, sizeof(*n));
	n->doc = d;
	n->name = d->arena_len;
	rc = arena_add(d, name, name_len);
	if (rc == 0)
		rc = arena_add(d, "", 1);
	if (rc)
		return rc;
	if (parent) {
		uint32_t pidx = ps->stack[ps->depth - 1];

		parent->has_children = true;
		n->parent = pidx;
		if (parent->last_child)
			d->nodes[parent->last_child].next = idx;
		else
			parent->first_child = idx;
		parent->last_child = idx;
	}
	ps->stack[ps->depth++] = idx;
	return 0;
}

/* Start tag at the cursor ('<' Name ...).  Opens an element (and closes
 * it again for "<x/>"). */
static int start_tag(struct parser *ps)
{
	size_t ns, nl;
	struct xml_node *n, *parent;
	int rc;

	ps->pos++; /* '<' */
	rc = scan_name(ps, &ns, &nl);
	if (rc)
		return rc;
	/* The parent's text so far was written to the arena just before
	 * this point; it is formatting of a container now.  Text is only
	 * kept while an element has no children, and the parent's text
	 * started right after its name, so undo it. */
	parent = cur(ps);
	if (parent && !parent->has_children)
		ps->d->arena_len = parent->text;
	rc = new_node(ps, ns, nl);
	if (rc)
		return rc;
	/* Attributes: S Name S? '=' S? quoted value. */
	for (;;) {
		size_t before = ps->pos, as, al;
		unsigned char q;

		skip_space(ps);
		if (at(ps, 0) == '/' || at(ps, 0) == '>')
			break;
		if (ps->pos == before)
			return -EINVAL; /* attributes need a separating space */
		rc = scan_name(ps, &as, &al);
		if (rc)
			return rc;
		skip_space(ps);
		if (at(ps, 0) != '=')
			return -EINVAL;
		ps->pos++;
		skip_space(ps);
		q = at(ps, 0);
		if (q != '"' && q != '\'')
			return -EINVAL;
		ps->pos++;
		while (at(ps, 0) != q) {
			unsigned char c = at(ps, 0);

			if (c == '\0' || c == '<')
				return -EINVAL;
			if (c == '&') {
				rc = entity(ps, false);
				if (rc)
					return rc;
				continue;
			}
			ps->pos++;
		}
		ps->pos++;
	}
	n = cur(ps);
	n->text = ps->d->arena_len;
	if (at(ps, 0) == '/') {
		if (at(ps, 1) != '>')
			return -EINVAL;
		ps->pos += 2;
		rc = arena_add(ps->d, "", 1); /* empty text */
		if (rc)
			return rc;
		ps->depth--;
		if (!ps->depth)
			ps->root_done = true;
		return 0;
	}
	ps->pos++; /* '>' */
	return 0;
}

static int end_tag(struct parser *ps)
{
	struct xml_node *n = cur(ps);
	size_t ns, nl;
	const char *name;
	int rc;

	ps->pos += 2; /* "</" */
	if (!n)
		return -EINVAL;
	rc = scan_name(ps, &ns, &nl);
	if (rc)
		return rc;
	skip_space(ps);
	if (at(ps, 0) != '>')
		return -EINVAL;
	ps->pos++;
	/* Compare local names (the open tag's prefix was dropped too). */
	name = memchr(ps->p + ns, ':', nl);
	if (name) {
		nl -= (size_t)(name + 1 - (ps->p + ns));
		ns = (size_t)(name + 1 - ps->p);
	}
	if (strlen(ps->d->arena + n->name) != nl ||
	    memcmp(ps->d->arena + n->name, ps->p + ns, nl) != 0)
		return -EINVAL;
	if (n->has_children) {
		/* No text kept; point at a NUL of its own name's end. */
		n->text = n->name + nl;
		n->text_len = 0;
	} else {
		n->text_len = ps->d->arena_len - n->text;
		rc = arena_add(ps->d, "", 1);
		if (rc)
			return rc;
	}
	ps->depth--;
	if (!ps->depth)
		ps->root_done = true;
	return 0;
}

static int parse(struct parser *ps)
{
	int rc = 0;

	if (starts(ps, "\xEF\xBB\xBF")) /* UTF-8 byte order mark */
		ps->pos += 3;
	while (rc == 0 && more(ps, 1)) {
		if (at(ps, 0) != '<') {
			rc = chars(ps);
		} else if (starts(ps, "<?")) {
			rc = skip_past(ps, "?>", false);
		} else if (starts(ps, "<!--")) {
			ps->pos += 4;
			rc = skip_past(ps, "-->", false);
		} else if (starts(ps, "<![CDATA[")) {
			if (!ps->depth)
				return -EINVAL;
			ps->pos += 9;
			rc = skip_past(ps, "]]>", keep_text(ps));
		} else if (starts(ps, "<!")) {
			return -EINVAL; /* DOCTYPE and friends: refused */
		} else if (starts(ps, "</")) {
			rc = end_tag(ps);
		} else {
			if (ps->root_done)
				return -EINVAL;
			rc = start_tag(ps);
		}
	}
	if (rc)
		return rc;
	return ps->depth || !ps->root_done ? -EINVAL : 0;
}

int xml_parse(const char *buf, size_t len, struct xml_doc **out)
{
	struct parser ps = { .p = buf, .len = len };
	struct xml_doc *d;
	int rc;

	*out = NULL;
	if (!buf || len == 0)
		return -EINVAL;
	if (len > SIZE_MAX / 2 - 16)
		return -E2BIG;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	/* See the top comment for this bound. */
	d->arena_cap = len + 2 * (len / 3 + 1) + 1;
	d->arena = malloc(d->arena_cap);
	if (!d->arena) {
		free(d);
		return -ENOMEM;
	}
	ps.d = d;
	rc = parse(&ps);
	if (rc) {
		xml_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void xml_free(struct xml_doc *d)
{
	if (!d)
		return;
	free(d->nodes);
	free(d->arena);
	free(d);
}

const struct xml_node *xml_root(const struct xml_doc *d)
{
	return &d->nodes[0];
}

const char *xml_name(const struct xml_node *n)
{
	return n->doc->arena + n->name;
}

static const struct xml_node *match_from(const struct xml_node *n, uint32_t idx,
					 const char *name)
{
	const struct xml_doc *d = n->doc;

	for (; idx; idx = d->nodes[idx].next)
		if (!name || strcmp(d->arena + d->nodes[idx].name, name) == 0)
			return &d->nodes[idx];
	return NULL;
}

const struct xml_node *xml_child(const struct xml_node *n, const char *name)
{
	return n ? match_from(n, n->first_child, name) : NULL;
}

const struct xml_node *xml_next(const struct xml_node *n, const char *name)
{
	return n ? match_from(n, n->next, name) : NULL;
}

const char *xml_text(const struct xml_node *n, size_t *len)
{
	if (len)
		*len = n->text_len;
	return n->doc->arena + n->text;
}

const char *xml_child_text(const struct xml_node *n, const char *name, size_t *len)
{
	const struct xml_node *c = xml_child(n, name);

	return c ? xml_text(c, len) : NULL;
}
