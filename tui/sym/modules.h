/*
 * modules: the segment's module list turned into the table of *accepted*
 * modules the symbolizer maps addresses through: non-overlapping [lo, hi)
 * ranges, sorted by lo, each with the path as the segment gave it and,
 * when its file could be opened, is an ELF file and matches the recorded
 * build-id, the shared state of that file (files.h).  Addresses are
 * mapped to modules through this table (never through dwfl_addrmodule),
 * so a module we refused (missing file, vDSO, changed file) still names
 * the frame ("[libfoo.so+0x1234]") and never lends its symbols to anyone.
 *
 * A hostile list is bounded by the caller (sym.c: SYM_MAX_MODULES), as
 * acceptance is quadratic in the modules kept.
 */
#ifndef YMTOP_SYM_MODULES_H
#define YMTOP_SYM_MODULES_H

#include <stdint.h>

#include "files.h"
#include "store.h"
#include "ymtop/segment.h"

/* One accepted module. */
struct sym_mod {
	uint64_t lo, hi, base;
	const char *path;          /* interned, as in the segment */
	uint64_t key;              /* hash of path, base, lo, hi, build-id */
	uint32_t build_id_len;
	uint8_t build_id[32];
	uint32_t seg_index;        /* index in the last list given */
	struct sym_file *file;     /* a reference; NULL: no usable symbols */
	const char *warning;       /* interned, or NULL */
	int kept;                  /* carried over from the previous list */
};

/* The accepted modules of mods[0..n) into out (room for n), in list
 * order, not yet sorted: valid extent, LOADED ones first in list order,
 * then UNLOADED ones newest first, each kept only if it overlaps nothing
 * kept before it.  Returns how many.  file and warning are not set. */
uint32_t sym_mods_accept(struct sym_store *st, const struct ym_module *mods,
			 uint32_t n, struct sym_mod *out);

/* Same module in both lists (then its file can be kept)? */
int sym_mod_same(const struct sym_mod *a, const struct sym_mod *b);

/* Sort by lo, then find the module containing pc (NULL: none). */
void sym_mods_sort(struct sym_mod *v, uint32_t n);
const struct sym_mod *sym_mods_find(const struct sym_mod *v, uint32_t n,
				    uint64_t pc);

#endif
