/* Preloaded ahead of the agent (tests/integration/test_sample_path.py):
 * counts the process's calls of dl_iterate_phdr, each forwarded to the
 * C library's, and writes "dl_iterate_phdr N" to stderr at exit.  The
 * agent calls it to read the loader's object counters (modules, the
 * interpreter's discovery), taking the loader's lock each time. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

typedef int (*iter_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

static unsigned long calls;

int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	static iter_fn real;
	iter_fn f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (iter_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
		__atomic_store_n(&real, f, __ATOMIC_RELEASE);
	}
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
	return f ? f(cb, data) : 0;
}

__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "dl_iterate_phdr %lu\n",
		__atomic_load_n(&calls, __ATOMIC_RELAXED));
}
