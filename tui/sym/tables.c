/*
 * tables: per-module lookup tables libdwfl lacks (see tables.h).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h>
#include <gelf.h>

#include "tables.h"
#include "util/hashmap.h"
#include "util/search.h"

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

/* The function table of one CU, sorted by lo. */
struct cu_funcs {
	struct fn_range *r;
	size_t n;
};

struct mod_data {
	struct mod_data *next;
	int cu_built, syms_built;
	struct cu_range *cu;
	size_t ncu;
	struct elf_sym *syms;
	size_t nsyms;
	struct cu_funcs *cf;       /* function tables, in order of building */
	uint32_t ncf, capcf;
	struct hmap cf_index;      /* hmap_u64(CU DIE offset) -> index in cf */
};

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

static struct mod_data *mod_data_get(struct sym_tables *t, Dwfl_Module *dm)
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
	x->next = t->head;
	t->head = x;
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

int sym_tables_cu(struct sym_tables *t, Dwfl_Module *dm, Dwarf *dw,
		  Dwarf_Addr a, Dwarf_Die *out)
{
	struct mod_data *x = mod_data_get(t, dm);
	if (!x)
		return -1;
	if (!x->cu_built)
		build_cu_index(x, dw);
	size_t lo = SEARCH_UPPER(x->cu, x->ncu, struct cu_range, lo, a);
	/* Ranges of different CUs should not nest; look back a little in
	 * case they do. */
	for (size_t k = 0; k < 16 && lo > 0; k++, lo--) {
		const struct cu_range *r = &x->cu[lo - 1];
		if (a >= r->lo && a < r->hi)
			return dwarf_offdie(dw, r->die, out) ? 0 : -1;
	}
	return -1;
}

/* Alias preference (lower is better), see sym_tables_elf_symbol. */
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

const char *sym_tables_elf_symbol(struct sym_tables *t, Dwfl_Module *dm,
				  uint64_t pc)
{
	struct mod_data *x = mod_data_get(t, dm);
	if (!x)
		return NULL;
	if (!x->syms_built)
		build_syms(x, dm);
	size_t lo = SEARCH_UPPER(x->syms, x->nsyms, struct elf_sym, addr, pc);
	uint64_t next = lo < x->nsyms ? x->syms[lo].addr : UINT64_MAX;
	/* Walk back over a few distinct addresses: a big sized symbol may
	 * enclose smaller ones (rare, but then the small ones do not cover
	 * pc and the big one does). */
	for (int groups = 0; groups < 8 && lo > 0; groups++) {
		size_t i = SEARCH_RUN_START(x->syms, lo, struct elf_sym, addr);
		uint64_t at = x->syms[i].addr;
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
static int cmp_fn(const void *a, const void *b)
{
	const struct fn_range *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int sym_die_container(Dwarf_Die *die, Dwarf_Die *out)
{
	switch (dwarf_tag(die)) {
	case DW_TAG_namespace:
	case DW_TAG_module:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
	case DW_TAG_interface_type:
		*out = *die;
		return 1;
	case DW_TAG_imported_unit: {
		Dwarf_Attribute a;
		return dwarf_attr(die, DW_AT_import, &a) &&
		       dwarf_formref_die(&a, out);
	}
	default:
		return 0;
	}
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
		default: {
			Dwarf_Die inner;
			if (sym_die_container(&child, &inner))
				collect_funcs(&inner, v, level + 1);
			break;
		}
		}
	} while (dwarf_siblingof(&child, &child) == 0);
}

/* The function table of cu (built on first use), or NULL. */
static const struct cu_funcs *cu_funcs_get(struct sym_tables *t,
					   Dwfl_Module *dm, Dwarf_Die *cu)
{
	struct mod_data *x = mod_data_get(t, dm);
	if (!x)
		return NULL;
	uint64_t h = hmap_u64(dwarf_dieoffset(cu));
	uint32_t i = hmap_find(&x->cf_index, h, NULL, NULL);
	if (i != HMAP_NONE)
		return &x->cf[i];
	if (x->ncf == x->capcf) {
		uint32_t cap = x->capcf ? x->capcf * 2 : 64;
		if (cap > HMAP_MAX_ENTRIES)
			return NULL;
		struct cu_funcs *c = realloc(x->cf, (size_t)cap * sizeof *c);
		if (!c)
			return NULL;
		x->cf = c;
		x->capcf = cap;
	}
	if (hmap_add(&x->cf_index, h, x->ncf) != 0)
		return NULL;
	struct fn_vec v = { .budget = 10000000 };
	collect_funcs(cu, &v, 0);
	if (v.n > 1)
		qsort(v.r, v.n, sizeof *v.r, cmp_fn);
	struct cu_funcs *f = &x->cf[x->ncf++];
	f->r = v.r;
	f->n = v.n;
	return f;
}

int sym_tables_func(struct sym_tables *t, Dwfl_Module *dm, Dwarf_Die *cu,
		    Dwarf_Addr a, Dwarf_Die *out)
{
	const struct cu_funcs *f = cu_funcs_get(t, dm, cu);
	if (!f || !f->n)
		return -1;
	size_t lo = SEARCH_UPPER(f->r, f->n, struct fn_range, lo, a);
	/* Walk back over a few start addresses; among DIEs starting at the
	 * same address (assembler aliases), the first in DIE order. */
	for (int groups = 0; groups < 16 && lo > 0; groups++) {
		size_t i = SEARCH_RUN_START(f->r, lo, struct fn_range, lo);
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

void sym_tables_free(struct sym_tables *t)
{
	while (t->head) {
		struct mod_data *next = t->head->next;
		free(t->head->cu);
		free(t->head->syms);
		for (uint32_t i = 0; i < t->head->ncf; i++)
			free(t->head->cf[i].r);
		free(t->head->cf);
		hmap_free(&t->head->cf_index);
		free(t->head);
		t->head = next;
	}
}
