// libcxxearly.so: 8 blocks of 1 MiB by operator new[] from a static
// constructor, held to the end (early_site).  Preloaded after tcmalloc
// (LD_PRELOAD="agent tcmalloc libcxxearly.so"), its constructor runs
// before tcmalloc's, while tcmalloc's malloc_usable_size still says 0
// (tests/integration/test_allocators.py).
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

namespace {
struct Early {
	Early() { early_site(); }
} early;
}
