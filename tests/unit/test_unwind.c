/*
 * The agent's unwinder (injector/agent/unwind.c) against libunwind's unw_step,
 * frame by frame: recursion at -O2, libraries loaded with dlopen built
 * with and without frame pointers, C++ (virtual calls, std::function,
 * std::sort's comparator, a catch block), a signal handler (through
 * __restore_rt, also on an alternate stack), signals landing anywhere in
 * busy code (prologues, the PLT, the vDSO), a thread, and a library
 * unloaded and replaced by another at the same address (the rule cache
 * must not answer for the old one).  The rule cache itself, included
 * here with the walker: a flush, a frame of hundreds of KiB answered from
 * the cache, a slot a writer is filling, and slots filled and read from
 * several threads at once.  libunwind is linked here only, as
 * the reference.  It links libstdc++ too, so that a sanitizer finds
 * __cxa_throw at start (libuw_cxx.so throws).
 */
#define UNW_LOCAL_ONLY
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The walker and its cache, static functions included (the archive's copy
 * is then not linked: every symbol it defines is defined here).  Under
 * gcc's TSan its seqlock fences warn as the archive's agent objects do
 * (the Makefile passes those -Wno-tsan). */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wtsan"
#endif
#include "agent/unwind.c"

#define MAXF 256

typedef int (*leaf_fn)(void);
typedef int (*recurse_fn)(int, leaf_fn);

/* The reference: libunwind stepping from its own context, without its
 * trace cache; out[0] is the return address into the caller. */
__attribute__((noinline)) static int ref_trace(uint64_t *out, int max)
{
	unw_context_t uc;
	unw_cursor_t c;
	if (unw_getcontext(&uc) != 0 || unw_init_local(&c, &uc) != 0)
		return 0;
	int n = 0;
	while (n < max && unw_step(&c) > 0) {
		unw_word_t ip;
		unw_get_reg(&c, UNW_REG_IP, &ip);
		out[n++] = ip;
	}
	return n;
}

/* The last comparison (also from signal handlers: no cmocka there). */
static struct cmp {
	uint64_t ours[MAXF], ref[MAXF];
	int n, m;
	int equal;
} last, bad;
static volatile int checks, mismatches;
static int want_max = MAXF;

/* Both unwinders from the same frame; their first frames are return
 * addresses into this function from two different calls, so they are
 * compared from the second on. */
__attribute__((noinline)) static int compare_here(void)
{
	struct cmp c;
	c.n = unwind_backtrace(c.ours, want_max);
	c.m = ref_trace(c.ref, want_max);
	c.equal = c.n == c.m && c.n > 1 &&
		  memcmp(c.ours + 1, c.ref + 1, (size_t)(c.n - 1) * 8) == 0;
	checks++;
	if (!c.equal && !mismatches++)
		bad = c;
	last = c;
	return c.n;
}

static int leaf(void)
{
	int r = compare_here();
	__asm__ volatile("" : "+r"(r));
	return r;
}

static void show(const struct cmp *c)
{
	int k = c->n > c->m ? c->n : c->m;
	for (int i = 0; i < k; i++) {
		uint64_t a = i < c->n ? c->ours[i] : 0, b = i < c->m ? c->ref[i] : 0;
		Dl_info di;
		const char *s = dladdr((void *)(uintptr_t)(b ? b : a), &di) && di.dli_sname ?
			di.dli_sname : "?";
		print_message("  %2d ours %#14llx  libunwind %#14llx %s %s\n", i,
			      (unsigned long long)a, (unsigned long long)b,
			      a == b ? "  " : "!=", s);
	}
}

static void assert_last_equal(int min_frames)
{
	if (!last.equal || mismatches) {
		print_message("unwind: stacks differ\n");
		show(mismatches ? &bad : &last);
	}
	assert_int_equal(mismatches, 0);
	assert_true(last.equal);
	assert_true(last.n >= min_frames);
}

static int reset(void **state)
{
	(void)state;
	checks = 0;
	mismatches = 0;
	want_max = MAXF;
	memset(&last, 0, sizeof last);
	return 0;
}

/* ---- Libraries ---- */

static char libdir[4096];

static void *open_lib(const char *name)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", libdir, name);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		print_message("dlopen %s: %s\n", path, dlerror());
	assert_non_null(h);
	return h;
}

static void *sym(void *h, const char *name)
{
	void *f = dlsym(h, name);
	assert_non_null(f);
	return f;
}

static void *lib_fp, *lib_nofp, *lib_cxx;

static int open_libs(void **state)
{
	(void)state;
	ssize_t n = readlink("/proc/self/exe", libdir, sizeof libdir - 1);
	if (n <= 0)
		return -1;
	libdir[n] = '\0';
	char *slash = strrchr(libdir, '/');
	if (slash)
		*slash = '\0';
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_NONE);
	return 0;
}

