/* The agent's walk of the loader's list (injector/agent/loader.c): the
 * loader's write lock is found, reads as held inside dl_iterate_phdr and
 * free outside; a fork child whose copy of it is held walks the list
 * without it and sees what dl_iterate_phdr saw in the parent; a child
 * forked outside a walk uses dl_iterate_phdr.  The walk without the lock
 * is tested with and without _dl_find_object (compat.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/compat.h"
#include "agent/loader.h"

#define MAX_OBJ 64

struct obj {
	uintptr_t addr;
	const char *name;
	const ElfW(Phdr) *phdr;
	int phnum;
};

struct list {
	int n;
	struct obj o[MAX_OBJ];
};

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct list *l = arg;
	if (l->n < MAX_OBJ)
		l->o[l->n] = (struct obj){ info->dlpi_addr, info->dlpi_name,
					   info->dlpi_phdr, info->dlpi_phnum };
	l->n++;
	return 0;
}

/* Whether b has every object of a, the same way (the vDSO aside: the
 * lock-free lookup may not know it; nothing allocates from it). */
static int same(const struct list *a, const struct list *b)
{
	if (a->n > MAX_OBJ || b->n > MAX_OBJ || b->n > a->n)
		return 0;
	int missing = 0;
	for (int i = 0; i < a->n; i++) {
		int found = 0;
		for (int j = 0; j < b->n && !found; j++)
			found = a->o[i].addr == b->o[j].addr &&
				a->o[i].name == b->o[j].name &&
				a->o[i].phnum == b->o[j].phnum &&
				!memcmp(a->o[i].phdr, b->o[j].phdr,
					sizeof(ElfW(Phdr)) * (size_t)a->o[i].phnum);
		if (!found && !strstr(a->o[i].name ? a->o[i].name : "", "vdso"))
			missing++;
	}
	return missing == 0 && b->n >= a->n - 1;
}

static int held_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	*(int *)arg = loader_lock_held();
	return 1;
}

static int child_walks(const struct list *parent, int want_frozen);

/* Before any probe (the first test): a child cannot tell whether the
 * lock is held, walks without it, and says so. */
static void child_without_the_lock_found_walks_blind(void **state)
{
	(void)state;
	assert_false(loader_lock_found());
	struct list parent = { 0 };
	dl_iterate_phdr(collect, &parent);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		alarm(5);
		loader_fork_child();
		struct list mine = { 0 };
		loader_iterate(collect, &mine);
		_exit(!loader_blind() ? 3 : same(&parent, &mine) ? 0 : 4);
	}
	int st;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void *lookup(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

/* From here on, the walks without the lock find each object's headers
 * through _dl_find_object; before (the first test), as on a glibc
 * without it (compat.h). */
static void lock_is_found_held_inside_free_outside(void **state)
{
	(void)state;
	assert_false(agent_have_dl_find_object());
	agent_compat_init(lookup);
	assert_true(agent_have_dl_find_object());
	loader_probe();
	assert_true(loader_lock_found());
	assert_false(loader_lock_held());
	int inside = 0;
	dl_iterate_phdr(held_cb, &inside);
	assert_int_equal(inside, 1);
	assert_false(loader_lock_held());
}

static pid_t forked;

static int fork_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	forked = fork();
	return 1;
}

/* In the child: 0 when the walk saw the parent's objects; the walk must
 * end (alarm). */
static int child_walks(const struct list *parent, int want_frozen)
{
	alarm(5);
	loader_fork_child();
	if (loader_lock_held() != want_frozen || loader_blind())
		return 3;
	struct list mine = { 0 };
	loader_iterate(collect, &mine);
	return same(parent, &mine) ? 0 : 4;
}

static void wait_ok(pid_t p)
{
	int st;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));   /* not killed by its alarm */
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void child_of_a_fork_inside_a_walk_walks_without_the_lock(void **state)
{
	(void)state;
	loader_probe();
	struct list parent = { 0 };
	dl_iterate_phdr(collect, &parent);
	assert_true(parent.n >= 3 && parent.n <= MAX_OBJ);
	dl_iterate_phdr(fork_cb, NULL);
	assert_true(forked >= 0);
	if (forked == 0)
		_exit(child_walks(&parent, 1));
	wait_ok(forked);
}

static void child_of_a_plain_fork_walks_with_the_loader(void **state)
{
	(void)state;
	loader_probe();
	struct list parent = { 0 };
	dl_iterate_phdr(collect, &parent);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		int rc = child_walks(&parent, 0);
		/* And the lock still works there. */
		int inside = 0;
		dl_iterate_phdr(held_cb, &inside);
		_exit(rc ? rc : inside == 1 ? 0 : 5);
	}
	wait_ok(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(child_without_the_lock_found_walks_blind),
		cmocka_unit_test(lock_is_found_held_inside_free_outside),
		cmocka_unit_test(child_of_a_fork_inside_a_walk_walks_without_the_lock),
		cmocka_unit_test(child_of_a_plain_fork_walks_with_the_loader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
