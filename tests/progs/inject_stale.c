/* Injection target: idle in pause() with stale words pointing into
 * malloc's text just above its stack pointer (issue 16, item 5: a
 * daemonized nginx master in sigsuspend had a stale _int_malloc+2861 at
 * sp+0x50, and ymtop refused it for good).
 *   leave_stale() fills a 512-byte local array with an address inside
 *   libc's malloc and returns: dead slots of the stack, which idle()'s
 *   uninitialized array then covers, so that they lie in the 256 bytes
 *   above the stack pointer in pause;
 *   prints "ready"; pauses until SIGUSR1; holds 4 MiB from stale_site;
 *   prints "woke"; reads a line; exits 6. */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t woke;

static void on_usr1(int sig)
{
	(void)sig;
	woke = 1;
}

__attribute__((noinline)) static void **stale_site(void)
{
	void **v = malloc(64 * sizeof *v);
	for (int i = 0; v && i < 64; i++) {
		v[i] = malloc(65536);
		memset(v[i], 3, 65536);
	}
	return v;
}

/* What a return address into malloc looks like: libc's malloc + 0x40. */
__attribute__((noinline)) static void leave_stale(uintptr_t word)
{
	volatile uintptr_t slots[64];
	for (int i = 0; i < 64; i++)
		slots[i] = word;
	__asm__ volatile("" : : "r"(slots) : "memory");
}

/* pause through a pointer: a first call through the PLT would run the
 * lazy binder, whose large frame overwrites the dead slots. */
static int (*pause_fn)(void);

/* Its array, left uninitialized, lies over leave_stale's dead slots (both
 * are called from main): pause's stack pointer is just below it. */
__attribute__((noinline)) static void idle(void)
{
	volatile uintptr_t room[64];
	room[63] = 0;
	while (!woke)
		pause_fn();
	(void)room[63];
}

/* Kept where the compiler cannot see it unused (no allocation elision). */
void **volatile sink;

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	void *m = dlsym(RTLD_NEXT, "malloc");
	pause_fn = (int (*)(void))dlsym(RTLD_NEXT, "pause");
	if (!m || !pause_fn)
		return 9;
	free(malloc(100));   /* the allocator initialized, as in any program */
	printf("ready\n");
	fflush(stdout);
	leave_stale((uintptr_t)m + 0x40);
	idle();
	void **held = stale_site();
	printf("woke\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 9;
	sink = held;
	return 6;
}
