/*
 * frames: a stack as people read it.  Expands each return address into its
 * inline chain (sym), and picks the display frame: the first frame that is
 * neither allocator plumbing nor Rust async noise.
 *
 * Plumbing (frames_is_plumbing): the libc malloc family, operator new and
 * new[], Rust's __rust_alloc/__rdl_alloc/__rg_alloc and alloc::alloc, and
 * the standard libraries around them (C++ std:: and __gnu_cxx::, e.g.
 * std::allocator, allocator_traits, std::vector's _M_realloc_insert,
 * basic_string; Rust alloc::, core::, std::, hashbrown::, e.g. RawVec,
 * Vec::push, Box::new), plus the user's --skip patterns (POSIX extended
 * regexes, unanchored, matched against the function name as printed).
 * --no-skip turns every rule off, the noise rule too.
 *
 * Noise (frames_is_noise): `<X as core::future::future::Future>::poll`
 * wrappers, code inside them ("...::poll::{{closure}}"), and closure layers
 * ("f::{{closure}}", v0 "f::{closure#0}") of the function that is also the
 * next outer frame.  Writers of folded stacks drop noise frames and print
 * the others with frames_fold_name (closure components removed), as ying
 * does; the text and JSON reports keep every frame and only choose the
 * display frame past the noise.
 */
#ifndef YMTOP_FRAMES_H
#define YMTOP_FRAMES_H

#include <stddef.h>
#include <stdint.h>

/* The rules and the name helpers come with frames.h: its users need all
 * three (the report writers and the screen name what frames_view gives
 * them). */
#include "names.h"
#include "rules.h"
#include "sym.h"

struct stack_view {
	struct sym_frame *f; /* flattened, innermost first */
	uint32_t n;
	uint32_t display;    /* index of the display frame (< n when n > 0) */
};

/* Expand addrs (return addresses, innermost first).  0, or -1 when out of
 * memory.  Strings in the view belong to s. */
int frames_view(struct sym *s, const struct frames_rules *r,
		const uint64_t *addrs, uint32_t depth, struct stack_view *out);
void frames_view_free(struct stack_view *v);

/* The display frame's label (frames_label), and when it is native code
 * that Python called (an extension's), the Python frame that called it
 * beside it: "[libsqlite3.so.0+0xa7504] <- keep_sqlite (db.py:40)". */
const char *frames_display_label(const struct stack_view *v, char *buf,
				 size_t len);

/* For writers that take spliced words (sym_splice) rather than a view
 * (pprof): the index of the first word to keep so that the leaf is the
 * display frame's word when that is a Python frame (the words inner to
 * it, allocator and interpreter code, are left out, as folded stacks
 * start at the display frame); 0 otherwise. */
uint32_t frames_python_leaf(struct sym *s, const struct frames_rules *r,
			    const uint64_t *words, uint32_t n);

/* Is this frame allocator plumbing under the rules? */
int frames_is_plumbing(const struct frames_rules *r, const struct sym_frame *f);

/* The allocator's entry points and wrappers (the built-in ones and the
 * user's rules that Go's regexp reads the same way) as one regular
 * expression in RE2 syntax, for pprof's drop_frames: pprof matches it,
 * anchored, against each function name cut at its parameter list and
 * drops that frame and every frame it called, so that a wrapper's caller
 * is the leaf.  frames_keep_regex: libc's start-up, which the "__libc_"
 * entry prefix would drop with the whole stack above it (keep_frames).
 * Both malloc'd; NULL with --no-skip (drop) or out of memory.  Of the
 * standard-library tier only glibc's stdio (_IO_*) is in: pprof drops
 * from the root down, and std:: code between main and the user's
 * (std::thread, a std::function) would take the user's frames with it. */
char *frames_drop_regex(const struct frames_rules *r);
char *frames_keep_regex(void);

/* Is v->f[i] Rust async noise under the rules (never with --no-skip)?
 * Writers that fold stacks skip such frames:
 *     for (uint32_t k = v.n; k-- > v.display;)
 *             if (!frames_is_noise(r, &v, k))
 *                     emit(frames_fold_name(&v.f[k], buf, sizeof buf));
 * Cost: a few string scans of the frame's and the next frames' names. */
int frames_is_noise(const struct frames_rules *r, const struct stack_view *v,
		    uint32_t i);

/* The display frame of v under r (what frames_view puts in v->display):
 * the first frame that is neither plumbing nor noise, never a named frame
 * of a shared library outer to a frame of the executable (sym_frame.exe:
 * the library called the program, whose unnamed frame inside it is then
 * shown); for a stack that is all library code the first one past the
 * allocator's entry points; else 0. */
uint32_t frames_display(const struct frames_rules *r,
			const struct stack_view *v);

#endif
