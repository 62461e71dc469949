/*
 * execer: exec that fails, then one that succeeds, for
 * tests/integration/test_leftovers.py.  Prints "ready", then reads
 * commands on stdin:
 *
 *   bad    execvp of a program that does not exist: prints "failed"
 *   badl   the same with execl
 *   alloc  hold_site: malloc 8 MiB, touched and kept; prints "ready"
 *   exec   execle /bin/sleep 30 with an empty environment (no agent)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *held[64];
static int nheld;

static __attribute__((noinline)) void hold_site(void)
{
	char *p = malloc(8 << 20);
	if (!p)
		abort();
	memset(p, 1, 8 << 20);
	if (nheld < 64)
		held[nheld++] = p;
}

int main(void)
{
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "badl", 4)) {
			execl("/nonexistent/ymtop-test", "x", (char *)NULL);
			printf("failed\n");
		} else if (!strncmp(line, "bad", 3)) {
			char *argv[] = { "ymtop-test-no-such-program", NULL };
			execvp(argv[0], argv);
			printf("failed\n");
		} else if (!strncmp(line, "alloc", 5)) {
			hold_site();
			printf("ready\n");
		} else if (!strncmp(line, "exec", 4)) {
			char *envp[] = { NULL };
			execle("/bin/sleep", "sleep", "30", (char *)NULL, envp);
			printf("failed\n");
		}
	}
	return 0;
}
