/*
 * forkwalk: fork while other threads walk the loader's list of objects.
 *
 *   forkwalk [N]   starts a thread that walks the list for ever with
 *                  dl_iterate_phdr and a slow callback (the loader's lock
 *                  is held nearly all the time, as in a program whose
 *                  unwinder or profiler walks it) and one that allocates
 *                  (the agent samples there, and scans the list once a
 *                  millisecond); forks N children (default 20) that each
 *                  hold 4 MiB at child_site and exit 0, and a last one
 *                  forked from inside a dl_iterate_phdr callback of its
 *                  parent's (the lock is then held in the child for
 *                  good) that holds 4 MiB at kept_site and waits.
 *                  Prints "hung K of N" (children killed by their 10 s
 *                  alarm, or exiting otherwise than 0), "kept PID" and
 *                  "ready", then waits for EOF on stdin and ends the kept
 *                  child.
 *
 * glibc does not reset the loader's lock in a fork child: a child whose
 * first allocation made the agent call dl_iterate_phdr waited for ever.
 */
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE static void child_site(void)
{
	for (int i = 0; i < 64; i++) {
		void **p = malloc(65536);
		memset(p, 3, 65536);
		p[0] = sink;
		sink = p;
	}
}

NOINLINE static void kept_site(void)
{
	child_site();
}

static int slow_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	for (volatile int k = 0; k < 20000; k++)
		;
	return 0;
}

static void *walker(void *arg)
{
	(void)arg;
	for (;;)
		dl_iterate_phdr(slow_cb, NULL);
	return NULL;
}

static void *allocator(void *arg)
{
	(void)arg;
	for (;;) {
		void *p = malloc(4096 + (size_t)(rand() & 4095));
		free(p);
	}
	return NULL;
}

static pid_t kept = -1;

/* Fork from inside the walk: the child's copy of the lock is held by a
 * thread (this one, under its parent's tid) the child does not have. */
static int fork_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	kept = fork();
	return 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;
	if (n < 1 || n > 1000)
		return 2;
	pthread_t t;
	if (pthread_create(&t, NULL, walker, NULL) != 0 ||
	    pthread_create(&t, NULL, allocator, NULL) != 0)
		return 1;
	usleep(20000);
	int hung = 0;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p < 0)
			return 1;
		if (p == 0) {
			alarm(10);
			child_site();
			_exit(0);
		}
		int st;
		if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			hung++;
		usleep(1000 + (unsigned)(rand() % 3000));
	}
	printf("hung %d of %d\n", hung, n);
	fflush(stdout);
	dl_iterate_phdr(fork_cb, NULL);
	if (kept < 0)
		return 1;
	if (kept == 0) {
		kept_site();
		for (;;)
			pause();
	}
	printf("kept %d\nready\n", (int)kept);
	fflush(stdout);
	char buf[64];
	while (fgets(buf, sizeof buf, stdin))
		;
	kill(kept, SIGKILL);
	waitpid(kept, NULL, 0);
	return 0;
}
