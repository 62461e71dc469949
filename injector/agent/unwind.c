/*
 * A frame walker for the calling thread on x86_64 (unwind.h), the way
 * sampling profilers do it: the module of an address from glibc's
 * lock-free _dl_find_object, its FDE by binary search of .eh_frame_hdr,
 * the CFA program run up to the address, and the result (how to find the
 * caller's RIP, RSP and RBP) cached per address in a private table.
 *
 * Guest code: no malloc, no lock, no stdio, no syscall.  The table is
 * static (.bss: pages are backed as they are touched, 256 KiB at most).
 *
 * Over 700 lines on purpose: one concern (CFI decoding, the rule cache
 * and the walk) whose parts share the cache and the inline helpers of the
 * per-frame path; split, each frame would pay calls across files.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "compat.h"
#include "loader.h"
#include "unwind.h"

/* DWARF register numbers on x86_64. */
enum { REG_BP = 6, REG_SP = 7, REG_RA = 16 };

/* How far above its starting SP (or the last signal frame's) a CFA may
 * be: thread stacks are megabytes; a frame beyond is not believed. */
#define CFA_LIMIT (256ull << 20)

/* ---- Rules ---- */

enum { K_STOP = 0, K_CFA_SP, K_CFA_BP, K_SIGNAL };
enum { BP_SAME = 0, BP_SAVED, BP_UNDEF };

/* How to get from a frame (IP, SP, BP) to its caller's. */
struct rule {
	int32_t cfa_off;    /* CFA = SP or BP (kind) + cfa_off */
	int32_t ra_off;     /* return address at CFA + ra_off */
	int32_t bp_off;     /* caller's RBP at CFA + bp_off (bp == BP_SAVED) */
	uint8_t kind;       /* K_* */
	uint8_t bp;         /* BP_* */
};

/* ---- The cache: 2^SET_LOG sets of two slots, one 64-byte line a set.
 * A slot is a seqlock: one writer at a time (a writer that finds it odd
 * gives up), readers copy and then check that seq did not move.  Slots
 * carry the generation they were filled in; unwind_flush moves it. */

#define SET_LOG 12

struct slot {
	uint32_t seq;
	uint32_t gen;
	uint64_t key;       /* ip << 1 | exact */
	uint64_t w0, w1;    /* struct rule, packed */
};

static struct slot cache[2u << SET_LOG] __attribute__((aligned(64)));
static uint32_t cache_gen = 1;   /* slots never filled have gen 0 */

/* Return addresses differ in their low bits: a shift and a xor spread
 * them (a multiply cost 0.3-0.5 ns a frame, on the chain of loads). */
static inline struct slot *cache_set(uint64_t key)
{
	return &cache[((key ^ key >> SET_LOG) & ((1u << SET_LOG) - 1)) * 2];
}

static inline void rule_unpack(uint64_t w0, uint64_t w1, struct rule *r)
{
	r->cfa_off = (int32_t)(uint32_t)w0;
	r->ra_off = (int32_t)(uint32_t)(w0 >> 32);
	r->bp_off = (int32_t)(uint32_t)w1;
	r->kind = (uint8_t)(w1 >> 32);
	r->bp = (uint8_t)(w1 >> 40);
}

static inline int cache_get(uint64_t key, uint32_t gen, struct rule *r)
{
	struct slot *s = cache_set(key);
	for (int i = 0; i < 2; i++, s++) {
		uint32_t q = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&s->key, __ATOMIC_RELAXED) != key ||
		    __atomic_load_n(&s->gen, __ATOMIC_RELAXED) != gen)
			continue;
		uint64_t w0 = __atomic_load_n(&s->w0, __ATOMIC_RELAXED);
		uint64_t w1 = __atomic_load_n(&s->w1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if ((q & 1) || __atomic_load_n(&s->seq, __ATOMIC_RELAXED) != q)
			continue;
		rule_unpack(w0, w1, r);
		return 1;
	}
	return 0;
}

