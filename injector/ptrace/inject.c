/*
 * The ptrace injector (see inject.h for the protocol).  Runs in ymtop.
 *
 * Safety rules, in the order they are applied:
 * - Everything that can refuse does so before the first ptrace call: no
 *   such process, zombie or stopped, already traced, strict seccomp, not
 *   x86-64, statically linked, no dlopen in libc.  An agent already
 *   mapped but without a segment (a daemon that forked away and has not
 *   allocated since) is started, not loaded again (start_agent).
 * - Only the chosen thread is stopped; the others run on and never meet
 *   our code (libc's entry point never runs after start-up).
 * - A thread may only be borrowed at a safe moment: not inside libc's
 *   allocator (its text is bounded by the nearest exported functions of
 *   other files) nor inside ld.so, and no return address into either in
 *   its call chain, unwound with libdw (a thread waiting for an arena
 *   lock).  dlopen and the agent's constructor take those locks.  Otherwise it is let go
 *   at once, another thread is tried, and after a bounded time we give up
 *   with the target untouched.
 * - Registers (with orig_rax: an interrupted system call restarts only
 *   when they are restored), the extended state and the stub bytes are
 *   restored exactly before PTRACE_DETACH, on every path.  Signals that
 *   reach the thread meanwhile are kept and delivered at the detach.
 */
#include <dirent.h>
#include <elf.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "inject.h"
#include "resume.h"

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif
#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

#define SAFE_WAIT_MS    2000.0   /* give up finding a safe moment */
#define CALL_WAIT_MS   10000.0   /* dlopen in the target */
#define STACK_SCAN     256       /* bytes above rsp checked for callers */
#define XSTATE_MAX     (64 * 1024)
#define MAX_PENDING    16
#define MAX_TIDS       4096
#define PATH_GAP       (PATH_MAX + 64)   /* room for the path on the stack */
#define RTLD_NOW_FLAG  2                 /* RTLD_NOW, as the target's glibc */

static const unsigned char stub[3] = { 0xff, 0xd0, 0xcc };  /* call *%rax; int3 */

/* The dlopen stub (resume.h): survives ymtop's death.  rax = dlopen,
 * rdi = path, rsi = flags, rbx = struct ym_resume, r13 = its symbol name,
 * r14 = dlsym.  27 bytes: libc's entry function (which prints the banner
 * and exits) is longer. */
static const unsigned char resume_stub[] = {
	0xff, 0xd0,             /* call *%rax          dlopen(path, flags) */
	0x48, 0x85, 0xc0,       /* test %rax,%rax                          */
	0x74, 0x13,             /* je   trap           failed: dlerror     */
	0x48, 0x89, 0xc7,       /* mov  %rax,%rdi                          */
	0x4c, 0x89, 0xee,       /* mov  %r13,%rsi                          */
	0x41, 0xff, 0xd6,       /* call *%r14          dlsym(h, symbol)    */
	0x48, 0x85, 0xc0,       /* test %rax,%rax                          */
	0x74, 0x05,             /* je   trap                               */
	0x48, 0x89, 0xdf,       /* mov  %rbx,%rdi                          */
	0xff, 0xd0,             /* call *%rax          never returns       */
	0xcc,                   /* trap: int3                              */
};
#define CODE_MAX sizeof resume_stub

static void fail(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };
	nanosleep(&ts, NULL);
}

/* ---- What /proc tells before we touch anything ---- */

struct pstatus {
	char  name[64];
	char  state;
	pid_t tgid;          /* != pid: pid is a thread of process tgid */
	pid_t tracer;
	uid_t uid;           /* real uid */
	int   seccomp;
};

/* -errno of a failed call, never 0 (which callers take for success). */
static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

static int read_status(pid_t pid, struct pstatus *ps)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	memset(ps, 0, sizeof *ps);
	FILE *f = fopen(path, "re");
	if (!f)
		return neg_errno();
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "Name:", 5)) {
			sscanf(line + 5, " %63[^\n]", ps->name);
		} else if (!strncmp(line, "State:", 6)) {
			sscanf(line + 6, " %c", &ps->state);
		} else if (!strncmp(line, "Tgid:", 5)) {
			ps->tgid = (pid_t)atol(line + 5);
		} else if (!strncmp(line, "Uid:", 4)) {
			ps->uid = (uid_t)strtoul(line + 4, NULL, 10);
		} else if (!strncmp(line, "TracerPid:", 10)) {
			ps->tracer = (pid_t)atol(line + 10);
		} else if (!strncmp(line, "Seccomp:", 8)) {
			ps->seccomp = atoi(line + 8);
		}
	}
	fclose(f);
	return 0;
}

struct range {
	uintptr_t lo, hi;
};

struct tmaps {
	char      libc[PATH_MAX];
	uintptr_t libc_base;
	int       have_libc;
	struct range ldso;        /* ld.so's executable mappings */
	int       has_agent;
};

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Open the file mapped at lo in pid: through /proc/PID/map_files (the
 * very file, whatever namespace or chroot it lives in; needs root), else
 * through /proc/PID/root (the path as maps shows it is relative to the
 * reader's root when the file is reachable from it, to the target's
 * otherwise: a chroot shows host paths).  -1 when neither opens. */
static int open_mapped(pid_t pid, uintptr_t lo, const char *path)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "/proc/%ld/map_files", (long)pid);
	DIR *d = opendir(p);
	if (d) {
		char want[32];
		int wl = snprintf(want, sizeof want, "%lx-", (unsigned long)lo);
		struct dirent *e;
		int fd = -1;
		while (fd < 0 && (e = readdir(d)) != NULL)
			if (!strncmp(e->d_name, want, (size_t)wl)) {
				snprintf(p, sizeof p, "/proc/%ld/map_files/%s", (long)pid,
					 e->d_name);
				fd = open(p, O_RDONLY | O_CLOEXEC);
			}
		closedir(d);
		if (fd >= 0)
			return fd;
	}
	snprintf(p, sizeof p, "/proc/%ld/root%s", (long)pid, path);
	return open(p, O_RDONLY | O_CLOEXEC);
}

static int read_maps(pid_t pid, struct tmaps *m)
{
	char path[64], line[PATH_MAX + 128];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	memset(m, 0, sizeof *m);
	FILE *f = fopen(path, "re");
	if (!f)
		return neg_errno();
	m->ldso.lo = UINTPTR_MAX;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi, off;
		char perms[8];
		int n = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off,
			   &n) < 4 || n == 0)
			continue;
		char *p = line + n;
		p[strcspn(p, "\n")] = '\0';
		if (*p != '/')
			continue;
		const char *b = base_name(p);
		if (!strncmp(b, "libc.so", 7) || !strncmp(b, "libc-2.", 7)) {
			if (!m->have_libc && off == 0) {
				snprintf(m->libc, sizeof m->libc, "%s", p);
				m->libc_base = lo;
				m->have_libc = 1;
			}
		} else if (!strncmp(b, "ld-linux", 8) || !strncmp(b, "ld-2.", 5)) {
			if (perms[2] == 'x') {
				if (lo < m->ldso.lo)
					m->ldso.lo = lo;
				if (hi > m->ldso.hi)
					m->ldso.hi = hi;
			}
		} else if (!strcmp(b, "libymagent.so") ||
			   !strncmp(b, "memfd:libymagent.so", 19)) {
			m->has_agent = 1;
		}
	}
	fclose(f);
	if (m->ldso.lo == UINTPTR_MAX)
		m->ldso.lo = 0;
	return 0;
}

