/*
 * frames: a stack as people read it.
 *
 * Rules work on demangled names (what sym hands out), in four tiers:
 *
 *  1. allocator entry points: the libc malloc family, operator new and
 *     new[] (every overload), Rust's __rust_alloc / __rdl_alloc /
 *     __rg_alloc shims and alloc::alloc's free functions, and the
 *     allocator wrappers of popular programs and runtimes (wrap_*: redis
 *     zmalloc and sds, CPython PyMem/PyObject, glib g_malloc/g_slice, OpenSSL
 *     CRYPTO_malloc, the xmalloc family, nginx ngx_palloc, PostgreSQL
 *     palloc/AllocSetAlloc, SQLite sqlite3Malloc), and the user's rules
 *     (--skip, the skip files): they name wrappers too;
 *  2. standard-library code: everything in C++'s std:: and __gnu_cxx::
 *     (std::allocator, allocator_traits, std::vector's _M_realloc_insert,
 *     _M_default_append, push_back, basic_string's _M_construct, ...) and
 *     in Rust's alloc::, core::, std:: and hashbrown:: crates (RawVec,
 *     Vec::push, Box::new, <u8 as SpecFromElem>::from_elem, ...), code
 *     whose source file is a C++ standard header (an inlined frame named
 *     from DW_AT_name alone, "operator+<char, ...>", has no namespace), and
 *     libc's start-up (__libc_start_main, start_thread, _start): the user
 *     never wrote it, so the display frame is their caller;
 *  3. Rust async noise (frames_is_noise): `<... as Future>::poll` wrappers
 *     and {{closure}} layers of a function that is also the next frame;
 *  4. unnamed frames ("[postgres+0x5c7860]": a static function of a
 *     stripped binary): unknown.  Between the allocator and a named
 *     wrapper they are plumbing (AllocSetAlloc under palloc); they are
 *     never the display frame while a named frame of tier 0 follows,
 *     unless that frame belongs to a shared library that called the
 *     executable (frames_display).
 *
 * Tiers 1 and 2 are matched on the *bare* name: without a C++ return type
 * and parameter list ("void std::vector<long>::_M_realloc_insert<long
 * const&>(...)" is matched as "std::vector<long>::_M_realloc_insert<long
 * const&>"), and for Rust's qualified paths "<X as Trait>::m" and "<X>::m"
 * on X and Trait.  User rules see the name as printed (the fallback
 * "[module+0x...]" for an unnamed frame).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"

/* ---- tier 1: allocator entry points ---- */

static const char *const entry_exact[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc", "cfree",
	"malloc_usable_size",
	"strdup", "strndup", "__strdup", "__strndup", "wcsdup",
	"asprintf", "vasprintf", "__asprintf", "___asprintf",
	"__vasprintf_internal", "getline", "getdelim", "__getdelim",
	"open_memstream", "open_wmemstream",
	"__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc",
	"__rust_dealloc",
	"__rdl_alloc", "__rdl_alloc_zeroed", "__rdl_realloc", "__rdl_dealloc",
	"__rg_alloc", "__rg_alloc_zeroed", "__rg_realloc", "__rg_dealloc",
	"alloc::alloc::alloc", "alloc::alloc::alloc_zeroed",
	"alloc::alloc::realloc", "alloc::alloc::exchange_malloc",
	"alloc::alloc::__rust_alloc", "alloc::alloc::__rust_realloc",
	"alloc::alloc::__rust_alloc_zeroed",
};

static const char *const entry_prefix[] = {
	"__libc_", "__GI___libc_", "_int_malloc", "_int_realloc",
	"_int_memalign", "tcache_", "__rdl_", "__rg_", "__rust_alloc",
	"__rustc::",          /* rustc >= 1.88 mangles the shims in __rustc */
	"alloc::alloc::Global", "<alloc::alloc::Global",
	"std::alloc::", "<std::alloc::System",
};

/* Allocator wrappers of popular programs and runtimes: what their code
 * calls instead of malloc, so that the caller of the wrapper is what a
 * user recognizes.  Exact names, then prefixes of families.  Names only C
 * programs export (no namespace), so a clash with a user's function of the
 * same name in another program is the accepted price. */