static void cache_put(uint64_t key, uint32_t gen, const struct rule *r)
{
	struct slot *set = cache_set(key), *s = set;
	/* A stale or empty slot first, else the one the key's bit picks. */
	if (__atomic_load_n(&set[0].gen, __ATOMIC_RELAXED) == gen)
		s = __atomic_load_n(&set[1].gen, __ATOMIC_RELAXED) == gen ?
			&set[(key >> 4) & 1] : &set[1];
	uint32_t q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	if ((q & 1) || !__atomic_compare_exchange_n(&s->seq, &q, q + 1, 0,
						    __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&s->gen, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&s->w0, (uint64_t)(uint32_t)r->cfa_off |
			 (uint64_t)(uint32_t)r->ra_off << 32, __ATOMIC_RELAXED);
	__atomic_store_n(&s->w1, (uint64_t)(uint32_t)r->bp_off |
			 (uint64_t)r->kind << 32 | (uint64_t)r->bp << 40,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 2, __ATOMIC_RELEASE);
}

void unwind_flush(void)
{
	uint32_t g = __atomic_add_fetch(&cache_gen, 1, __ATOMIC_ACQ_REL);
	if (g == 0)   /* 0 marks never-filled slots */
		__atomic_add_fetch(&cache_gen, 1, __ATOMIC_ACQ_REL);
}

/* Flush, then publish the count: a thread that sees the new count knows
 * the flush is done. */
void unwind_sync(unsigned long long subs)
{
	static unsigned long long seen;
	if (subs == __atomic_load_n(&seen, __ATOMIC_ACQUIRE))
		return;
	unwind_flush();
	__atomic_store_n(&seen, subs, __ATOMIC_RELEASE);
}

/* ---- Reading .eh_frame (bounded by the entry's length) ---- */

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_fixed(struct rd *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = 1;
		return 0;
	}
	uint64_t v = 0;
	memcpy(&v, r->p, n);   /* little-endian */
	r->p += n;
	return v;
}

static uint8_t rd_u8(struct rd *r)
{
	return (uint8_t)rd_fixed(r, 1);
}

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	for (unsigned shift = 0; !r->bad; shift += 7) {
		if (r->p >= r->end || shift > 63) {
			r->bad = 1;
			break;
		}
		uint8_t b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t rd_sleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0;
	do {
		if (r->bad || r->p >= r->end || shift > 63) {
			r->bad = 1;
			return 0;
		}
		b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return (int64_t)v;
}

/* DW_EH_PE pointer encodings. */
#define PE_OMIT     0xff
#define PE_ABSPTR   0x00
#define PE_ULEB     0x01
#define PE_UDATA2   0x02
#define PE_UDATA4   0x03
#define PE_UDATA8   0x04
#define PE_SLEB     0x09
#define PE_SDATA2   0x0a
#define PE_SDATA4   0x0b
#define PE_SDATA8   0x0c
#define PE_PCREL    0x10
#define PE_DATAREL  0x30
#define PE_INDIRECT 0x80

/* An encoded pointer: absptr, udata/sdata 2/4/8, (s/u)leb; plain, pcrel
 * or datarel (base dbase); indirect ones are dereferenced only when deref
 * is set (a personality routine's is skipped, never read). */
static uint64_t rd_enc(struct rd *r, uint8_t enc, uintptr_t dbase, int deref)
{
	const uint8_t *at = r->p;
	uint64_t v;
	if (enc == PE_OMIT) {
		r->bad = 1;
		return 0;
	}
	switch (enc & 0x0f) {
	case PE_ABSPTR: case PE_UDATA8: case PE_SDATA8: v = rd_fixed(r, 8); break;
	case PE_ULEB:   v = rd_uleb(r); break;
	case PE_SLEB:   v = (uint64_t)rd_sleb(r); break;
	case PE_UDATA2: v = rd_fixed(r, 2); break;
	case PE_UDATA4: v = rd_fixed(r, 4); break;
	case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2); break;
	case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4); break;
	default: r->bad = 1; return 0;
	}
	switch (enc & 0x70) {
	case 0: break;
	case PE_PCREL: v += (uintptr_t)at; break;
	case PE_DATAREL:
		if (!dbase)
			r->bad = 1;
		v += dbase;
		break;
	default: r->bad = 1; return 0;
	}
	if ((enc & PE_INDIRECT) && deref && !r->bad) {
		if (!v || (v & 7)) {
			r->bad = 1;
			return 0;
		}
		v = *(const uint64_t *)(uintptr_t)v;
	}
	return v;
}

/* ---- The CFA program ---- */

/* Wrapping arithmetic on untrusted values (no signed overflow). */
static inline int64_t wmul(uint64_t a, int64_t b)
{
	return (int64_t)(a * (uint64_t)b);
}