/* 0: x86-64 ELF; else the e_machine (or -1 unreadable, -2 32-bit). */
static int exe_machine(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	ssize_t n = pread(fd, &eh, sizeof eh, 0);
	close(fd);
	if (n < (ssize_t)EI_NIDENT || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return -1;
	if (eh.e_ident[EI_CLASS] != ELFCLASS64)
		return -2;
	if (n != (ssize_t)sizeof eh)
		return -1;
	return eh.e_machine == EM_X86_64 ? 0 : eh.e_machine;
}

/* ---- libc's dynamic symbols, from its file ---- */

struct libc_syms {
	uintptr_t dlopen, dlerror, dlsym, entry;
	uintptr_t memfd_create, open, close;   /* to bring the agent in */
	struct range malloc_text;   /* libc's allocator, conservatively */
};

static int is_malloc_family(const char *n)
{
	static const char *const names[] = {
		"malloc", "free", "calloc", "realloc", "memalign", "valloc",
		"pvalloc", "posix_memalign", "aligned_alloc", "malloc_usable_size",
		"malloc_trim", "mallopt", "mallinfo", "mallinfo2", "malloc_stats",
		"malloc_info", "__libc_malloc", "__libc_free", "__libc_calloc",
		"__libc_realloc", "__libc_memalign", "__libc_valloc",
		"__libc_pvalloc", "__libc_mallopt", "__libc_mallinfo", "cfree",
		"reallocarray", "__libc_reallocarray",
	};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (!strcmp(n, names[i]))
			return 1;
	return 0;
}

static int libc_symbols(pid_t pid, const struct tmaps *m, struct libc_syms *s,
			char *err, size_t len)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "/proc/%ld/root%s", (long)pid, m->libc);
	int fd = open_mapped(pid, m->libc_base, m->libc);
	if (fd < 0) {
		fail(err, len, "cannot read the target's C library %s: %s", path,
		     strerror(errno));
		return -1;
	}
	struct stat st;
	void *map = MAP_FAILED;
	if (fstat(fd, &st) == 0 && st.st_size > (off_t)sizeof(Elf64_Ehdr))
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		fail(err, len, "cannot map %s", path);
		return -1;
	}
	const uint8_t *b = map;
	size_t size = (size_t)st.st_size;
	const Elf64_Ehdr *eh = map;
	int rc = -1;
	memset(s, 0, sizeof *s);
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_machine != EM_X86_64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shoff > size || eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr)) {
		fail(err, len, "%s is not an x86-64 ELF library ymtop can read", m->libc);
		goto out;
	}
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
	const Elf64_Shdr *dynsym = NULL, *versym = NULL;
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == SHT_DYNSYM)
			dynsym = &sh[i];
		else if (sh[i].sh_type == SHT_GNU_versym)
			versym = &sh[i];
	}
	if (!dynsym || dynsym->sh_link >= eh->e_shnum ||
	    dynsym->sh_offset > size || dynsym->sh_size > size - dynsym->sh_offset) {
		fail(err, len, "%s has no dynamic symbol table", m->libc);
		goto out;
	}
	const Elf64_Shdr *strs = &sh[dynsym->sh_link];
	if (strs->sh_offset > size || strs->sh_size > size - strs->sh_offset)
		goto out;
	const Elf64_Sym *sym = (const Elf64_Sym *)(b + dynsym->sh_offset);
	size_t nsym = dynsym->sh_size / sizeof *sym;
	const uint16_t *ver = NULL;
	if (versym && versym->sh_offset <= size &&
	    versym->sh_size <= size - versym->sh_offset &&
	    versym->sh_size / 2 >= nsym)
		ver = (const uint16_t *)(b + versym->sh_offset);
	const char *str = (const char *)(b + strs->sh_offset);
	uint64_t mlo = UINT64_MAX, mhi = 0, compat_dlopen = 0, libc_dlopen = 0;
	for (size_t i = 1; i < nsym; i++) {
		if (sym[i].st_name >= strs->sh_size || sym[i].st_shndx == SHN_UNDEF ||
		    ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC)
			continue;
		const char *n = str + sym[i].st_name;
		if (memchr(n, '\0', strs->sh_size - sym[i].st_name) == NULL)
			continue;
		int hidden = ver && (ver[i] & 0x8000);
		if (!strcmp(n, "dlopen")) {
			if (!hidden)
				s->dlopen = sym[i].st_value;
			else
				compat_dlopen = sym[i].st_value;
		} else if (!strcmp(n, "__libc_dlopen_mode")) {
			libc_dlopen = sym[i].st_value;
		} else if (!strcmp(n, "dlerror") && !hidden) {
			s->dlerror = sym[i].st_value;
		} else if (!strcmp(n, "dlsym") && !hidden) {
			s->dlsym = sym[i].st_value;
		} else if (!strcmp(n, "memfd_create") && !hidden) {
			s->memfd_create = sym[i].st_value;
		} else if (!strcmp(n, "open") && !hidden) {
			s->open = sym[i].st_value;
		} else if (!strcmp(n, "close") && !hidden) {
			s->close = sym[i].st_value;
		}
		if (is_malloc_family(n)) {
			if (sym[i].st_value < mlo)
				mlo = sym[i].st_value;
			if (sym[i].st_value + sym[i].st_size > mhi)
				mhi = sym[i].st_value + sym[i].st_size;
		}
	}
	if (!s->dlopen)
		s->dlopen = compat_dlopen ? compat_dlopen : libc_dlopen;
	if (!s->dlopen || mlo == UINT64_MAX || !eh->e_entry) {
		fail(err, len, "no dlopen (or no entry point) in the target's C library "
		     "%s: only glibc is supported", m->libc);
		goto out;
	}
	/* The allocator's static functions lie between its exported ones:
	 * widen to the nearest exported functions of other files. */
	uint64_t lo = 0, hi = UINT64_MAX;
	for (size_t i = 1; i < nsym; i++) {
		if (sym[i].st_name >= strs->sh_size || sym[i].st_shndx == SHN_UNDEF ||
		    ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC ||
		    is_malloc_family(str + sym[i].st_name))
			continue;
		uint64_t v = sym[i].st_value, e = v + sym[i].st_size;
		if (e <= mlo && e > lo)
			lo = e;
		if (v >= mhi && v < hi)
			hi = v;
	}
	if (hi == UINT64_MAX)
		hi = mhi;
	s->malloc_text.lo = m->libc_base + lo;
	s->malloc_text.hi = m->libc_base + hi;
	s->dlopen += m->libc_base;
	if (s->dlerror)
		s->dlerror += m->libc_base;
	if (s->dlsym)
		s->dlsym += m->libc_base;
	if (s->memfd_create)
		s->memfd_create += m->libc_base;
	if (s->open)
		s->open += m->libc_base;
	if (s->close)
		s->close += m->libc_base;
	s->entry = m->libc_base + eh->e_entry;
	rc = 0;
out:
	munmap(map, size);
	return rc;
}

/* ---- One borrowed thread ---- */

struct borrow {
	pid_t  pid, tid;
	int    mem;                      /* /proc/pid/mem */
	struct user_regs_struct regs;    /* as stopped */
	void  *xstate;
	size_t xlen;
	int    in_sigstop;               /* stopped in signal-delivery-stop */
	int    pending[MAX_PENDING];     /* signals to deliver at the detach */
	int    npending;
	int    code_saved;
	double stopped_at;               /* ms, when it stopped */
	unsigned char code[CODE_MAX];
	uintptr_t code_at;
};

