/* A library the workload loads with dlopen: its allocations must be
 * attributed to it, by name, even after it is unloaded. */
#include <stdlib.h>

__attribute__((noinline)) static void **plugin_site(void)
{
	void **v = calloc(128, sizeof *v);
	for (int i = 0; v && i < 128; i++)
		v[i] = malloc(65536);
	return v;
}

void *plugin_alloc(void)
{
	return plugin_site();
}
