/*
 * A program with a thread held inside the agent (test_detach.py, the
 * unload rule's dormant branch).  Started without the agent; ymtop -p
 * loads it.  Commands on stdin, one a line:
 *
 *   block LIB   a thread dlopens LIB (build/progs/libblockctor.so), whose
 *               constructor blocks: the thread waits inside dlopen, called
 *               through the agent's hook, until "release"
 *   rawblock LIB  as block, but through the dlopen the program looked up
 *               at its start (before any agent): the thread waits inside
 *               the dynamic loader, holding its lock, outside the agent
 *   alloc       64 rounds of malloc, calloc, realloc and free of blocks
 *               with a pattern, checked: "alloc ok"
 *   release     the constructor returns, dlopen ends, the thread is
 *               joined: "released"
 *   quit        exit 0
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int wake[2];
static pthread_t loader;
static int loading;
static void *held[256];

/* libc's dlopen, looked up before ymtop -p can patch the program's slot
 * for it: calls through it never enter the agent. */
static void *(*raw_dlopen)(const char *, int);
static int raw;

static void *load(void *arg)
{
	void *h = raw ? raw_dlopen((const char *)arg, RTLD_NOW)
		      : dlopen((const char *)arg, RTLD_NOW);
	if (!h || !dlsym(h, "blockctor_loaded")) {
		printf("dlopen failed: %s\n", dlerror());
		fflush(stdout);
	}
	return h;
}

static int churn(void)
{
	for (int r = 0; r < 64; r++) {
		for (int i = 0; i < 256; i++) {
			size_t n = 16 + (size_t)(i * 37 % 4000);
			unsigned char *p = i % 3 ? malloc(n) : calloc(1, n);
			if (!p)
				return 0;
			memset(p, i & 0xff, n);
			if (i % 5 == 0) {
				unsigned char *q = realloc(p, n * 2);
				if (!q)
					return 0;
				p = q;
			}
			free(held[i]);
			held[i] = p;
		}
		for (int i = 0; i < 256; i++)
			if (((unsigned char *)held[i])[15] != (i & 0xff))
				return 0;
	}
	return 1;
}

int main(void)
{
	char line[4096];
	static char lib[4096];
	setvbuf(stdout, NULL, _IOLBF, 0);
	*(void **)&raw_dlopen = dlsym(RTLD_DEFAULT, "dlopen");
	if (!raw_dlopen)
		return 1;
	if (pipe(wake) != 0)
		return 1;
	char fd[16];
	snprintf(fd, sizeof fd, "%d", wake[0]);
	setenv("YM_TEST_BLOCK_FD", fd, 1);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = '\0';
		int rawline = !strncmp(line, "rawblock ", 9);
		if ((rawline || !strncmp(line, "block ", 6)) && !loading) {
			raw = rawline;
			snprintf(lib, sizeof lib, "%s", line + (rawline ? 9 : 6));
			if (pthread_create(&loader, NULL, load, lib) != 0)
				return 1;
			loading = 1;
		} else if (!strcmp(line, "alloc")) {
			printf(churn() ? "alloc ok\n" : "alloc BAD\n");
		} else if (!strcmp(line, "release") && loading) {
			if (write(wake[1], "x", 1) != 1)
				return 1;
			pthread_join(loader, NULL);
			loading = 0;
			printf("released\n");
		} else if (!strcmp(line, "quit")) {
			for (int i = 0; i < 256; i++)
				free(held[i]);
			return 0;
		}
	}
	return 0;
}
