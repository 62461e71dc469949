/* quiesce: see quiesce.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/borrow.h"
#include "ptrace/chain.h"
#include "ptrace/libcsyms.h"
#include "ptrace/choose.h"
#include "ptrace/procfs.h"
#include "ptrace/quiesce.h"
#include "ptrace/util.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

#define QUIESCE_TRIES     10
#define QUIESCE_PAUSE_US  50000
#define QUIESCE_MAX_MAPS  64
#define QUIESCE_STACK_MAX (16u << 20)   /* words read a thread at most */

/* YM_TEST_QUIESCE_SCAN=1 (tests): every thread's stack is scanned, as
 * when its call chain cannot be unwound (code without CFI, no libdw). */
static int scan_only;

struct stopped {
	pid_t tid;
	int   sig;   /* a signal that arrived, delivered at the detach */
};

struct agent_maps {
	struct range all[QUIESCE_MAX_MAPS], code[QUIESCE_MAX_MAPS];
	int nall, ncode;
};

static const char *base_of(const char *p)
{
	const char *b = strrchr(p, '/');
	return b ? b + 1 : p;
}

static int read_agent_maps(pid_t pid, struct agent_maps *a)
{
	char path[64], line[4200];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	a->nall = a->ncode = 0;
	struct maps_line ml;
	while (fgets(line, sizeof line, f)) {
		if (!inject_maps_line(line, &ml) || !inject_is_agent_file(base_of(ml.path)))
			continue;
		if (a->nall < QUIESCE_MAX_MAPS)
			a->all[a->nall++] = (struct range){ ml.lo, ml.hi };
		if (ml.perms[2] == 'x' && a->ncode < QUIESCE_MAX_MAPS)
			a->code[a->ncode++] = (struct range){ ml.lo, ml.hi };
	}
	fclose(f);
	return 0;
}

static int in_any(const struct range *r, int n, uint64_t v)
{
	for (int i = 0; i < n; i++)
		if (v >= r[i].lo && v < r[i].hi)
			return 1;
	return 0;
}

/* Every mapping of the target, in address order (maps lists them so):
 * what the stack scan needs to tell a stack pointer and a code address
 * among the words it reads. */
struct all_maps {
	struct range *r;
	unsigned char *prot;   /* MAP_W, MAP_X */
	int n, cap;
};
#define MAP_W 1
#define MAP_X 2

static void all_maps_free(struct all_maps *m)
{
	free(m->r);
	free(m->prot);
	memset(m, 0, sizeof *m);
}

static int all_maps_read(pid_t pid, struct all_maps *m)
{
	char path[64], line[4200];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	m->n = 0;
	struct maps_line ml;
	while (fgets(line, sizeof line, f)) {
		if (!inject_maps_line(line, &ml))
			continue;
		if (m->n == m->cap) {
			int cap = m->cap ? 2 * m->cap : 256;
			struct range *r = realloc(m->r, (size_t)cap * sizeof *r);
			if (r)
				m->r = r;
			unsigned char *p = realloc(m->prot, (size_t)cap);
			if (p)
				m->prot = p;
			if (!r || !p || cap > (1 << 20)) {
				fclose(f);
				return -1;
			}
			m->cap = cap;
		}
		m->r[m->n] = (struct range){ ml.lo, ml.hi };
		m->prot[m->n++] = (ml.perms[1] == 'w' ? MAP_W : 0) |
				  (ml.perms[2] == 'x' ? MAP_X : 0);
	}
	fclose(f);
	return 0;
}

/* The index of the mapping holding v, -1 when none. */
static int all_maps_find(const struct all_maps *m, uint64_t v)
{
	int lo = 0, hi = m->n - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		if (v < m->r[mid].lo)
			hi = mid - 1;
		else if (v >= m->r[mid].hi)
			lo = mid + 1;
		else
			return mid;
	}
	return -1;
}

/* The stacks one thread's scan reads: its own from the stack pointer
 * up, and the stacks its signal frames interrupted. */
#define QUIESCE_REGIONS 9

struct regions {
	struct range r[QUIESCE_REGIONS];
	int map[QUIESCE_REGIONS];   /* their mappings' indexes */
	int n;
};

