/*
 * A program whose own malloc can hold the calling thread (test_detach.py,
 * the unload rule and signal frames).  It defines the malloc family
 * itself, forwarding to glibc's __libc_* functions, so that under the
 * agent (ymtop -p) a call through a patched slot runs the agent's hook,
 * which calls this malloc.  Commands on stdin, one a line:
 *
 *   hold     a thread calls strdup (libc's malloc slot: the agent's hook)
 *            of a string whose size this malloc recognises; it blocks
 *            there, inside a signal handler running on an alternate
 *            stack (a mapping of its own) that the malloc raised: prints
 *            "held TID"
 *   alloc    rounds of malloc, realloc and free, checked: "alloc ok"
 *   release  the held call returns, the thread is joined: "released"
 *   quit     exit 0
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HOLD_SIZE 77777

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static int wake[2];

static void on_alt(int sig)
{
	(void)sig;
	char line[64];
	int n = snprintf(line, sizeof line, "held %ld\n", (long)syscall(SYS_gettid));
	if (write(1, line, (size_t)n) != n)
		_exit(1);
	char c;
	while (read(wake[0], &c, 1) < 0)
		;
}

void *malloc(size_t n)
{
	if (n == HOLD_SIZE) {
		stack_t ss = { .ss_size = 1 << 16 };
		ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct sigaction sa = { .sa_handler = on_alt, .sa_flags = SA_ONSTACK };
		sigemptyset(&sa.sa_mask);
		if (ss.ss_sp != MAP_FAILED && sigaltstack(&ss, NULL) == 0 &&
		    sigaction(SIGUSR2, &sa, NULL) == 0)
			raise(SIGUSR2);
	}
	return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	return __libc_realloc(p, n);
}

void free(void *p)
{
	__libc_free(p);
}

static void *hold(void *arg)
{
	(void)arg;
	static char s[HOLD_SIZE];
	memset(s, 'x', sizeof s - 1);
	return strdup(s);
}

int main(void)
{
	char line[256];
	pthread_t t;
	int holding = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(wake) != 0)
		return 1;
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "hold") && !holding) {
			if (pthread_create(&t, NULL, hold, NULL) != 0)
				return 1;
			holding = 1;
		} else if (!strcmp(line, "alloc")) {
			int ok = 1;
			for (int i = 0; i < 4096 && ok; i++) {
				char *p = strdup("abcdefgh");
				char *q = p ? realloc(p, 16 + (size_t)i) : NULL;
				ok = q && !strcmp(q, "abcdefgh");
				free(q);
			}
			printf(ok ? "alloc ok\n" : "alloc BAD\n");
		} else if (!strcmp(line, "release") && holding) {
			void *r;
			if (write(wake[1], "x", 1) != 1)
				return 1;
			pthread_join(t, &r);
			free(r);
			holding = 0;
			printf("released\n");
		} else if (!strcmp(line, "quit")) {
			return 0;
		}
	}
	return 0;
}
