/*
 * Unit tests for tui/frames.c: which frames are allocator plumbing, which
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frames.h"

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
		"aligned_alloc", "__libc_malloc", "strdup",
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

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The display rule runs on every stack of every report and screen: 4096
 * stacks of 30 frames with long C++ and Rust names in well under a second
 * (about 0.1 s here, with every frame also checked for noise). */
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
	if (!getenv("YM_TEST_NO_TIMING"))
		assert_true(took < 2.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cxx_plumbing),
		cmocka_unit_test(test_rust_plumbing),
		cmocka_unit_test(test_display_frame),
		cmocka_unit_test(test_async_noise),
		cmocka_unit_test(test_labels_and_fallbacks),
		cmocka_unit_test(test_display_speed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
