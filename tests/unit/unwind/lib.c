/* Code for tests/unit/test_unwind.c to unwind through, loaded with dlopen:
 * built twice, as libuw_fp.so (-O2 -fno-omit-frame-pointer) and
 * libuw_nofp.so (-O2 -fomit-frame-pointer), so that the CFA is RBP-based
 * in one and RSP-based (with pushes, big frames and VLAs) in the other.
 * PREFIX names each build's exported functions. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define NAME(x) CAT(PREFIX, x)

typedef int (*leaf_fn)(void);

static volatile int sink;

/* A frame of its own size and saved registers at each level. */
__attribute__((noinline)) static int big_frame(int d, leaf_fn leaf);

__attribute__((noinline)) static int vla_frame(int d, leaf_fn leaf)
{
	char buf[16 + (d & 7) * 24];   /* CFA through RBP even without -fno-omit */
	memset(buf, d, sizeof buf);
	int r = d > 0 ? big_frame(d - 1, leaf) : leaf();
	__asm__ volatile("" : "+r"(r) : "r"(buf) : "memory");
	return r + buf[d & 15];
}

__attribute__((noinline)) static int big_frame(int d, leaf_fn leaf)
{
	volatile char pad[5000];
	pad[d & 1023] = (char)d;
	int r = d > 0 ? vla_frame(d - 1, leaf) : leaf();
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + pad[d & 1023];
}

/* leaf at depth d through alternating frame shapes. */
int NAME(recurse)(int d, leaf_fn leaf)
{
	int r = vla_frame(d, leaf);
	__asm__ volatile("" : "+r"(r));
	return r;
}

/* Calls back through the other library, so that a stack crosses both. */
int NAME(via)(int (*next)(int, leaf_fn), int d, leaf_fn leaf)
{
	int r = next(d, leaf);
	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

/* Busy code for signals to land anywhere in: prologues, epilogues, the
 * PLT on the way to clock_gettime, the vDSO. */
__attribute__((noinline)) static uint64_t spin_inner(int i)
{
	char buf[32 + (i & 3) * 16];
	memset(buf, i, sizeof buf);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	__asm__ volatile("" :: "r"(buf) : "memory");
	return (uint64_t)ts.tv_nsec + (uint64_t)buf[i & 31];
}

uint64_t NAME(spin)(volatile int *stop)
{
	uint64_t s = 0;
	for (int i = 0; !*stop; i++)
		s += spin_inner(i);
	sink = (int)s;
	return s;
}