static inline int64_t wadd(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}


enum { H_SAME = 0, H_UNDEF, H_OFFSET, H_BAD };

struct reg_rule {
	uint8_t how;        /* H_* */
	int64_t off;        /* H_OFFSET: saved at CFA + off */
};

struct row {
	uint32_t cfa_reg;   /* REG_SP, REG_BP, or anything else: not followed */
	int64_t cfa_off;
	struct reg_rule bp, ra;
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	int has_z, signal;
	const uint8_t *ins, *end;
};

/* A CFA expression, evaluated for this one address as a + b * RSP (RIP is
 * known): enough for the linker's .plt entries, "RSP + 8 + ((RIP & 15) >=
 * 11 ? 8 : 0)".  0 and *off set when it comes out RSP + constant. */
static int cfa_expr(const uint8_t *p, uint64_t len, uint64_t ip, int64_t *off)
{
	struct { int64_t a, b; } st[8];
	int n = 0;
	struct rd r = { p, p + len, 0 };
	while (r.p < r.end && !r.bad) {
		uint8_t op = rd_u8(&r);
		int64_t a = 0, b = 0;
		if (op >= 0x30 && op <= 0x4f) {          /* DW_OP_lit<n> */
			a = op - 0x30;
		} else if (op >= 0x70 && op <= 0x8f) {   /* DW_OP_breg<n> */
			int64_t o = rd_sleb(&r);
			if (op - 0x70 == REG_SP) {
				a = o;
				b = 1;
			} else if (op - 0x70 == REG_RA) {
				a = wadd((int64_t)ip, o);
			} else {
				return -1;
			}
		} else if (op == 0x92) {                  /* DW_OP_bregx */
			uint64_t reg = rd_uleb(&r);
			int64_t o = rd_sleb(&r);
			if (reg == REG_SP) {
				a = o;
				b = 1;
			} else if (reg == REG_RA) {
				a = wadd((int64_t)ip, o);
			} else {
				return -1;
			}
		} else if (op == 0x08 || op == 0x09 || op == 0x0a || op == 0x0b ||
			   op == 0x0c || op == 0x0d || op == 0x10 || op == 0x11) {
			switch (op) {                     /* DW_OP_const* */
			case 0x08: a = (int64_t)rd_fixed(&r, 1); break;
			case 0x09: a = (int8_t)rd_fixed(&r, 1); break;
			case 0x0a: a = (int64_t)rd_fixed(&r, 2); break;
			case 0x0b: a = (int16_t)rd_fixed(&r, 2); break;
			case 0x0c: a = (int64_t)rd_fixed(&r, 4); break;
			case 0x0d: a = (int32_t)rd_fixed(&r, 4); break;
			case 0x10: a = (int64_t)rd_uleb(&r); break;
			default:   a = rd_sleb(&r); break;
			}
		} else if (op == 0x96) {                  /* DW_OP_nop */
			continue;
		} else if (op == 0x23) {                  /* DW_OP_plus_uconst */
			if (n < 1)
				return -1;
			st[n - 1].a = wadd(st[n - 1].a, (int64_t)rd_uleb(&r));
			continue;
		} else {
			/* Binary operators: pop y, then x; push x op y. */
			if (n < 2)
				return -1;
			int64_t xa = st[n - 2].a, xb = st[n - 2].b;
			int64_t ya = st[n - 1].a, yb = st[n - 1].b;
			n -= 2;
			if (op == 0x22) {                 /* plus */
				a = wadd(xa, ya);
				b = wadd(xb, yb);
			} else if (op == 0x1c) {          /* minus */
				a = wadd(xa, (int64_t)(0 - (uint64_t)ya));
				b = wadd(xb, (int64_t)(0 - (uint64_t)yb));
			} else {
				if (xb || yb)             /* not linear in RSP */
					return -1;
				switch (op) {
				case 0x1a: a = xa & ya; break;              /* and */
				case 0x21: a = xa | ya; break;              /* or */
				case 0x27: a = xa ^ ya; break;              /* xor */
				case 0x1e: a = (int64_t)((uint64_t)xa * (uint64_t)ya); break;
				case 0x24: if (ya < 0 || ya > 63) return -1;
					   a = (int64_t)((uint64_t)xa << ya); break;  /* shl */
				case 0x25: if (ya < 0 || ya > 63) return -1;
					   a = (int64_t)((uint64_t)xa >> ya); break;  /* shr */
				case 0x29: a = xa == ya; break;
				case 0x2a: a = xa >= ya; break;
				case 0x2b: a = xa > ya; break;
				case 0x2c: a = xa <= ya; break;
				case 0x2d: a = xa < ya; break;
				case 0x2e: a = xa != ya; break;
				default: return -1;
				}
			}
		}
		if (n == 8)
			return -1;
		st[n].a = a;
		st[n].b = b;
		n++;
	}
	if (r.bad || n < 1 || st[n - 1].b != 1)
		return -1;
	*off = st[n - 1].a;
	return 0;
}

