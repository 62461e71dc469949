/*
 * Anonymous mappings, interposed (hooks_mmap.h).
 *
 * State, this file's: the next definitions, the allocator's text range,
 * and the private table of sampled mappings under its own spin lock
 * (bounded: a busy or full table drops the sample, never waits, and
 * counts the drop: sampling_lost), with the frames of the mappings that
 * wait for the segment (pend).
 */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "heapstats.h"
#include "hooks_mmap.h"
#include "loader.h"
#include "modules.h"
#include "next.h"
#include "sample.h"
#include "sampling.h"
#include "seg.h"
#include "symbols.h"
#include "table.h"
#include "threads.h"
#include "unwind.h"


typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int   (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);

static struct {
	mmap_fn mmap;
	munmap_fn munmap;
	mremap_fn mremap;
	uintptr_t alloc_lo, alloc_hi;   /* the next malloc's object */
	int resolved;                   /* atomic */
} nx;

/* A sampled mapping [start, end), page-rounded; e as a live entry;
 * reset: the reset_count it was counted under (a reset forgets it, as it
 * empties the live table). */
struct mapping {
	uint64_t start, end;
	uint64_t reset;
	struct ym_live e;
};

/* Room for agent_cfg.max_live mappings, at most MAX_MAPPINGS (the
 * kernel's default vm.max_map_count is 65530), mapped at the first sample
 * (untouched pages cost nothing). */
#define MAX_MAPPINGS 65536u
static struct mapping *maps;
static uint32_t maps_cap;
static uint32_t nmaps;      /* atomic: entries [0, nmaps) in use */
static uint32_t maps_lock;

/* Lock held: whether the table exists (mapped now if not). */
static int maps_room(void)
{
	if (maps)
		return 1;
	/* Before the configuration (a mapping made before the agent's first
	 * call): the most it may be. */
	uint32_t cap = agent_cfg.max_live && agent_cfg.max_live < MAX_MAPPINGS ?
		agent_cfg.max_live : MAX_MAPPINGS;
	void *p = (void *)syscall(SYS_mmap, NULL, (size_t)cap * sizeof *maps,
				  PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return 0;
	maps = p;
	maps_cap = cap;
	return 1;
}

/* Mappings made before the segment exists (seg.h: no segment yet, or a
 * thread that made no malloc-family call yet): their stacks cannot be
 * interned, so each waits in the table above as a pending entry, its
 * frames in a slot of its own, and joins the tables when the segment is
 * made (mmap_pending_replay).  Meanwhile munmap and mremap cut and move
 * it as any other, without counting.  Its weight is its length until its
 * sample is drawn: at the call when the rate is known (SEG_PRE), else
 * when the agent is configured (mmap_pending_settle) or at the replay;
 * the draw is the one the countdown would make, p(len) = 1 - exp(-len/R)
 * (memoryless: sample.h), and a mapping drawn out leaves the table.
 * A drawn mapping asks for the segment at the next allocation call
 * (seg_want), where it may call out.  PEND_SLOTS mappings at most wait:
 * more are counted as dropped (drop_live) once the segment exists. */
#define PEND_SLOTS  32u
#define PEND_TAG    0x80000000u   /* e.stack of a pending entry: | slot */
#define PEND_FRAMES (YM_LIMIT_DEPTH + 16u)   /* the agent's frames too */
struct pend {
	uint64_t len;          /* its length when made: what p() is of */
	uint32_t depth;        /* of frames, the agent's still in */
	uint32_t drawn;        /* 1: sampled, weights final */
	uint64_t frames[PEND_FRAMES];
};
static struct pend pend[PEND_SLOTS];   /* untouched until used */
static uint32_t pend_used;   /* lock held: slots handed out */
static uint32_t pend_lost;   /* lock held: samples lost before the segment */
static uint64_t pend_rng;    /* lock held */

static int pending(const struct mapping *m)
{
	return (m->e.stack & PEND_TAG) != 0;
}

/* The reset count samples are counted under now (0 before the segment:
 * only pending entries exist then, and they have none). */
static uint64_t reset_now(void)
{
	return agent_active() ? table_reset_count() : 0;
}

/* Lock held: e over [start, end) joins the table; 0 when it is full. */
static int maps_add(uint64_t start, uint64_t end, const struct ym_live *e)
{
	uint32_t n = nmaps;
	if (!maps_room() || n >= maps_cap)
		return 0;
	maps[n] = (struct mapping){ start, end,
				    e->stack & PEND_TAG ? 0 : table_reset_count(), *e };
	__atomic_store_n(&nmaps, n + 1, __ATOMIC_RELEASE);
	return 1;
}

static int maps_take(void)
{
	for (uint32_t i = 0; i < AGENT_SPINS; i++) {
		if (!__atomic_exchange_n(&maps_lock, 1, __ATOMIC_ACQUIRE))
			return 1;
		agent_backoff(i);
	}
	return 0;
}

static void maps_give(void)
{
	__atomic_store_n(&maps_lock, 0, __ATOMIC_RELEASE);
}

/* Entry i leaves the table (lock held): the last one takes its place. */
static void drop(uint32_t i)
{
	uint32_t n = nmaps - 1;
	maps[i] = maps[n];
	__atomic_store_n(&nmaps, n, __ATOMIC_RELEASE);
}

/* The counters of a mapping's stack move with it; a pending one's wait
 * (its weight is in its entry). */
static void count_alloc(struct agent_tls *t, const struct ym_live *e)
{
	if (!(e->stack & PEND_TAG))
		table_count_alloc(e, table_own_counts(&t->plane, e->stack));
}

static void count_free(struct agent_tls *t, const struct ym_live *e)
{
	if (!(e->stack & PEND_TAG))
		table_count_free(e, agent_now_ns(),
				 table_own_counts(&t->plane, e->stack));
}

static void count_resize(struct agent_tls *t, const struct ym_live *e,
			 uint64_t w, uint64_t wfx)
{
	if (!(e->stack & PEND_TAG))
		table_count_resize(e, w, wfx, table_own_counts(&t->plane, e->stack));
}

void mmap_fork_child(void)
{
	nmaps = 0;
	maps_lock = 0;
	pend_used = 0;
	pend_lost = 0;
}

static int in_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	uintptr_t a = (uintptr_t)arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;
		if (s < lo)
			lo = s;
		if (s + ph->p_memsz > hi)
			hi = s + ph->p_memsz;
	}
	if (a < lo || a >= hi)
		return 0;
	nx.alloc_lo = lo;
	nx.alloc_hi = hi;
	return 1;
}

