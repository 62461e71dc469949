/*
 * symbols: definitions from the objects' dynamic symbol tables
 * (symbols.h).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "dynamic.h"
#include "loader.h"
#include "symbols.h"
#include "threads.h"

/* What a lookup needs of one object, read from its .dynamic once. */
struct table {
	uintptr_t base;
	const char *str;
	const ElfW(Sym) *sym;
	const uint32_t *gh;          /* DT_GNU_HASH */
	const ElfW(Half) *versym;    /* or NULL */
	const ElfW(Dyn) *dyn;
};

static const ElfW(Dyn) *dyn_of(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			return (const ElfW(Dyn) *)(info->dlpi_addr +
						   info->dlpi_phdr[i].p_vaddr);
	return NULL;
}

/* 0 when the object has what a lookup needs. */
static int table_of(const struct dl_phdr_info *info, struct table *t)
{
	uintptr_t b = info->dlpi_addr;
	*t = (struct table){ .base = b, .dyn = dyn_of(info) };
	for (const ElfW(Dyn) *d = t->dyn; d && d->d_tag != DT_NULL; d++) {
		const void *p = (const void *)got_dyn_ptr(b, d->d_un.d_ptr);
		if (d->d_tag == DT_STRTAB)
			t->str = p;
		else if (d->d_tag == DT_SYMTAB)
			t->sym = p;
		else if (d->d_tag == DT_GNU_HASH)
			t->gh = p;
		else if (d->d_tag == DT_VERSYM)
			t->versym = p;
	}
	return t->str && t->sym && t->gh && t->gh[0] ? 0 : -1;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;
	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* The GNU hash table: nbuckets, symoffset, bloom words, bloom shift; the
 * bloom filter (two bits a name) turns most absent names away at one
 * load, then the bucket's chain, hashes with the low bit marking its
 * end. */
static void *find(const struct table *t, const char *name, uint32_t h,
		  int any)
{
	const uint32_t *gh = t->gh;
	uint32_t nbuckets = gh[0], symoff = gh[1], nbloom = gh[2], shift = gh[3];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(const void *)(gh + 4);
	const unsigned bits = sizeof(ElfW(Addr)) * 8;
	if (nbloom) {
		ElfW(Addr) w = bloom[(h / bits) % nbloom];
		if (!((w >> (h % bits)) & (w >> ((h >> shift) % bits)) & 1))
			return NULL;
	}
	const uint32_t *buckets = (const uint32_t *)(bloom + nbloom);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t i = buckets[h % nbuckets];
	if (i < symoff)
		return NULL;
	for (;; i++) {
		uint32_t c = chain[i - symoff];
		const ElfW(Sym) *e = &t->sym[i];
		if ((c | 1) == (h | 1) && strcmp(t->str + e->st_name, name) == 0 &&
		    e->st_shndx != SHN_UNDEF &&
		    ELF64_ST_BIND(e->st_info) != STB_LOCAL &&
		    !(t->versym && (t->versym[i] & 0x8000))) {
			if ((any || ELF64_ST_TYPE(e->st_info) == STT_FUNC) &&
			    ELF64_ST_TYPE(e->st_info) != STT_GNU_IFUNC &&
			    ELF64_ST_TYPE(e->st_info) != STT_TLS && e->st_value)
				return (void *)(t->base + e->st_value);
			return SYM_OTHER;
		}
		if (c & 1)
			return NULL;
	}
}

void *sym_lookup(const struct dl_phdr_info *info, const char *name)
{
	struct table t;
	return table_of(info, &t) == 0 ? find(&t, name, gnu_hash(name), 0) : NULL;
}

void *sym_lookup_any(const struct dl_phdr_info *info, const char *name)
{
	struct table t;
	return table_of(info, &t) == 0 ? find(&t, name, gnu_hash(name), 1) : NULL;
}

const char *sym_soname(const struct dl_phdr_info *info)
{
	const ElfW(Dyn) *d = dyn_of(info);
	const char *str = NULL;
	uintptr_t off = (uintptr_t)-1;
	for (; d && d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_STRTAB)
			str = (const char *)got_dyn_ptr(info->dlpi_addr, d->d_un.d_ptr);
		else if (d->d_tag == DT_SONAME)
			off = d->d_un.d_val;
	}
	if (str && off != (uintptr_t)-1)
		return str + off;
	const char *n = info->dlpi_name ? info->dlpi_name : "";
	const char *slash = strrchr(n, '/');
	return slash ? slash + 1 : n;
}

int sym_needed(const struct dl_phdr_info *info, const char **needed, int max)
{
	const ElfW(Dyn) *d = dyn_of(info);
	const char *str = NULL;
	int n = 0;
	for (const ElfW(Dyn) *e = d; e && e->d_tag != DT_NULL; e++)
		if (e->d_tag == DT_STRTAB)
			str = (const char *)got_dyn_ptr(info->dlpi_addr, e->d_un.d_ptr);
	for (const ElfW(Dyn) *e = d; str && e && e->d_tag != DT_NULL; e++)
		if (e->d_tag == DT_NEEDED && n < max)
			needed[n++] = str + e->d_un.d_val;
	return n;
}

