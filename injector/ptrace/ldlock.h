/*
 * ldlock: who holds the dynamic loader's lock in a target.  glibc's
 * dlopen and dlclose hold it (GL(dl_load_lock), a recursive mutex in
 * ld.so's _rtld_global) from start to end, constructors and destructors
 * included, and dlsym and dladdr take it: a thread borrowed to call
 * dlclose (detach) or dlopen (inject) waits for as long as another
 * thread is in there, which a library's constructor can make forever.
 * Read, not taken: the mutex's owner word, from the target's memory.
 *
 * _rtld_global's layout is glibc's own; its address and size come from
 * ld.so's dynamic symbols, and the lock is found in it by its shape (the
 * namespace count, 1 to 16, then two recursive mutexes in a row:
 * _dl_nns, _dl_load_lock, _dl_load_write_lock, as in glibc 2.17 to 2.40)
 * rather than by an offset.  Runs in ymtop; the file and the memory are
 * the target's, so hostile: every bound is checked, and a shape not
 * found is "cannot tell", never "free".
 */
#ifndef YMTOP_INJECT_LDLOCK_H
#define YMTOP_INJECT_LDLOCK_H

#include <sys/types.h>

/* The thread of pid (its id in ymtop's pid namespace) that holds the
 * dynamic loader's lock; 0 when the lock is free; -1 when it cannot be
 * told (no glibc ld.so mapped, its symbols unreadable, the shape not
 * found). */
pid_t inject_loader_lock_owner(pid_t pid);

#endif