/* Under the guard (dlsym may allocate). */
static void resolve(void)
{
	void *m = sym_forward("mmap"), *u = sym_forward("munmap"),
	     *r = sym_forward("mremap");
	if (m == (void *)hook_mmap || u == (void *)hook_munmap ||
	    r == (void *)hook_mremap)
		m = u = r = NULL;   /* only ours: the system calls then */
	*(void **)&nx.mmap = m;
	*(void **)&nx.munmap = u;
	*(void **)&nx.mremap = r;
	if (agent_next.malloc)
		loader_iterate(in_object, (void *)agent_next.malloc);
	__atomic_store_n(&nx.resolved, 1, __ATOMIC_RELEASE);
}

static int ready(struct agent_tls *t)
{
	if (__atomic_load_n(&nx.resolved, __ATOMIC_ACQUIRE))
		return 1;
	if (t->guard || !__atomic_load_n(&agent_next.resolved, __ATOMIC_ACQUIRE))
		return 0;
	agent_guard_enter(t);
	resolve();
	agent_guard_leave(t);
	return 1;
}

int hooks_in_allocator(uintptr_t a)
{
	if (!ready(&agent_tls))
		return -1;
	return a >= nx.alloc_lo && a < nx.alloc_hi;
}

static uint64_t page_up(uint64_t n)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	return (n + pg - 1) & ~(pg - 1);
}

/* Whether a call from ra is the program's own (see the header). */
static int programs(uintptr_t ra)
{
	return !(ra >= agent_self.lo && ra < agent_self.hi) &&
	       !(ra >= nx.alloc_lo && ra < nx.alloc_hi);
}

