/*
 * sym: symbolization with libdwfl (elfutils) and libiberty's demangler.
 *
 * Model.  The segment's module list is turned into a table of *accepted*
 * modules: non-overlapping [lo, hi) ranges, sorted by lo, each with the
 * path as the segment gave it and, when its file could be opened, is an
 * ELF file and matches the recorded build-id, a Dwfl_Module.  Addresses are
 * mapped to modules through this table (never through dwfl_addrmodule), so
 * a module we refused (missing file, vDSO, changed file) still names the
 * frame ("[libfoo.so+0x1234]") and never lends its symbols to anyone.
 *
 * Memory.  Every string and frame array handed out lives in an arena owned
 * by struct sym and is freed only by sym_free: that is what lets
 * sym_resolve promise "valid until sym_free" even across sym_set_modules,
 * which may throw away the whole libdwfl session and the cache index (the
 * frames stay in the arena).  Strings are interned, so the memory grows
 * with distinct addresses and distinct names, not with lookups.
 *
 * Not thread-safe: one struct sym per thread (libdwfl is not either).
 */
#include <fcntl.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libiberty/demangle.h>

#include "sym.h"

/* Longest inline chain kept for one address (innermost first); deeper
 * chains (only garbage DWARF makes them) lose their outer frames. */
#define SYM_MAX_CHAIN 64

/* Modules considered per list (the agent's default capacity is 1024):
 * bounds the quadratic overlap and reuse checks of sym_set_modules on a
 * hostile list to a fraction of a second.  Later entries get the
 * fallback names. */
#define SYM_MAX_MODULES 16384u

#define ARENA_CHUNK (64u * 1024u)

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

/* One accepted module. */
struct sym_mod {
	uint64_t lo, hi, base;
	const char *path;          /* interned, as in the segment */
	uint64_t key;              /* hash of path, base, lo, hi, build-id */
	uint32_t build_id_len;
	uint8_t build_id[32];
	uint32_t seg_index;        /* index in the last list given */
	Dwfl_Module *dm;           /* NULL: no usable symbols */
	const char *warning;       /* interned, or NULL */
	int kept;                  /* carried over from the previous list */
};

/* Lookup tables libdwfl lacks, per reported module, built on first need
 * and freed with the libdwfl session (they point into its ELF data):
 *  - CU address ranges: elfutils 0.188 finds the CU of an address through
 *    .debug_aranges only, which clang does not emit by default;
 *  - function symbols sorted by address: dwfl_module_addrinfo scans the
 *    whole symbol table on every call (~100 us for libc's). */
struct cu_range {
	Dwarf_Addr lo, hi;         /* module-relative (DWARF) addresses */
	Dwarf_Off die;             /* offset of the CU DIE */
};

struct elf_sym {
	uint64_t addr;             /* absolute */
	uint64_t size;             /* 0: up to the next symbol */
	const char *name;          /* in libdwfl's ELF data */
	int rank;                  /* alias preference, lower is better */
};

/* Out-of-line functions of one CU: without it every lookup would walk the
 * CU's DIE tree from the top, through namespace std and its classes (about
 * 0.5 ms per address in a C++ CU). */
struct fn_range {
	Dwarf_Addr lo, hi;         /* module-relative */
	size_t seq;                /* DIE order: the first of equals wins */
	Dwarf_Die die;             /* DW_TAG_subprogram (maybe in another unit) */
};

struct cu_funcs {
	Dwarf_Off cu;              /* CU DIE offset + 1; 0: empty slot */
	struct fn_range *r;        /* sorted by lo */
	size_t n;
};

struct mod_data {
	struct mod_data *next;
	int cu_built, syms_built;
	struct cu_range *cu;
	size_t ncu;
	struct elf_sym *syms;
	size_t nsyms;
	struct cu_funcs *cf;       /* open addressing by CU offset */
	size_t cf_cap, cf_used;
};

/* Cache slot: state 0 empty, else 1 + ret. */
struct sym_cent {
	uint64_t addr;
	uint32_t state;
	uint32_t n;
	const struct sym_frame *frames;
};

struct sym {
	char *root;                /* path prefix, or NULL */
	char *debuginfo_path;      /* for the callbacks; NULL: libdwfl default */
	Dwfl_Callbacks cb;         /* libdwfl keeps a pointer to it */
	Dwfl *dwfl;
	struct mod_data *mdata;    /* belongs to the current session */

	struct sym_mod *mods;      /* accepted, sorted by lo */
	uint32_t nmods;
	const char **warn;         /* by segment index */
	uint32_t nwarn;

	struct sym_cent *cache;
	size_t cache_cap, cache_used;   /* cap: power of two or 0 */

	const char **strs;         /* intern set, open addressing */
	size_t strs_cap, strs_used;

	struct arena_chunk *arena;
	struct sym_frame scratch;  /* last resort when memory runs out */
};

/* Internal, not in sym.h: exported for tests/unit/test_sym.c only. */
char *sym_demangle(const char *name);

