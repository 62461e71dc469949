/* The ptrace injector on its own, without the agent: load an ordinary
 * library into a child (cat on pipes) and check that the child noticed
 * nothing; the refusals that need no special target; libc's symbols read
 * from this machine's libc, and from truncated, forged or non-ELF files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/inject.h"
#include "ptrace/libckind.h"
#include "ptrace/libcsyms.h"
#include "ptrace/procfs.h"

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

/* ---- libc's dynamic symbols (libcsyms.c) ---- */

/* What ld.so resolves name to in libc itself (a handle on libc: never an
 * executable's PLT slot, nor a sanitizer's interceptor). */
static uintptr_t in_libc(const char *name)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(h);
	void *p = dlsym(h, name);
	dlclose(h);
	assert_non_null(p);
	return (uintptr_t)p;
}

static void finds_what_it_calls_in_this_libc(void **state)
{
	(void)state;
	struct tmaps m;
	assert_int_equal(inject_read_maps(getpid(), &m), 0);
	assert_true(m.have_libc);
	struct libc_syms s;
	char err[512] = "";
	int rc = inject_libc_symbols(getpid(), &m, &s, err, sizeof err);
	if (rc != 0)
		print_error("libc_symbols: %s\n", err);
	assert_int_equal(rc, 0);
	assert_int_equal(s.dlopen, in_libc("dlopen"));
	assert_int_equal(s.dlsym, in_libc("dlsym"));
	assert_int_equal(s.dlerror, in_libc("dlerror"));
	assert_int_equal(s.memfd_create, in_libc("memfd_create"));
	assert_int_equal(s.open, in_libc("open"));
	assert_int_equal(s.close, in_libc("close"));
	/* The allocator lies inside its bounds, dlopen outside them. */
	assert_true(s.malloc_text.lo < s.malloc_text.hi);
	uintptr_t fns[] = { in_libc("malloc"), in_libc("free"), in_libc("realloc") };
	for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
		assert_true(fns[i] >= s.malloc_text.lo && fns[i] < s.malloc_text.hi);
	assert_false(s.dlopen >= s.malloc_text.lo && s.dlopen < s.malloc_text.hi);
	/* glibc's loader is a file of its own: nothing of libc beyond. */
	assert_int_equal(s.own_loader, 0);
	assert_int_equal(s.nlock, 0);
	/* The entry point is code of this libc. */
	Dl_info info;
	assert_true(dladdr((void *)s.entry, &info) != 0);
	assert_int_equal((uintptr_t)info.dli_fbase, m.libc_base);
}

/* A copy of this process's libc at path, cut to len bytes (or whole when
 * len is (size_t)-1); its size in *size. */
static void copy_libc(const struct tmaps *m, const char *path, size_t len,
		      size_t *size)
{
	int in = open(m->libc, O_RDONLY | O_CLOEXEC);
	assert_true(in >= 0);
	struct stat st;
	assert_int_equal(fstat(in, &st), 0);
	*size = (size_t)st.st_size;
	if (len > *size)
		len = *size;
	char *buf = malloc(len ? len : 1);
	assert_non_null(buf);
	assert_int_equal(pread(in, buf, len, 0), (ssize_t)len);
	close(in);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(out >= 0);
	assert_int_equal(write(out, buf, len), (ssize_t)len);
	close(out);
	free(buf);
}

/* inject_libc_symbols on the file at path, as a process's C library
 * mapped nowhere (so it is opened by its path). */
static int symbols_of(const char *path, struct libc_syms *s, char *err, size_t len)
{
	struct tmaps m;
	memset(&m, 0, sizeof m);
	snprintf(m.libc, sizeof m.libc, "%s", path);
	m.have_libc = 1;
	err[0] = '\0';
	return inject_libc_symbols(getpid(), &m, s, err, len);
}

/* Set field (an offset in Elf64_Shdr) of the SHT_DYNSYM section header of
 * the file at path to v. */
static void forge_dynsym(const char *path, size_t field, uint64_t v32or64,
			 size_t width)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	Elf64_Ehdr eh;
	assert_int_equal(pread(fd, &eh, sizeof eh, 0), (ssize_t)sizeof eh);
	int done = 0;
	for (unsigned i = 0; i < eh.e_shnum && !done; i++) {
		Elf64_Shdr sh;
		off_t at = (off_t)(eh.e_shoff + i * sizeof sh);
		assert_int_equal(pread(fd, &sh, sizeof sh, at), (ssize_t)sizeof sh);
		if (sh.sh_type == SHT_DYNSYM) {
			assert_int_equal(pwrite(fd, &v32or64, width, at + (off_t)field),
					 (ssize_t)width);
			done = 1;
		}
	}
	close(fd);
	assert_true(done);
}

/* The value of the dynamic symbol name in the ELF file at path; 0 when
 * it has none. */
