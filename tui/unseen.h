/*
 * unseen: allocators the agent cannot see.  The agent counts what goes
 * through the malloc family (and the program's own anonymous mmap); a
 * program whose allocator is linked into it (a Rust #[global_allocator]
 * built on a statically linked jemalloc or mimalloc, a server that bundles
 * its own jemalloc: the official redis image, ClickHouse, Envoy) allocates
 * without ever calling malloc, and ymtop would show "sampling" and almost
 * nothing while RSS grows.  Two ways tell, each said in one line:
 *
 *   - the symbols: the executable, or a loaded module other than the C
 *     library, the loader, the agent and the allocator libraries the agent
 *     reaches through malloc (libjemalloc, libtcmalloc, libmimalloc),
 *     defines an allocator's entry points (je_malloc, mallocx,
 *     _rjem_malloc, mi_malloc, tc_malloc, TCMallocInternalMalloc, Rust's
 *     global allocator shim __rg_alloc, or malloc itself), read from the
 *     ELF file's symbol tables (libelf, through /proc/PID/root);
 *   - the figures: the agent's exact call count stays flat between
 *     refreshes while anonymous RSS, less the mmap the agent tracks,
 *     grows by UNSEEN_GROWTH or more.
 *
 * Runs in ymtop (the session owns one per process); reads files, no
 * /proc of its own.
 */
#ifndef YMTOP_UNSEEN_H
#define YMTOP_UNSEEN_H

#include <stddef.h>
#include <stdint.h>

#include "shm.h"

#define UNSEEN_GROWTH (16.0 * 1024 * 1024)

struct unseen {
	/* From the symbols: the allocator's name ("jemalloc", "mimalloc",
	 * "tcmalloc", "rust", "malloc"), the symbol and the module's base
	 * name; allocator[0] == '\0' when none was found. */
	char     allocator[16];
	char     symbol[48];
	char     module[64];
	uint32_t scanned;      /* modules of the snapshot already read */
	/* From the figures: the call count and anonymous bytes when the
	 * count last moved, and how far anonymous memory grew since. */
	int      have_base;
	uint64_t base_calls;
	double   base_anon;
	double   grown;
};

/* Read the symbols of the snapshot's modules not read yet (modules are
 * only ever appended); root: the process's root for paths ("" or NULL:
 * ours). */
void unseen_scan(struct unseen *u, const struct shm_snapshot *snap,
		 const char *root);

/* One refresh's figures: the agent's exact call count (allocations plus
 * frees) and anonymous RSS less tracked mmap (have_anon 0: unknown). */
void unseen_watch(struct unseen *u, uint64_t calls, double anon, int have_anon);

/* The one line, "" when nothing tells; and the allocator's name for
 * labels ("" none, "unknown" from the figures alone). */
const char *unseen_line(const struct unseen *u, char *buf, size_t len);
const char *unseen_allocator(const struct unseen *u);

/* Which allocator a symbol name belongs to, "" when none (for tests). */
const char *unseen_symbol_allocator(const char *name);

#endif
