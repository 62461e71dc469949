/*
 * flame: the stacks of a model merged into a call tree, root first, as
 * flame graphs and folded stacks show them.  Below the root one frame
 * names the stacks' kind, "[malloc]" (the malloc family) or "[mmap]"
 * (anonymous mappings the program made itself), so that the two never
 * share a box; then a path is the
 * chain of frames from the outermost caller to the display frame (frames
 * below it are allocator plumbing, see frames.h; --no-skip keeps them all);
 * inlined functions are frames of their own.  Siblings with the same name
 * and inlined flag are merged.
 *
 * value(node) = self(node) + sum of value(children); value(root) is the
 * model's total under the weight (stacks with no weight are left out).
 */
#ifndef YMTOP_FLAME_H
#define YMTOP_FLAME_H

#include <stdint.h>

#include "sym/frames.h"
#include "model/model.h"
#include "common.h"
#include "sym/sym.h"
#include "util/hashmap.h"

#define FLAME_NONE UINT32_MAX

struct flame_node {
	char    *name;          /* owned; the root's is "all" */
	int      inlined;
	uint32_t parent;        /* FLAME_NONE for the root */
	uint32_t child;         /* first child, or FLAME_NONE */
	uint32_t next;          /* next sibling, or FLAME_NONE */
	uint32_t depth;         /* root 0 */
	double   value, self;
};

struct flame {
	struct flame_node *n;   /* n[0] is the root */
	uint32_t count, cap;
	uint32_t max_depth;
	struct hmap index;      /* (parent, name, inlined) -> node, while building */
};

/* Build the tree of m's stacks under weight w.  0, or -1 when out of
 * memory (fl is then empty). */
int flame_build(struct flame *fl, struct model *m, struct sym *s,
		const struct frames_rules *r, enum report_weight w);
/* The kind's frame under the root: "[malloc]" or "[mmap]". */
const char *flame_kind_frame(uint32_t kind);
void flame_free(struct flame *fl);

#endif
