/*
 * Unit tests for tui/sym/sym.c: the test symbolizes its own process, with a
 * module list built the way the agent builds it (dl_iterate_phdr).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sym/demangle.h"
#include "sym/files.h"
#include "sym/sym.h"

/* ---- the module list of this process ---- */

#define MAX_MODS 256

static struct ym_module g_mods[MAX_MODS];
static uint32_t g_nmods;

#include "modules.h"

static int setup_mods(void **state)
{
	(void)state;
	g_nmods = modules_of_self(g_mods, MAX_MODS, 1);
	return g_nmods > 0 ? 0 : -1;
}

static struct sym *new_sym(void)
{
	struct sym *s = sym_new(NULL);
	assert_non_null(s);
	sym_set_modules(s, g_mods, g_nmods);
	return s;
}

static const char *base_name(const char *p)
{
	const char *b = p ? strrchr(p, '/') : NULL;
	return b ? b + 1 : p;
}

static int module_index(uint64_t addr)
{
	for (uint32_t i = 0; i < g_nmods; i++)
		if (addr >= g_mods[i].lo && addr < g_mods[i].hi)
			return (int)i;
	return -1;
}

/* ---- code to symbolize ---- */

int sym_test_target(int x);
static const int target_line = __LINE__ + 2;
__attribute__((noinline)) int
sym_test_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

__attribute__((noinline)) static void *callee_ret(void)
{
	void *r = __builtin_return_address(0);
	__asm__ volatile("" : "+r"(r) : : "memory");
	return r;
}

static int call_line_out;
__attribute__((noinline)) void *sym_test_caller(void);
__attribute__((noinline)) void *sym_test_caller(void)
{
	void *r;
	call_line_out = __LINE__; r = callee_ret();
	__asm__ volatile("" : "+r"(r) : : "memory");
	return r;
}

static int inl_line_out;
static inline __attribute__((always_inline)) void *sym_test_inlined(void)
{
	void *r;
	inl_line_out = __LINE__; r = callee_ret();
	__asm__ volatile("" : "+r"(r) : : "memory");
	return r;
}

static int outer_line_out;
__attribute__((noinline)) void *sym_test_outer(void);
__attribute__((noinline)) void *sym_test_outer(void)
{
	void *r;
	outer_line_out = __LINE__; r = sym_test_inlined();
	__asm__ volatile("" : "+r"(r) : : "memory");
	return r;
}

/* ---- tests ---- */

/* A function's definition in libc itself: not a PLT stub of ours, nor a
 * sanitizer's interceptor (ASan defines qsort in the executable). */
static void *lib_sym(const char *lib, const char *name)
{
	void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	void *p = h ? dlsym(h, name) : NULL;
	if (h)
		dlclose(h);
	return p;
}

static void *libc_sym(const char *name)
{
	return lib_sym("libc.so.6", name);
}

static void test_function_by_name(void **state)
{
	(void)state;
	struct sym *s = new_sym();
	int (*volatile fp)(int) = sym_test_target;
	uint64_t a = (uint64_t)(uintptr_t)fp;
	const struct sym_frame *f;
	int n = sym_resolve(s, a, 0, &f);
	assert_int_equal(n, 1);
	assert_non_null(f[0].function);
	assert_string_equal(f[0].function, "sym_test_target");
	assert_non_null(f[0].file);
	assert_string_equal(base_name(f[0].file), "test_sym.c");
	assert_true(f[0].line >= target_line && f[0].line <= target_line + 3);
	assert_int_equal(f[0].inlined, 0);
	assert_int_equal(f[0].addr, a);
	assert_non_null(f[0].module);
	int mi = module_index(a);
	assert_true(mi >= 0);
	assert_string_equal(f[0].module, g_mods[mi].path);
	assert_int_equal(f[0].offset, a - g_mods[mi].base);
	assert_null(sym_module_warning(s, (uint32_t)mi));
	sym_free(s);
}