/* ---- small helpers ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	if (h == 0)
		h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static void *arena_alloc(struct sym *s, size_t size)
{
	size_t align = alignof(max_align_t);
	size = (size + align - 1) & ~(align - 1);
	if (size == 0 || size > SIZE_MAX / 2)
		return NULL;
	struct arena_chunk *c = s->arena;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
		c = malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		if (s->arena && size > ARENA_CHUNK) {
			/* Keep filling the current chunk: put the big one behind. */
			c->next = s->arena->next;
			s->arena->next = c;
		} else {
			c->next = s->arena;
			s->arena = c;
		}
	}
	void *p = c->data + c->used;
	c->used += size;
	return p;
}

static void arena_free(struct sym *s)
{
	struct arena_chunk *c = s->arena;
	while (c) {
		struct arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	s->arena = NULL;
}

/* Interned copy of str (owned by s, lives until sym_free), or NULL. */
static const char *intern(struct sym *s, const char *str)
{
	if (!str)
		return NULL;
	size_t len = strlen(str);
	if (s->strs_used * 2 >= s->strs_cap) {
		size_t cap = s->strs_cap ? s->strs_cap * 2 : 1024;
		const char **t = calloc(cap, sizeof *t);
		if (!t)
			return NULL;
		for (size_t i = 0; i < s->strs_cap; i++) {
			const char *o = s->strs[i];
			if (!o)
				continue;
			size_t j = hash_bytes(0, o, strlen(o)) & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = o;
		}
		free(s->strs);
		s->strs = t;
		s->strs_cap = cap;
	}
	size_t j = hash_bytes(0, str, len) & (s->strs_cap - 1);
	while (s->strs[j]) {
		if (!strcmp(s->strs[j], str))
			return s->strs[j];
		j = (j + 1) & (s->strs_cap - 1);
	}
	char *copy = arena_alloc(s, len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, str, len + 1);
	s->strs[j] = copy;
	s->strs_used++;
	return copy;
}

/* Demangled C++ (Itanium), Rust legacy (hash suffix dropped) or Rust v0
 * name, malloc'ed; NULL when name is not mangled or does not demangle.
 * Only "_Z" and "_R" names are tried: libiberty's auto mode would also
 * "demangle" plain C names that look like GNAT or D encodings. */
char *sym_demangle(const char *name)
{
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* DMGL_AUTO: GNU v3 for _Z, which recognises legacy Rust and strips
	 * its "::h<16 hex>" unless DMGL_VERBOSE; the Rust demangler for _R
	 * (v0, libiberty >= 2020, Debian 12 has it). */
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}

/* Interned display name for a raw (maybe mangled) name. */
static const char *display_name(struct sym *s, const char *raw)
{
	if (!raw || !*raw)
		return NULL;
	char *d = sym_demangle(raw);
	const char *r = intern(s, d ? d : raw);
	free(d);
	return r;
}

/* ---- modules ---- */

static uint64_t module_key(const struct ym_module *m, const char *path,
			   uint32_t idlen)
{
	uint64_t h = hash_bytes(0, path, strlen(path));
	h = hash_bytes(h, &m->base, sizeof m->base);
	h = hash_bytes(h, &m->lo, sizeof m->lo);
	h = hash_bytes(h, &m->hi, sizeof m->hi);
	h = hash_bytes(h, &idlen, sizeof idlen);
	h = hash_bytes(h, m->build_id, idlen <= sizeof m->build_id ? idlen : 0);
	return h;
}

static int same_module(const struct sym_mod *a, const struct sym_mod *b)
{
	return a->key == b->key && a->lo == b->lo && a->hi == b->hi &&
	       a->base == b->base && a->path == b->path && /* interned */
	       a->build_id_len == b->build_id_len &&
	       !memcmp(a->build_id, b->build_id, sizeof a->build_id);
}

static int cmp_mod(const void *a, const void *b)
{
	const struct sym_mod *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int overlaps(const struct sym_mod *v, uint32_t n, uint64_t lo,
		    uint64_t hi)
{
	for (uint32_t i = 0; i < n; i++)
		if (lo < v[i].hi && v[i].lo < hi)
			return 1;
	return 0;
}

static void dwfl_stop(struct sym *s)
{
	if (s->dwfl)
		dwfl_end(s->dwfl);
	s->dwfl = NULL;
	while (s->mdata) {
		struct mod_data *next = s->mdata->next;
		free(s->mdata->cu);
		free(s->mdata->syms);
		for (size_t i = 0; i < s->mdata->cf_cap; i++)
			free(s->mdata->cf[i].r);
		free(s->mdata->cf);
		free(s->mdata);
		s->mdata = next;
	}
}

static int dwfl_start(struct sym *s)
{
	s->dwfl = dwfl_begin(&s->cb);
	if (!s->dwfl)
		return -1;
	dwfl_report_begin(s->dwfl);
	dwfl_report_end(s->dwfl, NULL, NULL);
	return 0;
}

/* Open and report m's file; set m->dm or m->warning.  Called between
 * dwfl_report_begin(_add) and dwfl_report_end. */
static void report_module(struct sym *s, struct sym_mod *m)
{
	m->dm = NULL;
	m->warning = NULL;
	if (!s->dwfl || !m->path[0])
		return;
	char full[4096];
	int w = snprintf(full, sizeof full, "%s%s", s->root ? s->root : "",
			 m->path);
	if (w < 0 || (size_t)w >= sizeof full)
		return;
	/* O_NONBLOCK and the S_ISREG check: a path naming a FIFO or a device
	 * must not hang or feed us. */
	int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return;
	}
	/* add_p_vaddr = true: base is the load bias (l_addr), which libdwfl
	 * adds to the ELF's p_vaddr.  With false it would take base as the
	 * address of the first PT_LOAD, which differs for objects whose first
	 * segment is not at vaddr 0 (prelinked or odd linker scripts).  The
	 * file name also names the module: the segment's path, unprefixed. */
	Dwfl_Module *dm = dwfl_report_elf(s->dwfl, m->path, full, fd, m->base,
					  true);
	if (!dm) {
		close(fd);      /* not consumed on failure */
		return;
	}
	if (m->build_id_len == 0) {
		m->dm = dm;
		return;
	}
	const unsigned char *bits = NULL;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(dm, &bits, &vaddr);
	if (m->build_id_len <= sizeof m->build_id && len > 0 && bits &&
	    (uint32_t)len == m->build_id_len &&
	    !memcmp(bits, m->build_id, m->build_id_len)) {
		m->dm = dm;
		return;
	}
	/* The module stays reported in the session but is never consulted:
	 * we map addresses to modules ourselves. */
	char msg[4200];
	snprintf(msg, sizeof msg,
		 "%s: file changed since the process loaded it (build-id "
		 "mismatch)", m->path);
	m->warning = intern(s, msg);
}

/* Drop the cache index; with only_unknown, drop only the addresses that
 * mapped to no module (a new module may claim them).  The frames stay in
 * the arena: pointers handed out remain valid. */
static void cache_drop(struct sym *s, int only_unknown)
{
	if (!s->cache)
		return;
	if (!only_unknown) {
		memset(s->cache, 0, s->cache_cap * sizeof *s->cache);
		s->cache_used = 0;
		return;
	}
	struct sym_cent *old = s->cache;
	size_t cap = s->cache_cap;
	struct sym_cent *t = calloc(cap, sizeof *t);
	if (!t) {
		memset(old, 0, cap * sizeof *old);
		s->cache_used = 0;
		return;
	}
	size_t used = 0;
	for (size_t i = 0; i < cap; i++) {
		if (!old[i].state || !old[i].frames[0].module)
			continue;
		size_t j = mix64(old[i].addr ^ old[i].state) & (cap - 1);
		while (t[j].state)
			j = (j + 1) & (cap - 1);
		t[j] = old[i];
		used++;
	}
	free(old);
	s->cache = t;
	s->cache_used = used;
}

struct sym *sym_new(const char *root)
{
	struct sym *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	if (root && *root) {
		/* A trailing '/' would double the one that starts every path. */
		size_t n = strlen(root);
		while (n > 1 && root[n - 1] == '/')
			n--;
		s->root = strndup(root, n);
		/* Debug files: first under the target's root, then ours (both
		 * checked against the build-id by libdwfl). */
		if (s->root) {
			static const char fmt[] =
				":.debug:%s/usr/lib/debug:/usr/lib/debug";
			size_t len = sizeof fmt + n;
			s->debuginfo_path = malloc(len);
			if (s->debuginfo_path)
				snprintf(s->debuginfo_path, len, fmt, s->root);
		}
		if (!s->root || !s->debuginfo_path) {
			sym_free(s);
			return NULL;
		}
	}
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = s->debuginfo_path ? &s->debuginfo_path : NULL;
	if (dwfl_start(s) != 0) {
		sym_free(s);
		return NULL;
	}
	return s;
}

void sym_free(struct sym *s)
{
	if (!s)
		return;
	dwfl_stop(s);
	free(s->mods);
	free(s->warn);
	free(s->cache);
	free(s->strs);
	arena_free(s);
	free(s->debuginfo_path);
	free(s->root);
	free(s);
}

/* The accepted modules of a list: valid extent, LOADED ones first in
 * list order, then UNLOADED ones newest first, each kept only if it
 * overlaps nothing kept before it. */
static uint32_t accept_modules(struct sym *s, const struct ym_module *mods,
			       uint32_t n, struct sym_mod *out)
{
	uint32_t k = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t c = 0; c < n; c++) {
			uint32_t i = pass == 0 ? c : n - 1 - c;
			const struct ym_module *m = &mods[i];
			if ((pass == 0) != (m->state == YM_MODULE_LOADED))
				continue;
			if (m->state != YM_MODULE_LOADED &&
			    m->state != YM_MODULE_UNLOADED)
				continue;
			if (m->lo >= m->hi || overlaps(out, k, m->lo, m->hi))
				continue;
			char path[sizeof m->path];
			memcpy(path, m->path, sizeof path);
			path[sizeof path - 1] = '\0';
			struct sym_mod *o = &out[k];
			memset(o, 0, sizeof *o);
			o->path = intern(s, path);
			if (!o->path)
				continue;
			o->lo = m->lo;
			o->hi = m->hi;
			o->base = m->base;
			o->build_id_len = m->build_id_len;
			memcpy(o->build_id, m->build_id, sizeof o->build_id);
			o->key = module_key(m, path, m->build_id_len);
			o->seg_index = i;
			k++;
		}
	}
	return k;
}

