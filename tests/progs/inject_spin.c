/* Injection target: its only thread spins in user code with every vector
 * register (ymm0-15, when the CPU has AVX) holding a known pattern.
 * dlopen in the target clobbers vector registers, so this checks that the
 * injector restores the full extended state of a thread stopped outside
 * any system call.
 *   prints "ready"; SIGUSR1 ends the spin; prints "registers ok" (or
 *   "registers BAD"); reads a line; exits 0 (1 if BAD). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile int stop;
static unsigned char in[16][32] __attribute__((aligned(32)));
static unsigned char out[16][32] __attribute__((aligned(32)));

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;   /* the kernel saves and restores the vector state */
}

#define REGS(op, base)                                                   \
	op " 0+" base ", %%ymm0\n\t" op " 32+" base ", %%ymm1\n\t"       \
	op " 64+" base ", %%ymm2\n\t" op " 96+" base ", %%ymm3\n\t"      \
	op " 128+" base ", %%ymm4\n\t" op " 160+" base ", %%ymm5\n\t"    \
	op " 192+" base ", %%ymm6\n\t" op " 224+" base ", %%ymm7\n\t"    \
	op " 256+" base ", %%ymm8\n\t" op " 288+" base ", %%ymm9\n\t"    \
	op " 320+" base ", %%ymm10\n\t" op " 352+" base ", %%ymm11\n\t"  \
	op " 384+" base ", %%ymm12\n\t" op " 416+" base ", %%ymm13\n\t"  \
	op " 448+" base ", %%ymm14\n\t" op " 480+" base ", %%ymm15\n\t"

static void spin_avx(void)
{
	__asm__ volatile(
		REGS("vmovdqu", "%[in]")
		"1: pause\n\t"
		"cmpl $0, %[flag]\n\t"
		"je 1b\n\t"
		"vmovdqu %%ymm0, 0+%[out]\n\t vmovdqu %%ymm1, 32+%[out]\n\t"
		"vmovdqu %%ymm2, 64+%[out]\n\t vmovdqu %%ymm3, 96+%[out]\n\t"
		"vmovdqu %%ymm4, 128+%[out]\n\t vmovdqu %%ymm5, 160+%[out]\n\t"
		"vmovdqu %%ymm6, 192+%[out]\n\t vmovdqu %%ymm7, 224+%[out]\n\t"
		"vmovdqu %%ymm8, 256+%[out]\n\t vmovdqu %%ymm9, 288+%[out]\n\t"
		"vmovdqu %%ymm10, 320+%[out]\n\t vmovdqu %%ymm11, 352+%[out]\n\t"
		"vmovdqu %%ymm12, 384+%[out]\n\t vmovdqu %%ymm13, 416+%[out]\n\t"
		"vmovdqu %%ymm14, 448+%[out]\n\t vmovdqu %%ymm15, 480+%[out]\n\t"
		"vzeroupper\n\t"
		: [out] "=m"(out)
		: [in] "m"(in), [flag] "m"(stop)
		: "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
		  "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
		  "xmm14", "xmm15");
}

int main(void)
{
	int avx = __builtin_cpu_supports("avx");
	for (int r = 0; r < 16; r++)
		for (int b = 0; b < 32; b++)
			in[r][b] = (unsigned char)(r * 37 + b * 11 + 1);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready\n");
	fflush(stdout);
	int ok = 1;
	if (avx) {   /* without AVX there is nothing to check at this width */
		spin_avx();
		ok = memcmp(in, out, sizeof in) == 0;
	} else {
		while (!stop)
			;
	}
	printf("registers %s\n", ok ? "ok" : "BAD");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 9;
	return ok ? 0 : 1;
}
