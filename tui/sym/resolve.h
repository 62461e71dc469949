/*
 * resolve: the frames of one address inside a module that has symbols.
 *
 * DWARF first: the CU (libdw's .debug_aranges lookup when its unit holds
 * the address, else our CU index),
 * the innermost line (only for an address inside the CU's ranges: libdw's
 * lookups answer past a line sequence's end), then the scopes containing the address, innermost
 * first, each inlined_subroutine a frame whose line is the call site
 * written in the next inner one, ending with the out-of-line function.
 * The ELF symbol table names the function when DWARF has none (assembly,
 * no debug information) and qualifies it when DWARF gives only a plain
 * DW_AT_name (GCC omits the linkage name for internal linkage).
 *
 * Names are demangled and interned in st; garbage DWARF is bounded (DIE
 * budgets, nesting limits), never trusted to terminate.
 */
#ifndef YMTOP_SYM_RESOLVE_H
#define YMTOP_SYM_RESOLVE_H

#include <stdint.h>

#include <elfutils/libdwfl.h>

#include "store.h"
#include "sym.h"
#include "tables.h"

/* Longest inline chain kept for one address (innermost first); deeper
 * chains (only garbage DWARF makes them) lose their outer frames. */
#define SYM_MAX_CHAIN 64

/* The chain for the absolute pc in dm into f (SYM_MAX_CHAIN entries),
 * innermost first; returns the count (>= 1).  Fills function, file, line
 * and inlined; the caller sets addr, module and offset. */
int sym_resolve_module(struct sym_store *st, struct sym_tables *t,
		       Dwfl_Module *dm, uint64_t pc, struct sym_frame *f);

#endif