static void test_return_address(void **state)
{
	(void)state;
	struct sym *s = new_sym();
	uint64_t a = (uint64_t)(uintptr_t)sym_test_caller();
	const struct sym_frame *f;
	int n = sym_resolve(s, a, 1, &f);
	assert_int_equal(n, 1);
	assert_non_null(f[0].function);
	assert_string_equal(f[0].function, "sym_test_caller");
	assert_non_null(f[0].file);
	assert_string_equal(base_name(f[0].file), "test_sym.c");
	assert_int_equal(f[0].line, call_line_out);
	assert_int_equal(f[0].inlined, 0);
	sym_free(s);
}

static void test_inline_chain(void **state)
{
	(void)state;
	struct sym *s = new_sym();
	uint64_t a = (uint64_t)(uintptr_t)sym_test_outer();
	const struct sym_frame *f;
	int n = sym_resolve(s, a, 1, &f);
	assert_int_equal(n, 2);
	assert_non_null(f[0].function);
	assert_string_equal(f[0].function, "sym_test_inlined");
	assert_int_equal(f[0].inlined, 1);
	assert_non_null(f[0].file);
	assert_string_equal(base_name(f[0].file), "test_sym.c");
	assert_int_equal(f[0].line, inl_line_out);
	assert_non_null(f[1].function);
	assert_string_equal(f[1].function, "sym_test_outer");
	assert_int_equal(f[1].inlined, 0);
	assert_non_null(f[1].file);
	assert_string_equal(base_name(f[1].file), "test_sym.c");
	assert_int_equal(f[1].line, outer_line_out);
	assert_int_equal(f[0].addr, a);
	assert_int_equal(f[1].addr, a);
	sym_free(s);
}

static void check_libc(struct sym *s, void *addr, const char *want)
{
	const struct sym_frame *f;
	uint64_t a = (uint64_t)(uintptr_t)addr;
	int n = sym_resolve(s, a, 0, &f);
	assert_true(n >= 1);
	assert_non_null(f[n - 1].function);
	if (!strstr(f[n - 1].function, want))
		fail_msg("%s resolved to %s", want, f[n - 1].function);
	assert_non_null(f[0].module);
}

static void test_libc_without_debuginfo(void **state)
{
	(void)state;
	struct sym *s = new_sym();
	void *q = libc_sym("qsort");
	void *u = libc_sym("malloc_usable_size");
	assert_non_null(q);
	assert_non_null(u);
	check_libc(s, q, "qsort");
	check_libc(s, u, "malloc_usable_size");
	/* libdw has no debug package installed here: ELF symbols only. */
	void *d = lib_sym("libdw.so.1", "dwfl_begin");
	if (d)
		check_libc(s, d, "dwfl_begin");
	/* A return address inside libc (one byte in) still names it. */
	const struct sym_frame *f;
	int n = sym_resolve(s, (uint64_t)(uintptr_t)q + 1, 1, &f);
	assert_true(n >= 1);
	assert_non_null(f[n - 1].function);
	sym_free(s);
}

static void test_garbage_addresses(void **state)
{
	(void)state;
	struct sym *s = new_sym();
	static const uint64_t bad[] = { 0, 1, 0x10, 0xdeadbeef,
		0x7fffffffffffULL, 0xffffffffffffffffULL, 0x8000000000000000ULL };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		for (int ret = 0; ret < 2; ret++) {
			const struct sym_frame *f;
			int n = sym_resolve(s, bad[i], ret, &f);
			assert_int_equal(n, 1);
			assert_null(f[0].function);
			assert_null(f[0].module);
			assert_int_equal(f[0].addr, bad[i]);
			char buf[64];
			sym_fallback(&f[0], buf, sizeof buf);
			char want[64];
			snprintf(want, sizeof want, "[0x%llx]",
				 (unsigned long long)bad[i]);
			assert_string_equal(buf, want);
		}
	}
	/* NULL everywhere. */
	const struct sym_frame *f;
	assert_int_equal(sym_resolve(NULL, 0x1234, 1, &f), 1);
	assert_null(f[0].function);
	assert_true(sym_resolve(s, 0x1234, 1, NULL) >= 1);
	sym_set_modules(NULL, g_mods, g_nmods);
	sym_free(NULL);
	assert_null(sym_module_warning(NULL, 0));
	assert_null(sym_module_warning(s, 100000));
	sym_fallback(NULL, NULL, 0);
	char small[4];
	sym_fallback(&f[0], small, sizeof small);
	assert_int_equal(strlen(small), 3);
	sym_free(s);
}