/* ---- Tests ---- */

/* Recursion in this -O2 file: the asm keeps every level a real frame. */
__attribute__((noinline)) static int deep(int d)
{
	int r = d > 0 ? deep(d - 1) : leaf();
	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

static void test_deep_recursion_o2(void **state)
{
	(void)state;
	deep(100);
	assert_last_equal(100);
	deep(100);   /* again, from the cache */
	assert_last_equal(100);
}

static void test_frame_pointers(void **state)
{
	(void)state;
	if (!lib_fp)
		lib_fp = open_lib("libuw_fp.so");
	recurse_fn f = (recurse_fn)sym(lib_fp, "uw_fp_recurse");
	for (int d = 0; d < 12; d++) {
		f(d, leaf);
		assert_last_equal(d + 3);
	}
}

static void test_no_frame_pointers(void **state)
{
	(void)state;
	if (!lib_nofp)
		lib_nofp = open_lib("libuw_nofp.so");
	recurse_fn f = (recurse_fn)sym(lib_nofp, "uw_nofp_recurse");
	for (int d = 0; d < 12; d++) {
		f(d, leaf);
		assert_last_equal(d + 3);
	}
}

static void test_across_libraries(void **state)
{
	(void)state;
	if (!lib_fp)
		lib_fp = open_lib("libuw_fp.so");
	if (!lib_nofp)
		lib_nofp = open_lib("libuw_nofp.so");
	int (*via)(recurse_fn, int, leaf_fn) =
		(int (*)(recurse_fn, int, leaf_fn))sym(lib_fp, "uw_fp_via");
	via((recurse_fn)sym(lib_nofp, "uw_nofp_recurse"), 7, leaf);
	assert_last_equal(10);
	int (*via2)(recurse_fn, int, leaf_fn) =
		(int (*)(recurse_fn, int, leaf_fn))sym(lib_nofp, "uw_nofp_via");
	via2((recurse_fn)sym(lib_fp, "uw_fp_recurse"), 7, leaf);
	assert_last_equal(10);
}

static void test_cxx(void **state)
{
	(void)state;
	if (!lib_cxx)
		lib_cxx = open_lib("libuw_cxx.so");
	recurse_fn run = (recurse_fn)sym(lib_cxx, "uw_cxx_run");
	for (int d = 0; d < 4; d++) {
		run(d, leaf);
		assert_last_equal(4 + 3 * d);
	}
	int (*in_catch)(leaf_fn) = (int (*)(leaf_fn))sym(lib_cxx, "uw_cxx_catch");
	in_catch(leaf);
	assert_last_equal(3);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	compare_here();
}

static int raise_leaf(void)
{
	raise(SIGUSR1);
	return 0;
}

static void handle(int sig, int altstack)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | (altstack ? SA_ONSTACK : 0);
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(sig, &sa, NULL), 0);
}

/* The handler's stack goes through __restore_rt into raise, the leaf,
 * and the recursion in the library below it. */
static void signal_from_library(int altstack)
{
	if (!lib_nofp)
		lib_nofp = open_lib("libuw_nofp.so");
	static char alt[1 << 16];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof alt }, old;
	if (altstack)
		assert_int_equal(sigaltstack(&ss, &old), 0);
	handle(SIGUSR1, altstack);
	recurse_fn f = (recurse_fn)sym(lib_nofp, "uw_nofp_recurse");
	f(5, raise_leaf);
	signal(SIGUSR1, SIG_DFL);
	if (altstack)
		sigaltstack(&old, NULL);
	assert_int_equal(checks, 1);
	assert_last_equal(12);
	/* The frames below the signal are there: the return into raise_leaf
	 * (a few bytes into it) and the library's recursion. */
	int seen = 0;
	for (int i = 0; i < last.n; i++)
		if (last.ours[i] > (uintptr_t)raise_leaf &&
		    last.ours[i] < (uintptr_t)raise_leaf + 64)
			seen = i;
	assert_true(seen > 1);
	assert_true(last.n > seen + 5);
}

static void test_signal_handler(void **state)
{
	(void)state;
	signal_from_library(0);
}

static void test_signal_handler_altstack(void **state)
{
	(void)state;
	signal_from_library(1);
}

/* Signals from another thread land anywhere in busy code. */
static volatile int spin_stop;

static void *kicker(void *arg)
{
	pthread_t target = *(pthread_t *)arg;
	for (int i = 0; i < 3000; i++) {
		pthread_kill(target, SIGPROF);
		usleep(50);
	}
	spin_stop = 1;
	return NULL;
}

