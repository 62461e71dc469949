/*
 * loader: the loader's list of objects, walked so that no fork child
 * waits for ever (loader.h).
 *
 * State, this file's: where the loader's write lock is (found when the
 * segment is made, kept in children), whether this process walks without it,
 * and the loader's counters as last seen.
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loader.h"

enum { PROBE_NONE, PROBE_FOUND, PROBE_FAILED };

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
	struct dl_find_object fo;   /* ld.so run as the program: no AT_BASE */
	if (!p.ldso && _dl_find_object((void *)&_r_debug, &fo) == 0)
		p.ldso = fo.dlfo_link_map->l_addr;
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
	if (probe_state != PROBE_NONE || frozen)
		return;   /* found before, or inherited */
	int rc = -1;
	for (int i = 0; i < 3 && rc < 0; i++)
		rc = probe_once();
	probe_state = rc > 0 ? PROBE_FOUND : PROBE_FAILED;
}

void loader_fork_child(void)
{
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

/* l's program headers, from its ELF header at the start of its first
 * mapping (found lock-free).  0: skip the object. */
static int info_of(const struct link_map *l, struct dl_phdr_info *info)
{
	struct dl_find_object fo;
	if (!l->l_ld || _dl_find_object((void *)l->l_ld, &fo) != 0 ||
	    fo.dlfo_link_map != l)
		return 0;
	const uint8_t *lo = fo.dlfo_map_start, *hi = fo.dlfo_map_end;
	size_t room = (size_t)(hi - lo) < 4096 ? (size_t)(hi - lo) : 4096;
	const ElfW(Ehdr) *e = (const ElfW(Ehdr) *)(const void *)lo;
	if (hi <= lo || room < sizeof *e ||
	    memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 ||
	    e->e_phentsize != sizeof(ElfW(Phdr)) || e->e_phoff > room ||
	    e->e_phnum > (room - e->e_phoff) / sizeof(ElfW(Phdr)))
		return 0;
	memset(info, 0, sizeof *info);
	info->dlpi_addr = l->l_addr;
	info->dlpi_name = l->l_name;
	info->dlpi_phdr = (const ElfW(Phdr) *)(const void *)(lo + e->e_phoff);
	info->dlpi_phnum = e->e_phnum;
	info->dlpi_adds = seen[0];
	info->dlpi_subs = seen[1];
	return 1;
}

/* Each namespace's link maps, as dl_iterate_phdr orders them; bounded
 * (a list being changed when the fork came could be mid-update). */
static int walk_frozen(loader_cb cb, void *arg)
{
	const struct r_debug_extended *ns = (const struct r_debug_extended *)&_r_debug;
	int budget = 8192;
	for (int k = 0; ns && k < 64; k++) {
		for (const struct link_map *l = ns->base.r_map; l && budget > 0;
		     l = l->l_next, budget--) {
			struct dl_phdr_info info;
			if (!info_of(l, &info))
				continue;
			int rc = cb(&info, sizeof info, arg);
			if (rc)
				return rc;
		}
		ns = ns->base.r_version >= 2 ? ns->r_next : NULL;
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