static __attribute__((noinline)) void sample_mapping(struct agent_tls *t, void *p, uint64_t len)
{
	int saved = errno;   /* the host's: a successful mmap leaves it */
	agent_guard_enter(t);
	struct ym_live e;
	if (!sampling_take(t, p, len, len, YM_KIND_MMAP, 0, &e))
		goto out;
	/* The overflow stack is the malloc family's: no room, no sample
	 * (counted: the mmap figure is then a lower bound). */
	if (e.stack == YM_STACK_OVERFLOW) {
		sampling_lost(0);
		goto out;
	}
	if (!maps_take()) {
		sampling_lost(1);
		goto out;
	}
	if (maps_add(e.addr, e.addr + len, &e))
		table_count_alloc(&e, table_own_counts(&t->plane, e.stack));
	else
		sampling_lost(0);
	maps_give();
out:
	agent_guard_leave(t);
	errno = saved;
}

/* Lock held: draw the sample of a mapping made with len bytes at the
 * rate now configured (sample.h): 1 sampled, with probability *p_out. */
static int pend_draw(uint64_t len, double *p_out)
{
	uint64_t rate = sampling_rate();
	if (!pend_rng)
		pend_rng = sample_seed(agent_cfg.seed ? agent_cfg.seed ^ 0x6d6d6170u :
				       agent_now_ns() ^ (uint64_t)getpid() << 32);
	if (rate <= 1) {
		*p_out = 1.0;
		return 1;
	}
	double p = -sample_expm1(-(double)len / (double)rate);
	double u = (double)(sample_rand(&pend_rng) >> 11) * 0x1.0p-53;   /* [0, 1) */
	*p_out = p;
	return u < p;
}

/* Lock held: draw every pending slot not drawn yet; its entries are
 * weighed 1/p or leave.  The number of pending entries left. */
static uint32_t pend_settle_locked(void)
{
	double p[PEND_SLOTS];
	int keep[PEND_SLOTS];
	for (uint32_t k = 0; k < pend_used; k++) {
		keep[k] = 1;
		p[k] = 1.0;
		if (!pend[k].drawn) {
			keep[k] = pend_draw(pend[k].len, &p[k]);
			pend[k].drawn = 1;
		}
	}
	uint32_t left = 0;
	for (uint32_t i = 0; i < nmaps;) {
		struct mapping *m = &maps[i];
		if (!pending(m)) {
			i++;
			continue;
		}
		uint32_t k = m->e.stack & ~PEND_TAG;
		if (!keep[k]) {
			drop(i);
			continue;
		}
		if (p[k] < 1.0) {
			m->e.weight_bytes = (uint64_t)((double)m->e.weight_bytes / p[k] + 0.5);
			if (m->e.weight_fx)
				m->e.weight_fx = (uint64_t)((double)YM_FX_ONE / p[k] + 0.5);
		}
		left++;
		i++;
	}
	return left;
}

int mmap_pending_settle(void)
{
	struct agent_tls *t = &agent_tls;
	if (!__atomic_load_n(&nmaps, __ATOMIC_ACQUIRE))
		return 0;
	agent_guard_enter(t);
	uint32_t left = 0;
	if (maps_take()) {
		left = pend_settle_locked();
		maps_give();
	}
	agent_guard_leave(t);
	return left > 0;
}

/* Lock held, segment active: the pending entries join the tables, with
 * the stacks they were made at. */
