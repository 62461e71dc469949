/* Injection target: its only thread stands inside the allocator holding
 * the main arena's lock, for as long as the test wants.  malloc_stats()
 * prints to stderr with the arena locked; stderr is a pipe that this
 * program fills first, so the print blocks in write() until the test
 * reads the pipe.  A thread borrowed there would deadlock in dlopen (it
 * allocates): the injector must refuse it until it leaves.
 *   prints "ready"; blocks in malloc_stats(); prints "left"; holds 4 MiB
 *   from inmalloc_site; reads a line; exits 7. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static void **inmalloc_site(void)
{
	void **v = malloc(64 * sizeof *v);
	for (int i = 0; v && i < 64; i++) {
		v[i] = malloc(65536);
		memset(v[i], 4, 65536);
	}
	return v;
}

void **volatile sink;

int main(void)
{
	free(malloc(100));
	int fl = fcntl(2, F_GETFL);
	if (fl < 0 || fcntl(2, F_SETFL, fl | O_NONBLOCK) != 0)
		return 9;
	static const char fill[4096] = { 'x' };
	for (;;) {
		ssize_t n = write(2, fill, sizeof fill);
		if (n < 0 && errno == EAGAIN) {
			if (write(2, fill, 1) < 0)   /* down to the last byte */
				break;
			continue;
		}
		if (n < 0)
			return 9;
	}
	fcntl(2, F_SETFL, fl);
	printf("ready\n");
	fflush(stdout);
	malloc_stats();
	void **held = inmalloc_site();
	printf("left\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 9;
	sink = held;
	return 7;
}
