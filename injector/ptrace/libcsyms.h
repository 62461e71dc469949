/*
 * libcsyms: the addresses in the target of the C library functions the
 * injector calls there, and the bounds of its allocator, read from the
 * library's file (its dynamic symbols) before any thread is stopped.
 * Runs in ymtop, often as root: the file is the target's, so hostile;
 * every bound comes from libelf.
 */
#ifndef YMTOP_INJECT_LIBCSYMS_H
#define YMTOP_INJECT_LIBCSYMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/procfs.h"

/* Addresses in the target (the library's base added); 0: not exported. */
struct libc_syms {
	uintptr_t dlopen, dlerror, dlsym, entry;
	uintptr_t memfd_create, open, close;   /* to bring the agent in */
	struct range malloc_text;   /* libc's allocator, conservatively */
};

/* Fill *s from the C library m names (mapped at m->libc_base in pid),
 * opened with inject_open_mapped.  dlopen (the default version, else the
 * compat one, else __libc_dlopen_mode), the ELF entry point and the
 * allocator are required.  0, or -1 with one line in err: the file does
 * not open, is no 64-bit x86-64 ELF file libelf can read (truncated,
 * say), has no dynamic symbols, or lacks what is required. */
int inject_libc_symbols(pid_t pid, const struct tmaps *m, struct libc_syms *s,
			char *err, size_t len);

#endif
