/*
 * detach: the agent leaves the process (detach.c has the steps and the
 * unload rule); exported: ymagent_detach, ymagent_unload_handle,
 * ymagent_release
 * (include/ymtop/detach.h).
 */
#ifndef YMTOP_AGENT_DETACH_H
#define YMTOP_AGENT_DETACH_H

#include "base.h"

/* 1 once ymagent_detach ran. */
int  detach_done(void) AGENT_HIDDEN;
/* The destructor of a detached agent: its memory unmapped when ymtop
 * released it (ymagent_release, right before dlclose), else nothing. */
void detach_unload(void) AGENT_HIDDEN;

#endif
