/*
 * options.c - see options.h: what NOVAFS_OPTIONS generates.
 *
 * For: the fuse_opt table, the strict parse of numbers (parse_number()),
 * the range check, --help and the mapping.  Not for: the daemon's
 * start-up (src/novafs.c).
 *
 * Invariants: those of options.h.
 */
#include "config.h"
#include "src/options.h"
#include "src/base/log.h"
#include "src/base/paths.h"

#include <ctype.h>
#include <errno.h>
#include <fuse_opt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct fuse_opt nova_opts[] = {
#define OPT_FUSE_NUM(name, type, meta, def, lo, hi, unit, to, help) \
	{ #name "=%s", offsetof(struct options, text_##name), 1 },
#define OPT_FUSE_STR(name, meta, def, to, help) { #name "=%s", offsetof(struct options, name), 1 },
	NOVAFS_OPTIONS(OPT_FUSE_NUM, OPT_FUSE_STR)
#undef OPT_FUSE_NUM
#undef OPT_FUSE_STR
	{ "-h", offsetof(struct options, show_help), 1 },
	{ "--help", offsetof(struct options, show_help), 1 },
	{ "-V", offsetof(struct options, show_version), 1 },
	{ "--version", offsetof(struct options, show_version), 1 },
	FUSE_OPT_END
};

/* What --help and opts_check() need of each line, as data. */
enum opt_type { OPT_TYPE_u, OPT_TYPE_i, OPT_TYPE_d, OPT_TYPE_s };

struct opt_desc {
	const char *name, *meta, *help;
	const char *def_text; /* STR only */
	enum opt_type type;
	size_t off;             /* in struct options */
	size_t text_off;        /* NUM only: the text's char * in struct options */
	double def, lo, hi;     /* NUM only: exact for every integer range here */
};

