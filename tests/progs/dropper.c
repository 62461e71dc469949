/*
 * dropper: a daemon that drops privileges, as nginx's workers do.
 *
 *   dropper [fork] UID   holds 4 MiB (before_drop), setuid(UID), holds
 *                        4 MiB more (after_drop), prints "ready PID" (the
 *                        process that dropped) and waits for a line on
 *                        stdin, then exits 0.  With "fork" a child does
 *                        it and the parent waits for the child.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile held[2];

__attribute__((noinline)) static void before_drop(void)
{
	held[0] = malloc(4 << 20);
	memset(held[0], 1, 4 << 20);
}

__attribute__((noinline)) static void after_drop(void)
{
	held[1] = malloc(4 << 20);
	memset(held[1], 2, 4 << 20);
}

static int work(uid_t uid)
{
	before_drop();
	if (setgid((gid_t)uid) != 0 || setuid(uid) != 0) {
		perror("dropper: setuid");
		return 1;
	}
	after_drop();
	printf("ready %ld\n", (long)getpid());
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 0;
	return 0;
}

int main(int argc, char **argv)
{
	int forking = argc > 2 && !strcmp(argv[1], "fork");
	if (argc < 2)
		return 2;
	uid_t uid = (uid_t)strtoul(argv[argc - 1], NULL, 10);
	if (!forking)
		return work(uid);
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0)
		_exit(work(uid));
	int status;
	while (waitpid(child, &status, 0) < 0)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
