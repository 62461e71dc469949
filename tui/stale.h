/*
 * stale: segments whose process is gone, kept as a report and removed.
 */
#ifndef YMTOP_STALE_H
#define YMTOP_STALE_H

/* The segments of our pid namespace's /dev/shm whose process is gone
 * (no process has its pid, or one that started at another time; as
 * root also another pid namespace's that no process is in any more: a
 * container that shared our /dev/shm and is gone), that
 * we may remove (ours, any as root) and that were not kept on purpose
 * (YM_KEEP_SEGMENT): each one's final state is written as a text report
 * into stale_dir(), then it is removed, one line on stderr saying so.
 * A process killed by a signal (an OOM kill) leaves nothing else behind;
 * for one that did not exit, the line says whether the kernel log names
 * an OOM kill of it since it started (kmsg.h), or that it is not known
 * and why.
 * At most 64 a call.  Returns how many were removed. */
int stale_sweep(void);

/* Where those reports go: $XDG_STATE_HOME/ymtop, else
 * $HOME/.local/state/ymtop, else /var/tmp/ymtop (made 0700 when
 * missing).  Static storage. */
const char *stale_dir(void);

#endif
