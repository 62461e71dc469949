/*
 * demangle: names as people read them, through libiberty's demangler.
 */
#ifndef YMTOP_SYM_DEMANGLE_H
#define YMTOP_SYM_DEMANGLE_H

#include "store.h"

/* Demangled C++ (Itanium), Rust legacy (hash suffix dropped) or Rust v0
 * name, malloc'ed (the caller frees it); NULL when name is not mangled or
 * does not demangle.  Only "_Z" and "_R" names are tried: libiberty's
 * auto mode would also "demangle" plain C names that look like GNAT or D
 * encodings. */
char *sym_demangle(const char *name);

/* Interned display name for a raw (maybe mangled) name: demangled when it
 * demangles, else as it is; NULL for NULL or "". */
const char *sym_display_name(struct sym_store *st, const char *raw);

#endif