static const char *const wrap_exact[] = {
	/* redis (zmalloc.c) */
	"zstrdup", "zmalloc_size", "zmalloc_usable_size", "extend_to_usable",
	/* CPython (Objects/obmalloc.c, Modules/gcmodule.c, typeobject.c) */
	"PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc",
	"_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc",
	"_PyObject_New", "_PyObject_NewVar", "_PyObject_GC_New",
	"_PyObject_GC_NewVar", "_PyObject_GC_Resize", "_PyObject_GC_Malloc",
	"_PyObject_GC_Calloc", "PyObject_GC_Resize", "gc_alloc",
	"PyType_GenericAlloc", "_PyType_AllocNoTrack",
	/* glib (gmem.c, gslice.c, gstrfuncs.c); g_new()/g_renew()/g_try_new()
	 * are macros over g_malloc_n, g_realloc_n, g_try_malloc_n */
	"g_strdup", "g_strndup", "g_strdup_printf", "g_strdup_vprintf",
	"g_strconcat", "g_memdup", "g_memdup2", "g_aligned_alloc",
	"g_aligned_alloc0",
	/* OpenSSL (crypto/mem.c, o_str.c): OPENSSL_malloc() & co. are macros */
	"CRYPTO_malloc", "CRYPTO_zalloc", "CRYPTO_realloc",
	"CRYPTO_clear_realloc", "CRYPTO_strdup", "CRYPTO_strndup",
	"CRYPTO_memdup", "CRYPTO_aligned_alloc",
	/* the xmalloc family (gnulib, libiberty, git, bash) */
	"xcharalloc", "xpalloc", "xnmalloc", "xnrealloc", "x2realloc",
	"x2nrealloc", "ximalloc", "xicalloc", "xirealloc", "xireallocarray",
	"xizalloc", "ximemdup", "ximemdup0", "xinmalloc", "xasprintf",
	"xvasprintf", "do_xmalloc", "sh_xmalloc", "sh_xrealloc",
	/* nginx (os/unix/ngx_alloc.c, core/ngx_palloc.c, ngx_array, ngx_list) */
	"ngx_alloc", "ngx_calloc", "ngx_memalign", "ngx_palloc", "ngx_pnalloc",
	"ngx_pcalloc", "ngx_pmemalign", "ngx_palloc_small", "ngx_palloc_large",
	"ngx_palloc_block", "ngx_create_pool", "ngx_array_create",
	"ngx_array_push", "ngx_array_push_n", "ngx_list_create",
	"ngx_list_push", "ngx_pstrdup",
	/* PostgreSQL (utils/mmgr): palloc over the memory contexts' methods */
	"palloc", "palloc0", "repalloc", "repalloc0", "pstrdup", "pnstrdup",
	"psprintf", "pvsprintf", "MemoryContextStrdup", "GenerationAlloc",
	"GenerationRealloc", "SlabAlloc", "BumpAlloc", "BumpRealloc",
	/* SQLite (malloc.c, mem1.c, pcache1.c) */
	"sqlite3Realloc", "sqlite3MemMalloc", "sqlite3MemRealloc",
	"sqlite3DbStrDup", "sqlite3DbStrNDup", "sqlite3DbSpanDup",
	"sqlite3DbRealloc", "sqlite3DbReallocOrFree", "dbMallocRawFinish",
	"dbReallocFinish", "mallocWithAlarm", "sqlite3PageMalloc",
	"pcache1Alloc",
};

