/*
 * spawnloop: the cost of a short process, per process.
 *
 *   CHILD_PRELOAD=LIB spawnloop N PROG [ARG...]
 *
 * posix_spawn's PROG N times in a row, waiting for each, with LD_PRELOAD=LIB
 * (none when CHILD_PRELOAD is empty or unset) and the caller's YM_*
 * variables in the children's environment only: the spawner itself never
 * carries the library, unlike a shell loop (tests/bench/spawn.sh).  Prints
 * the wall time and the children's CPU time (user + system) per process,
 * in microseconds.  tests/bench/spawncost.sh interleaves configurations.
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

int main(int argc, char **argv)
{
	if (argc < 3 || atoi(argv[1]) < 1) {
		fprintf(stderr, "usage: CHILD_PRELOAD=LIB spawnloop N PROG [ARG...]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	const char *pre = getenv("CHILD_PRELOAD");
	char preload[1024];
	char *envp[64] = { "PATH=/usr/bin:/bin" };
	int k = 1;
	if (pre && *pre) {
		snprintf(preload, sizeof preload, "LD_PRELOAD=%s", pre);
		envp[k++] = preload;
	}
	for (char **e = environ; *e && k < 63; e++)
		if (!strncmp(*e, "YM_", 3))
			envp[k++] = *e;
	envp[k] = NULL;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++) {
		pid_t pid;
		int st;
		if (posix_spawn(&pid, argv[2], NULL, NULL, argv + 2, envp) != 0 ||
		    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "spawnloop: %s failed\n", argv[2]);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		     (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	double wall = (double)(b.tv_sec - a.tv_sec) * 1e6 +
		      (double)(b.tv_nsec - a.tv_nsec) / 1e3;
	printf("%.1f %.1f\n", wall / n, cpu * 1e6 / n);
	return 0;
}
