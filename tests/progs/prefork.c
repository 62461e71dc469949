/*
 * prefork: a master and its workers, as a prefork server (nginx,
 * PostgreSQL, gunicorn) runs.
 *
 *   prefork [N]   the master holds 1 MiB at master_site, forks N workers
 *                 (default 3) that each hold 2 MiB at worker_site, prints
 *                 "ready" once every worker has allocated, then waits
 *                 for EOF on stdin and ends the workers (SIGTERM) and
 *                 itself (exit 0).  Under YM_FOLLOW_FORK=1 (the agent's
 *                 default) each worker has a segment of its own.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE static void master_site(void)
{
	sink = malloc(1 << 20);
	memset(sink, 1, 1 << 20);
}

NOINLINE static void worker_site(void)
{
	for (int i = 0; i < 64; i++) {
		void **p = malloc(32768);
		memset(p, 2, 32768);
		p[0] = sink;
		sink = p;
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	if (n < 1 || n > 64)
		return 2;
	master_site();
	pid_t kids[64];
	int fds[2];
	if (pipe(fds) != 0)
		return 1;
	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0) {
			close(fds[0]);
			worker_site();
			if (write(fds[1], "x", 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
	}
	close(fds[1]);
	char c;
	for (int i = 0; i < n; i++)
		if (read(fds[0], &c, 1) != 1)
			return 1;
	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	for (int i = 0; i < n; i++)
		kill(kids[i], SIGTERM);
	for (int i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	return 0;
}
