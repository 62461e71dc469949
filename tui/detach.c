/* detach: see detach.h. */
#include <stdio.h>

#include "detach.h"
#include "ptrace/inject.h"
#include "ptrace/procfs.h"

int detach_target(pid_t pid, char *msg, size_t len)
{
	struct detach_result r;
	char err[512];
	struct tmaps m;
	if (inject_read_maps(pid, &m) == 0 && !m.has_agent) {
		snprintf(msg, len, "process %ld has no agent to detach (never "
			 "attached, or detached before)", (long)pid);
		return 1;
	}
	if (inject_detach(pid, &r, err, sizeof err) != 0) {
		snprintf(msg, len, "cannot detach from process %ld: %s", (long)pid, err);
		return -1;
	}
	if (r.unloaded)
		snprintf(msg, len, "process %ld: agent detached and unloaded (no "
			 "agent code or memory left in the process)", (long)pid);
	else
		snprintf(msg, len, "process %ld: agent detached (sampling off, "
			 "segment removed) but left loaded and dormant: %s", (long)pid,
			 r.why);
	return 0;
}
