// libcxxearly.so: 8 blocks of 1 MiB by operator new[] (early_site) and 8
// by malloc(16) grown by realloc to 1 MiB (early_realloc_site) from a static
// constructor, held to the end, and 8 of each freed at once
// (early_freed_site).  Preloaded after tcmalloc
// (LD_PRELOAD="agent tcmalloc libcxxearly.so"), its constructor runs
// before tcmalloc's, while tcmalloc's malloc_usable_size still says 0
// (tests/integration/test_allocators.py).
#include <cstdlib>
#include <cstring>

#define NOINLINE __attribute__((noinline))

static char *held[8];

NOINLINE static void early_site()
{
	for (auto &p : held) {
		p = new char[1 << 20];
		std::memset(p, 1, 64);
	}
}

static void *reallocd[8];

NOINLINE static void early_realloc_site()
{
	for (auto &p : reallocd) {
		p = std::realloc(std::malloc(16), 1 << 20);
		if (!p)
			std::abort();
	}
}

/* Made and given back at once: nothing retained, nothing in use. */
NOINLINE static void early_freed_site()
{
	for (int i = 0; i < 8; i++) {
		void *volatile p = std::malloc(1 << 20);   /* kept: not elided */
		std::free(p);
		char *volatile q = new char[1 << 20];
		delete[] q;
	}
}

namespace {
struct Early {
	Early()
	{
		early_site();
		early_realloc_site();
		early_freed_site();
	}
} early;
}
