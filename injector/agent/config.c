/*
 * config: YM_* environment variables, parsed strictly (config.h).  A bad
 * value is said once on stderr and replaced by the default.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "ymtop/segment.h"

struct agent_config agent_cfg;
int agent_injected;
int agent_slots;

/* Strict unsigned parse with an optional k/m/g binary suffix. */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	unsigned shift = 0;
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	}
	if (*p == 'i' && shift)
		p++;
	if ((*p == 'b' || *p == 'B') && shift)
		p++;
	if (*p != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = v << shift;
	return 0;
}

static uint64_t env_num(const char *name, uint64_t def, uint64_t lo,
			uint64_t hi)
{
	const char *s = getenv(name);
	uint64_t v;
	if (!s || !*s)
		return def;
	if (parse_size(s, &v) == 0 && v >= lo && v <= hi)
		return v;
	char d[21];
	agent_utoa(def, d);
	agent_warn(name, " is not a valid value (see ymagent(7)); using ", d);
	return def;
}

/* A percentage of up to 100 with up to 4 decimals ("5", "0.5", "2.5%")
 * in millionths, at least 1; -1 when it is none. */
static int64_t parse_percent(const char *s)
{
	int64_t v = 0;
	int digits = 0, decimals = -1;
	for (; *s; s++) {
		if (*s >= '0' && *s <= '9') {
			if (decimals >= 4 || v > 100000000)
				return -1;
			v = v * 10 + (*s - '0');
			digits++;
			if (decimals >= 0)
				decimals++;
		} else if (*s == '.' && decimals < 0) {
			decimals = 0;
		} else if (*s == '%' && s[1] == '\0') {
			break;
		} else {
			return -1;
		}
	}
	if (!digits)
		return -1;
	for (int d = decimals < 0 ? 0 : decimals; d < 4; d++)
		v *= 10;
	return v >= 1 && v <= 1000000 ? v : -1;
}

static uint32_t env_budget(int exact)
{
	const char *s = getenv("YM_MAX_OVERHEAD");
	if (!s || !*s)
		return 0;
	int64_t v = parse_percent(s);
	if (v < 0) {
		agent_warn("YM_MAX_OVERHEAD", " must be a percentage above 0 and "
			   "up to 100 (see ymagent(7)); ", "no budget");
		return 0;
	}
	if (exact) {
		agent_warn("YM_MAX_OVERHEAD", " has no effect with YM_SAMPLE_RATE=1 "
			   "(exact mode records every call): ", "no budget");
		return 0;
	}
	return (uint32_t)v;
}

static int env_bool(const char *name, int def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "true"))
		return 1;
	if (!strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "false"))
		return 0;
	agent_warn(name, " must be 0 or 1; using ", def ? "1" : "0");
	return def;
}

void agent_configure(void)
{
	struct agent_config *c = &agent_cfg;
	if (c->configured)
		return;
	c->configured = 1;
	c->disabled = env_bool("YM_DISABLE", 0);
	c->rate = env_num("YM_SAMPLE_RATE", YM_DEFAULT_SAMPLE_RATE, 1, 1ULL << 40);
	c->max_depth = (uint32_t)env_num("YM_MAX_DEPTH", YM_DEFAULT_MAX_DEPTH,
					 1, YM_LIMIT_DEPTH);
	/* The segment holds one more record: the overflow stack. */
	c->max_stacks = (uint32_t)env_num("YM_MAX_STACKS",
					  YM_DEFAULT_MAX_STACKS, 16,
					  YM_LIMIT_STACKS - 1);
	c->max_live = (uint32_t)env_num("YM_MAX_LIVE",
					c->rate == 1 ? YM_DEFAULT_MAX_LIVE_EXACT
						     : YM_DEFAULT_MAX_LIVE,
					64, YM_LIMIT_LIVE);
	c->max_threads = (uint32_t)env_num("YM_MAX_THREADS",
					   YM_DEFAULT_MAX_THREADS, 16,
					   YM_LIMIT_THREADS);
	c->giant = env_num("YM_GIANT_BYTES", YM_DEFAULT_GIANT_BYTES, 1,
			   UINT64_MAX);
	const char *act = getenv("YM_GIANT_ACTION");
	c->giant_fail = 0;
	if (act && *act) {
		if (!strcmp(act, "fail"))
			c->giant_fail = 1;
		else if (strcmp(act, "report") != 0)
			agent_warn("YM_GIANT_ACTION",
				   " must be report or fail; using ", "report");
	}
	c->follow_fork = env_bool("YM_FOLLOW_FORK", 1);
	c->seed = env_num("YM_SEED", 0, 0, UINT64_MAX);
	c->keep_segment = env_bool("YM_KEEP_SEGMENT", 0);
	c->early_segment = env_bool("YM_EARLY_SEGMENT", 0);
	c->budget_ppm = env_budget(c->rate <= 1);	c->pymalloc = env_bool("YM_PYMALLOC", 1);
	c->trend_slot_ms = env_num("YM_TREND_SLOT_MS",
				   YM_TREND_SLOT_NS / 1000000u, 0, 3600000);
}