static uint64_t file_symbol(const char *path, const char *name)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(elf_version(EV_CURRENT) != EV_NONE);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	uint64_t v = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while (!v && (scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;
			if (gelf_getsym(d, (int)i, &sym) && sym.st_shndx != SHN_UNDEF &&
			    (n = elf_strptr(elf, sh.sh_link, sym.st_name)) &&
			    !strcmp(n, name)) {
				v = sym.st_value;
				break;
			}
		}
	}
	elf_end(elf);
	close(fd);
	return v;
}

/* Which of the ranges s found holds a: -1 none, -2 the allocator. */
static int musl_range_of(const struct libc_syms *s, uint64_t a)
{
	if (a >= s->malloc_text.lo && a < s->malloc_text.hi)
		return -2;
	for (int i = 0; i < s->nlock; i++)
		if (a >= s->lock_text[i].lo && a < s->lock_text[i].hi)
			return i;
	return -1;
}

/* musl's libc.so is its own loader: the injector finds dlopen there and
 * bounds the code that holds a lock its dlopen takes: the loader and
 * pthread_atfork's file anywhere in a call chain, pthread_create's file
 * and fork where a thread stopped; the system calls a waiting thread sits
 * in lie outside them all. */
static void bounds_the_code_of_musl_that_holds_dlopens_locks(void **state)
{
	(void)state;
	const char *path = "/usr/lib/x86_64-linux-musl/libc.so";
	if (access(path, R_OK) != 0)
		skip();   /* musl is not installed */
	struct libc_syms s;
	char err[512];
	assert_int_equal(symbols_of(path, &s, err, sizeof err), 0);
	assert_int_equal(s.own_loader, 1);
	assert_int_equal(s.dlopen, file_symbol(path, "dlopen"));
	assert_int_equal(s.dlsym, file_symbol(path, "dlsym"));
	assert_true(s.nlock_any == 2 && s.nlock == 5);
	const char *loader[] = { "dlopen", "dl_iterate_phdr", "dladdr", "__dls3" };
	for (size_t i = 0; i < sizeof loader / sizeof *loader; i++)
		assert_int_equal(musl_range_of(&s, file_symbol(path, loader[i])), 0);
	assert_int_equal(musl_range_of(&s, file_symbol(path, "pthread_atfork")), 1);
	int create = musl_range_of(&s, file_symbol(path, "pthread_create"));
	assert_true(create >= s.nlock_any);
	assert_int_equal(musl_range_of(&s, file_symbol(path, "pthread_exit")), create);
	assert_true(musl_range_of(&s, file_symbol(path, "fork")) >= s.nlock_any);
	assert_true(musl_range_of(&s, file_symbol(path, "_Fork")) >= s.nlock_any);
	const char *alloc[] = { "malloc", "free", "realloc", "calloc", "aligned_alloc" };
	for (size_t i = 0; i < sizeof alloc / sizeof *alloc; i++)
		assert_int_equal(musl_range_of(&s, file_symbol(path, alloc[i])), -2);
	const char *outside[] = { "read", "nanosleep", "poll", "epoll_wait",
				  "pthread_cond_wait", "memcpy", "__libc_start_main" };
	for (size_t i = 0; i < sizeof outside / sizeof *outside; i++)
		assert_int_equal(musl_range_of(&s, file_symbol(path, outside[i])), -1);
}

/* This test program is a glibc one, and a glibc program is never refused
 * as musl or static; a missing process is an error, not a verdict. */
static void tells_this_glibc_program_apart(void **state)
{
	(void)state;
	struct inject_libc_seen s;
	char err[256] = "";
	assert_int_equal(inject_libc_kind(getpid(), &s), 0);
	assert_int_equal(s.kind, INJECT_LIBC_GLIBC);
	assert_int_equal(s.musl_agent, 0);
	assert_int_equal(inject_libc_refusal(getpid(), "self", "/x/libymagent.so",
					     err, sizeof err), 0);
	assert_string_equal(err, "");
	assert_true(inject_libc_kind(0x3fffffff, &s) < 0);
}

/* The symbols read from a file are kept by the file (libcsyms.c): read
 * again as they were, until the file changes, even in place, at its
 * size, within the tick of its times; another file is another entry. */
