/*
 * sym: symbolization with libdwfl (elfutils) and libiberty's demangler.
 *
 * The files of sym/, by concern:
 *   sym.c       this: the public API, the libdwfl session, the cache of
 *               resolved addresses;
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
 * Memory.  Every string and frame array handed out lives in the store
 * owned by struct sym and is freed only by sym_free: that is what lets
 * sym_resolve promise "valid until sym_free" even across sym_set_modules,
 * which may throw away the whole libdwfl session and the cache index (the
 * frames stay in the store).  Strings are interned, so the memory grows
 * with distinct addresses and distinct names, not with lookups.
 *
 * Not thread-safe: one struct sym per thread (libdwfl is not either).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "fetch.h"
#include "modules.h"
#include "resolve.h"
#include "store.h"
#include "sym.h"
#include "tables.h"
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
	char *debuginfo_path;      /* for the callbacks; NULL: libdwfl default */
	Dwfl_Callbacks cb;         /* libdwfl keeps a pointer to it */
	Dwfl *dwfl;
	struct sym_tables tables;  /* belong to the current session */

	struct sym_mod *mods;      /* accepted, sorted by lo */
	uint32_t nmods;
	const char **warn;         /* by segment index */
	uint32_t nwarn;

	struct sym_cent *cent;     /* the cache, in order of resolution */
	uint32_t ncent, capcent;
	struct hmap cache;         /* cache_hash -> index in cent */

	struct sym_store store;
	struct sym_frame scratch;  /* last resort when memory runs out */
	unsigned fetched;          /* fetch_poll's count last taken in */
};

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

static void dwfl_stop(struct sym *s)
{
	if (s->dwfl)
		dwfl_end(s->dwfl);
	s->dwfl = NULL;
	sym_tables_free(&s->tables);
}

/* libdwfl's find_debuginfo: the standard local lookup (debuginfod is out
 * of our environment, see fetch.h), then a file a debuginfod lookup
 * brought, else that lookup is started and the module has no DWARF for
 * now (sym_poll reports the modules again when a file arrives).  A dwz
 * alternate file (debuglink_file an absolute path, no CRC) is not
 * fetched: its build-id is not the module's. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
			  const char *modname, GElf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base,
					      file_name, debuglink_file,
					      debuglink_crc, debuginfo_file_name);
	if (fd >= 0 || !fetch_enabled())
		return fd;
	if (debuglink_file && (debuglink_crc == 0 || strchr(debuglink_file, '/')))
		return -1;
	const unsigned char *bits = NULL;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &bits, &vaddr);
	const char *path = NULL;
	if (len <= 0 || !bits ||
	    fetch_want(bits, (uint32_t)len, modname, &path) != FETCH_FOUND ||
	    !path)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char *name = strdup(path);
	if (name) {
		free(*debuginfo_file_name);
		*debuginfo_file_name = name;
	}
	return fd;
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

/* Drop the cache index; with only_unknown, drop only the addresses that
 * mapped to no module (a new module may claim them).  The frames stay in
 * the store: pointers handed out remain valid. */
static void cache_drop(struct sym *s, int only_unknown)
{
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
	fetch_setup();
	s->cb.find_debuginfo = find_debuginfo;
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
	free(s->cent);
	hmap_free(&s->cache);
	sym_store_free(&s->store);
	free(s->debuginfo_path);
	free(s->root);
	free(s);
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

	/* Incremental when every module we have is still accepted unchanged
	 * (the usual case: the list only grew): keep their Dwfl_Modules and
	 * everything cached.  Otherwise start a new libdwfl session. */
	uint32_t kept = 0;
	for (uint32_t i = 0; i < k; i++) {
		for (uint32_t j = 0; j < s->nmods; j++) {
			if (sym_mod_same(&nm[i], &s->mods[j])) {
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
				sym_mod_report(s->dwfl, s->root, &s->store, &nm[i]);
		if (s->dwfl)
			dwfl_report_end(s->dwfl, NULL, NULL);
		cache_drop(s, incremental);
	}
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

/* A new libdwfl session with the same modules, each reported again (so
 * that libdwfl asks for their debug files again), and an empty cache. */
static void reload(struct sym *s)
{
	dwfl_stop(s);
	if (dwfl_start(s) != 0)
		s->dwfl = NULL;
	if (s->dwfl)
		dwfl_report_begin(s->dwfl);
	for (uint32_t i = 0; i < s->nmods; i++) {
		sym_mod_report(s->dwfl, s->root, &s->store, &s->mods[i]);
		s->mods[i].probed = 0;
		if (s->warn && s->mods[i].seg_index < s->nwarn)
			s->warn[s->mods[i].seg_index] = s->mods[i].warning;
	}
	if (s->dwfl)
		dwfl_report_end(s->dwfl, NULL, NULL);
	cache_drop(s, 0);
}

int sym_poll(struct sym *s)
{
	if (!s || !fetch_enabled())
		return 0;
	unsigned f = fetch_poll();
	if (f == s->fetched)
		return 0;
	s->fetched = f;
	reload(s);
	return 1;
}

void sym_prefetch(struct sym *s, uint64_t addr)
{
	if (!s || !fetch_enabled())
		return;
	struct sym_mod *m = (struct sym_mod *)sym_mods_find(s->mods, s->nmods,
							    addr ? addr - 1 : 0);
	if (!m || !m->dm || m->probed)
		return;
	m->probed = 1;
	Dwarf_Addr bias;
	dwfl_module_getdwarf(m->dm, &bias);   /* find_debuginfo starts it */
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
	if (m && m->dm)
		n = sym_resolve_module(&s->store, &s->tables, m->dm, pc, tmp);
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
