// bench: a small C++ translation unit for cc1plus alone (tests/bench/exactcost.sh):
// nested std::map/std::vector templates, the allocation pattern of a C++
// compile at a size heaptrack finishes in seconds (on cxxwork.cc it takes
// over 100 times the compile itself, BENCHMARKS.md).
#include <map>
#include <string>
#include <vector>
#include <memory>
#include <algorithm>
template <int N> struct T { std::map<std::string, std::vector<T<N - 1>>> m; int f() { return (int)m.size() + T<N - 1>().f(); } };
template <> struct T<0> { int f() { return 0; } };
int g() { return T<40>().f(); }
