/* Injection target: blocked in sigwait(SIGUSR1).
 *   prints "ready"; waits for SIGUSR1; holds 4 MiB from sigwait_site;
 *   prints "signal <n>"; reads a line; exits 4. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void **sigwait_site(void)
{
	void **v = malloc(64 * sizeof *v);
	for (int i = 0; v && i < 64; i++) {
		v[i] = malloc(65536);
		memset(v[i], 2, 65536);
	}
	return v;
}

/* Kept where the compiler cannot see it unused (no allocation elision). */
void **volatile sink;

int main(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("ready\n");
	fflush(stdout);
	int sig = 0;
	if (sigwait(&set, &sig) != 0)
		return 9;
	void **held = sigwait_site();
	printf("signal %d\n", sig);
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 9;
	sink = held;
	return 4;
}
