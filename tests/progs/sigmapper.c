/*
 * sigmapper: a signal handler that maps and unmaps anonymous memory while
 * the interrupted thread is inside malloc and free, for
 * tests/integration/test_mmap.py.  mmap is async-signal-safe: the agent's
 * mmap path must not wait for the allocator's lock the interrupted frame
 * holds.  Prints "ready", then "progress N" once a second; exits 0 after
 * argv[1] seconds (default 5), or prints "stuck" and exits 3 when the
 * main loop made no progress for a second.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile unsigned long progress;
static pthread_t main_th;

static void on_signal(int s)
{
	(void)s;
	void *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED)
		munmap(p, 1 << 16);
}

static void *kicker(void *a)
{
	(void)a;
	for (;;) {
		usleep(200);
		pthread_kill(main_th, SIGUSR1);
	}
	return NULL;
}

static void *watch(void *a)
{
	int secs = *(int *)a;
	unsigned long last = 0;
	for (int i = 0; i < secs; i++) {
		sleep(1);
		unsigned long now = progress;
		if (now == last) {
			printf("stuck\n");
			_exit(3);
		}
		printf("progress %lu\n", now);
		last = now;
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	static int secs;
	secs = argc > 1 ? atoi(argv[1]) : 5;
	setvbuf(stdout, NULL, _IOLBF, 0);
	main_th = pthread_self();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t a, b;
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &m, NULL);   /* the threads' mask */
	pthread_create(&a, NULL, kicker, NULL);
	pthread_create(&b, NULL, watch, &secs);
	pthread_sigmask(SIG_UNBLOCK, &m, NULL);
	printf("ready\n");
	void *keep[256] = { 0 };
	unsigned r = 1;
	for (;;) {
		r = r * 1103515245 + 12345;
		unsigned i = (r >> 8) & 255;
		free(keep[i]);
		keep[i] = malloc(2000 + (r >> 12) % 100000);
		progress++;
	}
}