void sym_set_modules(struct sym *s, const struct ym_module *mods, uint32_t n)
{
	if (!s)
		return;
	if (!mods)
		n = 0;
	if (n > SYM_MAX_MODULES)
		n = SYM_MAX_MODULES;
	struct sym_mod *nm = n ? calloc(n, sizeof *nm) : NULL;
	const char **warn = n ? calloc(n, sizeof *warn) : NULL;
	if (n && (!nm || !warn)) {
		free(nm);
		free(warn);
		return;         /* keep the old list: better than none */
	}
	uint32_t k = accept_modules(s, mods, n, nm);

	/* Incremental when every module we have is still accepted unchanged
	 * (the usual case: the list only grew): keep their Dwfl_Modules and
	 * everything cached.  Otherwise start a new libdwfl session. */
	uint32_t kept = 0;
	for (uint32_t i = 0; i < k; i++) {
		for (uint32_t j = 0; j < s->nmods; j++) {
			if (same_module(&nm[i], &s->mods[j])) {
				nm[i].dm = s->mods[j].dm;
				nm[i].warning = s->mods[j].warning;
				nm[i].kept = 1;
				kept++;
				break;
			}
		}
	}
	int incremental = s->dwfl && kept == s->nmods;
	if (!incremental) {
		dwfl_stop(s);
		if (dwfl_start(s) != 0)
			s->dwfl = NULL;
		for (uint32_t i = 0; i < k; i++)
			nm[i].kept = 0;
	}
	if (k > kept || !incremental) {
		if (s->dwfl) {
			if (incremental)
				dwfl_report_begin_add(s->dwfl);
			else
				dwfl_report_begin(s->dwfl);
		}
		for (uint32_t i = 0; i < k; i++)
			if (!nm[i].kept)
				report_module(s, &nm[i]);
		if (s->dwfl)
			dwfl_report_end(s->dwfl, NULL, NULL);
		cache_drop(s, incremental);
	}
	for (uint32_t i = 0; i < k; i++)
		warn[nm[i].seg_index] = nm[i].warning;
	if (k > 1)
		qsort(nm, k, sizeof *nm, cmp_mod);
	free(s->mods);
	free(s->warn);
	s->mods = nm;
	s->nmods = k;
	s->warn = warn;
	s->nwarn = n;
}

