// A C++ allocation site with a long name, for the screen's name elision
// (tests/tui/test_screen.py): three namespaces, a class template over
// std::string, std::vector and std::hash, a method with a std::map
// parameter.  Holds 8 MiB from grow_records_for_ingest in 64 KiB blocks,
// prints "ready", reads a line, exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace company {
namespace storage {
namespace detail {

template <typename K, typename V, typename H> struct RecordTable {
	std::vector<void *> blocks;

	__attribute__((noinline)) void *
	grow_records_for_ingest(std::size_t n,
				const std::map<std::string, std::vector<std::pair<int, long>>> &)
	{
		void *p = std::malloc(n);
		if (p)
			std::memset(p, 1, n);
		return p;
	}
};

} // namespace detail
} // namespace storage
} // namespace company

int main()
{
	using Table = company::storage::detail::RecordTable<
		std::string, std::vector<std::pair<int, long>>, std::hash<std::string>>;
	Table t;
	std::map<std::string, std::vector<std::pair<int, long>>> hints;
	for (int i = 0; i < 128; i++)
		t.blocks.push_back(t.grow_records_for_ingest(64 << 10, hints));
	std::printf("ready\n");
	std::fflush(stdout);
	char line[64];
	if (!std::fgets(line, sizeof line, stdin))
		line[0] = '\0';
	for (void *p : t.blocks)
		std::free(p);
	return 0;
}