static void keep_signal(struct borrow *t, int sig)
{
	if (t->npending < MAX_PENDING)
		t->pending[t->npending++] = sig;
}

/* Detach, delivering kept signals: the first through the detach when the
 * thread is in a signal-delivery-stop, the others with tgkill. */
static void let_go(struct borrow *t)
{
	int first = 0;
	if (t->in_sigstop && t->npending > 0)
		first = t->pending[0];
	ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)first);
	for (int i = first ? 1 : 0; i < t->npending; i++)
		syscall(SYS_tgkill, t->pid, t->tid, t->pending[i]);
}

static int mem_read(struct borrow *t, uintptr_t at, void *buf, size_t n)
{
	return pread(t->mem, buf, n, (off_t)at) == (ssize_t)n ? 0 : -1;
}

static int mem_write(struct borrow *t, uintptr_t at, const void *buf, size_t n)
{
	return pwrite(t->mem, buf, n, (off_t)at) == (ssize_t)n ? 0 : -1;
}

static int in_range(const struct range *r, uint64_t a)
{
	return a >= r->lo && a < r->hi;
}

/* ---- The borrowed thread's call chain (libdw) ----
 *
 * Whether a thread is inside the allocator or the dynamic loader is told
 * by its return addresses, found by unwinding it with libdw's CFI
 * unwinder.  Words that merely lie on its stack prove nothing: a dead
 * slot of a live frame keeps a stale "_int_malloc+2861" for as long as
 * the thread sleeps, and a scan of the stack refused idle bash and nginx
 * for good (issue 16, item 5).
 *
 * libdw gets the thread through our own callbacks rather than
 * dwfl_linux_proc_attach: the registers are the ones we already read at
 * the stop, the memory comes through our /proc/PID/mem descriptor, and
 * nothing in libdw stops, attaches or detaches anything.  The modules'
 * files are opened through /proc/PID/map_files or /proc/PID/root, so a
 * target in another mount namespace is unwound with its own libraries,
 * never the host's files of the same name. */

#define CHAIN_MAX 1024   /* frames examined; deeper ones are not looked at */

struct chain {
	Dwfl         *dwfl;      /* NULL: unwinding unavailable, scan instead */
	struct borrow *t;        /* the thread being unwound */
	const struct range *malloc_text, *ldso;
	int           depth;     /* frames seen by this walk */
	int           hit;       /* a frame inside the allocator or ld.so */
};

/* Which target /proc/PID/root the module files are opened under (find_elf
 * gets no user argument; ymtop injects into one process at a time). */
static pid_t chain_pid;

static int chain_find_elf(Dwfl_Module *mod, void **userdata, const char *name,
			  Dwarf_Addr base, char **file_name, Elf **elfp)
{
	if (name[0] != '/')   /* [vdso] and the like: from the target's memory */
		return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name,
						elfp);
	Dwarf_Addr lo = 0;
	dwfl_module_info(mod, NULL, &lo, NULL, NULL, NULL, NULL, NULL);
	int fd = open_mapped(chain_pid, (uintptr_t)lo, name);
	if (fd < 0)
		return -1;
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "/proc/%ld/root%s", (long)chain_pid, name);
	*elfp = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!*elfp) {
		close(fd);
		return -1;
	}
	*file_name = strdup(path);
	return fd;   /* libdwfl owns it from here */
}

/* The agent-free unwinder needs no debug files: .eh_frame is in the
 * loaded files themselves (and looking further could reach debuginfod). */
static int chain_no_debuginfo(Dwfl_Module *mod, void **userdata,
			      const char *modname, Dwarf_Addr base,
			      const char *file_name, const char *debuglink_file,
			      GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod; (void)userdata; (void)modname; (void)base; (void)file_name;
	(void)debuglink_file; (void)debuglink_crc; (void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks chain_callbacks = {
	.find_elf = chain_find_elf,
	.find_debuginfo = chain_no_debuginfo,
};

static pid_t chain_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	struct chain *c = arg;
	if (*thread_argp)
		return 0;
	*thread_argp = c;
	return c->t->tid;
}

static bool chain_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	struct chain *c = arg;
	*thread_argp = c;
	return c->t && tid == c->t->tid;
}

static bool chain_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result,
			      void *arg)
{
	(void)dwfl;
	struct chain *c = arg;
	uint64_t w;
	if (pread(c->t->mem, &w, sizeof w, (off_t)addr) != (ssize_t)sizeof w)
		return false;
	*result = w;
	return true;
}

/* The registers as stopped, in DWARF order: rax rdx rcx rbx rsi rdi rbp
 * rsp r8..r15 rip. */
static bool chain_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct chain *c = arg;
	const struct user_regs_struct *r = &c->t->regs;
	Dwarf_Word regs[17] = {
		r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi, r->rbp, r->rsp,
		r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15,
		r->rip,
	};
	return dwfl_thread_state_registers(thread, 0, 17, regs);
}

static const Dwfl_Thread_Callbacks chain_thread_callbacks = {
	.next_thread = chain_next_thread,
	.get_thread = chain_get_thread,
	.memory_read = chain_memory_read,
	.set_initial_registers = chain_initial_registers,
};

/* Ready libdw for pid's threads (before any stop: reading the maps and
 * the module list costs nothing to the target).  On failure c->dwfl stays
 * NULL and safe_moment falls back to the stack scan. */
static void chain_open(struct chain *c, pid_t pid, const struct libc_syms *s,
		       const struct tmaps *m)
{
	memset(c, 0, sizeof *c);
	c->malloc_text = &s->malloc_text;
	c->ldso = &m->ldso;
	chain_pid = pid;
	Dwfl *d = dwfl_begin(&chain_callbacks);
	if (!d)
		return;
	if (dwfl_linux_proc_report(d, pid) != 0 || dwfl_report_end(d, NULL, NULL) != 0 ||
	    !dwfl_attach_state(d, NULL, pid, &chain_thread_callbacks, c)) {
		dwfl_end(d);
		return;
	}
	c->dwfl = d;
}

static void chain_close(struct chain *c)
{
	if (c->dwfl)
		dwfl_end(c->dwfl);
	c->dwfl = NULL;
}

