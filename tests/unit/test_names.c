/*
 * Unit tests for frames_fit_label (tui/sym/names.c): a list row's label
 * fitted to the screen keeps the function's own name in view, eliding
 * template arguments, parameters and scopes in the middle, in that order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "sym/names.h"

/* A g++ 12 name as sym.c demangles it, with its location. */
static const char *const hashtable =
	"std::__detail::_Hashtable_alloc<std::allocator<std::__detail::_Hash_node<"
	"std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, "
	"std::allocator<char> > const, int>, true> > >::_M_allocate_node<"
	"std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, "
	"std::allocator<char> > const, int> const&>(std::pair<std::__cxx11::"
	"basic_string<char, std::char_traits<char>, std::allocator<char> > const, "
	"int> const&) (hashtable_policy.h:1987)";

static int cols(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static void test_fits_as_it_is(void **state)
{
	(void)state;
	char buf[256];
	assert_string_equal(frames_fit_label("grow_vector() (x.cc:42)", 40, "…", buf,
					     sizeof buf), "grow_vector() (x.cc:42)");
	assert_string_equal(frames_fit_label("[libfoo.so+0x1234]", 18, "…", buf,
					     sizeof buf), "[libfoo.so+0x1234]");
}

static void test_steps_keep_the_method_and_location(void **state)
{
	(void)state;
	char buf[2048];
	static const struct { int width; const char *out; } c[] = {
		/* template arguments go first */
		{ 110, "std::__detail::_Hashtable_alloc<…>::_M_allocate_node<…>(std::pair<…> "
		       "const&) (hashtable_policy.h:1987)" },
		/* then the parameters */
		{ 90, "std::__detail::_Hashtable_alloc<…>::_M_allocate_node<…>(…) "
		      "(hashtable_policy.h:1987)" },
		/* then the scopes in the middle */
		{ 80, "std::…::_Hashtable_alloc<…>::_M_allocate_node<…>(…) "
		      "(hashtable_policy.h:1987)" },
		{ 60, "…::_M_allocate_node<…>(…) (hashtable_policy.h:1987)" },
		/* the location last */
		{ 30, "…::_M_allocate_node<…>(…)" },
		{ 10, "…::_M_allo" },
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
		frames_fit_label(hashtable, c[i].width, "…", buf, sizeof buf);
		if (strcmp(buf, c[i].out))
			fail_msg("width %d:\n -> %s\n want %s", c[i].width, buf, c[i].out);
		assert_true(cols(buf) <= c[i].width);
	}
}

static void test_return_types_operators_and_odd_labels(void **state)
{
	(void)state;
	char buf[512];
	/* a function template's return type goes with the parameters */
	static const char *const mk = "std::vector<int, std::allocator<int> >* "
		"ns::inner::make_vector<int>(unsigned long, int const&) (mk.h:7)";
	assert_string_equal(frames_fit_label(mk, 41, "...", buf, sizeof buf),
			    "ns::inner::make_vector<...>(...) (mk.h:7)");
	assert_string_equal(frames_fit_label(mk, 40, "...", buf, sizeof buf),
			    "...::make_vector<...>(...) (mk.h:7)");
	/* an operator's brackets are no template list; () kept when empty */
	static const char *const op = "app::detail::Buffer<char>::operator<<(int) (b.h:3)";
	assert_string_equal(frames_fit_label(op, 46, "...", buf, sizeof buf),
			    "app::...::Buffer<...>::operator<<(...) (b.h:3)");
	assert_string_equal(frames_fit_label(op, 38, "...", buf, sizeof buf),
			    "...::operator<<(...) (b.h:3)");
	assert_string_equal(
		frames_fit_label("a::b::c::d::work() (w.cc:1)", 22, "...", buf,
				 sizeof buf),
		"...::work() (w.cc:1)");
	/* no location (a name that ends like one is not taken apart) */
	assert_string_equal(
		frames_fit_label("ns::deep::Thing<long>::f(std::pair<int, long>)", 20, "...",
				 buf, sizeof buf),
		"...::f(...)");
	/* a tiny buffer or width never overruns */
	char small[8];
	frames_fit_label(hashtable, 200, "…", small, sizeof small);
	assert_int_equal(strlen(small), 7);
	frames_fit_label(hashtable, 0, "…", buf, sizeof buf);
	assert_true(cols(buf) <= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits_as_it_is),
		cmocka_unit_test(test_steps_keep_the_method_and_location),
		cmocka_unit_test(test_return_types_operators_and_odd_labels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
