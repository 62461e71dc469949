/* load: see load.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "ptrace/agentsym.h"
#include "ptrace/load.h"
#include "ptrace/procfs.h"
#include "ptrace/util.h"
#include "resume.h"
#include "ymtop/detach.h"

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
_Static_assert(sizeof resume_stub == INJECT_CODE_MAX,
	       "struct borrow saves the bytes the longest stub overwrites");

/* Every other call's stub, when a frame could be written (survive):
 * should ymtop die during the call, the thread gets back by itself.  The
 * call, its result into rdi, then the mark: a getpid at whose entry ymtop
 * (running the thread under PTRACE_SYSCALL) takes the result and ends
 * the call (borrow.h).  ymtop gone, the getpid runs, and rt_sigreturn
 * over the signal frame ymtop wrote (rbx: its ucontext) puts back every
 * register, the extended state and the signal mask, as after the loading
 * code (resume.h).  The int3 is where a thread of a process that handles
 * SIGURG is sent after the mark. */
static const unsigned char survive_stub[] = {
	0xff, 0xd0,                              /* call *%rax              */
	0x48, 0x89, 0xc7,                        /* mov  %rax,%rdi          */
	0xb8, SYS_getpid, 0, 0, 0,               /* mov  $SYS_getpid,%eax   */
	0x0f, 0x05,                              /* syscall: the mark       */
	0x48, 0x89, 0xdc,                        /* mov  %rbx,%rsp          */
	0xb8, SYS_rt_sigreturn, 0, 0, 0,         /* mov  $SYS_rt_sigreturn,%eax */
	0x0f, 0x05,                              /* syscall                 */
	0xcc,                                    /* int3                    */
};
#define SURVIVE_MARK_END 12   /* the mark's syscall ends there */
_Static_assert(sizeof survive_stub <= INJECT_CODE_MAX,
	       "struct borrow saves the bytes the longest stub overwrites");

/* 16-byte aligned, gap bytes below the thread's red zone (the 128 bytes
 * under its stack pointer that leaf functions use without moving it). */
static uint64_t below_red_zone(const struct borrow *t, uint64_t gap)
{
	return (t->regs.rsp - 128 - gap) & ~(uint64_t)15;
}

static int read_string(struct borrow *t, uintptr_t at, char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		char c;
		if (inject_mem_read(t, at + n, &c, 1) != 0 || c == '\0')
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

/* Below top: the XSAVE image and the signal frame rt_sigreturn reads to
 * put t back as it was stopped (fill_frame), its signal mask *mask (or
 * none, for resume.c to fill).  0 with the frame's address in *frame_at
 * (its ucontext 8 bytes above); -1 when it could not be written. */
static int write_frame(struct borrow *t, uint64_t top, const uint64_t *mask,
		       uint64_t *frame_at)
{
	uint64_t xs_at = (top - t->xlen - 4) & ~(uint64_t)63;
	size_t frame_len = 8 + sizeof(ucontext_t) + 128;   /* + siginfo */
	*frame_at = (xs_at - frame_len) & ~(uint64_t)15;
	unsigned char *xs = calloc(1, t->xlen + 4);
	unsigned char *frame = calloc(1, frame_len);
	int ok = xs && frame;
	if (ok) {
		fill_xsave(t, xs);
		ucontext_t uc;
		fill_frame(t, xs_at, &uc);
		if (mask)
			memcpy(&uc.uc_sigmask, mask, sizeof *mask);
		memcpy(frame + 8, &uc, sizeof uc);
		ok = inject_mem_write(t, xs_at, xs, t->xlen + 4) == 0 &&
		     inject_mem_write(t, *frame_at, frame, frame_len) == 0;
	}
	free(xs);
	free(frame);
	return ok ? 0 : -1;
}

/* The line after key in /proc/PID/status (tid 0) or
 * /proc/PID/task/TID/status, read into buf: a pointer just past the key,
 * or NULL. */
static const char *status_field(pid_t pid, pid_t tid, const char *key,
				char *buf, size_t size)
{
	char path[64];
	if (tid)
		snprintf(path, sizeof path, "/proc/%ld/task/%ld/status", (long)pid,
			 (long)tid);
	else
		snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	char want[16];
	snprintf(want, sizeof want, "\n%s", key);
	const char *p = strstr(buf, want);
	return p ? p + strlen(want) : NULL;
}

/* A hexadecimal mask of the status file ("SigBlk:", "SigCgt:"): 0 with
 * *v, or -1. */
static int status_mask(pid_t pid, pid_t tid, const char *key, uint64_t *v)
{
	char buf[4096], *end;
	const char *p = status_field(pid, tid, key, buf, sizeof buf);
	if (!p)
		return -1;
	*v = strtoull(p, &end, 16);
	return end == p ? -1 : 0;
}

/* The id the target sees of its process (tid 0) or of its thread tid:
 * the last of NSpid's (its own pid namespace's), or 0. */
static pid_t own_id(pid_t pid, pid_t tid)
{
	char buf[4096];
	const char *p = status_field(pid, tid, "NSpid:", buf, sizeof buf);
	long id = 0;
	while (p) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		id = v;
		p = end;
	}
	return (pid_t)id;
}

