/*
 * sym: symbolization with libdwfl (elfutils) and libiberty's demangler.
 *
 * The files of sym/, by concern:
 *   sym.c       this: the public API, a process's modules and its cache
 *               of resolved addresses;
 *   files.c     per ELF file, shared by every process that maps it: the
 *               libdwfl session and the resolved vaddrs (files.h);
 *   modules.c   the segment's module list -> accepted modules (modules.h
 *               says why addresses never go through dwfl_addrmodule);
 *   resolve.c   one address of a module -> its inline chain (DWARF, ELF);
 *   tables.c    per-module lookup tables libdwfl lacks (CUs, functions,
 *               ELF symbols);
 *   fetch.c     debug files from debuginfod servers, time-bounded, in
 *               child processes (fetch.h says why not libdw's own way);
 *   demangle.c  C++ and Rust names;
 *   store.c     the arena and the interned strings;
 *   frames.c, names.c, rules.c  stacks as people read them (frames.h).
 *
 * Memory.  Every frame array handed out lives in the store owned by
 * struct sym, and the names in it live in the stores of the files the
 * struct sym holds (a reference each, given back by sym_free): that is
 * what lets sym_resolve promise "valid until sym_free" even across
 * sym_set_modules, which may drop modules and the cache index.  Strings
 * are interned, so the memory grows with distinct addresses and distinct
 * names, not with lookups; a process costs its own module list and the
 * frames of its own addresses, its files' symbols are shared.
 *
 * Not thread-safe: every struct sym shares the files' state, so all of
 * them are used from one thread at a time (libdwfl is not thread-safe).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fetch.h"
#include "files.h"
#include "modules.h"
#include "proc.h"
#include "resolve.h"
#include "store.h"
#include "sym.h"
#include "util/hashmap.h"

/* Modules considered per list (the agent's default capacity is 1024):
 * bounds the quadratic overlap and reuse checks of sym_set_modules on a
 * hostile list to a fraction of a second.  Later entries get the
 * fallback names. */
#define SYM_MAX_MODULES 16384u

/* A resolved address: state 1 + ret (the key is addr and state). */
struct sym_cent {
	uint64_t addr;
	uint32_t state;
	uint32_t n;
	const struct sym_frame *frames;
};

struct sym {
	char *root;                /* path prefix, or NULL */
	pid_t pid;                 /* the live process, or 0 (sym_set_pid) */

	struct sym_mod *mods;      /* accepted, sorted by lo */
	uint32_t nmods;
	const char **warn;         /* by segment index */
	uint32_t nwarn;
	/* Every file this process's modules ever took (one reference
	 * each): frames handed out point into them until sym_free. */
	struct sym_file **held;
	uint32_t nheld, capheld;

	struct sym_cent *cent;     /* the cache, in order of resolution */
	uint32_t ncent, capcent;
	struct hmap cache;         /* cache_hash -> index in cent */

	struct sym_store store;
	struct sym_frame scratch;  /* last resort when memory runs out */
	/* Python code objects (sym_set_pycodes), interned names by index. */
	const char **pyname, **pyfile;
	uint32_t npy;
	unsigned gen;              /* sym_files_poll's generation taken in */
	uint64_t epoch;            /* sym_epoch's */
};

/* Epochs of every symbolizer, from one counter: two symbolizers never
 * share one, so an epoch names one symbolizer's state alone. */
static _Atomic uint64_t epochs;

static void new_epoch(struct sym *s)
{
	s->epoch = atomic_fetch_add(&epochs, 1) + 1;
}

uint64_t sym_epoch(const struct sym *s)
{
	return s ? s->epoch : 0;
}

static uint64_t cache_hash(uint64_t addr, uint32_t state)
{
	return hmap_u64(addr ^ state);
}

struct cache_key {
	const struct sym *s;
	uint64_t addr;
	uint32_t state;
};

static int cache_eq(const void *ctx, uint32_t i)
{
	const struct cache_key *k = ctx;
	return k->s->cent[i].addr == k->addr && k->s->cent[i].state == k->state;
}

/* Drop the cache index; with only_unknown, drop only the addresses that
 * mapped to no module (a new module may claim them).  The frames stay in
 * the store: pointers handed out remain valid. */
