/*
 * dynamic: reading an object's .dynamic (header only).
 */
#ifndef YMTOP_AGENT_DYNAMIC_H
#define YMTOP_AGENT_DYNAMIC_H

#include <stdint.h>

/* A pointer read from an object's .dynamic (DT_SYMTAB, DT_JMPREL...):
 * glibc relocates them in place on x86-64; an object it did not (or a
 * non-PIE executable) keeps them as offsets from its load base. */
static inline uintptr_t got_dyn_ptr(uintptr_t base, uintptr_t p)
{
	return p < base ? base + p : p;
}

#endif
