/*
 * stress_fork: process life under allocation.  Output and exit status
 * depend only on the arguments.
 *
 *   stress_fork storm N        N forks, 16 children alive at a time; each
 *                              child allocates and exits with a checksum
 *                              byte; the parent sums the statuses.
 *   stress_fork threads N      4 threads allocate without pause while main
 *                              forks N times; each child allocates, starts
 *                              and joins a thread, and exits through exit()
 *                              (atexit handlers, agent destructors).  A lock
 *                              held by another thread at fork time must not
 *                              deadlock the child.
 *   stress_fork nested D       fork without exec, D levels deep; every level
 *                              keeps allocating after fork.
 *   stress_fork vfork N        N times vfork + exec of this program (leaf).
 *   stress_fork spawn N        N times posix_spawn of this program (leaf),
 *                              while 2 threads allocate.
 *   stress_fork chain N        allocates, then replaces itself through
 *                              sh -c 'exec "$0" chain N-1' down to 0.
 *   stress_fork leaf K         allocates and exits with status K.
 */
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static unsigned churn(unsigned seed, int n)
{
	unsigned sum = 0;
	void *keep[32] = { 0 };
	for (int i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t sz = 1 + (seed >> 8) % 8192;
		unsigned char *p = malloc(sz);
		if (!p)
			abort();
		p[0] = (unsigned char)sz;
		p[sz - 1] = (unsigned char)(sz >> 3);
		sum += p[0] + p[sz - 1];
		free(keep[i % 32]);
		keep[i % 32] = p;
	}
	for (int i = 0; i < 32; i++)
		free(keep[i]);
	return sum;
}

static int wait_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void storm(int n)
{
	pid_t kids[16];
	long total = 0;
	for (int i = 0; i < n; i += 16) {
		int m = n - i < 16 ? n - i : 16;
		for (int k = 0; k < m; k++) {
			unsigned sum = churn((unsigned)(i + k), 50);
			pid_t p = fork();
			if (p == 0)
				_exit((int)((churn((unsigned)(i + k) * 7u, 200) + sum) & 0x7f));
			if (p < 0) {
				printf("fork failed\n");
				exit(3);
			}
			kids[k] = p;
		}
		for (int k = 0; k < m; k++)
			total += wait_status(kids[k]);
	}
	printf("storm %d: status sum %ld\n", n, total);
}

static int stop;

static void *spinner(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
		seed += churn(seed, 100);
	return NULL;
}

static void *child_thread(void *arg)
{
	return (void *)(uintptr_t)churn((unsigned)(uintptr_t)arg, 100);
}

static void forky_threads(int n)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, spinner, (void *)(uintptr_t)i);
	long total = 0;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			pthread_t c;
			void *r = NULL;
			if (pthread_create(&c, NULL, child_thread,
					   (void *)(uintptr_t)i) != 0)
				_exit(99);
			pthread_join(c, &r);
			exit((int)(((uintptr_t)r + churn((unsigned)i, 100)) & 0x7f));
		}
		if (p < 0) {
			printf("fork failed\n");
			exit(3);
		}
		total += wait_status(p);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("threads+fork %d: status sum %ld\n", n, total);
}

static int nested(int d)
{
	unsigned sum = churn((unsigned)d, 300);
	if (d == 0)
		return (int)(sum & 0x3f);
	pid_t p = fork();
	if (p == 0)
		exit(nested(d - 1));
	sum += churn((unsigned)d * 3u, 300);
	int st = wait_status(p);
	return (int)((st + (sum & 0x3f)) & 0x7f);
}

/* vfork in its own frame: the child only execs or _exits. */
static pid_t vfork_exec(const char *self, char **argv)
{
	pid_t p = vfork();
	if (p == 0) {
		execve(self, argv, environ);
		_exit(127);
	}
	return p;
}

static void run_vfork(const char *self, int n)
{
	long total = 0;
	for (int i = 0; i < n; i++) {
		char k[16];
		snprintf(k, sizeof k, "%d", i % 100);
		char *argv[] = { (char *)"stress_fork", (char *)"leaf", k, NULL };
		pid_t p = vfork_exec(self, argv);
		if (p < 0) {
			printf("vfork failed\n");
			exit(3);
		}
		total += wait_status(p);
	}
	printf("vfork %d: status sum %ld\n", n, total);
}

static void run_spawn(const char *self, int n)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, spinner, (void *)(uintptr_t)i);
	long total = 0;
	for (int i = 0; i < n; i++) {
		char k[16];
		snprintf(k, sizeof k, "%d", i % 100);
		char *argv[] = { (char *)"stress_fork", (char *)"leaf", k, NULL };
		pid_t p;
		int rc = posix_spawn(&p, self, NULL, NULL, argv, environ);
		if (rc != 0) {
			printf("posix_spawn failed: %d\n", rc);
			exit(3);
		}
		total += wait_status(p);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("spawn %d: status sum %ld\n", n, total);
}

static void chain(const char *self, int n)
{
	unsigned sum = churn((unsigned)n, 200);
	printf("chain %d: %u\n", n, sum);
	fflush(stdout);
	if (n == 0)
		return;
	char next[16];
	snprintf(next, sizeof next, "%d", n - 1);
	/* Keep some memory allocated across the exec. */
	void *held = malloc(1 << 20);
	(void)held;
	execl("/bin/sh", "sh", "-c", "exec \"$0\" chain \"$1\"", self, next,
	      (char *)NULL);
	printf("exec failed\n");
	exit(3);
}

int main(int argc, char **argv)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len <= 0)
		return 3;
	self[len] = '\0';
	if (argc != 3) {
		fprintf(stderr, "usage: stress_fork MODE N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	const char *m = argv[1];
	if (!strcmp(m, "storm"))
		storm(n);
	else if (!strcmp(m, "threads"))
		forky_threads(n);
	else if (!strcmp(m, "nested"))
		printf("nested %d: %d\n", n, nested(n));
	else if (!strcmp(m, "vfork"))
		run_vfork(self, n);
	else if (!strcmp(m, "spawn"))
		run_spawn(self, n);
	else if (!strcmp(m, "chain"))
		chain(self, n);
	else if (!strcmp(m, "leaf"))
		return (int)((churn((unsigned)n, 100) + (unsigned)n) & 0x7f);
	else
		return 2;
	return 0;
}