static void cache_drop(struct sym *s, int only_unknown)
{
	new_epoch(s);
	hmap_clear(&s->cache);
	uint32_t k = 0;
	for (uint32_t i = 0; only_unknown && i < s->ncent; i++) {
		if (!s->cent[i].frames[0].module)
			continue;
		s->cent[k] = s->cent[i];
		/* Fewer entries than before in the same capacity: no growth,
		 * so this cannot fail. */
		hmap_add(&s->cache, cache_hash(s->cent[k].addr, s->cent[k].state), k);
		k++;
	}
	s->ncent = k;
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
		if (!s->root) {
			sym_free(s);
			return NULL;
		}
	}
	fetch_setup();
	s->gen = sym_files_poll();
	new_epoch(s);
	return s;
}

void sym_free(struct sym *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nheld; i++)
		sym_file_put(s->held[i]);
	free(s->held);
	free(s->mods);
	free(s->warn);
	free(s->cent);
	free(s->pyname);
	free(s->pyfile);
	hmap_free(&s->cache);
	sym_store_free(&s->store);
	free(s->root);
	free(s);
}

void sym_set_pid(struct sym *s, pid_t pid)
{
	if (s && s->pid != pid) {
		s->pid = pid;
		new_epoch(s);
	}
}

/* m has no build-id to tell its file by: is the file its path names now
 * another than the one the live process mapped at m->lo?  Compared by
 * inode, size and modification time (not the device: an overlay shows
 * its own, the mapping the layer's).  0 when the same, or when it cannot
 * be told (no live process, the mapping gone, map_files unreadable). */
static int replaced_since_load(const struct sym *s, const struct sym_mod *m)
{
	uint64_t hi;
	if (!s->pid || m->build_id_len || proc_mapping_at(s->pid, m->lo, &hi) != 0)
		return 0;
	char mapped[96], named[4096];
	snprintf(mapped, sizeof mapped, "/proc/%ld/map_files/%llx-%llx",
		 (long)s->pid, (unsigned long long)m->lo, (unsigned long long)hi);
	int w = snprintf(named, sizeof named, "%s%s", s->root ? s->root : "",
			 m->path);
	struct stat a, b;
	if (w < 0 || (size_t)w >= sizeof named || stat(mapped, &a) != 0 ||
	    stat(named, &b) != 0)
		return 0;
	return a.st_ino != b.st_ino || a.st_size != b.st_size ||
	       a.st_mtim.tv_sec != b.st_mtim.tv_sec ||
	       a.st_mtim.tv_nsec != b.st_mtim.tv_nsec;
}

/* The file of m, its reference kept in s->held (one per file); NULL when
 * it has no usable symbols (m->warning may say why). */
static struct sym_file *take_file(struct sym *s, struct sym_mod *m)
{
	if (replaced_since_load(s, m)) {
		char msg[4200];
		snprintf(msg, sizeof msg, "%s: file changed since the process "
			 "loaded it (another file at its path; it has no build-id)",
			 m->path);
		m->warning = sym_store_intern(&s->store, msg);
		return NULL;
	}
	struct sym_file *f = sym_file_get(s->root, m->path, m->build_id,
					  m->build_id_len, &s->store,
					  &m->warning);
	if (!f)
		return NULL;
	for (uint32_t i = 0; i < s->nheld; i++) {
		if (s->held[i] == f) {
			sym_file_put(f);
			return f;
		}
	}
	if (s->nheld == s->capheld) {
		uint32_t cap = s->capheld ? s->capheld * 2 : 8;
		void *v = realloc(s->held, (size_t)cap * sizeof *s->held);
		if (!v) {
			sym_file_put(f);
			return NULL;
		}
		s->held = v;
		s->capheld = cap;
	}
	s->held[s->nheld++] = f;
	return f;
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
	uint32_t k = sym_mods_accept(&s->store, mods, n, nm);

