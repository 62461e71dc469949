/*
 * Slot mode: hook the malloc family by rewriting GOT slots and data words.
 *
 * When ymtop loads the agent into a running process (dlopen through
 * ptrace), or when the agent is preloaded behind another object that
 * defines malloc (an allocator earlier in LD_PRELOAD), our exported malloc
 * interposes nothing: every object is already bound to the process's
 * allocator.  So we rewrite, in every object of the base namespace (libc
 * and the allocator included; never ourselves, ld.so or the vDSO), the
 * GOT slots (R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT, found through
 * DT_JMPREL, DT_RELA and DT_REL) of the functions we hook, and the data
 * words relocated to them (R_X86_64_64 with addend 0: libxml2's xmlMalloc,
 * libcurl's Curl_cmalloc, tables of function pointers) that still hold
 * exactly the function's address.
 *
 * Invariants:
 * - The real functions were taken before the first patch (sym_global:
 *   dlsym(RTLD_DEFAULT), or past a non-PIE executable's canonical PLT
 *   entry the definition behind it): what the slots were bound to.  A
 *   slot that holds such a PLT entry is left alone: it leads through the
 *   executable's own slot, which is rewritten.
 * - A slot is rewritten only when it holds that real function or a lazy
 *   binding stub of its own object; anything else was bound on purpose.
 *   A data word only when it holds the real function: a program that
 *   stored its own function there (xmlMemSetup) keeps it.
 * - Each write is one aligned 8-byte store: a thread calling through
 *   the slot meanwhile sees the old or the new function, both correct.
 * - Only words in a writable PT_LOAD segment are written; RELRO pages
 *   are made writable for the write and read-only again; one mutex
 *   serializes patching, so two patchers never race on protection.  A
 *   word holding the real function that cannot be written (a text
 *   relocation, unaligned, mprotect refused) is named in the segment
 *   (seg_note_unseen): the calls through it are not seen.
 * - Injected, a GLOB_DAT slot or data word gets the hook's trampoline
 *   entry (tramp.h), not the hook: code may copy what it reads there
 *   (`&free`), and a copy must outlive the agent.  A call through such a
 *   slot costs one more indirect jump while the agent is there; PLT slots
 *   (JUMP_SLOT), which only their stub reads, get the hook itself.
 * - Detach (got_unpatch_all): every slot and word holding a hook or its
 *   entry gets the real function back, the entries jump to the real
 *   functions, and nothing is patched again.
 * - dlopen and its new objects: the hooked dlopen and dlmopen patch after
 *   each successful load.  Objects of other namespaces (dlmopen) have
 *   their own C library and allocator and are never patched.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base.h"
#include "compat.h"
#include "config.h"
#include "dynamic.h"
#include "hooknames.h"
#include "threads.h"
#include "got.h"
#include "hooks_exec.h"
#include "hooks_cxx.h"
#include "hooks_jemalloc.h"
#include "hooks_mmap.h"
#include "loader.h"
#include "os.h"
#include "seg.h"
#include "symbols.h"
#include "tramp.h"

static pthread_mutex_t got_lock = PTHREAD_MUTEX_INITIALIZER;
static void *(*real_dlopen)(const char *, int);
static void *(*real_dlmopen)(Lmid_t, const char *, int);

static void *hook_dlopen(const char *file, int mode);
static void *hook_dlmopen(Lmid_t ns, const char *file, int mode);

struct hook {
	const char *name;
	void *hook;       /* our function */
	void *real;       /* sym_global before patching */
	void *entry;      /* its trampoline entry (tramp.h), or NULL */
};

/* Detached (got_unpatch_all): slots go back to the real functions and no
 * patch is made again.  Under got_lock. */
static int got_detached;

