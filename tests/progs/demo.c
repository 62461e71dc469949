/*
 * demo: a small program with a heap worth watching.  A request loop that
 * churns short-lived buffers, a cache that grows and is trimmed, and a
 * slow leak; run it under the agent and watch it with ymtop (make demo).
 *
 *   demo [SECONDS]   run for SECONDS (default 30), then exit
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct entry {
	struct entry *next;
	char *value;
};

/* Not static: the compiler may drop allocations whose results no one
 * can ever read. */
struct entry *cache;
size_t cache_len;
void *leaked[100000];
size_t nleaked;

NOINLINE static char *parse_request(unsigned seed)
{
	size_t n = 64 + seed % 4096;
	char *buf = malloc(n);
	memset(buf, 'r', n);
	return buf;
}

NOINLINE static void cache_insert(unsigned seed)
{
	struct entry *e = malloc(sizeof *e);
	e->value = malloc(256 + seed % 2048);
	e->next = cache;
	cache = e;
	cache_len++;
}

NOINLINE static void cache_trim(void)
{
	/* Keep the newest 2000 entries. */
	struct entry *e = cache;
	for (size_t i = 1; e && i < 2000; i++)
		e = e->next;
	if (!e)
		return;
	struct entry *rest = e->next;
	e->next = NULL;
	while (rest) {
		struct entry *n = rest->next;
		free(rest->value);
		free(rest);
		rest = n;
		cache_len--;
	}
}

NOINLINE static void session_leak(unsigned seed)
{
	if (nleaked < sizeof leaked / sizeof *leaked)
		leaked[nleaked++] = malloc(4096 + seed % 4096);
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 30;
	time_t end = time(NULL) + (secs > 0 ? secs : 30);
	unsigned seed = 1;
	while (time(NULL) < end) {
		for (int i = 0; i < 2000; i++) {
			seed = seed * 1103515245u + 12345u;
			char *req = parse_request(seed >> 8);
			cache_insert(seed >> 4);
			if (i % 50 == 0)
				session_leak(seed);
			free(req);
		}
		cache_trim();
		usleep(20000);
	}
	printf("demo: done, cache %zu entries, %zu leaked sessions\n", cache_len, nleaked);
	return 0;
}
