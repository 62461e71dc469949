/*
 * pprof: the model as a gzip-compressed profile.proto (see pprof.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "hash.h"
#include "pb.h"
#include "pprof.h"
#include "util/hashmap.h"

/* profile.proto field numbers (github.com/google/pprof, proto/profile.proto). */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4, PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6,
	PROFILE_DROP_FRAMES = 7, PROFILE_KEEP_FRAMES = 8,
	PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUETYPE_TYPE = 1, VALUETYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
	LABEL_KEY = 1, LABEL_STR = 2,
	MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3,
	MAPPING_FILE_OFFSET = 4, MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6,
	MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
	LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3,
	LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1, LINE_LINE = 2,
	FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3,
	FUNCTION_FILENAME = 4,
};

struct builder {
	struct model *m;
	struct sym *sym;
	const struct frames_rules *rules;
	struct pb samples, locations, functions;
	/* string table: strings[i] owned; strmap: FNV-1a of the text ->
	 * index in strings. */
	char **strings;
	uint32_t nstrings, capstrings;
	struct hmap strmap;
	struct hmap locmap;     /* hmap_u64(address) -> location id */
	struct hmap funcmap;    /* hmap_u64((name, file) string ids) -> function id */
	uint32_t nlocs, nfuncs;
	uint32_t overflow;      /* location of frameless samples, or 0 */
	int oom;
};

struct str_key {
	const struct builder *b;
	const char *s;
};

static int str_eq(const void *ctx, uint32_t i)
{
	const struct str_key *k = ctx;
	return !strcmp(k->b->strings[i], k->s);
}

static int64_t intern(struct builder *b, const char *s)
{
	if (!s)
		s = "";
	uint64_t h = ym_fnv1a_str(YM_FNV1A_INIT, s);
	struct str_key k = { b, s };
	uint32_t i = hmap_find(&b->strmap, h, str_eq, &k);
	if (i != HMAP_NONE)
		return i;
	if (b->nstrings == b->capstrings) {
		uint32_t cap = b->capstrings ? b->capstrings * 2 : 256;
		char **p = realloc(b->strings, cap * sizeof *p);
		if (!p) {
			b->oom = 1;
			return 0;
		}
		b->strings = p;
		b->capstrings = cap;
	}
	char *copy = strdup(s);
	if (!copy || hmap_add(&b->strmap, h, b->nstrings) != 0) {
		free(copy);
		b->oom = 1;
		return 0;
	}
	b->strings[b->nstrings++] = copy;
	return b->nstrings - 1;
}

/* Mapping id (index + 1) of the module holding addr, or 0. */
static uint64_t mapping_of(const struct model *m, uint64_t addr)
{
	uint64_t best = 0;
	for (uint32_t i = 0; i < m->snap.nmodules; i++) {
		const struct ym_module *y = &m->snap.modules[i];
		if (addr >= y->lo && addr < y->hi) {
			best = i + 1;
			if (y->state == YM_MODULE_LOADED)
				break;   /* prefer what is mapped now */
		}
	}
	return best;
}

static uint64_t function_id(struct builder *b, const struct sym_frame *f)
{
	char fb[160];
	const char *name = f->function;
	if (!name) {
		sym_fallback(f, fb, sizeof fb);
		name = fb;
	}
	int64_t ni = intern(b, name), fi = intern(b, f->file);
	uint64_t h = hmap_u64(((uint64_t)ni << 32) | (uint64_t)fi);
	uint32_t id = hmap_find(&b->funcmap, h, NULL, NULL);
	if (id != HMAP_NONE)
		return id;
	if (hmap_add(&b->funcmap, h, b->nfuncs + 1) != 0) {
		b->oom = 1;
		return 0;
	}
	id = ++b->nfuncs;
	size_t mk = pb_open(&b->functions, PROFILE_FUNCTION);
	pb_uint(&b->functions, FUNCTION_ID, id);
	pb_int(&b->functions, FUNCTION_NAME, ni);
	pb_int(&b->functions, FUNCTION_SYSTEM_NAME, ni);
	pb_int(&b->functions, FUNCTION_FILENAME, fi);
	pb_close(&b->functions, mk);
	return id;
}

