// cxxnew: operator new and sized operator delete, for
// tests/integration/test_jemalloc_api.py: under jemalloc, tcmalloc and
// mimalloc these are the allocator's own (they never reach malloc's PLT
// slot).  Prints "ready", then reads commands on stdin, each answered with
// "ready" (EOF exits 0):
//   alloc   new_site: 400 objects of 64 KiB by operator new (held)
//   free    each given back by sized operator delete (delete(p, size))
#include <cstdio>
#include <cstring>
#include <new>

#define NOINLINE __attribute__((noinline))

static void *held[400];

NOINLINE static void new_site()
{
	for (auto &p : held) {
		p = ::operator new(65536);
		std::memset(p, 1, 64);
	}
}

NOINLINE static void delete_site()
{
	for (auto &p : held)
		::operator delete(p, 65536);
}

int main()
{
	char line[64];
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	std::printf("ready\n");
	while (std::fgets(line, sizeof line, stdin)) {
		if (!std::strncmp(line, "alloc", 5))
			new_site();
		else if (!std::strncmp(line, "free", 4))
			delete_site();
		std::printf("ready\n");
	}
	return 0;
}