static void test_bogus_modules(void **state)
{
	(void)state;
	struct ym_module m[8];
	memset(m, 0, sizeof m);
	const char *paths[] = { "/nonexistent/libx.so", "/dev/zero", "/",
				"/etc/passwd", "linux-vdso.so.1", "",
				"/proc/self/fd/0" };
	for (int i = 0; i < 7; i++) {
		m[i].base = 0x100000000ULL * (uint64_t)(i + 1);
		m[i].lo = m[i].base;
		m[i].hi = m[i].base + 0x10000;
		m[i].state = YM_MODULE_LOADED;
		snprintf(m[i].path, sizeof m[i].path, "%s", paths[i]);
	}
	/* Garbage: no NUL, insane build-id length, inverted extent. */
	memset(m[7].path, 'A', sizeof m[7].path);
	m[7].build_id_len = 0xffffffffu;
	m[7].lo = 0x900000000ULL;
	m[7].hi = 0x900010000ULL;
	m[7].base = m[7].lo;
	m[7].state = YM_MODULE_LOADED;
	m[0].build_id_len = 999;
	m[1].state = 77;   /* neither loaded nor unloaded: ignored */

	struct sym *s = sym_new(NULL);
	assert_non_null(s);
	sym_set_modules(s, m, 8);
	for (int i = 0; i < 8; i++) {
		const struct sym_frame *f;
		int n = sym_resolve(s, m[i].lo + 0x123, 1, &f);
		assert_int_equal(n, 1);
		assert_null(f[0].function);
		if (i == 1) {
			assert_null(f[0].module);
			continue;
		}
		assert_non_null(f[0].module);
		assert_int_equal(f[0].offset, 0x123);
		char buf[600];
		sym_fallback(&f[0], buf, sizeof buf);
		assert_true(buf[0] == '[');
		if (i == 4)
			assert_string_equal(buf, "[linux-vdso.so.1+0x123]");
	}
	/* Inverted extent, NULL list, zero modules. */
	m[2].lo = m[2].hi + 1;
	sym_set_modules(s, m, 8);
	sym_set_modules(s, NULL, 5);
	sym_set_modules(s, m, 0);
	const struct sym_frame *f;
	assert_int_equal(sym_resolve(s, m[0].lo, 0, &f), 1);
	assert_null(f[0].module);
	sym_free(s);

	/* Root prefix naming nothing. */
	s = sym_new("/nonexistent-root/");
	assert_non_null(s);
	sym_set_modules(s, g_mods, g_nmods);
	int (*volatile fp)(int) = sym_test_target;
	assert_int_equal(sym_resolve(s, (uint64_t)(uintptr_t)fp, 0, &f), 1);
	assert_null(f[0].function);
	assert_non_null(f[0].module);
	sym_free(s);
	/* Root "/" behaves as no root. */
	s = sym_new("/");
	assert_non_null(s);
	sym_set_modules(s, g_mods, g_nmods);
	assert_int_equal(sym_resolve(s, (uint64_t)(uintptr_t)fp, 0, &f), 1);
	assert_non_null(f[0].function);
	assert_string_equal(f[0].function, "sym_test_target");
	sym_free(s);
}

