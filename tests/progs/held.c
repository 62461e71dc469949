/*
 * held: allocates 10 MiB in ten 1 MiB blocks from held_site(), prints
 * "ready", waits for a line on stdin, then:
 *   held            frees everything and returns 0;
 *   held N          returns N still holding the 10 MiB (a leak at exit);
 *   held kill       kills itself with SIGKILL, still holding them.
 * Used by tests/integration/test_picture.py (leaks at exit, symbols of
 * a stripped copy from debuginfod, RSS explained).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELD_BLOCK (1u << 20)

__attribute__((noinline)) static char *held_site(size_t n)
{
	char *p = malloc(n);   /* held_site's allocation */
	if (p)
		memset(p, 1, n);
	return p;
}

int main(int argc, char **argv)
{
	char *keep[10];
	for (int i = 0; i < 10; i++)
		keep[i] = held_site(HELD_BLOCK);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		line[0] = '\0';
	if (argc > 1 && !strcmp(argv[1], "kill"))
		raise(SIGKILL);
	if (argc > 1)
		return atoi(argv[1]);
	for (int i = 0; i < 10; i++)
		free(keep[i]);
	return 0;
}