const char *sym_module_warning(struct sym *s, uint32_t i)
{
	if (!s || i >= s->nwarn || !s->warn)
		return NULL;
	return s->warn[i];
}

const char *sym_next_warning(struct sym *s, uint32_t *it)
{
	if (!s || !it || !s->warn)
		return NULL;
	while (*it < s->nwarn) {
		const char *w = s->warn[(*it)++];
		if (w)
			return w;
	}
	return NULL;
}

static const struct sym_mod *find_module(const struct sym *s, uint64_t pc)
{
	uint32_t lo = 0, hi = s->nmods;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct sym_mod *m = &s->mods[mid];
		if (pc < m->lo)
			hi = mid;
		else if (pc >= m->hi)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

/* ---- resolution ---- */

static const char *attr_string(Dwarf_Die *die, unsigned int name)
{
	Dwarf_Attribute a;
	if (!dwarf_attr_integrate(die, name, &a))
		return NULL;
	return dwarf_formstring(&a);
}

/* Name of a subprogram or inlined_subroutine DIE (following
 * DW_AT_abstract_origin and DW_AT_specification): the demangled linkage
 * name, which carries namespaces, classes and parameters, else DW_AT_name. */
static const char *die_function(struct sym *s, Dwarf_Die *die,
				int *qualified)
{
	const char *link = attr_string(die, DW_AT_linkage_name);
	if (!link)
		link = attr_string(die, DW_AT_MIPS_linkage_name);
	*qualified = 0;
	if (link) {
		char *d = sym_demangle(link);
		if (d) {
			const char *r = intern(s, d);
			free(d);
			*qualified = r != NULL;
			return r;
		}
	}
	const char *name = attr_string(die, DW_AT_name);
	if (name && *name)
		return intern(s, name);
	return link ? intern(s, link) : NULL;
}

/* Source file of the call site of an inlined_subroutine DIE. */
static const char *call_file(struct sym *s, Dwarf_Die *die)
{
	Dwarf_Attribute a;
	Dwarf_Word idx;
	if (!dwarf_attr(die, DW_AT_call_file, &a) || dwarf_formudata(&a, &idx))
		return NULL;
	Dwarf_Die cu;
	if (!dwarf_diecu(die, &cu, NULL, NULL))
		return NULL;
	Dwarf_Files *files;
	size_t nfiles;
	if (dwarf_getsrcfiles(&cu, &files, &nfiles) != 0 || idx >= nfiles)
		return NULL;
	const char *f = dwarf_filesrc(files, idx, NULL, NULL);
	if (!f || !*f || !strcmp(f, "???"))
		return NULL;
	return intern(s, f);
}

static int call_line(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	Dwarf_Word v;
	if (!dwarf_attr(die, DW_AT_call_line, &a) || dwarf_formudata(&a, &v))
		return 0;
	return v > (Dwarf_Word)0x7fffffff ? 0 : (int)v;
}

static int cmp_range(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->rank - y->rank;
}

/* dm's tables, created empty on first use (NULL if out of memory). */
static struct mod_data *mod_data_get(struct sym *s, Dwfl_Module *dm)
{
	void **ud = NULL;
	if (!dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL) ||
	    !ud)
		return NULL;
	if (*ud)
		return *ud;
	struct mod_data *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->next = s->mdata;
	s->mdata = x;
	*ud = x;
	return x;
}

