/* The ptrace injector on its own, without the agent: load an ordinary
 * library into a child (cat on pipes) and check that the child noticed
 * nothing; the refusals that need no special target. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/inject.h"

#define LIBZ "/lib/x86_64-linux-gnu/libz.so.1"

/* The agent of this build (the injector calls its resume function). */
static const char *agent_path(void)
{
	static char path[4096];
	const char *b = getenv("YM_BUILD");
	snprintf(path, sizeof path, "%s/%s/libymagent.so",
		 getenv("PWD") ? getenv("PWD") : ".", b && *b ? b : "build");
	return path;
}

struct child {
	pid_t pid;
	int in, out;   /* its stdin (we write), its stdout (we read) */
};

static void spawn_cat(struct child *c)
{
	int a[2], b[2];
	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		dup2(a[0], 0);
		dup2(b[1], 1);
		close(a[0]); close(a[1]); close(b[0]); close(b[1]);
		execl("/bin/cat", "cat", (char *)NULL);
		_exit(127);
	}
	close(a[0]);
	close(b[1]);
	c->in = a[1];
	c->out = b[0];
	/* Let it reach its read(). */
	assert_int_equal(write(c->in, "x\n", 2), 2);
	char buf[2];
	assert_int_equal(read(c->out, buf, 2), 2);
}

static int maps_has(pid_t pid, const char *what)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	FILE *f = fopen(path, "r");
	int found = 0;
	while (f && fgets(line, sizeof line, f))
		found |= strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* The child echoes a line and exits 0 at end of input. */
static void finish(struct child *c)
{
	char buf[16] = { 0 };
	assert_int_equal(write(c->in, "hello\n", 6), 6);
	assert_int_equal(read(c->out, buf, sizeof buf - 1), 6);
	assert_string_equal(buf, "hello\n");
	close(c->in);
	int st;
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(c->out);
}

static void loads_a_library_into_a_blocked_reader(void **state)
{
	(void)state;
	const char *agent = agent_path();
	if (access(agent, R_OK) != 0)
		skip();
	struct child c;
	spawn_cat(&c);
	assert_false(maps_has(c.pid, "libymagent.so"));
	struct inject_result res;
	char err[512] = "";
	int rc = inject_agent(c.pid, agent, 0, &res, err, sizeof err);
	if (rc != 0)
		print_error("inject: %s\n", err);
	assert_int_equal(rc, 0);
	assert_int_equal(res.tid, c.pid);
	assert_true(res.pause_ms >= 0);
	assert_true(maps_has(c.pid, "libymagent.so"));
	finish(&c);
}

/* A library that is not the agent loads, but has no resume function: an
 * error that says so, and the process carries on. */
static void library_without_resume_function_is_refused(void **state)
{
	(void)state;
	if (access(LIBZ, R_OK) != 0)
		skip();
	struct child c;
	spawn_cat(&c);
	struct inject_result res;
	char err[512] = "";
	assert_int_equal(inject_agent(c.pid, LIBZ, 0, &res, err, sizeof err), -1);
	assert_non_null(strstr(err, "ym_inject_resume"));
	finish(&c);
}

static void dlopen_failure_is_reported_and_harmless(void **state)
{
	(void)state;
	struct child c;
	spawn_cat(&c);
	struct inject_result res;
	char err[512] = "";
	assert_int_equal(inject_agent(c.pid, "/nonexistent/libnothing.so", 0, &res, err,
				      sizeof err), -1);
	assert_non_null(strstr(err, "failed in the target"));
	assert_non_null(strstr(err, "libnothing.so"));
	finish(&c);
}

static void refuses_a_missing_process(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	struct inject_result res;
	char err[512] = "";
	assert_int_equal(inject_agent(pid, LIBZ, 0, &res, err, sizeof err), -1);
	assert_non_null(strstr(err, "no process"));
}

static void refuses_a_stopped_process(void **state)
{
	(void)state;
	struct child c;
	spawn_cat(&c);
	kill(c.pid, SIGSTOP);
	int st;
	assert_int_equal(waitpid(c.pid, &st, WUNTRACED), c.pid);
	struct inject_result res;
	char err[512] = "";
	assert_int_equal(inject_agent(c.pid, LIBZ, 0, &res, err, sizeof err), -1);
	assert_non_null(strstr(err, "stopped"));
	assert_false(maps_has(c.pid, "libz.so"));
	kill(c.pid, SIGCONT);
	finish(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(loads_a_library_into_a_blocked_reader),
		cmocka_unit_test(library_without_resume_function_is_refused),
		cmocka_unit_test(dlopen_failure_is_reported_and_harmless),
		cmocka_unit_test(refuses_a_missing_process),
		cmocka_unit_test(refuses_a_stopped_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
