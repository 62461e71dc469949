/* The agent's stand-ins for what glibc 2.17 lacks (injector/agent/
 * compat.c), each against the glibc function it replaces on this
 * machine: the object holding an address by a walk of the objects
 * (_dl_find_object), program headers found without _dl_find_object
 * (loader_phdrs_nodlfo, a frozen fork child's walk), the errno texts
 * (strerrordesc_np), the stat family, getdents64, shm_open and
 * shm_unlink, memfd_create, and _r_debug found through DT_DEBUG. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/compat.h"
#include "agent/loader.h"

/* compat.h renames these for the agent's files; the test calls glibc's. */
#undef stat
#undef fstat
#undef fstatat
#undef getdents64
#undef memfd_create
#undef shm_open
#undef shm_unlink

static int a_global = 1;

static void same_object(const void *pc)
{
	struct dl_find_object want;
	struct agent_object got;
	int w = _dl_find_object((void *)pc, &want);
	int g = agent_find_object_phdr(pc, &got);
	assert_int_equal(g, w);
	if (w != 0)
		return;
	assert_ptr_equal(got.map_start, want.dlfo_map_start);
	assert_ptr_equal(got.map_end, want.dlfo_map_end);
	assert_ptr_equal(got.eh_frame, want.dlfo_eh_frame);
	assert_ptr_equal(got.link_map, want.dlfo_link_map);
	/* And the dispatcher, which takes _dl_find_object here. */
	assert_int_equal(agent_find_object(pc, &got), 0);
	assert_ptr_equal(got.link_map, want.dlfo_link_map);
	assert_ptr_equal(got.eh_frame, want.dlfo_eh_frame);
}

static void *lookup(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

static void test_find_object_fallback(void **state)
{
	(void)state;
	assert_false(agent_have_dl_find_object());   /* not looked up yet */
	struct agent_object o;
	assert_int_equal(agent_find_object((const void *)lookup, &o), 0);
	agent_compat_init(lookup);
	assert_true(agent_have_dl_find_object());
	int on_stack = 0;
	void *lib = dlopen("libz.so.1", RTLD_NOW);
	const void *pcs[] = {
		(const void *)test_find_object_fallback,   /* the program */
		&a_global,                                 /* its data */
		"a literal",                               /* its rodata */
		(const void *)dlsym(RTLD_DEFAULT, "qsort"), /* libc */
		(const void *)agent_r_debug(),             /* ld.so's data */
		lib ? dlsym(lib, "crc32") : NULL,          /* a dlopen'ed library */
		&on_stack,                                 /* in no object */
		(const void *)(uintptr_t)16,               /* nor that */
	};
	for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++)
		if (pcs[i])
			same_object(pcs[i]);
	if (lib)
		dlclose(lib);
}

/* The loader's own (debuggers read DT_DEBUG too); this program's
 * _r_debug may be a copy made at its relocation (a copy relocation),
 * which holds the same list. */
static void test_r_debug_from_dt_debug(void **state)
{
	(void)state;
	struct r_debug *r = agent_r_debug();
	assert_non_null(r);
	assert_ptr_equal(r->r_map, _r_debug.r_map);
	assert_int_equal(r->r_ldbase, _r_debug.r_ldbase);
	Dl_info info;
	assert_true(dladdr(r, &info) != 0);
	assert_non_null(strstr(info.dli_fname, "ld-linux"));
}

static int phdrs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	int *checked = arg;
	for (struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		if (l->l_addr != info->dlpi_addr || l->l_name != info->dlpi_name)
			continue;
		const ElfW(Phdr) *ph = NULL;
		size_t n = 0;
		assert_int_equal(loader_phdrs_nodlfo(l, &ph, &n), 1);
		assert_ptr_equal(ph, info->dlpi_phdr);
		assert_int_equal(n, info->dlpi_phnum);
		(*checked)++;
	}
	return 0;
}

/* What a fork child that must not take the loader's lock walks, on a
 * glibc without _dl_find_object: each object's headers as
 * dl_iterate_phdr has them. */
static void test_phdrs_without_dl_find_object(void **state)
{
	(void)state;
	int checked = 0;
	dl_iterate_phdr(phdrs_cb, &checked);
	assert_true(checked >= 3);   /* the program, libc, ld.so at least */
	/* A link map whose l_ld is not its PT_DYNAMIC is skipped. */
	struct link_map fake = *_r_debug.r_map->l_next;
	fake.l_ld = (ElfW(Dyn) *)((char *)fake.l_ld + 8);
	const ElfW(Phdr) *ph;
	size_t n;
	assert_int_equal(loader_phdrs_nodlfo(&fake, &ph, &n), 0);
	fake.l_addr = 4096;   /* nothing mapped there */
	assert_int_equal(loader_phdrs_nodlfo(&fake, &ph, &n), 0);
}