static const char *const wrap_prefix[] = {
	/* redis: zmalloc, zmalloc_usable, zmalloc_no_tcache, ztrymalloc_usable
	 * (and its _internal), zcalloc*, zrealloc*, ztry*, zlibc_* */
	"zmalloc", "zcalloc", "zrealloc", "ztrymalloc", "ztrycalloc",
	"ztryrealloc", "zlibc_",
	/* redis (sds.c, also in hiredis): the string library that allocates
	 * for its callers: sdsnew(len), _sdsnewlen, sdstrynewlen, sdsempty,
	 * sdsdup, sdsMakeRoomFor(NonGreedy), sdscat(len|sds|printf|fmt|repr),
	 * sdscpy(len), sdsgrowzero, sdsResize, sdsRemoveFreeSpace,
	 * sdsfromlonglong, sdssplitlen, sdsjoin(sds), sds_malloc/realloc */
	"sdsnew", "_sdsnew", "sdstrynew", "sdsempty", "sdsdup",
	"sdsMakeRoomFor", "_sdsMakeRoomFor", "sdscat", "sdscpy", "sdsgrowzero",
	"sdsResize", "sdsRemoveFreeSpace", "sdsfromlonglong", "sdssplitlen",
	"sdsjoin", "sds_malloc", "sds_realloc",
	/* CPython: PyMem_Malloc/RawMalloc/Realloc/Calloc..., _PyMem_RawMalloc,
	 * _PyMem_DebugMalloc, pymalloc_alloc/pymalloc_realloc */
	"PyMem_", "_PyMem_", "pymalloc_",
	/* glib */
	"g_malloc", "g_try_malloc", "g_realloc", "g_try_realloc", "g_slice_",
	"CRYPTO_secure_",
	/* xmalloc, xmallocz (git), xcalloc, xrealloc(array), xzalloc,
	 * xstrdup, xstrndup, xmemdup(0|z) */
	"xmalloc", "xcalloc", "xrealloc", "xzalloc", "xstrdup", "xstrndup",
	"xmemdup",
	/* PostgreSQL: palloc_extended/_aligned, repalloc_extended/_huge,
	 * MemoryContextAlloc(Zero|ZeroAligned|Extended|Huge|Aligned),
	 * AllocSetAlloc/Realloc/AllocLarge/AllocFromNewBlock... and
	 * AllocSetContextCreateInternal (a context's first block) */
	"palloc_", "repalloc_", "MemoryContextAlloc", "AllocSet",
	/* SQLite: sqlite3Malloc(Zero|Size), sqlite3_malloc(64),
	 * sqlite3_realloc(64), sqlite3DbMalloc(Raw|RawNN|Zero|Size) */
	"sqlite3Malloc", "sqlite3_malloc", "sqlite3_realloc", "sqlite3DbMalloc",
};

/* ---- tier 2: standard libraries ---- */

static const char *const lib_prefix[] = {
	"std::", "__gnu_cxx::", "__cxxabiv1::", "__cxa_",
	"alloc::", "core::", "hashbrown::",
	"_IO_",                 /* glibc stdio's buffers: the caller's call */
};

/* libc's start-up and thread start: outermost frames of every stack, never
 * what a user means (a stripped program's own frames are unnamed). */
static const char *const startup_exact[] = {
	"_start", "__libc_start_main", "__libc_start_call_main",
	"__libc_start_main_impl", "__libc_start_main_alias_2", "start_thread",
	"clone", "clone3", "__clone", "__clone3", "__clone_internal",
};

/* Source files of the C++ standard library: libstdc++'s headers
 * (/usr/include/c++/12/bits/...), libc++'s (.../c++/v1/...), and
 * libstdc++'s own sources. */
static const char *const lib_files[] = {
	"/include/c++/", "/c++/v1/", "libstdc++-v3/",
};


/* For a Rust qualified path "<X as T>::m" or "<X>::m": X and T (T empty
 * for an inherent impl) into x and t; 0 when name has another form. */
static int qualified_path(const char *name, char *x, char *t, size_t len)
{
	if (name[0] != '<')
		return 0;
	int depth = 0;
	const char *as = NULL, *close = NULL;
	for (const char *p = name; *p; p++) {
		if (*p == '<' || *p == '[' || *p == '(' || *p == '{') {
			depth++;
		} else if (*p == '>' && p > name && p[-1] == '-') {
			continue;
		} else if (*p == '>' || *p == ']' || *p == ')' || *p == '}') {
			if (--depth == 0) {
				close = p;
				break;
			}
		} else if (depth == 1 && !as && name_starts(p, " as ")) {
			as = p;
		}
	}
	if (!close)
		return 0;
	const char *xe = as ? as : close;
	size_t xl = (size_t)(xe - (name + 1));
	if (xl >= len)
		xl = len - 1;
	memcpy(x, name + 1, xl);
	x[xl] = '\0';
	t[0] = '\0';
	if (as) {
		size_t tl = (size_t)(close - (as + 4));
		if (tl >= len)
			tl = len - 1;
		memcpy(t, as + 4, tl);
		t[tl] = '\0';
	}
	return 1;
}

