/*
 * loader: the loader's list of objects, walked so that no fork child
 * waits for ever (loader.h).
 *
 * State, this file's: where the loader's write lock is (found when the
 * segment is made, kept in children), whether this process walks without it,
 * the loader's counters as last seen, and where _r_debug is (found by its
 * first user, the constructor: kept in children).
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "compat.h"
#include "loader.h"

enum { PROBE_NONE, PROBE_FOUND, PROBE_FAILED };
enum { INIT_NONE, INIT_BUSY, INIT_DONE };

static int probe_state;
/* The lock's first three words: __lock, __count, __owner (the prefix of
 * pthread_mutex_t's data on every glibc target). */
static const int *write_lock;
static int frozen;                  /* walk without the lock */
static int blind;                   /* ... because it was not found */
/* The loader's counters as last read here: a frozen child's, for good. */
static unsigned long long seen[2];

/* The loader's counters from an object's entry: 0 without them. */
static int read_counters(const struct dl_phdr_info *info, size_t size,
			 unsigned long long v[2])
{
	if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
		return 0;
	v[0] = info->dlpi_adds;
	v[1] = info->dlpi_subs;
	return 1;
}

/* ---- Finding the lock ---- */

#define PROBE_MAX 4

struct probe {
	int tid;
	uintptr_t ldso;
	int n;
	const int *cand[PROBE_MAX];
};

static int word(const int *w, int i)
{
	return __atomic_load_n(&w[i], __ATOMIC_RELAXED);
}

/* Inside dl_iterate_phdr: the lock is held by this thread, once (a
 * recursive mutex: __lock set, __count 1, __owner our tid).  Look for
 * that shape in ld.so's writable segments. */
static int probe_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct probe *p = arg;
	read_counters(info, size, seen);
	if (info->dlpi_addr != p->ldso)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
			continue;
		uintptr_t a = (info->dlpi_addr + ph->p_vaddr + 3) & ~(uintptr_t)3;
		uintptr_t e = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		for (; a + 3 * sizeof(int) <= e; a += sizeof(int)) {
			const int *w = (const int *)a;
			if (word(w, 2) != p->tid || word(w, 0) == 0 || word(w, 1) != 1)
				continue;
			if (p->n < PROBE_MAX)
				p->cand[p->n] = w;
			p->n++;
		}
	}
	return 1;
}

/* One try: the single candidate that was ours inside the walk and is no
 * longer once it returned (free, or taken since by another thread).
 * -1: try again. */
static int probe_once(void)
{
	struct probe p = { .tid = (int)syscall(SYS_gettid),
			   .ldso = (uintptr_t)getauxval(AT_BASE) };
	struct agent_object fo;   /* ld.so run as the program: no AT_BASE */
	const struct r_debug *r = agent_r_debug();
	if (!p.ldso && r && agent_find_object(r, &fo) == 0 && fo.link_map)
		p.ldso = fo.link_map->l_addr;
	if (!p.ldso)
		return 0;
	dl_iterate_phdr(probe_cb, &p);
	if (p.n < 1 || p.n > PROBE_MAX)
		return 0;
	const int *found = NULL;
	for (int i = 0; i < p.n; i++) {
		const int *w = p.cand[i];
		int lock = word(w, 0), owner = word(w, 2);
		if ((lock == 0 && owner == 0) ||
		    (lock != 0 && owner != 0 && owner != p.tid)) {
			if (found)
				return -1;   /* two: not one lock's shape (yet) */
			found = w;
		}
	}
	if (!found)
		return -1;
	write_lock = found;
	return 1;
}

void loader_probe(void)
{
#ifndef __GLIBC__
	return;   /* nothing to find: loader_fork_child */
#endif
	if (probe_state != PROBE_NONE || frozen)
		return;   /* found before, or inherited */
	int rc = -1;
	for (int i = 0; i < 3 && rc < 0; i++)
		rc = probe_once();
	probe_state = rc > 0 ? PROBE_FOUND : PROBE_FAILED;
}

void loader_fork_child(void)
{
#ifndef __GLIBC__
	/* musl's fork takes its loader's lock and releases it in the
	 * child (__inhibit_ptc): a child walks as its parent does. */
	return;
#endif
	if (probe_state == PROBE_FOUND) {
		frozen = word(write_lock, 0) != 0;
		blind = 0;
	} else {
		frozen = 1;
		blind = 1;
	}
}

int loader_blind(void)
{
	return blind;
}

int loader_lock_found(void)
{
	return probe_state == PROBE_FOUND;
}

int loader_lock_held(void)
{
	return write_lock && word(write_lock, 0) != 0;
}