static void build_cu_index(struct mod_data *x, Dwarf *dw)
{
	size_t cap = 0;
	Dwarf_CU *unit = NULL, *next;
	uint8_t type;
	Dwarf_Die cu;
	x->cu_built = 1;
	/* dwarf_get_units always advances and stops at the end of the data. */
	while (dwarf_get_units(dw, unit, &next, NULL, &type, &cu, NULL) == 0) {
		unit = next;
		if (type != DW_UT_compile && type != DW_UT_skeleton &&
		    type != DW_UT_partial)
			continue;
		Dwarf_Addr base, lo, hi;
		ptrdiff_t it = 0;
		while ((it = dwarf_ranges(&cu, it, &base, &lo, &hi)) > 0) {
			if (lo >= hi)
				continue;
			if (x->ncu == cap) {
				size_t nc = cap ? cap * 2 : 64;
				struct cu_range *r = realloc(x->cu, nc * sizeof *r);
				if (!r)
					goto done;
				x->cu = r;
				cap = nc;
			}
			x->cu[x->ncu].lo = lo;
			x->cu[x->ncu].hi = hi;
			x->cu[x->ncu].die = dwarf_dieoffset(&cu);
			x->ncu++;
		}
	}
done:
	if (x->ncu)
		qsort(x->cu, x->ncu, sizeof *x->cu, cmp_range);
}

/* CU DIE containing the module-relative address a, through our index. */
static int cu_index_find(struct sym *s, Dwfl_Module *dm, Dwarf *dw,
			 Dwarf_Addr a, Dwarf_Die *out)
{
	struct mod_data *x = mod_data_get(s, dm);
	if (!x)
		return -1;
	if (!x->cu_built)
		build_cu_index(x, dw);
	size_t lo = 0, hi = x->ncu;     /* first entry with lo > a */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->cu[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Ranges of different CUs should not nest; look back a little in
	 * case they do. */
	for (size_t k = 0; k < 16 && lo > 0; k++, lo--) {
		const struct cu_range *r = &x->cu[lo - 1];
		if (a >= r->lo && a < r->hi)
			return dwarf_offdie(dw, r->die, out) ? 0 : -1;
	}
	return -1;
}

/* Alias preference: global over weak over local, then the name with the
 * fewest leading underscores ("malloc" over "__libc_malloc"). */
static int sym_rank(const GElf_Sym *sym, const char *name)
{
	int bind = GELF_ST_BIND(sym->st_info);
	int r = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 8 : 16;
	int u = 0;
	while (name[u] == '_' && u < 7)
		u++;
	return r + u;
}

static void build_syms(struct mod_data *x, Dwfl_Module *dm)
{
	x->syms_built = 1;
	int n = dwfl_module_getsymtab(dm);
	if (n <= 0)
		return;
	x->syms = malloc((size_t)n * sizeof *x->syms);
	if (!x->syms)
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(dm, i, &sym, &addr,
							   &shndx, NULL, NULL);
		if (!name || !*name || shndx == SHN_UNDEF ||
		    shndx == SHN_ABS || shndx == SHN_COMMON)
			continue;
		int type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC &&
		    type != STT_NOTYPE)
			continue;
		struct elf_sym *e = &x->syms[x->nsyms++];
		e->addr = addr;
		e->size = sym.st_size;
		e->name = name;
		e->rank = sym_rank(&sym, name);
	}
	if (x->nsyms)
		qsort(x->syms, x->nsyms, sizeof *x->syms, cmp_sym);
}

/* ELF symbol table name for pc (works without DWARF: .symtab, .dynsym or
 * MiniDebugInfo), raw (maybe mangled, owned by libdwfl), or NULL.  A sized symbol covers
 * [addr, addr + size); an unsized one (assembly) reaches the next symbol.
 * Among aliases the best ranked wins. */