static int match_list(const char *name, const char *const *exact, size_t ne,
		      const char *const *prefix, size_t np)
{
	/* The first character rules out almost every entry cheaply. */
	for (size_t i = 0; i < ne; i++)
		if (name[0] == exact[i][0] && !strcmp(name, exact[i]))
			return 1;
	for (size_t i = 0; i < np; i++)
		if (name[0] == prefix[i][0] && name_starts(name, prefix[i]))
			return 1;
	return 0;
}

#define N(a) (sizeof (a) / sizeof *(a))

static int is_entry(const char *bare)
{
	if (name_starts(bare, "operator new") || name_starts(bare, "operator delete"))
		return 1;
	return match_list(bare, entry_exact, N(entry_exact), entry_prefix,
			  N(entry_prefix)) ||
	       match_list(bare, wrap_exact, N(wrap_exact), wrap_prefix,
			  N(wrap_prefix));
}

/* A frame of the C++ standard library by its source file, whatever its
 * name says. */
static int lib_file(const char *file)
{
	if (!file)
		return 0;
	for (size_t i = 0; i < N(lib_files); i++)
		if (strstr(file, lib_files[i]))
			return 1;
	return 0;
}

/* The C and C++ runtimes: an unnamed frame inside them (a static helper
 * of libc or libstdc++) is library code, not the user's. */
static int runtime_module(const char *module)
{
	static const char *const libs[] = {
		"libc.so", "libstdc++.so", "libc++.so", "libc++abi.so",
		"libgcc_s.so", "ld-linux", "libm.so",
	};
	if (!module)
		return 0;
	const char *base = strrchr(module, '/');
	base = base ? base + 1 : module;
	for (size_t i = 0; i < N(libs); i++)
		if (name_starts(base, libs[i]))
			return 1;
	return 0;
}

/* An operator template named without its namespace (DW_AT_name of an
 * inlined instance: "operator+<char, std::char_traits<char>, ...>") whose
 * arguments are the standard library's: std::operator+ and friends. */
static int std_operator(const char *bare)
{
	size_t op = name_operator_token(bare, bare);
	if (!op)
		return 0;
	const char *t = bare + op;
	return *t == '<' && (name_starts(t + 1, "std::") || name_starts(t + 1, "char,") ||
			     name_starts(t + 1, "wchar_t,"));
}

/* A Rust type that belongs to no crate: a primitive, slice, array,
 * tuple, reference, pointer or trait object ("u8", "[T]", "&str"). */
static int builtin_type(const char *x)
{
	if (!*x || x[0] == '<')
		return 0;
	if (strchr("[(&*", x[0]) || name_starts(x, "dyn "))
		return 1;
	return strstr(x, "::") == NULL;
}

static int is_library(const char *bare, int level);

static int is_lib_path(const char *p, int level)
{
	if (p[0] == '<')        /* a path through another qualified path */
		return level < 8 && is_library(p, level + 1);
	while (*p == '&' || *p == '*')
		p++;
	if (name_starts(p, "mut "))
		p += 4;
	if (name_starts(p, "const "))
		p += 6;
	return match_list(p, NULL, 0, lib_prefix, N(lib_prefix)) || is_entry(p);
}

static int is_library(const char *bare, int level)
{
	char x[FRAMES_NAME_MAX], t[FRAMES_NAME_MAX];
	if (qualified_path(bare, x, t, sizeof x)) {
		/* <X as T>::m: code of X's crate, or generic code of a
		 * library trait; <X>::m: X's inherent methods. */
		if (is_lib_path(x, level))
			return 1;
		/* A type of no crate (u8, [T], a generic parameter T):
		 * library code unless it implements the user's trait. */
		return builtin_type(x) && (!t[0] || is_lib_path(t, level));
	}
	return is_lib_path(bare, level);
}
enum tier {
	T_USER,         /* named code of the program: a display frame */
	T_ENTRY,        /* allocator entry point or wrapper, user rules */
	T_LIB,          /* standard library, libc start-up */
	T_UNNAMED,      /* no name known */
};

