/*
 * python: the allocating thread's CPython frames (python.h).
 */
#include "python.h"

#include <link.h>
#include <stddef.h>
#include <string.h>

#include "backing.h"
#include "config.h"
#include "loader.h"
#include "symbols.h"

/* Offsets into the interpreter's objects, per minor version. */
struct pylayout {
	uint32_t version_lo, version_hi;  /* Py_Version range, [lo, hi) */
	int32_t  tstate_cframe;      /* -1: frames hang off the tstate */
	uint32_t cframe_frame;       /* in the cframe, or the tstate */
	uint32_t frame_code, frame_previous, frame_instr, frame_owner;
	int32_t  frame_is_entry;     /* 3.11; -1: entries are CSTACK shims */
	uint32_t code_filename, code_qualname, code_linetable;
	uint32_t code_firstlineno, code_firsttraceable, code_adaptive;
	uint32_t ascii_size, compact_size;
};

#define OWNED_BY_GENERATOR 1u
#define OWNED_BY_CSTACK    3u
#define OB_TYPE            8u    /* PyObject: ob_refcnt, ob_type */
#define TP_BASICSIZE       32u   /* PyTypeObject: var head, tp_name */
#define VAR_SIZE           16u   /* PyVarObject's ob_size; str's length */
#define UNICODE_STATE      32u
#define BYTES_SVAL         32u
#define COMPACT_UTF8       (-8)  /* from compact_size: PyCompactUnicodeObject.utf8 */

/* 3.11 from 3.11.1 on: 3.11.0 could leave a frame current while it was
 * torn down (CPython gh-99729), and a walk during a __del__ run by that
 * teardown would read a freed code object. */
static const struct pylayout layouts[] = {
	{ 0x030b01f0u, 0x030c0000u, 56, 8, 32, 48, 56, 69, 68,
	  112, 128, 136, 72, 168, 184, 48, 72 },
	{ 0x030c0000u, 0x030d0000u, 56, 0, 0, 8, 56, 70, -1,
	  112, 128, 136, 68, 176, 192, 40, 56 },
	{ 0x030d0000u, 0x030e0000u, -1, 72, 0, 8, 56, 70, -1,
	  112, 128, 136, 68, 184, 200, 40, 56 },
};

/* The first words of 3.13's _Py_DebugOffsets (at the start of
 * _PyRuntime) this file checks its layout against. */
struct debug_offsets_313 {
	char     cookie[8];               /* "xdebugpy" */
	uint64_t version;                 /* PY_VERSION_HEX */
	uint64_t free_threaded;
	uint64_t runtime_state[3];
	uint64_t interpreter_state[13];
	uint64_t ts_size, ts_prev, ts_next, ts_interp, ts_current_frame;
	uint64_t ts_thread_id, ts_native_thread_id, ts_datastack, ts_status;
	uint64_t fr_size, fr_previous, fr_executable, fr_instr_ptr;
	uint64_t fr_localsplus, fr_owner;
	uint64_t co_size, co_filename, co_name, co_qualname, co_linetable;
	uint64_t co_firstlineno, co_argcount, co_localsplusnames;
	uint64_t co_localspluskinds, co_code_adaptive;
};

typedef void *(*tstate_fn)(void);

static const struct pylayout *L;     /* NULL: no frames taken */
/* The pymalloc hook's trigger (python.h).  hook_state (YM_PYHOOK_*)
 * outlives segments: a forked child inherits the wrapper and its state. */
struct python_mem python_mem;
static int (*is_initialized)(void);
static int (*add_pending)(int (*)(void *), void *);
static int (*installer)(void *);
static uint32_t hook_state;
static uint32_t outstanding;   /* pending calls queued, not yet returned */
static void rediscover(void);
static tstate_fn this_tstate;
static uintptr_t code_type, str_type, bytes_type;
static struct ym_header *py_hdr;
static struct ym_pycode *codes;
static uint32_t codes_cap;

/* The private index of copied code objects: open addressing, twice the
 * section's capacity, a slot published by a release store of its addr
 * after its other words.  Lookups take no lock; inserts take `lock`
 * (bounded spin: a holder stopped in a fork parent costs a frame). */
