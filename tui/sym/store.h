/*
 * store: the memory of a struct sym that outlives everything else in it:
 * an arena for the frames sym_resolve hands out, and the set of interned
 * strings (module paths, function and file names, warnings).
 *
 * Ownership: everything allocated here lives until sym_store_free, which
 * is what lets sym_resolve promise "valid until sym_free" across
 * sym_set_modules (which may drop the libdwfl session and the cache).
 * Memory grows with distinct strings and distinct addresses, not with
 * lookups.  Not thread-safe.
 */
#ifndef YMTOP_SYM_STORE_H
#define YMTOP_SYM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "util/hashmap.h"

struct arena_chunk;

struct sym_store {
	struct arena_chunk *arena;  /* chunk being filled first */
	const char **strs;          /* interned strings, by value in index */
	uint32_t nstrs, capstrs;
	struct hmap index;          /* FNV-1a of the text -> index in strs */
};

/* size bytes aligned for any type, or NULL (out of memory, or size 0). */
void *sym_store_alloc(struct sym_store *st, size_t size);

/* The interned copy of str (equal strings, one pointer), or NULL when str
 * is NULL or memory runs out. */
const char *sym_store_intern(struct sym_store *st, const char *str);

/* Free everything; st is then empty and usable again. */
void sym_store_free(struct sym_store *st);

#endif