static enum tier plumbing_tier(const struct frames_rules *r,
			       const struct sym_frame *f)
{
	if (r && r->no_skip)
		return T_USER;
	if (frames_rules_match(r, f))
		return T_ENTRY;
	const char *fn = f->function;
	if (!fn)
		return runtime_module(f->module) ? T_LIB : T_UNNAMED;
	char bare[FRAMES_NAME_MAX];
	name_bare(fn, bare, sizeof bare);
	if (match_list(bare, startup_exact, N(startup_exact), NULL, 0))
		return T_LIB;
	if (is_entry(bare))
		return T_ENTRY;
	if (is_library(bare, 0) || lib_file(f->file) || std_operator(bare))
		return T_LIB;
	return T_USER;
}

int frames_is_plumbing(const struct frames_rules *r, const struct sym_frame *f)
{
	enum tier t = plumbing_tier(r, f);
	return t == T_ENTRY || t == T_LIB;
}

/* ---- the rules for pprof ---- */

/* A growing string; err once out of memory. */
struct rx {
	char *s;
	size_t n, cap;
	int err;
};

static void rx_put(struct rx *x, const char *p, size_t k)
{
	if (x->err)
		return;
	if (x->n + k + 1 > x->cap) {
		size_t cap = (x->n + k + 1) * 2;
		char *t = realloc(x->s, cap);
		if (!t) {
			x->err = 1;
			return;
		}
		x->s = t;
		x->cap = cap;
	}
	memcpy(x->s + x->n, p, k);
	x->n += k;
	x->s[x->n] = '\0';
}

/* One alternative: name as a literal, ".*" after it for a prefix. */
static void rx_name(struct rx *x, const char *name, int prefix)
{
	if (x->n)
		rx_put(x, "|", 1);
	for (const char *p = name; *p; p++) {
		if (strchr(".+*?()|[]{}^$\\", *p))
			rx_put(x, "\\", 1);
		rx_put(x, p, 1);
	}
	if (prefix)
		rx_put(x, ".*", 2);
}

static void rx_list(struct rx *x, const char *const *v, size_t n, int prefix)
{
	for (size_t i = 0; i < n; i++)
		rx_name(x, v[i], prefix);
}

/* Can Go's regexp (RE2 syntax) read this POSIX extended regex the same
 * way?  pprof refuses the whole profile when drop_frames does not
 * compile, so only a conservative subset passes: escapes of punctuation
 * or of classes both know (not GNU's \< \> \` \' anchors nor
 * back-references), no counted repetition ({n,m}: Go caps it at 1000),
 * and no repetition operator right after another (Go reads "*?" as lazy,
 * refuses "**"), after '(' or '|', or at the start. */
static int re2_compatible(const char *re)
{
	char prev = '(';
	for (const char *p = re; *p; prev = *p, p++) {
		if (*p == '{')
			return 0;
		if (strchr("*+?", *p) && strchr("*+?(|", prev))
			return 0;
		if (*p != '\\')
			continue;
		p++;
		if (!*p || strchr("<>`'", *p))
			return 0;
		if (isalnum((unsigned char)*p) && !strchr("dDsSwWbB", *p))
			return 0;
	}
	return 1;
}

char *frames_drop_regex(const struct frames_rules *r)
{
	if (r && r->no_skip)
		return NULL;
	struct rx x = { 0 };
	rx_name(&x, "operator new", 1);
	rx_name(&x, "operator delete", 1);
	rx_list(&x, entry_exact, N(entry_exact), 0);
	rx_list(&x, entry_prefix, N(entry_prefix), 1);
	rx_list(&x, wrap_exact, N(wrap_exact), 0);
	rx_list(&x, wrap_prefix, N(wrap_prefix), 1);
	/* glibc's stdio buffers: library code that never calls the program,
	 * so that printf's buffer is the program's call. */
	rx_name(&x, "_IO_", 1);
	for (int i = 0; r && i < r->nuser; i++) {
		if (!re2_compatible(r->source[i]))
			continue;
		/* Unanchored like ymtop's own matching. */
		rx_put(&x, "|.*(?:", 6);
		rx_put(&x, r->source[i], strlen(r->source[i]));
		rx_put(&x, ").*", 3);
	}
	if (x.err) {
		free(x.s);
		return NULL;
	}
	return x.s;
}