#define INDEX_SLOTS (2u * YM_DEFAULT_MAX_PYCODES)
struct code_slot {
	uintptr_t addr, linetable, qualname, filename;
	uint32_t idx, reserved;
};
static struct code_slot index_[INDEX_SLOTS];
static uint32_t lock;

#define CODE_NONE    YM_PYCODE_NONE
#define CODE_UNKNOWN YM_PYCODE_UNKNOWN
#define MAX_PY       128u          /* frames read a sample, at most */

struct find {
	const char *const *names;
	void **out;
	int n;
};

/* Any defined symbol's address (sym_lookup gives functions only). */
static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find *f = arg;
	int missing = 0;
	for (int k = 0; k < f->n; k++) {
		if (!f->out[k])
			f->out[k] = sym_lookup_any(info, f->names[k]);
		missing += !f->out[k];
	}
	return missing == 0;
}

static uintptr_t load(uintptr_t a)
{
	return *(const uintptr_t *)a;
}

static uint32_t load32(uintptr_t a)
{
	return *(const uint32_t *)a;
}

static int layout_checks(const struct pylayout *l, void *code_type_p,
			 void *runtime)
{
	if (load((uintptr_t)code_type_p + TP_BASICSIZE) != l->code_adaptive)
		return 0;
	if (l->version_lo < 0x030d0000u)
		return 1;
	const struct debug_offsets_313 *d = runtime;
	return d && memcmp(d->cookie, "xdebugpy", 8) == 0 &&
	       (d->version >> 16) == 0x030d && d->free_threaded == 0 &&
	       d->ts_current_frame == l->cframe_frame &&
	       d->fr_previous == l->frame_previous &&
	       d->fr_executable == l->frame_code &&
	       d->fr_instr_ptr == l->frame_instr &&
	       d->fr_owner == l->frame_owner &&
	       d->co_filename == l->code_filename &&
	       d->co_qualname == l->code_qualname &&
	       d->co_linetable == l->code_linetable &&
	       d->co_firstlineno == l->code_firstlineno &&
	       d->co_code_adaptive == l->code_adaptive;
}

/* The interpreter's allocator functions (names[6..12) of
 * python_map_segment): the hook waits for the interpreter's start when
 * all are there and an installer is registered.  fn[6], the name of the
 * allocators in force (3.8-3.13, an internal function), may be missing. */
static void hook_prepare(void *const *fn)
{
	for (int k = 0; k < 6; k++)
		if (!fn[k] || fn[k] == SYM_OTHER)
			return;
	if (!installer || __atomic_load_n(&hook_state, __ATOMIC_ACQUIRE))
		return;   /* none, or chosen already (a segment after fork) */
	if (!agent_cfg.pymalloc) {   /* YM_PYMALLOC=0 */
		__atomic_store_n(&hook_state, YM_PYHOOK_OFF, __ATOMIC_RELEASE);
		return;
	}
	is_initialized = (int (*)(void))fn[0];
	add_pending = (int (*)(int (*)(void *), void *))fn[1];
	python_mem.get = (void (*)(int, void *))fn[2];
	python_mem.set = (void (*)(int, void *))fn[3];
	python_mem.get_arena = (void (*)(void *))fn[4];
	python_mem.set_arena = (void (*)(void *))fn[5];
	python_mem.name = fn[6] && fn[6] != SYM_OTHER ?
		(const char *(*)(void))fn[6] : NULL;
	__atomic_store_n(&hook_state, YM_PYHOOK_WAITING, __ATOMIC_RELEASE);
}

void python_hook_register(int (*install)(void *))
{
	installer = install;
}

void python_hook_set(uint32_t state)
{
	if (state)
		__atomic_store_n(&hook_state, state, __ATOMIC_RELEASE);
	if (py_hdr)
		__atomic_store_n(&py_hdr->py_hook, state ? state : YM_PYHOOK_NONE,
				 __ATOMIC_RELEASE);
}