/* ---- Walking without the lock ---- */

/* An ELF header at lo, of which room bytes may be read: its program
 * headers.  0: not one. */
static int phdrs_at(const uint8_t *lo, size_t room, const ElfW(Phdr) **ph,
		    size_t *n)
{
	const ElfW(Ehdr) *e = (const ElfW(Ehdr) *)(const void *)lo;
	if (room > 4096)
		room = 4096;
	if (room < sizeof *e || memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 ||
	    e->e_phentsize != sizeof(ElfW(Phdr)) || e->e_phoff > room ||
	    e->e_phnum > (room - e->e_phoff) / sizeof(ElfW(Phdr)))
		return 0;
	*ph = (const ElfW(Phdr) *)(const void *)(lo + e->e_phoff);
	*n = e->e_phnum;
	return 1;
}

/* l's program headers, from its ELF header at the start of its first
 * mapping, found lock-free by _dl_find_object.  0: not found. */
static int phdrs_dlfo(const struct link_map *l, const ElfW(Phdr) **ph,
		      size_t *n)
{
	struct agent_object fo;
	if (agent_find_object(l->l_ld, &fo) != 0 || fo.link_map != l ||
	    fo.map_end <= fo.map_start)
		return 0;
	return phdrs_at(fo.map_start,
			(size_t)((uint8_t *)fo.map_end - (uint8_t *)fo.map_start),
			ph, n);
}

int loader_phdrs_nodlfo(const struct link_map *l, const ElfW(Phdr) **ph,
			size_t *n)
{
	const struct r_debug *r = agent_r_debug();
	if (r && l == r->r_map) {
		*ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
		*n = (size_t)getauxval(AT_PHNUM);
	} else {
		uint8_t probe[sizeof(ElfW(Ehdr))];
		struct iovec local = { probe, sizeof probe };
		struct iovec remote = { (void *)l->l_addr, sizeof probe };
		if (!l->l_addr ||
		    syscall(SYS_process_vm_readv, (long)getpid(), &local, 1UL,
			    &remote, 1UL, 0UL) != (long)sizeof probe ||
		    !phdrs_at((const uint8_t *)l->l_addr, 4096, ph, n))
			return 0;   /* the header's page is mapped whole */
	}
	for (size_t i = 0; *ph && i < *n; i++)
		if ((*ph)[i].p_type == PT_DYNAMIC)
			return l->l_addr + (*ph)[i].p_vaddr == (uintptr_t)l->l_ld;
	return 0;
}

/* l as dl_iterate_phdr shows it.  0: skip the object. */
static int info_of(const struct link_map *l, struct dl_phdr_info *info)
{
	const ElfW(Phdr) *ph;
	size_t n;
	if (!l->l_ld ||
	    !(agent_have_dl_find_object() ? phdrs_dlfo(l, &ph, &n)
					  : loader_phdrs_nodlfo(l, &ph, &n)))
		return 0;
	memset(info, 0, sizeof *info);
	info->dlpi_addr = l->l_addr;
	info->dlpi_name = l->l_name;
	info->dlpi_phdr = ph;
	info->dlpi_phnum = (ElfW(Half))n;
	info->dlpi_adds = seen[0];
	info->dlpi_subs = seen[1];
	return 1;
}

/* Each namespace's link maps, as dl_iterate_phdr orders them; bounded
 * (a list being changed when the fork came could be mid-update). */
static int walk_frozen(loader_cb cb, void *arg)
{
#ifdef __GLIBC__
	const struct r_debug_extended *ns =
		(const struct r_debug_extended *)agent_r_debug();
#define NS_MAP(ns) ((ns)->base.r_map)
#define NS_NEXT(ns) ((ns)->base.r_version >= 2 ? (ns)->r_next : NULL)
#else
	/* musl: one namespace; its debug record is r_debug's shape. */
	const struct r_debug *ns = agent_r_debug();
#define NS_MAP(ns) ((ns)->r_map)
#define NS_NEXT(ns) NULL
#endif
	int budget = 8192;
	for (int k = 0; ns && k < 64; k++) {
		for (const struct link_map *l = NS_MAP(ns); l && budget > 0;
		     l = l->l_next, budget--) {
			struct dl_phdr_info info;
			if (!info_of(l, &info))
				continue;
			int rc = cb(&info, sizeof info, arg);
			if (rc)
				return rc;
		}
		ns = NS_NEXT(ns);
	}
	return 0;
}

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	read_counters(info, size, arg);
	return 1;   /* the counters are global: the first object is enough */
}

