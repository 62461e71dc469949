/* Segment layout, shared by the agent (to create) and tests. */
#include <errno.h>
#include <stdio.h>

#include "shm.h"

static uint64_t align64(uint64_t v)
{
	return (v + 63u) & ~63ULL;
}

uint32_t shm_live_capacity(uint32_t max_live)
{
	uint32_t p = 1;
	while (p < max_live && p < (1u << 31))
		p <<= 1;
	return p;
}

int shm_layout(struct shm_caps *caps, struct ym_section sec[YM_SEC_COUNT],
	       uint64_t *total)
{
	if (caps->max_depth == 0 || caps->max_depth > YM_LIMIT_DEPTH ||
	    caps->max_stacks < 2 || caps->max_stacks > YM_LIMIT_STACKS ||
	    caps->max_live == 0 || caps->max_live > YM_LIMIT_LIVE ||
	    caps->max_threads < 2 || caps->max_threads > YM_LIMIT_THREADS)
		return -EINVAL;
	caps->max_live = shm_live_capacity(caps->max_live);
	/* Stripes of at least 64 entries: a small table is one stripe. */
	uint32_t stripes = caps->max_live / 64;
	if (stripes > YM_LIVE_STRIPES)
		stripes = YM_LIVE_STRIPES;
	if (stripes == 0)
		stripes = 1;

	uint64_t off = YM_HEADER_SIZE;
	const struct {
		uint32_t cap, stride;
	} want[YM_SEC_COUNT] = {
		[YM_SEC_CONTROL] = { 1, sizeof(struct ym_control) },
		[YM_SEC_THREADS] = { caps->max_threads, sizeof(struct ym_thread) },
		[YM_SEC_STACKS]  = { caps->max_stacks, shm_stack_stride(caps->max_depth) },
		[YM_SEC_LIVE]    = { caps->max_live, sizeof(struct ym_live) },
		[YM_SEC_ALARMS]  = { YM_MAX_ALARMS, shm_alarm_stride(caps->max_depth) },
		[YM_SEC_MODULES] = { YM_MAX_MODULES, sizeof(struct ym_module) },
		[YM_SEC_STRIPES] = { stripes, sizeof(struct ym_stripe) },
		[YM_SEC_PLANES]  = { YM_PLANES * caps->max_stacks, sizeof(struct ym_counts) },
	};
	/* In this order (readers follow the offsets): the modules, whose
	 * first entries are written at start, last, so that a segment's
	 * written bytes end a little after they begin, and the stripes next
	 * to the entries they own. */
	static const int order[YM_SEC_COUNT] = {
		YM_SEC_CONTROL, YM_SEC_THREADS, YM_SEC_STACKS, YM_SEC_STRIPES,
		YM_SEC_LIVE, YM_SEC_ALARMS, YM_SEC_PLANES, YM_SEC_MODULES,
	};
	for (int k = 0; k < YM_SEC_COUNT; k++) {
		int i = order[k];
		/* The live table on a page boundary: in exact mode one part
		 * of the stripes uses a page-sized slice of each row of the
		 * pool, which would otherwise touch three pages for two. */
		if (i == YM_SEC_LIVE)
			off = (off + 4095u) & ~4095ULL;
		sec[i].offset = off;
		sec[i].capacity = want[i].cap;
		sec[i].stride = want[i].stride;
		off = align64(off + (uint64_t)want[i].cap * want[i].stride);
	}
	/* Whole pages, so that the reservation covers the last record. */
	*total = (off + 4095u) & ~4095ULL;
	return 0;
}

int shm_layout_pycodes(uint32_t cap, struct ym_section *sec, uint64_t *total)
{
	if (cap > YM_LIMIT_PYCODES)
		return -EINVAL;
	sec->offset = *total;
	sec->capacity = cap;
	sec->stride = sizeof(struct ym_pycode);
	*total = (*total + (uint64_t)cap * sec->stride + 4095u) & ~4095ULL;
	return 0;
}

void shm_layout_trend(uint64_t *total, uint32_t slots, uint32_t stacks,
		      struct ym_section *trend)
{
	*trend = (struct ym_section){ 0, 0, 0 };
	if (slots == 0 || stacks == 0 || slots > YM_LIMIT_TREND_SLOTS ||
	    stacks > YM_LIMIT_TREND_STACKS)
		return;
	trend->offset = *total;
	trend->capacity = slots;
	trend->stride = shm_trend_stride(stacks);
	*total = (*total + (uint64_t)slots * trend->stride + 4095u) & ~4095ULL;
}

/* Append v in decimal at buf[*n], within len (keeping room for the NUL).
 * No stdio: the agent, which links this file, formats nothing with it. */
static void put_dec(char *buf, size_t len, size_t *n, uint64_t v)
{
	char d[20];
	size_t k = 0;
	do
		d[k++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (k > 0 && *n + 1 < len)
		buf[(*n)++] = d[--k];
}

void shm_name(char *buf, size_t len, pid_t pid, uint32_t pidns)
{
	size_t n = 0;
	if (len == 0)
		return;
	for (const char *p = YM_NAME_PREFIX; *p && n + 1 < len; p++)
		buf[n++] = *p;
	put_dec(buf, len, &n, (uint64_t)(pid > 0 ? pid : 0));
	if (pidns != 0 && pidns != YM_PIDNS_INIT) {
		if (n + 1 < len)
			buf[n++] = '.';
		put_dec(buf, len, &n, pidns);
	}
	buf[n] = 0;
}

/* Strict decimal, no sign, no leading zero, at most `max`. */
static const char *parse_dec(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '1' || *p > '9')
		return NULL;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > max)
			return NULL;
	}
	*out = v;
	return p;
}

int shm_parse_name(const char *name, pid_t *pid, uint32_t *pidns)
{
	const char *pre = &YM_NAME_PREFIX[1];
	uint64_t p, ns = 0;
	while (*pre && *name == *pre)
		pre++, name++;
	if (*pre || !(name = parse_dec(name, 0x3fffffff, &p)))
		return -1;
	if (*name == '.' && !(name = parse_dec(name + 1, UINT32_MAX, &ns)))
		return -1;
	if (*name || ns == YM_PIDNS_INIT)
		return -1;   /* the initial namespace's have no suffix */
	*pid = (pid_t)p;
	*pidns = (uint32_t)ns;
	return 0;
}