static int chain_frame(Dwfl_Frame *f, void *arg)
{
	struct chain *c = arg;
	Dwarf_Addr pc;
	bool activation;
	if (!dwfl_frame_pc(f, &pc, &activation))
		return DWARF_CB_ABORT;
	/* A return address may be the first byte after its call's function:
	 * the call itself is one byte before. */
	if (!activation && pc > 0)
		pc--;
	c->depth++;
	if (in_range(c->malloc_text, pc) || in_range(c->ldso, pc)) {
		c->hit = 1;
		return DWARF_CB_ABORT;
	}
	return c->depth >= CHAIN_MAX ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* 1: the call chain is known to stay clear of the allocator and ld.so;
 * 0: a frame is inside one of them; -1: not enough of the chain is known. */
static int chain_clear(struct chain *c, struct borrow *t)
{
	if (!c->dwfl)
		return -1;
	c->t = t;
	c->depth = 0;
	c->hit = 0;
	int rc = dwfl_getthread_frames(c->dwfl, t->tid, chain_frame, c);
	c->t = NULL;
	if (c->hit)
		return 0;
	/* rc 0: walked to the outermost frame; the bound reached counts as
	 * clear too (a lock is held by the innermost frames).  An unwinding
	 * that broke off deeper is trusted for the frames it gave: the
	 * allocator holds its locks only while its own frames are the
	 * innermost ones, and glibc's code all has CFI, so the walk passes
	 * them before it can break off in code without CFI further out.  One
	 * that gave no caller of the stopped PC says nothing. */
	if (rc == 0 || c->depth >= 2)
		return 1;
	return -1;
}

/* May the thread run dlopen now?  Not inside the allocator or ld.so: not
 * with its PC there, nor with a return address into them in its call
 * chain (a thread waiting for an arena lock, or running a constructor
 * under dlopen).  When the chain cannot be unwound, fall back to the old
 * conservative test: no word in the top STACK_SCAN bytes of its stack
 * may point into them.  It refuses some idle threads for good (stale
 * words in dead slots), but a wrong "safe" deadlocks someone's process in
 * dlopen, while a refusal only fails ymtop with a message. */
static int safe_moment(struct borrow *t, struct chain *c)
{
	if (in_range(c->malloc_text, t->regs.rip) || in_range(c->ldso, t->regs.rip))
		return 0;
	int clear = chain_clear(c, t);
	if (clear >= 0)
		return clear;
	uint64_t words[STACK_SCAN / 8];
	if (mem_read(t, t->regs.rsp, words, sizeof words) != 0)
		return 1;   /* top of an unreadable stack: nothing to see */
	for (size_t i = 0; i < sizeof words / sizeof *words; i++)
		if (in_range(c->malloc_text, words[i]) || in_range(c->ldso, words[i]))
			return 0;
	return 1;
}

/* Wait for the thread's next stop.  1 stopped, 0 timed out, -1 gone. */
static int wait_stop(pid_t tid, int *status, double ms)
{
	double end = now_ms() + ms;
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);
		if (r == tid)
			return WIFSTOPPED(*status) ? 1 : -1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now_ms() > end)
			return 0;
		nap_us(50);
	}
}

/* Some waits fail with EINTR when their thread is merely stopped and
 * resumed (signal(7): epoll_wait, sigtimedwait, semop...), where other
 * calls restart.  Without a timeout, restarting is exactly what the
 * thread would have done had it not been stopped: rewind to the syscall
 * instruction.  A wait with a timeout keeps its EINTR (restarting would
 * extend the wait), as after any SIGSTOP/SIGCONT or debugger attach. */
static void restart_eintr_wait(struct borrow *t)
{
	struct user_regs_struct *r = &t->regs;
	if (t->npending || (int64_t)r->rax != -EINTR || (int64_t)r->orig_rax < 0)
		return;
	int forever;
	switch (r->orig_rax) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		forever = (int)r->r10 == -1;
		break;
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_rt_sigtimedwait:
	case SYS_semtimedop:
		forever = r->r10 == 0;   /* NULL timeout */
		break;
	case SYS_semop:
		forever = 1;
		break;
	default:
		return;
	}
	unsigned char insn[2];
	if (!forever || mem_read(t, r->rip - 2, insn, 2) != 0 ||
	    insn[0] != 0x0f || insn[1] != 0x05)
		return;
	r->rax = r->orig_rax;
	r->rip -= 2;
}

/* One call made in the borrowed thread. */
struct call {
	const unsigned char *code;   /* the stub written at t->code_at */
	size_t    code_len;          /* its last byte is the int3 */
	uintptr_t fn;                /* in rax */
	uint64_t  a0, a1, a2;        /* rdi, rsi, rdx */
	uint64_t  sp;                /* 16-byte aligned at the call */
	uint64_t  rbx, r13, r14;     /* for resume_stub */
	uintptr_t resume;            /* the struct ym_resume, or 0 */
};

/* Has the agent's resume function marked the block (so the thread stands
 * in ym_inject_resume, dlopen done)? */
static int resumed(struct borrow *t, const struct call *c)
{
	uint64_t state = 0;
	return c->resume &&
	       mem_read(t, c->resume + offsetof(struct ym_resume, state), &state,
			sizeof state) == 0 && state == 1;
}

/* Make call c in the thread; the int3's rax in *ret, or 1 when the agent
 * resumed (resume.h).  0 done; -1 with err set (the thread is stopped
 * again, or gone: *gone). */
static int remote_call(struct borrow *t, const struct call *c, uint64_t *ret,
		       int *gone, char *err, size_t len)
{
	struct user_regs_struct r = t->regs;
	r.rip = t->code_at;
	r.rax = c->fn;
	r.rdi = c->a0;
	r.rsi = c->a1;
	r.rdx = c->a2;
	r.rbx = c->rbx;
	r.r13 = c->r13;
	r.r14 = c->r14;
	r.rsp = c->sp;
	r.orig_rax = (uint64_t)-1;   /* no syscall restart into our code */
	r.eflags &= ~(uint64_t)0x400;   /* DF clear, as the ABI wants */
	*gone = 0;
	if (mem_write(t, t->code_at, c->code, c->code_len) != 0) {
		fail(err, len, "cannot write the target's memory: %s", strerror(errno));
		return -1;
	}
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r) != 0 ||
	    ptrace(PTRACE_CONT, t->tid, 0, 0) != 0) {
		fail(err, len, "ptrace: cannot run the call in thread %ld: %s",
		     (long)t->tid, strerror(errno));
		return -1;
	}
	t->in_sigstop = 0;
	/* Test hook (tests/integration/test_faults.py): ymtop killed while
	 * the thread runs dlopen; it must get back by itself (resume.h). */
	const char *fault = getenv("YM_TEST_FAULT");
	if (fault && !strcmp(fault, "inject-call") && c->resume)
		raise(SIGKILL);
	double end = now_ms() + CALL_WAIT_MS;
	for (;;) {
		int st;
		int w = wait_stop(t->tid, &st, end - now_ms());
		if (w < 0) {
			*gone = 1;
			fail(err, len, "the process exited while the agent was loading");
			return -1;
		}
		if (w == 0) {
			ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
			if (wait_stop(t->tid, &st, 1e9) < 0)
				*gone = 1;
			fail(err, len, "dlopen did not return within %.0f s in thread %ld; "
			     "the thread was restored", CALL_WAIT_MS / 1000, (long)t->tid);
			return -1;
		}
		int sig = WSTOPSIG(st), ev = st >> 16;
		if (ev == PTRACE_EVENT_STOP) {   /* our interrupt, or a group stop */
			ptrace(PTRACE_CONT, t->tid, 0, 0);
			continue;
		}
		t->in_sigstop = 1;
		/* The agent's own SIGURG (or trap) once dlopen is done: the
		 * signal is ours, not to be delivered. */
		if ((sig == SIGURG || sig == SIGTRAP) && resumed(t, c)) {
			*ret = 1;
			return 0;
		}
		if (sig == SIGTRAP) {
			struct user_regs_struct now;
			if (ptrace(PTRACE_GETREGS, t->tid, 0, &now) == 0 &&
			    now.rip == t->code_at + c->code_len) {
				*ret = now.rax;
				return 0;
			}
		}
		siginfo_t si;
		if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) &&
		    ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) == 0 && si.si_code > 0) {
			fail(err, len, "the target faulted (signal %d) while loading the "
			     "agent; its thread was restored", sig);
			return -1;
		}
		keep_signal(t, sig);   /* delivered at the detach */
		t->in_sigstop = 0;
		ptrace(PTRACE_CONT, t->tid, 0, 0);
	}
}