#define STATE_DEPTH 16

static void set_reg(struct row *row, uint64_t reg, uint8_t how, int64_t off)
{
	struct reg_rule *rr = reg == REG_BP ? &row->bp : reg == REG_RA ? &row->ra : NULL;
	if (rr) {
		rr->how = how;
		rr->off = off;
	}
}

/* Run CFA instructions [p, end) while the row's location is <= pc.
 * init: the row after the CIE's instructions (DW_CFA_restore), NULL while
 * running those.  0, or -1 on an instruction it cannot follow. */
static int run_cfa(const uint8_t *p, const uint8_t *end, const struct cie *c,
		   uint64_t loc, uint64_t pc, uint64_t ip, struct row *row,
		   const struct row *init)
{
	struct row stack[STATE_DEPTH];
	int depth = 0;
	struct rd r = { p, end, 0 };
	while (r.p < r.end && !r.bad) {
		uint8_t op = rd_u8(&r);
		uint64_t reg, delta = 0, newloc;
		int64_t off;
		switch (op & 0xc0) {
		case 0x40:    /* DW_CFA_advance_loc */
			delta = op & 0x3f;
			goto advance;
		case 0x80:    /* DW_CFA_offset */
			off = wmul(rd_uleb(&r), c->data_align);
			set_reg(row, op & 0x3f, H_OFFSET, off);
			continue;
		case 0xc0:    /* DW_CFA_restore */
			reg = op & 0x3f;
			goto restore;
		}
		switch (op) {
		case 0x00:    /* nop */
			continue;
		case 0x01:    /* set_loc */
			newloc = rd_enc(&r, c->fde_enc, 0, 0);
			if (r.bad)
				return -1;
			if (newloc > pc)
				return 0;
			loc = newloc;
			continue;
		case 0x02: delta = rd_fixed(&r, 1); goto advance;
		case 0x03: delta = rd_fixed(&r, 2); goto advance;
		case 0x04: delta = rd_fixed(&r, 4); goto advance;
		case 0x05:    /* offset_extended */
			reg = rd_uleb(&r);
			off = wmul(rd_uleb(&r), c->data_align);
			set_reg(row, reg, H_OFFSET, off);
			continue;
		case 0x06:    /* restore_extended */
			reg = rd_uleb(&r);
			goto restore;
		case 0x07:    /* undefined */
			set_reg(row, rd_uleb(&r), H_UNDEF, 0);
			continue;
		case 0x08:    /* same_value */
			set_reg(row, rd_uleb(&r), H_SAME, 0);
			continue;
		case 0x09: {  /* register */
			reg = rd_uleb(&r);
			uint64_t reg2 = rd_uleb(&r);
			set_reg(row, reg, reg == reg2 ? H_SAME : H_BAD, 0);
			continue;
		}
		case 0x0a:    /* remember_state */
			if (depth == STATE_DEPTH)
				return -1;
			stack[depth++] = *row;
			continue;
		case 0x0b:    /* restore_state */
			if (depth == 0)
				return -1;
			*row = stack[--depth];
			continue;
		case 0x0c:    /* def_cfa */
			row->cfa_reg = (uint32_t)rd_uleb(&r);
			row->cfa_off = (int64_t)rd_uleb(&r);
			continue;
		case 0x0d:    /* def_cfa_register */
			reg = rd_uleb(&r);
			if (row->cfa_reg == REG_SP || row->cfa_reg == REG_BP)
				row->cfa_reg = (uint32_t)reg;   /* else stays unfollowable */
			continue;
		case 0x0e:    /* def_cfa_offset */
			row->cfa_off = (int64_t)rd_uleb(&r);
			continue;
		case 0x0f: {  /* def_cfa_expression */
			uint64_t len = rd_uleb(&r);
			if (r.bad || len > (uint64_t)(r.end - r.p))
				return -1;
			if (cfa_expr(r.p, len, ip, &off) == 0) {
				row->cfa_reg = REG_SP;
				row->cfa_off = off;
			} else {
				row->cfa_reg = UINT32_MAX;
			}
			r.p += len;
			continue;
		}
		case 0x10:    /* expression */
		case 0x16: {  /* val_expression */
			reg = rd_uleb(&r);
			uint64_t len = rd_uleb(&r);
			if (r.bad || len > (uint64_t)(r.end - r.p))
				return -1;
			r.p += len;
			set_reg(row, reg, H_BAD, 0);
			continue;
		}
		case 0x11:    /* offset_extended_sf */
			reg = rd_uleb(&r);
			off = wmul((uint64_t)rd_sleb(&r), c->data_align);
			set_reg(row, reg, H_OFFSET, off);
			continue;
		case 0x12:    /* def_cfa_sf */
			row->cfa_reg = (uint32_t)rd_uleb(&r);
			row->cfa_off = wmul((uint64_t)rd_sleb(&r), c->data_align);
			continue;
		case 0x13:    /* def_cfa_offset_sf */
			row->cfa_off = wmul((uint64_t)rd_sleb(&r), c->data_align);
			continue;
		case 0x14:    /* val_offset */
			reg = rd_uleb(&r);
			(void)rd_uleb(&r);
			set_reg(row, reg, H_BAD, 0);
			continue;
		case 0x15:    /* val_offset_sf */
			reg = rd_uleb(&r);
			(void)rd_sleb(&r);
			set_reg(row, reg, H_BAD, 0);
			continue;
		case 0x2e:    /* GNU_args_size */
			(void)rd_uleb(&r);
			continue;
		case 0x2f:    /* GNU_negative_offset_extended */
			reg = rd_uleb(&r);
			off = wmul(0 - rd_uleb(&r), c->data_align);
			set_reg(row, reg, H_OFFSET, off);
			continue;
		default:
			return -1;
		}
advance:
		newloc = loc + delta * c->code_align;
		if (newloc > pc || newloc < loc)
			return 0;
		loc = newloc;
		continue;
restore:
		if (!init)
			return -1;
		if (reg == REG_BP)
			row->bp = init->bp;
		else if (reg == REG_RA)
			row->ra = init->ra;
		continue;
	}
	return r.bad ? -1 : 0;
}

