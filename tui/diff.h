/*
 * diff: `ymtop diff OLD NEW`, two reports ymtop wrote (JSON, or pprof
 * profiles: diffpb.h) compared stack by stack (man ymtop(1), DIFF).
 *
 * Stacks are matched by their symbolized frames (each frame's module
 * file name and function, and the stack's kind), never by addresses, so
 * that reports of two runs of one program, or of two builds, line up.
 * Both files are untrusted: bounded in size, parsed by jansson, every
 * field checked; a file that is not a report ymtop can read is refused in
 * one line.
 */
#ifndef YMTOP_DIFF_H
#define YMTOP_DIFF_H

/* The report version ymtop's JSON reports carry ("report_version") and
 * the highest one diff reads. */
#define DIFF_REPORT_VERSION 1

/* What diff reads of one report at most. */
#define DIFF_MAX_FILE   (256u << 20)   /* bytes (of a profile: decompressed) */
#define DIFF_MAX_STACKS (1u << 22)     /* YM_LIMIT_STACKS */
#define DIFF_MAX_FRAMES 4096u          /* frames of a stack, inlined ones too */
#define DIFF_MAX_REFS   (1u << 24)     /* frames of all stacks of a profile */

/* argv[0] is "diff".  Prints the comparison on stdout; returns the exit
 * status: 0, or 2 after one line on stderr for a usage error or a file
 * that is not a readable report. */
int diff_main(int argc, char **argv);

#endif