static const char *elf_symbol(struct sym *s, Dwfl_Module *dm, uint64_t pc)
{
	struct mod_data *x = mod_data_get(s, dm);
	if (!x)
		return NULL;
	if (!x->syms_built)
		build_syms(x, dm);
	size_t lo = 0, hi = x->nsyms;   /* first entry with addr > pc */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->syms[mid].addr <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t next = lo < x->nsyms ? x->syms[lo].addr : UINT64_MAX;
	/* Walk back over a few distinct addresses: a big sized symbol may
	 * enclose smaller ones (rare, but then the small ones do not cover
	 * pc and the big one does). */
	for (int groups = 0; groups < 8 && lo > 0; groups++) {
		size_t i = lo - 1;
		uint64_t at = x->syms[i].addr;
		while (i > 0 && x->syms[i - 1].addr == at)
			i--;
		for (size_t j = i; j < lo; j++) {
			const struct elf_sym *e = &x->syms[j];
			if (e->size ? pc - e->addr < e->size
				    : (groups == 0 && pc < next))
				return e->name;
		}
		next = at;
		lo = i;
	}
	return NULL;
}

/* elf_symbol's name, interned and demangled, or NULL. */
static const char *elf_function(struct sym *s, Dwfl_Module *dm, uint64_t pc)
{
	return display_name(s, elf_symbol(s, dm, pc));
}

/* Depth of the DIE path kept by scope_walk (lexical blocks count too). */
#define SYM_MAX_SCOPES 128

/* Scopes containing pc below parent, outermost first, into path[depth..]:
 * returns the new depth.  Like dwarf_getscopes, but it also looks inside
 * namespaces, classes and imported units (level: nesting, bounded), where clang and rustc put
 * function definitions (libdw 0.188's dwarf_getscopes does not find them
 * there).  *budget bounds the DIEs visited: garbage DWARF (a sibling
 * reference pointing backwards, an import cycle) cannot loop. */
