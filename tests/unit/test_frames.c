/*
 * Unit tests for tui/sym/frames.c: which frames are allocator plumbing, which
 * are Rust async noise, and which one is displayed.  The names are what
 * sym.c really produced for tests/progs/symbols.cc and rsyms.rs (g++ 12,
 * libstdc++, rustc 1.95 v0 and legacy), plus the forms other versions
 * print (_M_realloc_append, __rustc:: shims, GenFuture, tokio).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sym/frames.h"

static int plumbing(const struct frames_rules *r, const char *fn)
{
	struct sym_frame f = { .function = fn };
	return frames_is_plumbing(r, &f);
}

static void test_cxx_plumbing(void **state)
{
	(void)state;
	static const char *const yes[] = {
		"malloc", "calloc", "realloc", "free", "posix_memalign",
		"aligned_alloc", "__libc_malloc", "strdup", "__vasprintf_internal",
		"___asprintf", "getline", "__getdelim", "open_memstream",
		"operator new(unsigned long)",
		"operator new[](unsigned long)",
		"operator new(unsigned long, std::align_val_t)",
		"operator new(unsigned long, std::nothrow_t const&)",
		"operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)",
		"operator new",  /* from .dynsym without a demangled signature */
		"std::__new_allocator<long>::allocate(unsigned long, void const*)",
		"__gnu_cxx::new_allocator<int>::allocate(unsigned long, void const*)",
		"std::allocator<int>::allocate(unsigned long)",
		"std::allocator_traits<std::allocator<long> >::allocate(std::allocator<long>&, unsigned long)",
		"std::_Vector_base<long, std::allocator<long> >::_M_allocate(unsigned long)",
		"void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>(__gnu_cxx::__normal_iterator<long*, std::vector<long, std::allocator<long> > >, long const&)",
		"void std::vector<long, std::allocator<long> >::_M_realloc_append<long const&>(long const&)",
		"std::vector<int, std::allocator<int> >::_M_default_append(unsigned long)",
		"std::vector<long, std::allocator<long> >::push_back(long const&)",
		"long& std::vector<long, std::allocator<long> >::emplace_back<long>(long&&)",
		"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_construct(unsigned long, char)",
		"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::basic_string<std::allocator<char> >(unsigned long, char, std::allocator<char> const&)",
		"std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)",
		"std::unique_ptr<Foo, std::default_delete<Foo> > std::make_unique<Foo>()",
		"_IO_file_doallocate",
	};
	static const char *const no[] = {
		"grow_vector()", "build_pool()", "main", "make_strings[abi:cxx11]()",
		"Blob* Pool<Blob>::make<int&>(int&)",
		"(anonymous namespace)::helper(int)",
		"main::{lambda()#1}::operator()() const",
		"std_like_name()", "mallocator(int)", "operator_new_wrapper()",
		"void* site<2047>()",
		"unsigned long long (anonymous namespace)::hash<std::string>(std::string const&)",
	};
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		if (!plumbing(NULL, yes[i]))
			fail_msg("not plumbing: %s", yes[i]);
	}
	for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
		if (plumbing(NULL, no[i]))
			fail_msg("plumbing: %s", no[i]);
	}
	struct sym_frame unknown = { .function = NULL };
	assert_false(frames_is_plumbing(NULL, &unknown));
}

static void test_rust_plumbing(void **state)
{
	(void)state;
	static const char *const yes[] = {
		"__rust_alloc", "__rust_realloc", "__rust_alloc_zeroed",
		"__rdl_alloc", "__rg_alloc", "__rustc::__rust_alloc",
		"alloc::alloc::alloc", "alloc::alloc::exchange_malloc",
		"<alloc::alloc::Global>::alloc_impl",
		"alloc::alloc::Global::alloc_impl",
		"<alloc::alloc::Global as core::alloc::Allocator>::allocate",
		"<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
		"<alloc::raw_vec::RawVecInner>::finish_grow",
		"alloc::raw_vec::RawVecInner<A>::finish_grow",
		"alloc::raw_vec::finish_grow",
		"<alloc::raw_vec::RawVec<alloc::boxed::Box<[u8; 16384]>>>::grow_one",
		"alloc::raw_vec::RawVec<T,A>::grow_one",
		"alloc::raw_vec::RawVec<T,A>::allocate_in",
		"alloc::raw_vec::RawVec<T,A>::reserve::do_reserve_and_handle",
		"<alloc::raw_vec::RawVecInner>::try_allocate_in",
		"<alloc::vec::Vec<u64>>::push", "alloc::vec::Vec<T,A>::push",
		"<alloc::vec::Vec<u8>>::with_capacity_in",
		"alloc::vec::from_elem::<u8>",
		"<alloc::boxed::Box<[u8; 16384]>>::new", "alloc::boxed::Box<T>::new",
		"<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem::<alloc::alloc::Global>",
		"<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
		"<alloc::string::String as core::clone::Clone>::clone",
		"<[u8]>::to_vec", "alloc::slice::<impl [T]>::to_vec",
		"<str as alloc::borrow::ToOwned>::to_owned",
		"<<alloc::boxed::Box<str> as core::convert::From<&str>>::from as core::ops::function::FnOnce<(&str,)>>::call_once",
		"<fn() -> u32 as core::ops::function::FnOnce<()>>::call_once",
		"hashbrown::raw::RawTable<T,A>::reserve_rehash",
		"std::rt::lang_start_internal", "core::ops::function::FnOnce::call_once",
	};
	static const char *const no[] = {
		"rsyms::grow::grow_vec", "<rsyms::grow::Holder>::boxes",
		"rsyms::grow::Holder::boxes", "rsyms::tasks::fill::{closure#0}",
		"rsyms::tasks::fill::{{closure}}",
		"rsyms::tasks::block_on::<rsyms::tasks::Traced<rsyms::tasks::fill::{closure#0}>>",
		"<mycrate::Foo as core::clone::Clone>::clone",
		"<u8 as mycrate::Encode>::encode",
		"<mycrate::Log as std::io::Write>::write",
		"coreutils::main", "stdext::run", "allocator_api2::boxed::Box<T>::new",
	};
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		if (!plumbing(NULL, yes[i]))
			fail_msg("not plumbing: %s", yes[i]);
	}
	for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
		if (plumbing(NULL, no[i]))
			fail_msg("plumbing: %s", no[i]);
	}
}