static void pend_replay_locked(struct agent_tls *t)
{
	pend_settle_locked();
	uint64_t reset = table_reset_count();
	uint32_t stack[PEND_SLOTS];
	for (uint32_t k = 0; k < pend_used; k++)
		stack[k] = UINT32_MAX - 1;   /* not interned yet */
	for (uint32_t i = 0; i < nmaps;) {
		struct mapping *m = &maps[i];
		if (!pending(m)) {
			i++;
			continue;
		}
		uint32_t k = m->e.stack & ~PEND_TAG;
		if (stack[k] == UINT32_MAX - 1) {
			/* Our own frames first (agent_capture's rule), then at
			 * most the configured depth. */
			struct pend *pd = &pend[k];
			uint32_t j = 0, d = 0;
			while (j < pd->depth && pd->frames[j] >= agent_self.lo &&
			       pd->frames[j] < agent_self.hi)
				j++;
			uint64_t frames[YM_LIMIT_DEPTH];
			for (; j < pd->depth && d < agent_cfg.max_depth; j++)
				frames[d++] = pd->frames[j];
			stack[k] = table_intern_kind(frames, d, m->e.tid,
						     m->e.birth_mono_ns, YM_KIND_MMAP);
		}
		if (stack[k] == UINT32_MAX || stack[k] == YM_STACK_OVERFLOW) {
			sampling_lost(stack[k] == UINT32_MAX);
			drop(i);
			continue;
		}
		m->e.stack = stack[k];
		m->reset = reset;
		count_alloc(t, &m->e);
		i++;
	}
	for (; pend_lost; pend_lost--)
		sampling_lost(0);
	pend_used = 0;
}

void mmap_pending_replay(struct agent_tls *t)
{
	if (!__atomic_load_n(&nmaps, __ATOMIC_ACQUIRE) && !pend_lost)
		return;
	if (maps_take()) {
		pend_replay_locked(t);
		maps_give();
	}
}

/* A program's mapping [p, p + len) made before the segment, or by a
 * thread not registered yet (see pend above).  Guard not held. */
static __attribute__((noinline)) void pend_mapping(struct agent_tls *t, void *p,
						   uint64_t len)
{
	int saved = errno;
	agent_guard_enter(t);
	int state = __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE);
	/* A vfork child's mappings are not ours (it shares our memory). */
	if (state == SEG_PASSIVE || state == SEG_DETACHED || seg_in_vfork_child() ||
	    !maps_take())
		goto out;
	/* Configured (SEG_PRE, or a segment): drawn now, and only a sample
	 * is kept (its frames taken); before, every mapping waits. */
	double pr = 1.0;
	int drawn = state == SEG_PRE || state == SEG_ACTIVE, kept = 0;
	if (drawn && !pend_draw(len, &pr))
		goto give;
	uint32_t k = pend_used;
	struct ym_live e = {
		.addr = (uint64_t)(uintptr_t)p,
		.size = len,
		.birth_mono_ns = agent_now_ns(),
		.tid = t->tid ? t->tid : (uint32_t)syscall(SYS_gettid),
		.stack = PEND_TAG | k,
		.weight_bytes = (uint64_t)((double)len / pr + 0.5),
		.weight_fx = (uint64_t)((double)YM_FX_ONE / pr + 0.5),
	};
	if (k >= PEND_SLOTS || !maps_add(e.addr, e.addr + len, &e)) {
		pend_lost++;
		goto give;
	}
	pend_used = k + 1;
	kept = 1;
	pend[k].len = len;
	pend[k].drawn = (uint32_t)drawn;
	pend[k].depth = (uint32_t)unwind_backtrace(pend[k].frames, (int)PEND_FRAMES);
	/* The segment may have been made meanwhile (its maker replayed
	 * before this entry): join now, nothing here calls out. */
	if (agent_active())
		pend_replay_locked(t);
give:
	maps_give();
	/* A sample waits: the segment at the next allocation call.  (One
	 * still to be drawn waits for the agent's first call, which draws
	 * it: mmap_pending_settle.) */
	if (kept && drawn && !agent_active())
		seg_want();
out:
	agent_guard_leave(t);
	errno = saved;
}

