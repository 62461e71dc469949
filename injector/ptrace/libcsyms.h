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

#define INJECT_LOCK_TEXT 5

/* Addresses in the target (the library's base added); 0: not exported. */
struct libc_syms {
	uintptr_t dlopen, dlerror, dlsym, entry;
	uintptr_t memfd_create, open, close;   /* to bring the agent in */
	uintptr_t dlclose;                     /* to unload it (detach.h) */
	struct range malloc_text;   /* libc's allocator, conservatively */
	/* musl only (its libc is its loader, and Debian's has no CFI to
	 * unwind it with): the code that holds a lock dlopen or the agent's
	 * constructor takes, conservatively.  The first nlock_any ranges may
	 * not be anywhere in the call chain: the dynamic linker (its rwlock;
	 * it runs constructors) and the file of pthread_atfork (fork runs the
	 * handlers under its lock, which the agent's pthread_atfork takes).
	 * The others may not be where the thread stopped, but call the
	 * program without their locks: the file of pthread_create and
	 * pthread_exit (the thread list and pthread_create locks, which
	 * dlopen takes to give every thread the agent's TLS; every thread's
	 * outermost frame is there), fork and _Fork. */
	struct range lock_text[INJECT_LOCK_TEXT];
	int          nlock, nlock_any;
	int          own_loader;   /* musl: libc is the dynamic linker */
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
