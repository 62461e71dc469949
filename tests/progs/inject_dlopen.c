/* Injection target: loads a library after the attach.
 *   prints "ready"; reads a line; dlopen(argv[1]) and calls plugin_alloc
 *   (holds 8 MiB in plugin_site); prints "loaded"; reads a line; exits 0. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	printf("ready\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 9;
	void *h = dlopen(argv[1], RTLD_NOW);
	void *(*fn)(void) = h ? (void *(*)(void))dlsym(h, "plugin_alloc") : NULL;
	void *held = fn ? fn() : NULL;
	printf("loaded %s\n", held ? "ok" : dlerror());
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return 9;
	return 0;
}