/* An .eh_frame entry's extent: [*body, *end) after the length field. */
static int entry_span(const uint8_t *e, const uint8_t **body, const uint8_t **end)
{
	uint32_t len32;
	memcpy(&len32, e, 4);
	uint64_t len = len32;
	e += 4;
	if (len32 == 0xffffffff) {
		memcpy(&len, e, 8);
		e += 8;
	}
	if (len < 4 || len > (1u << 24))
		return -1;
	*body = e;
	*end = e + len;
	return 0;
}

static int parse_cie(const uint8_t *e, struct cie *c)
{
	const uint8_t *body, *end;
	if (entry_span(e, &body, &end) != 0)
		return -1;
	struct rd r = { body, end, 0 };
	if (rd_fixed(&r, 4) != 0)   /* CIE id */
		return -1;
	uint8_t version = rd_u8(&r);
	if (version != 1 && version != 3)
		return -1;
	const char *aug = (const char *)r.p;
	while (r.p < r.end && *r.p)
		r.p++;
	if (r.p >= r.end)
		return -1;
	r.p++;
	memset(c, 0, sizeof *c);
	c->code_align = rd_uleb(&r);
	c->data_align = rd_sleb(&r);
	uint64_t ra = version == 1 ? rd_u8(&r) : rd_uleb(&r);
	if (r.bad || ra != REG_RA)
		return -1;
	c->fde_enc = PE_ABSPTR;
	if (aug[0] == 'z') {
		uint64_t alen = rd_uleb(&r);
		if (r.bad || alen > (uint64_t)(r.end - r.p))
			return -1;
		struct rd a = { r.p, r.p + alen, 0 };
		c->has_z = 1;
		for (const char *k = aug + 1; *k && !a.bad; k++) {
			if (*k == 'R') {
				c->fde_enc = rd_u8(&a);
			} else if (*k == 'L') {
				(void)rd_u8(&a);
			} else if (*k == 'P') {
				uint8_t pe = rd_u8(&a);
				(void)rd_enc(&a, pe, 0, 0);
			} else if (*k == 'S') {
				c->signal = 1;
			} else if (*k != 'B' && *k != 'G') {
				break;   /* unknown: the length skips the rest */
			}
		}
		if (a.bad)
			return -1;
		r.p += alen;
	} else if (aug[0]) {
		return -1;
	}
	c->ins = r.p;
	c->end = end;
	return 0;
}

