/*
 * compat: the agent loads into any glibc from 2.17 on (manylinux2014's
 * baseline), whichever glibc it was built on.
 *
 * Included first in every file of the agent (the Makefile passes
 * -include injector/agent/compat.h), so that no call escapes it:
 *
 * - Versioned references are pinned to the oldest version that has each
 *   symbol.  glibc 2.34 moved libdl's and libpthread's functions into
 *   libc.so.6 under new default versions (dlsym@@GLIBC_2.34) and kept
 *   the old ones (dlsym@GLIBC_2.2.5).  The agent is linked against
 *   stand-ins for libdl.so.2 and libpthread.so.0 as they were
 *   (glibc-stubs/), so that its version needs name the files that
 *   define those functions before 2.34, where glibc before 2.30 looks
 *   for them; from 2.30 on glibc searches on, and binds them to
 *   libc.so.6 on 2.34 and later.
 * - Functions that have no version old enough are not called by name:
 *   stat, fstat and fstatat (2.33: before, inline wrappers of __xstat),
 *   getdents64 (2.30) and memfd_create (2.27) are their system calls;
 *   shm_open and shm_unlink (librt.so.1 before 2.34) are open and unlink
 *   under /dev/shm, as glibc's own are; _dl_find_object (2.35) and
 *   strerrordesc_np (2.32) are looked up at run time, with a fallback
 *   (loader.h's agent_find_object, agent_errno_text in base.h).
 *
 * The build checks the result: tests/check_glibc_versions.sh fails the
 * build of libymagent.so when it asks for a GLIBC_ version above 2.17,
 * asks libc.so.6 for what libdl.so.2 or libpthread.so.0 defined before
 * 2.34, or needs any object but those three.
 */
#ifndef YMTOP_AGENT_COMPAT_H
#define YMTOP_AGENT_COMPAT_H

#include <dirent.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base.h"

#if defined(__GLIBC__) && defined(__x86_64__)
/* The oldest version of each function the agent calls that glibc 2.34
 * gave a new default version (x86_64: everything older than 2.17 is
 * GLIBC_2.2.5 there but dladdr1 and dlinfo, 2.3.3).  An unused pin emits
 * nothing; a pin would rename a definition, so none names a function the
 * agent defines (dlclose, dlopen: hooks) or one libc.so.6 does not export
 * (pthread_atfork lives in libc_nonshared.a). */
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dladdr1,dladdr1@GLIBC_2.3.3");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dlinfo,dlinfo@GLIBC_2.3.3");
__asm__(".symver dlvsym,dlvsym@GLIBC_2.2.5");
__asm__(".symver pthread_key_create,pthread_key_create@GLIBC_2.2.5");
__asm__(".symver pthread_key_delete,pthread_key_delete@GLIBC_2.2.5");
__asm__(".symver pthread_getspecific,pthread_getspecific@GLIBC_2.2.5");
__asm__(".symver pthread_setspecific,pthread_setspecific@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_sigmask,pthread_sigmask@GLIBC_2.2.5");
#endif

#if !defined(__GLIBC__)
/* musl (build/libymagent-musl.so): what the agent's files name of
 * glibc's, declared so that they build; looked up at run time, musl has
 * none of them (dlmopen, mallinfo2: no such namespaces, no such
 * statistics).  musl's <sys/mman.h> makes mmap64 a macro for mmap: the
 * agent defines both names. */
#include <limits.h>
typedef long Lmid_t;
/* No on_exit: exit()'s status stays unknown, as when it fails. */
#define on_exit(fn, arg) ((void)(fn), (void)(arg), -1)
#undef getdents64
struct mallinfo2 {
	size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks,
	       uordblks, fordblks, keepcost;
};
#undef mmap64
#endif

/* ---- System calls in place of functions newer than the baseline ---- */

int agent_stat(const char *path, struct stat *st) AGENT_HIDDEN;
int agent_fstat(int fd, struct stat *st) AGENT_HIDDEN;
int agent_fstatat(int dirfd, const char *path, struct stat *st,
		  int flags) AGENT_HIDDEN;
ssize_t agent_getdents64(int fd, void *buf, size_t len) AGENT_HIDDEN;
int agent_memfd_create(const char *name, unsigned flags) AGENT_HIDDEN;
/* glibc's shm_open and shm_unlink: name with one leading '/' and no
 * other, under /dev/shm; open adds O_NOFOLLOW and O_CLOEXEC. */
int agent_shm_open(const char *name, int oflag, mode_t mode) AGENT_HIDDEN;
int agent_shm_unlink(const char *name) AGENT_HIDDEN;

#ifndef YM_COMPAT_NO_RENAME
#define stat(p, st)                agent_stat(p, st)
#define fstat(fd, st)              agent_fstat(fd, st)
#define fstatat(d, p, st, f)       agent_fstatat(d, p, st, f)
#define getdents64(fd, b, n)       agent_getdents64(fd, b, n)
#define memfd_create(n, f)         agent_memfd_create(n, f)
#define shm_open(n, o, m)          agent_shm_open(n, o, m)
#define shm_unlink(n)              agent_shm_unlink(n)
#endif

/* ---- The object holding an address ---- */

/* What the agent uses of glibc's struct dl_find_object. */
struct agent_object {
	void *map_start;               /* its first mapping's page */
	void *map_end;                 /* the end of its last PT_LOAD */
	struct link_map *link_map;     /* NULL: outside the base namespace
					* (the fallback only) */
	const void *eh_frame;          /* PT_GNU_EH_FRAME, or NULL */
};

/* Whether _dl_find_object is used (1) or the fallback (0). */
int agent_have_dl_find_object(void) AGENT_HIDDEN;

/* _dl_find_object(pc) into o (agent_have_dl_find_object() only): 0 when
 * found, -1 not.  loader.h's agent_find_object chooses. */
int agent_dlfo(const void *pc, struct agent_object *o) AGENT_HIDDEN;

/* Look up what may be missing (_dl_find_object, strerrordesc_np) with
 * lookup (sym_global, symbols.h: no lock of the loader's but
 * dl_iterate_phdr's, no allocation), once a process: from the agent's
 * constructor.  Until then the fallbacks serve (the agent's hooks may
 * run before its constructor).  -DYM_TEST_OLD_GLIBC: finds neither. */
typedef void *(*agent_lookup_fn)(const char *name);
void agent_compat_init(agent_lookup_fn lookup) AGENT_HIDDEN;

/* strerrordesc_np's text where glibc has it (2.32 on); otherwise, and
 * for the tests, agent_errno_table's. */
const char *agent_errno_table(int e) AGENT_HIDDEN;

#endif
