/*
 * files: the symbolizer's state per ELF file, shared by every struct sym
 * (every watched process) that maps the file.
 *
 * A file is known by its build-id when the segment records one (the same
 * content, wherever it lies), else by its path, device, inode, size and
 * modification time: two builds of one path are two files.  Each file has
 * a libdwfl session of its own holding only that file, reported at load
 * bias 0, so that an address of the file is its vaddr (process address
 * minus the process's load bias), and its resolved addresses are cached by
 * vaddr: a thousand processes of one program resolve each call site once.
 *
 * Bounds: at most SYM_FILES_OPEN libdwfl sessions are open at once, and
 * their files add up to at most SYM_FILES_BYTES (one file alone may pass
 * it); beyond, the least recently used session is closed (its ELF and
 * DWARF data and lookup tables freed, its descriptors closed) and opened
 * again when a frame of it needs resolving.  What a file resolved (the
 * chains and their strings) stays until no struct sym holds the file:
 * it grows with distinct call sites, not with processes.
 *
 * Process-wide state, used from one thread at a time (libdwfl is not
 * thread-safe).
 */
#ifndef YMTOP_SYM_FILES_H
#define YMTOP_SYM_FILES_H

#include <stdint.h>

#include "store.h"
#include "sym.h"

#define SYM_FILES_OPEN  64
#define SYM_FILES_BYTES (512ull << 20)

struct sym_file;

/* The file for a module (path as the segment gives it, root prefixed when
 * root is not NULL), with a reference the caller gives back with
 * sym_file_put; NULL when it cannot be opened, is no ELF file or does not
 * match the build-id (then *warning, when the file changed, is a message
 * interned in st). */
struct sym_file *sym_file_get(const char *root, const char *path,
			      const uint8_t *build_id, uint32_t build_id_len,
			      struct sym_store *st, const char **warning);
void sym_file_put(struct sym_file *f);

/* The chain of the file's vaddr (innermost first, function, file, line
 * and inlined set; the caller sets addr, module, offset and exe): owned by
 * the file, valid while the caller holds it.  Returns the count (>= 1), 0
 * when memory runs out (then *out is a static unknown frame). */
int sym_file_resolve(struct sym_file *f, uint64_t vaddr,
		     const struct sym_frame **out);

/* Ask for the file's DWARF once (starts a debuginfod lookup when it has
 * none here, see fetch.h). */
void sym_file_prefetch(struct sym_file *f);

/* Take in the debug files debuginfod brought: every session closed (to
 * be opened again, asking for debug files again) and every file's cache
 * dropped.  Returns the generation: it grows each time that happened. */
unsigned sym_files_poll(void);

/* For tests and the benchmark: open sessions and files known. */
void sym_files_stats(unsigned *open, unsigned *known);

#endif