static void libc_symbols_kept_by_file_until_it_changes(void **state)
{
	(void)state;
	struct tmaps m;
	assert_int_equal(inject_read_maps(getpid(), &m), 0);
	char path[] = "/tmp/ym_test_libcXXXXXX", other[] = "/tmp/ym_test_libcXXXXXX";
	int fd = mkstemp(path), fd2 = mkstemp(other);
	assert_true(fd >= 0 && fd2 >= 0);
	close(fd);
	close(fd2);
	struct libc_syms a, b, c;
	char err[512];
	size_t size;
	copy_libc(&m, path, (size_t)-1, &size);
	copy_libc(&m, other, (size_t)-1, &size);
	assert_int_equal(symbols_of(path, &a, err, sizeof err), 0);
	assert_int_equal(symbols_of(path, &b, err, sizeof err), 0);
	assert_memory_equal(&a, &b, sizeof a);
	assert_int_equal(symbols_of(other, &c, err, sizeof err), 0);
	assert_memory_equal(&a, &c, sizeof a);
	/* Rewritten in place, same size, at once: read anew. */
	forge_dynsym(path, offsetof(Elf64_Shdr, sh_size), (uint64_t)size * 4, 8);
	assert_int_equal(symbols_of(path, &b, err, sizeof err), -1);
	assert_non_null(strstr(err, "no dynamic symbol table"));
	/* The other copy is untouched: still read. */
	assert_int_equal(symbols_of(other, &c, err, sizeof err), 0);
	assert_memory_equal(&a, &c, sizeof a);
	unlink(path);
	unlink(other);
}

static void fails_cleanly_on_a_truncated_forged_or_non_elf_libc(void **state)
{
	(void)state;
	struct tmaps m;
	assert_int_equal(inject_read_maps(getpid(), &m), 0);
	assert_true(m.have_libc);
	char path[] = "/tmp/ym_test_libcXXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	struct libc_syms s, whole;
	char err[512];
	size_t size;

	/* The whole copy reads as the library itself does (the base apart). */
	copy_libc(&m, path, (size_t)-1, &size);
	assert_int_equal(symbols_of(path, &whole, err, sizeof err), 0);
	struct libc_syms mapped;
	assert_int_equal(inject_libc_symbols(getpid(), &m, &mapped, err, sizeof err), 0);
	assert_int_equal(whole.dlopen + m.libc_base, mapped.dlopen);
	assert_int_equal(whole.entry + m.libc_base, mapped.entry);

	/* Cut anywhere: before, inside and after the ELF header, in the
	 * middle, one byte short of the section headers' end. */
	size_t cuts[] = { 0, 3, 16, 63, 64, 4096, size / 2, size - 1 };
	for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
		copy_libc(&m, path, cuts[i], &size);
		assert_int_equal(symbols_of(path, &s, err, sizeof err), -1);
		assert_non_null(strstr(err, path));
	}

	/* A dynamic symbol table said to run past the end of the file, or
	 * whose strings are in a section that does not exist. */
	copy_libc(&m, path, (size_t)-1, &size);
	forge_dynsym(path, offsetof(Elf64_Shdr, sh_size), (uint64_t)size * 4, 8);
	assert_int_equal(symbols_of(path, &s, err, sizeof err), -1);
	assert_non_null(strstr(err, "no dynamic symbol table"));
	copy_libc(&m, path, (size_t)-1, &size);
	forge_dynsym(path, offsetof(Elf64_Shdr, sh_link), 0xffff, 4);
	assert_int_equal(symbols_of(path, &s, err, sizeof err), -1);
	assert_non_null(strstr(err, "no dynamic symbol table"));

	/* Not ELF at all. */
	int out = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(out >= 0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(write(out, "not a library\n", 14), 14);
	close(out);
	assert_int_equal(symbols_of(path, &s, err, sizeof err), -1);
	assert_non_null(strstr(err, "is not an x86-64 ELF library"));

	/* No such file. */
	unlink(path);
	assert_int_equal(symbols_of(path, &s, err, sizeof err), -1);
	assert_non_null(strstr(err, "cannot read the target's C library"));
}

/* A path the target chooses that names a FIFO (or any file that is not a
 * regular one) is refused at once, never waited on. */
static void a_planted_fifo_is_not_opened(void **state)
{
	(void)state;
	char dir[] = "/tmp/ymtop-fifo-XXXXXX", fifo[64], reg[64];
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof fifo, "%s/libc.so.6", dir);
	snprintf(reg, sizeof reg, "%s/plain", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	int fd = open(reg, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	close(fd);
	/* No mapping of ours starts at 1: the path through /proc/self/root. */
	assert_int_equal(inject_open_mapped(getpid(), 1, fifo), -1);
	fd = inject_open_mapped(getpid(), 1, reg);
	assert_true(fd >= 0);
	close(fd);
	unlink(fifo);
	unlink(reg);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(loads_a_library_into_a_blocked_reader),
		cmocka_unit_test(library_without_resume_function_is_refused),
		cmocka_unit_test(dlopen_failure_is_reported_and_harmless),
		cmocka_unit_test(refuses_a_missing_process),
		cmocka_unit_test(refuses_a_stopped_process),
		cmocka_unit_test(finds_what_it_calls_in_this_libc),
		cmocka_unit_test(libc_symbols_kept_by_file_until_it_changes),
		cmocka_unit_test(fails_cleanly_on_a_truncated_forged_or_non_elf_libc),
		cmocka_unit_test(tells_this_glibc_program_apart),
		cmocka_unit_test(bounds_the_code_of_musl_that_holds_dlopens_locks),
		cmocka_unit_test(a_planted_fifo_is_not_opened),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