/* Put back memory, registers and extended state.  0 when exact. */
static int restore(struct borrow *t)
{
	int rc = 0;
	if (t->code_saved && mem_write(t, t->code_at, t->code, sizeof t->code) != 0)
		rc = -1;
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &t->regs) != 0)
		rc = -1;
	if (t->xlen) {
		struct iovec iov = { t->xstate, t->xlen };
		if (ptrace(PTRACE_SETREGSET, t->tid, (void *)NT_X86_XSTATE, &iov) != 0)
			rc = -1;
	}
	return rc;
}

static int read_string(struct borrow *t, uintptr_t at, char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		char c;
		if (mem_read(t, at + n, &c, 1) != 0 || c == '\0')
			break;
		buf[n++] = c;
	}
	buf[n] = '\0';
	return (int)n;
}

/* The registers the thread gets back when ymtop is gone (resume.h): its
 * own, with an interrupted system call set up to restart as the kernel
 * would have restarted it (rt_sigreturn restarts nothing). */
static void fill_frame(const struct borrow *t, uint64_t xs_at, ucontext_t *uc)
{
	struct user_regs_struct r = t->regs;
	if ((int64_t)r.orig_rax >= 0) {
		switch ((int64_t)r.rax) {
		case -512: case -513: case -514:   /* ERESTARTSYS, NOINTR, NOHAND */
			r.rax = r.orig_rax;
			r.rip -= 2;
			break;
		case -516:                         /* ERESTART_RESTARTBLOCK */
			r.rax = SYS_restart_syscall;
			r.rip -= 2;
			break;
		}
	}
	memset(uc, 0, sizeof *uc);
	uc->uc_flags = 0x7;   /* UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS */
	greg_t *g = uc->uc_mcontext.gregs;
	g[REG_R8] = (greg_t)r.r8;    g[REG_R9] = (greg_t)r.r9;
	g[REG_R10] = (greg_t)r.r10;  g[REG_R11] = (greg_t)r.r11;
	g[REG_R12] = (greg_t)r.r12;  g[REG_R13] = (greg_t)r.r13;
	g[REG_R14] = (greg_t)r.r14;  g[REG_R15] = (greg_t)r.r15;
	g[REG_RDI] = (greg_t)r.rdi;  g[REG_RSI] = (greg_t)r.rsi;
	g[REG_RBP] = (greg_t)r.rbp;  g[REG_RBX] = (greg_t)r.rbx;
	g[REG_RDX] = (greg_t)r.rdx;  g[REG_RAX] = (greg_t)r.rax;
	g[REG_RCX] = (greg_t)r.rcx;  g[REG_RSP] = (greg_t)r.rsp;
	g[REG_RIP] = (greg_t)r.rip;  g[REG_EFL] = (greg_t)r.eflags;
	g[REG_CSGSFS] = (greg_t)((r.cs & 0xffff) | (r.ss & 0xffff) << 48);
	uc->uc_mcontext.fpregs = (fpregset_t)(uintptr_t)xs_at;
}

/* The XSAVE image as a signal frame carries it: the software bytes of the
 * FXSAVE area describe it, and a second magic word follows it. */
static void fill_xsave(const struct borrow *t, unsigned char *xs)
{
	memcpy(xs, t->xstate, t->xlen);
	struct {
		uint32_t magic1, extended_size;
		uint64_t xfeatures;
		uint32_t xstate_size, pad[7];
	} sw;
	memcpy(&sw, xs + 464, sizeof sw);
	if (sw.magic1 != 0x46505853U) {   /* FP_XSTATE_MAGIC1 */
		uint64_t bv;
		memcpy(&bv, xs + 512, sizeof bv);
		memset(&sw, 0, sizeof sw);
		sw.magic1 = 0x46505853U;
		sw.xfeatures = bv | 3;
	}
	sw.xstate_size = (uint32_t)t->xlen;
	sw.extended_size = (uint32_t)t->xlen + 4;
	memcpy(xs + 464, &sw, sizeof sw);
	uint32_t magic2 = 0x46505845U;   /* FP_XSTATE_MAGIC2 */
	memcpy(xs + t->xlen, &magic2, sizeof magic2);
}

/* dlopen(agent) in the stopped thread t (its code bytes saved).  0 on
 * success, -1 (err), -2 the process is gone.
 *
 * Below the thread's red zone: the agent's path, then (when the C library
 * has dlsym) the struct ym_resume, the XSAVE image and the signal frame
 * that let the thread return by itself should ymtop die meanwhile
 * (resume.h), then the stack of the call. */
static int dlopen_agent(struct borrow *t, const struct libc_syms *s,
			const char *agent, char *err, size_t len)
{
	size_t plen = strlen(agent) + 1;
	if (plen > PATH_GAP - 16) {
		fail(err, len, "agent path too long: %s", agent);
		return -1;
	}
	uint64_t path_at = (t->regs.rsp - 128 - plen) & ~(uint64_t)15;
	struct call c = {
		.code = stub, .code_len = sizeof stub, .fn = s->dlopen,
		.a0 = path_at, .a1 = RTLD_NOW_FLAG,
		.sp = (t->regs.rsp - 128 - PATH_GAP) & ~(uint64_t)15,
	};
	if (mem_write(t, path_at, agent, plen) != 0) {
		fail(err, len, "cannot write the target's memory: %s", strerror(errno));
		return -1;
	}
	if (s->dlsym && t->xlen >= 576 && t->xlen <= XSTATE_MAX - 64) {
		struct ym_resume b = { .magic = YM_RESUME_MAGIC };
		uint64_t block_at = (path_at - sizeof b) & ~(uint64_t)15;
		uint64_t xs_at = (block_at - t->xlen - 4) & ~(uint64_t)63;
		size_t frame_len = 8 + sizeof(ucontext_t) + 128;   /* + siginfo */
		uint64_t frame_at = (xs_at - frame_len) & ~(uint64_t)15;
		unsigned char *xs = calloc(1, t->xlen + 4);
		unsigned char *frame = calloc(1, frame_len);
		int ok = xs && frame;
		if (ok) {
			b.frame = frame_at;
			b.ucontext = frame_at + 8;
			snprintf(b.symbol, sizeof b.symbol, "%s", YM_RESUME_SYMBOL);
			fill_xsave(t, xs);
			ucontext_t uc;
			fill_frame(t, xs_at, &uc);
			memcpy(frame + 8, &uc, sizeof uc);
			ok = mem_write(t, block_at, &b, sizeof b) == 0 &&
			     mem_write(t, xs_at, xs, t->xlen + 4) == 0 &&
			     mem_write(t, frame_at, frame, frame_len) == 0;
		}
		free(xs);
		free(frame);
		if (ok) {
			c.code = resume_stub;
			c.code_len = sizeof resume_stub;
			c.rbx = block_at;
			c.r13 = block_at + offsetof(struct ym_resume, symbol);
			c.r14 = s->dlsym;
			c.resume = block_at;
			c.sp = (frame_at - 64) & ~(uint64_t)15;
		}
	}
	uint64_t handle = 0;
	int gone = 0;
	if (remote_call(t, &c, &handle, &gone, err, len) != 0)
		return gone ? -2 : -1;
	if (handle != 0)
		return 0;
	char why[256] = "unknown reason";
	uint64_t msg = 0;
	struct call e = { .code = stub, .code_len = sizeof stub, .fn = s->dlerror,
			  .sp = c.sp };
	if (s->dlerror && remote_call(t, &e, &msg, &gone, err, len) == 0 && msg)
		read_string(t, msg, why, sizeof why);
	if (strstr(why, YM_RESUME_SYMBOL))
		fail(err, len, "%s loaded in the target but is not ymtop's agent of this "
		     "version (no %s); set YM_AGENT to this ymtop's libymagent.so",
		     agent, YM_RESUME_SYMBOL);
	else if (strstr(why, "Permission denied")) {
		struct pstatus ps;
		unsigned long uid = read_status(t->pid, &ps) == 0 ? ps.uid : (uid_t)-1;
		fail(err, len, "the target's user (uid %lu) may not read the agent %s "
		     "(the file, or a directory above it, e.g. a private home); install "
		     "ymtop where every user can read it (make install), or set YM_AGENT "
		     "to a copy that user can read", uid, agent);
	} else
		fail(err, len, "dlopen(\"%s\") failed in the target: %s", agent, why);
	return gone ? -2 : -1;
}

