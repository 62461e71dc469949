/*
 * trendwrite: the cost of writing a trend slot (injector/agent/trend.c),
 * which reads every stack's counters.  Makes 2^DEPTH stacks holding a
 * block each, then times CALLS malloc/free pairs of 64 bytes at one site;
 * run in exact mode (every call a sample) with YM_TREND_SLOT_MS=1 (a slot
 * written every millisecond) and =0 (none), tests/bench/trendcost.sh:
 * the difference over the slots written is the cost of one.
 *
 *   trendwrite DEPTH CALLS   prints the loop's thread CPU seconds
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

/* Global: blocks stored where nothing reads them could be elided. */
void *held[1 << 16];
int nheld;
volatile int side;   /* left and right differ: never merged into one */
static void walk(int level, int depth);

NOINLINE static void left(int level, int depth)
{
	side = 1;
	walk(level + 1, depth);
	__asm__ volatile("" ::: "memory");
}

NOINLINE static void right(int level, int depth)
{
	side = 2;
	walk(level + 1, depth);
	__asm__ volatile("" ::: "memory");
}

NOINLINE static void walk(int level, int depth)
{
	if (level == depth) {
		if (nheld < (int)(sizeof held / sizeof *held))
			held[nheld++] = malloc(64);
		return;
	}
	left(level, depth);
	right(level, depth);
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 14;
	long calls = argc > 2 ? atol(argv[2]) : 2000000;
	if (depth < 1 || depth > 16)
		return 2;
	walk(0, depth);
	struct timespec a, b;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	for (long i = 0; i < calls; i++) {
		void *volatile p = malloc(64);
		free(p);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	printf("%.4f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
	return 0;
}