#define NBASE 37   /* the entries named here; then C++'s operators */
#define NHOOKS (NBASE + HOOKS_CXX_N)
static struct hook hooks[NHOOKS] = {
	{ "malloc", NULL, NULL, NULL },
	{ "free", NULL, NULL, NULL },
	{ "calloc", NULL, NULL, NULL },
	{ "realloc", NULL, NULL, NULL },
	{ "reallocarray", NULL, NULL, NULL },
	{ "posix_memalign", NULL, NULL, NULL },
	{ "aligned_alloc", NULL, NULL, NULL },
	{ "memalign", NULL, NULL, NULL },
	{ "valloc", NULL, NULL, NULL },
	{ "pvalloc", NULL, NULL, NULL },
	{ "cfree", NULL, NULL, NULL },
	{ "_exit", NULL, NULL, NULL },
	{ "_Exit", NULL, NULL, NULL },
	{ "setuid", NULL, NULL, NULL },
	{ "seteuid", NULL, NULL, NULL },
	{ "setreuid", NULL, NULL, NULL },
	{ "setresuid", NULL, NULL, NULL },
	{ "dlclose", NULL, NULL, NULL },
	{ "mallocx", NULL, NULL, NULL },   /* jemalloc's API (hooks_jemalloc.h) */
	{ "rallocx", NULL, NULL, NULL },
	{ "xallocx", NULL, NULL, NULL },
	{ "sdallocx", NULL, NULL, NULL },
	{ "dallocx", NULL, NULL, NULL },
	{ "mmap", NULL, NULL, NULL },      /* anonymous mappings (hooks_mmap.h) */
	{ "mmap64", NULL, NULL, NULL },
	{ "munmap", NULL, NULL, NULL },
	{ "mremap", NULL, NULL, NULL },
	{ "execve", NULL, NULL, NULL },    /* the exec family (hooks_exec.h) */
	{ "execv", NULL, NULL, NULL },
	{ "execvp", NULL, NULL, NULL },
	{ "execvpe", NULL, NULL, NULL },
	{ "fexecve", NULL, NULL, NULL },
	{ "execl", NULL, NULL, NULL },
	{ "execlp", NULL, NULL, NULL },
	{ "execle", NULL, NULL, NULL },
	{ "dlmopen", NULL, NULL, NULL },  /* NBASE - 2: real_dlmopen */
	{ "dlopen", NULL, NULL, NULL },   /* NBASE - 1: real_dlopen */
	/* [NBASE, NHOOKS): operator new and delete (hooks_cxx.h),
	 * named by got_init. */
};

int got_init(void)
{
	void *ours[] = {
		(void *)hook_malloc, (void *)hook_free, (void *)hook_calloc,
		(void *)hook_realloc, (void *)hook_reallocarray,
		(void *)hook_posix_memalign, (void *)hook_aligned_alloc,
		(void *)hook_memalign, (void *)hook_valloc, (void *)hook_pvalloc,
		(void *)hook_free, (void *)hook__exit, (void *)hook__Exit,
		(void *)hook_setuid, (void *)hook_seteuid, (void *)hook_setreuid,
		(void *)hook_setresuid, (void *)hook_dlclose,
		(void *)hook_mallocx, (void *)hook_rallocx, (void *)hook_xallocx,
		(void *)hook_sdallocx, (void *)hook_dallocx,
		(void *)hook_mmap, (void *)hook_mmap, (void *)hook_munmap,
		(void *)hook_mremap,
		(void *)hook_execve, (void *)hook_execv, (void *)hook_execvp,
		(void *)hook_execvpe, (void *)hook_fexecve, (void *)hook_execl,
		(void *)hook_execlp, (void *)hook_execle,
		(void *)hook_dlmopen, (void *)hook_dlopen,
	};
	_Static_assert(sizeof ours / sizeof *ours == NBASE, "one hook a name");
	YM_ASSERT(strcmp(hooks[NBASE - 1].name, "dlopen") == 0 &&
		  strcmp(hooks[NBASE - 2].name, "dlmopen") == 0);
	for (size_t i = 0; i < NHOOKS; i++) {
		if (i >= NBASE) {
			hooks[i].name = hooks_cxx_names[i - NBASE];
			hooks[i].hook = hooks_cxx_fn((unsigned)(i - NBASE));
		} else {
			hooks[i].hook = ours[i];
		}
		hooks[i].real = sym_global(hooks[i].name);
	}
	/* Injected: what a slot hands out (GLOB_DAT, data words) points
	 * at the trampoline page, so that detach can unload the agent. */
	if (agent_injected && tramp_init() == 0) {
		for (size_t i = 0; i < NHOOKS; i++) {
			int fresh;
			if (hooks[i].real)
				hooks[i].entry = tramp_entry(hooks[i].name,
							     hooks[i].hook, &fresh);
		}
	}
	*(void **)&real_dlopen = hooks[NBASE - 1].real;
	*(void **)&real_dlmopen = hooks[NBASE - 2].real;
	/* Without the real malloc and free nothing may be patched. */
	return hooks[0].real && hooks[1].real ? 0 : -1;
}

