/*
 * stress_dlopen: dlopen/dlclose loops while allocating.
 *
 *   stress_dlopen PLUGIN N   N rounds of dlopen(PLUGIN), plugin_alloc()
 *                            (a calloc'ed array of 128 malloc(65536) blocks,
 *                            tests/progs/lib/plugin.c), free of it all and
 *                            dlclose, in each of 3 threads at once while
 *                            main allocates.  Every dlopen/dlclose changes
 *                            the module list the agent publishes.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *plugin;
static int rounds;

static void *loop(void *arg)
{
	long ok = 0;
	(void)arg;
	for (int i = 0; i < rounds; i++) {
		void *h = dlopen(plugin, i % 2 ? RTLD_NOW | RTLD_LOCAL
					       : RTLD_LAZY | RTLD_GLOBAL);
		if (!h)
			return (void *)-1;
		void *(*fn)(void) = (void *(*)(void))dlsym(h, "plugin_alloc");
		void **v = fn ? fn() : NULL;
		if (v) {
			for (int k = 0; k < 128; k++) {
				if (v[k])
					ok++;
				free(v[k]);
			}
			free(v);
		}
		if (dlclose(h) != 0)
			return (void *)-1;
	}
	return (void *)(intptr_t)ok;
}

static int stop;

static void *churn(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		char *p = malloc(300);
		if (p)
			memset(p, 0, 300);
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: stress_dlopen PLUGIN N\n");
		return 2;
	}
	plugin = argv[1];
	rounds = atoi(argv[2]);
	pthread_t t[3], c;
	pthread_create(&c, NULL, churn, NULL);
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, loop, NULL);
	long total = 0;
	for (int i = 0; i < 3; i++) {
		void *r;
		pthread_join(t[i], &r);
		total += (long)(intptr_t)r;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(c, NULL);
	printf("dlopen %d rounds x 3 threads: %ld blocks\n", rounds, total);
	return 0;
}
