/*
 * ownalloc: a program with its own small allocator linked in, as a server
 * that bundles jemalloc (the official redis image): je_malloc and je_free,
 * each block its own anonymous mapping made with a raw mmap system call,
 * so that neither the agent's malloc hooks nor its mmap hook see it.
 *
 *   ownalloc    holds 32 MiB (touched) from je_malloc, prints "ready",
 *               then each line "grow" on stdin holds 32 MiB more and
 *               prints "ready"; EOF exits 0.
 *
 * For tests/integration/test_unseen.py.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static size_t round_up(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

NOINLINE void *je_malloc(size_t n)
{
	long p = syscall(SYS_mmap, 0, round_up(n + 16), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == -1)
		return NULL;
	*(size_t *)p = round_up(n + 16);
	return (char *)p + 16;
}

NOINLINE void je_free(void *q)
{
	if (q)
		syscall(SYS_munmap, (char *)q - 16, *(size_t *)((char *)q - 16));
}

static void *held[64];
static int nheld;

static NOINLINE void hold(void)
{
	char *p = je_malloc(32 << 20);
	if (!p)
		return;
	memset(p, 1, 32 << 20);
	if (nheld < 64)
		held[nheld++] = p;
}

int main(void)
{
	char line[64];
	hold();
	puts("ready");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		if (!strcmp(line, "grow\n"))
			hold();
		puts("ready");
		fflush(stdout);
	}
	while (nheld)
		je_free(held[--nheld]);
	return 0;
}
