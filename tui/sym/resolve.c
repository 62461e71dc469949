/*
 * resolve: one address of a module with symbols -> its chain of frames,
 * innermost inlined function first, from DWARF (scopes, lines, call sites)
 * and the ELF symbol table (see resolve.h).
 */
#include <stdlib.h>
#include <string.h>

#include <dwarf.h>

#include "demangle.h"
#include "resolve.h"

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
static const char *die_function(struct sym_store *st, Dwarf_Die *die,
				int *qualified)
{
	const char *link = attr_string(die, DW_AT_linkage_name);
	if (!link)
		link = attr_string(die, DW_AT_MIPS_linkage_name);
	*qualified = 0;
	if (link) {
		char *d = sym_demangle(link);
		if (d) {
			const char *r = sym_store_intern(st, d);
			free(d);
			*qualified = r != NULL;
			return r;
		}
	}
	const char *name = attr_string(die, DW_AT_name);
	if (name && *name)
		return sym_store_intern(st, name);
	return link ? sym_store_intern(st, link) : NULL;
}

/* Source file of the call site of an inlined_subroutine DIE. */
static const char *call_file(struct sym_store *st, Dwarf_Die *die)
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
	return sym_store_intern(st, f);
}

static int call_line(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	Dwarf_Word v;
	if (!dwarf_attr(die, DW_AT_call_line, &a) || dwarf_formudata(&a, &v))
		return 0;
	return v > (Dwarf_Word)0x7fffffff ? 0 : (int)v;
}

/* The ELF symbol's name, interned and demangled, or NULL. */
static const char *elf_function(struct sym_store *st, struct sym_tables *t,
				Dwfl_Module *dm, uint64_t pc)
{
	return sym_display_name(st, sym_tables_elf_symbol(t, dm, pc));
}

/* Does the CU's code hold the module-relative a?  A line table answers
 * for any address past its last row: libdw returns the row before a that
 * is not an end of sequence, and GCC ends a function with a call that
 * never returns by a row at the sequence's end (std::thread's destructor
 * calling std::terminate at the end of main), which sorts after the end
 * and so lends main's last line to crt1's _start, linked right behind
 * main and without line information.  A CU without address ranges is
 * believed. */
static int cu_covers(Dwarf_Die *cu, Dwarf_Addr a)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t it = 0;
	int any = 0;
	while ((it = dwarf_ranges(cu, it, &base, &lo, &hi)) > 0) {
		if (a >= lo && a < hi)
			return 1;
		any = 1;
	}
	return !any;
}

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
		default: {
			Dwarf_Die inner;
			if (sym_die_container(&child, &inner)) {
				int d = scope_walk(&inner, pc, path, depth,
						   level + 1, budget);
				if (d > depth)
					return d;
			}
			break;
		}
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return depth;
}


int sym_resolve_module(struct sym_store *st, struct sym_tables *t,
		       Dwfl_Module *dm, uint64_t pc, struct sym_frame *f)
{
	int n = 0;
	const char *file = NULL;
	int line = 0;

	/* The CU: libdw's lookup (.debug_aranges), else our CU index.
	 * libdwfl's lookup takes the nearest arange below pc, whatever its
	 * end: its CU must hold pc (cu_covers). */
	Dwarf_Addr bias = 0;
	Dwarf_Die cu;
	int have_cu = 0, from_dwfl = 0;
	Dwarf_Die *cup = dwfl_module_addrdie(dm, pc, &bias);
	if (cup && cu_covers(cup, pc - bias)) {
		cu = *cup;
		have_cu = from_dwfl = 1;
	} else {
		Dwarf *dw = dwfl_module_getdwarf(dm, &bias);
		if (dw && pc >= bias &&
		    sym_tables_cu(t, dm, dw, pc - bias, &cu) == 0)
			have_cu = 1;
	}

	/* The innermost line, from that CU only, and only inside its code
	 * (cu_covers). */
	int covered = have_cu && cu_covers(&cu, pc - bias);
	Dwfl_Line *l = from_dwfl ? dwfl_module_getsrc(dm, pc) : NULL;
	if (l) {
		int ln = 0;
		const char *src = dwfl_lineinfo(l, NULL, &ln, NULL, NULL, NULL);
		if (src && *src) {
			file = sym_store_intern(st, src);
			line = ln > 0 ? ln : 0;
		}
	} else if (covered) {
		Dwarf_Line *dl = dwarf_getsrc_die(&cu, pc - bias);
		int ln = 0;
		const char *src = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
		if (src && *src && dwarf_lineno(dl, &ln) == 0) {
			file = sym_store_intern(st, src);
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
		if (sym_tables_func(t, dm, &cu, pc - bias, &path[0]) == 0)
			d = scope_walk(&path[0], pc - bias, path, 1, 0,
				       &budget);
		if (d == 0)
			d = scope_walk(&cu, pc - bias, path, 0, 0, &budget);
		for (int i = 0; i < d / 2; i++) {
			Dwarf_Die tmp = path[i];
			path[i] = path[d - 1 - i];
			path[d - 1 - i] = tmp;
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
		f[n].function = die_function(st, &scopes[i], &qualified);
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
		file = call_file(st, &scopes[i]);
		line = call_line(&scopes[i]);
	}
	free(owned);

	if (n > 0 && real) {
		/* The real function without a linkage name in DWARF (GCC
		 * omits it for internal linkage, e.g. C++ anonymous
		 * namespaces): a mangled ELF symbol reads better, qualified
		 * and with parameters.  A plain C symbol adds nothing. */
		if (!qualified) {
			const char *raw = sym_tables_elf_symbol(t, dm, pc);
			char *d = sym_demangle(raw);
			if (d) {
				const char *q = sym_store_intern(st, d);
				if (q)
					f[n - 1].function = q;
			} else if (!f[n - 1].function && raw) {
				f[n - 1].function = sym_store_intern(st, raw);
			}
			free(d);
		}
		return n;
	}
	/* No enclosing subprogram (no DWARF, assembly, truncated chain):
	 * the symbol table names the real function. */
	if (n == SYM_MAX_CHAIN)
		n--;
	f[n].function = elf_function(st, t, dm, pc);
	f[n].file = file;
	f[n].line = f[n].file ? line : 0;
	f[n].inlined = 0;
	return n + 1;
}

