/*
 * novactl.c - the admin CLI beside the mount (novactl(8)).
 *
 * For now: `novactl version`.  status, fsck and layout arrive with the
 * crash-safety work (see the project's issues).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version"))) {
		printf("novactl %s\n", PACKAGE_VERSION);
		return 0;
	}
	fprintf(stderr, "usage: novactl version\n");
	return 2;
}
