/*
 * hooks_py: pymalloc seen as Python sees it (segment.h v9, py_hook).
 *
 * With CPython's default allocator, objects allocated through
 * PyObject_Malloc and PyMem_Malloc (the OBJ and MEM domains) come from
 * pymalloc's pools: the malloc hooks never see them.  A wrapper around
 * each domain's allocator, installed as tracemalloc installs its own
 * (PyMem_SetAllocator, GIL held: a pending call, python.h), samples them
 * by their own size at their own stack, with the malloc family's byte
 * countdown.
 *
 * Once, not twice: pymalloc serves requests of 1 to 512 bytes and forwards
 * every other size to malloc (PyMem_RawMalloc), where the malloc hooks
 * sample it.  So the wrapper samples requests of 1..512 bytes only and
 * passes the others through uncharged (its fast path charges every request;
 * the due path takes back what is not its own: hooks_py.c).  A request it
 * samples is served by the raw domain's allocator (malloc, the malloc hooks
 * passing it through) instead of pymalloc: pymalloc's free and realloc send
 * a block outside their arenas to the raw domain, so its free and realloc
 * reach the free and realloc hooks, which take it out of the sample or
 * carry it.  The wrapper has no free: PyObject_Free and PyMem_Free cost
 * nothing more.  A realloc that is due is the interpreter's, then a move
 * to a sampled block of the raw domain (at most 512 bytes copied); one
 * that is not due moves a sample back to the interpreter's allocator,
 * out of the sample (each realloc draws the block afresh: hooks_py.c,
 * realloc_kept).  The
 * exact per-thread counters count the sampled blocks only (the malloc
 * family's calls, as man/ymagent.7 says); pymalloc objects are in the
 * stacks.
 *
 * pymalloc's arenas (mmap of 1 MiB, 3.11-3.13) are then the allocator's
 * own memory, whose objects are sampled: the arena allocator is wrapped
 * too, and its mappings are made with the agent's guard held, which the
 * mmap hook passes through uncounted.  Arenas mapped before the hook was
 * installed stay in the figures as `[mmap]` stacks (a few MiB at an
 * interpreter's start; the objects allocated in them before are unseen).
 *
 * Not wrapped: a domain whose allocator is the raw domain's
 * (PYTHONMALLOC=malloc: every object reaches malloc, header.py_hook
 * YM_PYHOOK_MALLOC).
 */
#ifndef YMTOP_AGENT_HOOKS_PY_H
#define YMTOP_AGENT_HOOKS_PY_H

#include "base.h"

/* The pending call that installs the wrapper (python.h). */
int pyhook_install(void *arg) AGENT_HIDDEN;

/* For detach: queue the pending call that puts back the interpreter's
 * allocators where the wrapper is still the one installed (a later
 * wrapper, tracemalloc started after the agent, keeps calling it).
 * Returns header.py_hook's value now: YM_PYHOOK_OFF once it ran and
 * nothing calls the wrapper any more; YM_PYHOOK_ON while it is queued or
 * when another wrapper sits on top of it (then the agent's code must stay
 * mapped); NONE, WAITING, PENDING, MALLOC: never installed (a queued
 * installer finds the state changed and does nothing).  Blocks allocated
 * through the wrapper are pymalloc's or malloc's own: the interpreter's
 * free (never wrapped) takes them after the unhook as any other. */
uint32_t pymalloc_unhook(void) AGENT_HIDDEN;

/* 1 when nothing of the interpreter's can reach the agent's code any
 * more: the wrapper is not installed (or removed) and no pending call of
 * the agent's is queued or running.  A detach unmaps the agent only then. */
int pymalloc_unloadable(void) AGENT_HIDDEN;

#endif
