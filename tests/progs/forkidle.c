/*
 * forkidle: a daemon that forks away and then idles without allocating,
 * as an nginx master does after daemonizing.
 *
 *   forkidle    allocates 1 MiB, forks; the parent prints "ready CHILD"
 *               and exits 0; the child waits in pause() for a signal
 *               and allocates nothing (it writes nothing either).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile held;

int main(void)
{
	held = malloc(1 << 20);
	memset(held, 1, 1 << 20);
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(0);   /* detached, as a daemon is */
		close(1);
		close(2);
		for (;;)
			pause();
	}
	char line[48];
	int n = snprintf(line, sizeof line, "ready %ld\n", (long)child);
	return write(1, line, (size_t)n) == n ? 0 : 1;
}
