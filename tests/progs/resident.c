/*
 * resident: blocks whose pages are written and blocks never written, for
 * the resident figures (tests/integration/test_resident.py).
 *
 *   resident         prints "ready", then reads commands on stdin, each
 *                    answered with "ready":
 *   touch MIB        touch_site allocates MIB MiB in 64 KiB blocks and
 *                    writes every byte (all their pages resident)
 *   untouched MIB    untouched_site allocates MIB MiB in 256 KiB blocks
 *                    (above glibc's mmap threshold: mappings of their
 *                    own) and writes nothing (one page of 65 resident:
 *                    the allocator's header)
 *   EOF exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static NOINLINE void touch_site(size_t mib)
{
	size_t n = mib * 16;
	for (size_t i = 0; i < n; i++) {
		void *p = malloc(64 * 1024);
		memset(p, 1, 64 * 1024);
		__asm__ volatile("" : : "r"(p) : "memory");   /* kept */
	}
}

static NOINLINE void untouched_site(size_t mib)
{
	size_t n = mib * 4;
	for (size_t i = 0; i < n; i++) {
		void *p = malloc(256 * 1024);
		__asm__ volatile("" : : "r"(p) : "memory");   /* kept */
	}
}

int main(void)
{
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		size_t mib = 0;
		if (sscanf(line, "touch %zu", &mib) == 1 && mib <= 4096)
			touch_site(mib);
		else if (sscanf(line, "untouched %zu", &mib) == 1 && mib <= 4096)
			untouched_site(mib);
		printf("ready\n");
	}
	return 0;
}
