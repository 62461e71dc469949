/*
 * Unit tests for the agent's trampoline page (injector/agent/tramp.c):
 * an entry calls its target, is re-pointed by name (the real function at
 * detach, a later agent's hook at the next attach), keeps its address,
 * and the page is the memfd named in /proc/self/maps that a later agent
 * finds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "agent/tramp.h"

static int first(int x) { return x + 1; }
static int second(int x) { return x * 10; }

static void entries_jump_and_are_repointed(void **state)
{
	(void)state;
	assert_int_equal(tramp_init(), 0);
	int fresh = 0;
	void *e = tramp_entry("malloc", (void *)first, &fresh);
	assert_non_null(e);
	assert_true(fresh);
	assert_true(tramp_holds(e));
	int (*f)(int);
	*(void **)&f = e;
	assert_int_equal(f(4), 5);
	/* Detach: the same address now reaches another function. */
	tramp_point("malloc", (void *)second);
	assert_int_equal(f(4), 40);
	/* A later agent: the entry is found by name, not made again. */
	void *again = tramp_entry("malloc", (void *)first, &fresh);
	assert_ptr_equal(again, e);
	assert_false(fresh);
	assert_int_equal(f(4), 5);
	/* Another name, another entry; the ret stub returns. */
	void *other = tramp_entry("free", (void *)second, &fresh);
	assert_true(fresh && other != e && tramp_holds(other));
	assert_false(tramp_holds(tramp_ret()));
	void (*ret)(void);
	*(void **)&ret = tramp_ret();
	ret();
	assert_true(tramp_complete());
}

static void page_is_named_in_the_maps(void **state)
{
	(void)state;
	assert_int_equal(tramp_init(), 0);
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[512];
	int code = 0, data = 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, "/memfd:ymagent-trampoline")) {
			code += strstr(line, " r-xp ") != NULL;
			data += strstr(line, " rw-p ") != NULL;
		}
	fclose(f);
	assert_int_equal(code, 1);
	assert_int_equal(data, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(entries_jump_and_are_repointed),
		cmocka_unit_test(page_is_named_in_the_maps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