static void unmapped(struct agent_tls *t, uint64_t lo, uint64_t hi);

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct agent_tls *t = &agent_tls;
	/* MAP_FIXED replaces what was there: as an unmap first (the
	 * program's: the allocator's are over its own mappings). */
	if (unlikely(flags & MAP_FIXED) && len && !t->guard &&
	    __atomic_load_n(&nmaps, __ATOMIC_ACQUIRE) && ready(t) &&
	    programs((uintptr_t)__builtin_return_address(0)))
		unmapped(t, (uint64_t)(uintptr_t)addr,
			 (uint64_t)(uintptr_t)addr + page_up(len));
	void *p = ready(t) && nx.mmap ? nx.mmap(addr, len, prot, flags, fd, off) :
		(void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	/* Address space reserved, not memory (PROT_NONE, MAP_NORESERVE:
	 * V8's, the JVM's, wasm's heaps): not counted; what mprotect commits
	 * in it later is not seen. */
	if (p == MAP_FAILED || !(flags & MAP_ANONYMOUS) ||
	    prot == PROT_NONE || (flags & MAP_NORESERVE) || t->guard ||
	    t->forking || !ready(t) || !programs((uintptr_t)__builtin_return_address(0)))
		return p;
	uint64_t n = page_up(len);
	/* Before the segment, or a thread's first call: it waits (pend). */
	if (unlikely(thread_fast(t) == NULL || !agent_active())) {
		pend_mapping(t, p, n);
		return p;
	}
	if (unlikely((t->countdown -= (int64_t)n) < 0))
		sample_mapping(t, p, n);
	return p;
}

/* Lock held: the range [lo, hi) leaves the sampled mappings it overlaps:
 * each keeps what is outside it, its estimate in proportion. */
static void cut(struct agent_tls *t, uint64_t lo, uint64_t hi)
{
	uint64_t reset = reset_now();
	for (uint32_t i = 0; i < nmaps;) {
		struct mapping *m = &maps[i];
		if (m->end <= lo || m->start >= hi) {
			i++;
			continue;
		}
		if (!pending(m) && m->reset != reset) {   /* counted before a reset: forgotten */
			drop(i);
			continue;
		}
		uint64_t left = lo > m->start ? lo - m->start : 0;
		uint64_t right = hi < m->end ? m->end - hi : 0;
		uint64_t len = m->end - m->start;
		if (!left && !right) {
			count_free(t, &m->e);
			drop(i);
			continue;
		}
		uint64_t wl = (uint64_t)((double)m->e.weight_bytes * left / len);
		uint64_t wr = (uint64_t)((double)m->e.weight_bytes * right / len);
		if (left && right && nmaps < maps_cap) {
			/* A hole: the right part becomes a mapping of its own
			 * (the object stays with the left one). */
			count_resize(t, &m->e, wl + wr, m->e.weight_fx);
			struct mapping *r = &maps[nmaps];
			*r = *m;
			r->start = hi;
			r->e.addr = hi;
			r->e.weight_bytes = wr;
			r->e.weight_fx = 0;
			m->end = lo;
			m->e.weight_bytes = wl;
			__atomic_store_n(&nmaps, nmaps + 1, __ATOMIC_RELEASE);
		} else if (left) {
			/* No room for the right part of a hole: it leaves the
			 * sample (its weight with it: the range no longer
			 * covers it), counted as lost. */
			if (right)
				sampling_lost(0);
			count_resize(t, &m->e, wl, m->e.weight_fx);
			m->end = lo;
			m->e.weight_bytes = wl;
		} else {
			count_resize(t, &m->e, wr, m->e.weight_fx);
			m->start = hi;
			m->e.addr = hi;
			m->e.weight_bytes = wr;
		}
		i++;
	}
}

/* The unmapped range [lo, hi) leaves the sampled mappings (cut). */
static void unmapped(struct agent_tls *t, uint64_t lo, uint64_t hi)
{
	agent_guard_enter(t);
	if (maps_take()) {
		cut(t, lo, hi);
		maps_give();
	} else {
		sampling_lost(1);
	}
	agent_guard_leave(t);
}