static void signals_anywhere(const char *lib, const char *fn)
{
	void *h = open_lib(lib);
	uint64_t (*spin)(volatile int *) = (uint64_t (*)(volatile int *))sym(h, fn);
	handle(SIGPROF, 0);
	spin_stop = 0;
	pthread_t self = pthread_self(), k;
	assert_int_equal(pthread_create(&k, NULL, kicker, &self), 0);
	spin(&spin_stop);
	pthread_join(k, NULL);
	signal(SIGPROF, SIG_DFL);
	print_message("  %d signals in %s, %d stacks differ\n", checks, fn, mismatches);
	assert_true(checks > 100);
	if (mismatches)
		show(&bad);
	assert_int_equal(mismatches, 0);
}

static void test_signals_anywhere_fp(void **state)
{
	(void)state;
	signals_anywhere("libuw_fp.so", "uw_fp_spin");
}

static void test_signals_anywhere_nofp(void **state)
{
	(void)state;
	signals_anywhere("libuw_nofp.so", "uw_nofp_spin");
}

static void *thread_main(void *arg)
{
	(void)arg;
	deep(20);
	return NULL;
}

static void test_thread(void **state)
{
	(void)state;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_main, NULL), 0);
	pthread_join(t, NULL);
	assert_last_equal(22);
}

static void test_max_depth(void **state)
{
	(void)state;
	want_max = 3;
	deep(30);
	assert_int_equal(last.n, 3);
	assert_int_equal(last.m, 3);
	assert_memory_equal(last.ours + 1, last.ref + 1, 2 * 8);
}

static int subs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_subs;
	return 1;
}

static unsigned long long loader_subs(void)
{
	unsigned long long s = 0;
	dl_iterate_phdr(subs_cb, &s);
	return s;
}

/* Library A is unloaded and B loaded at the same address: the return
 * address in uw_swap is the same, the frame is not.  A's cached rule
 * gives a short, wrong stack until unwind_sync sees the unload. */
static void test_dlclose_dlopen_same_address(void **state)
{
	(void)state;
	char pa[4200];
	snprintf(pa, sizeof pa, "%s/libuw_swap_a.so", libdir);
	unwind_sync(loader_subs());
	void *a = open_lib("libuw_swap_a.so");
	int (*fa)(leaf_fn) = (int (*)(leaf_fn))sym(a, "uw_swap");
	fa(leaf);
	assert_last_equal(4);
	int full = last.n;
	assert_int_equal(dlclose(a), 0);
	assert_null(dlopen(pa, RTLD_NOW | RTLD_NOLOAD));
	void *b = open_lib("libuw_swap_b.so");
	int (*fb)(leaf_fn) = (int (*)(leaf_fn))sym(b, "uw_swap");
	if (fb != fa) {
		dlclose(b);
		print_message("  B loaded at %p, not at A's %p\n", (void *)fb, (void *)fa);
		skip();
	}
	unw_flush_cache(unw_local_addr_space, 0, 0);
	/* Not told yet: A's rule answers (this is what the test is about). */
	fb(leaf);
	assert_false(last.equal);
	assert_true(last.n < last.m);
	mismatches = 0;
	/* The agent's module scan passes the loader's counters. */
	unwind_sync(loader_subs());
	fb(leaf);
	assert_last_equal(4);
	assert_int_equal(last.n, full);
	dlclose(b);
}

/* A frame of 320 KiB, unwound twice from one return address: the second
 * walk takes the cached rule, which must hold the whole CFA offset (a
 * truncated one stops the walk or sends it astray). */
static volatile int twice = 2;   /* not unrolled into two call sites */

__attribute__((noinline)) static int huge_frame(void)
{
	volatile char pad[320 << 10];
	pad[0] = 1;
	int r = 0;
	for (int i = 0; i < twice; i++) {   /* one call site: one key */
		r += compare_here();
		__asm__ volatile("" : "+r"(r) :: "memory");
	}
	return r + pad[0];
}

static void test_huge_frame_cached(void **state)
{
	(void)state;
	huge_frame();
	assert_last_equal(3);
	assert_int_equal(checks, 2);
}

/* A rule a key alone determines, with every field different. */
static struct rule rule_of(uint64_t key)
{
	struct rule r = { .cfa_off = (int32_t)(key % 4000) * 8 + 8,
			  .ra_off = -8 * (int32_t)(1 + key % 31),
			  .bp_off = -8 * (int32_t)(key % 32),
			  .kind = (uint8_t)(1 + key % 3),
			  .bp = (uint8_t)(key % 3) };
	return r;
}

static int rule_eq(const struct rule *a, const struct rule *b)
{
	return a->cfa_off == b->cfa_off && a->ra_off == b->ra_off &&
	       a->bp_off == b->bp_off && a->kind == b->kind && a->bp == b->bp;
}

/* Keys that all fall in set 0: key ^ key >> SET_LOG has no low bits. */
static uint64_t set0_key(unsigned j)
{
	return (uint64_t)j << SET_LOG | (j & ((1u << SET_LOG) - 1));
}

