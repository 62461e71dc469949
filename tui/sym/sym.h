/*
 * sym: symbolization in ymtop (never in the target), with libdw.
 *
 * Addresses are absolute addresses in the target.  Modules come from the
 * segment (path, load bias, extent, build-id), so symbolization works after
 * the target has exited.  Each address resolves to a chain of frames:
 * the innermost inlined function first, then the functions it was inlined
 * into, ending with the real (out-of-line) function.  Results are cached per
 * address: resolving the same address twice costs a hash lookup.
 *
 * A struct sym stands for one process; what its files hold (the libdwfl
 * session, the names, the chains by file address) is shared by every
 * struct sym whose process maps the same file (files.h): a process of a
 * program already seen costs its module list and its own frames.
 *
 * Strings returned live until sym_free of the sym object that returned
 * them.  Not thread-safe, and not per object: every struct sym of the
 * program is used from one thread at a time (they share the files).
 */
#ifndef YMTOP_SYM_H
#define YMTOP_SYM_H

#include <stdint.h>
#include <sys/types.h>

#include "ymtop/segment.h"

struct sym;

struct sym_frame {
	uint64_t    addr;       /* the address looked up (as given) */
	const char *module;     /* path of the module, or NULL if none */
	uint64_t    offset;     /* addr - module load bias */
	const char *function;   /* demangled, or NULL if unknown */
	const char *file;       /* source file, or NULL */
	int         line;       /* 0 if unknown */
	int         inlined;    /* 1: this function was inlined into the next */
	int         exe;        /* 1: module is the program's executable (the
				 * first module of the segment's list) */
	int         python;     /* 1: a Python frame (segment.h YM_PYFRAME):
				 * function is its qualified name, file and
				 * line its source; module NULL */
};

/* root: prefix for module paths (e.g. "/proc/<pid>/root" for a target in
 * another mount namespace), or NULL. */
struct sym *sym_new(const char *root);
void sym_free(struct sym *s);

/* The live process whose modules these are (0: none, the default): a
 * module without build-id is then checked against the file the process
 * mapped (/proc/PID/map_files), and a file at its path that is another
 * (inode, size or modification time differ: rebuilt since) is not used. */
void sym_set_pid(struct sym *s, pid_t pid);

/* The symbolizer's state as one number: while it stays the same, every
 * address (and every stack, frames_view) resolves as it did, so that a
 * caller may keep what it derived from names.  It changes when names may
 * change (new modules, files or Python code objects, another pid, a frame
 * handed out short of memory); no two symbolizers share one.  0 for
 * s == NULL.  Thread-safe against other symbolizers. */
uint64_t sym_epoch(const struct sym *s);

/* Replace the module list (call again when the segment publishes more). */
void sym_set_modules(struct sym *s, const struct ym_module *mods, uint32_t n);

/* Resolve one address.  `ret` non-zero: addr is a return address and the
 * call site is addr - 1.  Fills up to max frames (innermost first) and
 * returns how many (always >= 1: an unknown address yields one frame with
 * function NULL).  The frames array returned through *out is owned by s
 * and stays valid until sym_free.
 * (There is no max argument: a chain holds at most 64 frames, see
 * SYM_MAX_CHAIN in resolve.h.  s == NULL yields one static unknown frame;
 * out may be NULL.  Not thread-safe, see above.) */
int sym_resolve(struct sym *s, uint64_t addr, int ret,
		const struct sym_frame **out);

/* Take in the segment's Python code objects (v8, segment.h struct
 * ym_pycode): records 0..n-1, the first ones as given before (records
 * never change once published).  Python frame words (YM_PYFRAME) then
 * resolve to one frame each, python set; a word whose code is not known
 * yet resolves to "[python]". */
void sym_set_pycodes(struct sym *s, const struct ym_pycode *codes, uint32_t n);

/* A stack as the program ran it: addrs (depth words from the segment:
 * native return addresses, then the Python frames, segment.h) with each
 * native frame of the evaluation loop (_PyEval_EvalFrameDefault) replaced
 * by the Python frames it runs, innermost first, up to and including the
 * next entry frame.  Python frames left over (the loop's frame unnamed or
 * cut off) go at the outer end.  At most depth words into out; returns
 * how many.  A stack without Python frames comes out unchanged. */
uint32_t sym_splice(struct sym *s, const uint64_t *addrs, uint32_t depth,
		    uint64_t *out);

/* Module-relative fallback name "[module+0x1234]" into buf. */
void sym_fallback(const struct sym_frame *f, char *buf, size_t len);

/* Diagnostic for modules whose file on disk no longer matches the build-id
 * in the segment: returns a message or NULL. */
const char *sym_module_warning(struct sym *s, uint32_t i);

/* The warnings of the current module list one by one, for reports: start
 * with *it = 0; NULL when there are no more.
 *     for (uint32_t it = 0; (w = sym_next_warning(s, &it)) != NULL;)
 *             fprintf(f, "warning: %s\n", w);
 * A module whose file changed is never used for names: its frames read
 * "[module+0x...]" and this says why. */
const char *sym_next_warning(struct sym *s, uint32_t *it);

/* debuginfod (sym/fetch.h): with DEBUGINFOD_URLS set, a module without a
 * local debug file is looked up on the servers in a child process, never
 * blocking the caller, at most 10 s (DEBUGINFOD_TIMEOUT when smaller),
 * once per run.
 *
 * sym_poll takes in the files that arrived: 1 when it did (the cache was
 * dropped: resolve again for the new names; frames handed out stay
 * valid), 0 when nothing changed.  Call it on every refresh.
 * sym_prefetch starts the lookup for the module of addr (a return
 * address) without resolving anything: a batch report calls it for its
 * frames, then waits while sym_pending says lookups are under way.
 * sym_pending: how many lookups are queued or running, with a progress
 * line into buf ("" when none). */
int sym_poll(struct sym *s);
void sym_prefetch(struct sym *s, uint64_t addr);
unsigned sym_pending(struct sym *s, char *buf, size_t len);

#endif