static void test_errno_texts(void **state)
{
	(void)state;
	agent_compat_init(lookup);
	int n = 0;
	for (int e = 0; e < 200; e++) {
		const char *t = agent_errno_table(e);
		if (!t)
			continue;
		assert_string_equal(t, strerrordesc_np(e));
		n++;
	}
	assert_int_equal(n, 28);
	assert_string_equal(agent_errno_text(EROFS), "Read-only file system");
	assert_string_equal(agent_errno_text(ENOTRECOVERABLE),
			    strerrordesc_np(ENOTRECOVERABLE));
	assert_string_equal(agent_errno_text(99999), "unknown error");
}

static void same_stat(const struct stat *a, const struct stat *b)
{
	assert_int_equal(a->st_dev, b->st_dev);
	assert_int_equal(a->st_ino, b->st_ino);
	assert_int_equal(a->st_mode, b->st_mode);
	assert_int_equal(a->st_size, b->st_size);
	assert_int_equal(a->st_uid, b->st_uid);
}

static void test_stat_family(void **state)
{
	(void)state;
	struct stat a, b;
	assert_int_equal(agent_stat("/proc/self/ns/pid", &a), 0);
	assert_int_equal(stat("/proc/self/ns/pid", &b), 0);
	same_stat(&a, &b);
	int fd = open("/etc/passwd", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(agent_fstat(fd, &a), 0);
	assert_int_equal(fstat(fd, &b), 0);
	same_stat(&a, &b);
	close(fd);
	int dfd = open("/proc/self", O_RDONLY | O_DIRECTORY);
	assert_int_equal(agent_fstatat(dfd, "exe", &a, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(fstatat(dfd, "exe", &b, AT_SYMLINK_NOFOLLOW), 0);
	same_stat(&a, &b);
	assert_true(S_ISLNK(a.st_mode));
	close(dfd);
	errno = 0;
	assert_int_equal(agent_stat("/nonexistent/x", &a), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_getdents64(void **state)
{
	(void)state;
	char dir[] = "/tmp/ym-compat-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[64];
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof path, "%s/f%d", dir, i);
		close(open(path, O_CREAT | O_WRONLY, 0600));
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	char buf[512];   /* small: several calls */
	ssize_t got;
	int files = 0, calls = 0;
	while ((got = agent_getdents64(fd, buf, sizeof buf)) > 0) {
		calls++;
		for (ssize_t off = 0; off < got;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			files += e->d_name[0] == 'f';
			off += e->d_reclen;
		}
	}
	assert_int_equal(got, 0);
	assert_int_equal(files, 40);
	assert_true(calls > 1);
	close(fd);
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof path, "%s/f%d", dir, i);
		unlink(path);
	}
	rmdir(dir);
}

static void test_shm_open_unlink(void **state)
{
	(void)state;
	char name[64];
	snprintf(name, sizeof name, "/ym-compat-test-%d", (int)getpid());
	int fd = agent_shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	/* glibc's own finds the same file. */
	int g = shm_open(name, O_RDWR, 0);
	assert_true(g >= 0);
	struct stat a, b;
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(fstat(g, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(a.st_mode & 0777, 0600);
	close(g);
	close(fd);
	/* O_NOFOLLOW: a symbolic link in its place is refused. */
	char link[80];
	snprintf(link, sizeof link, "/dev/shm%s-link", name);
	assert_int_equal(symlink("/etc/passwd", link), 0);
	errno = 0;
	assert_int_equal(agent_shm_open(strrchr(link, '/'), O_RDONLY, 0), -1);
	assert_int_equal(errno, ELOOP);
	unlink(link);
	assert_int_equal(agent_shm_unlink(name), 0);
	errno = 0;
	assert_int_equal(agent_shm_unlink(name), -1);
	assert_int_equal(errno, ENOENT);
	const char *bad[] = { "/", "", "/a/b", "/..", "/." };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		errno = 0;
		assert_int_equal(agent_shm_open(bad[i], O_RDONLY, 0), -1);
		assert_int_equal(errno, EINVAL);
	}
	char longname[300];
	memset(longname, 'x', sizeof longname - 1);
	longname[0] = '/';
	longname[sizeof longname - 1] = '\0';
	errno = 0;
	assert_int_equal(agent_shm_open(longname, O_RDONLY, 0), -1);
	assert_int_equal(errno, EINVAL);
}

static void test_memfd_create(void **state)
{
	(void)state;
	int fd = agent_memfd_create("ym-compat", MFD_CLOEXEC);
	assert_true(fd >= 0);
	char p[64], target[128];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, target, sizeof target - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, "/memfd:ym-compat (deleted)");
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_object_fallback),
		cmocka_unit_test(test_r_debug_from_dt_debug),
		cmocka_unit_test(test_phdrs_without_dl_find_object),
		cmocka_unit_test(test_errno_texts),
		cmocka_unit_test(test_stat_family),
		cmocka_unit_test(test_getdents64),
		cmocka_unit_test(test_shm_open_unlink),
		cmocka_unit_test(test_memfd_create),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
