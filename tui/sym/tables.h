/*
 * tables: lookup tables libdwfl lacks, per reported Dwfl_Module, built on
 * first need:
 *  - CU address ranges: elfutils 0.188 finds the CU of an address through
 *    .debug_aranges only, which clang does not emit by default;
 *  - function symbols sorted by address: dwfl_module_addrinfo scans the
 *    whole symbol table on every call (~100 us for libc's);
 *  - the out-of-line functions of each CU: without them every lookup would
 *    walk the CU's DIE tree from the top, through namespace std and its
 *    classes (about 0.5 ms per address in a C++ CU).
 *
 * Ownership: the tables of a libdwfl session hang off the modules'
 * userdata and point into libdwfl's ELF and DWARF data; struct sym_tables
 * lists them so that sym_tables_free, called just before dwfl_end, frees
 * them all.  Not thread-safe.
 */
#ifndef YMTOP_SYM_TABLES_H
#define YMTOP_SYM_TABLES_H

#include <stdint.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

struct mod_data;

struct sym_tables {
	struct mod_data *head;     /* every module's tables, this session */
};

/* Free every module's tables (before dwfl_end of their session). */
void sym_tables_free(struct sym_tables *t);

/* CU DIE containing the module-relative address a, through the CU index
 * of dm (whose DWARF is dw): 0, or -1. */
int sym_tables_cu(struct sym_tables *t, Dwfl_Module *dm, Dwarf *dw,
		  Dwarf_Addr a, Dwarf_Die *out);

/* The out-of-line function (DW_TAG_subprogram) of cu containing the
 * module-relative a; among DIEs starting at one address, the first in DIE
 * order: 0, or -1. */
int sym_tables_func(struct sym_tables *t, Dwfl_Module *dm, Dwarf_Die *cu,
		    Dwarf_Addr a, Dwarf_Die *out);

/* ELF symbol table name for the absolute pc (works without DWARF:
 * .symtab, .dynsym or MiniDebugInfo), raw (maybe mangled, owned by
 * libdwfl), or NULL.  A sized symbol covers [addr, addr + size); an
 * unsized one (assembly) reaches the next symbol.  Among aliases the best
 * ranked wins: global over weak over local, then the fewest leading
 * underscores ("malloc" over "__libc_malloc"). */
const char *sym_tables_elf_symbol(struct sym_tables *t, Dwfl_Module *dm,
				  uint64_t pc);

/* Does die hold definitions a walk for functions must look into, and
 * where: namespaces, modules, classes, structures, unions and interfaces
 * themselves, an imported unit's target unit.  1 with *out set, else 0.
 * (clang and rustc put function definitions there; libdw 0.188's
 * dwarf_getscopes does not look.) */
int sym_die_container(Dwarf_Die *die, Dwarf_Die *out);

/* Depth of the DIE path kept by resolve.c's scope walk (lexical blocks
 * count too); the DIE nesting followed through namespaces, classes and
 * imported units, here and there, is twice this. */
#define SYM_MAX_SCOPES 128

#endif
