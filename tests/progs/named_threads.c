/*
 * named_threads: threads with names of their own, alive until told.
 *
 *   named_threads [N]   starts N threads (default 3, at most 16), named
 *                       "ymnamed-0" ... with pthread_setname_np; each holds
 *                       2 MiB in 4 KiB blocks (named_site), then waits.
 *                       Prints "ready" once all hold their memory, waits
 *                       for a line (or EOF) on stdin, lets the threads go
 *                       and exits 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16
#define BLOCKS 512

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int holding, done;

__attribute__((noinline)) static void *named_site(size_t n)
{
	void *p = malloc(n);
	if (p)
		memset(p, 1, n);
	return p;
}

static void *worker(void *arg)
{
	char name[16];
	snprintf(name, sizeof name, "ymnamed-%d", (int)(long)arg);
	pthread_setname_np(pthread_self(), name);
	void **blocks = malloc(BLOCKS * sizeof *blocks);
	for (int i = 0; blocks && i < BLOCKS; i++)
		blocks[i] = named_site(4096);
	pthread_mutex_lock(&lock);
	holding++;
	pthread_cond_broadcast(&cond);
	while (!done)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	for (int i = 0; blocks && i < BLOCKS; i++)
		free(blocks[i]);
	free(blocks);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	if (n < 1 || n > MAX_THREADS)
		n = 3;
	pthread_t t[MAX_THREADS];
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(long)i) != 0)
			return 1;
	pthread_mutex_lock(&lock);
	while (holding < n)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		line[0] = '\0';
	pthread_mutex_lock(&lock);
	done = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