static uint64_t location_id(struct builder *b, uint64_t addr)
{
	uint64_t h = hmap_u64(addr);
	uint32_t id = hmap_find(&b->locmap, h, NULL, NULL);
	if (id != HMAP_NONE)
		return id;
	if (hmap_add(&b->locmap, h, b->nlocs + 1) != 0) {
		b->oom = 1;
		return 0;
	}
	id = ++b->nlocs;
	/* Resolve before writing: function_id appends to another buffer. */
	const struct sym_frame *chain;
	int n = sym_resolve(b->sym, addr, 1, &chain);
	uint64_t fids[64], lines[64];
	if (n > 64)
		n = 64;
	for (int j = 0; j < n; j++) {
		fids[j] = function_id(b, &chain[j]);
		lines[j] = chain[j].line > 0 ? (uint64_t)chain[j].line : 0;
	}
	struct pb *l = &b->locations;
	size_t mk = pb_open(l, PROFILE_LOCATION);
	pb_uint(l, LOCATION_ID, id);
	uint64_t map = mapping_of(b->m, addr);
	if (map)
		pb_uint(l, LOCATION_MAPPING_ID, map);
	if (!(addr & YM_PYFRAME))   /* a Python frame has a line, no address */
		pb_uint(l, LOCATION_ADDRESS, addr);
	for (int j = 0; j < n; j++) {
		size_t lm = pb_open(l, LOCATION_LINE);
		pb_uint(l, LINE_FUNCTION_ID, fids[j]);
		if (lines[j])
			pb_uint(l, LINE_LINE, lines[j]);
		pb_close(l, lm);
	}
	pb_close(l, mk);
	return id;
}

/* Samples that found the stack table full have no frames; pprof shows
 * them under one made-up location (id kept in b->overflow). */
static uint64_t overflow_location(struct builder *b)
{
	if (b->overflow)
		return b->overflow;
	struct sym_frame f;
	memset(&f, 0, sizeof f);
	f.function = "[stack table full]";
	uint64_t fid = function_id(b, &f);
	uint32_t id = ++b->nlocs;
	struct pb *l = &b->locations;
	size_t mk = pb_open(l, PROFILE_LOCATION);
	pb_uint(l, LOCATION_ID, id);
	size_t lm = pb_open(l, LOCATION_LINE);
	pb_uint(l, LINE_FUNCTION_ID, fid);
	pb_close(l, lm);
	pb_close(l, mk);
	b->overflow = id;
	return id;
}

static void value_type(struct pb *p, uint32_t field, int64_t type, int64_t unit)
{
	size_t mk = pb_open(p, field);
	pb_int(p, VALUETYPE_TYPE, type);
	pb_int(p, VALUETYPE_UNIT, unit);
	pb_close(p, mk);
}

static int64_t whole(double v)
{
	return v > 0 && v < 9.2e18 ? (int64_t)llround(v) : 0;
}