EXPORT int munmap(void *addr, size_t len)
{
	struct agent_tls *t = &agent_tls;
	/* Before the call: once it returns another thread may map there.
	 * Not when the kernel refuses it for sure (EINVAL: no length, an
	 * address off a page boundary, a range that wraps): it unmaps
	 * nothing, and the sampled mapping stays counted whole. */
	if (__atomic_load_n(&nmaps, __ATOMIC_ACQUIRE) && !t->guard && len) {
		uint64_t lo = (uint64_t)(uintptr_t)addr, hi = lo + page_up(len);
		if (!(lo & (page_up(1) - 1)) && hi > lo)
			unmapped(t, lo, hi);
	}
	/* Never resolves here: a system call until an mmap resolved the
	 * next definitions (the agent's own unmaps are os.h's). */
	if (__atomic_load_n(&nx.resolved, __ATOMIC_ACQUIRE) && nx.munmap)
		return nx.munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

/* mremap moved [old, old + old_len) to [q, q + new_len) (q may be old:
 * resized in place).  What the destination held is gone (MREMAP_FIXED
 * replaces it); the old range is unmapped unless MREMAP_DONTUNMAP kept
 * it.  A sampled mapping moved whole keeps its entry (stack, birth,
 * object), its estimate scaled with its length; a sampled part of one
 * becomes an entry of its own at q with its stack and its part of the
 * estimate, scaled; under MREMAP_DONTUNMAP the new range is a new mapping
 * of the same stack. */
static void remapped(struct agent_tls *t, uint64_t old, uint64_t old_len,
		     uint64_t q, uint64_t new_len, int flags)
{
	agent_guard_enter(t);
	if (!maps_take()) {
		sampling_lost(1);
		goto out;
	}
	uint64_t reset = reset_now(), hi = old + old_len;
	int keep = (flags & MREMAP_DONTUNMAP) != 0;
	/* The whole mapping moved: its own entry goes along. */
	for (uint32_t i = 0; !keep && i < nmaps; i++) {
		struct mapping *m = &maps[i];
		if (m->start != old || m->end != hi ||
		    (!pending(m) && m->reset != reset))
			continue;
		struct mapping mv = *m;
		drop(i);
		cut(t, q, q + new_len);   /* what MREMAP_FIXED replaced */
		uint64_t w = (uint64_t)((double)mv.e.weight_bytes * new_len / old_len);
		count_resize(t, &mv.e, w, mv.e.weight_fx);
		mv.e.addr = q;
		mv.e.size = new_len;
		mv.e.weight_bytes = w;
		if (!maps_add(q, q + new_len, &mv.e)) {
			count_free(t, &mv.e);
			sampling_lost(0);
		}
		goto done;
	}
	/* Otherwise: the sampled parts of the old range (the first one's
	 * stack), their estimate. */
	struct ym_live e;
	uint64_t w = 0;
	int found = 0;
	for (uint32_t i = 0; i < nmaps; i++) {
		struct mapping *m = &maps[i];
		if (m->end <= old || m->start >= hi ||
		    (!pending(m) && m->reset != reset))
			continue;
		uint64_t lo_ = m->start > old ? m->start : old;
		uint64_t hi_ = m->end < hi ? m->end : hi;
		w += (uint64_t)((double)m->e.weight_bytes * (hi_ - lo_) /
				(m->end - m->start));
		if (!found)
			e = m->e;
		found = 1;
	}
	if (!keep)
		cut(t, old, hi);
	cut(t, q, q + new_len);
	if (found) {
		e.addr = q;
		e.size = new_len;
		e.weight_bytes = (uint64_t)((double)w * new_len / old_len);
		if (keep)
			e.birth_mono_ns = agent_now_ns();
		else
			e.weight_fx = 0;   /* a part: the object stays behind */
		if (maps_add(q, q + new_len, &e))
			count_alloc(t, &e);
		else
			sampling_lost(0);
	}
done:
	maps_give();
out:
	agent_guard_leave(t);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	struct agent_tls *t = &agent_tls;
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	void *q = __atomic_load_n(&nx.resolved, __ATOMIC_ACQUIRE) && nx.mremap ?
		nx.mremap(old, old_len, new_len, flags, new_addr) :
		(void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
	/* old_len 0 (a shared mapping's copy) is a new mapping: not seen. */
	if (q != MAP_FAILED && old_len && new_len && !t->guard &&
	    __atomic_load_n(&nmaps, __ATOMIC_ACQUIRE))
		remapped(t, (uint64_t)(uintptr_t)old, page_up(old_len),
			 (uint64_t)(uintptr_t)q, page_up(new_len), flags);
	return q;
}

/* The same function (off_t is 64 bits here): its return address is the
 * caller's. */
EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

HIDDEN_ALIAS(mmap);
HIDDEN_ALIAS(munmap);
HIDDEN_ALIAS(mremap);