/* A call of fn(a0, a1, a2) in the thread, below its red zone; a string
 * argument `str` (or NULL) is written there and passed as a0.  The
 * call's return value (an int) in *ret.  0 done, -1 failed, -2 gone. */
static int small_call(struct borrow *t, uintptr_t fn, const char *str,
		      uint64_t a0, uint64_t a1, uint64_t a2, int64_t *ret,
		      char *err, size_t len)
{
	uint64_t str_at = (t->regs.rsp - 128 - 64) & ~(uint64_t)15;
	if (str) {
		if (strlen(str) >= 64 || mem_write(t, str_at, str, strlen(str) + 1) != 0) {
			fail(err, len, "cannot write the target's memory: %s",
			     strerror(errno));
			return -1;
		}
		a0 = str_at;
	}
	struct call c = {
		.code = stub, .code_len = sizeof stub, .fn = fn,
		.a0 = a0, .a1 = a1, .a2 = a2,
		.sp = (t->regs.rsp - 128 - PATH_GAP) & ~(uint64_t)15,
	};
	uint64_t v = 0;
	int gone = 0;
	if (remote_call(t, &c, &v, &gone, err, len) != 0)
		return gone ? -2 : -1;
	*ret = (int32_t)v;
	return 0;
}

/* Bring the agent into a target that cannot open its path (another mount
 * namespace: a container) without writing to the target's filesystem:
 * the target creates a memfd (or, without memfd_create, an unnamed
 * O_TMPFILE file in its /dev/shm or /tmp), ymtop fills it through
 * /proc/PID/fd/N, and the target dlopens /proc/self/fd/N.  The file's
 * only name is the descriptor, closed once dlopen has mapped it (the
 * mapping keeps it).  0 with the descriptor in *fd; -1 (err); -2 gone. */
static int bring_agent(struct borrow *t, const struct libc_syms *s,
		       const char *agent, int *fd, char *err, size_t len)
{
	int64_t r = -1;
	int rc;
	if (s->memfd_create) {
		rc = small_call(t, s->memfd_create, "libymagent.so", 0,
				1 /* MFD_CLOEXEC */, 0, &r, err, len);
		if (rc != 0)
			return rc;
	}
	static const char *const dirs[] = { "/dev/shm", "/tmp" };
	for (size_t i = 0; r < 0 && s->open && i < sizeof dirs / sizeof *dirs; i++) {
		rc = small_call(t, s->open, dirs[i], 0,
				O_TMPFILE | O_RDWR | O_CLOEXEC, 0700, &r, err, len);
		if (rc != 0)
			return rc;
	}
	if (r < 0 || r > INT_MAX) {
		fail(err, len, "process %ld could create no memfd nor unnamed file to "
		     "bring the agent into its mount namespace; copy libymagent.so into "
		     "it and set YM_AGENT to its path there", (long)t->pid);
		return -1;
	}
	*fd = (int)r;
	char there[96];
	snprintf(there, sizeof there, "/proc/%ld/fd/%d", (long)t->pid, *fd);
	int out = open(there, O_WRONLY | O_CLOEXEC);
	int in = open(agent, O_RDONLY | O_CLOEXEC);
	int ok = out >= 0 && in >= 0;
	char buf[65536];
	ssize_t n;
	while (ok && (n = read(in, buf, sizeof buf)) != 0) {
		if (n < 0 || write(out, buf, (size_t)n) != n)
			ok = 0;
	}
	int e = errno;
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	if (!ok) {
		fail(err, len, "cannot copy %s into process %ld's %s: %s", agent,
		     (long)t->pid, there, strerror(e));
		int64_t ignored;
		if (small_call(t, s->close, NULL, (uint64_t)*fd, 0, 0, &ignored,
			       err, len) == -2)
			return -2;
		return -1;
	}
	return 0;
}

/* Load the agent through the stopped thread t: by its path, or brought
 * in through a memfd (bring).  0 on success, -1 (err), -2 gone. */
static int load_agent(struct borrow *t, const struct libc_syms *s,
		      const char *agent, int bring, char *err, size_t len)
{
	t->code_at = s->entry;
	if (mem_read(t, t->code_at, t->code, sizeof t->code) != 0) {
		fail(err, len, "cannot read the target's memory: %s", strerror(errno));
		return -1;
	}
	t->code_saved = 1;
	if (!bring)
		return dlopen_agent(t, s, agent, err, len);
	if (!s->close || (!s->memfd_create && !s->open)) {
		fail(err, len, "the target's C library lacks memfd_create, open or "
		     "close to bring the agent in; copy libymagent.so into the "
		     "process's mount namespace and set YM_AGENT to its path there");
		return -1;
	}
	int fd;
	int rc = bring_agent(t, s, agent, &fd, err, len);
	if (rc != 0)
		return rc;
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	rc = dlopen_agent(t, s, path, err, len);
	if (rc == -2)
		return -2;
	char why[16];
	int64_t ignored;
	if (small_call(t, s->close, NULL, (uint64_t)fd, 0, 0, &ignored, why,
		       sizeof why) == -2)
		return -2;
	return rc;
}

/* The agent is loaded but has no segment: a daemon that forked away from
 * the process the agent started in and has not allocated since (an idle
 * nginx master).  Make the thread call the agent's ymagent_start, found
 * with dlsym(RTLD_DEFAULT) (preloaded agents are global), which creates the
 * segment.  0; -1 (err); -2 gone. */
static int start_agent(struct borrow *t, const struct libc_syms *s,
		       const char *name, char *err, size_t len)
{
	t->code_at = s->entry;
	if (mem_read(t, t->code_at, t->code, sizeof t->code) != 0) {
		fail(err, len, "cannot read the target's memory: %s", strerror(errno));
		return -1;
	}
	t->code_saved = 1;
	static const char sym[] = "ymagent_start";
	uint64_t str_at = (t->regs.rsp - 128 - 64) & ~(uint64_t)15;
	if (!s->dlsym || mem_write(t, str_at, sym, sizeof sym) != 0) {
		fail(err, len, "process %ld (%s) has the agent loaded but no segment, and "
		     "ymtop cannot reach the agent to start it", (long)t->pid, name);
		return -1;
	}
	struct call c = {
		.code = stub, .code_len = sizeof stub, .fn = s->dlsym,
		.a0 = 0 /* RTLD_DEFAULT */, .a1 = str_at,
		.sp = (t->regs.rsp - 128 - PATH_GAP) & ~(uint64_t)15,
	};
	uint64_t fn = 0, ok = 0;
	int gone = 0;
	if (remote_call(t, &c, &fn, &gone, err, len) != 0)
		return gone ? -2 : -1;
	if (!fn) {
		fail(err, len, "process %ld (%s) has the agent loaded but no segment, and "
		     "the agent has no ymagent_start (an older agent, or loaded "
		     "privately): restart it under this version's agent", (long)t->pid,
		     name);
		return -1;
	}
	c.fn = (uintptr_t)fn;
	c.a0 = c.a1 = 0;
	if (remote_call(t, &c, &ok, &gone, err, len) != 0)
		return gone ? -2 : -1;
	if ((int32_t)ok != 1) {
		fail(err, len, "process %ld (%s) has the agent loaded but it is passive: "
		     "disabled (YM_DISABLE), not following forks (YM_FOLLOW_FORK=0), or "
		     "it failed at start (see its stderr)", (long)t->pid, name);
		return -1;
	}
	return 0;
}

