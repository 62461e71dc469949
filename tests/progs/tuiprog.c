/*
 * tuiprog: a target for the terminal tests.  Holds memory at two sites,
 * prints "ready", then obeys lines on stdin:
 *   grow     hold 16 MiB more at grow_site, print "grown"
 *   giant    hold one 24 MiB block from giant_site, print "giant"
 *   exit     exit 0 (so does EOF)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

void **held;
size_t nheld;

static void keep(void *p)
{
	void **h = realloc(held, (nheld + 1) * sizeof *h);
	if (!h)
		abort();
	held = h;
	held[nheld++] = p;
}

NOINLINE static void big_site(void)
{
	for (int i = 0; i < 512; i++)
		keep(malloc(65536));   /* 32 MiB */
}

NOINLINE static void small_site(void)
{
	for (int i = 0; i < 256; i++)
		keep(malloc(32768));   /* 8 MiB */
}

NOINLINE static void grow_site(void)
{
	for (int i = 0; i < 256; i++)
		keep(malloc(65536));   /* 16 MiB */
}

NOINLINE static void giant_site(void)
{
	char *p = malloc(24 << 20);
	if (p)
		memset(p, 1, 4096);
	keep(p);
}

int main(void)
{
	big_site();
	small_site();
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "grow", 4)) {
			grow_site();
			printf("grown\n");
			fflush(stdout);
		} else if (!strncmp(line, "giant", 5)) {
			giant_site();
			printf("giant\n");
			fflush(stdout);
		} else if (!strncmp(line, "exit", 4)) {
			break;
		}
	}
	return 0;
}