/* The ways of a set: keys filled until the first of them is evicted. */
#define SET_KEYS 2

static void test_flush_misses(void **state)
{
	(void)state;
	uint32_t gen = __atomic_load_n(&cache_gen, __ATOMIC_ACQUIRE);
	struct rule got = { 0 };
	for (unsigned j = 1; j <= SET_KEYS; j++) {
		struct rule r = rule_of(set0_key(j));
		cache_put(set0_key(j), gen, &r);
	}
	for (unsigned j = 1; j <= SET_KEYS; j++) {
		struct rule r = rule_of(set0_key(j));
		assert_true(cache_get(set0_key(j), gen, &got));
		assert_true(rule_eq(&got, &r));
	}
	unwind_flush();
	uint32_t now = __atomic_load_n(&cache_gen, __ATOMIC_ACQUIRE);
	assert_int_not_equal(now, gen);
	for (unsigned j = 1; j <= SET_KEYS; j++)
		assert_false(cache_get(set0_key(j), now, &got));
	unwind_flush();
}

/* A slot a writer is filling (its sequence odd): a reader misses rather
 * than take half a rule, and another writer leaves it alone. */
static void test_slot_being_filled(void **state)
{
	(void)state;
	uint32_t gen = __atomic_load_n(&cache_gen, __ATOMIC_ACQUIRE);
	uint64_t a = set0_key(7), b = set0_key(9);
	struct rule ra = rule_of(a), rb = rule_of(b), got = { 0 };
	cache_put(a, gen, &ra);
	struct slot *sa = NULL;
	for (int i = 0; i < SET_KEYS; i++)
		if (cache[i].key == a && cache[i].gen == gen)
			sa = &cache[i];
	assert_non_null(sa);
	sa->seq++;
	assert_false(cache_get(a, gen, &got));
	cache_put(b, gen, &rb);   /* the other way */
	cache_put(b, gen, &rb);   /* both current: maybe this one, held */
	assert_int_equal(sa->key, a);
	sa->seq++;
	assert_true(cache_get(a, gen, &got));
	assert_true(rule_eq(&got, &ra));
	unwind_flush();
}

/* Threads fill and read the keys of one set at once: more keys than
 * ways, so fills overwrite each other's slots all the time.  A lookup
 * may miss; a hit must be the key's own rule, never another key's or a
 * mix of two. */
#define RACE_KEYS 12
#define RACE_ROUNDS 400000
static uint32_t race_gen;
static volatile int race_wrong;
static volatile unsigned long race_hits;

static void *race_main(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	unsigned long hits = 0;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		seed = seed * 1103515245u + 12345u;
		uint64_t key = set0_key(1 + (seed >> 16) % RACE_KEYS);
		struct rule want = rule_of(key), got = { 0 };
		if (seed & 0x100) {
			cache_put(key, race_gen, &want);
		} else if (cache_get(key, race_gen, &got)) {
			hits++;
			if (!rule_eq(&got, &want))
				__atomic_add_fetch(&race_wrong, 1, __ATOMIC_RELAXED);
		}
	}
	__atomic_add_fetch(&race_hits, hits, __ATOMIC_RELAXED);
	return NULL;
}

static void test_concurrent_fill_and_lookup(void **state)
{
	(void)state;
	race_gen = __atomic_load_n(&cache_gen, __ATOMIC_ACQUIRE);
	race_wrong = 0;
	race_hits = 0;
	pthread_t t[4];
	for (uintptr_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, race_main,
						(void *)(i + 1)), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(race_wrong, 0);
	assert_true(race_hits > 0);
	unwind_flush();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_deep_recursion_o2, reset),
		cmocka_unit_test_setup(test_frame_pointers, reset),
		cmocka_unit_test_setup(test_no_frame_pointers, reset),
		cmocka_unit_test_setup(test_across_libraries, reset),
		cmocka_unit_test_setup(test_cxx, reset),
		cmocka_unit_test_setup(test_signal_handler, reset),
		cmocka_unit_test_setup(test_signal_handler_altstack, reset),
		cmocka_unit_test_setup(test_signals_anywhere_fp, reset),
		cmocka_unit_test_setup(test_signals_anywhere_nofp, reset),
		cmocka_unit_test_setup(test_thread, reset),
		cmocka_unit_test_setup(test_max_depth, reset),
		cmocka_unit_test_setup(test_dlclose_dlopen_same_address, reset),
		cmocka_unit_test_setup(test_huge_frame_cached, reset),
		cmocka_unit_test_setup(test_flush_misses, reset),
		cmocka_unit_test_setup(test_slot_being_filled, reset),
		cmocka_unit_test_setup(test_concurrent_fill_and_lookup, reset),
	};
	return cmocka_run_group_tests(tests, open_libs, NULL);
}