static void test_build_id_mismatch(void **state)
{
	(void)state;
	int (*volatile fp)(int) = sym_test_target;
	uint64_t a = (uint64_t)(uintptr_t)fp;
	int mi = module_index(a);
	assert_true(mi >= 0);
	if (g_mods[mi].build_id_len == 0)
		skip();
	struct ym_module *m = malloc(g_nmods * sizeof *m);
	assert_non_null(m);
	memcpy(m, g_mods, g_nmods * sizeof *m);
	m[mi].build_id[0] ^= 0xff;
	struct sym *s = sym_new(NULL);
	assert_non_null(s);
	sym_set_modules(s, m, g_nmods);
	const char *w = sym_module_warning(s, (uint32_t)mi);
	assert_non_null(w);
	assert_non_null(strstr(w, "build-id mismatch"));
	assert_non_null(strstr(w, g_mods[mi].path));
	const struct sym_frame *f;
	assert_int_equal(sym_resolve(s, a, 0, &f), 1);
	assert_null(f[0].function);
	assert_null(f[0].file);
	assert_non_null(f[0].module);
	/* Other modules are unaffected. */
	for (uint32_t i = 0; i < g_nmods; i++)
		if ((int)i != mi)
			assert_null(sym_module_warning(s, i));
	/* Reports list exactly this one (sym_next_warning). */
	uint32_t it = 0;
	assert_ptr_equal(sym_next_warning(s, &it), w);
	assert_null(sym_next_warning(s, &it));
	assert_null(sym_next_warning(s, &it));
	assert_null(sym_next_warning(NULL, &it));
	free(m);
	sym_free(s);
}

static int run(const char *cmd)
{
	int rc = system(cmd);
	return rc == 0 ? 0 : -1;
}

/* Debug information in a separate file found by build-id, under the
 * target's root (a container's /proc/PID/root): the executable without
 * DWARF at <root>/bin/app, its DWARF at
 * <root>/usr/lib/debug/.build-id/xx/yyyy.debug. */
static void test_separate_debug_by_build_id(void **state)
{
	(void)state;
	int (*volatile fp)(int) = sym_test_target;
	uint64_t a = (uint64_t)(uintptr_t)fp;
	int mi = module_index(a);
	assert_true(mi >= 0);
	const struct ym_module *me = &g_mods[mi];
	if (me->build_id_len < 2 || run("command -v objcopy >/dev/null") != 0)
		skip();
	char root[] = "/tmp/ymtop-symtest.XXXXXX";
	assert_non_null(mkdtemp(root));
	char hex[2 * 32 + 1];
	for (uint32_t i = 0; i < me->build_id_len && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", me->build_id[i]);
	char cmd[8192];
	snprintf(cmd, sizeof cmd,
		 "set -e; mkdir -p '%s/bin' '%s/usr/lib/debug/.build-id/%.2s'; "
		 "strip -g -o '%s/bin/app' '%s'; "
		 "objcopy --only-keep-debug '%s' "
		 "'%s/usr/lib/debug/.build-id/%.2s/%s.debug'",
		 root, root, hex, root, me->path, me->path, root, hex, hex + 2);
	assert_int_equal(run(cmd), 0);

	struct ym_module *m = malloc(g_nmods * sizeof *m);
	assert_non_null(m);
	memcpy(m, g_mods, g_nmods * sizeof *m);
	snprintf(m[mi].path, sizeof m[mi].path, "/bin/app");
	struct sym *s = sym_new(root);
	assert_non_null(s);
	sym_set_modules(s, m, g_nmods);
	assert_null(sym_module_warning(s, (uint32_t)mi));
	const struct sym_frame *f;
	assert_int_equal(sym_resolve(s, a, 0, &f), 1);
	assert_non_null(f[0].function);
	assert_string_equal(f[0].function, "sym_test_target");
	/* The line came from the debug file: the copy has no DWARF. */
	assert_non_null(f[0].file);
	assert_string_equal(base_name(f[0].file), "test_sym.c");
	assert_true(f[0].line >= target_line && f[0].line <= target_line + 3);
	assert_string_equal(f[0].module, "/bin/app");
	/* And the inline chain too. */
	uint64_t r = (uint64_t)(uintptr_t)sym_test_outer();
	int n = sym_resolve(s, r, 1, &f);
	assert_int_equal(n, 2);
	assert_int_equal(f[0].inlined, 1);
	assert_string_equal(f[1].function, "sym_test_outer");
	sym_free(s);
	free(m);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	assert_int_equal(run(cmd), 0);
}

/* Every process of one program shares its files' symbols: the names
 * handed out are one copy (the same pointer in every struct sym), and
 * the files known do not grow with the processes. */
static void test_shared_by_file(void **state)
{
	(void)state;
	enum { NPROC = 50 };
	struct sym *s[NPROC];
	int (*volatile fp)(int) = sym_test_target;
	uint64_t a = (uint64_t)(uintptr_t)fp;
	uint64_t q = (uint64_t)(uintptr_t)libc_sym("qsort");
	const char *name = NULL, *libc = NULL;
	unsigned known1 = 0, known, open;
	for (int i = 0; i < NPROC; i++) {
		s[i] = new_sym();
		const struct sym_frame *f;
		assert_int_equal(sym_resolve(s[i], a, 0, &f), 1);
		assert_string_equal(f[0].function, "sym_test_target");
		if (i == 0)
			name = f[0].function;
		assert_ptr_equal(f[0].function, name);
		sym_resolve(s[i], q, 0, &f);
		assert_string_equal(f[0].function, "qsort");
		if (i == 0)
			libc = f[0].function;
		assert_ptr_equal(f[0].function, libc);
		sym_files_stats(&open, &known);
		if (i == 0)
			known1 = known;
		assert_int_equal(known, known1);
		assert_true(open <= known && open <= SYM_FILES_OPEN);
	}
	assert_true(known1 >= 2 && known1 <= g_nmods);
	for (int i = 0; i < NPROC; i++)
		sym_free(s[i]);
	sym_files_stats(&open, &known);
	assert_int_equal(known, 0);
	assert_int_equal(open, 0);
}

/* The address of symbol fn in the shared object at path (nm), or 0. */
static uint64_t nm_addr(const char *path, const char *fn)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "nm '%s'", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[512];
	unsigned long long v = 0, x;
	char t, n[256];
	while (fgets(line, sizeof line, p))
		if (sscanf(line, "%llx %c %255s", &x, &t, n) == 3 && !strcmp(n, fn))
			v = x;
	pclose(p);
	return v;
}