static const struct opt_desc opt_descs[] = {
#define OPT_DESC_NUM(name, type, meta, def, lo, hi, unit, to, help) \
	{ #name, meta, help, NULL, OPT_TYPE_##type, offsetof(struct options, name), \
	  offsetof(struct options, text_##name), def, lo, hi },
#define OPT_DESC_STR(name, meta, def, to, help) \
	{ #name, meta, help, def, OPT_TYPE_s, offsetof(struct options, name), 0, 0, 0, 0 },
	NOVAFS_OPTIONS(OPT_DESC_NUM, OPT_DESC_STR)
#undef OPT_DESC_NUM
#undef OPT_DESC_STR
};

static void set_defaults(struct options *o)
{
	memset(o, 0, sizeof(*o));
#define OPT_DEF_NUM(name, type, meta, def, lo, hi, unit, to, help) o->name = def;
#define OPT_DEF_STR(name, meta, def, to, help)
	NOVAFS_OPTIONS(OPT_DEF_NUM, OPT_DEF_STR)
#undef OPT_DEF_NUM
#undef OPT_DEF_STR
}

void opts_map(const struct options *o, struct star_cfg *s, struct fs_cfg *f)
{
#define STAR(field) s->field =
#define FS(field) f->field =
#define DAEMON() (void)
#define OPT_MAP_NUM(name, type, meta, def, lo, hi, unit, to, help) \
	to OPT_SCALE_##type(o->name, unit);
#define OPT_MAP_STR(name, meta, def, to, help) to o->name;
	NOVAFS_OPTIONS(OPT_MAP_NUM, OPT_MAP_STR)
#undef OPT_MAP_NUM
#undef OPT_MAP_STR
#undef STAR
#undef FS
#undef DAEMON
	/* The kernel caches names as long as attributes. */
	f->entry_timeout = f->attr_timeout;
}

static double opt_value(const struct options *o, const struct opt_desc *d)
{
	const char *p = (const char *)o + d->off;

	switch (d->type) {
	case OPT_TYPE_u:
		return *(const unsigned *)p;
	case OPT_TYPE_i:
		return *(const int *)p;
	case OPT_TYPE_d:
		return *(const double *)p;
	default:
		return 0;
	}
}

/* A NUM value as --help and the errors show it. */
static void opt_num_text(const struct opt_desc *d, double v, char *buf, size_t cap)
{
	snprintf(buf, cap, d->type == OPT_TYPE_d ? "%g" : "%.0f", v);
}

/*
 * One NUM option's text into its field, strictly: the whole text is one
 * number of the option's type (no sign on an unsigned, no trailing
 * characters, no nan or inf), else the start is refused naming the
 * option.  0 or -1 (said why).
 */
static int parse_number(struct options *o, const struct opt_desc *d, const char *text)
{
	char *p = (char *)o + d->off, *end = NULL;
	const char *want;

	errno = 0;
	switch (d->type) {
	case OPT_TYPE_u: {
		unsigned long long v = 0;

		want = "a whole number";
		if (!isdigit((unsigned char)text[0]))
			break;
		v = strtoull(text, &end, 10);
		if (*end)
			break;
		/* Too big for the field: out of range (opts_check() says so). */
		*(unsigned *)p = errno || v > UINT_MAX ? UINT_MAX : (unsigned)v;
		return 0;
	}
	case OPT_TYPE_i: {
		long v = 0;

		want = "a whole number";
		if (!isdigit((unsigned char)text[text[0] == '-']))
			break;
		v = strtol(text, &end, 10);
		if (*end)
			break;
		*(int *)p = errno || v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
		return 0;
	}
	case OPT_TYPE_d: {
		double v;

		want = "a finite number";
		if (!text[0] || isspace((unsigned char)text[0]))
			break;
		v = strtod(text, &end);
		if (*end || errno || !isfinite(v))
			break;
		*(double *)p = v;
		return 0;
	}
	default:
		return 0;
	}
	fprintf(stderr, "novafs: -o %s=%s: not %s (%s)\n", d->name, text, want,
		d->type == OPT_TYPE_d ? "seconds, e.g. 0.5" : "digits only");
	return -1;
}

/* Every NUM option given on the command line, parsed (parse_number()). */
static int parse_numbers(struct options *o)
{
	for (size_t i = 0; i < sizeof(opt_descs) / sizeof(opt_descs[0]); i++) {
		const struct opt_desc *d = &opt_descs[i];
		const char *text;

		if (d->type == OPT_TYPE_s)
			continue;
		text = *(char *const *)((const char *)o + d->text_off);
		if (text && parse_number(o, d, text))
			return -1;
	}
	return 0;
}

int opts_check(const struct options *o)
{
	for (size_t i = 0; i < sizeof(opt_descs) / sizeof(opt_descs[0]); i++) {
		const struct opt_desc *d = &opt_descs[i];
		double v = opt_value(o, d);
		char vt[32], lt[32], ht[32];
		const char *given;

		if (d->type == OPT_TYPE_s || (v >= d->lo && v <= d->hi))
			continue;
		/* The value as given (a clamped one would not be the user's). */
		given = *(char *const *)((const char *)o + d->text_off);
		opt_num_text(d, v, vt, sizeof(vt));
		opt_num_text(d, d->lo, lt, sizeof(lt));
		opt_num_text(d, d->hi, ht, sizeof(ht));
		fprintf(stderr, "novafs: -o %s=%s is out of range [%s, %s]\n", d->name,
			given ? given : vt, lt, ht);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ --help */

#define HELP_COL 31   /* where the help text starts */
#define HELP_WIDTH 79 /* where it wraps */

/* "    LEFT  TEXT", TEXT word-wrapped at HELP_WIDTH under HELP_COL. */
static void help_entry(const char *left, const char *text)
{
	int col = printf("    %-*s", HELP_COL - 5, left);
	bool line_start = false;

	while (*text) {
		size_t w = strcspn(text, " ");

		if (!line_start && col + 1 + (int)w > HELP_WIDTH) {
			col = printf("\n%*s", HELP_COL, "") - 1;
			line_start = true;
		}
		col += printf("%s%.*s", line_start ? "" : " ", (int)w, text);
		line_start = false;
		text += w;
		text += strspn(text, " ");
	}
	putchar('\n');
}

/* The parts of --help known only at run time (the NULL defaults of the
 * table, and debug's subsystems), appended to buf. */
static void help_computed(const struct opt_desc *d, char *buf, size_t cap)
{
	size_t n = strlen(buf);

	if (!strcmp(d->name, "data_dir")) {
		char dd[PATH_MAX];

		nv_default_data_dir(dd, sizeof(dd));
		snprintf(buf + n, cap - n, " (default: %s)", dd);
	} else if (!strcmp(d->name, "debug")) {
		snprintf(buf + n, cap - n, " all");
		for (int i = 0; i < NV_SUB_COUNT; i++) {
			n = strlen(buf);
			snprintf(buf + n, cap - n, ", %s", nv_log_subsys_name(i));
		}
	}
}

void opts_usage(const char *prog)
{
	printf("usage: %s [-f] [-o opt,...] [SOURCE] MOUNTPOINT\n\n"
	       "A durable stream store on object storage: every file is an append-only\n"
	       "stream; write() returns when the record is durable.  SOURCE (as mount(8)\n"
	       "and /etc/fstab pass it: novafs) is a label; the data is -o data_dir.\n"
	       "See novafs(8).\n\n"
	       "novafs options:\n", prog);
	for (size_t i = 0; i < sizeof(opt_descs) / sizeof(opt_descs[0]); i++) {
		const struct opt_desc *d = &opt_descs[i];
		char left[64], text[PATH_MAX + 1024], def[32], lo[32], hi[32];
		size_t n;

		snprintf(left, sizeof(left), "-o %s=%s", d->name, d->meta);
		snprintf(text, sizeof(text), "%s", d->help);
		help_computed(d, text, sizeof(text));
		n = strlen(text);
		if (d->type != OPT_TYPE_s) {
			opt_num_text(d, d->def, def, sizeof(def));
			opt_num_text(d, d->lo, lo, sizeof(lo));
			opt_num_text(d, d->hi, hi, sizeof(hi));
			snprintf(text + n, sizeof(text) - n, " (default: %s; range %s..%s)", def,
				 lo, hi);
		} else if (d->def_text) {
			snprintf(text + n, sizeof(text) - n, " (default: %s)", d->def_text);
		}
		help_entry(left, text);
	}
	help_entry("-h, --help", "this help");
	help_entry("-V, --version", "print the version");
	printf("\nFUSE options:\n");
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/* fuse_opt_parse()'s callback: the positional arguments are kept aside
 * (mount.fuse3 passes SOURCE MOUNTPOINT); everything else goes on to
 * libfuse. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct options *o = data;

	(void)outargs;
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	if (o->npos == 2) {
		fprintf(stderr, "novafs: too many arguments ('%s'): novafs [SOURCE] MOUNTPOINT\n",
			arg);
		return -1;
	}
	o->pos[o->npos] = strdup(arg);
	return o->pos[o->npos++] ? 0 : -1;
}

int opts_parse(struct fuse_args *args, struct options *o)
{
	set_defaults(o);
	if (fuse_opt_parse(args, o, nova_opts, opt_proc) == -1)
		return -1;
	return parse_numbers(o);
}

void opts_free(struct options *o)
{
#define OPT_FREE_NUM(name, type, meta, def, lo, hi, unit, to, help) free(o->text_##name);
#define OPT_FREE_STR(name, meta, def, to, help) free(o->name);
	NOVAFS_OPTIONS(OPT_FREE_NUM, OPT_FREE_STR)
#undef OPT_FREE_NUM
#undef OPT_FREE_STR
	free(o->pos[0]);
	free(o->pos[1]);
}