	/* Modules we had unchanged keep their file; the others look theirs
	 * up among the files every process shares (files.h).  When every
	 * module we had is kept (the usual case: the list only grew), what
	 * is cached stays but the addresses no module claimed. */
	uint32_t kept = 0;
	for (uint32_t i = 0; i < k; i++) {
		for (uint32_t j = 0; j < s->nmods; j++) {
			if (sym_mod_same(&nm[i], &s->mods[j])) {
				nm[i].file = s->mods[j].file;
				nm[i].warning = s->mods[j].warning;
				nm[i].kept = 1;
				kept++;
				break;
			}
		}
		if (!nm[i].kept)
			nm[i].file = take_file(s, &nm[i]);
	}
	if (k > kept || kept != s->nmods)
		cache_drop(s, kept == s->nmods);
	for (uint32_t i = 0; i < k; i++)
		warn[nm[i].seg_index] = nm[i].warning;
	sym_mods_sort(nm, k);
	free(s->mods);
	free(s->warn);
	s->mods = nm;
	s->nmods = k;
	s->warn = warn;
	s->nwarn = n;
}

int sym_poll(struct sym *s)
{
	if (!s || !fetch_enabled())
		return 0;
	unsigned g = sym_files_poll();
	if (g == s->gen)
		return 0;
	s->gen = g;
	cache_drop(s, 0);
	return 1;
}

void sym_prefetch(struct sym *s, uint64_t addr)
{
	if (!s || !fetch_enabled())
		return;
	const struct sym_mod *m = sym_mods_find(s->mods, s->nmods,
						addr ? addr - 1 : 0);
	if (m)
		sym_file_prefetch(m->file);
}