/* A library at <dir>/<name> built from one function fn, build-id id (a
 * hex string, or "none"), put in place by rename (a new inode, as a
 * package upgrade does): fn's vaddr. */
static uint64_t build_lib(const char *dir, const char *name, const char *fn,
			  const char *id)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd,
		 "set -e; cd '%s'; printf 'int %s(int x) { return x * 3 + 1; }\\n' > %s.c; "
		 "cc -shared -fPIC -g -O0 -Wl,--build-id=%s -o %s.new %s.c; "
		 "touch -d @%ld %s.new; mv -f %s.new %s",
		 dir, fn, fn, id, name, fn, (long)time(NULL) + (fn[1] - 'a'),
		 name, name, name);
	assert_int_equal(run(cmd), 0);
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	uint64_t v = nm_addr(path, fn);
	assert_true(v != 0);
	return v;
}

static struct sym *lib_process(const char *root, const char *name,
			       const char *id)
{
	struct ym_module m;
	memset(&m, 0, sizeof m);
	m.base = 0x40000000;
	m.lo = m.base;
	m.hi = m.base + 0x100000;
	m.state = YM_MODULE_LOADED;
	snprintf(m.path, sizeof m.path, "/%s", name);
	if (strcmp(id, "none")) {
		m.build_id_len = 20;
		for (int i = 0; i < 20; i++)
			sscanf(id + 2 + 2 * i, "%2hhx", &m.build_id[i]);
	}
	struct sym *s = sym_new(root);
	assert_non_null(s);
	sym_set_modules(s, &m, 1);
	return s;
}

static void check_fn(struct sym *s, uint64_t vaddr, const char *want)
{
	const struct sym_frame *f;
	sym_resolve(s, 0x40000000 + vaddr, 0, &f);
	assert_non_null(f[0].function);
	assert_string_equal(f[0].function, want);
}

/* Two builds of one path: each process gets the names of the build it
 * loaded, with a build-id (the file is known by it: the first build's
 * names stay right for its processes after the file was replaced) and
 * without (known by path, inode and mtime). */
