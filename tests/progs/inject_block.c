/* Injection target: the main thread blocked in one system call that must
 * resume, unaware of the injection, with its full timeout.
 *   inject_block sleep|epoll|futex|poll
 *   prints "ready", then blocks for 1.5 s in nanosleep, epoll_wait without
 *   a timeout (a helper thread writes into the pipe it waits on after
 *   1.5 s), a futex wait (pthread_cond_timedwait) or poll; prints
 *   "<mode> ok" when the call returned as it would have (no EINTR, full
 *   time elapsed, the event for epoll),
 *   "<mode> BAD ..." otherwise; holds 4 MiB from block_site; reads a line
 *   and exits 0. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define BLOCK_NS 1500000000LL

void **volatile sink;

__attribute__((noinline)) static void **block_site(void)
{
	void **v = malloc(64 * sizeof *v);
	for (int i = 0; v && i < 64; i++) {
		v[i] = malloc(65536);
		memset(v[i], 3, 65536);
	}
	return v;
}

static int wake_fd;

static void *waker(void *arg)
{
	(void)arg;
	struct timespec ts = { BLOCK_NS / 1000000000LL, BLOCK_NS % 1000000000LL };
	while (nanosleep(&ts, &ts) != 0)
		;
	if (write(wake_fd, "x", 1) != 1)
		return NULL;
	return NULL;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "sleep";
	int rc = -2, err = 0;
	int ep = epoll_create1(0);
	int pfd[2];
	if (ep < 0 || pipe(pfd) != 0)
		return 9;
	struct epoll_event ev = { .events = EPOLLIN };
	epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &ca);

	printf("ready\n");
	fflush(stdout);
	long long t0 = now_ns();
	if (!strcmp(mode, "sleep")) {
		struct timespec ts = { BLOCK_NS / 1000000000LL, BLOCK_NS % 1000000000LL };
		rc = nanosleep(&ts, NULL);
	} else if (!strcmp(mode, "epoll")) {
		pthread_t th;
		wake_fd = pfd[1];
		if (pthread_create(&th, NULL, waker, NULL) != 0)
			return 9;
		rc = epoll_wait(ep, &ev, 1, -1) == 1 ? 0 : -1;
	} else if (!strcmp(mode, "poll")) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		rc = poll(&p, 1, (int)(BLOCK_NS / 1000000));
	} else if (!strcmp(mode, "futex")) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		long long end = ts.tv_sec * 1000000000LL + ts.tv_nsec + BLOCK_NS;
		ts.tv_sec = end / 1000000000LL;
		ts.tv_nsec = end % 1000000000LL;
		pthread_mutex_lock(&mu);
		int r = pthread_cond_timedwait(&cv, &mu, &ts);
		pthread_mutex_unlock(&mu);
		rc = r == ETIMEDOUT ? 0 : -1;
		errno = r;
	}
	err = errno;
	long long took = now_ns() - t0;
	int ok = rc == 0 && took >= BLOCK_NS - 1000000;
	sink = block_site();
	if (ok)
		printf("%s ok\n", mode);
	else
		printf("%s BAD rc %d errno %d after %lld ms\n", mode, rc, err,
		       took / 1000000);
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 9;
	return 0;
}