/* Make c (its sp set) a survive_stub call (borrow.h): the frame written
 * below the red zone, above the call's stack, which moves below it.  c
 * stays a plain stub call when the frame cannot be written (an XSAVE
 * image of an unexpected size, /proc unreadable). */
static void survivable(struct borrow *t, struct call *c)
{
	uint64_t mask, caught, frame_at;
	if (t->xlen < 576 || t->xlen > INJECT_XSTATE_MAX - 64 ||
	    status_mask(t->pid, t->tid, "SigBlk:", &mask) != 0 ||
	    status_mask(t->pid, 0, "SigCgt:", &caught) != 0 ||
	    write_frame(t, c->sp, &mask, &frame_at) != 0)
		return;
	c->code = survive_stub;
	c->code_len = sizeof survive_stub;
	c->rbx = frame_at + 8;
	c->sp = (frame_at - 64) & ~(uint64_t)15;
	c->survive = 1;
	/* Not where SIGURG is the program's, nor where the thread blocks
	 * it (no stop would come); sent by the ids the target sees (a
	 * container's pid namespace has its own). */
	c->urg_pid = own_id(t->pid, 0);
	c->urg_tid = own_id(t->pid, t->tid);
	c->urg = c->urg_pid > 0 && c->urg_tid > 0 &&
		 !((caught | mask) & (1ULL << (SIGURG - 1)));
	c->mark_end = SURVIVE_MARK_END;
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
		inject_fail(err, len, "agent path too long: %s", agent);
		return -1;
	}
	uint64_t path_at = below_red_zone(t, plen);
	struct call c = {
		.code = stub, .code_len = sizeof stub, .fn = s->dlopen,
		.a0 = path_at, .a1 = RTLD_NOW_FLAG,
		.sp = below_red_zone(t, PATH_GAP),
	};
	if (inject_mem_write(t, path_at, agent, plen) != 0) {
		inject_fail(err, len, "cannot write the target's memory: %s",
			    strerror(errno));
		return -1;
	}
	if (s->dlsym && t->xlen >= 576 && t->xlen <= INJECT_XSTATE_MAX - 64) {
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
			ok = inject_mem_write(t, block_at, &b, sizeof b) == 0 &&
			     inject_mem_write(t, xs_at, xs, t->xlen + 4) == 0 &&
			     inject_mem_write(t, frame_at, frame, frame_len) == 0;
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
	if (inject_remote_call(t, &c, &handle, &gone, err, len) != 0)
		return gone ? -2 : -1;
	if (handle != 0)
		return 0;
	char why[256] = "unknown reason";
	uint64_t msg = 0;
	struct call e = { .code = stub, .code_len = sizeof stub, .fn = s->dlerror,
			  .sp = c.sp };
	if (s->dlerror && inject_remote_call(t, &e, &msg, &gone, err, len) == 0 && msg)
		read_string(t, msg, why, sizeof why);
	if (strstr(why, YM_RESUME_SYMBOL))
		inject_fail(err, len, "%s loaded in the target but is not ymtop's "
			    "agent of this version (no %s); set YM_AGENT to this "
			    "ymtop's libymagent.so", agent, YM_RESUME_SYMBOL);
	else if (strstr(why, "Permission denied")) {
		struct pstatus ps;
		unsigned long uid = inject_read_status(t->pid, &ps) == 0 ? ps.uid : (uid_t)-1;
		inject_fail(err, len, "the target's user (uid %lu) may not read the "
			    "agent %s (the file, or a directory above it, e.g. a "
			    "private home); install ymtop where every user can read it "
			    "(make install), or set YM_AGENT to a copy that user can "
			    "read", uid, agent);
	} else
		inject_fail(err, len, "dlopen(\"%s\") failed in the target: %s", agent,
			    why);
	return gone ? -2 : -1;
}