/* ---- One object ---- */

struct obj {
	uintptr_t base;
	const ElfW(Sym) *symtab;
	const char *strtab;
	size_t strsz;
	uint32_t nsyms;
	uintptr_t relro_lo, relro_hi;   /* page-aligned; read-only after load */
	uintptr_t lo, hi;               /* mapped extent */
	struct { uintptr_t lo, hi; } rw[4];   /* writable PT_LOAD segments */
	int nrw;
	const char *name;               /* soname or file name, "": the program */
};

/* Number of dynamic symbols: DT_HASH's nchain, or a walk of DT_GNU_HASH
 * to the end of its last chain. */
static uint32_t count_syms(const uint32_t *hash, const uint32_t *gnu)
{
	if (hash)
		return hash[1];
	if (!gnu)
		return 0;
	uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
	const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;
	for (uint32_t b = 0; b < nbuckets; b++)
		if (buckets[b] > last)
			last = buckets[b];
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return last + 1;
}

static int in_relro(struct obj *o, uintptr_t page)
{
	return page >= o->relro_lo && page < o->relro_hi;
}

static int in_rw(const struct obj *o, uintptr_t a)
{
	for (int i = 0; i < o->nrw; i++)
		if (a >= o->rw[i].lo && a + sizeof(void *) <= o->rw[i].hi)
			return 1;
	return 0;
}

struct writable_q {
	uintptr_t a;
	int w;
};

static int writable_line(const struct os_maps_line *l, void *arg)
{
	struct writable_q *q = arg;
	if (q->a < l->start || q->a >= l->end)
		return 0;
	q->w = l->perms[1] == 'w';
	return 1;
}

/* The mapping that holds a is writable now, by /proc/self/maps: a
 * program may have made its own data read-only (mprotect), which the
 * segment's flags do not say.  0 when it cannot tell. */
static int writable_now(uintptr_t a)
{
	struct writable_q q = { a, 0 };
	return os_maps_walk(writable_line, &q) == 1 && q.w;
}

/* One aligned 8-byte store, through a writable mapping.  A word that
 * cannot be written stays bound to the real function, and is named.
 * data: a data word, which may lie in a page the program protected;
 * GOT slots are in RELRO or the loader's own writable .got.plt. */
static int write_slot(struct obj *o, void **slot, void *fn, int data)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t page = (uintptr_t)slot & ~(pg - 1);
	int ro = in_relro(o, page);
	if (!in_rw(o, (uintptr_t)slot) ||
	    (data && !ro && !writable_now((uintptr_t)slot)) ||
	    (ro && os_protect((void *)page, pg, PROT_READ | PROT_WRITE) != 0)) {
		if (!got_detached)
			seg_note_unseen(YM_UNSEEN_READONLY, o->name);
		return -1;
	}
	__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	if (ro)
		os_protect((void *)page, pg, PROT_READ);
	return 0;
}

/* A relocation of one of our names: its slot, or its data word (data:
 * R_X86_64_64 with addend 0, only REL(A) tables can say that). */
/* What a slot of this type is rewritten to: the hook itself for a PLT
 * slot (only the PLT stub reads it, at every call), its trampoline entry
 * for what code may copy and keep (a GLOB_DAT slot: `&malloc`; a data
 * word), so that a copy outlives the agent (tramp.h). */
static void *hook_for(const struct hook *h, uint32_t type)
{
	if (type == R_X86_64_JUMP_SLOT)
		return h->hook;
	if (!h->entry)
		tramp_refused();
	return h->entry ? h->entry : h->hook;
}

/* Patched by us: the hook or its trampoline entry. */
static int is_ours(const struct hook *h, const void *cur)
{
	return cur == h->hook || (h->entry && cur == h->entry);
}

/* A relocation of one of our names: its slot, or its data word (data:
 * R_X86_64_64 with addend 0, only REL(A) tables can say that).  Detached:
 * a slot or word holding our hook or entry gets the real function back. */