static int scope_walk(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *path,
		      int depth, int level, long *budget)
{
	Dwarf_Die child;
	if (depth >= SYM_MAX_SCOPES || level >= 2 * SYM_MAX_SCOPES ||
	    dwarf_child(parent, &child) != 0)
		return depth;
	do {
		if (--*budget < 0)
			return depth;
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
		case DW_TAG_lexical_block:
		case DW_TAG_try_block:
		case DW_TAG_catch_block:
		case DW_TAG_with_stmt:
		case DW_TAG_entry_point:
			if (dwarf_haspc(&child, pc) > 0) {
				path[depth] = child;
				return scope_walk(&child, pc, path, depth + 1,
						  level + 1, budget);
			}
			break;
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_interface_type: {
			int d = scope_walk(&child, pc, path, depth,
					   level + 1, budget);
			if (d > depth)
				return d;
			break;
		}
		case DW_TAG_imported_unit: {
			Dwarf_Attribute a;
			Dwarf_Die unit;
			if (dwarf_attr(&child, DW_AT_import, &a) &&
			    dwarf_formref_die(&a, &unit)) {
				int d = scope_walk(&unit, pc, path, depth,
						   level + 1, budget);
				if (d > depth)
					return d;
			}
			break;
		}
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return depth;
}

static int cmp_fn(const void *a, const void *b)
{
	const struct fn_range *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct fn_vec {
	struct fn_range *r;
	size_t n, cap;
	long budget;               /* DIEs left to visit */
};

/* Collect the subprograms with code below parent, looking inside
 * namespaces, classes and imported units but not inside functions. */
static void collect_funcs(Dwarf_Die *parent, struct fn_vec *v, int level)
{
	Dwarf_Die child;
	if (level >= 2 * SYM_MAX_SCOPES || dwarf_child(parent, &child) != 0)
		return;
	do {
		if (--v->budget < 0)
			return;
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram: {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t it = 0;
			while ((it = dwarf_ranges(&child, it, &base, &lo, &hi)) >
			       0) {
				if (lo >= hi)
					continue;
				if (v->n == v->cap) {
					size_t nc = v->cap ? v->cap * 2 : 64;
					struct fn_range *r =
						realloc(v->r, nc * sizeof *r);
					if (!r)
						return;
					v->r = r;
					v->cap = nc;
				}
				v->r[v->n].lo = lo;
				v->r[v->n].hi = hi;
				v->r[v->n].die = child;
				v->r[v->n].seq = v->n;
				v->n++;
			}
			break;
		}
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_interface_type:
			collect_funcs(&child, v, level + 1);
			break;
		case DW_TAG_imported_unit: {
			Dwarf_Attribute a;
			Dwarf_Die unit;
			if (dwarf_attr(&child, DW_AT_import, &a) &&
			    dwarf_formref_die(&a, &unit))
				collect_funcs(&unit, v, level + 1);
			break;
		}
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
}

/* The function table of cu (built on first use), or NULL. */
static const struct cu_funcs *cu_funcs_get(struct sym *s, Dwfl_Module *dm,
					   Dwarf_Die *cu)
{
	struct mod_data *x = mod_data_get(s, dm);
	if (!x)
		return NULL;
	Dwarf_Off key = dwarf_dieoffset(cu) + 1;
	if (x->cf_cap) {
		for (size_t j = mix64(key) & (x->cf_cap - 1); x->cf[j].cu;
		     j = (j + 1) & (x->cf_cap - 1))
			if (x->cf[j].cu == key)
				return &x->cf[j];
	}
	if ((x->cf_used + 1) * 2 > x->cf_cap) {
		size_t cap = x->cf_cap ? x->cf_cap * 2 : 64;
		struct cu_funcs *t = calloc(cap, sizeof *t);
		if (!t)
			return NULL;
		for (size_t i = 0; i < x->cf_cap; i++) {
			if (!x->cf[i].cu)
				continue;
			size_t j = mix64(x->cf[i].cu) & (cap - 1);
			while (t[j].cu)
				j = (j + 1) & (cap - 1);
			t[j] = x->cf[i];
		}
		free(x->cf);
		x->cf = t;
		x->cf_cap = cap;
	}
	struct fn_vec v = { .budget = 10000000 };
	collect_funcs(cu, &v, 0);
	if (v.n > 1)
		qsort(v.r, v.n, sizeof *v.r, cmp_fn);
	size_t j = mix64(key) & (x->cf_cap - 1);
	while (x->cf[j].cu)
		j = (j + 1) & (x->cf_cap - 1);
	x->cf[j].cu = key;
	x->cf[j].r = v.r;
	x->cf[j].n = v.n;
	x->cf_used++;
	return &x->cf[j];
}

/* The out-of-line function of cu containing the module-relative a. */
static int cu_func_find(struct sym *s, Dwfl_Module *dm, Dwarf_Die *cu,
			Dwarf_Addr a, Dwarf_Die *out)
{
	const struct cu_funcs *f = cu_funcs_get(s, dm, cu);
	if (!f || !f->n)
		return -1;
	size_t lo = 0, hi = f->n;       /* first entry with lo > a */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->r[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Walk back over a few start addresses; among DIEs starting at the
	 * same address (assembler aliases), the first in DIE order. */
	for (int groups = 0; groups < 16 && lo > 0; groups++) {
		size_t i = lo - 1;
		Dwarf_Addr at = f->r[i].lo;
		while (i > 0 && f->r[i - 1].lo == at)
			i--;
		for (size_t j = i; j < lo; j++) {
			if (a < f->r[j].hi) {
				*out = f->r[j].die;
				return 0;
			}
		}
		lo = i;
	}
	return -1;
}

/* Inline chain for pc, innermost first, into f; returns the count. */
static int resolve_dwfl(struct sym *s, Dwfl_Module *dm, uint64_t pc,
			struct sym_frame *f)
{
	int n = 0;
	const char *file = NULL;
	int line = 0;

	/* The CU: libdw's lookup (.debug_aranges), else our CU index. */
	Dwarf_Addr bias = 0;
	Dwarf_Die cu;
	int have_cu = 0;
	Dwarf_Die *cup = dwfl_module_addrdie(dm, pc, &bias);
	if (cup) {
		cu = *cup;
		have_cu = 1;
	} else {
		Dwarf *dw = dwfl_module_getdwarf(dm, &bias);
		if (dw && pc >= bias &&
		    cu_index_find(s, dm, dw, pc - bias, &cu) == 0)
			have_cu = 1;
	}

	/* The innermost line. */
	Dwfl_Line *l = dwfl_module_getsrc(dm, pc);
	if (l) {
		int ln = 0;
		const char *src = dwfl_lineinfo(l, NULL, &ln, NULL, NULL, NULL);
		if (src && *src) {
			file = intern(s, src);
			line = ln > 0 ? ln : 0;
		}
	} else if (have_cu) {
		Dwarf_Line *dl = dwarf_getsrc_die(&cu, pc - bias);
		int ln = 0;
		const char *src = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
		if (src && *src && dwarf_lineno(dl, &ln) == 0) {
			file = intern(s, src);
			line = ln > 0 ? ln : 0;
		}
	}

	/* Scopes innermost first: ours, else libdw's. */
	Dwarf_Die path[SYM_MAX_SCOPES];
	Dwarf_Die *scopes = NULL, *owned = NULL;
	int ns = 0;
	if (have_cu) {
		/* The function from the CU's table, then the scopes inside it;
		 * else (nested functions, odd producers) the whole CU. */
		long budget = 1000000;
		int d = 0;
		if (cu_func_find(s, dm, &cu, pc - bias, &path[0]) == 0)
			d = scope_walk(&path[0], pc - bias, path, 1, 0,
				       &budget);
		if (d == 0)
			d = scope_walk(&cu, pc - bias, path, 0, 0, &budget);
		for (int i = 0; i < d / 2; i++) {
			Dwarf_Die t = path[i];
			path[i] = path[d - 1 - i];
			path[d - 1 - i] = t;
		}
		scopes = path;
		ns = d;
		if (ns == 0) {
			ns = dwarf_getscopes(&cu, pc - bias, &owned);
			scopes = owned;
			if (ns < 0)
				ns = 0;
		}
	}
	int real = 0, qualified = 0;
	for (int i = 0; i < ns && n < SYM_MAX_CHAIN; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		f[n].function = die_function(s, &scopes[i], &qualified);
		f[n].file = file;
		f[n].line = line;
		f[n].inlined = tag == DW_TAG_inlined_subroutine;
		n++;
		if (tag == DW_TAG_subprogram) {
			real = 1;
			break;
		}
		/* The call site of this inlined body is where the next
		 * outer function stands. */
		file = call_file(s, &scopes[i]);
		line = call_line(&scopes[i]);
	}
	free(owned);

	if (n > 0 && real) {
		/* The real function without a linkage name in DWARF (GCC
		 * omits it for internal linkage, e.g. C++ anonymous
		 * namespaces): a mangled ELF symbol reads better, qualified
		 * and with parameters.  A plain C symbol adds nothing. */
		if (!qualified) {
			const char *raw = elf_symbol(s, dm, pc);
			char *d = sym_demangle(raw);
			if (d) {
				const char *q = intern(s, d);
				if (q)
					f[n - 1].function = q;
			} else if (!f[n - 1].function && raw) {
				f[n - 1].function = intern(s, raw);
			}
			free(d);
		}
		return n;
	}
	/* No enclosing subprogram (no DWARF, assembly, truncated chain):
	 * the symbol table names the real function. */
	if (n == SYM_MAX_CHAIN)
		n--;
	f[n].function = elf_function(s, dm, pc);
	f[n].file = file;
	f[n].line = f[n].file ? line : 0;
	f[n].inlined = 0;
	return n + 1;
}

static int cache_grow(struct sym *s)
{
	size_t cap = s->cache_cap ? s->cache_cap * 2 : 4096;
	struct sym_cent *t = calloc(cap, sizeof *t);
	if (!t)
		return -1;
	for (size_t i = 0; i < s->cache_cap; i++) {
		if (!s->cache[i].state)
			continue;
		size_t j = mix64(s->cache[i].addr ^ s->cache[i].state) &
			   (cap - 1);
		while (t[j].state)
			j = (j + 1) & (cap - 1);
		t[j] = s->cache[i];
	}
	free(s->cache);
	s->cache = t;
	s->cache_cap = cap;
	return 0;
}

int sym_resolve(struct sym *s, uint64_t addr, int ret,
		const struct sym_frame **out)
{
	static const struct sym_frame unknown;
	const struct sym_frame *dummy;
	if (!out)
		out = &dummy;
	if (!s) {
		*out = &unknown;
		return 1;
	}
	uint32_t state = ret ? 2 : 1;
	uint64_t h = mix64(addr ^ state);
	if (s->cache_cap) {
		for (size_t j = h & (s->cache_cap - 1); s->cache[j].state;
		     j = (j + 1) & (s->cache_cap - 1)) {
			if (s->cache[j].addr == addr &&
			    s->cache[j].state == state) {
				*out = s->cache[j].frames;
				return (int)s->cache[j].n;
			}
		}
	}

	/* A return address points after the call: the call is at addr - 1
	 * (for a signal frame it would be addr itself; the agent's stacks
	 * hold return addresses). */
	uint64_t pc = ret && addr > 0 ? addr - 1 : addr;
	struct sym_frame tmp[SYM_MAX_CHAIN];
	memset(tmp, 0, sizeof tmp);
	int n = 0;
	const struct sym_mod *m = find_module(s, pc);
	if (m && m->dm)
		n = resolve_dwfl(s, m->dm, pc, tmp);
	if (n <= 0)
		n = 1;
	for (int i = 0; i < n; i++) {
		tmp[i].addr = addr;
		tmp[i].module = m ? m->path : NULL;
		tmp[i].offset = m ? addr - m->base : 0;
	}

	struct sym_frame *frames = arena_alloc(s, (size_t)n * sizeof *frames);
	if (!frames) {
		s->scratch = tmp[0];
		*out = &s->scratch;
		return 1;
	}
	memcpy(frames, tmp, (size_t)n * sizeof *frames);
	*out = frames;

	if ((s->cache_used + 1) * 2 > s->cache_cap && cache_grow(s) != 0)
		return n;       /* uncached, still correct */
	size_t j = h & (s->cache_cap - 1);
	while (s->cache[j].state)
		j = (j + 1) & (s->cache_cap - 1);
	s->cache[j].addr = addr;
	s->cache[j].state = state;
	s->cache[j].n = (uint32_t)n;
	s->cache[j].frames = frames;
	s->cache_used++;
	return n;
}

void sym_fallback(const struct sym_frame *f, char *buf, size_t len)
{
	if (!buf || len == 0)
		return;
	if (!f) {
		snprintf(buf, len, "[?]");
		return;
	}
	if (f->module) {
		const char *base = strrchr(f->module, '/');
		base = base ? base + 1 : f->module;
		if (*base)
			snprintf(buf, len, "[%s+0x%llx]", base,
				 (unsigned long long)f->offset);
		else
			snprintf(buf, len, "[0x%llx]",
				 (unsigned long long)f->addr);
	} else {
		snprintf(buf, len, "[0x%llx]", (unsigned long long)f->addr);
	}
}
