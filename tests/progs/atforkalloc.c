/*
 * atforkalloc: a program whose own fork handler allocates in the child.
 *
 *   atforkalloc   registers a pthread_atfork child handler at start (so
 *                 before the agent's when ymtop -p loads it later: glibc
 *                 runs child handlers first registered first) that holds
 *                 8 MiB at atfork_site; prints "ready".  Each line
 *                 "fork" on stdin forks a child that, after the handler,
 *                 holds 1 MiB at child_site, prints "child PID" and
 *                 waits; EOF ends the children and the program.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE static void atfork_site(void)
{
	sink = malloc(8 << 20);
	memset(sink, 5, 8 << 20);
}

NOINLINE static void child_site(void)
{
	void *p = malloc(1 << 20);
	memset(p, 6, 1 << 20);
	*(void **)p = sink;
	sink = p;
}

static void in_child(void)
{
	atfork_site();
}

int main(void)
{
	if (pthread_atfork(NULL, NULL, in_child) != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	pid_t kids[16];
	int n = 0;
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "fork", 4) != 0 || n == 16)
			continue;
		pid_t p = fork();
		if (p < 0)
			return 1;
		if (p == 0) {
			child_site();
			printf("child %d\n", (int)getpid());
			fflush(stdout);
			for (;;)
				pause();
		}
		kids[n++] = p;
	}
	for (int i = 0; i < n; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	return 0;
}
