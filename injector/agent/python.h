/*
 * python: the allocating thread's CPython frames, read on the sampled
 * path (segment.h, "v8: Python frames").
 *
 * State, this file's: the interpreter's layout (chosen once, when the
 * segment is made, from the process's Py_Version), the segment's py_codes
 * section and header.py_* fields (their one writer), and a private index
 * of the code objects already copied there.
 *
 * The walk reads the calling thread's own frame chain: its thread state
 * from the gilstate key (PyGILState_GetThisThreadState: a TSS read, no
 * lock, no allocation, valid without the GIL; _PyThreadState_GET would be
 * the GIL holder's), then tstate->cframe->current_frame (3.11, 3.12) or
 * tstate->current_frame (3.13), each frame's code object and instruction
 * pointer, following `previous`.  Only loads: no call into the
 * interpreter but that one, nothing allocated.  The thread is inside an
 * allocator call, so its own frames do not change under the walk; every
 * code object is checked to be one (its type is PyCode_Type, its names
 * str and its line table bytes) before anything is read through it, and
 * the walk stops at the first frame that fails.
 *
 * Layouts are per minor version, derived from the headers of the builds
 * (3.11: Debian's python3.11-dev and pyenv's 3.11.7 agree; 3.12.1;
 * 3.13.0) and checked when the segment is made against the interpreter's
 * own objects: PyCode_Type's tp_basicsize, and for 3.13 the offsets the
 * interpreter publishes in _Py_DebugOffsets.  Another version, or a
 * failed check, is recorded in header.py_state and py_version: ymtop says
 * which and why, and the stacks keep their native frames only.
 */
#ifndef YMTOP_AGENT_PYTHON_H
#define YMTOP_AGENT_PYTHON_H

#include <stdint.h>

#include "base.h"
#include "ymtop/segment.h"

/* Find the interpreter (the loaded objects' dynamic symbols: no dlsym),
 * choose and check its layout, and take the segment's py_codes section:
 * called once a segment (seg.c, where the loader's list may be walked). */
void python_map_segment(uint8_t *base, struct ym_header *h) AGENT_HIDDEN;

/* Append the calling thread's Python frames (segment.h's YM_PYFRAME
 * words, innermost first) to frames[0..depth), which holds its native
 * return addresses; the total stays within max: outer native frames give
 * way to Python ones, at most half of max.  Returns the new depth.
 * Cost without an interpreter: one load; with one, a TSS read and about
 * ten loads a frame plus the line table's scan up to the instruction. */
uint32_t python_append(uint64_t *frames, uint32_t depth, uint32_t max) AGENT_HIDDEN;

/* ---- v9: the pymalloc hook's trigger (hooks_py.h has the wrapper) ----
 *
 * When the frames are read (a known interpreter) and it has the
 * allocator API, the hook waits (YM_PYHOOK_WAITING) for the interpreter
 * to be initialised (Py_IsInitialized: one load); the first sample after
 * that at which the thread looks at the control block (python_poll, on
 * the sampled path where it may call out, at most once a millisecond a
 * thread: sampling.c; also when a segment is made, which is how `ymtop
 * -p` queues it at once) queues
 * the registered installer with Py_AddPendingCall, which takes no GIL and
 * only the pending-call queue's own lock, held by nothing that allocates
 * (3.11 a PyThread lock, 3.12 the same, 3.13 a PyMutex), and the
 * interpreter's main thread runs it with the GIL held at its next check
 * of the eval loop's pending calls.  header.py_hook says which. */
struct python_mem {
	void (*get)(int domain, void *allocator);    /* PyMem_GetAllocator */
	void (*set)(int domain, void *allocator);    /* PyMem_SetAllocator */
	void (*get_arena)(void *allocator);          /* PyObject_GetArenaAllocator */
	void (*set_arena)(void *allocator);          /* PyObject_SetArenaAllocator */
	/* _PyMem_GetCurrentAllocatorName: "pymalloc_debug" and the like,
	 * NULL for allocators it does not know (tracemalloc's); NULL when
	 * the interpreter has none. */
	const char *(*name)(void);
};
extern struct python_mem python_mem AGENT_HIDDEN;

/* The pending call that installs the wrapper (life.c registers
 * hooks_py.c's, before any segment). */
void python_hook_register(int (*install)(void *)) AGENT_HIDDEN;
/* The hook's state (YM_PYHOOK_*), kept and written to the header. */
void python_hook_set(uint32_t state) AGENT_HIDDEN;
uint32_t python_hook_state(void) AGENT_HIDDEN;
/* from -> to if the state is from (1), else 0. */
int python_hook_cas(uint32_t from, uint32_t to) AGENT_HIDDEN;
/* Queue fn as a pending call of the interpreter: 0, or -1.  fn calls
 * python_pending_done as it returns; python_pending_outstanding counts
 * those queued and not yet returned (each holds a pointer into the
 * agent's code). */
int python_pending(int (*fn)(void *)) AGENT_HIDDEN;
void python_pending_done(void) AGENT_HIDDEN;
uint32_t python_pending_outstanding(void) AGENT_HIDDEN;
/* Queue the installer if the interpreter is waiting for it and is
 * initialised now.  Cost otherwise: one load. */
void python_poll(void) AGENT_HIDDEN;

#endif