static void patch_rel(struct obj *o, uintptr_t off, ElfW(Xword) info,
		      int data)
{
	uint32_t type = (uint32_t)ELF64_R_TYPE(info);
	uint32_t sym = (uint32_t)ELF64_R_SYM(info);
	if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
	     !(type == R_X86_64_64 && data)) ||
	    sym == 0 || sym >= o->nsyms)
		return;
	ElfW(Word) nm = o->symtab[sym].st_name;
	if (nm >= o->strsz)
		return;
	const char *name = o->strtab + nm;
	for (size_t i = 0; i < NHOOKS; i++) {
		if (strcmp(name, hooks[i].name) != 0 || !hooks[i].real)
			continue;
		void **slot = (void **)(o->base + off);
		if ((uintptr_t)slot < o->lo || (uintptr_t)slot + sizeof *slot > o->hi)
			return;
		if ((uintptr_t)slot & 7) {
			/* A packed table: no single store; left as it is. */
			if (type == R_X86_64_64 && !got_detached &&
			    !memcmp(slot, &hooks[i].real, sizeof *slot))
				seg_note_unseen(YM_UNSEEN_READONLY, o->name);
			return;
		}
		void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		if (got_detached) {
			/* A word that keeps our hook keeps the agent loaded. */
			if (is_ours(&hooks[i], cur) &&
			    write_slot(o, slot, hooks[i].real, type == R_X86_64_64) != 0)
				tramp_refused();
			return;
		}
		void *fn = hook_for(&hooks[i], type);
		if (is_ours(&hooks[i], cur))
			return;   /* patched already */
		if (type == R_X86_64_64) {
			/* Data: only while it still holds the function. */
			if (cur == hooks[i].real)
				write_slot(o, slot, fn, 1);
			return;
		}
		/* Bound to the real function, or not bound yet (a lazy stub in
		 * its own object): ours.  Bound elsewhere, or to the object's
		 * own definition that is not the process's: leave it. */
		const ElfW(Sym) *sy = &o->symtab[sym];
		int own_def = sy->st_shndx != SHN_UNDEF &&
			(uintptr_t)cur == o->base + sy->st_value;
		if (cur == hooks[i].real ||
		    ((uintptr_t)cur >= o->lo && (uintptr_t)cur < o->hi && !own_def))
			write_slot(o, slot, fn, 0);
		return;
	}
}

static void patch_table(struct obj *o, uintptr_t tab, size_t size, int rela)
{
	if (!tab || !size)
		return;
	if (rela) {
		const ElfW(Rela) *r = (const ElfW(Rela) *)tab;
		for (size_t i = 0; i < size / sizeof *r; i++)
			patch_rel(o, r[i].r_offset, r[i].r_info, r[i].r_addend == 0);
	} else {
		/* REL: the addend is the word's old content, gone now. */
		const ElfW(Rel) *r = (const ElfW(Rel) *)tab;
		for (size_t i = 0; i < size / sizeof *r; i++)
			patch_rel(o, r[i].r_offset, r[i].r_info, 0);
	}
}

static void patch_object(struct dl_phdr_info *info)
{
	struct obj o = { .base = info->dlpi_addr, .lo = UINTPTR_MAX,
			 .name = info->dlpi_name && info->dlpi_name[0] ?
				 sym_soname(info) : "" };
	const ElfW(Dyn) *dyn = NULL;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)a;
		if (ph->p_type == PT_LOAD) {
			if (a < o.lo)
				o.lo = a;
			if (a + ph->p_memsz > o.hi)
				o.hi = a + ph->p_memsz;
			if ((ph->p_flags & PF_W) &&
			    o.nrw < (int)(sizeof o.rw / sizeof *o.rw)) {
				o.rw[o.nrw].lo = a;
				o.rw[o.nrw++].hi = a + ph->p_memsz;
			}
		}
		if (ph->p_type == PT_GNU_RELRO) {
			/* As ld.so protects it: the last partial page stays
			 * writable. */
			o.relro_lo = a & ~(pg - 1);
			o.relro_hi = (a + ph->p_memsz) & ~(pg - 1);
		}
	}
	if (!dyn || o.lo >= o.hi)
		return;
	uintptr_t jmprel = 0, rela = 0, rel = 0;
	size_t pltsz = 0, relasz = 0, relsz = 0;
	int pltrel = DT_RELA;
	const uint32_t *hash = NULL, *gnu = NULL;
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: o.symtab = (const ElfW(Sym) *)got_dyn_ptr(o.base, d->d_un.d_ptr); break;
		case DT_STRTAB: o.strtab = (const char *)got_dyn_ptr(o.base, d->d_un.d_ptr); break;
		case DT_STRSZ: o.strsz = d->d_un.d_val; break;
		case DT_HASH: hash = (const uint32_t *)got_dyn_ptr(o.base, d->d_un.d_ptr); break;
		case DT_GNU_HASH: gnu = (const uint32_t *)got_dyn_ptr(o.base, d->d_un.d_ptr); break;
		case DT_JMPREL: jmprel = got_dyn_ptr(o.base, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
		case DT_PLTREL: pltrel = (int)d->d_un.d_val; break;
		case DT_RELA: rela = got_dyn_ptr(o.base, d->d_un.d_ptr); break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_REL: rel = got_dyn_ptr(o.base, d->d_un.d_ptr); break;
		case DT_RELSZ: relsz = d->d_un.d_val; break;
		}
	}
	if (!o.symtab || !o.strtab)
		return;
	o.nsyms = count_syms(hash, gnu);
	patch_table(&o, jmprel, pltsz, pltrel == DT_RELA);
	patch_table(&o, rela, relasz, 1);
	patch_table(&o, rel, relsz, 0);
}

