/*
 * vforkalloc: a vfork child allocates before its _exit (POSIX forbids it;
 * error paths do it), before the parent ever did.  The child shares the
 * agent's state: it must not make the parent's segment in its own name.
 * The parent then allocates, prints "ready" and waits for stdin's EOF.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;

int main(void)
{
	static char inbuf[4096];
	setvbuf(stdin, inbuf, _IOLBF, sizeof inbuf);
	pid_t c = vfork();
	if (c == 0) {
		sink = malloc(100);
		_exit(0);
	}
	waitpid(c, NULL, 0);
	for (int i = 0; i < 64; i++)
		sink = malloc(65536);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin))
		;
	return 0;
}
