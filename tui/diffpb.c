/*
 * diffpb: a pprof profile read into the JSON report's shape (diffpb.h).
 *
 * Decompressed whole (at most DIFF_MAX_FILE bytes), then read in two
 * passes over the Profile message: the first keeps the string table,
 * the sample types, the mappings, functions and locations (each line of
 * a location in one array) and sorts the three tables by id; the second
 * turns each sample into a stack.  A frame object is made once per
 * location line and shared by the stacks that hold it (jansson counts
 * the references), so a stack costs a pointer per frame; all stacks
 * together hold at most DIFF_MAX_REFS frames.
 *
 * profile.proto (github.com/google/pprof, proto/profile.proto): Profile
 * { 1 sample_type ValueType, 2 sample, 3 mapping, 4 location, 5
 * function, 6 string_table, 7 drop_frames, 8 keep_frames, 9 time_nanos
 * }, ValueType { 1 type, 2 unit }, Sample { 1 location_id, 2 value
 * (both packed or not), 3 label { 1 key, 2 str } }, Mapping { 1 id, 5
 * filename }, Location { 1 id, 2 mapping_id, 3 address, 4 line {
 * 1 function_id, 2 line } }, Function { 1 id, 2 name, 4 filename }.
 */
#include <inttypes.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "diff.h"
#include "diffpb.h"

struct rd {
	const uint8_t *p, *end;
};

struct str {
	const char *p;
	uint32_t len;
};

struct mapping {
	uint64_t id, file;
};

struct function {
	uint64_t id, name, file;
};

struct location {
	uint64_t id, mapping, address;
	uint32_t line0, nlines;   /* into pb.lines */
	json_t *frame;            /* without lines: its one frame, made at its first use */
};

struct line {
	uint64_t function;
	int64_t line;
	json_t *frame;            /* made at its first use */
};