/* A view over names, innermost first (no sym: strings are static). */
static struct stack_view view(const char *const *names, uint32_t n,
			      struct sym_frame *f, const struct frames_rules *r)
{
	struct stack_view v = { .f = f, .n = n };
	for (uint32_t i = 0; i < n; i++) {
		memset(&f[i], 0, sizeof f[i]);
		f[i].function = names[i];
		f[i].module = "/bin/app";
		f[i].offset = 0x1000 + i;
	}
	v.display = frames_display(r, &v);
	return v;
}

static void test_display_frame(void **state)
{
	(void)state;
	struct sym_frame f[8];
	static const char *const vec[] = {
		"operator new(unsigned long)",
		"std::__new_allocator<long>::allocate(unsigned long, void const*)",
		"std::allocator_traits<std::allocator<long> >::allocate(std::allocator<long>&, unsigned long)",
		"void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>(__gnu_cxx::__normal_iterator<long*, std::vector<long, std::allocator<long> > >, long const&)",
		"std::vector<long, std::allocator<long> >::push_back(long const&)",
		"grow_vector()", "main", "_start",
	};
	struct stack_view v = view(vec, 8, f, NULL);
	assert_int_equal(v.display, 5);

	/* --skip moves it on, --no-skip back to the first frame. */
	struct frames_rules r = { 0 };
	char err[256];
	assert_int_equal(frames_rules_add(&r, "^grow_", err, sizeof err), 0);
	assert_int_equal(frames_display(&r, &v), 6);
	r.no_skip = 1;
	assert_int_equal(frames_display(&r, &v), 0);
	assert_false(plumbing(&r, "malloc"));
	frames_rules_free(&r);
	assert_int_equal(frames_rules_add(&r, "(", err, sizeof err), -1);
	assert_non_null(strstr(err, "--skip"));
	frames_rules_free(&r);

	/* All library code: the first frame past the allocator's entry. */
	static const char *const lib[] = {
		"__rust_alloc", "alloc::alloc::alloc", "alloc::vec::Vec<T,A>::push",
		"std::rt::init",
	};
	v = view(lib, 4, f, NULL);
	assert_int_equal(v.display, 2);
	static const char *const entry[] = { "malloc", "operator new(unsigned long)" };
	v = view(entry, 2, f, NULL);
	assert_int_equal(v.display, 0);
	v = view(entry, 0, f, NULL);
	assert_int_equal(v.display, 0);
}

/* Innermost first, frames of module "/bin/app" with these names (NULL:
 * unnamed); the display frame. */
static uint32_t display_of(const char *const *names, uint32_t n,
			   const struct frames_rules *r)
{
	struct sym_frame f[16];
	assert_true(n <= 16);
	return view(names, n, f, r).display;
}

/* The allocator wrappers of popular programs: each family's entry points
 * are plumbing, and a stack through them shows the wrapper's caller. */