/* Mapping k of m read from `from` up, QUIESCE_STACK_MAX at most. */
static void region_add(struct regions *g, const struct all_maps *m, int k,
		       uint64_t from)
{
	uint64_t end = m->r[k].hi;
	if (end - from > QUIESCE_STACK_MAX)
		end = from + QUIESCE_STACK_MAX;
	g->r[g->n] = (struct range){ from, end };
	g->map[g->n++] = k;
}

/* A word pair (w, next) on a stack may be the stack pointer and the
 * instruction pointer a signal frame saved (the kernel's ucontext keeps
 * RSP and RIP side by side): w 8-aligned in a writable mapping that no
 * region scanned yet holds, next in an executable one.  The stack it
 * interrupted is then read from w up: a handler running on an alternate
 * stack (sigaltstack) has only that stack above its stack pointer, and
 * the call into the agent that the signal interrupted lies on the other.
 * A pair that is no frame costs a read, never a wrong answer. */
static void maybe_interrupted(struct regions *g, int cur,
			      const struct all_maps *m, uint64_t w, uint64_t next)
{
	if ((w & 7) || g->n >= QUIESCE_REGIONS)
		return;
	int k = all_maps_find(m, w), x = all_maps_find(m, next);
	if (k < 0 || x < 0 || !(m->prot[k] & MAP_W) || !(m->prot[x] & MAP_X))
		return;
	for (int i = 0; i < g->n; i++)
		if (g->map[i] == k) {
			if (w < g->r[i].lo && i > cur)
				g->r[i].lo = w;   /* not yet read: from lower */
			return;
		}
	region_add(g, m, k, w);
}

static int stop_one(pid_t tid, struct stopped *s)
{
	s->tid = tid;
	s->sig = 0;
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0)
		return errno == ESRCH ? 0 : -1;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return 0;
	}
	int st;
	if (inject_wait_stop(tid, &st, 1e9) < 0)
		return 0;
	if ((st >> 16) != PTRACE_EVENT_STOP)
		s->sig = WSTOPSIG(st);   /* a signal on its way: kept */
	return 1;
}

static void let_go(struct stopped *s, int n)
{
	for (int i = 0; i < n; i++)
		ptrace(PTRACE_DETACH, s[i].tid, 0, (void *)(intptr_t)s[i].sig);
}

/* One thread: 1 outside the agent, 0 inside (why).  ch: its call chain
 * unwound (libdw, the agent's code as the ranges to find): a chain known
 * far enough with no agent frame settles it, else every stack word is
 * looked at. */
static int outside(pid_t pid, int mem, pid_t tid, const struct agent_maps *a,
		   const struct all_maps *m, struct chain *ch, char *why,
		   size_t len)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, tid, 0, &r) != 0)
		return 1;   /* gone */
	if (in_any(a->all, a->nall, r.rip)) {
		snprintf(why, len, "thread %ld was running the agent's code "
			 "(pc %#llx)", (long)tid, (unsigned long long)r.rip);
		return 0;
	}
	const unsigned long long regs[] = {
		r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.r8, r.r9,
		r.r10, r.r11, r.r12, r.r13, r.r14, r.r15,
	};
	for (size_t i = 0; i < sizeof regs / sizeof *regs; i++)
		if (in_any(a->code, a->ncode, regs[i])) {
			snprintf(why, len, "thread %ld held an address in the "
				 "agent's code in a register", (long)tid);
			return 0;
		}
	struct borrow b = { .pid = pid, .tid = tid, .mem = mem, .regs = r };
	int clear = ch->dwfl && !scan_only ? inject_chain_clear(&b, ch) : -1;
	if (clear == 0) {
		snprintf(why, len, "thread %ld was in a call made by the agent "
			 "(pc %#llx)", (long)tid, (unsigned long long)r.rip);
		return 0;
	}
	if (clear == 1)
		return 1;
	uint64_t sp = r.rsp & ~(uint64_t)7;
	int k = all_maps_find(m, sp);
	if (k < 0)
		return 1;   /* no stack: nothing above it to return to */
	struct regions g = { .n = 0 };
	region_add(&g, m, k, sp);
	static uint64_t buf[8192];
	for (int i = 0; i < g.n; i++) {
		uint64_t prev = 0;
		for (uint64_t at = g.r[i].lo; at < g.r[i].hi;) {
			uint64_t end = g.r[i].hi;
			size_t n = end - at < sizeof buf ? (size_t)(end - at) : sizeof buf;
			ssize_t got = pread(mem, buf, n, (off_t)at);
			if (got <= 0)
				break;
			for (size_t j = 0; j < (size_t)got / 8; j++) {
				uint64_t w = buf[j];
				if (in_any(a->code, a->ncode, w)) {
					snprintf(why, len, "thread %ld had a return "
						 "address into the agent on %s (a call "
						 "not returned: %#llx at %#llx, %#llx "
						 "above its stack pointer; pc %#llx)",
						 (long)tid, i ? "the stack a signal "
						 "interrupted" : "its stack",
						 (unsigned long long)w,
						 (unsigned long long)(at + 8 * j),
						 (unsigned long long)(at + 8 * j - g.r[i].lo),
						 (unsigned long long)r.rip);
					return 0;
				}
				maybe_interrupted(&g, i, m, prev, w);
				prev = w;
			}
			at += (uint64_t)got;
		}
	}
	return 1;
}