/* ---- sym_next ---- */

struct next_q {
	const char *const *names;
	int n, left;
	void **out;
	int seen_self;
};

int sym_holds(const struct dl_phdr_info *info, uintptr_t a)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && a >= lo && a - lo < ph->p_memsz)
			return 1;
	}
	return 0;
}

static int next_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct next_q *q = arg;
	/* Ourselves by an address of ours: the loader's own lookup
	 * (_dl_find_object) is set up only after the objects are relocated,
	 * and a call may come before that. */
	if (!q->seen_self) {
		q->seen_self = sym_holds(info, (uintptr_t)(void *)next_cb);
		return 0;
	}
	struct table t;
	if (table_of(info, &t) != 0)
		return 0;
	for (int k = 0; k < q->n; k++)
		if (!q->out[k] && (q->out[k] = find(&t, q->names[k],
						    gnu_hash(q->names[k]), 0)))
			q->left--;
	return q->left == 0;
}

void sym_next(const char *const *names, int n, void **out)
{
	struct next_q q = { .names = names, .n = n, .left = n, .out = out };
	memset(out, 0, sizeof *out * (size_t)n);
	loader_iterate(next_cb, &q);
}

/* ---- sym_dlsym, sym_global ---- */

void *sym_dlsym(void *handle, const char *name)
{
	struct agent_tls *t = &agent_tls;
	uint32_t was = t->boot;
	agent_guard_enter(t);
	t->boot = 1;
	void *f = dlsym(handle, name);
	t->boot = was;
	agent_guard_leave(t);
	return f;
}

/* The object holding an address, and whether it defines name. */
struct holder_q {
	uintptr_t addr;
	const char *name;
	int found, defines;
};

static int holder_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct holder_q *q = arg;
	if (!sym_holds(info, q->addr))
		return 0;
	struct table t;
	q->found = 1;
	q->defines = table_of(info, &t) == 0 &&
		find(&t, q->name, gnu_hash(q->name), 0) != NULL;
	return 1;
}

/* The first definition of name in load order, not the agent's own. */
struct first_q {
	const char *name;
	uint32_t hash;
	void *out;
};

static int first_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct first_q *q = arg;
	struct table t;
	if (sym_holds(info, (uintptr_t)(void *)first_cb) || table_of(info, &t) != 0)
		return 0;
	q->out = find(&t, q->name, q->hash, 0);
	return q->out != NULL;
}

void *sym_global(const char *name)
{
	void *f = sym_dlsym(RTLD_DEFAULT, name);
	/* Ours when the agent, preloaded, defines it first: the calls then
	 * reach us already, and forward to the next definition. */
	if (f && sym_ours(f))
		f = sym_dlsym(RTLD_NEXT, name);
	if (!f)
		return NULL;
	struct holder_q h = { .addr = (uintptr_t)f, .name = name };
	loader_iterate(holder_cb, &h);
	if (!h.found || h.defines)
		return f;
	/* A canonical PLT entry: its object has the name only as undefined.
	 * An IFUNC there (SYM_OTHER) is left to the stub: f, dlsym's answer. */
	struct first_q q = { .name = name, .hash = gnu_hash(name) };
	loader_iterate(first_cb, &q);
	return q.out && q.out != SYM_OTHER ? q.out : f;
}

void *sym_forward(const char *name)
{
	return agent_slots ? sym_global(name) : sym_dlsym(RTLD_NEXT, name);
}

/* ---- sym_ours, sym_first_definer ---- */

struct same_q {
	uintptr_t a, b;
};

static int same_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const struct same_q *q = arg;
	return sym_holds(info, q->a) ? 1 + sym_holds(info, q->b) : 0;
}

int sym_same_object(const void *a, const void *b)
{
	struct same_q q = { (uintptr_t)a, (uintptr_t)b };
	return loader_iterate(same_cb, &q) == 2;
}

int sym_ours(const void *f)
{
	return f && sym_same_object(f, (const void *)same_cb);
}

struct definer_q {
	const char *name;
	uint32_t hash;
	int which;          /* SYM_DEF_* */
};

static int definer_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct definer_q *q = arg;
	struct table t;
	if (table_of(info, &t) != 0 || !find(&t, q->name, q->hash, 0))
		return 0;
	if (sym_holds(info, (uintptr_t)(void *)definer_cb))
		q->which = SYM_DEF_OURS;
	else
		q->which = info->dlpi_name && info->dlpi_name[0] ?
			SYM_DEF_OTHER : SYM_DEF_PROGRAM;
	return 1;
}

int sym_first_definer(const char *name)
{
	struct definer_q q = { .name = name, .hash = gnu_hash(name),
			       .which = SYM_DEF_NONE };
	loader_iterate(definer_cb, &q);
	return q.which;
}