void loader_counters(unsigned long long v[2])
{
	v[0] = v[1] = 0;
	if (frozen) {   /* no object comes or goes there */
		v[0] = seen[0];
		v[1] = seen[1];
		return;
	}
	dl_iterate_phdr(counters_cb, v);
}

int loader_iterate(loader_cb cb, void *arg)
{
	if (unlikely(frozen))
		return walk_frozen(cb, arg);
	return dl_iterate_phdr(cb, arg);
}

/* ---- Where _r_debug is ---- */

static int r_debug_state;
static struct r_debug *r_debug_at;

/* The DT_DEBUG entry of a main program, which ld.so points at its
 * _r_debug before any constructor runs; NULL without one. */
static struct r_debug *dt_debug(uintptr_t bias, const ElfW(Phdr) *ph, size_t n)
{
	struct r_debug *r = NULL;
	for (size_t i = 0; ph && i < n; i++) {
		if (ph[i].p_type != PT_DYNAMIC)
			continue;
		for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(bias + ph[i].p_vaddr);
		     d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_DEBUG && d->d_un.d_ptr)
				r = (struct r_debug *)d->d_un.d_ptr;
	}
	return r;
}

/* The first object dl_iterate_phdr reports is the main program, also
 * when ld.so was run as the program (whose AT_PHDR is ld.so's). */
static int r_debug_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(struct r_debug **)arg = dt_debug(info->dlpi_addr, info->dlpi_phdr,
					   info->dlpi_phnum);
	return 1;
}

/* The main program from the auxiliary vector: no walk (a fork child
 * that must not take the loader's lock needs _r_debug for its walk). */
static struct r_debug *r_debug_auxv(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	size_t n = (size_t)getauxval(AT_PHNUM);
	for (size_t i = 0; ph && i < n; i++)
		if (ph[i].p_type == PT_PHDR)
			return dt_debug((uintptr_t)ph - ph[i].p_vaddr, ph, n);
	return NULL;
}

/* 1 for the caller that is to find _r_debug. */
static int r_debug_first(void)
{
	int expect = INIT_NONE;
	return __atomic_compare_exchange_n(&r_debug_state, &expect, INIT_BUSY, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* _r_debug, found by the first caller that needs it (busy meanwhile
 * for the others, which walk without it: NULL). */
static void init_once(void)
{
	if (likely(__atomic_load_n(&r_debug_state, __ATOMIC_ACQUIRE) != INIT_NONE) ||
	    !r_debug_first())
		return;
	struct r_debug *r = r_debug_auxv();
	if (!r)
		loader_iterate(r_debug_cb, &r);
	__atomic_store_n(&r_debug_at, r, __ATOMIC_RELEASE);
	__atomic_store_n(&r_debug_state, INIT_DONE, __ATOMIC_RELEASE);
}

struct r_debug *agent_r_debug(void)
{
	init_once();
	return __atomic_load_n(&r_debug_at, __ATOMIC_ACQUIRE);
}

/* ---- The object holding an address ---- */

struct find_q {
	uintptr_t pc;
	struct agent_object *o;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find_q *q = arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0, dyn = 0;
	const void *eh = NULL;
	int hit = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD) {
			hit |= q->pc >= a && q->pc - a < ph->p_memsz;
			if (a < lo)
				lo = a;
			if (a + ph->p_memsz > hi)
				hi = a + ph->p_memsz;
		} else if (ph->p_type == PT_GNU_EH_FRAME) {
			eh = (const void *)a;
		} else if (ph->p_type == PT_DYNAMIC) {
			dyn = a;
		}
	}
	if (!hit)
		return 0;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	q->o->map_start = (void *)(lo & ~(page - 1));
	q->o->map_end = (void *)hi;
	q->o->eh_frame = eh;
	q->o->link_map = NULL;
	/* The list cannot change meanwhile: the walk holds the lock that
	 * changes take (or none can, loader.h). */
	struct r_debug *r = __atomic_load_n(&r_debug_at, __ATOMIC_ACQUIRE);
	int budget = 8192;
	for (struct link_map *l = r && dyn ? r->r_map : NULL; l && budget > 0;
	     l = l->l_next, budget--)
		if ((uintptr_t)l->l_ld == dyn) {
			q->o->link_map = l;
			break;
		}
	return 1;
}

int agent_find_object_phdr(const void *pc, struct agent_object *o)
{
	struct find_q q = { .pc = (uintptr_t)pc, .o = o };
	return loader_iterate(find_cb, &q) == 1 ? 0 : -1;
}

int agent_find_object(const void *pc, struct agent_object *o)
{
	if (unlikely(!agent_have_dl_find_object()))
		return agent_find_object_phdr(pc, o);
	return agent_dlfo(pc, o);
}