static void test_two_builds_one_path(void **state)
{
	(void)state;
	if (run("command -v cc >/dev/null && command -v nm >/dev/null") != 0)
		skip();
	static const char ida[] = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	static const char idb[] = "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
	char root[] = "/tmp/ymtop-symbuilds.XXXXXX";
	assert_non_null(mkdtemp(root));

	uint64_t va = build_lib(root, "lib.so", "fa", ida);
	struct sym *a1 = lib_process(root, "lib.so", ida);
	check_fn(a1, va, "fa");
	uint64_t vb = build_lib(root, "lib.so", "fb", idb);
	struct sym *b1 = lib_process(root, "lib.so", idb);
	check_fn(b1, vb, "fb");
	/* A process of the first build, started before the upgrade, seen
	 * after it: its build's names, not the file's on disk now. */
	struct sym *a2 = lib_process(root, "lib.so", ida);
	assert_null(sym_module_warning(a2, 0));
	check_fn(a2, va, "fa");
	check_fn(a1, va, "fa");

	uint64_t vc = build_lib(root, "nolib.so", "fc", "none");
	struct sym *c1 = lib_process(root, "nolib.so", "none");
	check_fn(c1, vc, "fc");
	uint64_t vd = build_lib(root, "nolib.so", "fd", "none");
	struct sym *d1 = lib_process(root, "nolib.so", "none");
	check_fn(d1, vd, "fd");
	check_fn(c1, vc, "fc");

	sym_free(a1);
	sym_free(a2);
	sym_free(b1);
	sym_free(c1);
	sym_free(d1);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	assert_int_equal(run(cmd), 0);
}

/* More files than the bound on open sessions: the least recently used
 * are closed, the open ones stay within SYM_FILES_OPEN, and a closed
 * file is opened again when a new address of it needs a name. */
static void test_files_evicted_and_reopened(void **state)
{
	(void)state;
	if (run("command -v cc >/dev/null && command -v nm >/dev/null") != 0)
		skip();
	enum { NFILES = SYM_FILES_OPEN + 8 };
	char root[] = "/tmp/ymtop-symevict.XXXXXX";
	assert_non_null(mkdtemp(root));
	uint64_t v = build_lib(root, "lib0.so", "fe", "none");
	char cmd[700];
	snprintf(cmd, sizeof cmd, "cd '%s' && for i in $(seq 1 %d); do "
		 "cp lib0.so lib$i.so; done", root, NFILES - 1);
	assert_int_equal(run(cmd), 0);
	struct sym *s[NFILES];
	unsigned open, known;
	for (int i = 0; i < NFILES; i++) {
		char name[32];
		snprintf(name, sizeof name, "lib%d.so", i);
		s[i] = lib_process(root, name, "none");
		check_fn(s[i], v, "fe");
		sym_files_stats(&open, &known);
		assert_true(open <= SYM_FILES_OPEN);
		assert_int_equal(known, (unsigned)i + 1);
	}
	/* lib0.so was closed long ago: a new address of it opens it again
	 * (its code's second byte, still in fe). */
	const struct sym_frame *f;
	sym_resolve(s[0], 0x40000000 + v + 1, 0, &f);
	assert_non_null(f[0].function);
	assert_string_equal(f[0].function, "fe");
	sym_files_stats(&open, &known);
	assert_true(open <= SYM_FILES_OPEN);
	for (int i = 0; i < NFILES; i++)
		sym_free(s[i]);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	assert_int_equal(run(cmd), 0);
}