/* A call of fn(a0, a1, a2) in the thread, below its red zone; a string
 * argument `str` (or NULL) is written there and passed as a0.  The
 * call's return value (an int) in *ret.  0 done, -1 failed, -2 gone. */
static int small_call(struct borrow *t, uintptr_t fn, const char *str,
		      uint64_t a0, uint64_t a1, uint64_t a2, int64_t *ret,
		      char *err, size_t len)
{
	uint64_t str_at = below_red_zone(t, 64);
	if (str) {
		if (strlen(str) >= 64 || inject_mem_write(t, str_at, str, strlen(str) + 1) != 0) {
			inject_fail(err, len, "cannot write the target's memory: %s",
				    strerror(errno));
			return -1;
		}
		a0 = str_at;
	}
	struct call c = {
		.code = stub, .code_len = sizeof stub, .fn = fn,
		.a0 = a0, .a1 = a1, .a2 = a2,
		.sp = below_red_zone(t, PATH_GAP),
	};
	survivable(t, &c);
	uint64_t v = 0;
	int gone = 0;
	if (inject_remote_call(t, &c, &v, &gone, err, len) != 0)
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
		inject_fail(err, len, "process %ld could create no memfd nor unnamed "
			    "file to bring the agent into its mount namespace; copy "
			    "libymagent.so into it and set YM_AGENT to its path there",
			    (long)t->pid);
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
		inject_fail(err, len, "cannot copy %s into process %ld's %s: %s", agent,
			    (long)t->pid, there, strerror(e));
		int64_t ignored;
		if (small_call(t, s->close, NULL, (uint64_t)*fd, 0, 0, &ignored,
			       err, len) == -2)
			return -2;
		return -1;
	}
	return 0;
}

/* Save the bytes at libc's entry point, where the stubs are written. */
static int save_code(struct borrow *t, const struct libc_syms *s, char *err,
		     size_t len)
{
	t->code_at = s->entry;
	if (inject_mem_read(t, t->code_at, t->code, sizeof t->code) != 0) {
		inject_fail(err, len, "cannot read the target's memory: %s",
			    strerror(errno));
		return -1;
	}
	t->code_saved = 1;
	return 0;
}

/* Load the agent through the stopped thread t: by its path, or brought
 * in through a memfd (bring).  0 on success, -1 (err), -2 gone. */