/* __restore_rt: mov $15, %rax; syscall (rt_sigreturn). */
static const uint8_t sigreturn_code[9] = {
	0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05
};

/* The offsets of RBP, RSP and RIP in the ucontext_t the kernel puts at the
 * handler's return address (struct rt_sigframe after its pretcode):
 * uc_flags, uc_link, uc_stack (40 bytes), then the general registers
 * r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip. */
#define UC_RBP 120
#define UC_RSP 160
#define UC_RIP 168
#define UC_END 176

/* The rule for ip (exact: ip is the current instruction, else a return
 * address).  1 cacheable (K_STOP included), 0 not: ip is outside every
 * loaded module. */
static int decode(uint64_t ip, int exact, struct rule *out)
{
	uint64_t pc = ip - !exact;
	struct agent_object fo;
	memset(out, 0, sizeof *out);
	out->kind = K_STOP;
	if (agent_find_object((const void *)(uintptr_t)pc, &fo) != 0)
		return 0;
	const uint8_t *hdr = fo.eh_frame;
	if (!hdr || hdr[0] != 1)
		return 1;
	/* .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc,
	 * table_enc, eh_frame_ptr, fde_count, then the table sorted by
	 * initial location: pairs of datarel sdata4 from hdr. */
	struct rd r = { hdr + 4, hdr + 4 + 16, 0 };
	(void)rd_enc(&r, hdr[1], (uintptr_t)hdr, 0);
	uint64_t count = rd_enc(&r, hdr[2], (uintptr_t)hdr, 0);
	if (r.bad || hdr[3] != (PE_DATAREL | PE_SDATA4) || count == 0 ||
	    count > (1u << 26))
		return 1;
	const uint8_t *tab = r.p;
	uint64_t lo = 0, hi = count;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		int32_t v;
		memcpy(&v, tab + mid * 8, 4);
		if ((uintptr_t)hdr + (int64_t)v <= pc)
			lo = mid;
		else
			hi = mid;
	}
	int32_t start_rel, fde_rel;
	memcpy(&start_rel, tab + lo * 8, 4);
	memcpy(&fde_rel, tab + lo * 8 + 4, 4);
	if ((uintptr_t)hdr + (int64_t)start_rel > pc)
		return 1;
	const uint8_t *fde = hdr + fde_rel, *body, *end;
	if (entry_span(fde, &body, &end) != 0)
		return 1;
	uint32_t cie_rel;
	memcpy(&cie_rel, body, 4);
	struct cie c;
	if (cie_rel == 0 || parse_cie(body - cie_rel, &c) != 0)
		return 1;
	r = (struct rd){ body + 4, end, 0 };
	uint64_t begin = rd_enc(&r, c.fde_enc, 0, 1);
	uint64_t range = rd_enc(&r, c.fde_enc & 0x0f, 0, 0);
	if (c.has_z) {
		uint64_t alen = rd_uleb(&r);
		if (!r.bad && alen <= (uint64_t)(r.end - r.p))
			r.p += alen;
		else
			r.bad = 1;
	}
	if (r.bad || pc < begin || pc - begin >= range)
		return 1;
	if (c.signal) {
		/* A signal trampoline: glibc's __restore_rt (its FDE starts
		 * at the nop before it).  The handler returns to its first
		 * byte; a nested signal may interrupt it there or at its
		 * syscall.  The bytes read lie in the FDE's range. */
		uint64_t at = ip;
		if (exact && ip - begin >= 7 && ip + 2 <= begin + range &&
		    memcmp((const void *)(uintptr_t)(ip - 7), sigreturn_code,
			   sizeof sigreturn_code) == 0)
			at = ip - 7;
		if (at + sizeof sigreturn_code <= begin + range &&
		    memcmp((const void *)(uintptr_t)at, sigreturn_code,
			   sizeof sigreturn_code) == 0) {
			out->kind = K_SIGNAL;
			return 1;
		}
		return 1;
	}
	struct row init = { .cfa_reg = UINT32_MAX, .bp = { H_SAME, 0 },
			    .ra = { H_SAME, 0 } };
	if (run_cfa(c.ins, c.end, &c, begin, UINT64_MAX, ip, &init, NULL) != 0)
		return 1;
	struct row row = init;
	if (run_cfa(r.p, end, &c, begin, pc, ip, &row, &init) != 0)
		return 1;
	if ((row.cfa_reg != REG_SP && row.cfa_reg != REG_BP) ||
	    row.cfa_off < INT32_MIN || row.cfa_off > INT32_MAX ||
	    row.ra.how != H_OFFSET || row.ra.off < INT32_MIN || row.ra.off > INT32_MAX)
		return 1;   /* RA undefined: the outermost frame */
	out->cfa_off = (int32_t)row.cfa_off;
	out->ra_off = (int32_t)row.ra.off;
	out->kind = row.cfa_reg == REG_SP ? K_CFA_SP : K_CFA_BP;
	if (row.bp.how == H_SAME) {
		out->bp = BP_SAME;
	} else if (row.bp.how == H_OFFSET && row.bp.off >= INT32_MIN &&
		   row.bp.off <= INT32_MAX) {
		out->bp = BP_SAVED;
		out->bp_off = (int32_t)row.bp.off;
	} else {
		out->bp = BP_UNDEF;
	}
	return 1;
}

