/*
 * fmt: numbers as people read them (sizes in KiB/MiB, durations, rates),
 * and string escaping: for terminals and text reports (fmt_vis), JSON and
 * XML.  Pure functions into caller buffers.
 */
#ifndef YMTOP_FMT_H
#define YMTOP_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "512 B", "1.5 KiB", "64.0 MiB", "2.00 GiB" (3 significant digits). */
const char *fmt_bytes(double bytes, char *buf, size_t len);
/* Signed: "+1.5 MiB", "-12 B", "0 B". */
const char *fmt_sbytes(double bytes, char *buf, size_t len);
/* "950", "12.3k", "4.56M", "1.23G". */
const char *fmt_count(double n, char *buf, size_t len);
/* "850ns", "12.5ms", "3.2s", "4m12s", "2h05m", "3d04h". */
const char *fmt_duration(double seconds, char *buf, size_t len);
/* A byte count as a person types it: digits with an optional unit k, K,
 * KiB, m, M, MiB, g, G or GiB (powers of 1024), nothing else.  0 and *out
 * set when the whole string parses and lies in [lo, hi]; -1 otherwise. */
int fmt_parse_bytes(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* Text for XML content or a quoted attribute: &<>"' escaped, control
 * characters and bytes that are not valid UTF-8 replaced by '?'.  NULL
 * prints nothing. */
void fmt_xml_string(FILE *f, const char *s);
/* Text the target supplies (executable path, process and thread names,
 * function, file and module names: a hostile program chooses them all)
 * made safe for a terminal, with libbsd's vis(3) in the C locale
 * (VIS_CSTYLE | VIS_OCTAL, also tab and newline): control characters, DEL,
 * C1 controls (U+0080..U+009F) and bytes that are not valid UTF-8 become C
 * escapes ("\033", "\n", "\t", "\302\233"), a backslash "\\";
 * printable UTF-8 is kept, so names stay readable.  Text without those
 * characters comes out unchanged.  Cut at a whole character to fit len
 * (len > 0); NULL is "".  Returns buf. */
const char *fmt_vis(const char *s, char *buf, size_t len);
/* The room fmt_vis needs for n bytes never to be cut: 4 bytes each
 * ("\ooo"), and the NUL. */
#define FMT_VIS_SIZE(n) (4 * (n) + 1)
/* fmt_vis to a stream, whatever the length. */
void fmt_vis_fputs(FILE *f, const char *s);
/* A JSON string literal, quotes included; NULL prints null. */
void fmt_json_string(FILE *f, const char *s);

#endif
