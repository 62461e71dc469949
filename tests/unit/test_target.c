/*
 * Code below main returns its failures (tui/util/err.h): target_attach,
 * session_open and fleet_add give the exit status and the one line that
 * ymtop(1) prints, and the test process goes on (it would have exited).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fleet.h"
#include "session.h"
#include "target.h"

/* A pid no process has now (and no kept segment names). */
static pid_t no_such_pid(void)
{
	for (pid_t p = 4194303; p > 1000; p--)
		if (kill(p, 0) != 0 && errno == ESRCH)
			return p;
	fail_msg("every pid is taken");
	return 0;
}

static void attach_to_no_process_returns_the_line(void **state)
{
	(void)state;
	struct shm_reader r;
	struct ym_err e;
	char want[64];
	pid_t pid = no_such_pid();
	memset(&e, 0, sizeof e);
	assert_int_equal(target_attach(pid, &r, &e), -1);
	assert_int_equal(e.code, 1);
	snprintf(want, sizeof want, "no process with pid %ld", (long)pid);
	assert_string_equal(e.msg, want);
}

static void attach_to_ourselves_returns_the_line(void **state)
{
	(void)state;
	struct shm_reader r;
	struct ym_err e;
	char want[128];
	memset(&e, 0, sizeof e);
	assert_int_equal(target_attach(getpid(), &r, &e), -1);
	assert_int_equal(e.code, 1);
	snprintf(want, sizeof want, "pid %ld is this ymtop itself: ymtop watches "
		 "the heap of another process", (long)getpid());
	assert_string_equal(e.msg, want);
}

static void session_and_fleet_pass_the_failure_up(void **state)
{
	(void)state;
	struct options o;
	struct session s;
	struct fleet f;
	struct ym_err e;
	char want[64];
	pid_t pid = no_such_pid();
	memset(&o, 0, sizeof o);
	memset(&e, 0, sizeof e);
	snprintf(want, sizeof want, "no process with pid %ld", (long)pid);
	assert_int_equal(session_open(&s, &o, pid, &e), -1);
	assert_int_equal(e.code, 1);
	assert_string_equal(e.msg, want);
	memset(&e, 0, sizeof e);
	fleet_init(&f, 0);
	assert_int_equal(fleet_add(&f, &o, pid, &e), -1);
	assert_int_equal(f.n, 0);
	assert_int_equal(e.code, 1);
	assert_string_equal(e.msg, want);
	fleet_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(attach_to_no_process_returns_the_line),
		cmocka_unit_test(attach_to_ourselves_returns_the_line),
		cmocka_unit_test(session_and_fleet_pass_the_failure_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