/* A load the checks above allowed. */
static inline uint64_t load(uint64_t a)
{
	return *(const volatile uint64_t *)(uintptr_t)a;
}

__attribute__((noinline)) int unwind_backtrace(uint64_t *frames, int max)
{
	uint64_t ip, sp, bp;
	/* Where we are now: the CFI at this instruction describes this frame. */
	__asm__ volatile("lea 0(%%rip), %0\n\t"
			 "mov %%rsp, %1\n\t"
			 "mov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	uint32_t gen = __atomic_load_n(&cache_gen, __ATOMIC_ACQUIRE);
	uint64_t base = sp;
	int exact = 1, n = 0;
	while (n < max) {
		struct rule r;
		uint64_t key = ip << 1 | (uint64_t)exact;
		if (!cache_get(key, gen, &r)) {
			if (!decode(ip, exact, &r))
				break;
			cache_put(key, gen, &r);
		}
		uint64_t nip, nsp, nbp;
		if (r.kind == K_CFA_SP || r.kind == K_CFA_BP) {
			if (r.kind == K_CFA_BP && bp < sp)
				break;
			uint64_t cfa = (r.kind == K_CFA_SP ? sp : bp) + (uint64_t)(int64_t)r.cfa_off;
			if (cfa <= sp || (cfa & 7) || cfa - base >= CFA_LIMIT)
				break;
			uint64_t at = cfa + (uint64_t)(int64_t)r.ra_off;
			if (at < sp || at > cfa - 8)
				break;
			nip = load(at);
			nbp = bp;
			if (r.bp == BP_SAVED) {
				at = cfa + (uint64_t)(int64_t)r.bp_off;
				if (at > cfa - 8)
					break;
				/* A slot below SP: an epilogue interrupted after
				 * its pop or leave (the CFI still names the slot
				 * until the ret), so RBP already holds the
				 * caller's value; never read below SP. */
				if (at >= sp)
					nbp = load(at);
			} else if (r.bp == BP_UNDEF) {
				nbp = 0;
			}
			nsp = cfa;
			exact = 0;
		} else if (r.kind == K_SIGNAL) {
			/* SP is where the handler returned to: the ucontext. */
			if ((sp & 7) || sp - base >= CFA_LIMIT - UC_END)
				break;
			nip = load(sp + UC_RIP);
			nsp = load(sp + UC_RSP);
			nbp = load(sp + UC_RBP);
			if (!nsp || (nsp & 7))
				break;
			base = nsp;   /* maybe another stack (sigaltstack) */
			exact = 1;
		} else {
			break;
		}
		if (nip < 4096)
			break;
		frames[n++] = nip;
		ip = nip;
		sp = nsp;
		bp = nbp;
	}
	return n;
}