struct pb {
	struct str *strs;
	struct mapping *maps;
	struct function *funcs;
	struct location *locs;
	struct line *lines;
	size_t nstrs, nmaps, nfuncs, nlocs, nlines;
	size_t cstrs, cmaps, cfuncs, clocs, clines;
	uint64_t *types;          /* sample_type[i].type, string indexes */
	size_t ntypes, ctypes;
	uint64_t drop, keep;      /* string indexes, 0: none */
	uint64_t comment;         /* the first comment's string index, 0: none */
	int64_t time_ns;
	regex_t drop_rx, keep_rx;
	int have_drop, have_keep;
	size_t refs;              /* frames of all stacks so far */
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3)))
static int fail(struct pb *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->err, b->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* A varint: at most 10 bytes, the tenth at most 1. */
static int varint(struct rd *r, uint64_t *v)
{
	uint64_t x = 0;
	for (int i = 0; i < 10; i++) {
		if (r->p >= r->end)
			return -1;
		uint8_t c = *r->p++;
		if (i == 9 && c > 1)
			return -1;
		x |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* The next field of r: its number and wire type; a varint's value in
 * *v, a length-delimited field's bytes in *sub (within r); fixed
 * fields skipped.  0, 1 at the end, -1 malformed. */
static int field(struct rd *r, uint32_t *num, int *wt, uint64_t *v, struct rd *sub)
{
	if (r->p >= r->end)
		return 1;
	uint64_t tag;
	if (varint(r, &tag) != 0 || tag >> 3 == 0 || tag >> 3 > 536870911u)
		return -1;
	*num = (uint32_t)(tag >> 3);
	*wt = (int)(tag & 7);
	*v = 0;
	switch (*wt) {
	case 0:
		return varint(r, v);
	case 1:
	case 5: {
		size_t n = *wt == 1 ? 8 : 4;
		if ((size_t)(r->end - r->p) < n)
			return -1;
		r->p += n;
		return 0;
	}
	case 2: {
		uint64_t n;
		if (varint(r, &n) != 0 || n > (uint64_t)(r->end - r->p))
			return -1;
		sub->p = r->p;
		sub->end = r->p + n;
		r->p += n;
		return 0;
	}
	default:   /* groups (3, 4) are not in profile.proto */
		return -1;
	}
}

/* Append one element of size sz to *v (n used, c allocated). */
static int grow(void **v, size_t *n, size_t *c, size_t sz)
{
	if (*n < *c)
		return 0;
	size_t nc = *c ? *c * 2 : 64;
	void *nv = realloc(*v, nc * sz);
	if (!nv)
		return -1;
	*v = nv;
	*c = nc;
	return 0;
}
#define PUSH(b, arr, n, c) grow((void **)&(b)->arr, &(b)->n, &(b)->c, sizeof *(b)->arr)

/* The fields of a small message as varints by number (1..nf), the rest
 * skipped: ValueType, Mapping, Function, Line, Label. */
static int small(struct rd m, uint64_t *f, uint32_t nf)
{
	memset(f, 0, nf * sizeof *f);
	uint32_t num;
	int wt, rc;
	uint64_t v;
	struct rd sub;
	while ((rc = field(&m, &num, &wt, &v, &sub)) == 0)
		if (wt == 0 && num <= nf)
			f[num - 1] = v;
	return rc < 0 ? -1 : 0;
}

static int location(struct pb *b, struct rd m)
{
	if (PUSH(b, locs, nlocs, clocs) != 0)
		return fail(b, "out of memory");
	struct location *l = &b->locs[b->nlocs++];
	memset(l, 0, sizeof *l);
	l->line0 = (uint32_t)b->nlines;
	uint32_t num;
	int wt, rc;
	uint64_t v;
	struct rd sub;
	while ((rc = field(&m, &num, &wt, &v, &sub)) == 0) {
		if (wt == 0 && num == 1)
			l->id = v;
		else if (wt == 0 && num == 2)
			l->mapping = v;
		else if (wt == 0 && num == 3)
			l->address = v;
		else if (wt == 2 && num == 4) {
			uint64_t f[2];
			if (small(sub, f, 2) != 0)
				return fail(b, "a location's line is malformed");
			if (b->nlines >= UINT32_MAX || PUSH(b, lines, nlines, clines) != 0)
				return fail(b, "out of memory");
			b->lines[b->nlines++] = (struct line){ f[0], (int64_t)f[1], NULL };
			l->nlines++;
		}
	}
	return rc < 0 ? fail(b, "a location is malformed") : 0;
}

/* Pass 1: everything but the samples. */
static int tables(struct pb *b, struct rd r)
{
	uint32_t num;
	int wt, rc;
	uint64_t v;
	struct rd sub;
	while ((rc = field(&r, &num, &wt, &v, &sub)) == 0) {
		uint64_t f[5];
		if (wt == 2 && num == 6) {
			if (sub.end - sub.p > (ptrdiff_t)DIFF_MAX_FILE ||
			    PUSH(b, strs, nstrs, cstrs) != 0)
				return fail(b, "out of memory");
			b->strs[b->nstrs++] = (struct str){ (const char *)sub.p,
							    (uint32_t)(sub.end - sub.p) };
		} else if (wt == 2 && num == 1) {
			if (small(sub, f, 2) != 0)
				return fail(b, "a sample type is malformed");
			if (PUSH(b, types, ntypes, ctypes) != 0)
				return fail(b, "out of memory");
			b->types[b->ntypes++] = f[0];
		} else if (wt == 2 && num == 3) {
			if (small(sub, f, 5) != 0)
				return fail(b, "a mapping is malformed");
			if (PUSH(b, maps, nmaps, cmaps) != 0)
				return fail(b, "out of memory");
			b->maps[b->nmaps++] = (struct mapping){ f[0], f[4] };
		} else if (wt == 2 && num == 5) {
			if (small(sub, f, 4) != 0)
				return fail(b, "a function is malformed");
			if (PUSH(b, funcs, nfuncs, cfuncs) != 0)
				return fail(b, "out of memory");
			b->funcs[b->nfuncs++] = (struct function){ f[0], f[1], f[3] };
		} else if (wt == 2 && num == 4) {
			if (location(b, sub) != 0)
				return -1;
		} else if (wt == 0 && num == 7) {
			b->drop = v;
		} else if (wt == 0 && num == 8) {
			b->keep = v;
		} else if (wt == 0 && num == 9) {
			b->time_ns = (int64_t)v;
		} else if (wt == 0 && num == 13 && !b->comment) {
			b->comment = v;
		}
	}
	if (rc < 0)
		return fail(b, "not a profile.proto (malformed at byte %zu)",
			    (size_t)(r.end - r.p));
	return 0;
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The entry of id in a table sorted by id (its first field), or NULL. */
static void *find(void *v, size_t n, size_t sz, uint64_t id)
{
	/* bsearch and qsort take no NULL table, even empty. */
	return id && n ? bsearch(&id, v, n, sz, by_id) : NULL;
}

/* String i, or NULL when out of range. */
static const struct str *string(const struct pb *b, uint64_t i)
{
	return i < b->nstrs ? &b->strs[i] : NULL;
}

static int str_is(const struct pb *b, uint64_t i, const char *s)
{
	const struct str *x = string(b, i);
	return x && x->len == strlen(s) && memcmp(x->p, s, x->len) == 0;
}

/* A JSON string of string i (bytes that are not UTF-8 as '?'). */
static json_t *jstr(const struct pb *b, uint64_t i)
{
	const struct str *x = string(b, i);
	if (!x)
		return json_string("");
	json_t *j = json_stringn(x->p, x->len);
	if (j)
		return j;
	char *c = malloc(x->len + 1u);
	if (!c)
		return NULL;
	for (uint32_t k = 0; k < x->len; k++)
		c[k] = (unsigned char)x->p[k] < 0x80 && x->p[k] ? x->p[k] : '?';
	j = json_stringn(c, x->len);
	free(c);
	return j;
}

/* A NUL-terminated copy of string i with RE2's "(?:" as ERE's "(". */
static char *ere(const struct pb *b, uint64_t i)
{
	const struct str *x = string(b, i);
	if (!x || !x->len)
		return NULL;
	char *c = malloc(x->len + 5u);
	if (!c)
		return NULL;
	size_t n = 0;
	c[n++] = '^';
	c[n++] = '(';
	for (uint32_t k = 0; k < x->len; k++) {
		if (k + 2 < x->len && !memcmp(x->p + k, "(?:", 3)) {
			c[n++] = '(';
			k += 2;
			continue;
		}
		if (!x->p[k]) {
			free(c);
			return NULL;
		}
		c[n++] = x->p[k];
	}
	c[n++] = ')';
	c[n++] = '$';
	c[n] = 0;
	return c;
}

static void regexes(struct pb *b)
{
	char *d = ere(b, b->drop), *k = ere(b, b->keep);
	b->have_drop = d && regcomp(&b->drop_rx, d, REG_EXTENDED | REG_NOSUB) == 0;
	b->have_keep = b->have_drop && k &&
		       regcomp(&b->keep_rx, k, REG_EXTENDED | REG_NOSUB) == 0;
	free(d);
	free(k);
}

/* The frame of line ln of location l, or of l without lines (made
 * once, shared). */
static json_t *frame(struct pb *b, struct location *l, struct line *ln)
{
	json_t **cache = ln ? &ln->frame : &l->frame;
	if (*cache)
		return *cache;
	const struct mapping *mp = find(b->maps, b->nmaps, sizeof *b->maps, l->mapping);
	const struct function *fn = ln ? find(b->funcs, b->nfuncs, sizeof *b->funcs,
					      ln->function) : NULL;
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "module", mp ? jstr(b, mp->file) : json_string(""));
	if (fn) {
		json_object_set_new(o, "function", jstr(b, fn->name));
		json_object_set_new(o, "file", jstr(b, fn->file));
	} else {   /* no symbol: named by its address, as a report's fallback */
		char a[32];
		snprintf(a, sizeof a, "0x%" PRIx64, l->address);
		json_object_set_new(o, "function", json_string(a));
		json_object_set_new(o, "file", json_string(""));
	}
	json_object_set_new(o, "line", json_integer(ln && ln->line > 0 ? ln->line : 0));
	*cache = o;
	return o;
}

/* The display frame: past the outermost frame pprof's drop_frames
 * drops (and keep_frames does not keep), as pprof shows the stack. */
static size_t display(const struct pb *b, const json_t *frames)
{
	if (!b->have_drop)
		return 0;
	size_t n = json_array_size(frames), d = 0;
	for (size_t i = 0; i < n; i++) {
		const char *fn = json_string_value(json_object_get(json_array_get(frames, i),
								   "function"));
		if (fn && regexec(&b->drop_rx, fn, 0, NULL, 0) == 0 &&
		    !(b->have_keep && regexec(&b->keep_rx, fn, 0, NULL, 0) == 0))
			d = i + 1;
	}
	return d < n ? d : 0;
}

/* One sample as a stack appended to stacks. */
static int sample(struct pb *b, struct rd m, json_t *stacks, size_t inuse, size_t alloc)
{
	uint64_t *locs = NULL;
	size_t nl = 0, cl = 0, nv = 0;
	int64_t ret = 0, all = 0;
	uint64_t kind = 0;
	uint32_t num;
	int wt, rc;
	uint64_t v;
	struct rd sub;
	while ((rc = field(&m, &num, &wt, &v, &sub)) == 0) {
		if (num == 1 && (wt == 0 || wt == 2)) {
			struct rd pk = wt == 2 ? sub : (struct rd){ NULL, NULL };
			while (wt == 0 || pk.p < pk.end) {
				if (wt == 2 && varint(&pk, &v) != 0)
					goto bad;
				if (nl >= DIFF_MAX_FRAMES) {
					free(locs);
					return fail(b, "sample %zu has more than %u frames",
						    json_array_size(stacks), DIFF_MAX_FRAMES);
				}
				if (grow((void **)&locs, &nl, &cl, sizeof *locs) != 0) {
					free(locs);
					return fail(b, "out of memory");
				}
				locs[nl++] = v;
				if (wt == 0)
					break;
			}
		} else if (num == 2 && (wt == 0 || wt == 2)) {
			struct rd pk = wt == 2 ? sub : (struct rd){ NULL, NULL };
			while (wt == 0 || pk.p < pk.end) {
				if (wt == 2 && varint(&pk, &v) != 0)
					goto bad;
				if ((int64_t)v < 0) {
					free(locs);
					return fail(b, "sample %zu has a negative value",
						    json_array_size(stacks));
				}
				if (nv == inuse)
					ret = (int64_t)v;
				if (nv == alloc)
					all = (int64_t)v;
				nv++;
				if (wt == 0)
					break;
			}
		} else if (num == 3 && wt == 2) {
			uint64_t f[2];
			if (small(sub, f, 2) != 0)
				goto bad;
			if (str_is(b, f[0], "kind") && string(b, f[1]))
				kind = f[1];
		}
	}
	if (rc < 0)
		goto bad;
	if (nv != b->ntypes) {
		free(locs);
		return fail(b, "sample %zu has %zu values for %zu sample types",
			    json_array_size(stacks), nv, b->ntypes);
	}
	json_t *st = json_object(), *frames = json_array();
	if (!st || !frames) {
		json_decref(st);
		json_decref(frames);
		goto oom;
	}
	if (json_object_set_new(st, "frames", frames) != 0) {   /* frames freed */
		json_decref(st);
		goto oom;
	}
	for (size_t i = 0; i < nl; i++) {
		struct location *l = find(b->locs, b->nlocs, sizeof *b->locs, locs[i]);
		if (!l) {
			uint64_t id = locs[i];
			json_decref(st);
			free(locs);
			return fail(b, "sample %zu refers to location %" PRIu64
				    ", which the profile lacks",
				    json_array_size(stacks), id);
		}
		for (uint32_t k = 0; k < (l->nlines ? l->nlines : 1); k++) {
			if (json_array_size(frames) >= DIFF_MAX_FRAMES ||
			    ++b->refs > DIFF_MAX_REFS) {
				json_decref(st);
				free(locs);
				return fail(b, "more than %u frames in a stack or %u in all",
					    DIFF_MAX_FRAMES, DIFF_MAX_REFS);
			}
			json_t *fr = frame(b, l, l->nlines ? &b->lines[l->line0 + k] : NULL);
			if (!fr || json_array_append(frames, fr) != 0) {
				json_decref(st);
				goto oom;
			}
		}
	}
	free(locs);
	json_object_set_new(st, "kind", kind ? jstr(b, kind) : json_string("malloc"));
	json_object_set_new(st, "retained_bytes", json_integer(ret));
	json_object_set_new(st, "allocated_bytes", json_integer(all));
	json_object_set_new(st, "display_frame", json_integer((json_int_t)display(b, frames)));
	if (json_array_append_new(stacks, st) != 0)
		return fail(b, "out of memory");
	return 0;
bad:
	free(locs);
	return fail(b, "sample %zu is malformed", json_array_size(stacks));
oom:
	free(locs);
	return fail(b, "out of memory");
}

/* Pass 2: the samples. */
static int samples(struct pb *b, struct rd r, json_t *stacks)
{
	size_t inuse = SIZE_MAX, alloc = SIZE_MAX;
	for (size_t i = 0; i < b->ntypes; i++) {
		if (str_is(b, b->types[i], "inuse_space"))
			inuse = i;
		else if (str_is(b, b->types[i], "alloc_space"))
			alloc = i;
	}
	if (inuse == SIZE_MAX)
		return fail(b, "no inuse_space sample type: not a heap profile");
	uint32_t num;
	int wt, rc;
	uint64_t v;
	struct rd sub;
	while ((rc = field(&r, &num, &wt, &v, &sub)) == 0) {
		if (num != 2 || wt != 2)
			continue;
		if (json_array_size(stacks) >= DIFF_MAX_STACKS)
			return fail(b, "more than %u stacks", DIFF_MAX_STACKS);
		if (sample(b, sub, stacks, inuse, alloc) != 0)
			return -1;
	}
	return rc < 0 ? fail(b, "not a profile.proto") : 0;
}

/* buf inflated (gzip) into a new buffer of at most DIFF_MAX_FILE bytes. */
static int inflate_all(struct pb *b, const unsigned char *buf, size_t len,
		       unsigned char **out, size_t *outlen)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return fail(b, "out of memory");
	size_t cap = len * 4 + 4096 < DIFF_MAX_FILE ? len * 4 + 4096 : DIFF_MAX_FILE;
	unsigned char *o = malloc(cap + 1);
	int rc = -1;
	if (!o) {
		fail(b, "out of memory");
		goto out;
	}
	z.next_in = (unsigned char *)(uintptr_t)buf;
	size_t left = len;
	for (;;) {
		if (z.avail_in == 0) {
			uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
			z.avail_in = chunk;
			left -= chunk;
		}
		if (z.total_out == cap) {
			if (cap >= DIFF_MAX_FILE) {
				fail(b, "decompresses to more than %u MiB", DIFF_MAX_FILE >> 20);
				goto out;
			}
			size_t nc = cap * 2 < DIFF_MAX_FILE ? cap * 2 : DIFF_MAX_FILE;
			unsigned char *no = realloc(o, nc + 1);
			if (!no) {
				fail(b, "out of memory");
				goto out;
			}
			o = no;
			cap = nc;
		}
		z.next_out = o + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out < (1u << 30) ? cap - z.total_out : (1u << 30));
		int r = inflate(&z, Z_NO_FLUSH);
		if (r == Z_STREAM_END)
			break;
		if (r == Z_BUF_ERROR && z.avail_in == 0 && left == 0) {
			fail(b, "a gzip file cut short");
			goto out;
		}
		if (r != Z_OK && r != Z_BUF_ERROR) {
			fail(b, "not a gzip file ymtop diff reads (%s)", z.msg ? z.msg : "zlib error");
			goto out;
		}
	}
	*out = o;
	*outlen = z.total_out;
	o = NULL;
	rc = 0;
out:
	free(o);
	inflateEnd(&z);
	return rc;
}

int diffpb_is_profile(const unsigned char *buf, size_t len)
{
	return (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) ||
	       (len >= 1 && buf[0] == 0x0a);
}

int diffpb_read(const unsigned char *buf, size_t len, json_t **root,
		char *err, size_t errlen)
{
	struct pb b;
	memset(&b, 0, sizeof b);
	b.err = err;
	b.errlen = errlen;
	unsigned char *raw = NULL;
	size_t rawlen = len;
	json_t *r = NULL;
	int rc = -1;
	if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
		if (inflate_all(&b, buf, len, &raw, &rawlen) != 0)
			goto out;
		buf = raw;
	}
	struct rd all = { buf, buf + rawlen };
	if (tables(&b, all) != 0)
		goto out;
	if (b.nstrs == 0 || b.strs[0].len != 0) {
		fail(&b, "not a profile.proto (its string table does not start with \"\")");
		goto out;
	}
	if (b.nmaps)
		qsort(b.maps, b.nmaps, sizeof *b.maps, by_id);
	if (b.nfuncs)
		qsort(b.funcs, b.nfuncs, sizeof *b.funcs, by_id);
	if (b.nlocs)
		qsort(b.locs, b.nlocs, sizeof *b.locs, by_id);
	regexes(&b);
	r = json_object();
	json_t *stacks = json_array();
	if (!r || !stacks) {
		json_decref(stacks);
		fail(&b, "out of memory");
		goto out;
	}
	json_object_set_new(r, "stacks", stacks);
	json_object_set_new(r, "report_version", json_integer(1));
	if (samples(&b, all, stacks) != 0)
		goto out;
	/* The name and pid: ymtop's comment ("ymtop V: pid N (exe), state
	 * S"), else the first mapping's file (the executable, in ymtop's and
	 * Go's profiles). */
	const struct str *c = string(&b, b.comment);
	char cbuf[768];
	const struct str *name = b.nmaps ? string(&b, b.maps[0].file) : NULL;
	int named = 0;
	if (c && c->len < sizeof cbuf && c->len > 6 && !memcmp(c->p, "ymtop ", 6) &&
	    !memchr(c->p, 0, c->len)) {
		memcpy(cbuf, c->p, c->len);
		cbuf[c->len] = 0;
		long long pid;
		int at = 0;
		char *open_ = strstr(cbuf, ": pid "), *close_ = strrchr(cbuf, ')');
		if (open_ && sscanf(open_, ": pid %lld (%n", &pid, &at) == 1 && at &&
		    close_ > open_ + at && pid > 0) {
			json_object_set_new(r, "pid", json_integer(pid));
			json_object_set_new(r, "name", json_stringn(open_ + at,
				(size_t)(close_ - (open_ + at))));
			named = json_object_get(r, "name") != NULL;
		}
	}
	if (!named && name && name->len) {
		const char *base = memrchr(name->p, '/', name->len);
		base = base ? base + 1 : name->p;
		json_object_set_new(r, "name", json_stringn(base, (size_t)(name->p + name->len - base)));
	} else if (!named) {
		json_object_set_new(r, "name", json_string("pprof"));
	}
	if (b.time_ns > 0)
		json_object_set_new(r, "time", json_real((double)b.time_ns / 1e9));
	*root = r;
	r = NULL;
	rc = 0;
out:
	json_decref(r);
	for (size_t i = 0; i < b.nlines; i++)
		json_decref(b.lines[i].frame);
	for (size_t i = 0; i < b.nlocs; i++)
		json_decref(b.locs[i].frame);
	if (b.have_drop)
		regfree(&b.drop_rx);
	if (b.have_keep)
		regfree(&b.keep_rx);
	free(b.strs);
	free(b.maps);
	free(b.funcs);
	free(b.locs);
	free(b.lines);
	free(b.types);
	free(raw);
	return rc;
}
