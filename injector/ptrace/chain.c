/*
 * chain: see chain.h.
 *
 * Whether a thread is inside the allocator or the dynamic loader is told
 * by its return addresses, found by unwinding it with libdw's CFI
 * unwinder.  Words that merely lie on its stack prove nothing: a dead
 * slot of a live frame keeps a stale "_int_malloc+2861" for as long as
 * the thread sleeps, and a scan of the stack refused idle bash and nginx
 * for good.
 *
 * libdw gets the thread through our own callbacks rather than
 * dwfl_linux_proc_attach: the registers are the ones we already read at
 * the stop, the memory comes through our /proc/PID/mem descriptor, and
 * nothing in libdw stops, attaches or detaches anything.  The modules'
 * files are opened through /proc/PID/map_files or /proc/PID/root, so a
 * target in another mount namespace is unwound with its own libraries,
 * never the host's files of the same name. */

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "ptrace/chain.h"
#include "ptrace/procfs.h"

#define STACK_SCAN     256       /* bytes above rsp checked for callers */
#define CHAIN_MAX 1024   /* frames examined; deeper ones are not looked at */

/* Which target /proc/PID/root the module files are opened under (find_elf
 * gets no user argument; ymtop injects into one process at a time). */
static pid_t chain_pid;

static int in_range(const struct range *r, uint64_t a)
{
	return a >= r->lo && a < r->hi;
}

/* Is a in code that may hold a lock dlopen or the agent takes?  pc: a
 * is where the thread stopped, not a return address of its chain. */
static int in_locking(const struct chain *c, uint64_t a, int pc)
{
	if (in_range(c->malloc_text, a) || in_range(c->ldso, a))
		return 1;
	int n = pc ? c->libc->nlock : c->libc->nlock_any;
	for (int i = 0; i < n; i++)
		if (in_range(&c->libc->lock_text[i], a))
			return 1;
	return 0;
}

static int chain_find_elf(Dwfl_Module *mod, void **userdata, const char *name,
			  Dwarf_Addr base, char **file_name, Elf **elfp)
{
	if (name[0] != '/')   /* [vdso] and the like: from the target's memory */
		return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name,
						elfp);
	Dwarf_Addr lo = 0;
	dwfl_module_info(mod, NULL, &lo, NULL, NULL, NULL, NULL, NULL);
	int fd = inject_open_mapped(chain_pid, (uintptr_t)lo, name);
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

/* Before any stop: reading the maps and the module list costs nothing to
 * the target.  On failure c->dwfl stays NULL and safe_moment falls back
 * to the stack scan. */
void inject_chain_open(struct chain *c, pid_t pid, const struct libc_syms *s,
		       const struct tmaps *m)
{
	memset(c, 0, sizeof *c);
	c->malloc_text = &s->malloc_text;
	c->ldso = &m->ldso;
	c->libc = s;
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

void inject_chain_close(struct chain *c)
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
	if (in_locking(c, pc, activation)) {
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

int inject_chain_clear(struct borrow *t, struct chain *c)
{
	return chain_clear(c, t);
}

/* musl without CFI (Debian's libc.so has none): a thread stopped inside
 * libc cannot be unwound.  It may run dlopen when it waits in a system
 * call that none of musl's code makes while it holds a lock dlopen or the
 * agent takes (the allocator's, the loader's, the thread list's,
 * pthread_create's: they wait in futex, and map and read files): sleeps,
 * polls, signal and child waits, and reads of a pipe, socket or terminal
 * (dlopen reads the library's file, a regular one).  What stays unseen:
 * such a call made by an atfork handler or a library's constructor. */
static int musl_blocked_call(const struct borrow *t)
{
	switch ((long)t->regs.orig_rax) {
	case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_pause:
	case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_rt_sigsuspend:
	case SYS_rt_sigtimedwait: case SYS_wait4: case SYS_waitid:
	case SYS_accept: case SYS_accept4:
		return 1;
	case SYS_read: case SYS_readv: case SYS_recvfrom: case SYS_recvmsg: {
		char path[64];
		struct stat st;
		snprintf(path, sizeof path, "/proc/%ld/fd/%ld", (long)t->pid,
			 (long)(int)t->regs.rdi);
		return stat(path, &st) == 0 && !S_ISREG(st.st_mode) &&
		       !S_ISBLK(st.st_mode);
	}
	default:
		return 0;
	}
}

/* May the thread run dlopen now?  Not inside the allocator or ld.so: not
 * with its PC there, nor with a return address into them in its call
 * chain (a thread waiting for an arena lock, or running a constructor
 * under dlopen).  When the chain cannot be unwound: under musl, the
 * waits of musl_blocked_call; under glibc, the old conservative test: no
 * word in the top STACK_SCAN bytes of its stack may point into them.  It refuses some idle threads for good (stale
 * words in dead slots), but a wrong "safe" deadlocks someone's process in
 * dlopen, while a refusal only fails ymtop with a message. */
int inject_safe_moment(struct borrow *t, struct chain *c)
{
	if (in_locking(c, t->regs.rip, 1))
		return 0;
	int clear = chain_clear(c, t);
	if (clear >= 0)
		return clear;
	if (c->libc->own_loader)
		return musl_blocked_call(t);
	uint64_t words[STACK_SCAN / 8];
	if (inject_mem_read(t, t->regs.rsp, words, sizeof words) != 0)
		return 1;   /* top of an unreadable stack: nothing to see */
	for (size_t i = 0; i < sizeof words / sizeof *words; i++)
		if (in_locking(c, words[i], 0))
			return 0;
	return 1;
}