static void test_wrapper_families(void **state)
{
	(void)state;
	static const struct {
		const char *family;
		const char *names[28];
	} fam[] = {
		{ "redis", { "zmalloc", "zmalloc_usable", "zrealloc_usable",
			     "zcalloc", "zcalloc_usable", "zrealloc",
			     "ztrymalloc", "ztrymalloc_usable",
			     "ztrymalloc_usable_internal", "ztrycalloc_usable",
			     "ztryrealloc_usable", "zstrdup", "zmalloc_no_tcache",
			     "zlibc_malloc", NULL } },
		{ "redis-sds", { "sdsnewlen", "_sdsnewlen", "sdsnew",
				 "sdstrynewlen", "sdsempty", "sdsdup",
				 "sdsMakeRoomFor", "_sdsMakeRoomFor",
				 "sdsMakeRoomForNonGreedy", "sdscatlen", "sdscat",
				 "sdscatsds", "sdscatprintf", "sdscatvprintf",
				 "sdscatfmt", "sdscatrepr", "sdscpylen", "sdscpy",
				 "sdsgrowzero", "sdsResize", "sdsRemoveFreeSpace",
				 "sdsfromlonglong", "sdssplitlen", "sdsjoin",
				 "sdsjoinsds", NULL } },
		{ "cpython", { "PyMem_Malloc", "PyMem_RawMalloc", "PyMem_Realloc",
			       "PyMem_Calloc", "PyMem_RawRealloc", "PyMem_RawCalloc",
			       "_PyMem_RawMalloc", "_PyMem_RawRealloc",
			       "_PyMem_DebugMalloc", "PyObject_Malloc",
			       "PyObject_Realloc", "PyObject_Calloc",
			       "_PyObject_Malloc", "_PyObject_Realloc",
			       "_PyObject_Calloc", "pymalloc_alloc",
			       "pymalloc_realloc", "_PyObject_GC_New",
			       "_PyObject_GC_NewVar", "PyType_GenericAlloc",
			       "_PyObject_New", NULL } },
		{ "glib", { "g_malloc", "g_malloc0", "g_malloc_n", "g_malloc0_n",
			    "g_realloc", "g_realloc_n", "g_try_malloc",
			    "g_try_malloc0", "g_try_malloc_n", "g_try_realloc",
			    "g_slice_alloc", "g_slice_alloc0", "g_slice_copy",
			    "g_strdup", "g_strndup", "g_strdup_printf",
			    "g_memdup2", "g_strconcat", NULL } },
		{ "openssl", { "CRYPTO_malloc", "CRYPTO_zalloc", "CRYPTO_realloc",
			       "CRYPTO_clear_realloc", "CRYPTO_strdup",
			       "CRYPTO_strndup", "CRYPTO_memdup",
			       "CRYPTO_secure_malloc", "CRYPTO_secure_zalloc",
			       NULL } },
		{ "xmalloc", { "xmalloc", "xcalloc", "xrealloc", "xstrdup",
			       "xzalloc", "xstrndup", "xmemdup", "xnmalloc",
			       "xnrealloc", "x2nrealloc", "xreallocarray",
			       "xmallocz", "xmemdupz", "xcharalloc", "xpalloc",
			       "sh_xmalloc", "do_xmalloc", NULL } },
		{ "nginx", { "ngx_alloc", "ngx_calloc", "ngx_memalign",
			     "ngx_palloc", "ngx_pnalloc", "ngx_pcalloc",
			     "ngx_palloc_small", "ngx_palloc_large",
			     "ngx_palloc_block", "ngx_create_pool",
			     "ngx_array_push", "ngx_list_push", "ngx_pstrdup",
			     NULL } },
		{ "postgres", { "palloc", "palloc0", "palloc_extended",
				"palloc_aligned", "repalloc", "repalloc_huge",
				"MemoryContextAlloc", "MemoryContextAllocZero",
				"MemoryContextAllocZeroAligned",
				"MemoryContextAllocExtended",
				"MemoryContextAllocHuge", "AllocSetAlloc",
				"AllocSetRealloc", "AllocSetAllocLarge",
				"AllocSetContextCreateInternal",
				"GenerationAlloc", "SlabAlloc", "pstrdup",
				"pnstrdup", "psprintf", "MemoryContextStrdup",
				NULL } },
		{ "sqlite", { "sqlite3Malloc", "sqlite3_malloc", "sqlite3_malloc64",
			      "sqlite3MallocZero", "sqlite3DbMallocRaw",
			      "sqlite3DbMallocRawNN", "sqlite3DbMallocZero",
			      "sqlite3Realloc", "sqlite3_realloc",
			      "sqlite3_realloc64", "sqlite3DbRealloc",
			      "sqlite3DbStrDup", "sqlite3DbStrNDup",
			      "sqlite3MemMalloc", "dbMallocRawFinish",
			      "mallocWithAlarm", "pcache1Alloc", NULL } },
	};
	for (size_t k = 0; k < sizeof fam / sizeof *fam; k++) {
		for (size_t i = 0; fam[k].names[i]; i++) {
			const char *w = fam[k].names[i];
			if (!plumbing(NULL, w))
				fail_msg("%s: not plumbing: %s", fam[k].family, w);
			/* wrapper, wrapper of the same family, caller */
			const char *st[] = { w, fam[k].names[0], "caller_fn", "main" };
			if (display_of(st, 4, NULL) != 2)
				fail_msg("%s: display frame of %s is not its caller",
					 fam[k].family, w);
		}
	}
	/* Real stacks: redis-server 7.0 and python3.11, as ymtop printed
	 * them before these rules (the display frame was 0). */
	static const char *const redis[] = {
		"zmalloc_usable", "_sdsnewlen", "createStringObject",
		"processMultibulkBuffer", "main",
	};
	assert_int_equal(display_of(redis, 5, NULL), 2);
	static const char *const query[] = {
		"zrealloc_usable", "_sdsMakeRoomFor", "readQueryFromClient",
		"callHandler", "connSocketEventHandler",
	};
	assert_int_equal(display_of(query, 5, NULL), 2);
	static const char *const py[] = {
		"_PyObject_Malloc", "_PyObject_GC_NewVar", "PyTuple_New",
		"_PyEval_EvalFrameDefault", "PyEval_EvalCode",
	};
	assert_int_equal(display_of(py, 5, NULL), 2);
	/* Names that only look alike stay the user's. */
	static const char *const no[] = {
		"zset_add", "PyList_New", "PyTuple_New",
		"_PyEval_EvalFrameDefault", "g_main_loop_run", "g_hash_table_insert",
		"CRYPTO_THREAD_run_once", "xml_parse", "xfree_list()",
		"ngx_http_process_request", "ngx_palloc_user()", "pallocate",
		"MemoryContextSwitchTo", "sqlite3Prepare", "sqlite3MemCompare",
		"subquery_planner", "lappend", "sdslen", "sdsfree", "sdscmp",
		"sdsrange", "sdstrim", "sdsAllocSize", "sdsIncrLen",
	};
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		if (plumbing(NULL, no[i]))
			fail_msg("plumbing: %s", no[i]);
}

/* Stripped binaries: unnamed frames between the allocator and a named
 * wrapper are plumbing, and an unnamed frame is never the display frame
 * while a named frame of user code follows (Debian's postgres: AllocSetAlloc
 * is static and reads [postgres+0x5c7860]). */
