// bench: a translation unit for "g++ -O1 -c", a compiler's allocation
// pattern (many small nodes, a few large tables).
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

template <int N> struct Fib { static constexpr long v = Fib<N - 1>::v + Fib<N - 2>::v; };
template <> struct Fib<1> { static constexpr long v = 1; };
template <> struct Fib<0> { static constexpr long v = 0; };

using Value = std::variant<long, double, std::string, std::vector<int>>;

std::map<std::string, std::vector<Value>> table(int n)
{
	std::map<std::string, std::vector<Value>> m;
	for (int i = 0; i < n; i++)
		m[std::to_string(i)].push_back(Value{static_cast<long>(i)});
	return m;
}

long count_words(const std::string &s)
{
	std::regex w("[a-z]+");
	return std::distance(std::sregex_iterator(s.begin(), s.end(), w),
			     std::sregex_iterator());
}

int main()
{
	std::unordered_map<std::string, std::set<int>> u;
	auto t = table(100);
	for (auto &[k, v] : t)
		u[k].insert(static_cast<int>(v.size()));
	std::vector<std::function<long(long)>> fs;
	fs.push_back([](long x) { return x + Fib<40>::v; });
	std::ostringstream o;
	o << fs[0](1) << count_words("a few words here") << u.size();
	std::cout << o.str() << "\n";
	return 0;
}