int inject_load_agent(struct borrow *t, const struct libc_syms *s,
		      const char *agent, int bring, char *err, size_t len)
{
	if (save_code(t, s, err, len) != 0)
		return -1;
	if (!bring)
		return dlopen_agent(t, s, agent, err, len);
	if (!s->close || (!s->memfd_create && !s->open)) {
		inject_fail(err, len, "the target's C library lacks memfd_create, open "
			    "or close to bring the agent in; copy libymagent.so into "
			    "the process's mount namespace and set YM_AGENT to its "
			    "path there");
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

/* Call the agent's exported function sym (no arguments, int result)
 * through the stopped thread t: at fn, or when fn is 0 found with
 * dlsym(RTLD_DEFAULT) (a preloaded agent's symbols are global).  0 and
 * *ret; 1 when the process has no such global symbol; -1 (err); -2
 * gone. */
static int call_agent(struct borrow *t, const struct libc_syms *s,
		      const char *sym, uint64_t fn, int32_t *ret, char *err,
		      size_t len)
{
	if (save_code(t, s, err, len) != 0)
		return -1;
	struct call c = {
		.code = stub, .code_len = sizeof stub, .fn = s->dlsym,
		.a0 = 0 /* RTLD_DEFAULT */,
		.sp = below_red_zone(t, PATH_GAP),
	};
	survivable(t, &c);
	uint64_t ok = 0;
	int gone = 0;
	if (!fn) {
		size_t n = strlen(sym) + 1;
		uint64_t str_at = below_red_zone(t, 64);
		if (n > 64 || !s->dlsym || inject_mem_write(t, str_at, sym, n) != 0)
			return 1;
		c.a1 = str_at;
		if (inject_remote_call(t, &c, &fn, &gone, err, len) != 0)
			return gone ? -2 : -1;
		if (!fn)
			return 1;
	}
	c.fn = (uintptr_t)fn;
	c.a0 = c.a1 = 0;
	if (inject_remote_call(t, &c, &ok, &gone, err, len) != 0)
		return gone ? -2 : -1;
	*ret = (int32_t)ok;
	return 0;
}

/* The agent is loaded but has no segment: a daemon that forked away from
 * the process the agent started in and has not allocated since (an idle
 * nginx master), or the fork child of a process ymtop -p injected.  Make
 * the thread call the agent's ymagent_start, found in the agent's own
 * file (an injected agent is private to its process), else with
 * dlsym(RTLD_DEFAULT), which creates the segment.  0; -1 (err); -2
 * gone. */
int inject_start_agent(struct borrow *t, const struct libc_syms *s,
		       const char *name, char *err, size_t len)
{
	int32_t ok = 0;
	int rc = call_agent(t, s, "ymagent_start",
			    inject_agent_symbol(t->pid, "ymagent_start"), &ok,
			    err, len);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		inject_fail(err, len, "process %ld (%s) has the agent loaded but no "
			    "segment, and the agent has no ymagent_start (an older "
			    "agent, or loaded privately): restart it under this "
			    "version's agent", (long)t->pid, name);
		return -1;
	}
	if (ok == 2) {
		inject_fail(err, len, "process %ld (%s) keeps the agent an earlier "
			    "ymtop --detach left loaded and dormant", (long)t->pid,
			    name);
		return -3;
	}
	if (ok != 1) {
		inject_fail(err, len, "process %ld (%s) has the agent loaded but it is "
			    "passive: disabled (YM_DISABLE), not following forks "
			    "(YM_FOLLOW_FORK=0), or it failed at start (see its "
			    "stderr)", (long)t->pid, name);
		return -1;
	}
	return 0;
}

int inject_heapstats_call(struct borrow *t, const struct libc_syms *s,
			  const char *name, uintptr_t fn, char *err, size_t len)
{
	int32_t ok = 0;
	int rc = call_agent(t, s, "ymagent_heapstats", fn, &ok, err, len);
	if (rc < 0)
		return rc;
	if (rc == 1 || ok != 1) {
		inject_fail(err, len, "process %ld (%s): %s", (long)t->pid, name,
			    rc == 1 ? "its agent has no ymagent_heapstats "
			    "(an older agent)" :
			    "its agent could not take the allocator's statistics now");
		return -1;
	}
	return 0;
}

/* Detach (detach.h): the agent's ymagent_detach at fn, then, when it
 * says the agent may be unloaded, ymagent_unload_handle at fn_handle.
 * 0 with *code and *handle; -1 (err); -2 gone. */
int inject_detach_call(struct borrow *t, const struct libc_syms *s,
		       const char *name, uintptr_t fn, uintptr_t fn_handle,
		       int *code, uint64_t *handle, char *err, size_t len)
{
	int32_t c = 0;
	*handle = 0;
	int rc = call_agent(t, s, "ymagent_detach", fn, &c, err, len);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		inject_fail(err, len, "process %ld (%s): its agent has no "
			    "ymagent_detach (an older agent); it stays", (long)t->pid,
			    name);
		return -1;
	}
	*code = c;
	if (c != YM_DETACH_UNLOADABLE || !fn_handle)
		return 0;
	struct call k = {
		.code = stub, .code_len = sizeof stub, .fn = fn_handle,
		.sp = below_red_zone(t, PATH_GAP),
	};
	survivable(t, &k);
	int gone = 0;
	if (inject_remote_call(t, &k, handle, &gone, err, len) != 0)
		return gone ? -2 : -1;
	return 0;
}

/* ymagent_release (at fn_release), then dlclose(handle) in t: the
 * agent's unload.  0 (*ret: dlclose's result), -1 (err), -2 gone. */
int inject_dlclose_call(struct borrow *t, const struct libc_syms *s,
			uintptr_t fn_release, uint64_t handle, int *ret,
			char *err, size_t len)
{
	if (!s->dlclose || !fn_release) {
		inject_fail(err, len, "the target's C library has no dlclose, or "
			    "the agent no ymagent_release");
		return -1;
	}
	if (save_code(t, s, err, len) != 0)
		return -1;
	int64_t r = 0;
	int rc = small_call(t, fn_release, NULL, 0, 0, 0, &r, err, len);
	if (rc != 0)
		return rc;
	rc = small_call(t, s->dlclose, NULL, handle, 0, 0, &r, err, len);
	*ret = (int)r;
	return rc;
}
