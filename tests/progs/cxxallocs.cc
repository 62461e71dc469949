// cxxallocs: blocks of known sizes held through every form of C++
// operator new, for the estimator checks under each allocator
// (tests/integration/test_allocators.py).  Each form has its own noinline
// site, so each has a stack of its own.
//
//   cxxallocs N S   holds N blocks of S bytes from each of: operator
//                   new (new_site), operator new[] (array_site), aligned
//                   operator new, 64 (aligned_site), aligned operator
//                   new[], 4096 (aligned_array_site), and nothrow new
//                   (nothrow_site); then prints "ready" and reads commands
//                   on stdin: "free" gives each back by its sized (and
//                   aligned) operator delete and prints "ready"; EOF exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#define NOINLINE __attribute__((noinline))

enum { SITES = 5, MAXN = 100000 };
static void *held[SITES][MAXN];
static long nheld;
static size_t size;

NOINLINE static void new_site()
{
	for (long i = 0; i < nheld; i++)
		held[0][i] = ::operator new(size);
}

NOINLINE static void array_site()
{
	for (long i = 0; i < nheld; i++)
		held[1][i] = ::operator new[](size);
}

NOINLINE static void aligned_site()
{
	for (long i = 0; i < nheld; i++)
		held[2][i] = ::operator new(size, std::align_val_t(64));
}

NOINLINE static void aligned_array_site()
{
	for (long i = 0; i < nheld; i++)
		held[3][i] = ::operator new[](size, std::align_val_t(4096));
}

NOINLINE static void nothrow_site()
{
	for (long i = 0; i < nheld; i++) {
		held[4][i] = ::operator new(size, std::nothrow);
		if (!held[4][i])
			std::abort();
	}
}

static void free_all()
{
	for (long i = 0; i < nheld; i++) {
		::operator delete(held[0][i], size);
		::operator delete[](held[1][i], size);
		::operator delete(held[2][i], size, std::align_val_t(64));
		::operator delete[](held[3][i], size, std::align_val_t(4096));
		::operator delete(held[4][i], std::nothrow);
	}
	nheld = 0;
}

int main(int argc, char **argv)
{
	static char inbuf[4096];
	std::setvbuf(stdin, inbuf, _IOLBF, sizeof inbuf);
	if (argc != 3)
		return 2;
	nheld = std::atol(argv[1]);
	size = std::strtoul(argv[2], nullptr, 10);
	if (nheld < 0 || nheld > MAXN || size == 0)
		return 2;
	new_site();
	array_site();
	aligned_site();
	aligned_array_site();
	nothrow_site();
	std::printf("ready\n");
	std::fflush(stdout);
	char line[64];
	while (std::fgets(line, sizeof line, stdin)) {
		if (!std::strcmp(line, "free\n"))
			free_all();
		std::printf("ready\n");
		std::fflush(stdout);
	}
	return 0;
}
