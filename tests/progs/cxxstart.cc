// A C++ program built with -O2 -g whose main ends with a call that never
// returns (std::terminate in std::thread's destructor, inlined): GCC ends
// main's line sequence with a row at its very end, and main, the last
// function of .text.startup, is followed by crt1's _start, which has no
// line information.  Allocates from main (under _start) and from a
// thread, prints "ready", exits 0 at the next line on stdin.
#include <cstdio>
#include <thread>
#include <vector>

static std::vector<long> *kept;

int main()
{
	kept = new std::vector<long>;
	std::thread t([] {
		for (long i = 0; i < 200000; i++)
			kept->push_back(i);
	});
	t.join();
	std::printf("ready\n");
	std::fflush(stdout);
	char line[16];
	if (!std::fgets(line, sizeof line, stdin))
		return 1;
	return kept->size() == 200000 ? 0 : 2;
}
