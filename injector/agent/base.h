/*
 * base: what every file of the agent uses.  Visibility, branch hints, the
 * assertions of check builds, and the few things the guest may say or ask
 * of the system without stdio or allocation (base.c; memory: os.h).
 *
 * Guest code (injector/agent/): no stdio, no malloc family, no exit, no
 * output on stdout; every failure degrades to passing calls through.
 * tests/integration/test_agent.py checks the imports of every object.
 */
#ifndef YMTOP_AGENT_BASE_H
#define YMTOP_AGENT_BASE_H

#include <stddef.h>
#include <stdint.h>

#define AGENT_HIDDEN __attribute__((visibility("hidden")))

/* The model of the agent's thread-local variables.  glibc: initial-exec,
 * also when the agent is dlopen'ed (it takes the static TLS surplus), so
 * touching them is one %fs-relative access and never allocates.  musl
 * refuses initial-exec TLS in an object it loads after start-up (ymtop
 * -p); its dlopen gives every thread the new object's block before it
 * returns, so its global-dynamic access (TLSDESC, -mtls-dialect=gnu2 in
 * the Makefile: a call that loads two words) never allocates either.
 * YM_BENCH_MUSL_IE: the musl agent with initial-exec TLS, preloaded only,
 * which make bench compares it with. */
#if defined(__GLIBC__) || defined(YM_BENCH_MUSL_IE)
#define AGENT_TLS_MODEL __attribute__((tls_model("initial-exec")))
#else
#define AGENT_TLS_MODEL __attribute__((tls_model("global-dynamic")))
#endif

/* An interposed entry point (malloc, mmap, execve...): the agent is built
 * with -fvisibility=hidden, so only these are seen by the dynamic linker. */
#define EXPORT __attribute__((visibility("default")))

/* HIDDEN_ALIAS(malloc): hook_malloc, a hidden alias of the exported
 * malloc, declared where its callers see it (hooknames.h): calls and
 * addresses that never go through the agent's own GOT.  gcc warns that
 * the alias lacks the target's attributes (none matters to a caller),
 * hence the pragma. */
#if defined(__GNUC__) && !defined(__clang__)
#define HIDDEN_ALIAS_NOWARN_ _Pragma("GCC diagnostic ignored \"-Wmissing-attributes\"")
#else
#define HIDDEN_ALIAS_NOWARN_
#endif
#define HIDDEN_ALIAS(name)                                                \
	HIDDEN_ALIAS_NOWARN_                                              \
	__typeof__(hook_##name) hook_##name __attribute__((alias(#name)))
#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* YM_ASSERT(cond): checked when YM_ASSERTS is defined (the unit and TSan
 * tests; the agent of a SANITIZER= build), compiled out of release builds,
 * where it costs nothing and evaluates nothing.  A failure is loud: one
 * line on stderr with write(2), then abort() (check builds only: a release
 * agent never stops its host). */
#ifdef YM_ASSERTS
#define YM_ASSERT(cond)                                                   \
	do {                                                              \
		if (unlikely(!(cond)))                                    \
			agent_assert_fail(__FILE__, __LINE__, #cond);     \
	} while (0)
#else
#define YM_ASSERT(cond) do { (void)sizeof(!(cond)); } while (0)
#endif

__attribute__((noreturn, cold))   /* base.c, with YM_ASSERTS only */
void agent_assert_fail(const char *file, int line, const char *cond) AGENT_HIDDEN;

/* One line on stderr, "ymagent: " a b c, with write(2): no stdio, no
 * allocation.  NULL parts are skipped. */
void agent_warn(const char *a, const char *b, const char *c) AGENT_HIDDEN;

/* An errno's text for agent_warn: never strerror (compat.c says why). */
const char *agent_errno_text(int e) AGENT_HIDDEN;

/* v in decimal into buf (at least 21 bytes), NUL-terminated. */
void agent_utoa(uint64_t v, char *buf) AGENT_HIDDEN;

/* The i-th failed try at a spin lock.  Holders stay a few hundred ns:
 * spin well past that before a yield (a system call, dear on a virtual
 * machine). */
void agent_backoff(uint32_t i) AGENT_HIDDEN;

/* Spin budgets: how many tries (agent_backoff between them: 1024 pauses,
 * then one sched_yield a try) a taker of a spin lock makes before it gives
 * up, so that a holder that stopped (a thread stopped by a debugger, a
 * fork child's copy of a lock held in its parent) never hangs the
 * program's calls; each caller degrades when it gives up.
 * AGENT_SPINS_SHORT: a stack's first insert (the sample is dropped and
 * counted in drop_busy).  AGENT_SPINS: the rest, where giving up costs a
 * counted drop, a thread without a slot, or a request taken at the next
 * look.  AGENT_SPINS_LONG: where giving up leaves a figure wrong for a
 * while: a sampled block's removal (a stale live entry), a resized sample
 * that must stay tracked, a reset that must empty every stripe. */
#define AGENT_SPINS_SHORT 20000u
#define AGENT_SPINS       100000u
#define AGENT_SPINS_LONG  1000000u

/* CLOCK_MONOTONIC in ns: agent_now_ns from the time-stamp counter where
 * the kernel keeps time with it (clock.c), agent_mono_ns always from
 * clock_gettime (vDSO: no system call); CLOCK_REALTIME in ns. */
uint64_t agent_now_ns(void) AGENT_HIDDEN;
uint64_t agent_mono_ns(void) AGENT_HIDDEN;
uint64_t agent_real_ns(void) AGENT_HIDDEN;

#endif
