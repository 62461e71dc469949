/*
 * folded: the folded-stacks report, flamegraph.pl's input (see folded.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "fmt.h"
#include "folded.h"

static void put_name(FILE *f, const struct flame_node *x)
{
	/* ';' separates frames and a line break ends a line: those first,
	 * then the escapes (names have no length limit: C++ templates). */
	char stack[256], *name = stack;
	size_t len = strlen(x->name);
	if (len >= sizeof stack && !(name = malloc(len + 1)))
		name = stack, len = sizeof stack - 1;   /* out of memory: cut */
	for (size_t i = 0; i < len; i++) {
		char c = x->name[i];
		name[i] = c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
	}
	name[len] = '\0';
	fmt_vis_fputs(f, name);
	if (name != stack)
		free(name);
	if (x->inlined)
		fputs("_[i]", f);
}

/* Depth-first; path[] holds the nodes from the first frame to i. */
static void walk(FILE *f, const struct flame *fl, uint32_t i, uint32_t *path,
		 uint32_t depth)
{
	path[depth] = i;
	/* To nearest, ties to even: as JSON's and SQLite's whole numbers. */
	double v = nearbyint(fl->n[i].self);
	if (depth > 0 && v >= 1) {
		for (uint32_t k = 1; k <= depth; k++) {
			if (k > 1)
				fputc(';', f);
			put_name(f, &fl->n[path[k]]);
		}
		fprintf(f, " %.0f\n", v);
	}
	for (uint32_t c = fl->n[i].child; c != FLAME_NONE; c = fl->n[c].next)
		walk(f, fl, c, path, depth + 1);
}

int folded_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o)
{
	struct flame fl;
	if (flame_build(&fl, m, s, o->rules, o->weight) != 0) {
		errno = ENOMEM;
		return -1;
	}
	uint32_t *path = malloc(((size_t)fl.max_depth + 1) * sizeof *path);
	if (!path) {
		flame_free(&fl);
		errno = ENOMEM;
		return -1;
	}
	walk(f, &fl, 0, path, 0);
	free(path);
	flame_free(&fl);
	return ferror(f) ? -1 : 0;
}
