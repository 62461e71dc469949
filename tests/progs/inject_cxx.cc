// Injection target: C++ new/delete.
//   prints "ready"; reads a line; holds 8 MiB of std::vector<char> made in
//   cxx_site (128 x 64 KiB, operator new); prints "allocated"; reads a
//   line; deletes them and exits 0.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

__attribute__((noinline)) static std::vector<std::unique_ptr<std::vector<char>>> *cxx_site()
{
	auto *v = new std::vector<std::unique_ptr<std::vector<char>>>();
	for (int i = 0; i < 128; i++)
		v->push_back(std::make_unique<std::vector<char>>(65536, 'x'));
	return v;
}

int main()
{
	std::string line;
	std::cout << "ready" << std::endl;
	if (!std::getline(std::cin, line))
		return 9;
	auto *held = cxx_site();
	std::cout << "allocated" << std::endl;
	if (!std::getline(std::cin, line))
		return 9;
	delete held;
	return 0;
}
