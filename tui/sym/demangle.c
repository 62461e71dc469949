/*
 * demangle: names as people read them, through libiberty's demangler
 * (see demangle.h).
 */
#include <stdlib.h>

#include <libiberty/demangle.h>

#include "demangle.h"

char *sym_demangle(const char *name)
{
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* DMGL_AUTO: GNU v3 for _Z, which recognises legacy Rust and strips
	 * its "::h<16 hex>" unless DMGL_VERBOSE; the Rust demangler for _R
	 * (v0, libiberty >= 2020, Debian 12 has it). */
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}

const char *sym_display_name(struct sym_store *st, const char *raw)
{
	if (!raw || !*raw)
		return NULL;
	char *d = sym_demangle(raw);
	const char *r = sym_store_intern(st, d ? d : raw);
	free(d);
	return r;
}
