/* Who holds the dynamic loader's lock (injector/ptrace/ldlock.c), read
 * in this very process as ymtop reads a target: free, it says 0 (the
 * lock found in this glibc's _rtld_global by its shape: -1 would leave
 * detach to wait blindly); with a thread inside dlopen, held in a
 * library's constructor (build/progs/libblockctor.so), that thread's
 * id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ptrace/ldlock.h"

static void test_free_lock_is_free(void **state)
{
	(void)state;
	assert_int_equal(inject_loader_lock_owner(getpid()), 0);
}

static pid_t loader_tid;

static void *load(void *arg)
{
	__atomic_store_n(&loader_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	return dlopen((const char *)arg, RTLD_NOW);
}

static void test_a_thread_in_a_constructor_holds_it(void **state)
{
	(void)state;
	char lib[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", lib, sizeof lib - 64);
	assert_true(n > 0);
	lib[n] = '\0';
	*strrchr(lib, '/') = '\0';
	strcat(lib, "/../progs/libblockctor.so");
	if (access(lib, R_OK) != 0) {
		skip();   /* make check builds it before the unit tests */
		return;
	}
	int wake[2];
	assert_int_equal(pipe(wake), 0);
	char fd[16];
	snprintf(fd, sizeof fd, "%d", wake[0]);
	setenv("YM_TEST_BLOCK_FD", fd, 1);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, load, lib), 0);
	/* Until the thread is in the constructor: no bound but the test's. */
	pid_t owner = 0;
	while ((owner = inject_loader_lock_owner(getpid())) == 0) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	assert_int_equal(owner, __atomic_load_n(&loader_tid, __ATOMIC_ACQUIRE));
	assert_int_equal(write(wake[1], "x", 1), 1);
	void *h = NULL;
	pthread_join(t, &h);
	assert_non_null(h);
	assert_int_equal(inject_loader_lock_owner(getpid()), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_lock_is_free),
		cmocka_unit_test(test_a_thread_in_a_constructor_holds_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
