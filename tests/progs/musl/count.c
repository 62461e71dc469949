/* A program built by musl-gcc, run under build/libymagent-musl.so
 * (tests/integration/test_musl.py): count_site makes 5000 blocks of 48
 * bytes and frees them, hold_site keeps 1000 blocks of 4096 bytes, four
 * threads keep 256 blocks of 1024 bytes each at thread_site, and a fork
 * child allocates 100 blocks at child_site (in its own segment, not its
 * parent's); then "ready", and it waits for a line on stdin. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define HELD 1000
#define THREADS 4
#define PER_THREAD 256

static void *held[HELD];
static void *thread_held[THREADS][PER_THREAD];

/* The optimizer may drop an allocation whose pointer goes nowhere. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

__attribute__((noinline)) static void count_site(void)
{
	for (int i = 0; i < 5000; i++) {
		void *p = malloc(48);
		KEEP(p);
		free(p);
	}
}

__attribute__((noinline)) static void hold_site(void)
{
	for (int i = 0; i < HELD; i++)
		held[i] = malloc(4096);
}

__attribute__((noinline)) static void *thread_site(void *arg)
{
	void **mine = arg;
	for (int i = 0; i < PER_THREAD; i++)
		mine[i] = malloc(1024);
	return NULL;
}

__attribute__((noinline)) static void child_site(void)
{
	for (int i = 0; i < 100; i++) {
		void *p = malloc(100);
		KEEP(p);
		free(p);
	}
}

int main(void)
{
	count_site();
	hold_site();
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, thread_site, thread_held[i]) != 0)
			return 2;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pid_t pid = fork();
	if (pid == 0) {
		child_site();
		_exit(0);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return 3;
	printf("ready\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	for (int i = 0; i < HELD; i++)
		free(held[i]);
	return 0;
}
