/* detach: see detach.h. */
#include <stdio.h>

#include "detach.h"
#include "ptrace/inject.h"

int detach_target(pid_t pid, char *msg, size_t len)
{
	struct detach_result r;
	char err[512];
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
