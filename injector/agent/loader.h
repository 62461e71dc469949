/*
 * loader: the loader's list of objects, walked so that no fork child
 * waits for ever; the object that holds an address; _r_debug.
 *
 * glibc holds a lock of the loader's (dl_load_write_lock) while
 * dl_iterate_phdr runs its callback and while dlopen or dlclose change
 * the list.  A fork child inherits it as it was, and glibc does not reset
 * it in the child (2.36, Debian 12): a child forked while another thread
 * was inside dl_iterate_phdr -- the agent's own module scan, or any
 * caller of the host's -- waits for ever at its first call.  Every walk
 * of the agent goes through loader_iterate instead:
 *
 * - in a process that is not such a child: dl_iterate_phdr;
 * - in a child whose copy of that lock is held (held for good: its
 *   holder does not exist there), the base namespace's link maps are
 *   walked without it, each object's program headers read from its
 *   mapped ELF header.  The list cannot change in such a child (adding or
 *   removing an object takes the lock: the host would wait for ever
 *   first), so the walk is exact.
 *
 * The lock is found once a process, at the agent's first call
 * (loader_probe, from seg_prepare): the one mutex-shaped word triple in ld.so's writable
 * data that reads as locked by this thread while inside dl_iterate_phdr
 * and as free outside it.  Not at fork: the probe waits for the lock,
 * and a thread inside a walk's callback may be waiting for something the
 * forking thread holds.  Where it was not found (a parent that never
 * called the malloc family, another C library, another layout), a child walks as
 * if the lock were held, and loader_blind says so: objects it loads are
 * then missing from its module list.
 */
#ifndef YMTOP_AGENT_LOADER_H
#define YMTOP_AGENT_LOADER_H

#include <link.h>

#include "base.h"
#include "compat.h"

typedef int (*loader_cb)(struct dl_phdr_info *info, size_t size, void *arg);

/* dl_iterate_phdr(cb, arg), or the walk of a child that must not take
 * the loader's lock.  Same contract: cb's non-zero return stops the walk
 * and is returned.  Never allocates. */
int loader_iterate(loader_cb cb, void *arg) AGENT_HIDDEN;

/* The loader's counts of objects ever added (v[0]) and removed (v[1]):
 * one of them moves whenever an object is loaded or unloaded (0 and 0
 * from a loader without them; constant in a frozen child). */
void loader_counters(unsigned long long v[2]) AGENT_HIDDEN;

/* Find the lock, once a process (a child keeps its parent's answer), at
 * the agent's first call. */
void loader_probe(void) AGENT_HIDDEN;
/* In the child: whether it may take the lock from now on. */
void loader_fork_child(void) AGENT_HIDDEN;

/* 1 in a child that walks without the lock because the lock could not be
 * found: objects it loads itself are not seen. */
int loader_blind(void) AGENT_HIDDEN;

/* l's program headers as a walk without the lock finds them where the C
 * library has no _dl_find_object (glibc before 2.35, musl); public for
 * the tests.  The main program's at AT_PHDR, any other
 * object's from its ELF header at l_addr (the first PT_LOAD of a shared
 * object maps offset 0 at address 0), checked readable before it is read
 * (process_vm_readv); either must name l_ld as PT_DYNAMIC.  0: skip l. */
int loader_phdrs_nodlfo(const struct link_map *l, const ElfW(Phdr) **ph,
			size_t *n) AGENT_HIDDEN;

/* _dl_find_object(pc) where glibc has it (2.35 on: lock-free, never
 * allocates) and agent_compat_init found it; otherwise
 * agent_find_object_phdr.  0 when found, -1 not. */
int agent_find_object(const void *pc, struct agent_object *o) AGENT_HIDDEN;

/* The fallback: the object whose PT_LOAD segments hold pc, by a walk of
 * the objects (loader_iterate: dl_iterate_phdr's lock, none in a frozen
 * fork child), its link map from _r_debug's list of the base namespace
 * (matched by l_ld).  Never allocates. */
int agent_find_object_phdr(const void *pc, struct agent_object *o) AGENT_HIDDEN;

/* The loader's struct r_debug (_r_debug), found from the main program's
 * DT_DEBUG entry (which ld.so points at it) so that the agent needs
 * nothing of ld.so's by name; NULL if that entry is missing.  Found at
 * the first call (a walk of the objects), kept in fork children. */
struct r_debug *agent_r_debug(void) AGENT_HIDDEN;

/* For the tests: 1 when the lock was found, and whether it is held now. */
int loader_lock_found(void) AGENT_HIDDEN;
int loader_lock_held(void) AGENT_HIDDEN;

#endif