char *frames_keep_regex(void)
{
	struct rx x = { 0 };
	rx_list(&x, startup_exact, N(startup_exact), 0);
	if (x.err) {
		free(x.s);
		return NULL;
	}
	return x.s;
}

/* ---- tier 3: Rust async noise ---- */

/* A poll wrapper: "<X as core::future::future::Future>::poll" (any X),
 * or code inside one ("...::poll::{{closure}}", as ying drops "::poll::"
 * lines). */
static int poll_wrapper(const char *fn)
{
	static const char tail[] = " as core::future::future::Future>::poll";
	if (!strstr(fn, "::poll"))
		return 0;       /* the common case, without copying */
	char bare[FRAMES_NAME_MAX];
	name_bare(fn, bare, sizeof bare);
	size_t n = strlen(bare), t = sizeof tail - 1;
	if (bare[0] == '<' && n > t && !strcmp(bare + n - t, tail))
		return 1;
	for (const char *p = strstr(bare, "::poll::"); p;
	     p = strstr(p + 1, "::poll::"))
		if (name_closure_at(p + 6))
			return 1;
	return 0;
}

int frames_is_noise(const struct frames_rules *r, const struct stack_view *v,
		    uint32_t i)
{
	if ((r && r->no_skip) || !v || i >= v->n || !v->f[i].function)
		return 0;
	const char *fn = v->f[i].function;
	if (poll_wrapper(fn))
		return 1;
	if (!strstr(fn, "::{"))
		return 0;       /* no closure component: the common case */
	char me[FRAMES_NAME_MAX], next[FRAMES_NAME_MAX];
	frames_fold_name(&v->f[i], me, sizeof me);
	if (!strcmp(me, fn))
		return 0;       /* no closure layer in this name */
	/* A closure layer folds into the next outer frame that is not a poll
	 * wrapper when, closures removed, both name the same function. */
	for (uint32_t j = i + 1; j < v->n; j++) {
		if (v->f[j].function && poll_wrapper(v->f[j].function))
			continue;
		frames_fold_name(&v->f[j], next, sizeof next);
		return !strcmp(me, next);
	}
	return 0;
}

/* ---- views ---- */

int frames_view(struct sym *s, const struct frames_rules *r,
		const uint64_t *addrs, uint32_t depth, struct stack_view *v)
{
	memset(v, 0, sizeof *v);
	uint32_t cap = depth * 2 + 1, n = 0;
	struct sym_frame *f = malloc(cap * sizeof *f);
	uint64_t *spliced = malloc((depth + 1) * sizeof *spliced);
	if (!f || !spliced) {
		free(f);
		free(spliced);
		return -1;
	}
	/* Python frames in place of the evaluation loop's (sym.h). */
	depth = sym_splice(s, addrs, depth, spliced);
	addrs = spliced;
	for (uint32_t i = 0; i < depth; i++) {
		const struct sym_frame *chain;
		int k = sym_resolve(s, addrs[i], 1, &chain);
		for (int j = 0; j < k; j++) {
			if (n == cap) {
				cap *= 2;
				struct sym_frame *g = realloc(f, cap * sizeof *f);
				if (!g) {
					free(f);
					free(spliced);
					return -1;
				}
				f = g;
			}
			f[n++] = chain[j];
		}
	}
	free(spliced);
	v->f = f;
	v->n = n;
	v->display = frames_display(r, v);
	return 0;
}

const char *frames_display_label(const struct stack_view *v, char *buf,
				 size_t len)
{
	if (!v->n) {
		snprintf(buf, len, "?");
		return buf;
	}
	const struct sym_frame *d = &v->f[v->display];
	frames_label(d, buf, len);
	if (d->python)
		return buf;
	for (uint32_t i = v->display + 1; i < v->n; i++) {
		if (!v->f[i].python)
			continue;
		char py[512];
		size_t n = strlen(buf);
		snprintf(buf + n, len - n, " <- %s", frames_label(&v->f[i], py, sizeof py));
		break;
	}
	return buf;
}