/* ---- Which objects ---- */

static int in_base_namespace(const struct dl_phdr_info *info)
{
	/* _r_debug lists the base namespace; the loader changes the list
	 * under the lock dl_iterate_phdr holds while we look (or that no
	 * thread of a frozen fork child will release: loader.h). */
	const struct r_debug *r = agent_r_debug();
	for (const struct link_map *l = r ? r->r_map : NULL; l; l = l->l_next)
		if (l->l_addr == info->dlpi_addr && l->l_name == info->dlpi_name)
			return 1;
	return 0;
}

static int contains(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && addr >= a && addr < a + ph->p_memsz)
			return 1;
	}
	return 0;
}

static int patch_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	if (contains(info, (uintptr_t)&patch_cb))
		return 0;   /* ourselves */
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if ((vdso && contains(info, vdso)) || strstr(name, "linux-vdso") ||
	    strstr(name, "linux-gate"))
		return 0;
	uintptr_t ldso = (uintptr_t)getauxval(AT_BASE);
	if ((ldso && info->dlpi_addr == ldso) || strstr(name, "/ld-linux"))
		return 0;
	if (!in_base_namespace(info))
		return 0;
	patch_object(info);
	return 0;
}

void got_patch_all(void)
{
	int saved = errno;
	pthread_mutex_lock(&got_lock);
	if (!got_detached)
		loader_iterate(patch_cb, NULL);
	pthread_mutex_unlock(&got_lock);
	errno = saved;
}

void got_patch_try(void)
{
	int saved = errno;
	if (pthread_mutex_trylock(&got_lock) == 0) {
		if (!got_detached)
			loader_iterate(patch_cb, NULL);
		pthread_mutex_unlock(&got_lock);
	}
	errno = saved;
}

int got_unpatch_all(void)
{
	int saved = errno;
	pthread_mutex_lock(&got_lock);
	got_detached = 1;
	loader_iterate(patch_cb, NULL);
	/* Copies of what the slots handed out: their entries now jump to
	 * the real functions. */
	for (size_t i = 0; i < NHOOKS; i++)
		if (hooks[i].entry)
			tramp_point(hooks[i].name, hooks[i].real);
	int complete = tramp_complete();
	pthread_mutex_unlock(&got_lock);
	errno = saved;
	return complete;
}

/* dlopen through a patched slot: load, then hook what was loaded.  Known
 * difference: the loader sees the agent as the caller, so a bare name is
 * searched with the agent's and the executable's paths, not the caller's
 * DT_RUNPATH. */
static void *hook_dlopen(const char *file, int mode)
{
	void *h = real_dlopen(file, mode);
	if (h) {
		struct agent_tls *t = &agent_tls;
		agent_guard_enter(t);
		got_patch_all();
		agent_guard_leave(t);
	}
	return h;
}

static void *hook_dlmopen(Lmid_t ns, const char *file, int mode)
{
	void *h = real_dlmopen(ns, file, mode);
	if (h) {
		struct agent_tls *t = &agent_tls;
		agent_guard_enter(t);
		got_patch_all();   /* the base namespace's new objects only */
		agent_guard_leave(t);
	}
	return h;
}
