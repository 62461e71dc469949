/*
 * giant: the alarm ring (giant.h).
 *
 * State, this file's: the threshold the fast paths compare with, and the
 * segment's ALARMS section.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backing.h"
#include "config.h"
#include "giant.h"
#include "modules.h"
#include "sampling.h"
#include "segstate.h"

size_t agent_giant_limit = SIZE_MAX;

static struct ym_header *hdr;
static uint8_t *alarms;
static uint32_t alarm_stride;

void giant_map_segment(uint8_t *base, const struct ym_section *sec)
{
	hdr = (struct ym_header *)base;
	alarms = base + sec[YM_SEC_ALARMS].offset;
	alarm_stride = sec[YM_SEC_ALARMS].stride;
}

void giant_arm(void)
{
	agent_giant_limit = agent_cfg.giant;
}

void giant_fork_child(void)
{
	agent_giant_limit = SIZE_MAX;
}

void agent_giant(struct agent_tls *t, size_t n, int failed)
{
	int saved = errno;
	agent_guard_enter(t);
	/* The first giant request made the segment (agent_need_segment,
	 * enter.h), unless it could not. */
	if (!agent_active())
		goto out;
	uint64_t frames[YM_LIMIT_DEPTH];
	uint32_t depth = agent_capture(frames);
	struct ym_header *h = hdr;
	uint32_t cap = h->sections[YM_SEC_ALARMS].capacity;
	if (backing_get(alarms, (size_t)cap * alarm_stride) != 0)
		goto out;
	uint64_t pos = __atomic_fetch_add(&h->alarms_written, 1, __ATOMIC_ACQ_REL);
	struct ym_alarm *a = (struct ym_alarm *)(alarms +
						 (size_t)(pos % cap) * alarm_stride);
	__atomic_store_n(&a->seq, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	a->size = n;
	a->mono_ns = agent_now_ns();
	a->tid = t->tid ? t->tid : (uint32_t)syscall(SYS_gettid);
	a->flags = failed ? YM_ALARM_FAILED : 0;
	a->depth = depth;
	memcpy(a->frames, frames, depth * sizeof *frames);
	__atomic_store_n(&a->seq, pos + 1, __ATOMIC_RELEASE);
	modules_check(a->mono_ns);
out:
	agent_guard_leave(t);
	errno = saved;
}
