/*
 * session: one watched process, shared by the screen (screen/ui.c) and
 * batch mode (batch.c).  It owns the segment's reader, the model and the
 * symbolizer, and is the one place that runs the sequence
 *
 *   segment --shm_snapshot_take--> snapshot (a validated copy)
 *   /proc   --proc.h-------------> facts (alive, name, uptime, thread names)
 *   snapshot + facts --model_update_facts--> model (pure data)
 *   model's module list --sym_set_modules--> symbolizer (when it grew)
 *
 * after which the screen draws and the report writers write from the model
 * and the symbolizer.  The model reads no /proc: the session does, here.
 */
#ifndef YMTOP_SESSION_H
#define YMTOP_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "options.h"
#include "model/model.h"
#include "shm.h"
#include "sym/sym.h"
#include "cgmem.h"
#include "resident.h"
#include "unseen.h"
#include "util/err.h"

struct session {
	struct shm_reader reader;   /* owned; the view uses it for control */
	struct model      model;    /* owned; views and reports read it */
	struct sym       *sym;      /* owned */
	uint32_t known_modules;     /* modules the symbolizer has */
	/* Scratch for the facts' thread names, one per thread slot. */
	char   (*names)[MODEL_THREAD_NAME];
	uint32_t nnames;
	double symbol_wait_s;       /* what reports may still wait for symbols */
	/* The allocator's statistics (model_heap_current): the request made
	 * for the last snapshot and when, whether the caller made it
	 * (session_ask_heap, after the snapshot), when a thread may next be
	 * borrowed, and why the last borrow failed ("" it did not). */
	uint64_t heap_asked;
	double   heap_asked_at;
	int      asked_ahead;
	/* Set by the caller: refreshes leave asking for the figures to
	 * session_refresh_heap (the fleet asks all its processes at once);
	 * heap_pending: this refresh left them to it. */
	int      defer_heap;
	int      heap_pending;
	double   borrow_next;
	int      no_borrow;         /* this refresh borrows no thread */
	char     borrow_err[256];
	struct unseen unseen;       /* allocators the agent cannot see */
	struct resident resident;   /* the live samples' pages */
	int      no_cgroup;         /* refreshes leave the cgroup unread (the
				       fleet: one cgroup, many processes) */
	/* Snapshots taken, and of those the ones whose stacks were not
	 * copied again: the segment said they had not changed
	 * (shm_snapshot_take_since). */
	uint64_t snapshots, stacks_kept;
	int      prefetched;        /* session_symbols saw the model's frames */
	/* The fleet's sessions (the host list, the server) show no memory
	 * breakdown nor threads: a refresh reads the process's stat and
	 * status, not its smaps_rollup nor its threads' names, and its maps
	 * (has it exec'd away from the agent?) only when its stat moved
	 * (mapped size, name) or SESSION_MAPS_S after the last read.  The
	 * last reads: */
	int      lean;
	struct proc_info lean_proc;  /* pid 0: none yet */
	/* Lean, and keep_proc set (the fleet, while descriptors last): the
	 * process's stat and status stay open between refreshes. */
	int      keep_proc;
	struct proc_files proc_files;
	char     lean_name[64], name_comm[64];   /* the name, of that comm */
	double   maps_at;
	uint64_t maps_vsize;
	char     maps_comm[64];
};

/* How long a refresh waits for the agent's answer to its request for the
 * allocator's statistics (a process that allocates answers at its next
 * call), and how often a process that makes no call at all may have one
 * of its threads borrowed to take them (inject_heapstats). */
#define SESSION_HEAP_WAIT_S    0.05
/* How long a refresh waits for a process whose memory is gone to be a
 * zombie, whose exit status says how it ended: 100 steps of 5 ms. */
#define SESSION_ZOMBIE_TRIES   100
#define SESSION_ZOMBIE_STEP_NS 5000000L
#define SESSION_BORROW_MIN_S   1.0
#define SESSION_BORROW_RETRY_S 30.0
#define SESSION_MAPS_S         5.0

/* Attach to pid (target_attach: the process's segment, injecting the agent
 * when it has none, or a segment kept after its exit), ask for o->rate
 * (--rate: one line on stderr says so), start the symbolizer and an empty
 * model.  0, or -1 with the reason and the remedy in e (nothing left
 * open).  s must not move until session_close: views keep pointers into
 * it. */
int session_open(struct session *s, const struct options *o, pid_t pid,
		 struct ym_err *e);

/* The same for a segment already open (target_open: the exporter, which
 * must not exit when one process fails): s takes r over.  0, or -1 when
 * the symbolizer cannot start (r is then still the caller's). */
int session_adopt(struct session *s, const struct shm_reader *r);

/* Take a snapshot (without the live table when skip_live, see
 * shm_reader.skip_live), read what /proc says of the process, update the
 * model and give the symbolizer the modules that are new.  When the
 * snapshot's allocator figures are not current (model_heap_current), ask
 * for them (unless asked_ahead) and wait up to SESSION_HEAP_WAIT_S for
 * the answer; after an unanswered request (the process made no allocator
 * call since) they are taken through a borrowed thread (inject_heapstats; not more often than
 * SESSION_BORROW_MIN_S, SESSION_BORROW_RETRY_S after a refusal;
 * YM_NO_BORROW set: never).  0; or
 * SESSION_EREAD (the segment could not be read or failed validation) or
 * SESSION_ENOMEM, with one line in err; the model then keeps its last
 * snapshot. */
#define SESSION_EREAD  (-1)
#define SESSION_ENOMEM (-2)
int session_refresh(struct session *s, int skip_live, char *err, size_t errlen);
/* The refreshes take from the model's snapshot what did not change in
 * the segment since (shm_snapshot_take_since): a process whose counters
 * did not move costs no copy of its stacks, and no new look at their
 * frames (session_symbols). */

/* With defer_heap set, session_refresh neither asks nor waits: when the
 * snapshot's figures are not current and asking may get them it sets
 * heap_pending and leaves them, and the unseen allocators' figures that
 * depend on them, to session_refresh_heap (nothing when not pending).
 * A caller that watches many processes refreshes them all, asks the
 * pending ones (session_ask_heap, then asked_ahead set), waits once
 * (session_heap_answered), and calls session_refresh_heap for each,
 * which copies the answer in, or borrows a thread as session_refresh
 * would; meanwhile the model's figures are the snapshot's, their age
 * shown.  A process whose snapshot shows current figures costs no
 * read of its segment beyond its snapshot's. */
void session_refresh_heap(struct session *s);

/* Ask for the allocator's statistics now (one request, no wait): 1 when
 * asked. */
int session_ask_heap(struct session *s);
/* The agent answered the last request (header.heap.answered). */
int session_heap_answered(struct session *s);

/* Sleep up to secs, waking early on a signal (stop_asked) or when the
 * process is gone: the agent marked it exited, its pid went to another
 * process, or it exec'd a program without the agent. */
void session_wait(struct session *s, double secs);

/* Before a report: start the debuginfod lookups (sym.h) of the modules
 * in the model's stacks and alarms, wait while they run, and take in what
 * arrived.  All waits of a run add up to at most SESSION_SYMBOL_WAIT_S
 * (a report is delayed by no more, whatever the servers do); a signal
 * (stop_asked) ends the wait at once.  progress: one line on stderr when
 * it waits. */
#define SESSION_SYMBOL_WAIT_S 10.0
void session_symbols(struct session *s, int progress);

void session_close(struct session *s);

#endif