static void test_stripped_binaries(void **state)
{
	(void)state;
	static const char *const pg[] = {
		NULL, "MemoryContextAllocZeroAligned", "subquery_planner",
		"standard_planner", "pg_plan_query",
	};
	assert_int_equal(display_of(pg, 5, NULL), 2);
	static const char *const pg2[] = {
		NULL, "palloc", "btbeginscan", NULL, "index_beginscan",
	};
	assert_int_equal(display_of(pg2, 5, NULL), 2);
	/* An unnamed caller of the wrapper, then named code: the named. */
	static const char *const pg3[] = {
		NULL, "palloc", NULL, NULL, "ExecBuildUpdateProjection", "main",
	};
	assert_int_equal(display_of(pg3, 6, NULL), 4);
	/* Unnamed, no wrapper, then named: the named one. */
	static const char *const py[] = {
		NULL, "_PyEval_EvalFrameDefault", "PyEval_EvalCode",
	};
	assert_int_equal(display_of(py, 3, NULL), 1);
	/* No named user code: the first unnamed frame past the last
	 * wrapper; libc's start-up is never chosen over it. */
	static const char *const nouser[] = {
		"malloc", NULL, "palloc", NULL, NULL, "__libc_start_call_main",
		"__libc_start_main_impl", "_start",
	};
	assert_int_equal(display_of(nouser, 8, NULL), 3);
	static const char *const thread[] = {
		NULL, NULL, "start_thread", "clone3",
	};
	assert_int_equal(display_of(thread, 4, NULL), 0);
	/* No name at all: the innermost, the allocator's direct caller. */
	static const char *const none[] = { NULL, NULL, NULL };
	assert_int_equal(display_of(none, 3, NULL), 0);
	/* An unnamed static helper of libc or libstdc++ is library code. */
	struct sym_frame f[4];
	static const char *const rt[] = { NULL, NULL, "_start" };
	struct stack_view v = view(rt, 3, f, NULL);
	f[0].module = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
	f[1].module = "/usr/sbin/nginx";
	assert_int_equal(frames_display(NULL, &v), 1);
	assert_true(frames_is_plumbing(NULL, &f[0]));
	assert_false(frames_is_plumbing(NULL, &f[1]));

	/* --skip matches an unnamed frame as printed. */
	struct frames_rules r = { 0 };
	char err[256];
	assert_int_equal(frames_rules_add(&r, "^\\[postgres\\+0x5c7860\\]$", err,
					  sizeof err), 0);
	struct sym_frame u = { .module = "/usr/lib/postgresql/15/bin/postgres",
			       .offset = 0x5c7860 };
	assert_true(frames_is_plumbing(&r, &u));
	u.offset = 0x5c78fc;
	assert_false(frames_is_plumbing(&r, &u));
	/* A skipped unnamed frame is a wrapper: the unnamed frame after it
	 * is the display frame when no named one follows. */
	static const char *const sk[] = { NULL, NULL, NULL };
	v = view(sk, 3, f, NULL);
	f[0].offset = 0x10;
	f[1].offset = 0x20;
	f[2].offset = 0x30;
	assert_int_equal(frames_display(&r, &v), 0);
	frames_rules_free(&r);
	assert_int_equal(frames_rules_add(&r, "app\\+0x20\\]", err, sizeof err), 0);
	assert_int_equal(frames_display(&r, &v), 2);
	frames_rules_free(&r);
}

/* A library that called the program (an event loop running the
 * program's callback) is never the display frame: the program's unnamed
 * frame inner to it is the allocation site.  The stack is Debian's
 * memcached 1.6 (stripped) storing items through libevent 2.1. */
/* A stack with Python frames: the innermost Python frame, past the
 * allocator's and the interpreter's own native frames; native code of
 * an extension (or a library it called) when that allocated; the
 * user's rules skip Python helpers too.  Functions group by Python
 * function, not line. */
static void test_python_display_frame(void **state)
{
	(void)state;
	static const char *const exe = "/usr/bin/python3.11";
	static const char *const lib = "/usr/lib/libpython3.12.so.1.0";
	static const char *const libc = "/lib/x86_64-linux-gnu/libc.so.6";
	static const char *const sq = "/lib/x86_64-linux-gnu/libsqlite3.so.0";
	static const struct { const char *fn, *mod; int py; } st[] = {
		{ "malloc", libc, 0 }, { "_PyObject_Malloc", exe, 0 },
		{ NULL, exe, 0 }, { "PyList_New", lib, 0 },
		{ "Loader.load_users", "/srv/app/db.py", 1 }, { "main", "/srv/app/main.py", 1 },
		{ "PyEval_EvalCode", exe, 0 }, { "__libc_start_main", libc, 0 },
	};
	struct sym_frame f[8];
	memset(f, 0, sizeof f);
	for (uint32_t i = 0; i < 8; i++) {
		f[i].function = st[i].fn;
		f[i].python = st[i].py;
		if (st[i].py) {
			f[i].file = st[i].mod;
			f[i].line = 88 + (int)i;
		} else {
			f[i].module = st[i].mod;
			f[i].exe = st[i].mod == exe;
		}
	}
	struct stack_view v = { .f = f, .n = 8 };
	assert_int_equal(frames_display(NULL, &v), 4);
	char buf[128];
	assert_string_equal(frames_label(&f[4], buf, sizeof buf),
			    "Loader.load_users (app/db.py:92)");
	assert_string_equal(frames_group_label(&f[4], buf, sizeof buf),
			    "Loader.load_users (app/db.py)");
	assert_string_equal(frames_group_label(&f[1], buf, sizeof buf),
			    "_PyObject_Malloc");
	/* A Python helper the user skips: its caller. */
	struct frames_rules r = { 0 };
	char err[256];
	assert_int_equal(frames_rules_add(&r, "^Loader\\.", err, sizeof err), 0);
	assert_int_equal(frames_display(&r, &v), 5);
	frames_rules_free(&r);
	v.display = 4;
	assert_string_equal(frames_display_label(&v, buf, sizeof buf),
			    "Loader.load_users (app/db.py:92)");
	/* C code of a library an extension called made the allocation: its
	 * frame, with the Python line that called it beside it. */
	f[2].module = sq;
	f[2].exe = 0;
	f[2].offset = 0xa7504;
	assert_int_equal(v.display = frames_display(NULL, &v), 2);
	assert_string_equal(frames_display_label(&v, buf, sizeof buf),
			    "[libsqlite3.so.0+0xa7504] <- Loader.load_users (app/db.py:92)");
}

