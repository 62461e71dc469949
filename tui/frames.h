/*
 * frames: a stack as people read it.  Expands each return address into its
 * inline chain (sym), and picks the display frame: the first frame that is
 * not allocator plumbing (malloc family, operator new, std::allocator,
 * Rust's alloc::, ...), with user rules added by --skip and all rules off
 * with --no-skip.
 */
#ifndef YMTOP_FRAMES_H
#define YMTOP_FRAMES_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "sym.h"

struct frames_rules {
	int      no_skip;
	regex_t *user;       /* extra skip patterns (--skip REGEX) */
	int      nuser;
};

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

/* Add a user rule; 0, or -1 with a message in err for a bad pattern. */
int frames_rules_add(struct frames_rules *r, const char *pattern, char *err,
		     size_t errlen);
void frames_rules_free(struct frames_rules *r);

/* Is this frame allocator plumbing under the rules? */
int frames_is_plumbing(const struct frames_rules *r, const struct sym_frame *f);

/* "function (file:line)" or the fallback "[module+0x...]" into buf. */
const char *frames_label(const struct sym_frame *f, char *buf, size_t len);

/* Short function name: the function, or the fallback. */
const char *frames_name(const struct sym_frame *f, char *buf, size_t len);

#endif