/* A native frame of the CPython interpreter itself: the executable of a
 * process that runs Python frames, or libpython. */
static int interpreter_frame(const struct sym_frame *f)
{
	if (f->exe)
		return 1;
	const char *base = f->module ? strrchr(f->module, '/') : NULL;
	base = base ? base + 1 : f->module;
	return base && strncmp(base, "libpython", 9) == 0;
}

uint32_t frames_python_leaf(struct sym *s, const struct frames_rules *r,
			    const uint64_t *words, uint32_t n)
{
	if (r && r->no_skip)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct sym_frame *chain;
		int k = sym_resolve(s, words[i], 1, &chain);
		if (k == 1 && chain[0].python)
			return i;
		for (int j = 0; j < k; j++) {
			enum tier t = plumbing_tier(r, &chain[j]);
			if (!(t == T_ENTRY || t == T_LIB || interpreter_frame(&chain[j])))
				return 0;
		}
	}
	return 0;
}

/* The display frame of a stack with Python frames, the innermost at p:
 * native code of an extension module (or a library it called) when that
 * allocated, past the allocator's and the interpreter's own frames;
 * else the innermost Python frame the user's rules do not skip. */
static uint32_t python_display(const struct frames_rules *r,
			       const struct stack_view *v, uint32_t p)
{
	for (uint32_t i = 0; i < p; i++) {
		const struct sym_frame *f = &v->f[i];
		enum tier t = plumbing_tier(r, f);
		if (t == T_ENTRY || t == T_LIB || interpreter_frame(f))
			continue;
		return i;
	}
	for (uint32_t i = p; i < v->n; i++)
		if (v->f[i].python && !frames_rules_match(r, &v->f[i]))
			return i;
	return p;
}

/* A frame of a shared library (not the executable, not unknown). */
static int library_frame(const struct sym_frame *f)
{
	return f->module && !f->exe;
}

uint32_t frames_display(const struct frames_rules *r,
			const struct stack_view *v)
{
	/* The first named frame of user code.  Without one: the first
	 * unnamed frame past the last allocator entry or wrapper (unnamed
	 * frames before a named wrapper are its plumbing: AllocSetAlloc under
	 * palloc in a stripped postgres); without one, for a stack entirely
	 * in the standard library (e.g. its start-up), the first library
	 * frame past the allocator's entry points; else the innermost.  So a
	 * stack with no name at all shows its innermost frame, the direct
	 * caller of the allocator.
	 *
	 * A named frame of a shared library outer to a frame of the
	 * executable called the program (an event loop running a callback:
	 * libevent's event_base_loop over a stripped memcached): it is never
	 * the display frame, and the unnamed frame inner to it, when there
	 * is one, is the allocation site. */
	const uint32_t none = UINT32_MAX;
	uint32_t past_entry = none, unnamed = none;
	int in_program = 0;     /* a frame of the executable is inner to i */
	if (!(r && r->no_skip))
		for (uint32_t i = 0; i < v->n; i++)
			if (v->f[i].python)
				return python_display(r, v, i);
	for (uint32_t i = 0; i < v->n; i++) {
		const struct sym_frame *f = &v->f[i];
		enum tier t = plumbing_tier(r, f);
		int caller_of_program = in_program && library_frame(f) &&
					!(r && r->no_skip);
		in_program |= f->exe;
		if (t == T_ENTRY) {
			unnamed = none;
			continue;
		}
		if (t == T_UNNAMED) {
			if (unnamed == none)
				unnamed = i;
			continue;
		}
		if (frames_is_noise(r, v, i))
			continue;
		if (caller_of_program && t == T_USER) {
			if (unnamed != none)
				return unnamed;
			continue;
		}
		if (t == T_USER)
			return i;
		if (past_entry == none)
			past_entry = i;
	}
	if (unnamed != none)
		return unnamed;
	return past_entry != none ? past_entry : 0;
}

void frames_view_free(struct stack_view *v)
{
	free(v->f);
	memset(v, 0, sizeof *v);
}