/* ---- Choosing a thread ---- */

static char task_state(pid_t pid, pid_t tid)
{
	char path[96], buf[512];
	snprintf(path, sizeof path, "/proc/%ld/task/%ld/stat", (long)pid, (long)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static int list_tids(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	DIR *d = opendir(path);
	if (!d)
		return neg_errno();
	int n = 0;
	tids[n++] = pid;   /* the main thread first: usually blocked, idle */
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		long v = strtol(e->d_name, NULL, 10);
		if (v > 0 && v != pid)
			tids[n++] = (pid_t)v;
	}
	closedir(d);
	/* Sleeping threads first (stable: the main thread leads among them):
	 * one blocked in a system call is cheap to stop and rarely inside
	 * the allocator; a running one may be anywhere. */
	int k = 0;
	for (int i = 0; i < n; i++)
		if (task_state(pid, tids[i]) == 'S') {
			pid_t v = tids[i];
			memmove(&tids[k + 1], &tids[k], (size_t)(i - k) * sizeof *tids);
			tids[k++] = v;
		}
	return n;
}

/* Is pid another ymtop (this program, or one named so)?  Two ymtop -p
 * started at once on a fresh target: the second finds the first tracing
 * it, which is no debugger to blame. */
static int is_ymtop(pid_t pid)
{
	char path[64], comm[32] = "";
	struct stat a, b;
	snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
	if (stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return 1;
	snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, comm, sizeof comm - 1);
	close(fd);
	if (n <= 0)
		return 0;
	comm[n] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	return !strcmp(comm, "ymtop");
}

#define OTHER_WAIT_MS (SAFE_WAIT_MS + CALL_WAIT_MS + 1000.0)

/* When another ymtop traces pid (it is loading the agent), wait until it
 * lets go.  1 it did (look again), 0 the tracer is no ymtop, -1 it kept
 * tracing past any injection's time (err set). */
static int wait_other_ymtop(pid_t pid, pid_t tracer, char *err, size_t len)
{
	if (!tracer || !is_ymtop(tracer))
		return 0;
	double end = now_ms() + OTHER_WAIT_MS;
	struct pstatus ps;
	while (read_status(pid, &ps) == 0 && ps.tracer == tracer) {
		if (now_ms() > end) {
			fail(err, len, "process %ld is traced by another ymtop (pid %ld) "
			     "for more than %.0f s; stop it, then retry", (long)pid,
			     (long)tracer, OTHER_WAIT_MS / 1000);
			return -1;
		}
		nap_us(5000);
	}
	return 1;
}

static void eperm_reason(pid_t pid, char *err, size_t len)
{
	struct pstatus ps;
	if (read_status(pid, &ps) == 0 && ps.tracer) {
		fail(err, len, "process %ld is already traced by pid %ld (a debugger or "
		     "strace); detach it, then retry", (long)pid, (long)ps.tracer);
		return;
	}
	int scope = -1;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	if (scope >= 1)
		fail(err, len, "ptrace of process %ld refused: kernel.yama.ptrace_scope "
		     "is %d (%s); run ymtop as root or with CAP_SYS_PTRACE, or set "
		     "ptrace_scope to 0", (long)pid, scope,
		     scope == 1 ? "only ancestors may trace" :
		     scope == 2 ? "only CAP_SYS_PTRACE may trace" : "no tracing at all");
	else
		fail(err, len, "ptrace of process %ld refused (EPERM): ymtop needs the "
		     "same user and no setuid change, or CAP_SYS_PTRACE; in a container "
		     "ptrace may be forbidden by seccomp", (long)pid);
}

/* Stop tid.  1 stopped (t filled), 0 thread gone, -1 error (err), -2 traced
 * by another ymtop. */
static int seize(struct borrow *t, pid_t tid, char *err, size_t len)
{
	t->tid = tid;
	t->npending = 0;
	t->in_sigstop = 0;
	t->code_saved = 0;
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
		if (errno == ESRCH)
			return 0;
		struct pstatus ps;
		if (errno == EPERM && read_status(t->pid, &ps) == 0 && ps.tracer &&
		    is_ymtop(ps.tracer))
			return -2;   /* another ymtop got there first */
		if (errno == EPERM)
			eperm_reason(t->pid, err, len);
		else
			fail(err, len, "ptrace(PTRACE_SEIZE, %ld): %s", (long)tid,
			     strerror(errno));
		return -1;
	}
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return 0;
	}
	for (;;) {
		int st;
		/* A thread in an uninterruptible wait stops when it leaves it;
		 * the interrupt cannot be withdrawn, so wait as long as it takes. */
		if (wait_stop(tid, &st, 1e9) < 0)
			return 0;
		int sig = WSTOPSIG(st), ev = st >> 16;
		if (ev == PTRACE_EVENT_STOP) {
			if (sig != SIGTRAP) {   /* group stop: the process is stopped */
				ptrace(PTRACE_DETACH, tid, 0, 0);
				fail(err, len, "process %ld is stopped (signal %d); resume it "
				     "with kill -CONT %ld, then retry", (long)t->pid, sig,
				     (long)t->pid);
				return -1;
			}
			t->in_sigstop = 0;
			break;
		}
		/* A signal on its way: keep it for the detach.  The registers are
		 * those of the interrupted code, as in our interrupt stop. */
		keep_signal(t, sig);
		t->in_sigstop = 1;
		break;
	}
	t->stopped_at = now_ms();
	if (ptrace(PTRACE_GETREGS, tid, 0, &t->regs) != 0) {
		let_go(t);
		return 0;
	}
	return 1;
}

/* ---- The whole operation ---- */

/* Another ymtop started tracing pid after our checks: wait until it is
 * done.  1 when it loaded the agent, else -1 (err). */
static int after_other_ymtop(pid_t pid, char *err, size_t len)
{
	struct pstatus ps;
	struct tmaps m;
	if (read_status(pid, &ps) != 0) {
		fail(err, len, "no process with pid %ld", (long)pid);
		return -1;
	}
	if (wait_other_ymtop(pid, ps.tracer, err, len) < 0)
		return -1;
	if (read_maps(pid, &m) == 0 && m.has_agent)
		return 1;
	fail(err, len, "another ymtop (pid %ld) was loading the agent into process "
	     "%ld and did not succeed (see its message); retry", (long)ps.tracer,
	     (long)pid);
	return -1;
}

/* 0: go on; 1: the agent is loaded, by another ymtop that was doing it
 * when we looked (other: we waited for one); 2: another ymtop was
 * tracing the process and is done, look again; -1: refused (err). */
