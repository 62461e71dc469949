// stress_cxx: C++ exceptions thrown through allocating frames, in several
// threads at once; std::bad_alloc from impossible sizes; thread_local
// objects whose destructors free at thread exit.
//
//   stress_cxx N   N throws per thread, 4 threads
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Holder {
	std::vector<std::string> v;
	~Holder() { v.clear(); v.shrink_to_fit(); }
};
thread_local Holder tl_holder;

struct Boom : std::runtime_error {
	explicit Boom(const std::string &s) : std::runtime_error(s) {}
	std::vector<int> payload = std::vector<int>(100, 7);
};

__attribute__((noinline)) int dive(int depth, int limit)
{
	std::vector<std::string> local;
	local.emplace_back(std::string(static_cast<size_t>(depth) * 3 + 20, 'x'));
	auto up = std::make_unique<std::map<int, std::string>>();
	(*up)[depth] = local.back();
	tl_holder.v.push_back(local.back());
	if (tl_holder.v.size() > 64)
		tl_holder.v.erase(tl_holder.v.begin(), tl_holder.v.begin() + 32);
	if (depth == limit)
		throw Boom("depth " + std::to_string(depth));
	return dive(depth + 1, limit) + static_cast<int>(up->size());
}

long run(int n, int seed)
{
	long caught = 0;
	for (int i = 0; i < n; i++) {
		try {
			dive(0, 5 + (i + seed) % 30);
		} catch (const Boom &b) {
			caught += static_cast<long>(std::strlen(b.what())) + b.payload[99];
		}
		try {
			std::vector<char> v;
			v.reserve(static_cast<size_t>(-1) / 2);  // length_error or bad_alloc
		} catch (const std::length_error &) {
			caught += 1000;
		} catch (const std::bad_alloc &) {
			caught += 2000;
		}
	}
	return caught;
}

}  // namespace

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 1000;
	long totals[4] = {0, 0, 0, 0};
	std::vector<std::thread> ts;
	for (int t = 0; t < 4; t++)
		ts.emplace_back([&totals, t, n] { totals[t] = run(n, t); });
	for (auto &t : ts)
		t.join();
	for (int t = 0; t < 4; t++)
		std::printf("thread %d: %ld\n", t, totals[t]);

	volatile size_t huge = static_cast<size_t>(-1) / 4;
	try {
		char *p = new char[huge];
		std::printf("new[] huge: succeeded\n");
		delete[] p;
	} catch (const std::bad_alloc &) {
		std::printf("new[] huge: bad_alloc\n");
	}
	char *q = new (std::nothrow) char[huge];
	std::printf("nothrow new[] huge: %s\n", q ? "ptr" : "nullptr");
	delete[] q;
	try {
		throw std::runtime_error(std::string(100000, 'e'));
	} catch (const std::exception &e) {
		std::printf("big what(): %zu\n", std::strlen(e.what()));
	}
	return 0;
}
