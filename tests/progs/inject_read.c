/* Injection target: single-threaded, blocked in read() on a pipe (stdin).
 *   prints "ready"; reads a line; holds 8 MiB from read_site (128 x 64 KiB);
 *   prints "got <line>"; frees a block allocated before the attach and
 *   reallocates another; reads a line; exits 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *early[4];

static ssize_t read_line(char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		ssize_t r = read(0, buf + n, 1);
		if (r <= 0)
			return r < 0 ? -1 : (ssize_t)n;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = '\0';
	return (ssize_t)n;
}

__attribute__((noinline)) static void **read_site(void)
{
	void **v = malloc(128 * sizeof *v);
	for (int i = 0; v && i < 128; i++) {
		v[i] = malloc(65536);
		memset(v[i], 1, 65536);
	}
	return v;
}

/* Kept where the compiler cannot see it unused (no allocation elision). */
void **volatile sink;

int main(void)
{
	for (int i = 0; i < 4; i++) {
		early[i] = malloc(1000 + i);
		memset(early[i], 'a' + i, 1000 + i);
	}
	printf("ready\n");
	fflush(stdout);
	char line[256];
	if (read_line(line, sizeof line) <= 0)
		return 9;
	void **held = read_site();
	line[strcspn(line, "\n")] = '\0';
	printf("got %s\n", line);
	/* Blocks from before the attach: freed and resized through the hooks. */
	free(early[0]);
	char *r = realloc(early[1], 100000);
	int ok = r && r[0] == 'b' && r[1000] == 'b';
	early[2] = realloc(early[2], 10);
	ok = ok && early[2][9] == 'c';
	printf("early %s\n", ok ? "ok" : "BAD");
	fflush(stdout);
	if (read_line(line, sizeof line) < 0)
		return 9;
	sink = held;
	return 3;
}