static void test_library_that_called_the_program(void **state)
{
	(void)state;
	static const char *const exe = "/usr/bin/memcached";
	static const char *const ev = "/lib/x86_64-linux-gnu/libevent-2.1.so.7";
	static const char *const libc = "/lib/x86_64-linux-gnu/libc.so.6";
	static const struct { const char *fn, *mod; } mc[] = {
		{ NULL, exe }, { NULL, exe }, { NULL, exe }, { NULL, ev },
		{ "event_base_loop", ev }, { NULL, exe },
		{ "start_thread", libc }, { "__clone3", libc },
	};
	struct sym_frame f[8];
	memset(f, 0, sizeof f);
	for (uint32_t i = 0; i < 8; i++) {
		f[i].function = mc[i].fn;
		f[i].module = mc[i].mod;
		f[i].exe = mc[i].mod == exe;
		f[i].offset = 0x11d1d + i;
	}
	struct stack_view v = { .f = f, .n = 8 };
	assert_int_equal(frames_display(NULL, &v), 0);
	/* Behind a wrapper the program names, the same. */
	struct frames_rules r = { 0 };
	char err[256];
	assert_int_equal(frames_rules_add(&r, "memcached\\+0x11d1d\\]", err,
					  sizeof err), 0);
	assert_int_equal(frames_display(&r, &v), 1);
	frames_rules_free(&r);
	/* A named library frame inner to the program is the program's call. */
	f[0].function = "evbuffer_expand";
	f[0].module = ev;
	f[0].exe = 0;
	assert_int_equal(frames_display(NULL, &v), 0);
	/* The program's named wrappers only: the library that called them is
	 * passed over for the program's next frame. */
	f[0] = (struct sym_frame){ .function = "zmalloc", .module = exe, .exe = 1 };
	f[1] = (struct sym_frame){ .function = "zcalloc", .module = exe, .exe = 1 };
	f[2] = (struct sym_frame){ .function = "event_base_loop", .module = ev };
	f[3] = (struct sym_frame){ .function = "worker", .module = exe, .exe = 1 };
	v.n = 4;
	assert_int_equal(frames_display(NULL, &v), 3);
	/* Without an executable frame inside it, a library's own named
	 * function is its callers' allocation site, as before. */
	f[0] = (struct sym_frame){ .module = ev };
	f[1] = (struct sym_frame){ .function = "event_base_new", .module = ev };
	f[2] = (struct sym_frame){ .module = exe, .exe = 1 };
	v.n = 3;
	assert_int_equal(frames_display(NULL, &v), 1);
}

/* Does the regex rx match all of name, as pprof matches drop_frames? */
static int full_match(const char *rx, const char *name)
{
	size_t n = strlen(rx) + 8;
	char *a = malloc(n);
	assert_non_null(a);
	snprintf(a, n, "^(%s)$", rx);
	regex_t re;
	assert_int_equal(regcomp(&re, a, REG_EXTENDED | REG_NOSUB), 0);
	int m = regexec(&re, name, 0, NULL, 0) == 0;
	regfree(&re);
	free(a);
	return m;
}

/* pprof's drop_frames and keep_frames: the allocator tier of the rules,
 * as names pprof matches (parameter lists cut off). */
static void test_pprof_drop_frames(void **state)
{
	(void)state;
	char *drop = frames_drop_regex(NULL), *keep = frames_keep_regex();
	assert_non_null(drop);
	assert_non_null(keep);
	static const char *const yes[] = {
		"malloc", "operator new", "operator new[]", "zmalloc_usable",
		"ztrymalloc_usable_internal", "_sdsnewlen", "sdsMakeRoomFor",
		"PyObject_Malloc", "palloc", "AllocSetAlloc", "g_malloc0",
		"__rust_alloc", "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
		"__libc_malloc", "_IO_file_doallocate",
	};
	static const char *const no[] = {
		"createStringObject", "main", "std::vector<long>::push_back",
		"mallocator", "sdslen", "[memcached+0x11d1d]", "grow_vector",
	};
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		if (!full_match(drop, yes[i]))
			fail_msg("not dropped: %s", yes[i]);
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		if (full_match(drop, no[i]))
			fail_msg("dropped: %s", no[i]);
	/* libc's start-up matches "__libc_": kept, or pprof would drop every
	 * stack down to _start. */
	assert_true(full_match(drop, "__libc_start_main"));
	assert_true(full_match(keep, "__libc_start_main"));
	assert_true(full_match(keep, "_start"));
	assert_false(full_match(keep, "malloc"));
	free(drop);
	free(keep);

	/* The user's rules, unanchored; GNU-only syntax left out. */
	struct frames_rules r = { 0 };
	char err[256];
	assert_int_equal(frames_rules_add(&r, "^grow_", err, sizeof err), 0);
	assert_int_equal(frames_rules_add(&r, "\\<pool_get\\>", err, sizeof err), 0);
	assert_int_equal(frames_rules_add(&r, "arena_(new|grow)[0-9]*", err,
					  sizeof err), 0);
	static const char *const gnu[] = {
		"(a)\\1", "x{1,2000}", "y**", "z+?",
	};
	for (size_t i = 0; i < sizeof gnu / sizeof *gnu; i++)
		if (frames_rules_add(&r, gnu[i], err, sizeof err) != 0)
			fail_msg("%s: %s", gnu[i], err);
	drop = frames_drop_regex(&r);
	assert_non_null(drop);
	assert_non_null(strstr(drop, "|.*(?:^grow_).*"));
	assert_non_null(strstr(drop, "|.*(?:arena_(new|grow)[0-9]*).*"));
	assert_null(strstr(drop, "pool_get"));
	for (size_t i = 0; i < sizeof gnu / sizeof *gnu; i++)
		if (strstr(drop, gnu[i]))
			fail_msg("not RE2, in drop_frames: %s", gnu[i]);
	free(drop);
	r.no_skip = 1;
	assert_null(frames_drop_regex(&r));
	frames_rules_free(&r);
}

