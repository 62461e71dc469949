/*
 * dataptr: blocks allocated and freed through libdataptr.so's data
 * pointers to malloc and free (tests/progs/lib/dataptr.c) and through
 * plain calls, for tests/integration/test_takeover.py.
 *
 *   dataptr LIB   prints "ready", then reads commands on stdin, each
 *                 answered by "ready" (EOF or an empty line exits 0):
 *     load        dlopen(LIB) (RTLD_NOW)
 *     dp N S      N blocks of S bytes through dp_alloc (dp_site)
 *     plain N S   N blocks of S bytes through malloc (plain_site)
 *     mixfree     frees the plain blocks through the library's free
 *                 pointer, and the library's through free
 *     protect     makes the page of the library's dp_malloc read-only
 *                 (mprotect), as a hardened program may do with its data,
 *                 until the exit
 *     tick        one malloc(16) and its free
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAXB 4096

static void *(*dp_alloc)(size_t);
static void (*dp_release)(void *);
static void *dpb[MAXB], *plb[MAXB];
static int ndp, npl;
static void *lib;

__attribute__((noinline)) static void *dp_site(size_t s)
{
	return dp_alloc(s);
}

__attribute__((noinline)) static void *plain_site(size_t s)
{
	return malloc(s);
}

static uintptr_t protected;

static int protect(uintptr_t a, int prot)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	return mprotect((void *)(a & ~(pg - 1)), pg, prot);
}

static void fill(void *p, size_t s)
{
	if (p)
		memset(p, 1, s);
}

int main(int argc, char **argv)
{
	char line[128];
	setvbuf(stdout, NULL, _IOLBF, 0);
	puts("ready");
	while (fgets(line, sizeof line, stdin)) {
		int n = 0;
		size_t s = 0;
		if (line[0] == '\n')
			break;
		if (strncmp(line, "load", 4) == 0) {
			void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
			if (!h) {
				printf("load unexpected: %s\n", dlerror());
				return 1;
			}
			lib = h;
			*(void **)&dp_alloc = dlsym(h, "dp_alloc");
			*(void **)&dp_release = dlsym(h, "dp_release");
		} else if (sscanf(line, "dp %d %zu", &n, &s) == 2 && dp_alloc) {
			for (int i = 0; i < n && ndp < MAXB; i++, ndp++)
				fill(dpb[ndp] = dp_site(s), s);
		} else if (sscanf(line, "plain %d %zu", &n, &s) == 2) {
			for (int i = 0; i < n && npl < MAXB; i++, npl++)
				fill(plb[npl] = plain_site(s), s);
		} else if (strncmp(line, "mixfree", 7) == 0 && dp_release) {
			for (int i = 0; i < npl; i++)
				dp_release(plb[i]);
			for (int i = 0; i < ndp; i++)
				free(dpb[i]);
			npl = ndp = 0;
		} else if (strncmp(line, "protect", 7) == 0 && lib) {
			uintptr_t w = (uintptr_t)dlsym(lib, "dp_malloc");
			if (!w || protect(w, PROT_READ) != 0) {
				puts("protect unexpected");
				return 1;
			}
			protected = w;
		} else if (strncmp(line, "tick", 4) == 0) {
			free(malloc(16));
		} else {
			printf("command unexpected: %s", line);
			return 1;
		}
		puts("ready");
	}
	/* The page holds the library's .bss too, which its destructor
	 * writes at exit. */
	if (protected)
		protect(protected, PROT_READ | PROT_WRITE);
	return 0;
}