static void test_cache_and_module_updates(void **state)
{
	(void)state;
	struct sym *s = sym_new(NULL);
	assert_non_null(s);
	int (*volatile fp)(int) = sym_test_target;
	uint64_t a = (uint64_t)(uintptr_t)fp;
	int mi = module_index(a);
	assert_true(mi >= 0);

	/* First without the main program: unknown, cached. */
	struct ym_module *m = malloc(g_nmods * sizeof *m);
	assert_non_null(m);
	uint32_t k = 0;
	for (uint32_t i = 0; i < g_nmods; i++)
		if ((int)i != mi)
			m[k++] = g_mods[i];
	sym_set_modules(s, m, k);
	const struct sym_frame *f1, *f2;
	assert_int_equal(sym_resolve(s, a, 0, &f1), 1);
	assert_null(f1[0].module);
	assert_int_equal(sym_resolve(s, a, 0, &f2), 1);
	assert_ptr_equal(f1, f2);
	void *q = libc_sym("qsort");
	const struct sym_frame *l1, *l2;
	int nl = sym_resolve(s, (uint64_t)(uintptr_t)q, 0, &l1);
	assert_non_null(l1[nl - 1].function);

	/* The list grows: the old unknown is re-resolved, libc stays
	 * cached, old pointers stay valid. */
	m[k++] = g_mods[mi];
	sym_set_modules(s, m, k);
	assert_int_equal(sym_resolve(s, a, 0, &f2), 1);
	assert_ptr_not_equal(f1, f2);
	assert_null(f1[0].module);
	assert_non_null(f2[0].function);
	assert_string_equal(f2[0].function, "sym_test_target");
	assert_int_equal(sym_resolve(s, (uint64_t)(uintptr_t)q, 0, &l2), nl);
	assert_ptr_equal(l1, l2);
	/* ret = 1 is a different key. */
	const struct sym_frame *f3;
	sym_resolve(s, a, 1, &f3);
	assert_ptr_not_equal(f2, f3);
	const struct sym_frame *f4;
	sym_resolve(s, a, 1, &f4);
	assert_ptr_equal(f3, f4);

	/* The list changes (a module unloaded, no longer overlapping
	 * anything: still used; then replaced by an overlapping loaded one):
	 * full rebuild, old frames still readable. */
	m[k - 1].state = YM_MODULE_UNLOADED;
	sym_set_modules(s, m, k);
	const struct sym_frame *f5;
	assert_int_equal(sym_resolve(s, a, 0, &f5), 1);
	assert_non_null(f5[0].function);
	assert_string_equal(f5[0].function, "sym_test_target");
	struct ym_module *m2 = malloc((k + 1) * sizeof *m2);
	assert_non_null(m2);
	memcpy(m2, m, k * sizeof *m2);
	m2[k] = g_mods[mi];
	snprintf(m2[k].path, sizeof m2[k].path, "/nonexistent/other");
	m2[k].build_id_len = 0;
	sym_set_modules(s, m2, k + 1);
	const struct sym_frame *f6;
	assert_int_equal(sym_resolve(s, a, 0, &f6), 1);
	assert_null(f6[0].function);
	assert_string_equal(f6[0].module, "/nonexistent/other");
	assert_string_equal(f2[0].function, "sym_test_target");
	assert_string_equal(l1[nl - 1].function, l2[nl - 1].function);
	free(m2);
	free(m);
	sym_free(s);
}

static void test_demangle(void **state)
{
	(void)state;
	static const struct { const char *in, *out; } cases[] = {
		{ "_ZN3foo3BarIiE6methodEi", "foo::Bar<int>::method(int)" },
		{ "_Z3fooPKc", "foo(char const*)" },
		{ "_ZNSt6vectorIiSaIiEE9push_backERKi",
		  "std::vector<int, std::allocator<int> >::push_back(int const&)" },
		/* Rust legacy: the hash goes. */
		{ "_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write" },
		{ "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$"
		  "17h12345678abcdef01E", "std::rt::lang_start::{{closure}}" },
		/* Rust v0. */
		{ "_RNvCs1234_7mycrate3foo", "mycrate::foo" },
		{ "_RNvNtCs1234_7mycrate3bar3baz", "mycrate::bar::baz" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char *d = sym_demangle(cases[i].in);
		if (!d || strcmp(d, cases[i].out))
			fail_msg("%s -> %s, want %s", cases[i].in,
				 d ? d : "(null)", cases[i].out);
		free(d);
	}
	/* Not mangled, or not valid: NULL (callers keep the raw name). */
	static const char *const plain[] = { "main", "foo__bar", "_Dmain",
		"_Z", "_ZZZZ", "_R", "", "__libc_start_main", "_Zxyz" };
	for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
		char *d = sym_demangle(plain[i]);
		if (d)
			fail_msg("%s demangled to %s", plain[i], d);
	}
	assert_null(sym_demangle(NULL));
}

/* C functions given C++ and Rust mangled symbol names (asm labels): the
 * DWARF has no linkage name for them, the ELF symbol is mangled, so the
 * demangler is exercised through sym_resolve. */