unsigned sym_pending(struct sym *s, char *buf, size_t len)
{
	(void)s;
	if (!fetch_enabled()) {
		if (buf && len)
			buf[0] = '\0';
		return 0;
	}
	fetch_poll();
	return fetch_pending(buf, len);
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

void sym_set_pycodes(struct sym *s, const struct ym_pycode *codes, uint32_t n)
{
	if (!s || n <= s->npy || n > YM_LIMIT_PYCODES)
		return;
	const char **a = realloc(s->pyname, (size_t)n * sizeof *a);
	if (!a)
		return;
	s->pyname = a;
	const char **b = realloc(s->pyfile, (size_t)n * sizeof *b);
	if (!b)
		return;
	s->pyfile = b;
	for (uint32_t i = s->npy; i < n; i++) {
		a[i] = sym_store_intern(&s->store, codes[i].qualname[0] ?
					codes[i].qualname : "[python]");
		b[i] = codes[i].filename[0] ?
			sym_store_intern(&s->store, codes[i].filename) : NULL;
	}
	s->npy = n;
	new_epoch(s);
}

/* A Python frame word: its code's names (cached once known). */
static int python_frame(struct sym *s, uint64_t w, const struct sym_frame **out)
{
	uint32_t state = 3;
	uint64_t h = cache_hash(w, state);
	struct cache_key key = { s, w, state };
	uint32_t hit = hmap_find(&s->cache, h, cache_eq, &key);
	if (hit != HMAP_NONE) {
		*out = s->cent[hit].frames;
		return 1;
	}
	uint32_t c = YM_PYFRAME_CODE(w);
	int known = c < s->npy;
	struct sym_frame f = {
		.addr = w,
		.function = known ? s->pyname[c] : "[python]",
		.file = known ? s->pyfile[c] : NULL,
		.line = known ? (int)YM_PYFRAME_LINE(w) : 0,
		.python = 1,
	};
	struct sym_frame *fr = known ? sym_store_alloc(&s->store, sizeof *fr) : NULL;
	if (!fr) {
		s->scratch = f;
		*out = &s->scratch;
		return 1;
	}
	*fr = f;
	*out = fr;
	if (s->ncent == s->capcent) {
		uint32_t cap = s->capcent ? s->capcent * 2 : 4096;
		struct sym_cent *ce = cap <= HMAP_MAX_ENTRIES ?
			realloc(s->cent, (size_t)cap * sizeof *ce) : NULL;
		if (!ce)
			return 1;
		s->cent = ce;
		s->capcent = cap;
	}
	if (hmap_add(&s->cache, h, s->ncent) == 0)
		s->cent[s->ncent++] = (struct sym_cent){
			.addr = w, .state = state, .n = 1, .frames = fr,
		};
	return 1;
}

/* Is the native frame at return address a the evaluation loop's? */
static int eval_loop(struct sym *s, uint64_t a)
{
	const struct sym_frame *f;
	int n = sym_resolve(s, a, 1, &f);
	const char *fn = n > 0 ? f[n - 1].function : NULL;
	return fn && strcmp(fn, "_PyEval_EvalFrameDefault") == 0;
}

uint32_t sym_splice(struct sym *s, const uint64_t *addrs, uint32_t depth,
		    uint64_t *out)
{
	uint32_t native = 0;
	while (native < depth && !(addrs[native] & YM_PYFRAME))
		native++;
	uint32_t py = native, n = 0;
	for (uint32_t i = 0; i < native; i++) {
		if (py < depth && eval_loop(s, addrs[i])) {
			/* This call's frames: up to the next entry frame. */
			while (py < depth) {
				uint64_t w = addrs[py++];
				if (YM_PYFRAME_CODE(w) != YM_PYCODE_NONE)
					out[n++] = w;
				if (w & YM_PYFRAME_ENTRY)
					break;
			}
			continue;
		}
		out[n++] = addrs[i];
	}
	for (; py < depth; py++)
		if (YM_PYFRAME_CODE(addrs[py]) != YM_PYCODE_NONE)
			out[n++] = addrs[py];
	return n;
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
	/* A Python frame word of a known code object, or one the agent
	 * could not copy; any other word with bit 63 is garbage (below). */
	if ((addr & YM_PYFRAME) && (YM_PYFRAME_CODE(addr) < s->npy ||
				    YM_PYFRAME_CODE(addr) == YM_PYCODE_UNKNOWN))
		return python_frame(s, addr, out);
	uint32_t state = ret ? 2 : 1;
	uint64_t h = cache_hash(addr, state);
	struct cache_key key = { s, addr, state };
	uint32_t hit = hmap_find(&s->cache, h, cache_eq, &key);
	if (hit != HMAP_NONE) {
		*out = s->cent[hit].frames;
		return (int)s->cent[hit].n;
	}

	/* A return address points after the call: the call is at addr - 1
	 * (for a signal frame it would be addr itself; the agent's stacks
	 * hold return addresses). */
	uint64_t pc = ret && addr > 0 ? addr - 1 : addr;
	struct sym_frame tmp[SYM_MAX_CHAIN];
	memset(tmp, 0, sizeof tmp);
	int n = 0;
	const struct sym_mod *m = sym_mods_find(s->mods, s->nmods, pc);
	if (m && m->file) {
		/* The file's chain, shared with every process mapping it,
		 * at the file's vaddr. */
		const struct sym_frame *chain;
		n = sym_file_resolve(m->file, pc - m->base, &chain);
		if (n > SYM_MAX_CHAIN)
			n = SYM_MAX_CHAIN;
		memcpy(tmp, chain, (size_t)(n > 0 ? n : 0) * sizeof *tmp);
	}
	if (n <= 0)
		n = 1;
	for (int i = 0; i < n; i++) {
		tmp[i].addr = addr;
		tmp[i].module = m ? m->path : NULL;
		tmp[i].offset = m ? addr - m->base : 0;
		/* The agent lists the executable first (dl_iterate_phdr's
		 * order, its path from /proc/self/exe). */
		tmp[i].exe = m && m->seg_index == 0;
	}

	struct sym_frame *frames = sym_store_alloc(&s->store, (size_t)n * sizeof *frames);
	if (!frames) {
		s->scratch = tmp[0];
		new_epoch(s);
		*out = &s->scratch;
		return 1;
	}
	memcpy(frames, tmp, (size_t)n * sizeof *frames);
	*out = frames;

	/* Out of memory or at the map's bound: uncached, still correct. */
	if (s->ncent == s->capcent) {
		uint32_t cap = s->capcent ? s->capcent * 2 : 4096;
		struct sym_cent *c = cap <= HMAP_MAX_ENTRIES ?
			realloc(s->cent, (size_t)cap * sizeof *c) : NULL;
		if (!c)
			return n;
		s->cent = c;
		s->capcent = cap;
	}
	if (hmap_add(&s->cache, h, s->ncent) != 0)
		return n;
	s->cent[s->ncent++] = (struct sym_cent){
		.addr = addr, .state = state, .n = (uint32_t)n, .frames = frames,
	};
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
