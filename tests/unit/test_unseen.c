/*
 * Unit tests for tui/unseen: allocators the agent cannot see, by their
 * entry points' names and by memory that grows while the call count stays
 * flat.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "unseen.h"

#define MiB (1024.0 * 1024.0)

static void entry_points_name_their_allocator(void **state)
{
	(void)state;
	assert_string_equal(unseen_symbol_allocator("je_malloc"), "jemalloc");
	assert_string_equal(unseen_symbol_allocator("_rjem_malloc"), "jemalloc");
	assert_string_equal(unseen_symbol_allocator("mallocx"), "jemalloc");
	assert_string_equal(unseen_symbol_allocator("mi_malloc"), "mimalloc");
	assert_string_equal(unseen_symbol_allocator("tc_malloc"), "tcmalloc");
	/* malloc itself counts in the executable only (unseen.c). */
	assert_string_equal(unseen_symbol_allocator("malloc"), "");
	assert_string_equal(unseen_symbol_allocator("je_malloc_usable"), "");
}

/* Growth counts from the last refresh where the call count moved, and
 * only while what nothing explains is itself above UNSEEN_GROWTH. */
static void flat_calls_and_growing_memory(void **state)
{
	(void)state;
	struct unseen u;
	char line[320];
	memset(&u, 0, sizeof u);
	unseen_watch(&u, 100, 1 * MiB, 1);
	assert_string_equal(unseen_line(&u, line, sizeof line), "");
	unseen_watch(&u, 100, 40 * MiB, 1);          /* flat, +39 MiB */
	assert_string_equal(unseen_allocator(&u), "unknown");
	assert_non_null(strstr(unseen_line(&u, line, sizeof line),
			       "anonymous memory grew 39.0 MiB with no allocator call"));
	unseen_watch(&u, 101, 80 * MiB, 1);          /* a call: new base */
	assert_string_equal(unseen_line(&u, line, sizeof line), "");
	unseen_watch(&u, 101, 90 * MiB, 1);          /* +10 MiB: below */
	assert_string_equal(unseen_allocator(&u), "");
	unseen_watch(&u, 101, 200 * MiB, 0);         /* unknown: nothing */
	assert_string_equal(unseen_allocator(&u), "");
	/* Memory touched late that the heap already counts: what is left
	 * unexplained rises from below zero, never above the threshold. */
	memset(&u, 0, sizeof u);
	unseen_watch(&u, 5, -900 * MiB, 1);
	unseen_watch(&u, 5, -100 * MiB, 1);
	assert_string_equal(unseen_allocator(&u), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(entry_points_name_their_allocator),
		cmocka_unit_test(flat_calls_and_growing_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
