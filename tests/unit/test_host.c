/* The host list's keys without curses (tui/screen/host.c): every key goes
 * through the list's or the merged view's key table, and every key the key
 * lines name is a row of its table (a key handled outside the table fails
 * here). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "keynames.h"
#include "screen/host.h"
#include "screen/view.h"

static int list_known(int key)
{
	return host_key_known(0, key);
}

static int merged_known(int key)
{
	return host_key_known(1, key);
}

static void test_key_lines_name_table_keys(void **state)
{
	(void)state;
	/* Enter P U C M I R A W S < > i e Enter q */
	assert_int_equal(keynames_check(host_key_line, 0, list_known), 16);
	/* H Esc q */
	assert_int_equal(keynames_check(host_merged_key_line, 0, merged_known), 3);
}

static void test_list_keys(void **state)
{
	(void)state;
	struct host h;
	host_init(&h, 0);
	assert_int_equal(host_key(&h, 'q', 10), HOST_QUIT);
	assert_int_equal(host_key(&h, VK_ENTER, 10), HOST_NONE);   /* no row */
	assert_int_equal(host_key(&h, 'P', 10), HOST_REDRAW);
	assert_int_equal(h.sort, HOST_PID);
	assert_int_equal(host_key(&h, 'W', 10), HOST_REDRAW);
	assert_int_equal(h.sort, HOST_ALARMS);
	assert_int_equal(host_key(&h, '>', 10), HOST_REDRAW);
	assert_int_equal(h.sort, HOST_STATE);
	assert_int_equal(host_key(&h, '>', 10), HOST_REDRAW);
	assert_int_equal(h.sort, HOST_PID);
	assert_int_equal(host_key(&h, '<', 10), HOST_REDRAW);
	assert_int_equal(h.sort, HOST_STATE);
	assert_int_equal(host_key(&h, 'i', 10), HOST_REDRAW);
	assert_int_equal(h.asc, 1);
	assert_int_equal(host_key(&h, 'e', 10), HOST_REDRAW);
	assert_int_equal(h.merge, 1);
	assert_int_equal(host_key(&h, 'j', 10), HOST_REDRAW);
	assert_int_equal(host_key(&h, VK_PGDN, 10), HOST_REDRAW);
	assert_int_equal(h.sel, 0);
	/* Keys of the merged view only, and keys of no table. */
	assert_int_equal(host_key(&h, 'H', 10), HOST_NONE);
	assert_int_equal(host_key(&h, VK_ESC, 10), HOST_NONE);
	assert_int_equal(host_key(&h, 'x', 10), HOST_NONE);
	host_free(&h);
}

static void test_merged_keys(void **state)
{
	(void)state;
	struct host h;
	host_init(&h, 0);
	assert_int_equal(host_merged_key(&h, 'H'), HOST_BACK);
	assert_int_equal(host_merged_key(&h, VK_ESC), HOST_BACK);
	assert_int_equal(host_merged_key(&h, 'q'), HOST_QUIT);
	assert_int_equal(host_merged_key(&h, VK_ENTER), HOST_NONE);
	assert_int_equal(host_merged_key(&h, 'P'), HOST_NONE);
	assert_int_equal(host_merged_key(&h, VK_RESIZE), HOST_NONE);
	assert_false(host_key_known(1, 'e'));
	assert_true(host_key_known(0, 'e'));
	host_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_lines_name_table_keys),
		cmocka_unit_test(test_list_keys),
		cmocka_unit_test(test_merged_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
