/*
 * stress_signal: signals interrupting allocation.
 *
 *   stress_signal timer N   a 20 µs interval timer (SIGALRM) and a profiling
 *                           timer (SIGPROF) interrupt N rounds of
 *                           malloc/calloc/realloc/free; the handlers only do
 *                           async-signal-safe work (counters, getpid, a
 *                           write to a pipe nobody reads) — so the agent is
 *                           interrupted in its own code, wherever that is.
 *   stress_signal kill N    4 threads allocate while main sends them
 *                           SIGUSR1 N times each with pthread_kill
 *                           (handler installed without SA_RESTART).
 *   stress_signal outside N the handler allocates and frees, but only when
 *                           the interrupted code is not inside an allocator
 *                           call (a flag around each call), which is what
 *                           glibc tolerates too.
 *   stress_signal jump N    SIGUSR2 raised from inside allocating frames,
 *                           its handler siglongjmp()s back out (never from
 *                           inside malloc: raise() is called between calls).
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t hits;
static volatile sig_atomic_t in_alloc;
static int devnull_pipe[2];
static int alloc_in_handler;

static void handler(int sig)
{
	(void)sig;
	hits++;
	(void)getpid();
	char c = 'x';
	ssize_t w = write(devnull_pipe[1], &c, 1); /* non-blocking */
	(void)w;
	if (alloc_in_handler && !in_alloc) {
		char *p = malloc(64);
		if (p) {
			p[0] = 1;
			free(p);
		}
	}
}

#define GUARD(expr) (in_alloc = 1, (expr), in_alloc = 0)

static unsigned work(unsigned seed, int n)
{
	unsigned sum = 0;
	void *keep[16] = { 0 };
	for (int i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t sz = 1 + (seed >> 8) % 2048;
		unsigned char *p;
		GUARD(p = (i % 3) ? malloc(sz) : calloc(1, sz));
		if (!p)
			abort();
		if (i % 5 == 0) {
			unsigned char *q;
			GUARD(q = realloc(p, sz + 100));
			if (!q)
				abort();
			p = q;
		}
		p[0] = (unsigned char)sz;
		sum += p[0];
		GUARD(free(keep[i % 16]));
		keep[i % 16] = p;
	}
	for (int i = 0; i < 16; i++)
		GUARD(free(keep[i]));
	return sum;
}

static void install(int sig, int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void timers(int on)
{
	struct itimerval it = { { 0, on ? 20 : 0 }, { 0, on ? 20 : 0 } };
	setitimer(ITIMER_REAL, &it, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
}

static int stop;

static void *worker(void *arg)
{
	unsigned s = (unsigned)(uintptr_t)arg, sum = 0;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
		sum += work(s++, 50);
	return (void *)(uintptr_t)sum;
}

static sigjmp_buf jb;

static void jump_handler(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static int depth_alloc(int d, void **leak)
{
	char *p = malloc(100 + (size_t)d);
	if (!p)
		abort();
	leak[d] = p;
	if (d == 20)
		raise(SIGUSR2);
	return d < 20 ? depth_alloc(d + 1, leak) + 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: stress_signal timer|kill|outside|jump N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	if (pipe(devnull_pipe) != 0)
		return 3;
	/* A full pipe makes write() fail with EAGAIN instead of blocking. */
	fcntl(devnull_pipe[1], F_SETFL, O_NONBLOCK);
	if (!strcmp(argv[1], "timer") || !strcmp(argv[1], "outside")) {
		alloc_in_handler = !strcmp(argv[1], "outside");
		install(SIGALRM, SA_RESTART);
		install(SIGPROF, SA_RESTART);
		timers(1);
		unsigned sum = 0;
		for (int i = 0; i < n; i++)
			sum += work((unsigned)i, 100);
		timers(0);
		printf("%s %d: sum %u signals %s\n", argv[1], n, sum,
		       hits > 0 ? "seen" : "none");
	} else if (!strcmp(argv[1], "kill")) {
		install(SIGUSR1, 0);
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
		for (int i = 0; i < n; i++)
			for (int k = 0; k < 4; k++)
				pthread_kill(t[k], SIGUSR1);
		__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		printf("kill %d: signals %s\n", n, hits > 0 ? "seen" : "none");
	} else if (!strcmp(argv[1], "jump")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = jump_handler;
		sigaction(SIGUSR2, &sa, NULL);
		long jumps = 0;
		for (int i = 0; i < n; i++) {
			void *leak[21] = { 0 };
			if (sigsetjmp(jb, 1) == 0)
				depth_alloc(0, leak);
			else
				jumps++;
			for (int d = 0; d <= 20; d++)
				free(leak[d]);
		}
		printf("jump %d: %ld jumps\n", n, jumps);
	} else {
		return 2;
	}
	return 0;
}
