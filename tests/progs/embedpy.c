/*
 * embedpy: a C program that embeds CPython, loaded with dlopen after its
 * own allocations made the agent's segment (tests/integration/
 * test_python.py).  Runs the Python file argv[1] as its main program
 * (libpython's path argv[2], default Debian's).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	/* Enough allocation for a sample: the segment exists before the
	 * interpreter is loaded. */
	static void *keep[64];
	for (int i = 0; i < 64; i++)
		keep[i] = malloc(1 << 20);
	const char *lib = argc > 2 ? argv[2] : "libpython3.11.so.1.0";
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h || argc < 2) {
		fprintf(stderr, "embedpy: %s\n", h ? "usage: embedpy FILE [LIB]" : dlerror());
		return 2;
	}
	void (*init)(int) = (void (*)(int))dlsym(h, "Py_InitializeEx");
	int (*run)(const char *) = (int (*)(const char *))dlsym(h, "PyRun_SimpleString");
	if (!init || !run)
		return 2;
	init(0);
	char code[512];
	snprintf(code, sizeof code,
		 "import sys\nsys.argv = [%s%s%s]\n"
		 "exec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'))\n",
		 "'", argv[1], "'");
	if (run(code) != 0)
		return 1;
	for (int i = 0; i < 64; i++)
		free(keep[i]);
	return 0;
}