/* Every thread stopped (s, *n), listed again until none is new.  0, or
 * -1 (why). */
static int stop_all(pid_t pid, struct stopped *s, int *n, pid_t *tids,
		    char *why, size_t len)
{
	*n = 0;
	for (int fresh = 1; fresh;) {
		fresh = 0;
		int k = inject_list_tids(pid, tids, INJECT_MAX_TIDS);
		if (k <= 0) {
			snprintf(why, len, "process %ld is gone", (long)pid);
			return -1;
		}
		for (int i = 0; i < k; i++) {
			int seen = 0;
			for (int j = 0; j < *n && !seen; j++)
				seen = s[j].tid == tids[i];
			if (seen)
				continue;
			if (*n >= INJECT_MAX_TIDS) {
				snprintf(why, len, "more than %d threads",
					 INJECT_MAX_TIDS);
				return -1;
			}
			int r = stop_one(tids[i], &s[*n]);
			if (r < 0) {
				snprintf(why, len, "thread %ld could not be stopped: %s",
					 (long)tids[i], strerror(errno));
				return -1;
			}
			if (r > 0) {
				(*n)++;
				fresh = 1;
			}
		}
	}
	return 0;
}

int inject_quiesced(pid_t pid, char *why, size_t len)
{
	const char *t = getenv("YM_TEST_QUIESCE_SCAN");
	scan_only = t && !strcmp(t, "1");
	struct agent_maps a;
	if (read_agent_maps(pid, &a) != 0 || a.ncode == 0) {
		snprintf(why, len, "its mappings could not be read");
		return 0;
	}
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
	int mem = open(path, O_RDONLY | O_CLOEXEC);
	struct stopped *s = calloc(INJECT_MAX_TIDS, sizeof *s);
	pid_t *tids = calloc(INJECT_MAX_TIDS, sizeof *tids);
	int ok = 0;
	if (mem < 0 || !s || !tids) {
		snprintf(why, len, "cannot read process %ld's memory", (long)pid);
		goto out;
	}
	/* The unwinder finds frames in the agent's code (the ranges chain.c
	 * looks for). */
	static struct libc_syms ranges;
	static struct tmaps tm;
	memset(&ranges, 0, sizeof ranges);
	memset(&tm, 0, sizeof tm);
	ranges.malloc_text = a.code[0];
	tm.ldso = a.ncode > 1 ? a.code[1] : a.code[0];
	struct chain ch;
	inject_chain_open(&ch, pid, &ranges, &tm);
	struct all_maps m = { 0 };
	/* ymtop's own signals wait while the target is stopped. */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	for (int tries = 0; !ok && tries < QUIESCE_TRIES; tries++) {
		if (tries)
			inject_nap_us(QUIESCE_PAUSE_US);
		int n = 0;
		int rc = stop_all(pid, s, &n, tids, why, len);
		ok = rc == 0;
		if (ok && all_maps_read(pid, &m) != 0) {
			snprintf(why, len, "its mappings could not be read");
			ok = 0;
		}
		for (int i = 0; ok && i < n; i++)
			ok = outside(pid, mem, s[i].tid, &a, &m, &ch, why, len);
		let_go(s, n);
		if (rc != 0)
			break;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	inject_chain_close(&ch);
	all_maps_free(&m);
out:
	if (mem >= 0)
		close(mem);
	free(s);
	free(tids);
	return ok;
}
