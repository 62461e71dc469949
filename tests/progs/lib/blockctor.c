/*
 * A library whose constructor blocks: loaded by tests/progs/inside.c from
 * a thread, it holds that thread inside dlopen, and so inside the agent's
 * dlopen hook (got.c) once ymtop -p has patched the program's slot,
 * until the program writes a byte to the pipe YM_TEST_BLOCK_FD names.
 * Prints "inside TID" (the blocked thread's id) first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

__attribute__((constructor)) static void block_here(void)
{
	const char *s = getenv("YM_TEST_BLOCK_FD");
	if (!s)
		return;
	int fd = atoi(s);
	printf("inside %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	char c;
	while (read(fd, &c, 1) < 0)
		;
}

int blockctor_loaded(void)
{
	return 1;
}