int python_hook_cas(uint32_t from, uint32_t to)
{
	if (!__atomic_compare_exchange_n(&hook_state, &from, to, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0;
	python_hook_set(to);
	return 1;
}

uint32_t python_hook_state(void)
{
	return __atomic_load_n(&hook_state, __ATOMIC_ACQUIRE);
}

int python_pending(int (*fn)(void *))
{
	if (!add_pending)
		return -1;
	__atomic_fetch_add(&outstanding, 1, __ATOMIC_ACQ_REL);
	if (add_pending(fn, NULL) == 0)
		return 0;
	__atomic_fetch_sub(&outstanding, 1, __ATOMIC_ACQ_REL);
	return -1;
}

void python_pending_done(void)
{
	__atomic_fetch_sub(&outstanding, 1, __ATOMIC_ACQ_REL);
}

uint32_t python_pending_outstanding(void)
{
	return __atomic_load_n(&outstanding, __ATOMIC_ACQUIRE);
}

void python_poll(void)
{
	if (unlikely(py_hdr && !__atomic_load_n(&L, __ATOMIC_RELAXED) &&
		     __atomic_load_n(&py_hdr->py_state, __ATOMIC_RELAXED) == YM_PY_NONE))
		rediscover();
	if (likely(__atomic_load_n(&hook_state, __ATOMIC_RELAXED) !=
		   YM_PYHOOK_WAITING) || !is_initialized() ||
	    !python_hook_cas(YM_PYHOOK_WAITING, YM_PYHOOK_PENDING))
		return;
	/* The queue is full (32 calls, signal handlers' too): try again at
	 * a later sample. */
	if (python_pending(installer) != 0)
		python_hook_cas(YM_PYHOOK_PENDING, YM_PYHOOK_WAITING);
}

static void discover(uint8_t *base, struct ym_header *h);
static uint8_t *py_base;
static unsigned long long seen_adds;   /* the loader's at the last look */
static uint32_t discovering;

void python_map_segment(uint8_t *base, struct ym_header *h)
{
	unsigned long long v[2];
	loader_counters(v);
	__atomic_store_n(&seen_adds, v[0], __ATOMIC_RELAXED);
	py_base = base;
	discover(base, h);
}

/* 1 when no interpreter was loaded, or the one loaded is ready to be
 * called: the sample may come from inside the dlopen that maps it, before
 * its relocation (its functions would jump through an empty GOT).
 * glibc's _dl_find_object finds an object once dlopen has relocated it;
 * without it (glibc before 2.35), the loader's list must say
 * RT_CONSISTENT. */
static int interpreter_ready(void)
{
	static const char *const names[] = { "PyGILState_GetThisThreadState" };
	void *out[1] = { 0 };
	struct find f = { names, out, 1 };
	loader_iterate(find_cb, &f);
	if (!out[0] || out[0] == SYM_OTHER)
		return 1;
	struct agent_object o;
	const struct r_debug *r = agent_r_debug();
	return agent_find_object(out[0], &o) == 0 && (!r || r->r_state == RT_CONSISTENT);
}

/* An interpreter loaded after the segment was made (libpython dlopen'ed
 * by an embedding program): looked for again when the loader has added
 * objects since, on the sampled path (where the loader's list may be
 * walked), by one thread at a time. */
static void rediscover(void)
{
	unsigned long long v[2];
	loader_counters(v);
	if (v[0] == __atomic_load_n(&seen_adds, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&discovering, 1, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&seen_adds, v[0], __ATOMIC_RELAXED);
	if (py_hdr && __atomic_load_n(&py_hdr->py_state, __ATOMIC_ACQUIRE) == YM_PY_NONE &&
	    !interpreter_ready())
		__atomic_store_n(&seen_adds, 0, __ATOMIC_RELAXED);   /* later */
	else if (py_hdr && __atomic_load_n(&py_hdr->py_state, __ATOMIC_ACQUIRE) == YM_PY_NONE)
		discover(py_base, py_hdr);
	__atomic_store_n(&discovering, 0, __ATOMIC_RELEASE);
}

static void discover(uint8_t *base, struct ym_header *h)
{
	static const char *const names[] = {
		"Py_Version", "PyGILState_GetThisThreadState", "PyCode_Type",
		"PyUnicode_Type", "PyBytes_Type", "_PyRuntime",
		"Py_IsInitialized", "Py_AddPendingCall", "PyMem_GetAllocator",
		"PyMem_SetAllocator", "PyObject_GetArenaAllocator",
		"PyObject_SetArenaAllocator", "_PyMem_GetCurrentAllocatorName",
	};
	void *out[13] = { 0 };
	struct find f = { names, out, 13 };
	__atomic_store_n(&L, NULL, __ATOMIC_RELAXED);
	memset(index_, 0, sizeof index_);
	__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
	py_hdr = h;
	codes = NULL;
	codes_cap = 0;
	if (!h->py_codes.capacity)
		return;
	loader_iterate(find_cb, &f);
	/* No gilstate function: no CPython.  Py_Version exists from 3.11
	 * on: an interpreter without it is older (version 0: "before
	 * 3.11"), whose layouts this file does not know. */
	if (!out[1] || out[1] == SYM_OTHER)
		return;
	uint32_t v = out[0] && out[0] != SYM_OTHER ? load32((uintptr_t)out[0]) : 0;
	h->py_version = v;
	uint32_t state = YM_PY_UNKNOWN;
	const struct pylayout *l = NULL;
	for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
		if (v >= layouts[i].version_lo && v < layouts[i].version_hi)
			l = &layouts[i];
	if (l) {
		state = YM_PY_MISMATCH;
		if (out[2] && out[3] && out[4] && out[2] != SYM_OTHER &&
		    out[3] != SYM_OTHER && out[4] != SYM_OTHER &&
		    layout_checks(l, out[2], out[5] == SYM_OTHER ? NULL : out[5]))
			state = YM_PY_FRAMES;
	}
	if (state == YM_PY_FRAMES) {
		this_tstate = (tstate_fn)out[1];
		code_type = (uintptr_t)out[2];
		str_type = (uintptr_t)out[3];
		bytes_type = (uintptr_t)out[4];
		codes = (struct ym_pycode *)(void *)(base + h->py_codes.offset);
		codes_cap = h->py_codes.capacity;
		__atomic_store_n(&L, l, __ATOMIC_RELEASE);
		hook_prepare(out + 6);
	}
	__atomic_store_n(&h->py_state, state, __ATOMIC_RELEASE);
	python_hook_set(__atomic_load_n(&hook_state, __ATOMIC_ACQUIRE));
	python_poll();
}

/* ---- the line table (CPython 3.11-3.13 "location table") ---- */

static const uint8_t *varint(const uint8_t *p, const uint8_t *end,
			     uint32_t *v)
{
	uint32_t r = 0, shift = 0;
	while (p < end) {
		uint8_t b = *p++;
		if (shift < 32)
			r |= (uint32_t)(b & 63) << shift;
		shift += 6;
		if (!(b & 64)) {
			*v = r;
			return p;
		}
	}
	return NULL;
}

/* The line of code unit `at`, 0 when none or the table is malformed. */
static uint32_t table_line(const uint8_t *p, const uint8_t *end,
			   int64_t first, int64_t at)
{
	int64_t line = first, pos = 0;
	while (p && p < end) {
		uint8_t b = *p++;
		if (!(b & 0x80))
			return 0;
		uint32_t code = (b >> 3) & 15, n = (b & 7) + 1u, u = 0, skip;
		int none = 0;
		int64_t delta = 0;
		if (code == 15) {
			none = 1;
			skip = 0;
		} else if (code == 14 || code == 13) {
			p = varint(p, end, &u);
			delta = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
			skip = code == 14 ? 3 : 0;
		} else if (code >= 10) {
			delta = code - 10;
			p += 2;
			skip = 0;
		} else {
			p += 1;
			skip = 0;
		}
		for (uint32_t k = 0; k < skip && p; k++)
			p = varint(p, end, &u);
		line += delta;
		if (at < pos + n)
			return none || line <= 0 || line > INT32_MAX ? 0 : (uint32_t)line;
		pos += n;
	}
	return 0;
}

/* ---- names ---- */

static size_t put_utf8(char *out, size_t n, size_t cap, uint32_t c)
{
	uint8_t b[4];
	size_t k;
	if (c < 0x80) {
		b[0] = (uint8_t)c;
		k = 1;
	} else if (c < 0x800) {
		b[0] = (uint8_t)(0xc0 | c >> 6);
		b[1] = (uint8_t)(0x80 | (c & 63));
		k = 2;
	} else if (c < 0x10000) {
		b[0] = (uint8_t)(0xe0 | c >> 12);
		b[1] = (uint8_t)(0x80 | ((c >> 6) & 63));
		b[2] = (uint8_t)(0x80 | (c & 63));
		k = 3;
	} else if (c < 0x110000) {
		b[0] = (uint8_t)(0xf0 | c >> 18);
		b[1] = (uint8_t)(0x80 | ((c >> 12) & 63));
		b[2] = (uint8_t)(0x80 | ((c >> 6) & 63));
		b[3] = (uint8_t)(0x80 | (c & 63));
		k = 4;
	} else {
		b[0] = '?';
		k = 1;
	}
	if (n + k >= cap)
		return n;
	memcpy(out + n, b, k);
	return n + k;
}

/* A compact str's text as UTF-8 into out (cap bytes, NUL-terminated). */
static void copy_str(uintptr_t s, char *out, size_t cap)
{
	out[0] = 0;
	if (!s || load(s + OB_TYPE) != str_type)
		return;
	uint32_t st = load32(s + UNICODE_STATE);
	uint32_t kind = (st >> 2) & 7, compact = (st >> 5) & 1, ascii = (st >> 6) & 1;
	uint64_t len = load(s + VAR_SIZE);
	if (!compact || (kind != 1 && kind != 2 && kind != 4))
		return;
	const uint8_t *d = (const uint8_t *)(s + (ascii ? L->ascii_size : L->compact_size));
	size_t n = 0;
	for (uint64_t i = 0; i < len && n + 1 < cap; i++) {
		uint32_t c = kind == 1 ? d[i] :
			     kind == 2 ? ((const uint16_t *)(const void *)d)[i] :
			     ((const uint32_t *)(const void *)d)[i];
		size_t m = put_utf8(out, n, cap, c);
		if (m == n)
			break;
		n = m;
	}
	out[n] = 0;
}

/* ---- the code table ---- */

static uint32_t slot_of(uintptr_t code)
{
	return (uint32_t)((code >> 4) * 0x9e3779b97f4a7c15ull >> 40) % INDEX_SLOTS;
}

/* Record index of the code object (checked to be one), CODE_UNKNOWN when
 * it cannot get one.  Keyed by the object's address and by its line
 * table, name and file objects: a code object made where a freed one was
 * has other ones, so it never takes the freed one's record. */
static uint32_t code_index(uintptr_t code, uintptr_t linetable, uintptr_t qualname,
			   uintptr_t filename)
{
	uint32_t s = slot_of(code);
	for (uint32_t k = 0; k < INDEX_SLOTS; k++) {
		struct code_slot *e = &index_[(s + k) % INDEX_SLOTS];
		uintptr_t a = __atomic_load_n(&e->addr, __ATOMIC_ACQUIRE);
		if (!a)
			break;
		if (a == code && e->linetable == linetable && e->qualname == qualname &&
		    e->filename == filename)
			return e->idx;
	}
	/* Not there: insert under the lock (searching again: another
	 * thread may have inserted it meanwhile). */
	uint32_t zero = 0;
	uint32_t i;
	for (i = 0; i < AGENT_SPINS_SHORT; i++) {
		if (__atomic_compare_exchange_n(&lock, &zero, 1, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
		zero = 0;
		agent_backoff(i);
	}
	if (i == AGENT_SPINS_SHORT)
		return CODE_UNKNOWN;
	uint32_t found = CODE_UNKNOWN;
	struct code_slot *e = NULL;
	for (uint32_t k = 0; k < INDEX_SLOTS; k++) {
		e = &index_[(s + k) % INDEX_SLOTS];
		uintptr_t a = e->addr;
		if (!a)
			break;
		if (a == code && e->linetable == linetable && e->qualname == qualname &&
		    e->filename == filename) {
			found = e->idx;
			break;
		}
		e = NULL;
	}
	uint64_t used = py_hdr->py_codes_used;
	if (found == CODE_UNKNOWN && e && used < codes_cap &&
	    backing_get(&codes[used], sizeof codes[used]) == 0) {
		struct ym_pycode *r = &codes[used];
		r->code_addr = code;
		r->first_line = load32(code + L->code_firstlineno);
		copy_str(qualname, r->qualname, sizeof r->qualname);
		copy_str(filename, r->filename, sizeof r->filename);
		__atomic_store_n(&py_hdr->py_codes_used, used + 1, __ATOMIC_RELEASE);
		e->linetable = linetable;
		e->qualname = qualname;
		e->filename = filename;
		e->idx = (uint32_t)used;
		__atomic_store_n(&e->addr, code, __ATOMIC_RELEASE);
		found = (uint32_t)used;
	}
	__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
	return found;
}

/* ---- the line memo ----
 *
 * A line is a linear decode of the code object's location table up to
 * the frame's instruction: in exact mode under a deep interpreter stack
 * that decode, for every frame of every allocation, cost more than the
 * native unwind (BENCHMARKS.md, exact mode on python3).  The memo keeps
 * the answer by code object, table (address and length), first line and
 * instruction: the inputs of table_line, the same objects by address as
 * the code index keys on.  Direct-mapped, shared by the threads; each
 * entry is a seqlock (seq odd while written), so a reader never takes a
 * torn entry: it sees seq change and decodes instead, and a writer that
 * finds the entry taken leaves it. */
#define MEMO_SLOTS 2048u
struct line_memo {
	uint32_t seq;
	uint32_t line;
	uintptr_t code, lt;
	uint64_t key;   /* table length << 32 | instruction */
	int64_t first;
	uint64_t reserved[3];
};
static _Alignas(64) struct line_memo memo[MEMO_SLOTS];

static struct line_memo *memo_slot(uintptr_t code, int64_t at)
{
	uint64_t h = ((code >> 4) ^ (uint64_t)at * 0x9e3779b97f4a7c15ull) *
		     0xc2b2ae3d27d4eb4full;
	return &memo[(h >> 40) % MEMO_SLOTS];
}

/* 1 with *line when the memo holds it. */
static int memo_get(const struct line_memo *m, uintptr_t code, uintptr_t lt,
		    uint64_t key, int64_t first, uint32_t *line)
{
	uint32_t s = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE);
	if (s & 1)
		return 0;
	int hit = __atomic_load_n(&m->code, __ATOMIC_RELAXED) == code &&
		  __atomic_load_n(&m->lt, __ATOMIC_RELAXED) == lt &&
		  __atomic_load_n(&m->key, __ATOMIC_RELAXED) == key &&
		  __atomic_load_n(&m->first, __ATOMIC_RELAXED) == first;
	uint32_t v = __atomic_load_n(&m->line, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (!hit || __atomic_load_n(&m->seq, __ATOMIC_RELAXED) != s)
		return 0;
	*line = v;
	return 1;
}

static void memo_put(struct line_memo *m, uintptr_t code, uintptr_t lt,
		     uint64_t key, int64_t first, uint32_t line)
{
	uint32_t s = __atomic_load_n(&m->seq, __ATOMIC_RELAXED);
	if ((s & 1) || !__atomic_compare_exchange_n(&m->seq, &s, s + 1, 0,
						    __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&m->code, code, __ATOMIC_RELAXED);
	__atomic_store_n(&m->lt, lt, __ATOMIC_RELAXED);
	__atomic_store_n(&m->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&m->first, first, __ATOMIC_RELAXED);
	__atomic_store_n(&m->line, line, __ATOMIC_RELAXED);
	__atomic_store_n(&m->seq, s + 2, __ATOMIC_RELEASE);
}

/* The line of instruction `at` of code (line table lt, n bytes long). */
static uint32_t code_line(uintptr_t code, uintptr_t lt, int64_t n, int64_t at)
{
	if (n <= 0 || n >= (1 << 26))
		return 0;
	int64_t first = (int32_t)load32(code + L->code_firstlineno);
	const uint8_t *p = (const uint8_t *)(lt + BYTES_SVAL);
	if (at < 0 || at > UINT32_MAX)
		return table_line(p, p + n, first, at);
	uint64_t key = (uint64_t)n << 32 | (uint64_t)at;
	struct line_memo *m = memo_slot(code, at);
	uint32_t line;
	if (memo_get(m, code, lt, key, first, &line))
		return line;
	line = table_line(p, p + n, first, at);
	memo_put(m, code, lt, key, first, line);
	return line;
}

/* ---- the walk ---- */

/* Frame word for one complete frame, 0 when the frame is not one (the
 * walk stops). */
static uint64_t frame_word(uintptr_t f, int entry)
{
	uintptr_t code = load(f + L->frame_code);
	if (!code || load(code + OB_TYPE) != code_type)
		return 0;
	uintptr_t qual = load(code + L->code_qualname);
	uintptr_t lt = load(code + L->code_linetable);
	if (!qual || !lt || load(qual + OB_TYPE) != str_type ||
	    load(lt + OB_TYPE) != bytes_type)
		return 0;
	uintptr_t start = code + L->code_adaptive;
	int64_t at = ((int64_t)load(f + L->frame_instr) - (int64_t)start) / 2;
	uint32_t line = code_line(code, lt, (int64_t)load(lt + VAR_SIZE), at);
	uint32_t idx = code_index(code, lt, qual, load(code + L->code_filename));
	if (idx == CODE_UNKNOWN)
		__atomic_fetch_add(&py_hdr->py_drop, 1, __ATOMIC_RELAXED);
	return ym_pyframe(idx, line, entry);
}

/* An incomplete frame (being set up, before its first instruction). */
static int incomplete(uintptr_t f, uint32_t owner)
{
	if (owner == OWNED_BY_GENERATOR)
		return 0;
	uintptr_t code = load(f + L->frame_code);
	if (!code || load(code + OB_TYPE) != code_type)
		return 1;
	int32_t first = (int32_t)load32(code + L->code_firsttraceable);
	return load(f + L->frame_instr) < code + L->code_adaptive + 2u * (uint32_t)first;
}

static uint32_t walk(uint64_t *out, uint32_t max)
{
	uintptr_t ts = (uintptr_t)this_tstate();
	if (!ts)
		return 0;
	uintptr_t holder = L->tstate_cframe < 0 ? ts : load(ts + (uint32_t)L->tstate_cframe);
	if (!holder)
		return 0;
	uintptr_t f = load(holder + L->cframe_frame);
	uint32_t n = 0;
	int group = 0;   /* frames of the current eval call emitted */
	for (uint32_t steps = 0; f && n < max && steps < 4 * MAX_PY; steps++) {
		uint32_t owner = *(const uint8_t *)(f + L->frame_owner);
		uintptr_t prev = load(f + L->frame_previous);
		int entry;
		if (L->frame_is_entry >= 0) {
			entry = *(const uint8_t *)(f + (uint32_t)L->frame_is_entry) != 0;
		} else {
			if (owner == OWNED_BY_CSTACK) {   /* an eval call's shim */
				f = prev;
				continue;
			}
			entry = !prev || *(const uint8_t *)(prev + L->frame_owner) == OWNED_BY_CSTACK;
		}
		if (!incomplete(f, owner)) {
			uint64_t w = frame_word(f, entry);
			if (!w)
				break;
			out[n++] = w;
			group++;
		} else if (entry && group) {
			out[n - 1] |= YM_PYFRAME_ENTRY;
		} else if (entry) {
			out[n++] = ym_pyframe(CODE_NONE, 0, 1);
		}
		if (entry)
			group = 0;
		f = prev;
	}
	return n;
}

uint32_t python_append(uint64_t *frames, uint32_t depth, uint32_t max)
{
	if (likely(!__atomic_load_n(&L, __ATOMIC_ACQUIRE)))
		return depth;
	uint64_t py[MAX_PY];
	uint32_t room = max / 2 > MAX_PY ? MAX_PY : max / 2;
	uint32_t n = walk(py, room);
	if (depth + n > max)
		depth = max - n;
	memcpy(frames + depth, py, n * sizeof py[0]);
	return depth + n;
}