/* C++ standard library code named without its namespace: an inlined
 * instance named from DW_AT_name ("operator+<char, ...>", "push_back") is
 * known by its source file, or as an operator template of std types. */
static void test_cxx_inlined_without_namespace(void **state)
{
	(void)state;
	struct sym_frame f = {
		.function = "operator+<char, std::char_traits<char>, std::allocator<char> >",
		.inlined = 1,
	};
	assert_true(frames_is_plumbing(NULL, &f));
	f.function = "push_back";
	f.file = "/usr/include/c++/12/bits/stl_vector.h";
	assert_true(frames_is_plumbing(NULL, &f));
	f.file = "/usr/lib/llvm-14/bin/../include/c++/v1/string";
	assert_true(frames_is_plumbing(NULL, &f));
	f.file = "/src/app/vec.h";
	assert_false(frames_is_plumbing(NULL, &f));
	f.function = "operator+(Money const&, Money const&)";
	f.file = NULL;
	assert_false(frames_is_plumbing(NULL, &f));
	f.function = "operator<< <Point>(std::ostream&, Point const&)";
	assert_false(frames_is_plumbing(NULL, &f));
	/* The stack from a real program: the inlined operator+ was the
	 * display frame; now its caller is. */
	static const char *const st[] = {
		"operator new(unsigned long)",
		"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_mutate(unsigned long, unsigned long, char const*, unsigned long)",
		"operator+<char, std::char_traits<char>, std::allocator<char> >",
		"build(int)", "main",
	};
	assert_int_equal(display_of(st, 5, NULL), 3);
}

static char *write_tmp(const char *text)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/ym-skip-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* The skip files: one regex a line, '#' comments, a bad line reported as
 * path:line; ~/.config/ymtop/skip under XDG_CONFIG_HOME or HOME. */
