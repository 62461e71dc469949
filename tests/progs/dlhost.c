/*
 * A C host that loads a plugin RTLD_LOCAL, as Python loads extension
 * modules and PAM or NSS load theirs, and calls its run(): the plugin's
 * dependencies (libstdc++, libjemalloc) are in its local scope only,
 * never in the global one.  Usage: dlhost PLUGIN.so
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dlhost PLUGIN.so\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	int (*run)(void) = (int (*)(void))dlsym(h, "run");
	if (!run) {
		printf("no run()\n");
		return 1;
	}
	int rc = run();
	fflush(stdout);
	return rc;
}
