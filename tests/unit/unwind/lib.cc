// C++ code for tests/unit/test_unwind.c to unwind through (libuw_cxx.so,
// -O2): templates, a virtual call, std::function, a lambda, std::sort's
// comparator, and a catch block (its landing pad's CFI).
#include <algorithm>
#include <functional>
#include <stdexcept>
#include <vector>

typedef int (*leaf_fn)(void);

namespace {

struct Base {
	virtual ~Base() {}
	virtual int run(int d, leaf_fn leaf) = 0;
};

template <int N> struct Level : Base {
	int run(int d, leaf_fn leaf) override;
};

template <int N> __attribute__((noinline)) int deep(int d, leaf_fn leaf)
{
	std::vector<int> v(static_cast<size_t>(N + d % 3));
	int called = 0;
	std::sort(v.begin(), v.end(), [&](int a, int b) {
		if (!called++) {
			int r = d > 0 ? deep<N>(d - 1, leaf) : leaf();
			asm volatile("" : "+r"(r));
			v[0] += r;
		}
		return a < b;
	});
	return v[0];
}

template <int N> __attribute__((noinline)) int Level<N>::run(int d, leaf_fn leaf)
{
	std::function<int(int)> f = [leaf](int k) { return deep<N>(k, leaf); };
	int r = f(d);
	asm volatile("" : "+r"(r));
	return r;
}

__attribute__((noinline)) int thrower(int d)
{
	if (d >= 0)
		throw std::runtime_error("unwind test");
	return d;
}

} // namespace

extern "C" int uw_cxx_run(int d, leaf_fn leaf)
{
	Level<3> l3;
	Base *b = &l3;
	asm volatile("" : "+r"(b));
	return b->run(d, leaf);
}

// The leaf runs inside a catch block.
extern "C" int uw_cxx_catch(leaf_fn leaf)
{
	try {
		return thrower(1);
	} catch (const std::exception &) {
		int r = leaf();
		asm volatile("" : "+r"(r));
		return r;
	}
}
