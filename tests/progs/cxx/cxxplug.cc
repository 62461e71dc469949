// A C++ plugin for tests/progs/dlhost.c (loaded RTLD_LOCAL): every form
// of operator new whose behaviour the standard fixes, printed without
// addresses so runs with and without the agent compare equal.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <thread>

struct alignas(256) Line { char c[256]; };
struct alignas(4096) Page { char c[100]; };

static int handler_calls;

static void handler()
{
	handler_calls++;
	std::set_new_handler(nullptr);   // next failure throws
}

static const std::size_t HUGE_N = (std::size_t)1 << 62;

template <class F> static void throwing(const char *what, F f)
{
	handler_calls = 0;
	std::set_new_handler(handler);
	try {
		void *p = f();
		std::printf("%s: returned %s, no exception\n", what, p ? "a block" : "NULL");
	} catch (std::bad_alloc &) {
		std::printf("%s: bad_alloc, new_handler called %d times\n", what,
			    handler_calls);
	}
	std::set_new_handler(nullptr);
}

// Run by dlopen, which holds the loader's lock meanwhile: a thread's
// operator new must not wait for it (the agent's lookups take none).
static int ctor_bad = -1;
__attribute__((constructor)) static void init()
{
	std::thread t([] {
		int bad = 0;
		for (int i = 0; i < 100; i++) {
			Line *l = new Line;
			bad += (std::uintptr_t)l % 256 != 0;
			delete l;
		}
		ctor_bad = bad;
	});
	t.join();
}

extern "C" int run(void)
{
	std::printf("constructor's thread: %d of 100 misaligned\n", ctor_bad);
	int bad = 0;
	for (int i = 0; i < 1000; i++) {
		Line *l = new Line;
		Page *p = new Page[3];
		bad += (std::uintptr_t)l % 256 != 0;
		bad += (std::uintptr_t)p % 4096 != 0;
		delete l;
		delete[] p;
	}
	std::printf("aligned new: %d of 2000 misaligned\n", bad);
	throwing("new", [] { return (void *)new char[HUGE_N]; });
	throwing("new(align_val_t)", [] {
		return ::operator new(HUGE_N, std::align_val_t(256));
	});
	std::printf("new(nothrow): %s\n",
		    new (std::nothrow) char[HUGE_N] ? "a block" : "NULL");
	std::printf("new(align_val_t, nothrow): %s\n",
		    ::operator new(HUGE_N, std::align_val_t(256), std::nothrow) ?
			    "a block" : "NULL");
	void *small = ::operator new(10, std::align_val_t(512), std::nothrow);
	std::printf("new(10, align 512, nothrow): %s\n",
		    small && (std::uintptr_t)small % 512 == 0 ? "aligned" : "wrong");
	::operator delete(small, std::align_val_t(512));
	return 0;
}
