/*
 * driver.c - a main() for the fuzz targets when they are built without
 * libFuzzer (the normal compiler, `make check`).
 *
 * For: replaying a corpus.  Each argument is a file or a directory; a
 * directory's regular files are run in name order (so a failure
 * reproduces), not recursively.  Each input is handed to
 * LLVMFuzzerTestOneInput() as an exactly-sized heap copy, so an overread
 * is caught by AddressSanitizer in the sanitizer build.  A missing
 * argument path is skipped with a note: regressions/<name>/ exists only
 * once a target has had a crasher.  Not for: finding new inputs (that is
 * `make fuzz`, with clang and libFuzzer).
 *
 * The name of each input goes to stderr before it runs, so the last name
 * in a failed test's log is the input that crashed.  Exit status: 0 when
 * every input ran (a violated invariant aborts), 1 on an unreadable
 * input or when no input was found at all.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

/* libFuzzer calls it when a target defines it; so do we. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Run one file.  0, or -1 when it cannot be read. */
static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!fp) {
		fprintf(stderr, "driver: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(fp, 0, SEEK_END) || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET))
		goto bad;
	/* malloc(0) may return NULL; an empty input is passed as a 1-byte
	 * allocation with size 0, like libFuzzer does. */
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || (n && fread(buf, 1, (size_t)n, fp) != (size_t)n))
		goto bad;
	fclose(fp);
	fprintf(stderr, "driver: %s (%ld bytes)\n", path, n);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
bad:
	fprintf(stderr, "driver: %s: cannot read\n", path);
	free(buf);
	fclose(fp);
	return -1;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run the regular files of dir in name order.  Adds to *count. */
static int run_dir(const char *dir, unsigned long *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d) {
		fprintf(stderr, "driver: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **p = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));

			if (!p)
				abort();
			names = p;
		}
		size_t len = strlen(dir) + strlen(de->d_name) + 2;

		names[n] = malloc(len);
		if (!names[n])
			abort();
		snprintf(names[n], len, "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(names[i]))
				rc = -1;
			else
				(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned long count = 0;
	int rc = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "driver: %s: absent, skipped\n", argv[i]);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count))
				rc = 1;
		} else if (run_file(argv[i])) {
			rc = 1;
		} else {
			count++;
		}
	}
	printf("%s: %lu inputs replayed\n", argc > 0 ? argv[0] : "driver", count);
	if (count == 0) {
		fprintf(stderr, "driver: no inputs found\n");
		rc = 1;
	}
	return rc;
}
