/*
 * modules: the segment's module list as the symbolizer trusts it (see
 * modules.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "modules.h"
#include "util/search.h"

static uint64_t module_key(const struct ym_module *m, const char *path,
			   uint32_t idlen)
{
	uint64_t h = ym_fnv1a_str(YM_FNV1A_INIT, path);
	h = ym_fnv1a(h, &m->base, sizeof m->base);
	h = ym_fnv1a(h, &m->lo, sizeof m->lo);
	h = ym_fnv1a(h, &m->hi, sizeof m->hi);
	h = ym_fnv1a(h, &idlen, sizeof idlen);
	h = ym_fnv1a(h, m->build_id, idlen <= sizeof m->build_id ? idlen : 0);
	return h;
}

int sym_mod_same(const struct sym_mod *a, const struct sym_mod *b)
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

uint32_t sym_mods_accept(struct sym_store *st, const struct ym_module *mods,
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
			o->path = sym_store_intern(st, path);
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

void sym_mods_sort(struct sym_mod *v, uint32_t n)
{
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_mod);
}

const struct sym_mod *sym_mods_find(const struct sym_mod *v, uint32_t n,
				    uint64_t pc)
{
	/* Sorted and disjoint: only the last module starting at or before
	 * pc can contain it. */
	size_t i = SEARCH_UPPER(v, n, struct sym_mod, lo, pc);
	return i > 0 && pc < v[i - 1].hi ? &v[i - 1] : NULL;
}
