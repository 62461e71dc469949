/*
 * got: the hooks installed by rewriting GOT slots and data words (got.c):
 * injected, or preloaded behind another object's malloc (agent_slots).
 */
#ifndef YMTOP_GOT_H
#define YMTOP_GOT_H

#include "base.h"

/* Take the real functions (sym_global: what the slots hold) before any
 * patch.  0 when malloc and free were found. */
int  got_init(void) AGENT_HIDDEN;
/* Rewrite the slots of every object of the base namespace but ours, ld.so
 * and the vDSO; idempotent, serialized, preserves errno. */
void got_patch_all(void) AGENT_HIDDEN;
/* The same, unless a patch is running (then it will see the objects). */
void got_patch_try(void) AGENT_HIDDEN;
/* Detach: every slot and data word holding a hook (or its trampoline
 * entry) gets the real function back, the trampoline's entries jump to
 * the real functions, and nothing is patched again.  1 when no pointer
 * into the agent remains (tramp_complete), 0 when one may. */
int  got_unpatch_all(void) AGENT_HIDDEN;

#endif
