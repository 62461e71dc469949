#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"

/* Built-in plumbing: names (exact) and prefixes of functions that only
 * pass an allocation through.  Matching is on the demangled name. */
static const char *const plumbing_exact[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc", "cfree",
	"__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign",
	"strdup", "strndup", "__strdup", "__strndup",
	"__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc",
	"__rdl_alloc", "__rdl_alloc_zeroed", "__rdl_realloc",
	"__rg_alloc", "__rg_alloc_zeroed", "__rg_realloc",
};

static const char *const plumbing_prefix[] = {
	"operator new", "operator delete",
	"__gnu_cxx::new_allocator", "__gnu_cxx::__new_allocator",
	"std::allocator", "std::__new_allocator", "std::allocator_traits",
	"std::__allocated_ptr", "std::_Vector_base", "std::__cxx11::basic_string<",
	"alloc::alloc::", "alloc::raw_vec::", "<alloc::alloc::Global",
	"alloc::boxed::", "<alloc::raw_vec::", "alloc::vec::Vec<",
	"<alloc::vec::Vec<", "std::alloc::", "__rdl_", "__rg_",
};

int frames_is_plumbing(const struct frames_rules *r, const struct sym_frame *f)
{
	if (r && r->no_skip)
		return 0;
	const char *fn = f->function;
	if (!fn)
		return 0;
	if (r)
		for (int i = 0; i < r->nuser; i++)
			if (regexec(&r->user[i], fn, 0, NULL, 0) == 0)
				return 1;
	for (size_t i = 0; i < sizeof plumbing_exact / sizeof *plumbing_exact; i++)
		if (!strcmp(fn, plumbing_exact[i]))
			return 1;
	for (size_t i = 0; i < sizeof plumbing_prefix / sizeof *plumbing_prefix; i++)
		if (!strncmp(fn, plumbing_prefix[i], strlen(plumbing_prefix[i])))
			return 1;
	return 0;
}

int frames_view(struct sym *s, const struct frames_rules *r,
		const uint64_t *addrs, uint32_t depth, struct stack_view *v)
{
	memset(v, 0, sizeof *v);
	uint32_t cap = depth * 2 + 1, n = 0;
	struct sym_frame *f = malloc(cap * sizeof *f);
	if (!f)
		return -1;
	for (uint32_t i = 0; i < depth; i++) {
		const struct sym_frame *chain;
		int k = sym_resolve(s, addrs[i], 1, &chain);
		for (int j = 0; j < k; j++) {
			if (n == cap) {
				cap *= 2;
				struct sym_frame *g = realloc(f, cap * sizeof *f);
				if (!g) {
					free(f);
					return -1;
				}
				f = g;
			}
			f[n++] = chain[j];
		}
	}
	v->f = f;
	v->n = n;
	v->display = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!frames_is_plumbing(r, &f[i])) {
			v->display = i;
			break;
		}
	return 0;
}

void frames_view_free(struct stack_view *v)
{
	free(v->f);
	memset(v, 0, sizeof *v);
}

int frames_rules_add(struct frames_rules *r, const char *pattern, char *err,
		     size_t errlen)
{
	regex_t *u = realloc(r->user, (size_t)(r->nuser + 1) * sizeof *u);
	if (!u) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->user = u;
	int rc = regcomp(&u[r->nuser], pattern, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		char msg[128];
		regerror(rc, &u[r->nuser], msg, sizeof msg);
		snprintf(err, errlen, "bad --skip pattern '%s': %s", pattern, msg);
		return -1;
	}
	r->nuser++;
	return 0;
}

void frames_rules_free(struct frames_rules *r)
{
	for (int i = 0; i < r->nuser; i++)
		regfree(&r->user[i]);
	free(r->user);
	r->user = NULL;
	r->nuser = 0;
}

const char *frames_name(const struct sym_frame *f, char *buf, size_t len)
{
	if (f->function)
		return f->function;
	sym_fallback(f, buf, len);
	return buf;
}

const char *frames_label(const struct sym_frame *f, char *buf, size_t len)
{
	char fb[128];
	const char *name = frames_name(f, fb, sizeof fb);
	if (f->file && f->line > 0) {
		const char *base = strrchr(f->file, '/');
		snprintf(buf, len, "%s (%s:%d)", name, base ? base + 1 : f->file,
			 f->line);
	} else {
		snprintf(buf, len, "%s", name);
	}
	return buf;
}