static void test_skip_files(void **state)
{
	(void)state;
	struct frames_rules r = { 0 };
	char err[512] = "";
	char *p = write_tmp("# my wrappers\n\n   \n  ^my_alloc$  \n"
			    "\t# indented comment\n\\[app\\+0x20\\]\r\nArena<.*>::alloc");
	assert_int_equal(frames_rules_load(&r, p, err, sizeof err), 3);
	assert_true(plumbing(&r, "my_alloc"));
	assert_false(plumbing(&r, "not_my_alloc"));
	assert_true(plumbing(&r, "Arena<int>::alloc(unsigned long)"));
	struct sym_frame u = { .module = "/bin/app", .offset = 0x20 };
	assert_true(frames_is_plumbing(&r, &u));
	r.no_skip = 1;
	assert_false(plumbing(&r, "my_alloc"));
	frames_rules_free(&r);
	r.no_skip = 0;
	unlink(p);

	p = write_tmp("^ok$\n# c\n^bad(\n^never$\n");
	assert_int_equal(frames_rules_load(&r, p, err, sizeof err), -1);
	char want[128];
	snprintf(want, sizeof want, "%s:3: bad pattern '^bad(':", p);
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("message: %s", err);
	assert_null(strchr(err, '\n'));
	frames_rules_free(&r);
	unlink(p);

	/* Missing file: nothing, no error; a directory: an error. */
	assert_int_equal(frames_rules_load(&r, "/nonexistent/ymtop/skip", err,
					   sizeof err), 0);
	assert_int_equal(frames_rules_load(&r, "/tmp", err, sizeof err), -1);

	/* The user's file under XDG_CONFIG_HOME, else ~/.config. */
	char dir[] = "/tmp/ym-xdg-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sub[64], file[512];
	snprintf(sub, sizeof sub, "%s/ymtop", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(file, sizeof file, "%s/skip", sub);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs("^xdg_wrapper$\n", f);
	fclose(f);
	setenv("XDG_CONFIG_HOME", dir, 1);
	assert_int_equal(frames_rules_load_config(&r, err, sizeof err), 0);
	assert_true(plumbing(&r, "xdg_wrapper"));
	frames_rules_free(&r);
	char home[96], cfg[128], hfile[160];
	snprintf(home, sizeof home, "%s/home", dir);
	snprintf(cfg, sizeof cfg, "%s/.config", home);
	assert_int_equal(mkdir(home, 0755), 0);
	assert_int_equal(mkdir(cfg, 0755), 0);
	assert_int_equal(rename(sub, (snprintf(hfile, sizeof hfile, "%s/ymtop", cfg), hfile)), 0);
	unsetenv("XDG_CONFIG_HOME");
	setenv("HOME", home, 1);
	assert_int_equal(frames_rules_load_config(&r, err, sizeof err), 0);
	assert_true(plumbing(&r, "xdg_wrapper"));
	frames_rules_free(&r);
	snprintf(file, sizeof file, "%s/skip", hfile);
	unlink(file);
	rmdir(hfile);
	rmdir(cfg);
	rmdir(home);
	rmdir(dir);
}

static void test_async_noise(void **state)
{
	(void)state;
	struct sym_frame f[8];
	/* rsyms.rs, v0: the poll wrapper between the async body and block_on. */
	static const char *const v0[] = {
		"alloc::alloc::alloc",
		"rsyms::tasks::fill::{closure#0}",
		"<rsyms::tasks::Traced<rsyms::tasks::fill::{closure#0}> as core::future::future::Future>::poll",
		"rsyms::tasks::block_on::<rsyms::tasks::Traced<rsyms::tasks::fill::{closure#0}>>",
		"rsyms::main",
	};
	struct stack_view v = view(v0, 5, f, NULL);
	assert_int_equal(v.display, 1);
	assert_false(frames_is_noise(NULL, &v, 1));
	assert_true(frames_is_noise(NULL, &v, 2));
	assert_false(frames_is_noise(NULL, &v, 3));
	char buf[256];
	assert_string_equal(frames_fold_name(&f[1], buf, sizeof buf),
			    "rsyms::tasks::fill");
	assert_string_equal(frames_fold_name(&f[3], buf, sizeof buf),
			    "rsyms::tasks::block_on::<rsyms::tasks::Traced<rsyms::tasks::fill>>");

	/* Closure layers of one function fold into it, through wrappers;
	 * tokio's ...::poll::{{closure}} is noise too (ying drops ::poll::). */
	static const char *const layers[] = {
		"alloc::vec::Vec<T,A>::push",
		"app::serve::{{closure}}::{{closure}}",
		"app::serve::{{closure}}",
		"<core::pin::Pin<P> as core::future::future::Future>::poll",
		"<core::future::from_generator::GenFuture<T> as core::future::future::Future>::poll",
		"app::serve",
		"tokio::runtime::task::core::Core<T,S>::poll::{{closure}}",
		"app::main",
	};
	v = view(layers, 8, f, NULL);
	static const int noise[] = { 0, 1, 1, 1, 1, 0, 1, 0 };
	for (uint32_t i = 0; i < 8; i++)
		if (frames_is_noise(NULL, &v, i) != noise[i])
			fail_msg("frame %u (%s): noise %d", i, layers[i], !noise[i]);
	assert_int_equal(v.display, 5);
	/* What a folded writer prints, outermost first. */
	char out[512] = "";
	for (uint32_t k = v.n; k-- > v.display;) {
		if (frames_is_noise(NULL, &v, k))
			continue;
		if (out[0])
			strcat(out, ";");
		strcat(out, frames_fold_name(&v.f[k], buf, sizeof buf));
	}
	assert_string_equal(out, "app::main;app::serve");

	/* --no-skip shows everything. */
	struct frames_rules r = { .no_skip = 1 };
	assert_false(frames_is_noise(&r, &v, 3));
	assert_int_equal(frames_display(&r, &v), 0);
	assert_false(frames_is_noise(NULL, &v, 99));
	assert_false(frames_is_noise(NULL, NULL, 0));
	/* v0 and newer coroutine spellings. */
	struct sym_frame g = { .function = "app::run::{async_fn#0}::{closure#1}" };
	assert_string_equal(frames_fold_name(&g, buf, sizeof buf), "app::run");
	g.function = "a::{{closure}";  /* truncated: left alone */
	assert_string_equal(frames_fold_name(&g, buf, sizeof buf), "a::{{closure}");
}

static void test_labels_and_fallbacks(void **state)
{
	(void)state;
	char buf[256];
	struct sym_frame f = { .function = "grow_vector()", .file = "/src/app/x.cc",
			       .line = 42 };
	assert_string_equal(frames_label(&f, buf, sizeof buf), "grow_vector() (x.cc:42)");
	struct sym_frame u = { .module = "/usr/lib/libfoo.so", .offset = 0x1234 };
	assert_string_equal(frames_label(&u, buf, sizeof buf), "[libfoo.so+0x1234]");
	assert_string_equal(frames_fold_name(&u, buf, sizeof buf), "[libfoo.so+0x1234]");
	assert_string_equal(frames_fold_name(&u, NULL, 0), "?");
	/* A view without a symbolizer: unknown frames, display 0. */
	uint64_t addrs[3] = { 0x1000, 0x2000, 0x3000 };
	struct stack_view v;
	assert_int_equal(frames_view(NULL, NULL, addrs, 3, &v), 0);
	assert_int_equal(v.n, 3);
	assert_int_equal(v.display, 0);
	frames_view_free(&v);
	assert_null(v.f);
	/* Hostile names: very long, unbalanced, nested without end. */
	char *big = malloc(20000);
	assert_non_null(big);
	memset(big, '<', 19999);
	big[19999] = '\0';
	assert_false(plumbing(NULL, big));
	memset(big, ')', 19999);
	assert_false(plumbing(NULL, big));
	for (int i = 0; i < 19990; i += 10)
		memcpy(big + i, "<alloc::x ", 10);
	assert_int_equal(plumbing(NULL, big), 0);
	struct sym_frame h = { .function = big };
	struct stack_view hv = { .f = &h, .n = 1 };
	assert_false(frames_is_noise(NULL, &hv, 0));
	free(big);
}

/* Long C++ template names simplified for the screen. */
static void test_short_names(void **state)
{
	(void)state;
	char buf[512];
	static const struct { const char *in; int depth; const char *out; } c[] = {
		{ "std::vector<std::pair<int, long> >::push_back(std::pair<int, long> const&)", 1,
		  "std::vector<std::pair<…> >::push_back(std::pair<int, long> const&)" },
		{ "std::vector<std::pair<int, long> >::push_back", 0,
		  "std::vector<…>::push_back" },
		{ "grow_vector()", 1, "grow_vector()" },
		{ "std::vector<long, std::allocator<long> >::_M_default_append(unsigned long)", 1,
		  "std::vector<long, std::allocator<…> >::_M_default_append(unsigned long)" },
		/* operators are not brackets */
		{ "std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)", 1,
		  "std::basic_ostream<char, std::char_traits<…> >& std::operator<< <std::char_traits<…> >(std::basic_ostream<char, std::char_traits<…> >&, char const*)" },
		{ "bool operator< <Key<int> >(Key<int> const&)", 1,
		  "bool operator< <Key<…> >(Key<int> const&)" },
		{ "Foo::operator->() const", 0, "Foo::operator->() const" },
		{ "operator+<char, std::char_traits<char>, std::allocator<char> >", 1,
		  "operator+<char, std::char_traits<…>, std::allocator<…> >" },
		/* Rust: a qualified path keeps its brackets, -> is no bracket */
		{ "<alloc::vec::Vec<alloc::vec::Vec<u8>> as core::clone::Clone>::clone", 1,
		  "<alloc::vec::Vec<alloc::vec::Vec<…>> as core::clone::Clone>::clone" },
		{ "<fn() -> u32 as core::ops::function::FnOnce<()>>::call_once", 0,
		  "<fn() -> u32 as core::ops::function::FnOnce<…>>::call_once" },
		{ "alloc::vec::from_elem::<alloc::vec::Vec<u8>>", 1,
		  "alloc::vec::from_elem::<alloc::vec::Vec<…>>" },
		/* unbalanced: no overrun */
		{ "a<b<c<d", 1, "a<b<…>" },
		{ ">>>a<", 0, ">>>a<…>" },
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
		frames_short_name(c[i].in, c[i].depth, "…", buf, sizeof buf);
		if (strcmp(buf, c[i].out))
			fail_msg("%s\n -> %s\n want %s", c[i].in, buf, c[i].out);
	}
	/* A big depth keeps the name whole; a tiny buffer truncates. */
	const char *n = c[0].in;
	assert_string_equal(frames_short_name(n, 99, "...", buf, sizeof buf), n);
	char small[8];
	assert_string_equal(frames_short_name(n, 1, "...", small, sizeof small), "std::ve");
	assert_string_equal(frames_short_name(n, 1, "...", NULL, 0), n);
	/* The real _M_realloc_insert of a vector of pairs (tests/progs-like
	 * g++ 12 output): 1064 bytes, 221 shortened. */
	static const char *const big =
		"void std::vector<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<long, std::allocator<long> > >, std::allocator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<long, std::allocator<long> > > > >::_M_realloc_insert<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<long, std::allocator<long> > > >(__gnu_cxx::__normal_iterator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<long, std::allocator<long> > >*, std::vector<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<long, std::allocator<long> > >, std::allocator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<long, std::allocator<long> > > > > >, std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<long, std::allocator<long> > >&&)";
	frames_short_name(big, FRAMES_SHORT_DEPTH, "...", buf, sizeof buf);
	print_message("%zu -> %zu: %s\n", strlen(big), strlen(buf), buf);
	assert_string_equal(buf, "void std::vector<std::pair<...>, std::allocator<...> >::_M_realloc_insert<std::pair<...> >(__gnu_cxx::__normal_iterator<std::pair<...>*, std::vector<...> >, std::pair<std::__cxx11::basic_string<...>, std::vector<...> >&&)");
}

#include "clock.h"

/* The display rule runs on every stack of every report and screen: 4096
 * stacks of 30 frames with long C++ and Rust names (about 0.1 s here,
 * with every frame also checked for noise; the time is printed). */
static void test_display_speed(void **state)
{
	(void)state;
	static const char *const names[] = {
		"operator new(unsigned long)",
		"void std::vector<long, std::allocator<long> >::_M_realloc_insert<long const&>(__gnu_cxx::__normal_iterator<long*, std::vector<long, std::allocator<long> > >, long const&)",
		"<alloc::raw_vec::RawVec<alloc::boxed::Box<[u8; 16384]>>>::grow_one",
		"rsyms::tasks::fill::{closure#0}",
		"<rsyms::tasks::Traced<rsyms::tasks::fill::{closure#0}> as core::future::future::Future>::poll",
	};
	struct sym_frame f[30];
	const char *list[30];
	for (int i = 0; i < 30; i++)
		list[i] = names[i % 5 < 3 && i > 2 ? 4 : i % 5];
	struct stack_view v = view(list, 30, f, NULL);
	double t0 = now_s();
	uint64_t sum = 0;
	for (int k = 0; k < 4096; k++) {
		sum += frames_display(NULL, &v);
		for (uint32_t i = 0; i < v.n; i++)
			sum += (uint64_t)frames_is_noise(NULL, &v, i);
	}
	double took = now_s() - t0;
	print_message("4096 stacks of 30 frames: %.3f s (%llu)\n", took,
		      (unsigned long long)sum);
	/* Printed, not asserted: speed goals are benchmarks (make bench). */
	assert_true(sum > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cxx_plumbing),
		cmocka_unit_test(test_rust_plumbing),
		cmocka_unit_test(test_display_frame),
		cmocka_unit_test(test_wrapper_families),
		cmocka_unit_test(test_stripped_binaries),
		cmocka_unit_test(test_library_that_called_the_program),
		cmocka_unit_test(test_python_display_frame),
		cmocka_unit_test(test_pprof_drop_frames),
		cmocka_unit_test(test_cxx_inlined_without_namespace),
		cmocka_unit_test(test_skip_files),
		cmocka_unit_test(test_async_noise),
		cmocka_unit_test(test_labels_and_fallbacks),
		cmocka_unit_test(test_short_names),
		cmocka_unit_test(test_display_speed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