static void add_samples(struct builder *b, const uint32_t *order, uint32_t n)
{
	uint64_t *locs = malloc((YM_LIMIT_DEPTH + 1) * sizeof *locs);
	uint64_t *words = malloc((YM_LIMIT_DEPTH + 1) * sizeof *words);
	if (!locs || !words) {
		free(locs);
		free(words);
		b->oom = 1;
		return;
	}
	for (uint32_t k = 0; k < n && !b->oom; k++) {
		const struct model_stack *st = &b->m->stacks[order[k]];
		uint32_t depth = st->depth < YM_LIMIT_DEPTH ? st->depth : YM_LIMIT_DEPTH;
		/* Python frames in place of the evaluation loop's (sym.h). */
		depth = sym_splice(b->sym, st->frames, depth, words);
		/* A Python display frame is the leaf (as in folded stacks). */
		uint32_t from = frames_python_leaf(b->sym, b->rules, words, depth);
		depth -= from;
		for (uint32_t i = 0; i < depth; i++)
			locs[i] = location_id(b, words[from + i]);
		if (depth == 0) {
			locs[0] = overflow_location(b);
			depth = 1;
		}
		uint64_t v[4] = {
			(uint64_t)whole(st->alloc_objects), (uint64_t)whole(st->alloc_bytes),
			(uint64_t)whole(st->retained_objects), (uint64_t)whole(st->retained_bytes),
		};
		size_t mk = pb_open(&b->samples, PROFILE_SAMPLE);
		pb_packed(&b->samples, SAMPLE_LOCATION_ID, locs, depth);
		pb_packed(&b->samples, SAMPLE_VALUE, v, 4);
		/* kind: malloc or mmap (pprof -tagfocus kind=mmap). */
		size_t lk = pb_open(&b->samples, SAMPLE_LABEL);
		pb_int(&b->samples, LABEL_KEY, intern(b, "kind"));
		pb_int(&b->samples, LABEL_STR, intern(b, report_kind_name(st->kind)));
		pb_close(&b->samples, lk);
		pb_close(&b->samples, mk);
	}
	free(locs);
	free(words);
}

