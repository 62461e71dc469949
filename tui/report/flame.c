/*
 * flame: the stacks of a model merged into a call tree, root first, for
 * flame graphs and folded stacks (see flame.h).
 */
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "hash.h"

static uint64_t key_hash(uint32_t parent, const char *name, int inlined)
{
	uint64_t h = ym_fnv1a_str(YM_FNV1A_INIT ^ parent ^ ((uint64_t)inlined << 40),
				  name);
	return h ^ (h >> 29);
}

struct node_key {
	const struct flame *fl;
	uint32_t parent;
	const char *name;
	int inlined;
};

static int node_eq(const void *ctx, uint32_t i)
{
	const struct node_key *k = ctx;
	const struct flame_node *x = &k->fl->n[i];
	return x->parent == k->parent && x->inlined == k->inlined &&
	       !strcmp(x->name, k->name);
}

static uint32_t add_node(struct flame *fl, uint32_t parent, const char *name,
			 int inlined)
{
	if (fl->count == fl->cap) {
		uint32_t cap = fl->cap ? fl->cap * 2 : 256;
		struct flame_node *n = realloc(fl->n, (size_t)cap * sizeof *n);
		if (!n)
			return FLAME_NONE;
		fl->n = n;
		fl->cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return FLAME_NONE;
	uint32_t i = fl->count++;
	struct flame_node *x = &fl->n[i];
	memset(x, 0, sizeof *x);
	x->name = copy;
	x->inlined = inlined;
	x->parent = parent;
	x->child = FLAME_NONE;
	x->next = FLAME_NONE;
	if (parent != FLAME_NONE) {
		struct flame_node *p = &fl->n[parent];
		x->depth = p->depth + 1;
		x->next = p->child;
		p->child = i;
		if (x->depth > fl->max_depth)
			fl->max_depth = x->depth;
	}
	return i;
}

static uint32_t child(struct flame *fl, uint32_t parent, const char *name,
		      int inlined)
{
	struct node_key k = { fl, parent, name, inlined };
	uint64_t h = key_hash(parent, name, inlined);
	uint32_t i = hmap_find(&fl->index, h, node_eq, &k);
	if (i != HMAP_NONE)
		return i;
	i = add_node(fl, parent, name, inlined);
	if (i != FLAME_NONE && hmap_add(&fl->index, h, i) != 0)
		return FLAME_NONE;
	return i;
}

/* Add value along the path root..leaf (leaf gets the self value). */
static void credit(struct flame *fl, uint32_t leaf, double v)
{
	fl->n[leaf].self += v;
	for (uint32_t i = leaf; i != FLAME_NONE; i = fl->n[i].parent)
		fl->n[i].value += v;
}

const char *flame_kind_frame(uint32_t kind)
{
	return kind == YM_KIND_MMAP ? "[mmap]" : "[malloc]";
}

int flame_build(struct flame *fl, struct model *m, struct sym *s,
		const struct frames_rules *r, enum report_weight w)
{
	memset(fl, 0, sizeof *fl);
	if (add_node(fl, FLAME_NONE, "all", 0) != 0)
		goto oom;
	for (uint32_t id = 0; id < m->nstacks; id++) {
		const struct model_stack *st = &m->stacks[id];
		double v = report_weight_value(st, w);
		if (st->alloc_samples == 0 || !(v > 0))
			continue;
		/* The kind first: the malloc family's stacks and the
		 * program's own mappings are two trees, as in every report. */
		uint32_t at = child(fl, 0, flame_kind_frame(st->kind), 0);
		if (at == FLAME_NONE)
			goto oom;
		if (st->depth == 0) {
			at = child(fl, at, "[stack table full]", 0);
			if (at == FLAME_NONE)
				goto oom;
			credit(fl, at, v);
			continue;
		}
		struct stack_view sv;
		if (frames_view(s, r, st->frames, st->depth, &sv) != 0)
			goto oom;
		for (uint32_t k = sv.n; k-- > sv.display;) {
			char buf[160];
			const struct sym_frame *f = &sv.f[k];
			at = child(fl, at, frames_name(f, buf, sizeof buf), f->inlined);
			if (at == FLAME_NONE) {
				frames_view_free(&sv);
				goto oom;
			}
		}
		frames_view_free(&sv);
		credit(fl, at, v);
	}
	hmap_free(&fl->index);
	return 0;
oom:
	flame_free(fl);
	return -1;
}

void flame_free(struct flame *fl)
{
	for (uint32_t i = 0; i < fl->count; i++)
		free(fl->n[i].name);
	free(fl->n);
	hmap_free(&fl->index);
	memset(fl, 0, sizeof *fl);
}
