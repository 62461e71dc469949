/*
 * manystacks: a process with 2^DEPTH distinct allocation stacks (default
 * 14 levels: 16384 stacks), each holding one small block, then idle until
 * killed.  Run it in exact mode so that every stack is recorded:
 *   YM_SAMPLE_RATE=1 LD_PRELOAD=.../libymagent.so manystacks [DEPTH]
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

void *held[1 << 16];
int nheld;

static void walk(int level, int depth);

NOINLINE static void left(int level, int depth)
{
	walk(level + 1, depth);
	__asm__ volatile("" ::: "memory");   /* no tail call: keep the frame */
}

NOINLINE static void right(int level, int depth)
{
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
	if (depth < 1 || depth > 16)
		return 2;
	walk(0, depth);
	printf("ready %d\n", nheld);
	fflush(stdout);
	pause();
	return 0;
}