static void hex(char *out, const uint8_t *p, uint32_t n)
{
	static const char digits[] = "0123456789abcdef";
	for (uint32_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The whole profile, uncompressed, into out. */
static void build(struct builder *b, struct pb *out)
{
	struct model *m = b->m;
	intern(b, "");   /* string_table[0] must be "" */
	static const char *const types[4][2] = {
		{ "alloc_objects", "count" }, { "alloc_space", "bytes" },
		{ "inuse_objects", "count" }, { "inuse_space", "bytes" },
	};
	for (int i = 0; i < 4; i++)
		value_type(out, PROFILE_SAMPLE_TYPE, intern(b, types[i][0]),
			   intern(b, types[i][1]));

	uint32_t n;
	uint32_t *order = report_order(m, &n);
	if (!order) {
		b->oom = 1;
		return;
	}
	add_samples(b, order, n);
	free(order);
	pb_raw(out, b->samples.buf, b->samples.len);

	for (uint32_t i = 0; i < m->snap.nmodules; i++) {
		const struct ym_module *y = &m->snap.modules[i];
		char id[2 * sizeof y->build_id + 1];
		hex(id, y->build_id, y->build_id_len <= sizeof y->build_id ?
		    y->build_id_len : 0);
		size_t mk = pb_open(out, PROFILE_MAPPING);
		pb_uint(out, MAPPING_ID, i + 1);
		pb_uint(out, MAPPING_MEMORY_START, y->lo);
		pb_uint(out, MAPPING_MEMORY_LIMIT, y->hi);
		/* The lowest mapped address is the first PT_LOAD, which
		 * starts the file in every linker's output: offset 0 maps
		 * to lo - base in the ELF's own addresses. */
		pb_uint(out, MAPPING_FILE_OFFSET, y->lo >= y->base ? y->lo - y->base : 0);
		pb_int(out, MAPPING_FILENAME, intern(b, y->path));
		pb_int(out, MAPPING_BUILD_ID, intern(b, id));
		pb_uint(out, MAPPING_HAS_FUNCTIONS, 1);
		pb_uint(out, MAPPING_HAS_FILENAMES, 1);
		pb_uint(out, MAPPING_HAS_LINE_NUMBERS, 1);
		pb_uint(out, MAPPING_HAS_INLINE_FRAMES, 1);
		pb_close(out, mk);
	}
	pb_raw(out, b->locations.buf, b->locations.len);
	pb_raw(out, b->functions.buf, b->functions.len);

	char comment[700];
	snprintf(comment, sizeof comment, "ymtop %s: pid %ld (%s), state %s",
		 YM_VERSION, (long)model_pid(m), model_exe(m), model_state(m));
	int64_t ci = intern(b, comment);
	int64_t space = intern(b, "space"), bytes = intern(b, "bytes");
	int64_t dflt = intern(b, "inuse_space");
	/* The display-frame rules' allocator tier, as pprof's own: its -top
	 * and -traces then start at the wrappers' caller. */
	int64_t drop = 0, keep = 0;
	char *rx = frames_drop_regex(b->rules);
	if (rx) {
		drop = intern(b, rx);
		free(rx);
		rx = frames_keep_regex();
		keep = rx ? intern(b, rx) : 0;
		free(rx);
		if (!keep)
			drop = 0;       /* never drop start-up with its stacks */
	} else if (!(b->rules && b->rules->no_skip)) {
		b->oom = 1;
	}
	for (uint32_t i = 0; i < b->nstrings; i++)
		pb_string(out, PROFILE_STRING_TABLE, b->strings[i]);
	if (drop) {
		pb_int(out, PROFILE_DROP_FRAMES, drop);
		pb_int(out, PROFILE_KEEP_FRAMES, keep);
	}
	pb_int(out, PROFILE_TIME_NANOS, (int64_t)m->snap.taken_real_ns);
	pb_int(out, PROFILE_DURATION_NANOS, (int64_t)(model_uptime(m) * 1e9));
	value_type(out, PROFILE_PERIOD_TYPE, space, bytes);
	pb_int(out, PROFILE_PERIOD, (int64_t)model_sample_rate(m));
	pb_int(out, PROFILE_COMMENT, ci);
	pb_int(out, PROFILE_DEFAULT_SAMPLE_TYPE, dflt);
	if (b->samples.err || b->locations.err || b->functions.err)
		b->oom = 1;
}

/* gzip (RFC 1952) of p[0..n) to f. */
static int gzip_to(FILE *f, const uint8_t *p, size_t n)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		errno = ENOMEM;
		return -1;
	}
	uint8_t chunk[65536];
	z.next_in = (Bytef *)(uintptr_t)p;
	int rc = 0, zr;
	do {
		/* avail_in is 32 bits: feed at most 1 GiB at a time. */
		if (z.avail_in == 0 && n > 0) {
			uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
			z.avail_in = k;
			n -= k;
		}
		z.next_out = chunk;
		z.avail_out = sizeof chunk;
		zr = deflate(&z, n == 0 ? Z_FINISH : Z_NO_FLUSH);
		if (zr == Z_STREAM_ERROR) {
			errno = EIO;
			rc = -1;
			break;
		}
		size_t out = sizeof chunk - z.avail_out;
		if (out && fwrite(chunk, 1, out, f) != out) {
			rc = -1;
			break;
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	return rc;
}

int pprof_write(FILE *f, struct model *m, struct sym *s,
		const struct report_opts *o)
{
	struct builder b;
	memset(&b, 0, sizeof b);
	b.m = m;
	b.sym = s;
	b.rules = o ? o->rules : NULL;
	pb_init(&b.samples);
	pb_init(&b.locations);
	pb_init(&b.functions);
	struct pb out;
	pb_init(&out);
	build(&b, &out);
	int rc = -1;
	if (b.oom || out.err)
		errno = ENOMEM;
	else
		rc = gzip_to(f, out.buf, out.len);
	pb_free(&out);
	pb_free(&b.samples);
	pb_free(&b.locations);
	pb_free(&b.functions);
	for (uint32_t i = 0; i < b.nstrings; i++)
		free(b.strings[i]);
	free(b.strings);
	hmap_free(&b.strmap);
	hmap_free(&b.locmap);
	hmap_free(&b.funcmap);
	if (rc == 0 && ferror(f))
		rc = -1;
	return rc;
}