__attribute__((noinline)) int ymtop_mangled_cxx(int x)
	__asm__("_ZN5ymtop4test7mangledEi");
__attribute__((noinline)) int ymtop_mangled_cxx(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 7;
}

__attribute__((noinline)) int ymtop_mangled_rust(int x)
	__asm__("_ZN5ymtop4rust6legacy17h0123456789abcdefE");
__attribute__((noinline)) int ymtop_mangled_rust(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 8;
}

__attribute__((noinline)) int ymtop_mangled_v0(int x)
	__asm__("_RNvNtCs1234_5ymtop4rust2v0");
__attribute__((noinline)) int ymtop_mangled_v0(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 9;
}

static void check_name(struct sym *s, int (*fp)(int), const char *want)
{
	const struct sym_frame *f;
	int n = sym_resolve(s, (uint64_t)(uintptr_t)fp, 0, &f);
	assert_int_equal(n, 1);
	assert_non_null(f[0].function);
	if (strcmp(f[0].function, want))
		fail_msg("got %s, want %s", f[0].function, want);
	assert_non_null(f[0].file);
	assert_string_equal(base_name(f[0].file), "test_sym.c");
}

static void test_demangle_through_resolve(void **state)
{
	(void)state;
	struct sym *s = new_sym();
	int (*volatile fp)(int) = ymtop_mangled_cxx;
	check_name(s, fp, "ymtop::test::mangled(int)");
	fp = ymtop_mangled_rust;
	check_name(s, fp, "ymtop::rust::legacy");
	fp = ymtop_mangled_v0;
	check_name(s, fp, "ymtop::rust::v0");
	sym_free(s);
}

#include "clock.h"

/* Thousands of stacks of ~20 frames: about 4000 distinct addresses,
 * looked up 60000 times, each naming a frame (its time printed). */
static void test_speed(void **state)
{
	(void)state;
	struct sym *s = new_sym();
	int (*volatile fp)(int) = sym_test_target;
	int mi = module_index((uint64_t)(uintptr_t)fp);
	void *q = libc_sym("qsort");
	int li = module_index((uint64_t)(uintptr_t)q);
	assert_true(mi >= 0 && li >= 0);
	enum { N = 4000, LOOKUPS = 60000 };
	uint64_t *addr = malloc(N * sizeof *addr);
	assert_non_null(addr);
	for (int i = 0; i < N; i++) {
		const struct ym_module *m = &g_mods[i % 2 ? li : mi];
		uint64_t span = m->hi - m->lo;
		addr[i] = m->lo + ((uint64_t)i * 7919u * 13u) % span;
	}
	double t0 = now_s();
	int frames = 0;
	for (int i = 0; i < LOOKUPS; i++) {
		const struct sym_frame *f;
		frames += sym_resolve(s, addr[(i * 31) % N], 1, &f);
	}
	double t1 = now_s();
	print_message("%d lookups (%d distinct), %d frames: %.3f s\n",
		      LOOKUPS, N, frames, t1 - t0);
	/* Every lookup names at least one frame.  The time is printed, not
	 * asserted: speed goals are benchmarks (tests/bench/sym_speed.py). */
	assert_true(frames >= LOOKUPS);
	free(addr);
	sym_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_function_by_name),
		cmocka_unit_test(test_return_address),
		cmocka_unit_test(test_inline_chain),
		cmocka_unit_test(test_libc_without_debuginfo),
		cmocka_unit_test(test_garbage_addresses),
		cmocka_unit_test(test_bogus_modules),
		cmocka_unit_test(test_build_id_mismatch),
		cmocka_unit_test(test_separate_debug_by_build_id),
		cmocka_unit_test(test_cache_and_module_updates),
		cmocka_unit_test(test_shared_by_file),
		cmocka_unit_test(test_two_builds_one_path),
		cmocka_unit_test(test_files_evicted_and_reopened),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_demangle_through_resolve),
		cmocka_unit_test(test_speed),
	};
	return cmocka_run_group_tests(tests, setup_mods, NULL);
}
