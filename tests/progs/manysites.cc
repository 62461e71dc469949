// Symbolization speed target (tests/integration/test_symbols.py): 4096
// distinct stacks through 2048 distinct allocation sites.
//   prints "ready" after allocating; reads a line; frees and exits 0.
//   site<N> (N < 2048) mallocs 64 + N bytes; via_a and via_b call every
//   site once each, so each (site, caller) pair is its own stack.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

using site_fn = void *(*)();

template <int N> __attribute__((noinline)) void *site()
{
	void *p = std::malloc(64 + N);
	asm volatile("" : : "r"(p) : "memory");
	return p;
}

template <int... N> static const site_fn *table(std::integer_sequence<int, N...>)
{
	static const site_fn t[] = { &site<N>... };
	return t;
}

enum { SITES = 2048 };

/* Distinct side effects keep GCC's identical code folding from merging
 * via_a and via_b into one function. */
static volatile int calls_a, calls_b;

__attribute__((noinline)) static void via_a(std::vector<void *> &out, site_fn f)
{
	out.push_back(f());
	calls_a = calls_a + 1;
}

__attribute__((noinline)) static void via_b(std::vector<void *> &out, site_fn f)
{
	out.push_back(f());
	calls_b = calls_b + 2;
}

int main()
{
	const site_fn *t = table(std::make_integer_sequence<int, SITES>{});
	std::vector<void *> held;
	held.reserve(2 * SITES);
	for (int i = 0; i < SITES; i++) {
		via_a(held, t[i]);
		via_b(held, t[i]);
	}
	std::string line;
	std::cout << "ready" << std::endl;
	if (!std::getline(std::cin, line))
		return 9;
	for (void *p : held)
		std::free(p);
	return 0;
}
