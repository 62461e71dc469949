// Symbolization target (tests/integration/test_symbols.py), built -O2 -g.
//   prints "ready"; reads a line; exits 0.  Before "ready" it holds:
//   - 256 Blob (4 KiB each) made by Pool<Blob>::make<int>, an inlined
//     member function template, called from build_pool;
//   - a std::vector<long> grown by push_back in grow_vector (4 MiB
//     final capacity: _M_realloc_insert / operator new under it);
//   - 64 std::string of 8 KiB built in make_strings.
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

struct Blob {
	explicit Blob(int v) { data[0] = (char)v; }
	char data[4096];
};

template <typename T> struct Pool {
	std::vector<T *> items;

	template <typename... A> inline __attribute__((always_inline)) T *make(A &&...a)
	{
		T *p = new T(std::forward<A>(a)...);
		items.push_back(p);
		return p;
	}
};

__attribute__((noinline)) Pool<Blob> *build_pool()
{
	auto *pool = new Pool<Blob>();
	pool->items.reserve(256);
	for (int i = 0; i < 256; i++)
		pool->make(i);
	return pool;
}

__attribute__((noinline)) std::vector<long> *grow_vector()
{
	auto *v = new std::vector<long>();
	for (long i = 0; i < 512 * 1024; i++)
		v->push_back(i);
	return v;
}

__attribute__((noinline)) std::vector<std::string> *make_strings()
{
	auto *v = new std::vector<std::string>();
	v->reserve(64);
	for (int i = 0; i < 64; i++)
		v->emplace_back(std::string(8192, (char)('a' + i % 26)));
	return v;
}

int main()
{
	auto *pool = build_pool();
	auto *vec = grow_vector();
	auto *strs = make_strings();
	std::string line;
	std::cout << "ready" << std::endl;
	if (!std::getline(std::cin, line))
		return 9;
	for (auto *b : pool->items)
		delete b;
	delete pool;
	delete vec;
	delete strs;
	return 0;
}
