/*
 * reports_prog: allocations with known truth for the report tests.
 *
 *   reports_prog           holds 32 MiB in 32 KiB blocks (hold_base, through
 *                          the always-inlined fill_blocks: an inline frame
 *                          in every symbolized stack) and 4 MiB in 4 KiB
 *                          blocks (hold_pages); prints "ready"; then reads
 *                          commands from stdin, one a line:
 *     jump                 hold 64 MiB more in 4 MiB blocks (jump_site),
 *                          print "jumped"; 16 mmap'ed blocks take well
 *                          under a millisecond, so a reader rarely sees
 *                          half a jump
 *     quit, or EOF         exit 0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

/* The pointer arrays have a site of their own, so that every other site
 * allocates one size only (the tests check average sizes exactly). */
NOINLINE static void **keep(size_t n)
{
	void **v = calloc(n, sizeof *v);
	if (!v)
		abort();
	return v;
}

/* Always inlined, even under -fno-inline: the symbolizer must report it
 * as an inlined frame of its caller. */
static inline __attribute__((always_inline)) void **fill_blocks(size_t n,
								size_t size)
{
	void **v = keep(n);
	for (size_t i = 0; i < n; i++) {
		v[i] = malloc(size);
		if (!v[i])
			abort();
		memset(v[i], 1, 16);
	}
	return v;
}

NOINLINE static void hold_base(void)
{
	sink = fill_blocks(1024, 32768);
}

NOINLINE static void hold_pages(void)
{
	void **v = keep(1024);
	for (int i = 0; i < 1024; i++)
		v[i] = malloc(4096);
	sink = v;
}

NOINLINE static void jump_site(void)
{
	void **v = keep(16);
	for (int i = 0; i < 16; i++)
		v[i] = malloc(4u << 20);
	sink = v;
}

int main(void)
{
	hold_base();
	hold_pages();
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "jump", 4)) {
			jump_site();
			printf("jumped\n");
			fflush(stdout);
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	return 0;
}