static int precheck(pid_t pid, struct pstatus *ps, struct tmaps *m, int other,
		    char *err, size_t len)
{
	int rc = read_status(pid, ps);
	if (rc == -ENOENT) {
		fail(err, len, "no process with pid %ld", (long)pid);
		return -1;
	}
	if (rc < 0) {
		fail(err, len, "cannot read /proc/%ld/status: %s", (long)pid, strerror(-rc));
		return -1;
	}
	if (ps->state == 'Z' || ps->state == 'X') {
		fail(err, len, "process %ld (%s) has exited (zombie)", (long)pid, ps->name);
		return -1;
	}
	if (ps->tgid && ps->tgid != pid) {
		fail(err, len, "%ld is a thread of process %ld (%s), not a process; "
		     "run ymtop -p %ld", (long)pid, (long)ps->tgid, ps->name,
		     (long)ps->tgid);
		return -1;
	}
	if (ps->tracer) {
		int w = wait_other_ymtop(pid, ps->tracer, err, len);
		if (w > 0)
			return 2;   /* look again: the agent may be there now */
		if (w < 0)
			return -1;
		fail(err, len, "process %ld (%s) is already traced by pid %ld (a debugger "
		     "or strace); detach it, then retry", (long)pid, ps->name,
		     (long)ps->tracer);
		return -1;
	}
	if (ps->state == 'T' || ps->state == 't') {
		fail(err, len, "process %ld (%s) is stopped; resume it with kill -CONT "
		     "%ld, then retry", (long)pid, ps->name, (long)pid);
		return -1;
	}
	if (ps->seccomp == 1) {
		fail(err, len, "process %ld (%s) runs in strict seccomp mode: it may not "
		     "open or map the agent", (long)pid, ps->name);
		return -1;
	}
	int mach = exe_machine(pid);
	if (mach == -1) {
		fail(err, len, "cannot read /proc/%ld/exe: %s (run ymtop as the "
		     "process's user or as root)", (long)pid, strerror(errno));
		return -1;
	}
	if (mach != 0) {
		fail(err, len, "process %ld (%s) is not an x86-64 program (%s); ymtop "
		     "injects into x86-64 processes only", (long)pid, ps->name,
		     mach == -2 ? "32-bit" : "other machine");
		return -1;
	}
	rc = read_maps(pid, m);
	if (rc < 0) {
		fail(err, len, "cannot read /proc/%ld/maps: %s", (long)pid, strerror(-rc));
		return -1;
	}
	if (m->has_agent && other) {
		return 1;   /* another ymtop loaded it meanwhile */
	}
	if (m->has_agent)
		return 3;   /* loaded, no segment yet: start it (start_agent) */
	if (!m->have_libc) {
		fail(err, len, "process %ld (%s) is statically linked (no libc.so mapped): "
		     "the agent cannot be loaded into it", (long)pid, ps->name);
		return -1;
	}
	return 0;
}

int inject_agent(pid_t pid, const char *agent, int bring,
		 struct inject_result *res, char *err, size_t errlen)
{
	struct pstatus ps;
	struct tmaps m;
	struct libc_syms s;
	memset(res, 0, sizeof *res);
	int pc = precheck(pid, &ps, &m, 0, err, errlen);
	for (int i = 0; pc == 2 && i < 4; i++)
		pc = precheck(pid, &ps, &m, 1, err, errlen);
	if (pc == 1)
		return 1;
	int start = pc == 3;   /* the agent is there: start it, load nothing */
	if (start)
		pc = 0;
	if (pc == 2)
		fail(err, errlen, "process %ld is traced by one ymtop after another; "
		     "retry when they are done", (long)pid);
	if (pc != 0 || libc_symbols(pid, &m, &s, err, errlen) != 0)
		return -1;

	struct borrow t = { .pid = pid, .mem = -1 };
	struct chain chain;
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
	t.mem = open(path, O_RDWR | O_CLOEXEC);
	if (t.mem < 0) {
		fail(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	t.xstate = calloc(1, XSTATE_MAX);
	pid_t *tids = calloc(MAX_TIDS, sizeof *tids);
	if (!t.xstate || !tids) {
		fail(err, errlen, "out of memory");
		close(t.mem);
		free(t.xstate);
		free(tids);
		return -1;
	}

	/* From the first stop to the last detach, ymtop's own signals wait:
	 * a SIGINT must not leave the target stopped or half-changed. */
	chain_open(&chain, pid, &s, &m);
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);

	int rc = -1, chosen = 0;
	double deadline = now_ms() + SAFE_WAIT_MS;
	while (!chosen) {
		int n = list_tids(pid, tids, MAX_TIDS);
		if (n <= 0) {
			fail(err, errlen, "no process with pid %ld", (long)pid);
			goto out;
		}
		for (int i = 0; i < n && !chosen; i++) {
			int sr = seize(&t, tids[i], err, errlen);
			if (sr == -2) {
				rc = after_other_ymtop(pid, err, errlen);
				goto out;
			}
			if (sr < 0)
				goto out;
			if (sr == 0)
				continue;
			res->attempts++;
			if (safe_moment(&t, &chain)) {
				chosen = 1;
				break;
			}
			let_go(&t);
		}
		if (chosen)
			break;
		if (now_ms() > deadline) {
			fail(err, errlen, "no thread of process %ld left the allocator or the "
			     "dynamic loader within %.0f s; nothing was changed, retry",
			     (long)pid, SAFE_WAIT_MS / 1000);
			goto out;
		}
		nap_us(2000);
	}

	/* t is stopped at a safe moment: from here every path restores. */
	double t0 = t.stopped_at;
	res->tid = t.tid;
	struct iovec iov = { t.xstate, XSTATE_MAX };
	if (ptrace(PTRACE_GETREGSET, t.tid, (void *)NT_X86_XSTATE, &iov) != 0) {
		fail(err, errlen, "cannot read thread %ld's extended register state: %s",
		     (long)t.tid, strerror(errno));
		let_go(&t);
		goto out;
	}
	t.xlen = iov.iov_len;
	/* Test hook (tests/integration/test_faults.py): ymtop killed with a
	 * thread stopped and examined, before anything is written. */
	const char *fault = getenv("YM_TEST_FAULT");
	if (fault && !strcmp(fault, "inject-seized"))
		raise(SIGKILL);
	/* Test hook (test_inject.py): a slow injection, for a second ymtop
	 * started meanwhile. */
	if (fault && !strcmp(fault, "inject-hold"))
		nap_us(1500000);
	restart_eintr_wait(&t);
	int lr = start ? start_agent(&t, &s, ps.name, err, errlen)
		       : load_agent(&t, &s, agent, bring, err, errlen);
	if (lr == -2)
		goto out;   /* the process is gone */
	if (restore(&t) != 0 && lr == 0) {
		fail(err, errlen, "the agent is loaded but thread %ld's state could not be "
		     "restored exactly: %s", (long)t.tid, strerror(errno));
		lr = -1;
	}
	let_go(&t);
	res->pause_ms = now_ms() - t0;
	rc = lr == 0 ? 0 : -1;
	if (lr != 0 && ps.seccomp == 2) {
		size_t used = strlen(err);
		snprintf(err + used, errlen - used, " (process %ld runs under a seccomp "
			 "filter, which may forbid what loading the agent needs; start it "
			 "with LD_PRELOAD instead)", (long)pid);
	}
out:
	sigprocmask(SIG_SETMASK, &old, NULL);
	chain_close(&chain);
	close(t.mem);
	free(t.xstate);
	free(tids);
	return rc;
}
